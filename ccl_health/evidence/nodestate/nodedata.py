"""The node's state as data (what :func:`ccl_health.evidence.nodestate.read`
returns, what the NVML and amdsmi readers build and :mod:`.diagnose`
judges): per GPU its processes, memory, ECC, links, PCIe, throttle reasons;
per node the XIDs, the PCIe links of the GPUs and NICs read from sysfs, and
what could not be checked.  Nothing here reads the
node but the two ``/proc`` look-ups of a process (its name, whether it is
ours)."""

import dataclasses
import json
import time
from typing import Dict, List, Optional

#: the key of a case's ``env`` that keeps the node's state (the
#: sampler's readings, kept by :mod:`ccl_health.db.recorder`, read by
#: :mod:`ccl_health.judge.attribution`); no schema change: a v1 database
#: keeps it
NODE_STATE_KEY = 'ccl_health.node_state'

#: the environment variable that marks the processes of one run
RUN_ID_VAR = 'CCL_HEALTH_RUN_ID'
GIB = 1024 ** 3


@dataclasses.dataclass
class Process:
    pid: int
    name: str = ''
    used_bytes: Optional[int] = None
    ours: bool = False

    def text(self):
        mem = '' if self.used_bytes is None else \
            f', {self.used_bytes / GIB:.1f} GiB'
        return f'pid {self.pid} ({self.name or "?"}{mem})'


@dataclasses.dataclass
class Link:
    index: int
    active: Optional[bool] = None
    #: error counters by name (replay, recovery, crc_flit, crc_data,
    #: ecc_data); a counter the library does not give is absent
    errors: Dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class GpuState:
    index: int
    uuid: str = ''
    model: str = ''
    #: its PCI address as the library gives it (NVML: ``00000000:18:00.0``)
    pci: str = ''
    memory_used: Optional[int] = None
    memory_total: Optional[int] = None
    utilization: Optional[int] = None          # percent, GPU busy
    processes: List[Process] = dataclasses.field(default_factory=list)
    #: {'volatile': {'corrected': n, 'uncorrected': n}, 'aggregate': ...}
    ecc: Dict[str, Dict[str, Optional[int]]] = dataclasses.field(
        default_factory=dict)
    #: {'count': n, 'pending': bool}
    retired_pages: Dict[str, object] = dataclasses.field(default_factory=dict)
    #: {'correctable', 'uncorrectable', 'pending', 'failure'}
    row_remap: Dict[str, object] = dataclasses.field(default_factory=dict)
    nvlinks: List[Link] = dataclasses.field(default_factory=list)
    pcie_gen: Optional[int] = None
    pcie_gen_max: Optional[int] = None
    pcie_width: Optional[int] = None
    pcie_width_max: Optional[int] = None
    #: clock-event (throttle) reasons active now, by name
    throttle: Optional[List[str]] = None
    temperature: Optional[int] = None
    #: the facts the library says it cannot give on this GPU
    unsupported: List[str] = dataclasses.field(default_factory=list)
    #: facts that could not be read (not "not supported"): name -> error
    unread: Dict[str, str] = dataclasses.field(default_factory=dict)

    def foreign(self):
        return [p for p in self.processes if not p.ours]


@dataclasses.dataclass
class NodeState:
    vendor: str = ''                 # 'nvidia' | 'amd' | '' (none read)
    library: str = ''                # 'nvml 13.580.82' ...
    driver: str = ''
    gpus: List[GpuState] = dataclasses.field(default_factory=list)
    #: XID events since the last check: [{'time', 'pci', 'xid', 'text'}]
    xids: Optional[List[dict]] = None
    #: what could not be checked at all, and why: {'nvml': '...'}
    not_checked: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: the PCIe links and AER counters of the GPUs and the NICs near them,
    #: from sysfs (:mod:`.pcilinks`): ``{address: facts}``; None: not read
    pci: Optional[Dict[str, dict]] = None
    seconds: float = 0.0
    time: float = 0.0                # epoch seconds of the reading

    @property
    def checked(self):
        return bool(self.gpus)

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json(self):
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, doc):
        doc = dict(doc or {})
        gpus = []
        for g in doc.pop('gpus', []) or []:
            g = dict(g)
            g['processes'] = [Process(**p) for p in g.get('processes') or []]
            g['nvlinks'] = [Link(**ln) for ln in g.get('nvlinks') or []]
            names = {f.name for f in dataclasses.fields(GpuState)}
            gpus.append(GpuState(**{k: v for k, v in g.items()
                                    if k in names}))
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(gpus=gpus, **{k: v for k, v in doc.items() if k in names})

    def gpu(self, index):
        return next((g for g in self.gpus if g.index == index), None)


def not_checked(why, what='gpus', seconds=0.0):
    """A NodeState that says nothing about the GPUs, and why."""
    return NodeState(not_checked={what: why}, seconds=seconds,
                     time=time.time())


def process_name(pid):
    """``/proc/<pid>/comm``, or '' where it cannot be read (another pid
    namespace, gone)."""
    try:
        with open(f'/proc/{pid}/comm') as fp:
            return fp.read().strip()
    except OSError:
        return ''
