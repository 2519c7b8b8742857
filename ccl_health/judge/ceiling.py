"""The bound of the impossible-number check: the busbw no run of a case
can reach, derived per case from what is known of it (:func:`bound`).

The check exists to catch garbage (a busbw of 1e308, a negative or zero
time: :func:`ccl_health.judge.casejudge.judge_output`), never a fast healthy
run, so every bound here is generous, and its reason says how it was
derived.  What busbw can reach (nccl-tests ``doc/PERFORMANCE.md``: busbw =
algbw x 2(n-1)/n for all_reduce):

* inside a node, one GPU's NVLink (links x GB/s per link, one direction)
  carries a ring's busbw; with NVLink SHARP (NVLS) the switch reduces, so a
  GPU sends and receives each byte about once and busbw = algbw x 2(n-1)/n
  reaches nearly twice the link rate (an 8 x H100/H200 node: 460-486 GB/s
  over 18 x 25 GB/s links).  The intra-node part is therefore bounded by
  :data:`NVLS_FACTOR` x one GPU's links;
* between nodes, hierarchical algorithms (NVLS-tree, tree, PXN, CollNet /
  SHARP) count the intra-node part in busbw, and a node's NICs carry the
  node's share, so busbw exceeds one GPU's NIC rate and even one node's NIC
  total (on 2 nodes a tree sends half the data; with SHARP the network
  reduces): the network part is bounded by :data:`NVLS_FACTOR` x the node's
  NIC total, and a network transport's bound is never below the
  intra-node one (the run's busbw includes it; a one-node run that fell
  back to NVLink is a ``fallback``, not an impossible number);
* where a fact is unknown (``scripts/explain`` on a pasted output, ingest,
  a fleet step), the bound is :data:`UNKNOWN_FACTOR` x the fastest
  production GPU fabric (NVLink 5: :data:`NVLINK5_GPU_GBPS` per GPU, both
  directions), far above any real run and far below garbage.

A site's ``transports.<t>.ceiling: {links, link_gbps}`` replaces the
derived bound of its part (links x link speed, as the site states it;
``ccl_health/sitedata/site.py`` checks it against the references).

Pure: no GPU, no NVML call (the facts are read by the doors:
:func:`links_of_node` takes the hook's NVML reading)."""

import dataclasses
from typing import Optional

from ccl_health.evidence.collectives import NVLINK_GBPS_PER_LINK

#: busbw / one GPU's link rate that NVLS (and, between nodes, SHARP /
#: a 2-node tree) can reach: all_reduce busbw = algbw x 2(n-1)/n, with
#: algbw at most the link rate when the switch (or the network) reduces
NVLS_FACTOR = 2.0

#: NVLink links of one GPU at most (NVLink 4 / 5: 18; NVML's
#: NVML_NVLINK_MAX_LINKS)
NVLINK_MAX_LINKS = 18

#: GB/s per link and direction of the fastest NVLink known (NVLink 5)
FASTEST_LINK_GBPS = max(NVLINK_GBPS_PER_LINK.values())

#: one GPU's NVLink 5 bandwidth, both directions: 18 links x 50 GB/s x 2
#: (1800 GB/s, B200 / GB200)
NVLINK5_GPU_GBPS = NVLINK_MAX_LINKS * FASTEST_LINK_GBPS * 2

#: the bound where the facts are unknown is this many times
#: :data:`NVLINK5_GPU_GBPS`
UNKNOWN_FACTOR = 4

#: the generous bound of a case whose links are unknown (7200 GB/s)
UNKNOWN_GBPS = UNKNOWN_FACTOR * NVLINK5_GPU_GBPS


@dataclasses.dataclass(frozen=True)
class Links:
    """What is known of the links of a case's GPUs and nodes (None:
    unknown)."""
    #: active NVLink links of the slowest GPU of the case
    nvlinks: Optional[int] = None
    #: GB/s of one NVLink link, one direction; None: the generation is
    #: unknown (the fastest known is assumed: :data:`FASTEST_LINK_GBPS`)
    link_gbps: Optional[float] = None
    #: the NICs of one node and the line rate of one (Gb/s)
    nics: Optional[int] = None
    nic_gbit: Optional[float] = None
    #: where the facts were read ("NVML", "nvidia-smi topo -m")
    source: str = ''


