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


def judge_output(result, exit_status, expected_sizes=None, what='the run',
                 **kw):
    """:func:`ccl_health.judge.judge.judge_output` (the judge owns it)."""
    from ccl_health.judge import judge
    return judge.judge_output(result, exit_status, expected_sizes, what, **kw)


def below_reference(value, ref, tolerance):
    """:func:`ccl_health.judge.judge.below_reference`."""
    from ccl_health.judge import judge
    return judge.below_reference(value, ref, tolerance)


def shortfalls(result, ref_entry):
    """:func:`ccl_health.judge.judge.shortfalls`."""
    from ccl_health.judge import judge
    return judge.shortfalls(result, ref_entry)


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


def _gb(x):
    return f'{x:.1f}'


def judge_links(result, exit_status, peer_copy=None, label=str,
                expect_gpus=None):
    """Judge a copy matrix (:class:`ccl_health.evidence.links.LinksResult`) of
    ``ccl-health-links`` or nvbandwidth: ``(verdict, one-line reason,
    judged)``, ``judged`` a list of ``(link, reference or None, lower
    bound or None, ok)`` for every measured direction.

    ``pass`` only when the program exited 0 with its closing line, saw
    ``expect_gpus`` GPUs, measured every direction of every pair that can
    peer (with one GPU: inside it and host<->GPU), all finite and positive,
    and no direction with a reference (``peer_copy``, a
    :class:`ccl_health.judge.reference.PeerCopy` of the size the program copied)
    is below it.  A pair that cannot peer is a ``fallback`` (its copies go
    through the host) where the reference has a GPU->GPU value; without
    one it is named but not judged.  A CUDA / HIP error is a ``crash``, a
    wrong byte ``wrong-results``, a usage error ``could-not-check``.
    ``label`` turns the program's GPU index into the node's."""
    from ccl_health.evidence.links import GPU_TO_GPU
    judged = []
    errs = list(result.errors)
    if any(e.startswith('usage error') for e in errs):
        return Verdict.COULD_NOT_CHECK, (f'{result.tool}: {errs[0]}'), judged
    wrong = [e for e in errs if 'wrong data' in e]
    if wrong:
        return Verdict.WRONG_RESULTS, f'{result.tool}: {wrong[0][:200]}', \
            judged
    if errs:
        return Verdict.CRASH, f'{result.tool}: {errs[0][:200]}', judged
    if exit_status != 0:
        return Verdict.CRASH, (f'{result.tool} exited with status '
                               f'{exit_status}'), judged
    if not result.complete:
        return Verdict.INCOMPLETE, (f'{result.tool} stopped before its '
                                    f'closing line ({len(result.links)} '
                                    f'directions measured)'), judged
    if expect_gpus is not None and result.gpu_count != expect_gpus:
        return Verdict.MISSING_GPU, (
            f'missing GPU: {result.tool} sees {result.gpu_count} of the '
            f'{expect_gpus} GPUs made visible to it'), judged
    seen = {(ln.src, ln.dst) for ln in result.links}
    missing = [d for d in result.expected_directions() if d not in seen]
    if missing:
        return Verdict.INCOMPLETE, (
            f'{result.tool} did not measure '
            + ', '.join(_direction(a, b, label) for a, b in missing[:6])), \
            judged
    bad_values = [ln for ln in result.links
                  if not finite(ln.gbps) or ln.gbps <= 0]
    if bad_values:
        return Verdict.WRONG_RESULTS, (
            f'{result.tool}: non-finite or zero bandwidth for '
            + ', '.join(f'{ln.name(label)} ({ln.gbps})'
                        for ln in bad_values[:6])), judged
    usable = peer_copy if peer_copy is not None and (
        result.bytes is None or peer_copy.size == result.bytes) else None
    slow = []
    for ln in result.links:
        ref = usable.expected(ln, label) if usable else None
        if ref is None:
            judged.append((ln, None, None, True))
            continue
        from ccl_health.judge.judge import allowed
        lo = allowed(ref, usable.tolerance)
        ok = not below_reference(ln.gbps, ref, usable.tolerance)
        judged.append((ln, ref, lo, ok))
        if not ok:
            slow.append((ln, ref, lo))
    no_peer = sorted(set(result.no_peer))
    fails = []
    if no_peer and usable is not None and usable.gbps.get(GPU_TO_GPU):
        fails.append((Verdict.FALLBACK, '; '.join(
            f'GPU {label(a)}->{label(b)} cannot peer (no peer access: its '
            f'copies would go through the host)' for a, b in no_peer)))
    if slow:
        fails.append((Verdict.BELOW_REFERENCE, '; '.join(
            f'{ln.name(label)} copy {_gb(ln.gbps)} GB/s < {_gb(lo)} '
            f'(reference {_gb(ref)})' for ln, ref, lo in slow)))
    if fails:
        v = worst([f[0] for f in fails])
        return v, '; '.join(why for _, why in fails), judged
    return Verdict.PASS, '', judged


def _direction(a, b, label):
    """``GPU 1->2``, ``host->GPU 0``, ``GPU 0->host``, by node index."""
    if 'host' not in (a, b):
        return f'GPU {label(int(a))}->{label(int(b))}'
    return (f'host->GPU {label(int(b))}' if a == 'host' else
            f'GPU {label(int(a))}->host')
