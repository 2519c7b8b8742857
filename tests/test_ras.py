"""Issue 44: a hang names its rank.  NCCL's RAS asked (a stand-in built
from NCCL's protocol, tests/helpers/ras.py) before a case is killed at
its bound, through the one case assembler and the one judge; RAS that
does not answer, answers slowly, sends garbage or answers for another job
still gives ``hang``, with the reason no rank was named; a crash names
the first rank that exited, from the launcher's words."""

import os
import time

import pytest

from helpers.ras import Standin, report
from ccl_health.evidence import ras, stalls
from ccl_health.judge import assemble
from ccl_health.judge.casejudge import judge
from ccl_health.judge.verdicts import Verdict

KILLED = 'the job exceeded its time limit'


def hang_of(answer, **kw):
    att = assemble.unrun(killed=KILLED, ras=answer, **kw)
    return judge(assemble.case([att], what='all_reduce_perf'))


# -- the client against the protocol ------------------------------------------

def test_a_stopped_rank_is_named_with_host_gpu_and_pid():
    with Standin('incomplete') as s:
        a = ras.query('127.0.0.1', s.port, bound=5)
    assert a.ok and a.protocol == 2
    [n] = a.notes
    assert (n.state, n.rank, n.host, n.gpu, n.pid) == \
        ('unresponsive', 2, 'node1', '2', 1746)
    assert n.comm == '#0-0 (cf264af53edbe986)'
    j = hang_of(a)
    assert j.verdict is Verdict.HANG
    assert j.reason == (f'hang: {KILLED}: rank 2 (node1 GPU 2, pid 1746) '
                        f'unresponsive (NCCL RAS at 127.0.0.1:{s.port})')


def test_a_rank_behind_and_the_ranks_waiting():
    with Standin('mismatch') as s:
        a = ras.query('127.0.0.1', s.port, bound=5)
    j = hang_of(a)
    assert ': rank 3 (node1 GPU 3, pid 1747) behind at AllReduce #811; ' \
        '3 ranks waiting in AllReduce #812 (NCCL RAS' in j.reason


def test_a_dead_process_is_named_once_as_its_rank():
    a = ras.parse(report('dead'))
    assert [(n.rank, n.state, n.pid) for n in a.notes] == [(1, 'dead', 1745)]


def test_running_ok_names_no_rank_and_is_still_a_hang():
    with Standin('ok') as s:
        a = ras.query('127.0.0.1', s.port, bound=5)
    assert a.all_running and not a.notes
    j = hang_of(a)
    assert j.verdict is Verdict.HANG and 'no rank named: NCCL RAS at ' \
        f'127.0.0.1:{s.port}: every communicator RUNNING OK' in j.reason


@pytest.mark.parametrize('mode,why', [
    ('silent', 'did not answer within 1.5 s'),
    ('slow', 'did not answer within 1.5 s'),
    ('garbage', 'not a RAS answer at'),
    ('junk', 'sent no communicator report'),
    ('closed', 'RAS at 127.0.0.1:'),
    ('huge', 'sent more than 1048576 bytes'),
])
def test_a_bad_ras_still_gives_hang_with_the_reason(mode, why):
    with Standin(mode, delay=10) as s:
        t0 = time.monotonic()
        a = ras.query('127.0.0.1', s.port, bound=1.5)
        took = time.monotonic() - t0
    assert took < 3                     # bounded whatever it does
    assert not a.ok and why in a.why, a.why
    j = hang_of(a)
    assert j.verdict is Verdict.HANG
    assert f'no rank named: {a.why}' in j.reason


def test_nothing_listening_and_ras_disabled():
    port = int(ras.free_address().rsplit(':', 1)[1])
    a = ras.ask({'NCCL_RAS_ADDR': f'127.0.0.1:{port}'}, bound=2)
    assert 'RAS not listening at 127.0.0.1:' in a.why
    off = ras.ask({'NCCL_RAS_ENABLE': '0'})
    assert off.why == 'RAS disabled (NCCL_RAS_ENABLE=0)'
    assert 'no rank named: RAS disabled' in hang_of(off).reason


def test_the_address_as_nccl_reads_it():
    assert ras.address({}) == ('localhost', 28028)
    assert ras.address({'NCCL_RAS_ADDR': 'n1:3000'}) == ('n1', 3000)
    assert ras.address({'NCCL_RAS_ADDR': '[::1]:3001'}) == ('::1', 3001)


