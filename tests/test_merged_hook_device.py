"""The merged hook on one H100 (tests/fixtures/device/merged-hook): node
state and copy matrix together, from a clean copy.  What it printed is
what the hook's contract says: one line per run, its exit status matching
the verdict, the cause first when another process held the GPU."""

import json
import os

import pytest

from ccl_health.judge.verdicts import Verdict, exit_code
from conftest import REPO

HERE = os.path.join(REPO, 'tests', 'fixtures', 'device', 'merged-hook')


def runs():
    out = {}
    with open(os.path.join(HERE, 'merged-hook.txt')) as fp:
        for line in fp:
            name, status, wall, text = line.rstrip('\n').split('\t')
            out[name] = (int(status.split()[1]), float(wall.split()[0]),
                         text)
    return out


def detail(name):
    with open(os.path.join(HERE, 'merged', f'{name}.json')) as fp:
        return json.load(fp)


@pytest.mark.parametrize('name', ['idle-1', 'idle-2', 'idle-3',
                                  'idle-after'])
def test_idle_node_is_healthy_on_positive_evidence(name):
    status, wall, text = runs()[name]
    d = detail(name)
    assert status == 0 and text.startswith('HEALTHY: ')
    assert d['verdict'] == 'pass' and d['node_state']['causes'] == []
    assert d['node_state']['before']['gpus'] and \
        d['node_state']['after']['gpus']
    assert wall < 3 and d['node_state']['seconds'] < 0.5


@pytest.mark.parametrize('name,gib', [('busy', '1.4 GiB'),
                                      ('memhold', '56.5 GiB')])
def test_foreign_process_is_named_first_and_drains(name, gib):
    status, _, text = runs()[name]
    d = detail(name)
    assert d['verdict'] == Verdict.CONTENDED.value
    assert status == exit_code([Verdict.CONTENDED]) == 1
    pid = d['node_state']['causes'][0]
    assert pid['kind'] == 'foreign-process'
    assert text.startswith('UNHEALTHY: GPU 0 in use by pid ')
    assert f'(python3, {gib}; leftover process on an idle node: drain)' \
        in text
    # the pid named is the one NVML listed, not ours
    procs = [p for g in d['node_state']['after']['gpus']
             for p in g['processes'] if not p['ours']]
    assert str(procs[0]['pid']) in text.split(':')[1]
