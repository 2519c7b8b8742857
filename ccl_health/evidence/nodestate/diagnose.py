"""What the node's state says: the causes, in order, that a verdict names
before its measurement.

:func:`diagnose` compares the reading before a probe / sweep with the one
after (and the samples taken while it ran) and returns :class:`Cause`\\ s,
the most telling first.  A cause that ``drain``\\ s is one the health hook
drains a node for even when its probes passed; the list is kept small:

* ``gpu-lost``: NVML says a GPU fell off the bus;
* ``gpu-count``: fewer GPUs than the site / partition has;
* ``foreign-process``: a compute process that is not ours on a GPU (on an
  idle node: a leftover of an earlier job), named by the GPU it holds the
  most memory on, with every other GPU it holds;
* ``memory-held``: more than :data:`MEMORY_HELD_FRACTION` of a GPU's
  memory in use that no process visible here accounts for;
* ``xid``: an XID of :data:`ccl_health.evidence.nodestate.xid.DRAIN_XIDS` in the
  kernel log since the last check;
* ``row-remap-failure``, ``ecc-uncorrected``: the memory failed;
* ``nvlink-down``: a link active before and down after, or a GPU with
  fewer active links than its peers;
* ``nvlink-errors``: NVLink replay or recovery errors during the check, or
  CRC errors at 100/s or more over it, as NVIDIA's DCGM health watch fails
  a link (:data:`NVLINK_FAULTS`, :data:`NVLINK_CRC`); fewer CRC errors and
  the ECC data counters are not named at all (they rise under traffic on a
  healthy H200; the counts stay in the readings);
* ``pcie-width``, ``pcie-gen``: a GPU's PCIe link trained below the most
  both ends support, seen in the readings taken under load (idle GPUs
  drop their PCIe generation to save power: a link merely idle is never
  judged; :func:`_pcie`);
* ``pcie-aer-fatal``: fatal AER errors of a GPU or NIC (or the port above
  it) that rose during the check (:func:`_pci`).

The others are named, not drained for: non-fatal AER errors that rose
(``pcie-aer``), a NIC near the GPUs whose link trained below what both
ends support (``nic-pcie``: the check does not load the NIC), an AMD GPU's
link below its maximum under load, thermal / hardware slowdown /
power-brake throttling (not "GPU idle", "applications clocks" or the
software power cap alone), other XIDs, pending page retirement or row
remapping (a reset is due), another GPU model than the site's."""

import dataclasses
from typing import List, Optional

from ccl_health.evidence.nodestate.nodedata import GIB, NodeState, ours_in
from ccl_health.evidence.nodestate.xid import DRAIN_XIDS

#: memory in use without a visible process to hold it, as a fraction of the
#: GPU's memory, above which it is "held" (site ``health.memory_held``)
MEMORY_HELD_FRACTION = 0.05
#: throttle reasons that are a cause (the others are normal)
THROTTLE_CAUSES = ('hw_slowdown', 'hw_thermal_slowdown',
                   'sw_thermal_slowdown', 'hw_power_brake_slowdown')
#: utilization (percent) at which a reading counts as "under load" (PCIe
#: generation judged)
UNDER_LOAD = 20
#: the NVLink error counters NVML gives per link (``nvmlNvLinkErrorCounter_t``:
#: DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA, DL_ECC_DATA), all kept
#: in the readings; which of them name a link is :data:`NVLINK_FAULTS` and
#: :data:`NVLINK_CRC`'s
NVLINK_ERROR_COUNTERS = ('replay', 'recovery', 'crc_flit', 'crc_data',
                         'ecc_data')
