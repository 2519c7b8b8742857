"""The node's state through NVML (``nvidia-ml-py``, imported as
``pynvml`` only when a reading is asked for).

Every call goes through an API object with one method,
``call(name, *args)``, whose device functions take the GPU's index (not an
NVML handle) and whose answers are plain JSON values:

* :class:`LiveNvml`: the library itself;
* :class:`Recording`: any API, with every call and answer kept, written as
  JSON by ``python -m ccl_health.evidence.nodestate --record FILE``;
* :class:`RecordedNvml`: the answers of such a file, offline (the tests,
  and anyone looking at a node's state after the fact);
* :class:`Session`: NVML held open across the many readings of one run
  (the hook's: issue 42), each reading's start and stop then only NVML's
  reference count.

An NVML error ``NOT_SUPPORTED`` (or a function this library lacks) is "not
supported" on that GPU, never a fault; any other error is a fact that could
not be read (:attr:`GpuState.unread`).  Only ``GPU_IS_LOST`` says something
of the node (the GPU fell off the bus: :mod:`.diagnose`)."""

import ctypes
import json
import os
import threading

from ccl_health.evidence.nodestate.nodedata import (
    GpuState, Link, NodeState, Process, environ_has, is_ours, not_checked,
    parent_pid, process_name)

# NVML return codes (nvml.h)
UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED, NO_PERMISSION = 1, 2, 3, 4
NOT_FOUND, FUNCTION_NOT_FOUND, GPU_IS_LOST = 6, 13, 15
NOT_RECORDED = -1
UNSUPPORTED = (NOT_SUPPORTED, FUNCTION_NOT_FOUND)

#: clock-event (throttle) reason bits (nvml.h nvmlClocksEventReason*)
CLOCK_EVENTS = {
    0x1: 'gpu_idle', 0x2: 'applications_clocks', 0x4: 'sw_power_cap',
    0x8: 'hw_slowdown', 0x10: 'sync_boost', 0x20: 'sw_thermal_slowdown',
    0x40: 'hw_thermal_slowdown', 0x80: 'hw_power_brake_slowdown',
    0x100: 'display_clock'}
#: nvmlNvLinkErrorCounter_t
NVLINK_COUNTERS = {0: 'replay', 1: 'recovery', 2: 'crc_flit', 3: 'crc_data',
                   4: 'ecc_data'}
NVLINK_MAX_LINKS = 18
#: the same counters of links 0-11 as NVML's fields (nvml.h
#: NVML_FI_DEV_NVLINK_<counter>_ERROR_COUNT_L<n>, counter CRC_FLIT,
#: CRC_DATA, REPLAY, RECOVERY, ECC_DATA),
#: read for every link of a GPU in ONE nvmlDeviceGetFieldValues call, as
#: DCGM reads them (issue 42); a field not answered is read link by link
NVLINK_FIELDS = {
    'replay': tuple(range(46, 52)) + tuple(range(108, 114)),
    'recovery': tuple(range(53, 59)) + tuple(range(114, 120)),
    'crc_flit': tuple(range(32, 38)) + tuple(range(96, 102)),
    'crc_data': tuple(range(39, 45)) + tuple(range(102, 108)),
    'ecc_data': tuple(range(148, 160))}
#: a GPU's NVLinks in ONE nvmlDeviceGetFieldValues call (issue 42; was
#: nvmlDeviceGetNvLinkState link by link until one errors, at most 18: 18
#: calls on an H100 / H200): how many it has (nvml.h
#: NVML_FI_DEV_NVLINK_LINK_COUNT) and each one's state
#: (NVML_FI_DEV_NVLINK_GET_STATE, scopeId = the link)
NVLINK_LINK_COUNT, NVLINK_GET_STATE = 91, 165
#: NVML_FI_DEV_NVLINK_GET_STATE's answers (nvml.h NVML_NVLINK_STATE_*) that
#: say what nvmlDeviceGetNvLinkState says: INACTIVE, ACTIVE; any other
#: (SLEEP, ACTIVE_TRAFFIC_DISABLED, a newer one) is asked link by link
NVLINK_FIELD_STATES = {0: False, 1: True}
#: nvmlFieldValue_t's value member by its valueType (nvmlValueType_t)
_FIELD_MEMBER = {0: 'dVal', 1: 'uiVal', 2: 'ulVal', 3: 'ullVal',
                 4: 'sllVal', 5: 'siVal', 6: 'usVal'}