@dataclasses.dataclass(frozen=True)
class Bound:
    """The bound and how it was derived; unpacks as ``(gbps, reason)``."""
    gbps: float
    reason: str

    def __iter__(self):
        return iter((self.gbps, self.reason))


def _unknown(what):
    return Bound(UNKNOWN_GBPS, (
        f'bound {UNKNOWN_GBPS:g} GB/s: {UNKNOWN_FACTOR} x NVLink 5 per GPU '
        f'({NVLINK_MAX_LINKS} links x {FASTEST_LINK_GBPS:g} GB/s x 2 '
        f'directions = {NVLINK5_GPU_GBPS:g} GB/s), {what}'))


def _site(ceil, part):
    gbps = float(ceil['links']) * float(ceil['link_gbps'])
    return Bound(gbps, (f'bound {gbps:g} GB/s: site {part} ceiling: '
                        f'{ceil["links"]} links x {ceil["link_gbps"]:g} '
                        f'GB/s'))


def intra_bound(links: Optional[Links] = None, site_ceiling=None) -> Bound:
    """The bound of the intra-node part: the site's ``ceiling`` of
    ``intra``; else :data:`NVLS_FACTOR` x the GPU's active NVLink links x
    the link rate (the fastest known where the generation is unknown);
    else :data:`UNKNOWN_GBPS`."""
    if site_ceiling:
        return _site(site_ceiling, 'intra')
    if links is None or not links.nvlinks:
        return _unknown('no NVLink facts' if links is None or
                        links.nvlinks is None else
                        'no active NVLink (PCIe / shared memory not '
                        'derived)')
    rate = links.link_gbps or FASTEST_LINK_GBPS
    how = (f'{links.link_gbps:g} GB/s' if links.link_gbps else
           f'{FASTEST_LINK_GBPS:g} GB/s (NVLink 5, the generation unknown)')
    gbps = NVLS_FACTOR * links.nvlinks * rate
    src = f' ({links.source})' if links.source else ''
    return Bound(gbps, (f'bound {gbps:g} GB/s: {links.nvlinks} NVLink '
                        f'links{src} x {how} x NVLS factor '
                        f'{NVLS_FACTOR:g} (the switch reduces)'))


def network_bound(links: Optional[Links] = None, nodes=None,
                  site_ceiling=None) -> Bound:
    """The bound of the network part alone: the site's ``ceiling`` of the
    transport; else :data:`NVLS_FACTOR` x the node's NIC total (a tree on
    2 nodes, SHARP: the intra-node part counted in busbw); else
    :data:`UNKNOWN_GBPS`."""
    if site_ceiling:
        return _site(site_ceiling, 'network')
    if links is None or not (links.nics and links.nic_gbit):
        return _unknown('no NIC facts')
    total = links.nics * links.nic_gbit / 8.0
    gbps = NVLS_FACTOR * total
    on = f' on {nodes} nodes' if nodes else ''
    return Bound(gbps, (f'bound {gbps:g} GB/s: {links.nics} NICs x '
                        f'{links.nic_gbit:g} Gb/s = {total:g} GB/s per '
                        f'node x {NVLS_FACTOR:g} (hierarchical busbw '
                        f'counts the intra-node part{on})'))