#: NVLink judged as NVIDIA's health watch judges it: NVIDIA/DCGM 4.6.0
#: (commit 72fa3fe), ``modules/health/DcgmHealthWatch.cpp``,
#: ``MonitorNVLink4Fields`` (lines 2688-2803) watches exactly four counters,
#: ``DCGM_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_ERROR_TOTAL``
#: (each the total over the GPU's links), from the start to the end of its
#: window.  A rise of ``DCGM_LIMIT_MAX_NVLINK_ERROR`` (1,
#: ``common/DcgmGPUHardwareLimits.h`` line 28) or more of replay or recovery
#: is ``DCGM_HEALTH_RESULT_FAIL`` ("Replay and recovery errors are
#: failures, not warnings", line 2766): here a cause that drains, naming its
#: links;
NVLINK_FAULTS = ('replay', 'recovery')
#: CRC (flit, data) errors fail only at ``DCGM_LIMIT_MAX_NVLINK_CRC_ERROR``
#: (100.0 per second, DcgmGPUHardwareLimits.h line 30: "RM has informed us
#: that CRC errors only matter at rates of 100+ per second";
#: DcgmHealthWatch.cpp lines 2772-2788: the rise over the window's seconds,
#: summed over the links); below it DCGM only warns and nothing is named
#: here.  The ECC data counter (DL_ECC_DATA, corrected in the link) is not
#: one of DCGM's four: it rises under any traffic on a healthy H200 and is
#: never named.
NVLINK_CRC = ('crc_flit', 'crc_data')
NVLINK_CRC_PER_SECOND = 100.0
#: a GPU's PCIe link trained down (:func:`_pcie`)
PCIE_LINK = ('pcie-width', 'pcie-gen')
#: the vendors whose GPUs run their PCIe link at its trained maximum while
#: busy (NVIDIA: the link's speed follows the performance state, P0 while
#: kernels run): there a link below it under load drains.  AMD's PCIe DPM
#: picks the link's speed and width by its traffic as well (amdgpu's
#: ``pp_dpm_pcie`` levels): a busy GPU's slower link is named only.
LINK_AT_MAX_UNDER_LOAD = ('nvidia',)
DRAINS = frozenset({'gpu-lost', 'gpu-count', 'foreign-process',
                    'memory-held', 'xid', 'row-remap-failure',
                    'ecc-uncorrected', 'nvlink-down', 'nvlink-errors',
                    'pcie-aer-fatal', 'pcie-width', 'pcie-gen'})
ORDER = ('gpu-lost', 'gpu-count', 'foreign-process', 'memory-held', 'xid',
         'row-remap-failure', 'ecc-uncorrected', 'nvlink-down',
         'nvlink-errors', 'pcie-aer-fatal', 'pcie-width', 'pcie-gen',
         'pcie-aer', 'nic-pcie', 'throttle',
         'retirement-pending', 'gpu-model', 'xid-other')


@dataclasses.dataclass
class Cause:
    kind: str
    text: str
    gpu: Optional[int] = None
    drain: bool = False
    #: for foreign processes: [{'pid', 'name', 'used_bytes'}]
    detail: dict = dataclasses.field(default_factory=dict)


def _gib(n):
    return f'{(n or 0) / GIB:.1f} GiB'


def diagnose(before, after=None, expected_model=None, expected_count=None,
             samples=(), memory_held=MEMORY_HELD_FRACTION, gpus=None,
             ours=(), under_load=()) -> List[Cause]:
    """Causes from the readings ``before`` and ``after`` (NodeStates;
    either may be None or not checked) and ``samples`` taken between them,
    ordered (:data:`ORDER`).  ``gpus``: the node GPU indices that matter
    (default all).  ``ours``: the pids the run's ranks printed
    (:func:`.nodedata.ours_in`), never a foreign process.  ``under_load``:
    readings taken while probes ran (:mod:`.sampler`), for the PCIe links
    only (a probe's own processes in them are not judged)."""
    states = [s for s in [before, *samples, after]
              if isinstance(s, NodeState) and s.checked]
    if not states:
        return []
    last = after if isinstance(after, NodeState) and after.checked else \
        states[-1]
    first = before if isinstance(before, NodeState) and before.checked \
        else states[0]
    want = (lambda i: True) if gpus is None else (lambda i: i in set(gpus))
    causes = []
    causes += _lost(states, want)
    if expected_count and len(last.gpus) < expected_count:
        causes.append(Cause('gpu-count', (
            f'NVML lists {len(last.gpus)} of the {expected_count} GPUs'),
            drain=True))
    causes += _foreign(states, want, ours)
    causes += _memory_held(states, want, memory_held,
                           first_is_before=states[0] is before)
    causes += _xids(states)
    for g in last.gpus:
        if not want(g.index):
            continue
        causes += _memory_faults(first.gpu(g.index), g)
        causes += _pcie(states + [s for s in under_load if
                                  isinstance(s, NodeState) and s.checked], g)
        causes += _throttle(g)
    causes += _nvlinks(first, last, want)
    causes += _pci(first, last, want)
    if expected_model:
        bad = [g for g in last.gpus if want(g.index) and g.model and
               expected_model.lower() not in g.model.lower()]
        if bad:
            causes.append(Cause('gpu-model', (
                f'GPU {bad[0].index} is a {bad[0].model}, the site has '
                f'{expected_model}'), bad[0].index))
    for c in causes:
        c.drain = c.kind in DRAINS and not (
            c.kind in PCIE_LINK and last.vendor not in LINK_AT_MAX_UNDER_LOAD)
    causes.sort(key=lambda c: ORDER.index(c.kind))
    return causes


