"""The verdicts: one place that names them, says which are good, which are
failures and which mean the tool itself could not judge, and maps them to
exit codes.  Every consumer (the checks, the main command, the health hook,
``explain``, the store, the report) reads them from here.  The rules that give a case its verdict are the
judge's (:mod:`ccl_health.judge.judge`).

Only ``pass`` is good (and ``skipped``, which carries its reason).
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
