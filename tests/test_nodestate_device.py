"""The node state on what a real H100 answered (tests/fixtures/device/
nodestate, README there): the NVML readers replayed from the recorded
answers, the causes of each state, the sampler files of real sweeps (alone,
with a busy process, with a memory holder, two runs at once) and their
`contended` verdicts, the hook's cause-first lines, the reader's time."""

import json
import os
import re

import pytest

from ccl_health.judge.verdicts import IN_BASELINE
from ccl_health.judge import history
from ccl_health.evidence import nodestate
from ccl_health.db import store
from ccl_health.evidence.nodestate import nvml
from ccl_health.evidence.nodestate.nodedata import NodeState
from ccl_health.evidence.nodestate.__main__ import read_watch
from ccl_health.evidence.nodestate.diagnose import contention, diagnose
from conftest import REPO

F = os.path.join(REPO, 'tests', 'fixtures', 'device', 'nodestate')


def pids(call):
    with open(os.path.join(F, call, 'logs', 'pids.txt')) as fp:
        return dict(line.split(' pid ') for line in fp.read().splitlines())


def recording(call, name):
    with open(os.path.join(F, call, f'{name}.json')) as fp:
        return json.load(fp)


@pytest.mark.parametrize('call', ['sweeps', 'hook'])
def test_recorded_nvml_answers_replay_to_the_recorded_state(call):
    for name in ('idle', 'busy', 'memhold', 'after'):
        doc = recording(call, name)
        for i, reading in enumerate(doc['readings']):
            state = nodestate.read(nvml=nvml.RecordedNvml(doc, i))
            assert state.gpus == NodeState.from_dict(reading['state']).gpus
            g = state.gpus[0]
            assert g.model == 'NVIDIA H100 80GB HBM3'
            assert g.memory_total == 85520809984
            # single H100 without NVLink peers, rows remapped not retired:
            # "not supported", nothing unread, no cause from them
            assert g.unsupported == ['retired_pages', 'nvlink']
            assert g.unread == {}
            assert g.row_remap == {'correctable': 0, 'uncorrectable': 0,
                                   'pending': False, 'failure': False}
            assert (g.pcie_width, g.pcie_width_max) == (16, 16)
            # the reader's own time on the device
            assert reading['seconds'] < 0.5


@pytest.mark.parametrize('call', ['sweeps', 'hook'])
def test_causes_of_each_recorded_state(call):
    who = pids(call)

    def causes(name):
        doc = recording(call, name)
        s = nodestate.read(nvml=nvml.RecordedNvml(doc))
        return [c.text for c in diagnose(s, s, expected_model='H100',
                                         expected_count=1)]
    assert causes('idle') == []
    assert causes('after') == []
    assert causes('busy') == [
        f'GPU 0 in use by pid {who["busy"]} (python3, 1.4 GiB)']
    assert causes('memhold') == [
        f'GPU 0 in use by pid {who["hold"]} (python3, 56.5 GiB)']


def test_the_busy_gpu_reads_busy_and_the_idle_one_idle():
    busy = nodestate.read(nvml=nvml.RecordedNvml(recording('sweeps',
                                                           'busy')))
    idle = nodestate.read(nvml=nvml.RecordedNvml(recording('sweeps',
                                                           'idle')))
    assert busy.gpus[0].utilization == 100
    assert idle.gpus[0].utilization == 0 and idle.gpus[0].processes == []


def test_reader_time_on_the_device():
    for call in ('sweeps', 'hook'):
        with open(os.path.join(F, call, 'logs', 'reader-timing.txt')) as fp:
            text = fp.read()
        full = float(re.search(r'full reading.*max ([\d.]+) s', text)[1])
        light = float(re.search(r'light reading.*max ([\d.]+) s', text)[1])
        assert full < 0.5 and light < 0.05


def watch(name):
    return read_watch(os.path.join(F, 'sweeps', f'stage-{name}',
                                   'ccl-health-nodestate.jsonl'))


def all_states(w):
    return [w.get('before'), *w['samples'], w.get('after')]


def test_sampler_of_a_sweep_alone_sees_only_its_own_ranks():
    w = watch('alone')
    assert w['before'] and w['after'] and len(w['samples']) >= 10
    procs = {(p.pid, p.name, p.ours) for s in all_states(w)
             for g in s.gpus for p in g.processes}
    assert len(procs) == 2 and all(
        name == 'all_reduce_perf' and ours for _, name, ours in procs)
    assert contention(all_states(w)) is None


def test_sampler_names_the_process_that_shared_the_gpu():
    who = pids('sweeps')
    c = contention(all_states(watch('busy')))
    assert c.text == f'GPU 0 in use by pid {who["busy"]} (python3, 1.4 GiB)'
    c = contention(all_states(watch('memhold')))
    assert c.text == f'GPU 0 in use by pid {who["hold"]} (python3, 56.5 GiB)'


def test_two_runs_at_once_see_each_others_ranks():
    a, b = all_states(watch('twoA')), all_states(watch('twoB'))

    def ranks(states, ours):
        return {p.pid for s in states for g in s.gpus for p in g.processes
                if p.ours == ours}
    # what one run calls its own, the other calls foreign, and back
    assert ranks(a, True) == ranks(b, False) and len(ranks(a, True)) == 2
    assert ranks(b, True) == ranks(a, False) and len(ranks(b, True)) == 2
    assert contention(a).text.endswith('(all_reduce_perf, 1.6 GiB) and 1 '
                                       'more')


