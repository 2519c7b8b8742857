"""The judge of a node (ccl_health/judge/nodejudge.py) and of a case as ReFrame
ended it (ccl_health/judge/outcome.py): the rules the hook, the fleet and
the run summary ask instead of deciding themselves."""

import pytest

from ccl_health.evidence.nodestate.diagnose import Cause
from ccl_health.judge import nodejudge as node
from ccl_health.judge.outcome import CaseOutcome, judge_outcome
from ccl_health.judge.verdicts import Verdict

V = Verdict
FOREIGN = Cause('foreign-process', 'GPU 0 in use by pid 7 (python3, 1.4 GiB)',
                0, drain=True)
ECC = Cause('ecc-uncorrected', 'GPU 3: 2 uncorrectable ECC errors', 3,
            drain=True)
THROTTLE = Cause('throttle', 'GPU 1 clocks throttled (HW slowdown)', 1)


def test_the_worst_probe_speaks_with_its_reasons():
    # a failure over could-not-check; the first failure's verdict
    found = [(V.PASS, 'ok'), (V.COULD_NOT_CHECK, 'GPUs 4<->5: no output'),
             (V.WRONG_RESULTS, 'GPUs 2<->3: 5 wrong'),
             (V.BELOW_REFERENCE, 'GPUs 0<->1: slow'),
             (V.WRONG_RESULTS, 'GPUs 6<->7: 1 wrong')]
    assert node.probes_verdict(found) == (
        V.WRONG_RESULTS, 'GPUs 2<->3: 5 wrong; GPUs 6<->7: 1 wrong')
    assert node.probes_verdict([(V.PASS, 'a'), (V.PASS, 'b')]) == (V.PASS,
                                                                   None)
    assert node.probes_verdict([]) == (V.COULD_NOT_CHECK, 'no probe was run')
    assert node.probes_verdict([(V.PASS, 'a'),
                                (V.NO_REFERENCE, 'none')])[0] is \
        V.NO_REFERENCE


def test_a_hang_needs_a_started_program():
    v, why = node.stopped('all_reduce on GPUs 0-7', True, 12.4, 30)
    assert v is V.HANG and why == ('hang: all_reduce on GPUs 0-7 did not '
                                   'finish within the 12 s left')
    v, why = node.stopped('all_reduce on GPUs 0-7', False, 0.4, 2)
    assert v is V.COULD_NOT_CHECK and '--limit 2 s: raise it' in why
    assert node.no_time('the copy matrix', 1.5) == (
        V.COULD_NOT_CHECK, 'the limit left no time for the copy matrix '
        '(--limit 1.5 s: raise it)')
    assert node.killed('the pair step on a,b did not finish', 60) == (
        V.HANG, 'hang: the pair step on a,b did not finish within 60 s '
        '(killed)')


def test_missing_gpus_only_where_the_count_is_known():
    assert node.missing_gpus('nvidia-smi found no GPU', None, 'p:g') is None
    assert node.missing_gpus('nvidia-smi found no GPU', 4, 'p:g')[0] is \
        V.MISSING_GPU
    assert node.missing_gpus('', 4, 'p:g', 3, 'nvidia-smi') == (
        V.MISSING_GPU, 'missing GPU: nvidia-smi lists 3 of the 4 GPUs of p:g')
    assert node.missing_gpus('', 4, 'p:g', 4, 'nvidia-smi') is None


