"""A readable verdict per transport from a ReFrame run report (JSON):
pass, or fail with the sizes that fell short and by how much."""

import dataclasses
import json
import os
from typing import List

from ccl_health import CclHealthError, read_text, shell
from ccl_health.judge import casejudge as judge
from ccl_health.judge.reference import busbw_perfvalues
from ccl_health.units import format_size
from ccl_health.judge.verdicts import Verdict, exit_code


@dataclasses.dataclass
class Shortfall:
    size: int
    value: float
    ref: float
    lower: float    # the tolerance as a negative fraction

    def as_tuple(self):
        """``(size, busbw, ref, tolerance)``, as the judge names one."""
        return self.size, self.value, self.ref, -self.lower


@dataclasses.dataclass
class CaseVerdict:
    name: str
    system: str
    partition: str
    transport: str
    verdict: str
    reason: str
    proven: str = ''
    collective: str = ''
    shortfalls: List[Shortfall] = dataclasses.field(default_factory=list)
    checked_sizes: int = 0
    measured: dict = dataclasses.field(default_factory=dict)  # size -> busbw
    #: the other performance values: name -> (value, unit)
    values: dict = dataclasses.field(default_factory=dict)
    versions: dict = dataclasses.field(default_factory=dict)
    acceptance: bool = False
    #: ReFrame's own result of the case (``pass``, ``fail``, ``skip``)
    rfm_result: str = ''

    @property
    def failed(self):
        """A failure for the exit code: a failing verdict, or in acceptance
        mode a case without its reference."""
        v = Verdict.parse(self.verdict)
        return v.failed or (self.acceptance and v is Verdict.NO_REFERENCE)

    def line(self):
        what = self.transport or self.name
        if self.collective and self.collective != 'all_reduce':
            what = f'{self.collective} {what}'
        head = f'{what:<15} {self.verdict.upper():<16}'
        if self.verdict == 'pass' and ' sizes within reference; ' in \
                self.reason:       # the judge's reason says it already
            return f'{head}{self.reason}'
        if self.verdict == 'pass' and not self.checked_sizes:
            # a check without sizes (a first call, a training step): what
            # it measured, and the judge's words
            did = ', '.join(f'{k} {v:g} {u or ""}'.rstrip()
                            for k, (v, u) in sorted(self.values.items()))
            return f'{head}' + '; '.join(x for x in (did, self.reason) if x)
        if self.verdict == 'pass':
            big = max(self.measured) if self.measured else None
            at = (f'; {self.measured[big]:.1f} GB/s at {format_size(big)}'
                  if big else '')
            checked = f'{self.checked_sizes} sizes within reference'

            return f'{head}{checked}{at}; {self.reason}'
        if self.verdict == 'below-reference' and self.shortfalls:
            worst = judge.shortfall_sizes(
                [s.as_tuple() for s in self.shortfalls], allowed=True)
            return (f'{head}{len(self.shortfalls)} of {self.checked_sizes} '
                    f'sizes below reference: {worst}')
        return f'{head}{self.reason}'


#: what slurmstepd writes to a job's stderr when Slurm ends it at its
#: time limit ("*** STEP 7.0 ON vm CANCELLED AT ... DUE TO TIME LIMIT ***")
SLURM_TIME_LIMIT = 'DUE TO TIME LIMIT'


def _slurm_time_limit(tc):
    """Slurm's line saying it ended the job at its time limit, or ''."""
    if not (tc.get('stagedir') and tc.get('job_stderr')):
        return ''
    return slurm_time_limit_line(os.path.join(tc['stagedir'],
                                              tc['job_stderr']))


def slurm_time_limit_line(stderr_path):
    """Slurm's line in a job's stderr saying it ended the job at its time
    limit, or ''.  Under Slurm no ReFrame error marks the time-out (the job
    just ends in state TIMEOUT, and the output is cut short): only
    slurmstepd's line says so."""
    try:
        with open(stderr_path, errors='replace') as fp:
            for line in fp:
                if SLURM_TIME_LIMIT in line:
                    return line.strip()
    except OSError:
        pass
    return ''