#: functions that take no device handle although their name says Device
_NO_HANDLE = {'nvmlDeviceGetCount', 'nvmlDeviceGetHandleByIndex'}


class NvmlError(Exception):
    def __init__(self, code, text=''):
        super().__init__(text or f'NVML error {code}')
        self.code, self.text = code, text or f'NVML error {code}'


def plain(value):
    """An NVML answer as a JSON value: structures and friendly objects as
    dicts, bytes as text."""
    if isinstance(value, bytes):
        return value.decode(errors='replace')
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, ctypes.Array):     # nvmlDeviceGetFieldValues'
        return [plain(v) for v in value]
    if hasattr(value, '_fields_'):
        return {f[0]: plain(getattr(value, f[0])) for f in value._fields_
                if not f[0].startswith('_')}
    if hasattr(value, '__dict__') and not isinstance(value, type):
        return {k: plain(v) for k, v in vars(value).items()
                if not k.startswith('_')}
    return value


class LiveNvml:
    """NVML itself.  ``ImportError`` when ``nvidia-ml-py`` is missing."""

    def __init__(self, lib=None):
        if lib is None:
            import pynvml as lib
        self.lib = lib
        self._handles = {}

    def call(self, name, *args):
        if name in HOST_CALLS:
            return host_call(name, *args)
        fn = getattr(self.lib, name, None)
        if fn is None:
            raise NvmlError(FUNCTION_NOT_FOUND,
                            f'{name}: not in this nvidia-ml-py')
        real = list(args)
        if name.startswith('nvmlDevice') and name not in _NO_HANDLE:
            real[0] = self._handle(args[0])
        try:
            return plain(fn(*real))
        except self.lib.NVMLError as err:
            raise NvmlError(getattr(err, 'value', None), str(err)) from None

    def _handle(self, index):
        handle = self._handles.get(index)     # shared by threads: no gap
        if handle is None:
            try:
                handle = self.lib.nvmlDeviceGetHandleByIndex(index)
            except self.lib.NVMLError as err:
                raise NvmlError(getattr(err, 'value', None),
                                str(err)) from None
            self._handles[index] = handle
        return handle

    def forget_handles(self):
        """The GPUs' handles asked again from now on (they are NVML's only
        while it is started: :meth:`Session.close`)."""
        self._handles = {}


#: the calls every vendor API answers from the host's /proc, not the library
HOST_CALLS = ('procComm', 'procEnvironHas', 'procParent')


def host_call(name, *args):
    """``procComm(pid)``: the process's name; ``procEnvironHas(pid,
    entry)``: whether its environment holds ``entry``; ``procParent(pid)``:
    its parent's pid (None: unread)."""
    if name == 'procComm':
        return process_name(args[0])
    if name == 'procParent':
        return parent_pid(args[0])
    return environ_has(*args)


def process_is_ours(api, pid, run_id, ours_pids, roots=()):
    """:func:`.nodedata.is_ours` with the look-ups answered by ``api``
    (live: this host's /proc; a recording: what it recorded); an answer
    the API cannot give is "not ours"."""
    def ask(name, *args):
        try:
            return api.call(name, *args)
        except NvmlError:
            return None
    return is_ours(pid, run_id, ours_pids, roots,
                   parent=lambda p: ask('procParent', p),
                   environ=lambda p, e: bool(ask('procEnvironHas', p, e)))


class Recording:
    """Another API, with every call and its answer (or error) kept in
    :attr:`calls`."""

    def __init__(self, api):
        self.api, self.calls = api, []

    def call(self, name, *args):
        entry = {'call': name, 'args': list(args)}
        try:
            entry['ok'] = self.api.call(name, *args)
            return entry['ok']
        except NvmlError as err:
            entry['error'], entry['text'] = err.code, err.text
            raise
        finally:
            self.calls.append(entry)


class RecordedNvml:
    """The answers of a recording (``--record`` file), offline.
    ``reading``: which of the file's readings answers."""

    def __init__(self, path_or_doc, reading=0):
        doc = path_or_doc
        if not isinstance(doc, dict):
            with open(doc) as fp:
                doc = json.load(fp)
        self.doc = doc
        calls = doc['readings'][reading]['calls']
        self.answers = {}
        for c in calls:
            self.answers.setdefault(_key(c['call'], c['args']), c)

    def call(self, name, *args):
        c = self.answers.get(_key(name, list(args)))
        if c is None:
            raise NvmlError(NOT_RECORDED, f'{name}{tuple(args)}: not in the '
                            f'recording')
        if 'error' in c:
            raise NvmlError(c['error'], c.get('text', ''))
        return c['ok']


