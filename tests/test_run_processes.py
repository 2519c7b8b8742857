"""The run's own processes are never contention (issue 40): a rank is the
run's when its pid is one the run printed, when it descends from the run's
root process (the job script a sweep's sampler runs in, the hook's own
process), or when its environment carries the run's id; and a pid a
reading found ours stays ours in every reading of that run.  The process
table is a stand-in under ``CCL_HEALTH_PROC`` whose ``stat`` lines are
built from this host's own ``/proc/self/stat`` (``pid (comm) state ppid
...``), with names holding spaces and parentheses as ``comm`` may."""

import json
import os
import types

import pytest

from ccl_health.evidence import nodestate
from ccl_health.evidence.nodestate import nvml
from ccl_health.evidence.nodestate.diagnose import contention, diagnose
from ccl_health.evidence.nodestate.nodedata import (GIB, GpuState,
                                                    NodeState, Process)
from helpers.hostile import NVML_BASE

RUN = 'r-2026-11-28'
#: the root of the process table the readers take (docs/hook.md)
PROC_VAR = 'CCL_HEALTH_PROC'


def stat_line(pid, comm, ppid, state='S'):
    """A ``/proc/<pid>/stat`` line in this host's format: the fields after
    the name are this process's own, but for the state and the parent."""
    with open('/proc/self/stat') as fp:
        real = fp.read()
    rest = real[real.rindex(')') + 2:].split(' ')
    rest[0], rest[1] = state, str(ppid)
    return f'{pid} ({comm}) ' + ' '.join(rest)


def proc_table(root, procs):
    """``procs``: ``{pid: (comm, ppid, state, environ entries or None)}``;
    None: an environment that reads empty (a process exiting)."""
    for pid, (comm, ppid, state, env) in procs.items():
        d = root / str(pid)
        d.mkdir(parents=True)
        (d / 'stat').write_text(stat_line(pid, comm, ppid, state))
        (d / 'comm').write_text(comm + '\n')
        (d / 'environ').write_bytes(b''.join(
            e.encode() + b'\0' for e in env or ()))
    return root


class _Err(Exception):
    def __init__(self, value):
        super().__init__(f'NVML error {value}')
        self.value = value


def fake_pynvml(pids_by_gpu):
    def fail(*_):
        raise _Err(3)
    return types.SimpleNamespace(
        NVMLError=_Err, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(pids_by_gpu),
        nvmlSystemGetNVMLVersion=lambda: '13.580',
        nvmlSystemGetDriverVersion=lambda: '580.1',
        nvmlDeviceGetHandleByIndex=lambda i: ('h', i),
        nvmlDeviceGetUUID=lambda h: f'GPU-{h[1]}',
        nvmlDeviceGetName=lambda h: 'NVIDIA H200',
        nvmlDeviceGetMemoryInfo=lambda h: {'total': 140 * GIB,
                                           'used': 2 * GIB},
        nvmlDeviceGetUtilizationRates=fail,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            types.SimpleNamespace(pid=p, usedGpuMemory=700 << 20)
            for p in pids_by_gpu[h[1]]],
        nvmlDeviceGetNvLinkState=lambda h, link: fail(),
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x1)


def ours_by_pid(state):
    return {p.pid: p.ours for g in state.gpus for p in g.processes}


def test_the_parent_is_read_after_the_name_whatever_it_holds(tmp_path,
                                                             monkeypatch):
    from ccl_health.evidence.nodestate.nodedata import parent_pid
    # this host's own table, as the sampler reads it
    assert parent_pid(os.getpid()) == os.getppid()
    proc_table(tmp_path, {
        4102: ('all_reduce_perf', 4101, 'R', None),
        4103: ('a) b (c', 4101, 'S', None),
        4104: ('x) 1 2 (', 4101, 'Z', None)})
    monkeypatch.setenv(PROC_VAR, str(tmp_path))
    assert [parent_pid(p) for p in (4102, 4103, 4104, 4105)] == \
        [4101, 4101, 4101, None]


def test_the_ranks_under_the_job_script_are_ours_by_the_tree(tmp_path,
                                                             monkeypatch):
    """A sweep's sampler (its parent: the job script) reads the GPUs after
    NCCL_NET=bogus made every rank fail at init: rank 0 is a zombie, rank 1
    exits (its environment reads empty), under mpirun under the job
    script.  Both are the run's; a process of another job is not, nor one
    whose parent chain leads to pid 1; a rank srun started outside the
    tree is the run's by its environment."""
    job, mpirun = 4100, 4101
    proc_table(tmp_path, {
        job: ('bash', 1, 'S', [f'CCL_HEALTH_RUN_ID={RUN}']),
        mpirun: ('mpirun', job, 'S', [f'CCL_HEALTH_RUN_ID={RUN}']),
        4102: ('all_reduce_perf', mpirun, 'Z', None),
        4103: ('all_reduce) (perf', mpirun, 'R', None),
        4412: ('all_reduce_perf', 4400, 'R', ['CCL_HEALTH_RUN_ID=other']),
        4400: ('bash', 1, 'S', None),
        4500: ('all_reduce_perf', 77, 'R', [f'CCL_HEALTH_RUN_ID={RUN}'])})
    monkeypatch.setenv(PROC_VAR, str(tmp_path))
    api = nvml.LiveNvml(fake_pynvml([[4102, 4412], [4103], [4500]]))
    s = nodestate.read(nvml=api, run_id=RUN, roots=[job])
    assert ours_by_pid(s) == {4102: True, 4412: False, 4103: True,
                              4500: True}
    c = contention([s])
    assert c.text == 'GPU 0 in use by pid 4412 (all_reduce_perf, 0.7 GiB)'
    # pid 1 is never a root: everything descends from it
    s = nodestate.read(nvml=api, run_id='none', roots=[1])
    assert not any(ours_by_pid(s).values())