def _failed_fixtures(testcases):
    """{unique name: one-line cause} of the fixtures (builds) that failed in
    this run, or could not run because a build they need failed (libfabric
    failed, so the plugin never built: both count)."""
    from ccl_health.buildcache import failure_line
    failed = {}
    for tc in testcases:
        if tc.get('fixture') and tc.get('result') == 'fail':
            failed[tc.get('unique_name')] = (
                failure_line(tc.get('stagedir'), tc.get('build_stderr')) or
                ' '.join((tc.get('fail_reason') or 'failed').split()))
    grew = True
    while grew:
        grew = False
        for tc in testcases:
            name = tc.get('unique_name')
            if not tc.get('fixture') or name in failed or \
                    tc.get('result') == 'pass':
                continue
            root = sorted(_deps(tc) & set(failed))
            if root:
                failed[name] = f'needs {root[0]}: {failed[root[0]]}'
                grew = True
    return failed


def _past_time_limit(tc):
    """The job ran to its time limit (the run report's own numbers: how
    long it ran, and the limit, in seconds)."""
    try:
        return float(tc.get('time_run')) >= float(tc.get('time_limit'))
    except (TypeError, ValueError):
        return False


def _deps(tc):
    return {d[0] if isinstance(d, (list, tuple)) else d
            for d in tc.get('dependencies_actual') or []}


def _classify(tc, failed_builds=None):
    """(verdict, reason) of one test case of a run report: what the report
    says of it (:class:`ccl_health.judge.outcome.CaseOutcome`) judged by
    :func:`ccl_health.judge.outcome.judge_outcome`."""
    from ccl_health.judge.outcome import CaseOutcome, judge_outcome
    failed_builds = failed_builds or {}
    judged = Verdict.parse(tc.get('verdict') or '', Verdict.COULD_NOT_CHECK) \
        if tc.get('verdict') else None
    return judge_outcome(CaseOutcome(
        result=tc.get('result') or '', phase=tc.get('fail_phase') or '',
        reason=tc.get('verdict_reason') or
        ' '.join((tc.get('fail_reason') or '').split()),
        judged=judged, proof=tc.get('transport_proof') or '',
        skip_reason=tc.get('skip_reason') or '',
        broken_builds=[(b, failed_builds[b]) for b in
                       sorted(_deps(tc) & set(failed_builds))],
        slurm_time_limit=_slurm_time_limit(tc),
        past_time_limit=_past_time_limit(tc)))


def case_verdicts(report):
    """CaseVerdicts of the last run of every non-fixture test case."""
    runs = report.get('runs') or []
    if not runs:
        raise CclHealthError('run report has no runs')
    out = []
    testcases = runs[-1].get('testcases', [])
    failed_builds = _failed_fixtures(testcases)
    for tc in testcases:
        if tc.get('fixture'):
            continue
        verdict, reason = _classify(tc, failed_builds)
        if verdict is Verdict.NO_REFERENCE and tc.get('acceptance'):
            reason += ' (acceptance: every check needs its reference)'
        cv = CaseVerdict(tc.get('display_name') or tc.get('name', '?'),
                         tc.get('system', ''), tc.get('partition', ''),
                         tc.get('transport', ''), verdict, reason,
                         tc.get('proven_transport', ''),
                         tc.get('collective', ''),
                         versions=tc.get('versions') or {},
                         acceptance=bool(tc.get('acceptance')),
                         rfm_result=tc.get('result') or '')
        sized = {k for k in (tc.get('perfvalues') or {})
                 if k.rsplit(':', 1)[-1].startswith('busbw_')}
        for key, vals in (tc.get('perfvalues') or {}).items():
            if key not in sized and isinstance(vals, list) and vals and \
                    isinstance(vals[0], (int, float)):
                cv.values[key.rsplit(':', 1)[-1]] = (
                    vals[0], vals[4] if len(vals) > 4 else '')
        for size, vals in busbw_perfvalues(tc.get('perfvalues')):
            value, ref, lower = vals[0], vals[1], vals[2]
            cv.measured[size] = value
            if ref:
                cv.checked_sizes += 1
                if vals[-1] == 'fail':
                    cv.shortfalls.append(Shortfall(size, value, ref,
                                                   lower or 0.0))
        if cv.verdict == 'below-reference' and cv.shortfalls:
            # ReFrame's message lists them on later lines: say it in one
            cv.reason = 'below reference at ' + judge.shortfall_sizes(
                s.as_tuple() for s in cv.shortfalls)
        out.append(cv)
    return out