def _lost(states, want):
    seen = {}
    for s in states:
        for g in s.gpus:
            if want(g.index) and 'gpu_lost' in g.unread:
                seen.setdefault(g.index, g.unread['gpu_lost'])
    return [Cause('gpu-lost', f'GPU {i} is lost to NVML ({why})', i)
            for i, why in sorted(seen.items())]


def foreign_processes(states, want=lambda i: True, ours=()):
    """``{(gpu, pid): Process}`` of every process not ours seen in any of
    ``states`` (the most memory it was seen with); ``ours``: pids known to
    be ours besides those the readings name so (the one rule of the run's
    own pids: :func:`.nodedata.ours_in`)."""
    ours = ours_in(states, ours)
    seen = {}
    for s in states:
        for g in s.gpus:
            if not want(g.index):
                continue
            for p in g.processes:
                if p.pid in ours:
                    continue
                key = (g.index, p.pid)
                old = seen.get(key)
                if old is None or (p.used_bytes or 0) > (old.used_bytes or 0):
                    seen[key] = p
    return seen


def _foreign(states, want, ours=()):
    """One cause per process not ours, named by the GPU it holds the most
    memory on, with every other GPU it holds (NVML lists a process once
    per GPU: grouped by pid) and how many other such processes that GPU
    has; the process holding the most first.  Its
    detail keeps every GPU (``gpus``: ``{gpu: bytes}``) for ``--json``."""
    by_pid = {}
    for (gpu, pid), p in sorted(foreign_processes(states, want,
                                                  ours).items()):
        by_pid.setdefault(pid, {})[gpu] = p

    def most(held):
        return max(held, key=lambda g: ((held[g].used_bytes or 0), -g))
    out = []
    for pid, held in sorted(by_pid.items(), key=lambda kv: (
            -(kv[1][most(kv[1])].used_bytes or 0), kv[0])):
        gpu = most(held)
        also = [f'GPU {g} {_gib(held[g].used_bytes)}' if
                held[g].used_bytes is not None else f'GPU {g}'
                for g in sorted(held) if g != gpu]
        text = held[gpu].text()
        if also:
            text = text[:-1] + f'; also on {", ".join(also)})'
        others = sum(1 for q, h in by_pid.items() if q != pid and gpu in h)
        if others:
            text += f' and {others} more'
        out.append(Cause('foreign-process', f'GPU {gpu} in use by {text}',
                         gpu, detail={
                             'processes': [dataclasses.asdict(held[g])
                                           for g in sorted(held)],
                             'gpus': {str(g): held[g].used_bytes
                                      for g in sorted(held)}}))
    return out


def _memory_held(states, want, fraction, first_is_before=True):
    """Memory held by nothing visible: in the reading before (nothing of
    ours runs then), or in two readings in a row (one reading alone, taken
    as our own processes start or exit, proves nothing)."""
    worst, last = {}, set()
    for n, s in enumerate(states):
        now = set()
        for g in s.gpus:
            if not want(g.index) or g.memory_used is None or \
                    not g.memory_total or any(p.used_bytes is None
                                              for p in g.processes):
                continue          # what the processes hold is not known
            held = g.memory_used - sum(p.used_bytes or 0
                                       for p in g.processes)
            if held <= fraction * g.memory_total:
                continue
            now.add(g.index)
            sure = (n == 0 and first_is_before) or g.index in last
            if sure and (g.index not in worst or held > worst[g.index][0]):
                worst[g.index] = (held, g)
        last = now
    out = []
    # the GPU with the most held first
    for i, (held, g) in sorted(worst.items(), key=lambda kv: (-kv[1][0],
                                                              kv[0])):
        procs = 'no process visible here holds it' if not g.processes \
            else 'more than its visible processes hold'
        out.append(Cause('memory-held', (
            f'GPU {i} memory {_gib(held)} of {_gib(g.memory_total)} held '
            f'({procs})'), i))
    return out