def test_job_script_starts_and_stops_the_sampler():
    """Today's sampler lines of a job script (ccl_health.rfm.base) are the
    ones that sampled on the device, but for the interpreter, the tree and
    the sampler's module (the package was split by flow since): the module
    they name now runs the sampler."""
    import subprocess
    import sys
    from types import SimpleNamespace
    from ccl_health.rfm.base import PlacedTest
    with open(os.path.join(F, 'sweeps', 'stage-busy', 'rfm_job.sh')) as fp:
        script = fp.read().splitlines()
    run_id = next(ln.split('=', 1)[1] for ln in script
                  if ln.startswith('export CCL_HEALTH_RUN_ID='))
    start, stop = PlacedTest.node_state_cmds(SimpleNamespace(run_id=run_id))
    launch = next(i for i, ln in enumerate(script) if 'all_reduce_perf' in ln)
    pattern = re.compile(r'^PYTHONPATH=\S+\$\{PYTHONPATH:\+:\$PYTHONPATH\} '
                         r'\S+ -m (\S+) ')

    def sampler(line):
        """(the module, the line without the interpreter and tree)"""
        m = pattern.match(line)
        return (m.group(1), line[m.end():]) if m else (None, line)
    device = script[launch - len(start):launch]
    assert [sampler(ln)[1] for ln in device] == \
        [sampler(ln)[1] for ln in start]
    assert script[launch + 3:launch + 3 + len(stop)] == stop
    assert sampler(device[0])[0] == 'ccl_health.nodestate'
    module = sampler(start[0])[0]
    p = subprocess.run([sys.executable, '-m', module, '--help'], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and '--watch' in p.stdout, p.stderr


def test_sweep_verdicts_and_history_on_the_device_database():
    who = pids('sweeps')
    with store.open_store(os.path.join(F, 'sweeps', 'sweeps.db'),
                          readonly=True) as db:
        cases = db.cases()
        records = db.records()
    verdicts = [c['verdict'] for c in cases]
    # alone: measured (this setup's socket rate is below the 2x H200
    # reference); every shared run: contended, the cause first
    assert verdicts == ['below-reference'] + ['contended'] * 4
    reasons = [c['reason'] for c in cases[1:]]
    assert reasons[0].startswith(
        f'contended: GPU 0 in use by pid {who["busy"]} (python3, 1.4 GiB) '
        f'while the sweep ran; measured: below-reference: 1MiB')
    assert reasons[1].startswith(
        f'contended: GPU 0 in use by pid {who["hold"]} (python3, 56.5 GiB)')
    assert all('(all_reduce_perf, 1.6 GiB) and 1 more while the sweep ran'
               in r for r in reasons[2:])
    # (this database was written before the store kept the node state
    # through the run report's later update of each case: that is
    # tests/test_nodestate.py::test_store_keeps_the_node_state)
    # contended runs never weigh on the baseline
    base = [r for r in records if r['case_verdict'] in IN_BASELINE]
    assert {r['run_id'] for r in base} == {cases[0]['run_id']}


@pytest.mark.parametrize('name, code, first', [
    ('idle', 0, None),
    ('busy', 1, 'GPU 0 in use by pid {busy} (python3, 1.4 GiB; leftover '
                'process on an idle node: drain)'),
    ('memhold', 1, 'GPU 0 in use by pid {hold} (python3, 56.5 GiB; '
                   'leftover process on an idle node: drain)')])
def test_hook_lines_on_the_device(name, code, first):
    from ccl_health.judge import nodejudge
    who = pids('hook')
    with open(os.path.join(F, 'hook', f'hook-{name}.json')) as fp:
        d = json.load(fp)
    with open(os.path.join(F, 'hook', 'logs', f'hook-{name}.txt')) as fp:
        printed = fp.read().splitlines()
    assert printed[1] == d['line'] and printed[2] == f'exit {code}'
    assert d['code'] == code
    probes = ('all_reduce 1GiB on 2 GPUs 330.4 GB/s (reference 330.6) on '
              'local:gpu')
    if first is None:
        assert d['line'].startswith(f'HEALTHY: {probes}')
        assert d['node_state']['causes'] == []
    else:
        first = first.format(busy=who['busy'], hold=who['hold'])
        assert d['line'].startswith(f'UNHEALTHY: {first}: although the '
                                    f'probes passed: {probes}')
        assert d['verdict'] == 'contended'
    ns = d['node_state']
    assert ns['not_checked'] == {} and ns['before']['xids'] == []
    assert ns['seconds'] < 0.5           # before + after, in the hook
    # the line follows from the recorded readings with today's code
    before = NodeState.from_dict(ns['before'])
    after = NodeState.from_dict(ns['after'])
    causes = diagnose(before, after)
    assert [nodejudge.cause_text(c) for c in causes[:1]] == (
        [first] if first else [])


def test_explain_names_the_cause_of_a_shared_run():
    from ccl_health import explain
    who = pids('sweeps')
    stage = os.path.join(F, 'sweeps', 'stage-busy')
    doc = explain.explain([os.path.join(stage, 'rfm_job.out'),
                           os.path.join(stage, 'ccl-health-nodestate.jsonl')],
                          transport_asked='net-socket', exit_status=0)
    assert doc['verdict'] == 'contended' and doc['exit_code'] == 1
    assert doc['reason'].startswith(
        f'contended: GPU 0 in use by pid {who["busy"]} (python3, 1.4 GiB) '
        f'while the run ran; measured: ')
    assert doc['node_state']['causes'] == [
        f'GPU 0 in use by pid {who["busy"]} (python3, 1.4 GiB)']
    assert 'node       ' in explain.render(doc)
    alone = os.path.join(F, 'sweeps', 'stage-alone')
    doc = explain.explain([os.path.join(alone, 'rfm_job.out'),
                           os.path.join(alone, 'ccl-health-nodestate.jsonl')],
                          transport_asked='net-socket', exit_status=0)
    assert doc['verdict'] != 'contended'
    assert doc['node_state']['causes'] == []
