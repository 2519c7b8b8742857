"""The verdicts: one place that names them, says which are good, which are
failures and which mean the tool itself could not judge, and maps them to
exit codes.  Every consumer (the checks, the main command, the health hook,
``explain``, the store, the report) reads them from here.

Only ``pass`` is good (and ``skipped``, which carries its reason).  A
verdict rests on positive evidence: :func:`judge_sweep` says ``pass`` only
when the program exited 0, its output is complete, every size is present and
finite, nothing is wrong or out of bounds, the transport is proven and the
reference for the exact key was found.
"""

import enum
import math
from typing import Optional, Tuple


class Kind(enum.Enum):
    GOOD = 'good'              # pass
    FAIL = 'fail'              # a measured fault: exit 1
    UNJUDGED = 'unjudged'      # the tool could not judge: exit 2
    SKIP = 'skip'              # not run, with its reason


class Verdict(str, enum.Enum):
    PASS = 'pass'
    BELOW_REFERENCE = 'below-reference'
    DROP = 'drop'
    FALLBACK = 'fallback'
    WRONG_RESULTS = 'wrong-results'
    HANG = 'hang'
    CRASH = 'crash'
    #: the node's driver lists fewer GPUs than its partition has (the
    #: health hook): a fault of the node, not of a program
    MISSING_GPU = 'missing-gpu'
    #: the node's own state, read through the vendor library
    #: (:mod:`ccl_health.nodestate`), shows a fault that drains it (an
    #: NVLink link down, uncorrectable ECC, a row-remap failure, a drain
    #: XID) while the probes themselves passed
    NODE_FAULT = 'node-fault'
    INCOMPLETE = 'incomplete'
    BUILD_FAILED = 'build-failed'
    CONTENDED = 'contended'
    ABORTED = 'aborted'
    NO_REFERENCE = 'no-reference'
    COULD_NOT_CHECK = 'could-not-check'
    SKIPPED = 'skipped'

    def __str__(self):
        return self.value

    @property
    def kind(self):
        return _KIND[self]

    @property
    def good(self):
        return self.kind in (Kind.GOOD, Kind.SKIP)

    @property
    def failed(self):
        return self.kind is Kind.FAIL

    @property
    def unjudged(self):
        return self.kind is Kind.UNJUDGED

    @classmethod
    def parse(cls, text, default=None):
        """The verdict named ``text`` (as stored), or ``default``."""
        try:
            return cls(str(text))
        except ValueError:
            if default is not None:
                return default
            raise


_KIND = {v: Kind.FAIL for v in Verdict}
_KIND.update({Verdict.PASS: Kind.GOOD, Verdict.SKIPPED: Kind.SKIP,
              Verdict.NO_REFERENCE: Kind.UNJUDGED,
              Verdict.COULD_NOT_CHECK: Kind.UNJUDGED})

#: every verdict name, in report order
NAMES = tuple(v.value for v in Verdict)
#: the failing ones (exit 1)
FAILING = tuple(v.value for v in Verdict if v.failed)
#: the ones where nothing was judged (exit 2)
UNJUDGED = tuple(v.value for v in Verdict if v.unjudged)

EXIT_OK, EXIT_FAIL, EXIT_UNJUDGED = 0, 1, 2


def exit_code(verdicts):
    """0 when every verdict is good, 1 when any failed, else 2 (something
    could not be judged: never an all-clear)."""
    vs = [Verdict.parse(v) for v in verdicts]
    if any(v.failed for v in vs):
        return EXIT_FAIL
    if any(v.unjudged for v in vs):
        return EXIT_UNJUDGED
    return EXIT_OK


def finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and \
        math.isfinite(x)


