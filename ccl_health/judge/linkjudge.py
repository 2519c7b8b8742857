"""The judge of the GPU links: a copy matrix of ``ccl-health-links`` or
nvbandwidth (:class:`ccl_health.evidence.copymatrix.LinksResult`) against the
partition's ``peer_copy`` reference (:func:`judge_links`).  The health
hook's copy-matrix probe hands its result here; the all_reduce probes go
through :func:`ccl_health.judge.casejudge.judge`."""

from ccl_health.judge.casejudge import allowed, below_reference
from ccl_health.judge.verdicts import Verdict, finite, worst


def _gb(x):
    return f'{x:.1f}'


def judge_links(result, exit_status, peer_copy=None, label=str,
                expect_gpus=None):
    """Judge a copy matrix (:class:`ccl_health.evidence.copymatrix.LinksResult`) of
    ``ccl-health-links`` or nvbandwidth: ``(verdict, one-line reason,
    judged)``, ``judged`` a list of ``(link, reference or None, lower
    bound or None, ok)`` for every measured direction.

    ``pass`` only when the program exited 0 with its closing line, saw
    ``expect_gpus`` GPUs, measured every direction of every pair that can
    peer (with one GPU: inside it and host<->GPU), all finite and positive,
    and no direction with a reference (``peer_copy``, a
    :class:`ccl_health.judge.reference.PeerCopy` of the size the program
    copied) is below it.  A pair that cannot peer is a ``fallback`` (its copies go
    through the host) where the reference has a GPU->GPU value; without
    one it is named but not judged.  A CUDA / HIP error is a ``crash``, a
    wrong byte ``wrong-results``, a usage error ``could-not-check``.
    ``label`` turns the program's GPU index into the node's."""
    from ccl_health.evidence.copymatrix import GPU_TO_GPU
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
