"""The node's state before and after every probe and sweep, read through
the vendor libraries (NVML through ``nvidia-ml-py``; ``amdsmi`` on AMD),
never by scraping a tool's text.

Per GPU: the compute processes on it (pid, name, memory; ``ours`` by the
one rule of :func:`.nodedata.is_ours`: its pid was given as ours, it
descends from the run's root process, or its ``/proc/<pid>/environ``
carries this run's ``CCL_HEALTH_RUN_ID``; anything unreadable is *not*
ours), memory in use, ECC
error counts, retired pages and row remapping, NVLink state and error
counters per link, PCIe generation and width against their maximum, the
clock-event (throttle) reasons, utilization.  Per node: XID errors of the
kernel log since the last check (:mod:`.xid`), the PCIe links and AER
counters of the GPUs and the NICs near them (:mod:`.pcilinks`, sysfs) and
the time the reading took.

A fact the library cannot give is "not supported" (``None``, and its name in
:attr:`.state.GpuState.unsupported`); a library that cannot be loaded or a log that
cannot be read is a "not checked" fact (:attr:`.state.NodeState.not_checked`):
never a fault of the node.  The facts as data are :mod:`.nodedata`'s; what
they mean is :mod:`.diagnose`'s.

    python -m ccl_health.evidence.nodestate                 # one reading, as JSON
    python -m ccl_health.evidence.nodestate --record FILE   # ... and every NVML call
    python -m ccl_health.evidence.nodestate --watch FILE --run-id ID   # every ~1 s
"""

import os
import time

from ccl_health.outputs import state_dir


def read(run_id=None, ours_pids=(), nvml=None, xid_state=None,
         vendor=None, light=False, xid_since=None, roots=(),
         sysfs=None, session=None):
    """One reading of the node's state.  ``nvml``: an NVML-like API
    (:class:`.nvml.LiveNvml`, :class:`.nvml.RecordedNvml`); default the
    live library.  ``xid_state``: the file keeping the time of the last
    XID check (:mod:`.xid`), or ``xid_since``: an epoch time; neither: XIDs
    are not read.  ``light``: only what a sample while a sweep runs needs.
    ``roots``: the processes whose descendants are ours besides this
    one's (the job script a sampler runs in).  ``sysfs``: the root the
    PCIe links are read from (default ``CCL_HEALTH_SYSFS`` or ``/sys``; not
    in a light reading).  ``session``: an :class:`.nvml.Session` the
    reading shares with the others of its run (NVML started once for all
    of them: the hook's); ``nvml`` wins where both are given.  Never
    raises for what the node lacks: that is a ``not_checked`` fact."""
    t0 = time.monotonic()
    ours = set(ours_pids) | {os.getpid()}
    roots = set(roots) | {os.getpid()}
    state = None
    why = {}
    if vendor in (None, 'nvidia'):
        from ccl_health.evidence.nodestate import nvml as nv
        api = nvml if nvml is not None or session is None else \
            session.api()
        state = nv.read(api=api, run_id=run_id, ours_pids=ours,
                        light=light, roots=roots)
        if not state.checked and vendor is None and nvml is None:
            why.update(state.not_checked)
            from ccl_health.evidence.nodestate import amd
            amd_state = amd.read(run_id=run_id, ours_pids=ours,
                                 roots=roots)
            if amd_state.checked:
                state = amd_state
            else:
                state.not_checked.update(amd_state.not_checked)
    elif vendor == 'amd':
        from ccl_health.evidence.nodestate import amd
        state = amd.read(run_id=run_id, ours_pids=ours, roots=roots)
    if state.checked and not light:
        from ccl_health.evidence.nodestate import pci, pcilinks
        state.pci = pcilinks.read(sysfs or pci.root_of(os.environ))
        if state.pci is None:
            state.not_checked['pci'] = 'the PCI bus (sysfs) could not be read'
    if (xid_state is not None or xid_since is not None) and not light \
            and state.vendor == 'nvidia':       # XIDs are NVIDIA's
        from ccl_health.evidence.nodestate import xid
        events, why_not = xid.since_last(xid_state) if xid_state else \
            xid.events_since(xid_since)
        if why_not:
            state.not_checked['xid'] = why_not
        else:
            state.xids = events
    state.seconds = time.monotonic() - t0
    state.time = time.time()
    return state


def default_xid_state():
    """Where the time of the last XID check is kept (one small file per
    user, beside the output folder's database)."""
    return os.path.join(state_dir(), 'xid-last-check')