def test_a_wildcard_address_asks_each_node_until_one_answers():
    asked = []

    def fake(host, port, bound):
        asked.append(host)
        if host == 'n2':
            return ras.parse(report('incomplete'), ras.Answer('n2:1',
                                                              True))
        return ras.Answer(f'{host}:{port}', why=f'RAS not listening at '
                          f'{host}')
    got = ras.ask({'NCCL_RAS_ADDR': '0.0.0.0:1'}, ['n1', 'n2', 'n3'],
                  query_fn=fake)
    assert asked == ['localhost', 'n1', 'n2'] and got.notes[0].rank == 2


def test_ras_of_another_job_names_no_rank_of_this_one():
    # the run's header says its ranks are pids 25480/25481: RAS naming
    # pid 1746 answered for some other job on that address
    header = open(os.path.join(os.path.dirname(__file__), 'replay',
                               'captures', 'intra', 'stdout.txt')).read()
    header = ''.join(ln for ln in header.splitlines(True)
                     if ln.startswith('#'))
    a = ras.parse(report('incomplete'), ras.Answer('x:1', True))
    j = hang_of(a, stdout=header)
    assert 'no rank named: RAS at x:1 named processes [1746], none of ' \
        'this run (its ranks: pids [25480, 25481])' in j.reason


def test_the_watch_file_round_trip(tmp_path):
    with Standin('incomplete') as s:
        out = tmp_path / 'ras.json'
        os.environ['NCCL_RAS_ADDR'] = s.addr
        try:
            assert ras.main(['--watch', str(out)]) == 0
        finally:
            del os.environ['NCCL_RAS_ADDR']
    got = ras.read_watch(str(out))
    assert got.ok and got.notes[0].pid == 1746
    (tmp_path / 'bad.json').write_text('{"address": 3}')
    assert ras.read_watch(str(tmp_path / 'bad.json')) is None
    assert ras.read_watch(str(tmp_path / 'none.json')) is None


# -- without RAS: the outputs -------------------------------------------------

def test_the_debug_log_that_stopped_first_names_the_rank(tmp_path):
    header = ('#  Rank  0 Group  0 Pid  25480 on         vm device  0 '
              '[0000:00:06] NVIDIA H200\n'
              '#  Rank  1 Group  0 Pid  25481 on         vm device  1 '
              '[0000:00:07] NVIDIA H200\n')
    logs = []
    now = time.time()
    for pid, age in ((25480, 1), (25481, 40)):
        p = tmp_path / f'nccl-debug.vm.{pid}.log'
        p.write_text('vm:%d:1 [0] NCCL INFO init\n' % pid)
        os.utime(p, (now - age, now - age))
        logs.append(str(p))
    a = ras.Answer('localhost:28028', why='RAS not listening at '
                   'localhost:28028 (Connection refused)')
    j = hang_of(a, logs=logs, stdout=header)
    assert j.reason == (
        f'hang: {KILLED}: rank 1 (vm GPU 1, pid 25481) stopped first, from '
        f'the debug logs (nccl-debug.vm.25481.log stopped 39 s before the '
        f'others) (RAS not listening at localhost:28028 (Connection '
        f'refused))')
    # written together: no log stands out, nothing named
    os.utime(logs[1], (now - 2, now - 2))
    assert 'no rank named: RAS not listening' in hang_of(
        a, logs=logs, stdout=header).reason


# -- a crash: the first rank that exited ---------------------------------------

OMPI = """#  Rank  0 Group  0 Pid  1744 on      node1 device  0 [0x1] H200
#  Rank  1 Group  0 Pid  1745 on      node1 device  1 [0x2] H200
#  Rank  2 Group  0 Pid  1746 on      node1 device  2 [0x3] H200
#
#       size         count      type   redop    root     time   algbw   busbw
     1048576        262144     float     sum      -1    10.00  104.86  157.29
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun noticed that process rank 2 with PID 1746 on node node1 exited on signal 9 (Killed).
--------------------------------------------------------------------------
"""