def _key(name, args):
    return json.dumps([name, args])


class Session:
    """NVML held open for the many readings of one run (the hook's: the
    reading before, the sampler's every 0.25 s, the one after; issue 42).
    NVML is reference-counted (nvml.h ``nvmlInit_v2``: "a reference count
    of the number of initializations is maintained"; it starts when the
    count goes from 0 to 1 and shuts down when it is back at 0): the
    session's first reading starts it and the session keeps that one
    reference until :meth:`close`, so every reading's own ``nvmlInit`` /
    ``nvmlShutdown`` in between only counts, and the GPUs' handles are
    asked once.  An API like :class:`LiveNvml` (``call``), given to the
    readings by :func:`ccl_health.evidence.nodestate.read`'s ``session``;
    shared by the hook's threads (NVML is thread-safe; nvidia-ml-py keeps
    its own count under its lock; the session's start and close under
    :attr:`_lock`).  A reading after :meth:`close` (a thread still
    running when the hook ends) starts and stops NVML on its own, as
    without a session (the GPUs' handles asked again after each stop).
    ``api``: the library's API (default :class:`LiveNvml`, made at the
    first reading)."""

    def __init__(self, api=None):
        self._api = api
        self._lock = threading.Lock()
        self._held = self._closed = False
        #: NVML started by the session (0 or 1; the tests' count)
        self.starts = 0

    def api(self):
        """The API a reading calls: this session; None where nvidia-ml-py
        is not installed (the reading then says so, as without a
        session)."""
        with self._lock:
            if self._api is None:
                try:
                    self._api = LiveNvml()
                except ImportError:
                    return None
        return self

    def call(self, name, *args):
        if self._api is None and self.api() is None:
            raise NvmlError(FUNCTION_NOT_FOUND,
                            'nvidia-ml-py (pynvml) is not installed')
        if name == 'nvmlInit':
            self._hold()
        try:
            return self._api.call(name, *args)
        finally:
            if name == 'nvmlShutdown' and self._closed:
                self._forget()      # NVML may have stopped: handles gone

    def _hold(self):
        """NVML started once, kept until :meth:`close`; a start that fails
        raises (the reading says it could not load NVML) and the next
        reading tries again.  Closed: nothing (the reading's own start
        is then NVML's)."""
        with self._lock:
            if self._held or self._closed:
                return
            self._api.call('nvmlInit')
            self._held = True
            self.starts += 1

    def _forget(self):
        forget = getattr(self._api, 'forget_handles', None)
        if forget is not None:
            forget()

    def close(self):
        """The session's reference given back (NVML shuts down once no
        reading holds one); idempotent, never raises."""
        with self._lock:
            self._closed = True
            if not self._held:
                return
            self._held = False
            try:
                self._api.call('nvmlShutdown')
            except NvmlError:
                pass
            self._forget()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read(api=None, run_id=None, ours_pids=(), light=False, roots=()):
    """A :class:`NodeState` of this node's NVIDIA GPUs; NVML missing or not
    loadable: a NodeState whose ``not_checked`` says why.  A process is
    ours by :func:`process_is_ours` (``run_id``, ``ours_pids``,
    ``roots``)."""
    if api is None:
        try:
            api = LiveNvml()
        except ImportError as err:
            return not_checked(f'NVML not checked: nvidia-ml-py (pynvml) is '
                               f'not installed ({err})', 'nvml')
    try:
        api.call('nvmlInit')
    except NvmlError as err:
        return not_checked(f'NVML not checked: cannot load it: {err.text}',
                           'nvml')
    try:
        try:
            count = api.call('nvmlDeviceGetCount')
        except NvmlError as err:
            return not_checked(f'NVML not checked: no GPU count: {err.text}',
                               'nvml')
        state = NodeState(vendor='nvidia')
        for what, call in (('library', 'nvmlSystemGetNVMLVersion'),
                           ('driver', 'nvmlSystemGetDriverVersion')):
            try:
                setattr(state, what, str(api.call(call)))
            except NvmlError:
                pass
        if state.library:
            state.library = f'nvml {state.library}'
        for i in range(count):
            state.gpus.append(read_gpu(api, i, run_id, ours_pids, light,
                                      roots))
        return state
    finally:
        try:
            api.call('nvmlShutdown')
        except NvmlError:
            pass


