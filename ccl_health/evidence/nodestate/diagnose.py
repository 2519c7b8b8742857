"""What the node's state says: the causes, in order, that a verdict names
before its measurement.

:func:`diagnose` compares the reading before a probe / sweep with the one
after (and the samples taken while it ran) and returns :class:`Cause`\\ s,
the most telling first.  A cause that ``drain``\\ s is one the health hook
drains a node for even when its probes passed; the list is kept small:

* ``gpu-lost``: NVML says a GPU fell off the bus;
* ``gpu-count``: fewer GPUs than the site / partition has;
* ``foreign-process``: a compute process that is not ours on a GPU (on an
  idle node: a leftover of an earlier job);
* ``memory-held``: more than :data:`MEMORY_HELD_FRACTION` of a GPU's
  memory in use that no process visible here accounts for;
* ``xid``: an XID of :data:`ccl_health.evidence.nodestate.xid.DRAIN_XIDS` in the
  kernel log since the last check;
* ``row-remap-failure``, ``ecc-uncorrected``: the memory failed;
* ``nvlink-down``: a link active before and down after, or a GPU with
  fewer active links than its peers.

The others are named, not drained for: NVLink error counters rising, a PCIe
link narrower than its maximum (generation only judged under load: idle
GPUs drop their PCIe generation to save power), thermal / hardware slowdown
/ power-brake throttling (not "GPU idle", "applications clocks" or the
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
NVLINK_ERROR_COUNTERS = ('replay', 'recovery', 'crc_flit', 'crc_data',
                         'ecc_data')
DRAINS = frozenset({'gpu-lost', 'gpu-count', 'foreign-process',
                    'memory-held', 'xid', 'row-remap-failure',
                    'ecc-uncorrected', 'nvlink-down'})
ORDER = ('gpu-lost', 'gpu-count', 'foreign-process', 'memory-held', 'xid',
         'row-remap-failure', 'ecc-uncorrected', 'nvlink-down',
         'nvlink-errors', 'pcie-width', 'pcie-gen', 'throttle',
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
             ours=()) -> List[Cause]:
    """Causes from the readings ``before`` and ``after`` (NodeStates;
    either may be None or not checked) and ``samples`` taken between them,
    ordered (:data:`ORDER`).  ``gpus``: the node GPU indices that matter
    (default all).  ``ours``: the pids the run's ranks printed
    (:func:`.nodedata.ours_in`), never a foreign process."""
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
        causes += _pcie(g)
        causes += _throttle(g)
    causes += _nvlinks(first, last, want)
    if expected_model:
        bad = [g for g in last.gpus if want(g.index) and g.model and
               expected_model.lower() not in g.model.lower()]
        if bad:
            causes.append(Cause('gpu-model', (
                f'GPU {bad[0].index} is a {bad[0].model}, the site has '
                f'{expected_model}'), bad[0].index))
    for c in causes:
        c.drain = c.kind in DRAINS
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
    seen = foreign_processes(states, want, ours)
    by_gpu = {}
    for (gpu, _), p in sorted(seen.items()):
        by_gpu.setdefault(gpu, []).append(p)
    out = []
    for gpu, procs in by_gpu.items():
        procs.sort(key=lambda p: -(p.used_bytes or 0))
        more = f' and {len(procs) - 1} more' if len(procs) > 1 else ''
        out.append(Cause('foreign-process', (
            f'GPU {gpu} in use by {procs[0].text()}{more}'), gpu,
            detail={'processes': [dataclasses.asdict(p) for p in procs]}))
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
    for i, (held, g) in sorted(worst.items()):
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


def _pcie(g):
    i = g.index
    if g.pcie_width and g.pcie_width_max and g.pcie_width < g.pcie_width_max:
        return [Cause('pcie-width', (
            f'GPU {i} PCIe x{g.pcie_width} instead of x{g.pcie_width_max}'),
            i)]
    if g.pcie_gen and g.pcie_gen_max and g.pcie_gen < g.pcie_gen_max and \
            (g.utilization or 0) >= UNDER_LOAD:
        return [Cause('pcie-gen', (
            f'GPU {i} PCIe gen {g.pcie_gen} instead of {g.pcie_gen_max} '
            f'under load ({g.utilization}% busy)'), i)]
    return []


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
        rising = []
        for ln in g.nvlinks:
            old = before.get(ln.index)
            if old is None:
                continue
            for name in NVLINK_ERROR_COUNTERS:
                a, b = old.errors.get(name), ln.errors.get(name)
                if a is not None and b is not None and b > a:
                    rising.append(f'link {ln.index} {name} +{b - a}')
        if rising:
            out.append(Cause('nvlink-errors', (
                f'GPU {g.index} NVLink errors rising: '
                f'{", ".join(rising[:3])}'), g.index))
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