def test_a_crash_names_the_first_rank_that_exited():
    att = assemble.attempt(OMPI, exit_status=137)
    j = judge(assemble.case([att], what='all_reduce_perf'))
    assert j.verdict is Verdict.CRASH
    assert j.reason.endswith('; first to exit: rank 2 (node1 GPU 2, pid '
                             '1746) (signal 9 (Killed)), from the launcher '
                             '(mpirun)'), j.reason


@pytest.mark.parametrize('text,rank,host,how', [
    ('srun: error: nid001234: task 5: Killed\n', 5, 'nid001234',
     'killed (signal 9)'),
    ('srun: error: nid1: task 3: Exited with exit code 1\n', 3, 'nid1',
     'Exited with exit code 1'),
    ('prterun detected that one or more processes exited with non-zero '
     'status,\nthus causing the job to be terminated. The first process to '
     'do so was:\n\n   Process name: [prterun-sophia-gpu-04-3613798@1,7] '
     'Exit code:    3\n', 7, '', 'exit code 3'),
    ('=   RANK 2 PID 1746 RUNNING AT n3\n=   KILLED BY SIGNAL: 9 (Killed)\n',
     2, 'n3', 'killed by signal: 9 (killed)'),
])
def test_launchers_first_exit(text, rank, host, how):
    n = stalls.first_exit(text)
    assert (n.rank, n.host, n.how) == (rank, host, how)


def test_the_published_two_node_crash_names_rank_7_and_its_error():
    path = os.path.join(os.path.dirname(__file__), 'fixtures', 'published',
                        'nccl-tests_all_reduce_sophia-dgx-a100-2node-'
                        '16rank.txt')
    text = open(path, errors='replace').read()
    att = assemble.attempt(text, exit_status=3)
    j = judge(assemble.case([att], what='all_reduce_perf'))
    assert j.verdict is Verdict.CRASH
    assert '; first to exit: rank 7 (sophia-gpu-04 GPU 7, pid ' in j.reason
    assert '(exit code 3), from the launcher (mpirun): sophia-gpu-04: Test ' \
        'NCCL failure common.cu:1012' in j.reason


# -- a real time-limit path: the hook's probe hangs, RAS listens --------------

def test_the_hooks_probe_hang_names_the_rank_ras_names(tmp_path):
    from helpers.node import timed_hook as hook
    from ccl_health.db import store
    # the replayed probe is the capture's ranks 0 and 1 (pids 25480/25481)
    import glob
    with Standin('incomplete', pids=(25480, 25481)) as s:
        rc, line, wall = hook(tmp_path, '--limit', '6', '--evidence-dir',
                              str(tmp_path / 'kept'), env={
                                  'CCL_HEALTH_REPLAY_STALL': '60',
                                  'NCCL_RAS_ADDR': s.addr})
        assert s.connections >= 1
    # RAS's answer is kept with the failing check's evidence
    [kept] = glob.glob(str(tmp_path / 'kept' / '**' / 'ras.txt'),
                       recursive=True)
    assert 'Missing communicator data from 1 rank' in open(kept).read()
    assert rc == 1 and line.startswith(
        'UNHEALTHY: isolate: hang: all_reduce on GPUs 0<->1 did not '
        'finish within the '), line
    assert line.endswith(f': rank 1 (node1 GPU 1, pid 25481) unresponsive '
                         f'(NCCL RAS at {s.addr})'), line
    assert wall < 10
    with store.open_store(str(tmp_path / 'db.sqlite')) as db:
        [case] = db.cases()
        assert case['verdict'] == 'hang' and \
            f'unresponsive (NCCL RAS at {s.addr})' in case['reason']


def test_the_hooks_probe_hang_with_a_silent_ras_says_why(tmp_path):
    from helpers.node import timed_hook as hook
    with Standin('silent') as s:
        rc, line, wall = hook(tmp_path, '--limit', '6', env={
            'CCL_HEALTH_REPLAY_STALL': '60', 'NCCL_RAS_ADDR': s.addr})
    assert rc == 1 and 'hang: all_reduce on GPUs 0<->1 did not finish' in \
        line and f'no rank named: RAS at {s.addr} did not answer within' \
        in line, line
    assert wall < 10


# -- the sweep's time-limit path: the job script asks before the limit --------

