"""The judge of a case as ReFrame ended it: the verdict the check itself
judged (:func:`ccl_health.judge.casejudge.judge`, stored in its ``verdict``
variable), weighed against what ReFrame's run report says happened after
or instead: skipped (by the check, or because a build it needs failed), a
dependency that failed, a build that failed, a job Slurm ended at its time
limit, a performance stage that failed, an abort, a case that never ran.

The doors that read run reports (the main command's summary, ingest,
``scripts/explain`` of a report) gather a :class:`CaseOutcome` from a
test case and ask :func:`judge_outcome`; no other module turns ReFrame's
fields into a verdict."""

import dataclasses
from typing import Optional, Sequence

from ccl_health.judge.verdicts import Verdict

#: what ReFrame's run report calls a case that passed
PASSED = ('pass', 'success', 'xfail')


@dataclasses.dataclass
class CaseOutcome:
    """What a run report says of one test case (plain data)."""
    #: ReFrame's ``result`` (pass, fail, skip, fail_deps, abort, ...)
    result: str = ''
    #: ReFrame's ``fail_phase`` (compile, run, sanity, performance, ...)
    phase: str = ''
    #: the check's own reason, or ReFrame's ``fail_reason`` on one line
    reason: str = ''
    #: the verdict the check judged (its ``verdict`` variable); None: none
    judged: Optional[Verdict] = None
    #: the check's transport proof (the reason of a pass)
    proof: str = ''
    #: the check's own reason for skipping itself
    skip_reason: str = ''
    #: ``[(build, one-line cause)]`` of the builds it needs that failed
    broken_builds: Sequence = ()
    #: Slurm's line saying it ended the job at its time limit, or ''
    slurm_time_limit: str = ''
    #: the report's own numbers say the job ran to its time limit
    past_time_limit: bool = False


def judge_outcome(o: CaseOutcome):
    """``(verdict, reason)`` of one test case."""
    if o.result in ('skip', 'fail_deps'):
        if o.skip_reason:
            # skipped by the check itself, whatever failed before it (a
            # transport the site file does not list: known before builds)
            return Verdict.SKIPPED, o.skip_reason
        if o.broken_builds:
            build, cause = o.broken_builds[0]
            return Verdict.BUILD_FAILED, (f'build-failed: {build} did not '
                                          f'build ({cause})')
        if o.result == 'fail_deps':
            return Verdict.COULD_NOT_CHECK, ('could not check: a test it '
                                             'depends on failed')
        return Verdict.SKIPPED, o.skip_reason or o.reason or 'skipped'
    judged = o.judged
    if judged in (Verdict.CRASH, Verdict.INCOMPLETE) and o.slurm_time_limit:
        # the output was cut short by Slurm
        return Verdict.HANG, (f'hang: the job exceeded its time limit '
                              f'({o.slurm_time_limit})')
    if judged is not None:
        if judged is Verdict.PASS and o.result in PASSED:
            return judged, o.proof
        if judged in (Verdict.PASS, Verdict.BELOW_REFERENCE) and \
                o.phase == 'performance':
            return Verdict.BELOW_REFERENCE, o.reason
        if judged is Verdict.PASS:
            # judged good, failed later: what ReFrame says is the verdict
            return Verdict.CRASH, f'{o.phase}: {o.reason}'
        return judged, o.reason
    # the check never judged: it did not get that far
    if o.phase == 'performance':    # sanity passed: only the sizes failed
        return Verdict.BELOW_REFERENCE, o.reason
    if o.result in PASSED:
        return Verdict.COULD_NOT_CHECK, ('could not check: the check passed '
                                         'in ReFrame but judged nothing')
    if o.slurm_time_limit:
        return Verdict.HANG, (f'hang: the job exceeded its time limit '
                              f'({o.slurm_time_limit})')
    if o.phase in ('run', 'run_wait') and o.past_time_limit:
        return Verdict.HANG, (f'hang: the job exceeded its time limit '
                              f'({o.reason})')
    if o.phase in ('compile', 'compile_wait'):
        return Verdict.BUILD_FAILED, f'build-failed: {o.reason}'
    if o.result == 'abort':
        return Verdict.ABORTED, f'aborted: {o.reason or "stopped"}'
    if o.phase in ('setup', 'startup', 'run') or not o.phase:
        return Verdict.COULD_NOT_CHECK, f'could not check: {o.reason}'
    return Verdict.CRASH, f'crash: {o.phase}: {o.reason}'