def judge_output(result, exit_status, expected_sizes=None, what='the run'):
    """Judge the program's output alone (no transport, no reference).

    ``result`` is a :class:`~ccl_health.nccltests.SweepResult`,
    ``exit_status`` the program's exit status (None when unknown: that is
    not positive evidence), ``expected_sizes`` the message sizes asked for.
    Returns ``None`` only when the program exited 0, its output is complete
    (its closing lines), every expected size is there with finite values,
    nothing is wrong and nothing out of bounds; else ``(verdict, one-line
    reason)``.  What the output shows (a hang, wrong or non-finite values,
    an error line) names the failure before the exit status does."""
    errs = list(getattr(result, 'errors', []) or [])
    first_err = f': {errs[0][:200]}' if errs else ''
    rows = list(getattr(result, 'rows', []) or [])
    if getattr(result, 'timed_out', False):
        return Verdict.HANG, f'hang: {what} timed out an operation{first_err}'
    bad = _nonfinite_sizes(result, rows)
    if bad:
        return Verdict.WRONG_RESULTS, (
            f'wrong-results: non-finite time or bandwidth (nan / inf) at '
            f'{len(bad)} size(s), first {bad[0]} B')
    wrong = [r.size for r in rows if r.wrong]
    deltas = [m.max_delta for r in rows for m in (r.out_of_place, r.in_place)
              if m is not None and m.wrong and
              getattr(m, 'max_delta', None) is not None]
    if deltas:       # nccl-tests < 2.12: the largest difference per result
        return Verdict.WRONG_RESULTS, (
            f'wrong-results: results beyond the tolerance at {len(wrong)} '
            f'size(s) (largest difference {max(deltas):g}), first '
            f'{wrong[0]} B')
    if wrong:
        return Verdict.WRONG_RESULTS, (
            f'wrong-results: {sum(r.wrong for r in rows if r.wrong)} wrong '
            f'elements at {len(wrong)} size(s), first {wrong[0]} B')
    oob = getattr(result, 'out_of_bounds', None)
    if oob:
        return Verdict.WRONG_RESULTS, (
            f'wrong-results: {what} reported {oob} out-of-bounds value(s) '
            f'("Out of bounds values : {oob} FAILED")')
    if exit_status is not None and exit_status != 0:
        done = (' after a complete table' if getattr(result, 'complete',
                                                     False) else '')
        return Verdict.CRASH, (f'crash: {what} exited with status '
                               f'{exit_status}{done}{first_err}')
    if errs:
        return Verdict.CRASH, f'crash: {what} reported an error{first_err}'
    if not rows:
        if exit_status is None and getattr(result, 'closed', False) is None:
            return Verdict.COULD_NOT_CHECK, (
                f'could not check: no result rows from {what}')
        return Verdict.INCOMPLETE, f'incomplete: {what} printed no result rows'
    if not getattr(result, 'complete', False):
        if getattr(result, 'closed', False) is None and \
                str(getattr(result, 'format', '')).endswith('json-lines'):
            return Verdict.COULD_NOT_CHECK, (
                f'could not check: rccl-tests JSON lines carry no closing '
                f'summary; give the stdout of {what} too')
        return Verdict.INCOMPLETE, (
            f'incomplete: {what} stopped after {len(rows)} size(s) without '
            f'its closing summary ("Out of bounds values" / "Avg bus '
            f'bandwidth" lines)')
    if expected_sizes:
        got = {r.size for r in rows}
        missing = [s for s in expected_sizes if s not in got]
        if missing:
            return Verdict.INCOMPLETE, (
                f'incomplete: {len(missing)} of {len(expected_sizes)} sizes '
                f'missing from the output, first {missing[0]} B')
    if all(r.wrong is None for r in rows):
        return Verdict.COULD_NOT_CHECK, (
            f'could not check: {what} did not check its results (#wrong '
            f'N/A: run without -c 0)')
    if getattr(result, 'avg_busbw_failed', False):
        return Verdict.BELOW_REFERENCE, (
            f'below-reference: {what}\'s own average bus bandwidth check '
            f'(NCCL_TESTS_MIN_BW) failed: {result.avg_busbw} GB/s')
    if exit_status is None:
        return Verdict.COULD_NOT_CHECK, (
            f'could not check: the exit status of {what} is unknown')
    return None


def _nonfinite_sizes(result, rows):
    out = []
    for r in rows:
        ms = [m for m in (r.out_of_place, r.in_place) if m is not None]
        if not ms or r.busbw is None or any(
                getattr(m, 'invalid', None) or not all(
                    map(finite, (m.time_us, m.algbw, m.busbw))) for m in ms):
            out.append(r.size)
    return out


def judge_sweep(result, exit_status, proof, ref_entry, *,
                expected_sizes=None, what='the run', missing_reference=''
                ) -> Tuple[Verdict, str]:
    """The verdict of one sweep from all its evidence: the output
    (:func:`judge_output`), the transport proof (``proof.ok``,
    ``proof.reason``; None when not proven), and the reference entry for the
    exact key (None: ``no-reference``, never a pass).  Performance against
    the reference per size is ReFrame's (or the caller's) job after this;
    ``pass`` here means "complete, correct, proven, and comparable"."""
    bad = judge_output(result, exit_status, expected_sizes, what)
    if bad:
        return bad
    if proof is None:
        return Verdict.COULD_NOT_CHECK, ('could not check: the transport '
                                         'was not proven (no debug log)')
    if not proof.ok:
        if getattr(proof, 'proven', None) is None:
            return Verdict.COULD_NOT_CHECK, f'could not check: {proof.reason}'
        return Verdict.FALLBACK, f'fallback: {proof.reason}'
    if ref_entry is None:
        return Verdict.NO_REFERENCE, (
            f'no-reference: {missing_reference}'
            if missing_reference else 'no-reference: no reference entry')
    return Verdict.PASS, proof.reason


def below_reference(value, ref, tolerance):
    """The one rule of a size against its reference: below ``ref x (1 -
    tolerance)``, or not a finite number at all (a nan passes every
    comparison)."""
    return not finite(value) or value < ref * (1 - tolerance)


def shortfalls(result, ref_entry):
    """``[(size, busbw, ref, allowed_fraction)]`` of sizes below the
    reference's lower bound."""
    out = []
    if ref_entry is None:
        return out
    for row in result.rows:
        ref = ref_entry.busbw.get(row.size)
        if ref is None:
            continue
        tol = ref_entry.tolerance_at(row.size)
        if below_reference(row.busbw, ref, tol):
            out.append((row.size, row.busbw, ref, tol))
    return out


def worst(verdicts) -> Optional[Verdict]:
    """The verdict that speaks for a set: a failure over unjudged over
    good."""
    vs = [Verdict.parse(v) for v in verdicts]
    for v in vs:
        if v.failed:
            return v
    for v in vs:
        if v.unjudged:
            return v
    return vs[0] if vs else None
