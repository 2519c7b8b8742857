"""The collectives of nccl-tests and their bus bandwidth.

nccl-tests reports two bandwidths: ``algbw = S / t`` and ``busbw = algbw *
factor``, where the factor depends on the collective and the number of ranks
``n`` (nccl-tests ``doc/PERFORMANCE.md``, "Summary"; sendrecv, gather and
scatter from ``src/<collective>.cu``)::

    all_reduce                        2(n-1)/n
    all_gather, reduce_scatter,
    alltoall, gather, scatter          (n-1)/n
    broadcast, reduce, sendrecv        1

``S`` is the size nccl-tests prints in its ``size`` column: for all_gather
and reduce_scatter the whole array (``count * n * sizeof(type)``, the
``count`` column being per rank).

The *ideal* busbw is what the links a rank uses could carry at best: the
NVLink bandwidth of one GPU (links x per-link bandwidth of the NVLink
generation, one direction) inside a node, the NIC line rate between nodes.
busbw / ideal is the efficiency.

Pure: no torch, no ReFrame.
"""

import dataclasses
import re
from typing import Callable

from ccl_health import CclHealthError
from ccl_health.sitedata import transports


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective, as the suite knows it."""
    name: str
    #: busbw / algbw as a function of the number of ranks n
    factor: Callable[[int], float]
    #: nccl-tests / rccl-tests print every size asked for: the buffer is
    #: not divided over the ranks (for the others, count = bytes / type
    #: size / ranks rounds the sizes)
    exact_sizes: bool = False
    #: the suite sweeps it with the test programs' ``<name>_perf``
    swept: bool = True
    #: the framework checks run it through torch.distributed by default
    torch_default: bool = False


def _whole(n):
    return 2.0 * (n - 1) / n


def _share(n):
    return (n - 1) / n


def _one(n):
    return 1.0


#: every collective the suite knows, in the order it reports them: the one
#: list the others are derived from
COLLECTIVES = {c.name: c for c in (
    Collective('all_reduce', _whole, exact_sizes=True, torch_default=True),
    Collective('all_gather', _share, torch_default=True),
    Collective('reduce_scatter', _share, torch_default=True),
    Collective('broadcast', _one, exact_sizes=True, torch_default=True),
    Collective('reduce', _one, exact_sizes=True),
    Collective('alltoall', _share),
    Collective('sendrecv', _one),
    Collective('gather', _share, swept=False),
    Collective('scatter', _share, swept=False),
)}

#: every collective the suite sweeps (all_reduce first); torch_bench runs
#: the same ones through torch.distributed
SWEPT = tuple(n for n, c in COLLECTIVES.items() if c.swept)
#: what the framework checks run through torch.distributed by default
TORCH_DEFAULT = tuple(n for n, c in COLLECTIVES.items() if c.torch_default)

#: GB/s per link and direction, by NVLink generation (NVLink 1: P100,
#: 2: V100, 3: A100, 4: H100/H200, 5: B200)
NVLINK_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}

#: NVLink generation by CUDA compute capability (major)
_NVLINK_GEN_BY_SM_MAJOR = {6: 1, 7: 2, 8: 3, 9: 4, 10: 5}


def canonical(collective):
    """``'all_reduce'`` from ``all_reduce``, ``all_reduce_perf``,
    ``torch_all_reduce``, ``AllReduce`` or ``allreduce``."""
    name = str(collective).strip()
    name = name.rsplit('/', 1)[-1]
    for pre in ('torch_',):
        if name.startswith(pre):
            name = name[len(pre):]
    if name.endswith('_perf'):
        name = name[:-len('_perf')]
    name = re.sub(r'(?<=[a-z])(?=[A-Z])', '_', name).lower()
    if name in COLLECTIVES:
        return name
    squashed = name.replace('_', '')
    for known in COLLECTIVES:
        if known.replace('_', '') == squashed:
            return known
    raise CclHealthError(f'unknown collective {collective!r} (known: '
                         f'{", ".join(sorted(COLLECTIVES))})')


def busbw_factor(collective, nranks):
    """busbw / algbw of ``collective`` on ``nranks`` ranks, as nccl-tests
    computes it."""
    if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
        raise CclHealthError(f'number of ranks must be a positive integer, '
                             f'got {nranks!r}')
    return COLLECTIVES[canonical(collective)].factor(nranks)


def ranks_of_factor(collective, pairs, half_unit=0.005, most=1 << 20):
    """The rank count whose busbw / algbw factor of ``collective`` every
    ``(algbw, busbw)`` of ``pairs`` shows, as nccl-tests prints them
    (``%.2f``: each within ``half_unit``), or None when the numbers allow
    no single count (a factor that does not depend on it, values too small
    or too close to tell counts apart)."""
    factor = COLLECTIVES[canonical(collective)].factor
    if factor(2) == factor(most):
        return None
    lo, hi = 1, most
    for a, b in pairs:
        if a is None or b is None or not a >= 1.0 or not b >= 0:
            continue
        f_lo = (b - half_unit) / (a + half_unit)
        f_hi = (b + half_unit) / (a - half_unit)
        lo = max(lo, _first(factor, lambda f: f >= f_lo, lo, most))
        hi = min(hi, _first(factor, lambda f: f > f_hi, lo, most + 1) - 1)
        if lo > hi:
            return None
    return lo if lo == hi else None


def _first(factor, ok, lo, hi):
    """The smallest n in lo..hi with ``ok(factor(n))`` (``factor`` grows
    with n), else hi."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(factor(mid)):
            hi = mid
        else:
            lo = mid + 1
    return lo


