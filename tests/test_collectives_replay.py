"""Every collective of nccl-tests through the whole ReFrame path without a
GPU: CollectiveSweep runs the replay stand-in under the name of each
binary (tests/replay/bin/<collective>_perf), which replays the outputs of
that collective captured on 2x H200 (tests/fixtures/device/cap/coll-*);
sanity, transport proof and the per-collective references of
reference/local.yaml give the verdicts."""

import os
import subprocess
import sys

import pytest

from ccl_health.evidence.collectives import SWEPT
from conftest import REPO
from helpers import replay
from helpers.replay import verdict_lines

pytest.importorskip('reframe')

SWEEP = os.path.join(REPO, 'checks', 'collective_sweep.py')



def run_suite(tmp_path, *reframe_args, env=None):
    """helpers.replay.run_suite with the check file named (``--checks``):
    CollectiveSweep is not tagged 'nightly' (its docstring says why), which
    the main command selects when no check file is given."""
    # the sizes the replayed captures hold (1 KiB to 256 MiB, x8): every
    # size asked for must be in the output
    sizes = ('-S', 'min_size=1K', '-S', 'max_size=256M', '-S',
             'step_factor=8')
    return replay.run_suite(tmp_path, *sizes, *reframe_args, env=env,
                            checks=SWEEP)


# every collective the suite sweeps but all_reduce (CollectiveSweep's)
OTHERS = tuple(c for c in SWEPT if c != 'all_reduce')


def by_collective(report):
    return {tc['collective']: tc for tc in report['runs'][-1]['testcases']
            if not tc['fixture']}


def test_every_collective_passes_against_its_reference(tmp_path):
    p, report, _ = run_suite(tmp_path, '-n',
                             'CollectiveSweep%transport=intra')
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert '6 passed, 0 failed, 0 skipped' in p.stdout
    lines = [ln for key, ln in verdict_lines(p.stdout).items()
             if key.endswith(' intra')]
    assert len(lines) == 6 and all('PASS' in ln for ln in lines)
    assert {ln.split()[0] for ln in lines} == set(OTHERS)
    # every line checked the three reference sizes (4M, 32M, 256M)
    assert all('3 sizes within reference' in ln for ln in lines), lines
    tc = by_collective(report)
    assert sorted(tc) == sorted(OTHERS)
    for coll, case in tc.items():
        assert case['result'] == 'pass', (coll, case.get('fail_reason'))
        assert case['proven_transport'] == 'intra'
        assert case['collective'] == coll and case['algo'] == 'default'
        perf = case['perfvalues']
        key = 'local:gpu:busbw_256MiB'
        # measured value, reference, lower bound -10%
        assert perf[key][1] > 0 and perf[key][2] == -0.1, (coll, perf[key])
    # the busbw nccl-tests reported, factor included (2 ranks):
    # all_gather (n-1)/n = 0.5 of algbw, broadcast 1
    assert tc['all_gather']['perfvalues']['local:gpu:busbw_256MiB'][0] == \
        pytest.approx(255.89, abs=0.01)
    assert tc['broadcast']['perfvalues']['local:gpu:busbw_256MiB'][0] == \
        pytest.approx(360.78, abs=0.01)


def test_each_collective_has_its_own_reference(tmp_path):
    # all_gather's outputs judged as alltoall: below alltoall's reference at
    # 4 MiB (79.92 vs 98.94) and 256 MiB (255.89 vs 285.33)
    p, report, _ = run_suite(
        tmp_path, '-n', 'CollectiveSweep%transport=intra%collective=alltoall',
        env={'CCL_HEALTH_REPLAY_INTRA': 'coll-all_gather'})
    assert p.returncode == 1
    line = verdict_lines(p.stdout)['alltoall intra']
    assert 'BELOW-REFERENCE' in line
    assert '4MiB 79.92 vs 98.94' in line and '256MiB 255.89 vs 285.33' in \
        line
    assert '32MiB' not in line            # 195.42 vs 206.93: within -10%


def _listed(mode):
    """{(check, frozenset of parameter values)} that ReFrame lists for
    ``--mode <mode>`` over checks/collective_sweep.py."""
    env = dict(os.environ, CCL_HEALTH_ASSUME_GPUS='2:sm_90',
               CCL_HEALTH_LAUNCHER='local')
    exe = os.path.join(os.path.dirname(sys.executable), 'reframe')
    p = subprocess.run([exe, '-C', os.path.join(REPO, 'config', 'settings.py'),
                        '-c', SWEEP, '--mode', mode, '-l'], env=env, cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    out = set()
    for ln in p.stdout.splitlines():
        if ln.startswith('- '):
            words = ln[2:].split()
            out.add((words[0], frozenset(w.split('=', 1)[1] for w in words
                                         if w.startswith('%'))))
    return out


def test_nightly_runs_all_reduce_and_the_collectives_mode_the_others():
    """The product's choice (checks/collective_sweep.py, CollectiveSweep's
    docstring): the nightly run sweeps all_reduce over every transport; the
    other collectives run in the 'collectives' mode (after a software
    change), every one over every transport."""
    from ccl_health.sitedata.transports import NAMES as TRANSPORTS
    from ccl_health.rfm.base import PLUGIN_TRANSPORTS
    nightly = _listed('nightly')
    assert nightly == {
        ('AllReducePluginSweep' if t in PLUGIN_TRANSPORTS else
         'AllReduceSweep', frozenset([t, 'all_reduce', 'default']))
        for t in TRANSPORTS}
    others = _listed('collectives')
    assert len(others) == len(OTHERS) * len(TRANSPORTS)
    for t in TRANSPORTS:
        for coll in OTHERS:
            assert any(t in vals and coll in vals for _, vals in others), \
                (t, coll)
    assert {name for name, _ in others} == {'CollectiveSweep',
                                            'CollectivePluginSweep'}
