"""A readable verdict per transport from a ReFrame run report (JSON):
pass, or fail with the sizes that fell short and by how much."""

import dataclasses
import json
import os
from typing import List

from . import CclHealthError
from .reference import busbw_perfvalues
from .units import format_size

VERDICTS = ('pass', 'below-reference', 'drop', 'fallback', 'wrong-results',
            'hang', 'crash', 'build-failed', 'could-not-check', 'skipped')


@dataclasses.dataclass
class Shortfall:
    size: int
    value: float
    ref: float
    lower: float    # the tolerance as a negative fraction

    @property
    def below_pct(self):
        return 100.0 * (self.ref - self.value) / self.ref


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
    versions: dict = dataclasses.field(default_factory=dict)

    def line(self):
        what = self.transport or self.name
        if self.collective and self.collective != 'all_reduce':
            what = f'{self.collective} {what}'
        head = f'{what:<15} {self.verdict.upper():<16}'
        if self.verdict == 'pass':
            big = max(self.measured) if self.measured else None
            at = (f'; {self.measured[big]:.1f} GB/s at {format_size(big)}'
                  if big else '')
            checked = (f'{self.checked_sizes} sizes within reference'
                       if self.checked_sizes else 'no reference for these '
                       'sizes (recorded only)')
            return f'{head}{checked}{at}; {self.reason}'
        if self.verdict == 'below-reference' and self.shortfalls:
            worst = ', '.join(
                f'{format_size(s.size)} {s.value:.2f} vs {s.ref:.2f} GB/s '
                f'(-{s.below_pct:.0f}%, allowed -{-s.lower * 100:.0f}%)'
                for s in self.shortfalls)
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


def _classify(tc):
    phase = tc.get('fail_phase') or ''
    reason = (tc.get('fail_reason') or '').strip().splitlines()
    reason = reason[0] if reason else ''
    verdict_var = tc.get('verdict') or ''
    if tc.get('result') == 'skip':
        return 'skipped', tc.get('skip_reason') or 'skipped'
    if tc.get('result') in ('pass', 'success', 'xfail'):
        return 'pass', tc.get('transport_proof') or ''
    if 'could not check' in reason:
        return 'could-not-check', reason[reason.index('could not check'):]
    if phase == 'performance':
        return 'below-reference', reason
    killed = _slurm_time_limit(tc) if phase == 'sanity' and \
        verdict_var in ('crash', '') else ''
    if killed:
        return 'hang', f'hang: the job exceeded its time limit ({killed})'
    if phase == 'sanity':
        return (verdict_var if verdict_var in VERDICTS and
                verdict_var != 'pass' else 'crash'), reason
    if phase in ('run', 'run_wait') and ('timed out' in reason or
                                         'TIMEOUT' in reason or
                                         'time limit' in reason):
        return 'hang', f'hang: the job exceeded its time limit ({reason})'
    if phase in ('compile', 'compile_wait') or 'dependencies failed' in \
            reason or 'fixture' in reason:
        return 'build-failed', reason
    if phase == 'setup':
        return 'could-not-check', reason
    return 'crash', f'{phase}: {reason}' if phase else reason


def case_verdicts(report):
    """CaseVerdicts of the last run of every non-fixture test case."""
    runs = report.get('runs') or []
    if not runs:
        raise CclHealthError('run report has no runs')
    out = []
    for tc in runs[-1].get('testcases', []):
        if tc.get('fixture'):
            continue
        verdict, reason = _classify(tc)
        cv = CaseVerdict(tc.get('display_name') or tc.get('name', '?'),
                         tc.get('system', ''), tc.get('partition', ''),
                         tc.get('transport', ''), verdict, reason,
                         tc.get('proven_transport', ''),
                         tc.get('collective', ''),
                         versions=tc.get('versions') or {})
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
            cv.reason = 'below reference at ' + ', '.join(
                f'{format_size(s.size)} {s.value:.2f} vs {s.ref:.2f} GB/s '
                f'(-{s.below_pct:.0f}%)' for s in cv.shortfalls)
        out.append(cv)
    return out


def load_report(path):
    try:
        with open(path) as fp:
            return json.load(fp)
    except (OSError, json.JSONDecodeError) as err:
        raise CclHealthError(f'{path}: cannot read the run report: {err}') \
            from None


def render(verdicts, where=None):
    lines = []
    for cv in verdicts:
        lines.append(cv.line())
    npass = sum(cv.verdict == 'pass' for cv in verdicts)
    nskip = sum(cv.verdict == 'skipped' for cv in verdicts)
    nfail = len(verdicts) - npass - nskip
    lines.append(f'{npass} passed, {nfail} failed, {nskip} skipped')
    if where:
        lines.append(f'results stored in: {where}')
    return '\n'.join(lines)