def test_the_sweeps_job_script_asks_ras_before_the_time_limit(tmp_path):
    import subprocess
    import types
    from ccl_health.rfm.base import PlacedTest, RAS_FILE
    from ccl_health.rfm.sweep import sweep_evidence
    from ccl_health.evidence import nccltests
    start, stop = PlacedTest.ras_cmds(types.SimpleNamespace(time_limit=4.0))
    # the launcher outlives the moment RAS is asked (the limit less 1 s)
    script = '\n'.join(start + ['sleep 5'] + stop)
    header = open(os.path.join(os.path.dirname(__file__), 'replay',
                               'captures', 'intra', 'stdout.txt')).read()
    stdout = ''.join(ln for ln in header.splitlines(True)
                     if ln.startswith('#'))
    (tmp_path / 'out.txt').write_text(stdout)
    (tmp_path / 'err.txt').write_text(
        'slurmstepd: error: *** JOB 77 ON nid1 CANCELLED AT 2026-11-28T20:00'
        ' DUE TO TIME LIMIT ***\n')
    with Standin('incomplete', pids=(25480, 25481)) as s:
        subprocess.run(['bash', '-c', script], cwd=tmp_path, timeout=30,
                       env=dict(os.environ, NCCL_RAS_ADDR=s.addr))
    answer = ras.read_watch(str(tmp_path / RAS_FILE))
    assert answer is not None and answer.ok
    ev = sweep_evidence(
        nccltests.parse(stdout), None, None, what='all_reduce_perf',
        transport='intra', collective='all_reduce', nodes=1,
        gpus_per_node=2, algo='default', sizes_run=[1 << 20], exact=True,
        killed='slurmstepd: error: *** JOB 77 CANCELLED DUE TO TIME LIMIT',
        stdout_path=str(tmp_path / 'out.txt'),
        stderr_path=str(tmp_path / 'err.txt'), ras=answer)
    j = judge(ev)
    assert j.verdict is Verdict.HANG and j.reason.endswith(
        f': rank 1 (node1 GPU 1, pid 25481) unresponsive (NCCL RAS at '
        f'{s.addr})'), j.reason


def test_a_job_that_ends_in_time_never_asks(tmp_path):
    import subprocess
    import types
    from ccl_health.rfm.base import PlacedTest, RAS_FILE
    start, stop = PlacedTest.ras_cmds(types.SimpleNamespace(time_limit=40.0))
    script = '\n'.join(start + ['true'] + stop)
    with Standin('incomplete') as s:
        subprocess.run(['bash', '-c', script], cwd=tmp_path, timeout=30,
                       env=dict(os.environ, NCCL_RAS_ADDR=s.addr))
        assert s.connections == 0
    assert not (tmp_path / RAS_FILE).exists()


# -- the fleet: a hung pair step names the node --------------------------------

def _srun_runs_here(tmp_path, monkeypatch):
    """srun's stand-in on PATH: its options dropped, the program run
    here."""
    stub = tmp_path / 'bin' / 'srun'
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\nwhile [ "${1#--}" != "$1" ]; do shift; '
                    'done\nexec "$@"\n')
    stub.chmod(0o755)
    monkeypatch.setenv('PATH', f'{stub.parent}{os.pathsep}'
                       f'{os.environ["PATH"]}')
    monkeypatch.setenv('PYTHONPATH', os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))


def test_a_hung_pair_step_asks_ras_on_its_nodes_and_names_the_node(
        tmp_path, monkeypatch):
    from ccl_health.fleet import slurmsteps as slurm
    from ccl_health.fleet.rounds import Raw, Step, judge_step
    _srun_runs_here(tmp_path, monkeypatch)
    step = Step('pair', ('nid001', 'nid002'), 30.0)
    with Standin('mismatch', pids=(11, 12, 13, 14)) as s:
        sched = slurm.SlurmScheduler(str(tmp_path), 2, None, None,
                                     {'NCCL_RAS_ADDR': s.addr})
        answer = sched.ask_ras(step)
        assert s.connections == 1
        assert sched.ask_ras(Step('node', ('nid001',), 5.0)) is None
    assert answer.ok
    v, reason, bw = judge_step(Raw(step, None, killed=True, ras=answer),
                               1 << 20, 30.0)
    assert str(v) == 'hang' and bw is None
    assert reason == (f'hang: the pair step on nid001,nid002 did not finish '
                      f'within 30 s (killed): rank 3 (node1 GPU 3, pid 14) '
                      f'behind at AllReduce #811; 3 ranks waiting in '
                      f'AllReduce #812 (NCCL RAS at {s.addr})')


