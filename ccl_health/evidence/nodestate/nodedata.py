"""The node's state as data (what :func:`ccl_health.evidence.nodestate.read`
returns, what the NVML and amdsmi readers build and :mod:`.diagnose`
judges): per GPU its processes, memory, ECC, links, PCIe, throttle reasons;
per node the XIDs, the PCIe links of the GPUs and NICs read from sysfs, and
what could not be checked.  Nothing here reads the
node but the ``/proc`` look-ups of a process (its name, its parent, its
environment), and the one rule of a process that is the run's own
(:func:`is_ours` as a reading is taken, :func:`ours_in` over the readings
of a run).  ``CCL_HEALTH_PROC`` names another root than ``/proc``
(tests)."""

import dataclasses
import json
import os
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


#: the variable that names another root of the process table (tests)
PROC_VAR = 'CCL_HEALTH_PROC'
#: the most parents walked up from a process (a loop in a table read while
#: it changes ends there)
MAX_DEPTH = 256


def proc_root():
    return os.environ.get(PROC_VAR) or '/proc'


def process_name(pid):
    """``/proc/<pid>/comm``, or '' where it cannot be read (another pid
    namespace, gone)."""
    try:
        with open(os.path.join(proc_root(), str(pid), 'comm')) as fp:
            return fp.read().strip()
    except OSError:
        return ''


def parent_pid(pid):
    """The parent's pid of ``/proc/<pid>/stat`` (``pid (comm) state ppid
    ...``: the name may hold spaces and parentheses, so the fields are
    counted after its last ``)``), or None where it cannot be read.  A
    process that is exiting (its environment already gone) or a zombie
    still has it."""
    try:
        with open(os.path.join(proc_root(), str(pid), 'stat'), 'rb') as fp:
            text = fp.read()
        return int(text[text.rindex(b')') + 1:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def environ_has(pid, entry):
    """Whether ``/proc/<pid>/environ`` holds ``entry`` (``NAME=value``);
    False where it cannot be read (another user, an exiting process)."""
    try:
        with open(os.path.join(proc_root(), str(pid), 'environ'),
                  'rb') as fp:
            return entry.encode() in fp.read().split(b'\0')
    except OSError:
        return False


def descends_from(pid, roots, parent=parent_pid):
    """Whether one of ``roots`` is ``pid``'s parent, or its parent's, and
    so on up (``parent``: the look-up of a parent's pid).  pid 1 and 0
    are never a root: everything descends from them."""
    roots = {r for r in roots if isinstance(r, int) and r > 1}
    seen = set()
    while roots and isinstance(pid, int) and pid > 1 and \
            pid not in seen and len(seen) < MAX_DEPTH:
        seen.add(pid)
        pid = parent(pid)
        if pid in roots:
            return True
    return False


def is_ours(pid, run_id=None, ours=(), roots=(), parent=parent_pid,
            environ=environ_has):
    """The one rule of a process that is the run's own, as a reading is
    taken: its pid is one of ``ours``; or it descends from one of
    ``roots`` (the process tree the run's launcher started: the job
    script of a sweep, the hook's own process), which an exiting rank
    whose environment can no longer be read still does; or its
    environment carries the run's ``CCL_HEALTH_RUN_ID`` (a rank a
    resource manager started outside that tree: ``srun``).  Anything that
    cannot be read is not ours.  ``parent`` and ``environ``: the look-ups
    (default this host's ``/proc``)."""
    if pid in set(ours or ()):
        return True
    if roots and descends_from(pid, roots, parent):
        return True
    return bool(run_id) and environ(pid, f'{RUN_ID_VAR}={run_id}')


def ours_in(states, ours=()):
    """The pids that are the run's own over its readings ``states``: those
    ``ours`` names (the pids its ranks printed: their output, the NCCL
    debug logs) and every pid a reading found ours (:func:`is_ours`): a
    rank still on its GPU after another rank crashed is the run's in
    every reading, also once the launcher it descended from is gone."""
    found = set(ours or ())
    for s in states:
        for g in getattr(s, 'gpus', None) or ():
            found.update(p.pid for p in g.processes if p.ours)
    return found