def load_report(path):
    """A ReFrame run report (a JSON object); anything else is one error
    line naming the file."""
    text = read_text(path, 'run report', encoding='utf-8')
    try:
        data = json.loads(text)
    except ValueError as err:           # json.JSONDecodeError
        raise CclHealthError(f'{path}: not a run report (not JSON: '
                             f'{err})') from None
    if not isinstance(data, dict):
        raise CclHealthError(f'{path}: not a ReFrame run report (a JSON '
                             f'{type(data).__name__}, not an object)')
    return data


def render(verdicts, where=None, db=None):
    """The verdict block; ``db``: the database a next step names."""
    lines = []
    for cv in verdicts:
        lines.append(cv.line())
    kinds = [Verdict.parse(cv.verdict) for cv in verdicts]
    npass = sum(v is Verdict.PASS for v in kinds)
    nskip = sum(v is Verdict.SKIPPED for v in kinds)
    nfail = sum(cv.failed for cv in verdicts)
    nunj = len(verdicts) - npass - nskip - nfail
    lines.append(f'{npass} passed, {nfail} failed, {nskip} skipped'
                 + (f', {nunj} not judged (no reference or could not check)'
                    if nunj else ''))
    lines += _reframe_and_next(verdicts, db)
    if where:
        lines.append(f'results stored in: {where}')
    return '\n'.join(lines)


def _reframe_and_next(verdicts, db=None):
    """Where ReFrame's own summary says FAILED of a case not judged here
    (no reference: ReFrame fails a performance check it has nothing to
    compare with), the line that says so; and, for cases without a
    reference (a new node's first run), the one next step."""
    out = []
    unref = [cv for cv in verdicts
             if Verdict.parse(cv.verdict) is Verdict.NO_REFERENCE]
    told = [cv for cv in verdicts if cv.rfm_result == 'fail' and
            not cv.failed]
    if told:
        names = ', '.join(cv.transport or cv.name for cv in told[:4]) + (
            ', ...' if len(told) > 4 else '')
        out.append(f'ReFrame\'s [ FAILED ] above counts {len(told)} '
                   f'case{"" if len(told) == 1 else "s"} not judged here '
                   f'({names}): without a reference ReFrame fails what it '
                   f'cannot compare; the verdict is this block\'s')
    if unref and not any(cv.failed for cv in verdicts):
        sysparts = sorted({(cv.system, cv.partition) for cv in unref})
        sys_, part = sysparts[0] if len(sysparts) == 1 else \
            ('<system>', '<partition>')
        out.append(f'next: record their reference from this run\'s '
                   f'measurements (docs/sites.md, "References and '
                   f'calibration"): scripts/calibrate --db '
                   f'{shell.quote(db) if db else "<database>"} '
                   f'--system {sys_ or "<system>"} --partition '
                   f'{part or "<partition>"}')
    return out


def run_exit_code(verdicts):
    """0 all good, 1 any failure, 2 something not judged or nothing run
    (never an all-clear)."""
    if not verdicts:
        return 2
    if any(cv.failed for cv in verdicts):
        return 1
    return exit_code([cv.verdict for cv in verdicts])