def test_a_probe_started_by_the_reader_is_ours_by_the_tree(tmp_path,
                                                           monkeypatch):
    """The hook reads the node in its own process: a probe rank it started
    (through the launcher), exiting with its environment gone, is its."""
    proc_table(tmp_path, {
        5001: ('mpirun', os.getpid(), 'S', None),
        5002: ('all_reduce_perf', 5001, 'R', None)})
    monkeypatch.setenv(PROC_VAR, str(tmp_path))
    api = nvml.LiveNvml(fake_pynvml([[5002]]))
    s = nodestate.read(nvml=api, run_id=RUN)
    assert ours_by_pid(s) == {5002: True}
    assert contention([s]) is None and diagnose(s, s) == []


def test_the_rule_without_a_process_table():
    """Nothing read, nothing ours: no table, no environment."""
    from ccl_health.evidence.nodestate.nodedata import is_ours
    assert not is_ours(4102, RUN, roots=[4100], parent=lambda p: None,
                       environ=lambda p, e: False)
    assert is_ours(4102, RUN, ours=[4102], parent=lambda p: None,
                   environ=lambda p, e: False)
    # a loop in a table read while it changes ends
    assert not is_ours(7, None, roots=[4100], parent=lambda p: 8 if p == 7
                       else 7)


def _state(pid, ours):
    return NodeState(vendor='nvidia', gpus=[GpuState(
        index=1, memory_used=1 << 30, memory_total=140 << 30,
        processes=[Process(pid, 'all_reduce_perf', 700 << 20, ours)])])


def test_a_rank_ours_in_one_reading_is_ours_in_every_reading():
    """Rank 1 read as ours while the run ran; after rank 0 crashed the
    launcher is gone and rank 1, still on its GPU, is read again: the
    run's, in the sweep's verdict, the node's causes and what is kept."""
    from ccl_health.db import recorder
    states = [_state(708, True), _state(708, False)]
    assert contention(states) is None
    assert diagnose(states[0], states[1]) == []
    kept = json.loads(recorder.node_state_env(
        {'before': states[0], 'samples': states, 'after': states[1]})[
            'ccl_health.node_state'])
    assert kept['foreign'] == [] and kept['causes'] == []
    # a pid the run printed is its own in what is kept too
    kept = json.loads(recorder.node_state_env(
        {'before': states[1], 'samples': [states[1]], 'after': states[1]},
        ours={708})['ccl_health.node_state'])
    assert kept['foreign'] == [] and kept['causes'] == []
    # another process on that GPU still contends
    other = [_state(708, True), _state(4412, False)]
    assert contention(other).text.startswith('GPU 1 in use by pid 4412')


#: a stand-in NVML: GPU 1 holds pid $FAKE_PID in every reading after the
#: first (the hook reads the node before its probes and after them)
LINGERING_NVML = NVML_BASE + '''
_calls = []


def nvmlDeviceGetMemoryInfo(h):
    return {'total': 140 << 30, 'used': 1 << 30}


class _P:
    def __init__(self, pid):
        self.pid, self.usedGpuMemory = pid, 700 << 20


def nvmlDeviceGetComputeRunningProcesses(h):
    if h[1] != 1:
        return []
    _calls.append(1)
    return [_P(int(os.environ['FAKE_PID']))] if len(_calls) > 1 else []
'''


@pytest.mark.parametrize('pid,healthy', [(25481, True), (4412, False)])
def test_the_hooks_probe_rank_lingering_is_not_contention(tmp_path, pid,
                                                          healthy):
    """The hook's probe (the 2x H200 intra capture replayed: its rank 1 is
    pid 25481) leaves rank 1 on GPU 1 when the node is read after it, its
    process no longer in any table the hook can read: the probe's own
    rank, as the sweep's rule says (HEALTHY).  Another pid there is a
    foreign process (UNHEALTHY, contended)."""
    from helpers.node import hook
    nv = tmp_path / 'nvml'
    nv.mkdir()
    (nv / 'pynvml.py').write_text(LINGERING_NVML)
    (tmp_path / 'proc').mkdir()
    from conftest import REPO
    rc, line, err = hook(tmp_path, env={
        'PYTHONPATH': f'{nv}{os.pathsep}{REPO}', 'FAKE_PID': str(pid),
        PROC_VAR: str(tmp_path / 'proc')})
    detail = json.loads((tmp_path / 'detail.json').read_text())
    after = detail['node_state']['after']['gpus'][1]['processes']
    assert [p['pid'] for p in after] == [pid], detail['node_state']
    if healthy:
        assert rc == 0 and line.startswith('HEALTHY: all_reduce 1GiB on 2 '
                                           'GPUs'), (line, err)
    else:
        assert rc == 1 and f'GPU 1 in use by pid {pid} ' in line, line
        assert detail['verdict'] == 'contended', detail['verdict']