def busbw(algbw, collective, nranks):
    """Bus bandwidth from algorithm bandwidth (same unit)."""
    return algbw * busbw_factor(collective, nranks)


def algbw(nbytes, seconds):
    """``S / t`` in GB/s (1e9 bytes, as nccl-tests)."""
    if seconds <= 0:
        raise CclHealthError(f'time must be positive, got {seconds!r} s')
    return nbytes / seconds / 1e9


def nvlink_generation(arch):
    """NVLink generation of a GPU from its architecture (``sm_90``, ``9.0``,
    ``(9, 0)``); None when unknown or not NVIDIA."""
    if isinstance(arch, tuple):
        major = arch[0]
    else:
        m = re.match(r'^(?:sm_)?(\d+?)(?:\.?\d)$', str(arch).strip())
        if not m:
            return None
        major = int(m.group(1))
    return _NVLINK_GEN_BY_SM_MAJOR.get(int(major))


def nvlink_busbw(generation, links):
    """One GPU's NVLink bandwidth, one direction, GB/s: ``links`` x the
    per-link bandwidth of ``generation`` (H100/H200 NV18: 18 x 25 = 450;
    A100 NV12: 300)."""
    if generation not in NVLINK_GBPS_PER_LINK:
        raise CclHealthError(f'unknown NVLink generation {generation!r} '
                             f'(known: {sorted(NVLINK_GBPS_PER_LINK)})')
    if isinstance(links, bool) or not isinstance(links, int) or links < 1:
        raise CclHealthError(f'NVLink links must be a positive integer, '
                             f'got {links!r}')
    return links * NVLINK_GBPS_PER_LINK[generation]


def nic_busbw(line_rate_gbps, nics=1):
    """What ``nics`` NICs of ``line_rate_gbps`` Gb/s carry in GB/s."""
    if line_rate_gbps is None or line_rate_gbps <= 0:
        raise CclHealthError(f'NIC line rate must be positive Gb/s, got '
                             f'{line_rate_gbps!r}')
    return line_rate_gbps / 8.0 * nics


def ideal_busbw(transport, *, nvlink_gen=None, nvlink_links=None,
                nic_gbps=None, nics_per_gpu=1):
    """The best busbw the links of ``transport`` allow, GB/s, or None when
    the facts needed are unknown.

    Where it comes from is the transport's record
    (:attr:`ccl_health.sitedata.transports.Transport.ideal_from`): ``intra``, the
    GPU's NVLink (generation x links); the network transports, the NIC line
    rate (Gb/s / 8) of the NICs one GPU uses."""
    source = transports.get(transport).ideal_from
    if source == transports.IDEAL_NVLINK:
        if nvlink_gen is None or not nvlink_links:
            return None
        return nvlink_busbw(nvlink_gen, nvlink_links)
    if not nic_gbps:
        return None
    return nic_busbw(nic_gbps, nics_per_gpu)


def efficiency_pct(busbw_value, ideal):
    """busbw / ideal in percent, or None without an ideal."""
    if not ideal or busbw_value is None:
        return None
    return 100.0 * busbw_value / ideal


# -- link facts from nvidia-smi ---------------------------------------------

_TOPO_NV = re.compile(r'^NV(\d+)$')
_ANSI = re.compile(r'\x1b\[[0-9;]*m')


def parse_topo_nvlinks(text):
    """``{(i, j): links}`` from ``nvidia-smi topo -m`` (cells ``NV18``).
    nvidia-smi underlines the header with terminal escapes, even into a
    file: they are dropped first."""
    out = {}
    header = None
    for line in _ANSI.sub('', text).splitlines():
        toks = line.split()
        if not toks:
            continue
        if header is None:
            if re.match(r'^GPU\d+$', toks[0]):
                header = [t for t in toks if re.match(r'^GPU\d+$', t)]
            continue
        m = re.match(r'^GPU(\d+)$', toks[0])
        if not m:
            continue
        i = int(m.group(1))
        for col, cell in zip(header, toks[1:]):
            nv = _TOPO_NV.match(cell)
            if nv:
                out[(i, int(col[3:]))] = int(nv.group(1))
    return out


def nvlinks_per_gpu(topo, gpus):
    """Links of each GPU in ``gpus`` towards the others in ``gpus``: the
    largest ``NV<k>`` of its row (with an NVSwitch every pair shows all of
    the GPU's links), or 0 without NVLink.  Returns the smallest over
    ``gpus`` (the slowest GPU bounds a collective)."""
    gpus = list(gpus)
    per = []
    for i in gpus:
        links = [topo.get((i, j), 0) for j in gpus if j != i]
        per.append(max(links) if links else 0)
    return min(per) if per else 0
