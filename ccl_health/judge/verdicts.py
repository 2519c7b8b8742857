"""The verdicts: one place that names them, says which are good, which are
failures and which mean the tool itself could not judge, and maps them to
exit codes.  Every consumer (the checks, the main command, the health hook,
``explain``, the store, the report) reads them from here.  The rules that give a case its verdict are the
judge's (:mod:`ccl_health.judge.casejudge`).

Only ``pass`` is good (and ``skipped``, which carries its reason).

The groups of verdicts are derived here from each verdict's kind and
whether it measured its key, under names no other group shares:
:data:`GOOD`, :data:`FAILING`, :data:`UNJUDGED`, :data:`MEASURED`,
:data:`IN_BASELINE`, :data:`LOW` and :data:`BROKEN`.  Nothing else spells a
group out (``tests/test_one_definition.py``).
"""

import enum
import math
from typing import Optional


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
    #: (:mod:`ccl_health.evidence.nodestate`), shows a fault that drains it (an
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

    @property
    def measured(self):
        """The case measured every size of its key as asked and was judged
        on them: its values are the key's (passed, below the reference, or
        below the history baseline).  Any other verdict's values, where it
        has some, are not: another transport, shared GPUs, wrong results,
        cut short, or nothing to judge them by (``no-reference``: a
        calibration's input, not a value of the key's history)."""
        return self in _MEASURED

    @property
    def in_baseline(self):
        """Its values may join the key's history baseline: measured, and
        not a drop (a value judged below that baseline is a finding
        against it, never a part of it)."""
        return self.measured and self is not Verdict.DROP

    @property
    def low(self):
        """A value measured below what it was judged against (the
        reference or the history baseline)."""
        return self.measured and not self.good

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

_MEASURED = frozenset((Verdict.PASS, Verdict.BELOW_REFERENCE, Verdict.DROP))

#: every verdict name, in report order
NAMES = tuple(v.value for v in Verdict)
#: the good ones: a healthy case or check (:attr:`Verdict.good`: ``pass``,
#: and ``skipped`` with its reason); any other is counted as not good
GOOD = tuple(v.value for v in Verdict if v.good)
#: the failing ones (exit 1)
FAILING = tuple(v.value for v in Verdict if v.failed)
#: the ones where nothing was judged (exit 2)
UNJUDGED = tuple(v.value for v in Verdict if v.unjudged)
#: the cases whose values are their key's (:attr:`Verdict.measured`)
MEASURED = tuple(v.value for v in Verdict if v.measured)
#: the cases whose values make a key's history baseline
#: (:attr:`Verdict.in_baseline`): measured and not a drop
IN_BASELINE = tuple(v.value for v in Verdict if v.in_baseline)
#: the values measured low (:attr:`Verdict.low`): below the reference or
#: the history baseline
LOW = tuple(v.value for v in Verdict if v.low)
#: the cases neither good nor measured: no value of the key to show, only
#: that it broke (a trend plot marks them)
BROKEN = tuple(v.value for v in Verdict if not v.good and not v.measured)

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