def read_gpu(api, i, run_id=None, ours_pids=(), light=False, roots=()):
    """One GPU's facts; ``light``: only what a sample while a sweep or a
    probe runs needs (memory, utilization, processes, the PCIe link as
    trained now, clock-event reasons)."""
    g = GpuState(i)

    def get(fact, name, *args):
        try:
            return api.call(name, i, *args)
        except NvmlError as err:
            if err.code in UNSUPPORTED:
                if fact not in g.unsupported:
                    g.unsupported.append(fact)
            else:
                g.unread.setdefault(fact, err.text)
                if err.code == GPU_IS_LOST:
                    g.unread['gpu_lost'] = err.text
            return None

    g.uuid = get('uuid', 'nvmlDeviceGetUUID') or ''
    if 'gpu_lost' in g.unread:
        return g
    g.model = get('model', 'nvmlDeviceGetName') or ''
    mem = get('memory', 'nvmlDeviceGetMemoryInfo')
    if isinstance(mem, dict):
        g.memory_used, g.memory_total = mem.get('used'), mem.get('total')
    util = get('utilization', 'nvmlDeviceGetUtilizationRates')
    if isinstance(util, dict):
        g.utilization = util.get('gpu')
    g.temperature = get('temperature', 'nvmlDeviceGetTemperature', 0)
    g.processes = _processes(api, get, run_id, ours_pids, roots)
    # the link as trained now, in every reading: the generation is judged
    # on the highest seen under load (idle GPUs lower it to save power)
    g.pcie_gen = get('pcie', 'nvmlDeviceGetCurrPcieLinkGeneration')
    g.pcie_width = get('pcie', 'nvmlDeviceGetCurrPcieLinkWidth')
    if light:
        _throttle(api, get, g, i)
        return g
    try:
        g.pci = str((api.call('nvmlDeviceGetPciInfo', i) or {}).get(
            'busId') or '')
    except (NvmlError, AttributeError):
        g.pci = ''          # not named by address: its AER unmatched
    for counter, cname in ((0, 'volatile'), (1, 'aggregate')):
        row = {}
        for etype, ename in ((0, 'corrected'), (1, 'uncorrected')):
            row[ename] = get('ecc', 'nvmlDeviceGetTotalEccErrors', etype,
                             counter)
        if any(v is not None for v in row.values()):
            g.ecc[cname] = row
    pages = [get('retired_pages', 'nvmlDeviceGetRetiredPages', cause)
             for cause in (0, 1)]
    if any(p is not None for p in pages):
        g.retired_pages['count'] = sum(len(p or []) for p in pages)
        pending = get('retired_pages', 'nvmlDeviceGetRetiredPagesPendingStatus')
        g.retired_pages['pending'] = None if pending is None else bool(pending)
    remap = get('row_remap', 'nvmlDeviceGetRemappedRows')
    if isinstance(remap, list) and len(remap) == 4:
        g.row_remap = dict(zip(('correctable', 'uncorrectable', 'pending',
                                'failure'), remap))
        g.row_remap['pending'] = bool(g.row_remap['pending'])
        g.row_remap['failure'] = bool(g.row_remap['failure'])
    g.nvlinks = _nvlinks(api, i, g)
    # NVML's maximum is "possible with this device and system" (nvml.h):
    # the smaller of the GPU's and its slot's
    g.pcie_gen_max = get('pcie', 'nvmlDeviceGetMaxPcieLinkGeneration')
    g.pcie_width_max = get('pcie', 'nvmlDeviceGetMaxPcieLinkWidth')
    _throttle(api, get, g, i)
    return g


def _throttle(api, get, g, i):
    try:
        mask = api.call('nvmlDeviceGetCurrentClocksEventReasons', i)
    except NvmlError:
        mask = get('throttle', 'nvmlDeviceGetCurrentClocksThrottleReasons')
    if isinstance(mask, int):
        g.throttle = [name for bit, name in sorted(CLOCK_EVENTS.items())
                      if mask & bit]
        if mask & ~sum(CLOCK_EVENTS):
            g.throttle.append(f'other:{mask & ~sum(CLOCK_EVENTS):#x}')


def _processes(api, get, run_id, ours_pids, roots=()):
    raw = get('processes', 'nvmlDeviceGetComputeRunningProcesses')
    out = []
    for p in raw or []:
        pid = p.get('pid') if isinstance(p, dict) else None
        if pid is None:
            continue
        try:
            name = api.call('procComm', pid)
        except NvmlError:
            name = ''
        if not name:
            try:
                name = str(api.call('nvmlSystemGetProcessName', pid))
                name = os.path.basename(name)
            except NvmlError:
                name = ''
        ours = process_is_ours(api, pid, run_id, ours_pids, roots)
        used = p.get('usedGpuMemory')
        out.append(Process(pid, name, used if isinstance(used, int) else None,
                           ours))
    return out