def test_a_hung_pair_step_whose_ras_is_silent_says_why(tmp_path, monkeypatch):
    from ccl_health.fleet import slurmsteps as slurm
    from ccl_health.fleet.rounds import Raw, Step, judge_step
    monkeypatch.setattr(slurm, 'RAS_BOUND', 4.0)
    _srun_runs_here(tmp_path, monkeypatch)
    step = Step('pair', ('nid001', 'nid002'), 30.0)
    with Standin('silent') as s:
        sched = slurm.SlurmScheduler(str(tmp_path), 2, None, None,
                                     {'NCCL_RAS_ADDR': s.addr})
        t0 = time.monotonic()
        answer = sched.ask_ras(step)
        assert time.monotonic() - t0 < 6
    v, reason, _ = judge_step(Raw(step, None, killed=True, ras=answer),
                              1 << 20, 30.0)
    assert str(v) == 'hang' and 'no rank named: nid001: RAS at ' \
        f'{s.addr} did not answer within' in reason, reason


# -- issue 44 on 4x H200 (tests/fixtures/device/ras, README there): what
# the device returned, read again through today's code ----------------------

DEV = os.path.join(os.path.dirname(__file__), 'fixtures', 'device', 'ras')


def _dev(*parts):
    with open(os.path.join(DEV, *parts), errors='replace') as fp:
        return fp.read()


def _header_pid(out, rank):
    import re
    return int(re.search(rf'#\s+Rank\s+{rank} Group\s+\d+ Pid\s+(\d+)',
                         out).group(1))


def test_device_ras_named_the_stopped_rank_of_a_sweep():
    """RAS's real answer (NCCL 2.28.3) while rank 2 was SIGSTOPped: read by
    the client's parser, judged as the sweep's hang."""
    out = _dev('stop', 'stdout.txt')
    ans = ras.parse(_dev('stop', 'ras-2.txt'),
                    ras.Answer('localhost:48681', answered=True))
    [note] = [n for n in ans.notes if n.rank is not None]
    assert (note.rank, note.gpu, note.pid) == (2, '2', _header_pid(out, 2))
    att = assemble.attempt(out, exit_status=None, ras=ans,
                           transport='intra', killed='all_reduce_perf did '
                           'not finish within 15 s (killed)')
    j = judge(assemble.case([att], what='all_reduce_perf', transport='intra',
                            collective='all_reduce', nodes=1,
                            gpus_per_node=4))
    assert j.verdict is Verdict.HANG
    assert f'rank 2 (192.0.2.2 GPU 2, pid {_header_pid(out, 2)}) ' \
        f'unresponsive' in j.reason, j.reason


def test_device_sigkill_names_the_rank_though_mpirun_says_pid_0():
    """Open MPI 4.1.6 says "process rank 1 with PID 0" of a rank killed
    from outside: the pid is the one nccl-tests' header gives rank 1."""
    out = _dev('kill', 'stdout.txt')
    err = _dev('kill', 'stderr.txt')
    assert 'rank 1 with PID 0 on node vm' in err
    att = assemble.attempt(out, exit_status=137, transport='intra',
                           launcher_text=out + '\n' + err)
    j = judge(assemble.case([att], what='all_reduce_perf', transport='intra',
                            collective='all_reduce', nodes=1,
                            gpus_per_node=4))
    assert j.verdict is Verdict.CRASH
    assert f'first to exit: rank 1 (vm GPU 1, pid {_header_pid(out, 1)}) ' \
        f'(signal 9 (Killed))' in j.reason, j.reason


def test_device_fleet_pair_step_and_hook_named_the_stopped_rank():
    fleet = ras.parse(_dev('fleet', 'ras.txt'),
                      ras.Answer('localhost:35919', answered=True))
    pid = _header_pid(_dev('fleet', 'stdout.txt'), 3)
    assert any((n.rank, n.pid) == (3, pid) for n in fleet.notes)
    import json
    stopped = _dev('hook-stopped.txt').split()
    doc = json.loads(_dev('hook.json'))
    assert doc['code'] == 1
    assert f'rank {stopped[2]} (192.0.2.2 GPU {stopped[2]}, pid ' \
        f'{stopped[4]}) unresponsive' in json.dumps(doc)