def _xids(states):
    seen = {}
    for s in states:
        for e in s.xids or []:
            seen.setdefault((e.get('time'), e.get('pci'), e.get('xid')), e)
    out = []
    for e in seen.values():
        kind = 'xid' if e['xid'] in DRAIN_XIDS else 'xid-other'
        out.append(Cause(kind, f'XID {e["xid"]} on {e["pci"]}: '
                         f'{e.get("text", "")}'.rstrip(': ')))
    return out


def _memory_faults(g0, g):
    out = []
    i = g.index
    if g.row_remap.get('failure'):
        out.append(Cause('row-remap-failure', (
            f'GPU {i} row remapping failed (uncorrectable rows '
            f'{g.row_remap.get("uncorrectable")})'), i))
    vol = (g.ecc.get('volatile') or {}).get('uncorrected')
    agg = (g.ecc.get('aggregate') or {}).get('uncorrected')
    agg0 = ((g0.ecc.get('aggregate') or {}).get('uncorrected')
            if g0 is not None else None)
    if vol:
        out.append(Cause('ecc-uncorrected', (
            f'GPU {i} {vol} uncorrectable ECC error(s) since the driver '
            f'loaded'), i))
    elif agg is not None and agg0 is not None and agg > agg0:
        out.append(Cause('ecc-uncorrected', (
            f'GPU {i} uncorrectable ECC errors rose {agg0} -> {agg}'), i))
    pending = []
    if g.row_remap.get('pending'):
        pending.append('row remapping')
    if g.retired_pages.get('pending'):
        pending.append('page retirement')
    if pending:
        out.append(Cause('retirement-pending', (
            f'GPU {i} {" and ".join(pending)} pending (a GPU reset is '
            f'due)'), i))
    return out


def under_load(g):
    """Whether a GPU's reading was taken under load: busy
    (:data:`UNDER_LOAD`) with a compute process on it in the same reading
    (a reading taken just after a probe exits still averages its busy
    time, while the link has already dropped its generation)."""
    return g is not None and (g.utilization or 0) >= UNDER_LOAD and \
        bool(g.processes)


def _pcie(states, g):
    """A GPU's link trained below the most both ends support (the vendor
    library's maximum: NVML's is that of "this device and system"), judged
    on the widest and fastest link seen in a reading under load
    (:func:`under_load`): NVIDIA and AMD GPUs lower their PCIe generation
    (AMD its width too) while idle to save power, so a link seen only idle
    is never judged.  Drained on NVIDIA (:data:`LINK_AT_MAX_UNDER_LOAD`):
    a link trained down stays so until the
    slot, riser or GPU is seen to, and cuts the GPU's bandwidth to the
    host and to its NICs (GPUDirect RDMA), which the intra-node probes do
    not measure."""
    i = g.index
    loaded = [x for x in (s.gpu(i) for s in states) if under_load(x)]
    if not loaded:
        return []
    wmax = g.pcie_width_max or max((x.pcie_width_max or 0 for x in loaded),
                                   default=0)
    gmax = g.pcie_gen_max or max((x.pcie_gen_max or 0 for x in loaded),
                                 default=0)
    width = max((x.pcie_width or 0 for x in loaded), default=0)
    gen = max((x.pcie_gen or 0 for x in loaded), default=0)
    busy = max(x.utilization or 0 for x in loaded)
    if width and wmax and width < wmax:
        return [Cause('pcie-width', (
            f'GPU {i} PCIe x{width} instead of x{wmax}'), i)]
    if gen and gmax and gen < gmax:
        return [Cause('pcie-gen', (
            f'GPU {i} PCIe gen {gen} instead of {gmax} under load '
            f'({busy}% busy)'), i)]
    return []