def _nvlinks(api, i, g):
    """Every NVLink of GPU ``i`` with its error counters where active:
    the links and their states in one field read (:func:`link_states`;
    a link whose state NVML did not answer, and every link where it did
    not answer their count, asked one by one until one errors, as
    before), then the counters of links 0-11 in one field read
    (:func:`_link_fields`), the rest (and any field not answered) through
    ``nvmlDeviceGetNvLinkErrorCounter``."""
    count, known = link_states(api, i)
    links = []
    for link in range(count or NVLINK_MAX_LINKS):
        if link in known:
            links.append(Link(link, known[link]))
            continue
        try:
            state = api.call('nvmlDeviceGetNvLinkState', i, link)
        except NvmlError as err:
            if link == 0:
                if err.code in UNSUPPORTED:
                    g.unsupported.append('nvlink')
                else:
                    g.unread['nvlink'] = err.text
            break                     # no more links
        links.append(Link(link, bool(state)))
    fields = _link_fields(api, i, [ln.index for ln in links if ln.active])
    for ln in links:
        if not ln.active:
            continue
        for c, cname in NVLINK_COUNTERS.items():
            if (ln.index, cname) in fields:
                ln.errors[cname] = fields[ln.index, cname]
                continue
            try:
                ln.errors[cname] = int(api.call(
                    'nvmlDeviceGetNvLinkErrorCounter', i, ln.index, c))
            except (NvmlError, TypeError, ValueError):
                pass
    return links


def link_states(api, i):
    """``(count, {link: active})`` of GPU ``i`` from one
    ``nvmlDeviceGetFieldValues`` call: the number of its NVLinks
    (:data:`NVLINK_LINK_COUNT`, at most :data:`NVLINK_MAX_LINKS`, the
    links the old reader asked) and the state of each link NVML answered
    as inactive or active (:data:`NVLINK_FIELD_STATES`).  ``(None, {})``
    where the count is not a positive number NVML answered (an old
    driver, a GPU without NVLink, a recording of the old calls): the
    links are then asked one by one, exactly as before."""
    asked = [NVLINK_LINK_COUNT] + [(NVLINK_GET_STATE, link)
                                   for link in range(NVLINK_MAX_LINKS)]
    try:
        answer = api.call('nvmlDeviceGetFieldValues', i, asked)
    except NvmlError:
        return None, {}
    if not isinstance(answer, list) or len(answer) != len(asked):
        return None, {}
    count = _field_value(answer[0], NVLINK_LINK_COUNT)
    if not count or count < 0:
        return None, {}
    count = min(count, NVLINK_MAX_LINKS)
    known = {}
    for (fid, link), v in zip(asked[1:count + 1], answer[1:count + 1]):
        state = _field_value(v, fid, link)
        if state in NVLINK_FIELD_STATES:
            known[link] = NVLINK_FIELD_STATES[state]
    return count, known


def _link_fields(api, i, active):
    """``{(link, counter name): value}`` of the links ``active`` that have
    fields (:data:`NVLINK_FIELDS`), from one ``nvmlDeviceGetFieldValues``
    call; only the fields NVML answered (its own return 0, the field
    asked); {} where the call is not there or fails."""
    asked = [(link, cname, ids[link]) for link in active
             for cname, ids in NVLINK_FIELDS.items() if link < len(ids)]
    if not asked:
        return {}
    try:
        answer = api.call('nvmlDeviceGetFieldValues', i,
                          [fid for _, _, fid in asked])
    except NvmlError:
        return {}
    out = {}
    for (link, cname, fid), v in zip(asked, answer if isinstance(
            answer, list) else []):
        value = _field_value(v, fid)
        if value is not None:
            out[link, cname] = value
    return out


def _field_value(v, fid, scope=None):
    """The whole number of one answered field, None where NVML did not
    answer it (its ``nvmlReturn``), it is another field (or, ``scope``
    given, another link's), or no number."""
    if not isinstance(v, dict) or v.get('fieldId') != fid or \
            v.get('nvmlReturn') != 0:
        return None
    if scope is not None and v.get('scopeId') != scope:
        return None
    member = _FIELD_MEMBER.get(v.get('valueType'))
    value = (v.get('value') or {}).get(member) if member else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(
        value, bool) else None