def bound(transport=None, *, nodes=None, links: Optional[Links] = None,
          site_transport=None, site_intra=None) -> Bound:
    """The busbw no run of this case can exceed, and how it was derived:
    what the case assembler (:func:`ccl_health.judge.assemble.case`)
    puts in :attr:`ccl_health.judge.caseevidence.CaseEvidence.ceiling_gbps` /
    ``ceiling_source`` for every door.

    ``transport``: the transport asked (None: unknown, the generous
    bound); ``links``: the facts known (:class:`Links`); ``site_transport``
    / ``site_intra``: the site's record of the transport / of ``intra``
    (:class:`ccl_health.sitedata.site.TransportSite`, its ``ceiling``).
    An intra-node transport's bound is :func:`intra_bound`; a network
    transport's is the larger of :func:`network_bound` and
    :func:`intra_bound` (busbw includes the intra-node part; a one-node
    run that stayed on NVLink is a fallback, judged by the proof)."""
    from ccl_health.sitedata import transports
    own = getattr(site_transport, 'ceiling', None) if site_transport \
        else None
    t = transports.find(transport) if transport else None
    if t is None:
        return _unknown('transport unknown' if not transport else
                        f'unknown transport {transport!r}')
    intra_ceiling = own if not t.uses_network else \
        getattr(site_intra, 'ceiling', None) if site_intra else None
    inner = intra_bound(links, intra_ceiling)
    if not t.uses_network:
        return inner
    net = network_bound(links, nodes, own)
    if net.gbps >= inner.gbps:
        return net
    return Bound(inner.gbps, f'{inner.reason} (the intra-node part '
                             f'bounds {t.name} too: above its network '
                             f'{net.reason})')


#: GB/s of the fastest PCIe link a GPU sits on, one direction: PCIe 6.0
#: x16 (64 GT/s x 16 lanes / 8 bits, before any encoding: 128 GB/s)
PCIE_FASTEST_GBPS = 64 * 16 / 8


def socket_bound(nodes=None, gpus_per_node=None) -> Optional[Bound]:
    """The most NCCL's socket transport (``net-socket``) can carry, as a
    busbw, or None where it is not derived.  NCCL's sockets have no
    GPUDirect (its log: ``NET/Socket : GPU Direct RDMA Disabled``): every
    byte a GPU sends over them is staged through host memory, across that
    GPU's PCIe link.  On one node every rank's traffic goes over the
    sockets, so a rank's busbw (the bytes it sends per second: nccl-tests
    ``doc/PERFORMANCE.md``) is bounded by its PCIe link, at most
    :data:`PCIE_FASTEST_GBPS`, x :data:`NVLS_FACTOR` to stay generous
    (a real socket run of the captures: about 4 GB/s, 100 GbE: 12.5);
    on several nodes the node's traffic to the network spreads over its
    GPUs' links: x ``gpus_per_node`` (unknown: None)."""
    per_gpu = NVLS_FACTOR * PCIE_FASTEST_GBPS
    why = (f'{NVLS_FACTOR:g} x {PCIE_FASTEST_GBPS:g} GB/s (PCIe 6.0 x16, '
           f'one direction: NCCL sockets stage every byte in host memory)')
    if nodes in (None, 1):
        return Bound(per_gpu, f'bound {per_gpu:g} GB/s of NET/Socket on one '
                              f'node: {why}')
    if not gpus_per_node:
        return None
    gbps = per_gpu * gpus_per_node
    return Bound(gbps, f'bound {gbps:g} GB/s of NET/Socket: {gpus_per_node} '
                       f'GPUs per node x {why}')


def links_of_node(node_state, gpus=None) -> Optional[Links]:
    """The NVLink facts of ``gpus`` (NVML indices; None: every GPU) from a
    node state reading (:class:`ccl_health.evidence.nodestate.nodedata.NodeState`):
    the fewest active links among them (the slowest GPU bounds a
    collective).  The per-link rate is not read (None: the fastest known
    is assumed).  None when the reading has none of these GPUs or no
    NVLink state."""
    if node_state is None or not getattr(node_state, 'gpus', None):
        return None
    want = None if gpus is None else {int(g) for g in gpus}
    counts = []
    for g in node_state.gpus:
        if want is not None and g.index not in want:
            continue
        if 'nvlink' in g.unsupported:
            counts.append(0)
        elif g.nvlinks:
            counts.append(sum(1 for ln in g.nvlinks if ln.active))
        else:
            return None             # not read: unknown
    if not counts or (want is not None and len(counts) < len(want)):
        return None
    return Links(nvlinks=min(counts), source='NVML')