def _pci(first, last, want):
    """From sysfs (:mod:`.pcilinks`): a NIC near the GPUs whose link
    trained below what both ends support (named, not drained: the check
    does not load the NIC, and the network checks measure what it
    carries), and the AER counters of a GPU or NIC (and of the port above
    it, where the kernel may count what the device sent) that rose between
    the readings: fatal drains (an uncorrectable error the link could not
    recover: the device was reset or lost), non-fatal is named."""
    from ccl_health.evidence.nodestate.pcilinks import (generation,
                                                        same_address)
    now, then = last.pci or {}, first.pci or {}
    index = {a: g.index for a in now for g in last.gpus
             if g.pci and same_address(g.pci, a)}
    out = []
    ports = set()         # a port above two functions of one NIC: once
    for addr, facts in sorted(now.items()):
        i = index.get(addr)
        if facts.get('role') == 'gpu':
            if i is not None and not want(i):
                continue
            who = f'GPU {i} ({addr})' if i is not None else f'GPU {addr}'
        else:
            who = f'NIC {addr} ({facts.get("vendor", "?")})'
        old = then.get(addr) or {}
        if facts.get('role') == 'nic':
            width = max(facts.get('width') or 0, old.get('width') or 0)
            speed = max(facts.get('speed') or 0, old.get('speed') or 0)
            wmax, smax = facts.get('max_width'), facts.get('max_speed')
            if width and wmax and width < wmax:
                out.append(Cause('nic-pcie', (
                    f'{who} PCIe x{width} instead of x{wmax}')))
            elif speed and smax and speed < smax:
                out.append(Cause('nic-pcie', (
                    f'{who} PCIe gen {generation(speed) or "?"} '
                    f'({speed:g} GT/s) instead of {generation(smax) or "?"} '
                    f'({smax:g} GT/s)')))
        for kind, key, words in (('pcie-aer-fatal', 'fatal', 'fatal'),
                                 ('pcie-aer', 'nonfatal', 'non-fatal')):
            for side, where in ((f'aer_{key}', ''), (
                    f'upstream_aer_{key}',
                    f' upstream port {facts.get("upstream")}')):
                rose = _aer_rise(old.get(side), facts.get(side))
                if rose and where:
                    if (facts.get('upstream'), key) in ports:
                        continue
                    ports.add((facts.get('upstream'), key))
                if rose:
                    total, names = rose
                    out.append(Cause(kind, (
                        f'{who}{where} PCIe AER {words} errors +{total} '
                        f'during the check' + (f' ({names})' if names
                                               else '')), i))
    return out


def _aer_rise(old, new):
    """``(rise of the total, 'DLP +1, ...')`` of an AER file between two
    readings, or None (no rise, or either not read)."""
    if not old or not new:
        return None
    total = next((k for k in new if k.startswith('TOTAL_')), None)
    if total is not None and total in old:
        rise = new[total] - old[total]
    else:
        rise = sum(max(0, v - old.get(k, 0)) for k, v in new.items())
    if rise <= 0:
        return None
    names = ', '.join(f'{k} +{v - old.get(k, 0)}' for k, v in new.items()
                      if not k.startswith('TOTAL_') and v > old.get(k, 0))
    return rise, names


def _throttle(g):
    bad = [t for t in (g.throttle or []) if t in THROTTLE_CAUSES]
    if not bad:
        return []
    temp = f', {g.temperature} C' if g.temperature is not None else ''
    return [Cause('throttle', (
        f'GPU {g.index} clocks slowed: {", ".join(bad)}{temp}'), g.index)]


def _nvlinks(first, last, want):
    out = []
    active = {g.index: {ln.index for ln in g.nvlinks if ln.active}
              for g in last.gpus if want(g.index)}
    most = max((len(v) for v in active.values()), default=0)
    seconds = _duration(first, last)
    for g in last.gpus:
        if not want(g.index):
            continue
        g0 = first.gpu(g.index)
        before = {ln.index: ln for ln in (g0.nvlinks if g0 else [])}
        down = sorted(ln.index for ln in g.nvlinks if not ln.active and
                      before.get(ln.index) is not None and
                      before[ln.index].active)
        if down:
            out.append(Cause('nvlink-down', (
                f'GPU {g.index} NVLink link(s) {", ".join(map(str, down))} '
                f'went down'), g.index))
        elif len(active) > 1 and len(active[g.index]) < most:
            out.append(Cause('nvlink-down', (
                f'GPU {g.index} has {len(active[g.index])} active NVLink '
                f'links, its peers {most}'), g.index))
        out += _nvlink_errors(g.index, before, g.nvlinks, seconds)
    return out


