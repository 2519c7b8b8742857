"""A crash says its cause (issue 40): the first fatal WARN, then the
failing rank's own error line, never a size row glued to it; and the run's
own rank processes, still on their GPUs after another rank crashed, are
never named as contention.  The output is written here in nccl-tests'
formats (src/common.cu: the row preamble ``%12li  %12li  %8s  %6s  %6i``
printed before a size is timed, then NCCLCHECK's ``%s: Test NCCL failure
%s:%d '%s / %s'``); the WARN in NCCL's logger format (src/debug.cc)."""

from ccl_health.evidence.nodestate.nodedata import (GpuState, NodeState,
                                                 Process)
from ccl_health.judge import assemble
from ccl_health.judge.casejudge import judge
from ccl_health.judge.verdicts import Verdict

WARN = 'socketProgress: Connection closed by remote peer 192.0.2.2<43407>'
ERROR = ("Test NCCL failure common.cu:514 'remote process exited or there "
         f"was a network error / {WARN}'")
HEADER = """\
# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 67108864 maxBytes 268435456 step: 2(factor) \
warmup iters: 2 iters: 8 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid    707 on         vm device  0 [0000:00:06] NVIDIA H100
#  Rank  1 Group  0 Pid    708 on         vm device  1 [0000:00:07] NVIDIA H100
#
#                                                              out-of-place  \
                     in-place
#       size         count      type   redop    root     time   algbw   \
busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  \
(GB/s)             (us)  (GB/s)  (GB/s)
    67108864      16777216     float     sum      -1  36486.0    1.84    \
1.84       0  36205.2    1.85    1.85       0
"""
CRASHED = HEADER + (
    f"   134217728      33554432     float     sum      -1vm: {ERROR}\n"
    " .. vm pid 707: Test failure common.cu:632\n")
LOG = (f'vm:707:720 [0] NCCL INFO NCCL version 2.28.3+cuda12.9\n'
       f'vm:707:731 [0] misc/socket.cc:50 NCCL WARN {WARN}\n')


def _case(text, rc, log, states=None, tmp_path=None):
    path = tmp_path / 'nccl-debug.vm.707.log'
    path.write_text(log)
    att = assemble.attempt(text, [str(path)], rc, transport='net-socket')
    return judge(assemble.case(
        [att], what='all_reduce_perf', transport='net-socket',
        collective='all_reduce', nodes=1, gpus_per_node=2,
        node_states=states))


def test_a_crash_names_its_warn_and_the_error_without_the_row(tmp_path):
    j = _case(CRASHED, 3, LOG, tmp_path=tmp_path)
    assert j.verdict is Verdict.CRASH
    first = j.reason.split(';')[0]
    # the WARN is the cause, named before anything else the program said
    assert first.startswith('crash: all_reduce_perf exited with status 3')
    assert WARN in first, j.reason
    # early enough for a mail line cut at its width: before the log's name
    assert j.reason.index(WARN) < 100 and \
        'in nccl-debug.vm.707.log)' in first
    # the rank's own error follows, the size row and the host cut from it
    assert f'vm: {ERROR[:60]}' in j.reason
    assert '33554432' not in j.reason and '-1vm' not in j.reason


def _state(*pids, first=0):
    return NodeState(vendor='nvidia', gpus=[GpuState(
        index=first + i, memory_used=1 << 30, memory_total=80 << 30,
        processes=[Process(pid, 'all_reduce_perf', 700 << 20)])
        for i, pid in enumerate(pids)])


def test_the_runs_own_ranks_are_never_contention(tmp_path):
    """NCCL_NET=bogus: every rank dies at init; rank 1 (pid 708) is still
    on its GPU when the after-reading is taken, its environment unread:
    the run's own rank (its pid is in the output and the log), a crash
    with its WARN.  A process the run does not name still contends."""
    bogus = (HEADER.split('#                    ')[0] +
             'vm: Test NCCL failure common.cu:1004 \'internal error - '
             'please report this issue to the NCCL developers\'\n')
    log = ('vm:707:707 [0] NCCL INFO NCCL version 2.28.3+cuda12.9\n'
           'vm:707:707 [0] init.cc:173 NCCL WARN Failed to initialize any '
           'NET plugin\n'
           'vm:708:708 [1] init.cc:173 NCCL WARN Failed to initialize any '
           'NET plugin\n')
    ours = {'samples': [_state(707, 708)], 'after': _state(708, first=1)}
    j = _case(bogus, 1, log, ours, tmp_path)
    assert j.verdict is Verdict.CRASH, j.reason
    assert 'Failed to initialize any NET plugin' in j.reason
    assert 'in use by' not in j.reason
    other = {'samples': [_state(707, 4412)]}
    j = _case(bogus, 1, log, other, tmp_path)
    assert j.verdict is Verdict.CONTENDED
    assert 'GPU 1 in use by pid 4412' in j.reason


def test_a_pass_without_sizes_says_what_it_did():
    """A first call or a training step has no sizes: its pass is told in
    the judge's words, never "0 sizes within reference"."""
    from ccl_health import summary
    report = {'runs': [{'testcases': [{
        'fixture': False, 'display_name': 'TorchFirstCall',
        'transport': 'intra', 'collective': 'torch_first_call',
        'result': 'pass', 'verdict': 'pass',
        'verdict_reason': 'proven intra: P2P/CUMEM on every rank',
        'transport_proof': 'proven intra: P2P/CUMEM on every rank',
        'perfvalues': {'local:gpu:first_call_ms': [
            812.0, 5000.0, None, 0.0, 'ms', 'pass']}}]}]}
    [v] = summary.case_verdicts(report)
    line = v.line()
    assert v.verdict == 'pass' and 'proven intra: P2P/CUMEM' in line
    assert 'first_call_ms 812 ms' in line
    assert 'sizes within reference' not in line, line