@pytest.mark.parametrize('verdict,causes,want,starts', [
    # a failure: the cause first; another process makes it contended
    (V.WRONG_RESULTS, [ECC], V.WRONG_RESULTS, 'GPU 3: 2 uncorrectable'),
    (V.BELOW_REFERENCE, [FOREIGN], V.CONTENDED, 'GPU 0 in use by pid 7'),
    # a pass with a cause that drains: failed, "although the probes passed"
    (V.PASS, [ECC], V.NODE_FAULT, 'GPU 3: 2 uncorrectable'),
    (V.PASS, [FOREIGN], V.CONTENDED, 'GPU 0 in use'),
    # a pass with a cause that does not drain: noted, still a pass
    (V.PASS, [THROTTLE], V.PASS, 'all fine; noted: GPU 1 clocks'),
    # could not check: a draining cause is named whatever else is missing
    (V.NO_REFERENCE, [FOREIGN], V.CONTENDED, 'GPU 0 in use'),
    (V.COULD_NOT_CHECK, [ECC], V.NODE_FAULT, 'GPU 3'),
    (V.COULD_NOT_CHECK, [THROTTLE], V.COULD_NOT_CHECK, 'all fine (node'),
])
def test_the_node_state_is_named_first(verdict, causes, want, starts):
    j = node.with_state(verdict, 'all fine', causes)
    assert j.verdict is want
    assert j.reason.startswith(starts), j.reason
    if want is not verdict or verdict.failed:
        assert j.cause in ('ecc', 'leftover-process')
    if causes[0] is FOREIGN:
        assert node.IDLE_NODE in j.reason
    assert node.with_state(verdict, 'x', []).verdict is verdict


def test_a_case_as_reframe_ended_it():
    passed = CaseOutcome(result='pass', judged=V.PASS, proof='NET/Socket')
    assert judge_outcome(passed) == (V.PASS, 'NET/Socket')
    # judged pass, failed later in ReFrame: never a pass
    assert judge_outcome(CaseOutcome(result='fail', phase='cleanup',
                                     reason='x', judged=V.PASS))[0] is \
        V.CRASH
    assert judge_outcome(CaseOutcome(result='fail', phase='performance',
                                     judged=V.PASS))[0] is \
        V.BELOW_REFERENCE
    # a cut-short output under Slurm's time limit is a hang
    cut = CaseOutcome(result='fail', phase='sanity', judged=V.INCOMPLETE,
                      slurm_time_limit='*** STEP 7.0 CANCELLED AT t DUE TO '
                                       'TIME LIMIT ***')
    assert judge_outcome(cut)[0] is V.HANG
    assert judge_outcome(CaseOutcome(result='skip', broken_builds=[
        ('nccl_tests', 'nvcc: not found')]))[1] == \
        'build-failed: nccl_tests did not build (nvcc: not found)'
    assert judge_outcome(CaseOutcome(result='skip', skip_reason='1 GPU')) \
        == (V.SKIPPED, '1 GPU')
    assert judge_outcome(CaseOutcome(result='fail_deps'))[0] is \
        V.COULD_NOT_CHECK
    # a case the check skips for itself (a transport the site file does
    # not list, known before any build) stays skipped when a build it
    # would need failed first: never a build failure of the night
    unlisted = 'net-ib (NCCL\'s builtin NET/IB) is not configured for x: ...'
    for result in ('skip', 'fail_deps'):
        assert judge_outcome(CaseOutcome(
            result=result, skip_reason=unlisted, broken_builds=[
                ('nccl_tests', 'fetch failed')])) == (V.SKIPPED, unlisted)
    assert judge_outcome(CaseOutcome(result='pass'))[0] is V.COULD_NOT_CHECK
    assert judge_outcome(CaseOutcome(result='abort', reason='SIGTERM')) == \
        (V.ABORTED, 'aborted: SIGTERM')
    assert judge_outcome(CaseOutcome(result='fail', phase='run',
                                     reason='timed out',
                                     past_time_limit=True))[0] is V.HANG
    assert judge_outcome(CaseOutcome(result='fail', phase='compile',
                                     reason='nvcc'))[0] is V.BUILD_FAILED


def test_nccl_version_codes_decode_both_schemes():
    """``NCCL_VERSION(X,Y,Z)``: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z
    from 2.9 (nccl.h)."""
    from ccl_health.judge.casejudge import version_of_code
    assert version_of_code(22803) == '2.28.3'
    assert version_of_code(21903) == '2.19.3'
    assert version_of_code(20906) == '2.9.6'
    assert version_of_code(2804) == '2.8.4'
    assert version_of_code(2408) == '2.4.8'
    assert version_of_code(None) is None and version_of_code(0) is None