def _duration(first, last):
    """Seconds between the readings ``first`` and ``last`` (the check's
    duration), or None where either has no time."""
    if first is last or not first.time or not last.time or \
            last.time <= first.time:
        return None
    return last.time - first.time


def nvlink_rises(before, links):
    """``{counter: {link: rise}}`` of the error counters of
    :data:`NVLINK_ERROR_COUNTERS` that rose between the links ``before``
    (``{index: Link}``) and ``links`` (a counter that fell: reset, not
    counted)."""
    rises = {}
    for ln in links:
        old = before.get(ln.index)
        if old is None:
            continue
        for name in NVLINK_ERROR_COUNTERS:
            a, b = old.errors.get(name), ln.errors.get(name)
            if a is not None and b is not None and b > a:
                rises.setdefault(name, {})[ln.index] = b - a
    return rises


def counter_rises(before, after):
    """What the error counters rose by between two full readings, named
    or not: ``{'seconds': s, 'nvlink': {gpu: {counter: rise}}, 'aer':
    {address: {file: rise}}}`` (only what rose; ``{}`` where nothing did or
    either reading is missing): the counts a healthy line leaves out, kept
    in ``--json`` and the record."""
    if not (isinstance(before, NodeState) and before.checked and
            isinstance(after, NodeState) and after.checked):
        return {}
    nvlink = {}
    for g in after.gpus:
        g0 = before.gpu(g.index)
        rises = nvlink_rises({ln.index: ln for ln in (g0.nvlinks if g0
                                                     else [])}, g.nvlinks)
        if rises:
            nvlink[str(g.index)] = {k: sum(v.values())
                                    for k, v in rises.items()}
    aer = {}
    for addr, facts in sorted((after.pci or {}).items()):
        old = (before.pci or {}).get(addr) or {}
        for key in ('aer_fatal', 'aer_nonfatal', 'upstream_aer_fatal',
                    'upstream_aer_nonfatal'):
            rose = _aer_rise(old.get(key), facts.get(key))
            if rose:
                aer.setdefault(addr, {})[key] = rose[0]
    if not nvlink and not aer:
        return {}
    out = {'seconds': round(_duration(before, after) or 0, 3)}
    if nvlink:
        out['nvlink'] = nvlink
    if aer:
        out['aer'] = aer
    return out


def _nvlink_errors(gpu, before, links, seconds):
    """The NVLink error counters judged as DCGM judges them (see
    :data:`NVLINK_FAULTS`): a replay or recovery error during the check
    names its links; CRC errors only at :data:`NVLINK_CRC_PER_SECOND` or
    more over the check's ``seconds`` (unknown: not judged); ECC data
    counters never.  Whatever is not named stays in the readings (the
    ``--json`` and the record)."""
    rises = nvlink_rises(before, links)

    def links_of(names):
        return ', '.join(f'link {i} {name} +{n}' for name in names
                         for i, n in sorted(rises.get(name, {}).items()))
    out = []
    faults = [n for n in NVLINK_FAULTS if n in rises]
    if faults:
        out.append(Cause('nvlink-errors', (
            f'GPU {gpu} NVLink errors during the check: '
            f'{links_of(faults)}'), gpu))
    crc = {n: sum(rises[n].values()) for n in NVLINK_CRC if n in rises}
    if crc and seconds:
        rate = sum(crc.values()) / seconds
        if rate >= NVLINK_CRC_PER_SECOND:
            out.append(Cause('nvlink-errors', (
                f'GPU {gpu} NVLink CRC errors at {rate:.0f}/s over the '
                f'{seconds:.1f} s check (>= {NVLINK_CRC_PER_SECOND:.0f}/s): '
                f'{links_of(list(crc))}'), gpu))
    return out


def contention(states, gpus=None, ours=()):
    """The first cause of a shared GPU (a foreign process, or memory held
    by something not visible), or None: what makes a sweep ``contended``.
    ``ours``: pids of the run's own processes known from elsewhere (the
    pids its ranks printed), never a foreign process."""
    want = (lambda i: True) if gpus is None else (lambda i: i in set(gpus))
    ours = set(ours or ())
    states = [s for s in states if isinstance(s, NodeState) and s.checked]
    causes = _foreign(states, want, ours) or _memory_held(
        states, want, MEMORY_HELD_FRACTION, first_is_before=False)
    return causes[0] if causes else None
