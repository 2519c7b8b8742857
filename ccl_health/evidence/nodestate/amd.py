"""The node's state of AMD GPUs through the ``amdsmi`` Python API
(imported only when a reading is asked for; ROCm ships it under
``/opt/rocm/share/amd_smi``).

Written from the API's documented structure (ROCm/amdsmi
``py-interface/README.md``): ``amdsmi_get_processor_handles``,
``amdsmi_get_gpu_device_uuid``, ``amdsmi_get_gpu_asic_info``
(``market_name``), ``amdsmi_get_gpu_vram_usage`` (``vram_total`` /
``vram_used``, MB), ``amdsmi_get_gpu_activity`` (``gfx_activity``),
``amdsmi_get_gpu_process_list`` (process handles, whose
``amdsmi_get_gpu_process_info`` gives ``name``, ``pid``,
``memory_usage.vram_mem``; newer releases return those dicts directly),
``amdsmi_get_gpu_total_ecc_count`` (``correctable_count`` /
``uncorrectable_count``), ``amdsmi_get_gpu_bad_page_info`` (one dict per bad
page, ``status``), ``amdsmi_get_pcie_info`` (``pcie_static.max_pcie_width``,
``max_pcie_speed``; ``pcie_metric.pcie_width``, ``pcie_speed``, MT/s) or
the older ``amdsmi_get_pcie_link_status`` / ``amdsmi_get_pcie_link_caps``
(``pcie_lanes``, ``pcie_speed``).  The calls go through the same
``call(name, index, ...)`` API as NVML's, so :class:`.nvml.Recording` and
:class:`.nvml.RecordedNvml` record and answer them too.  Not measured on an
AMD node here: the tests' answers are built from that documented
structure."""

from ccl_health.evidence.nodestate.nodedata import (
    GpuState, NodeState, Process, not_checked)
from ccl_health.evidence.nodestate.nvml import (
    HOST_CALLS, NvmlError, host_call, plain, process_is_ours)

MB = 1024 ** 2
#: PCIe transfer rate (MT/s) -> generation
PCIE_GEN = {2500: 1, 5000: 2, 8000: 3, 16000: 4, 32000: 5, 64000: 6}
NOT_SUPPORTED = 2        # AMDSMI_STATUS_NOT_SUPPORTED


class LiveAmdsmi:
    def __init__(self, lib=None):
        if lib is None:
            import amdsmi as lib
        self.lib = lib
        self._handles = None

    def call(self, name, *args):
        if name in HOST_CALLS:
            return host_call(name, *args)
        fn = getattr(self.lib, name, None)
        if fn is None:
            raise NvmlError(NOT_SUPPORTED, f'{name}: not in this amdsmi')
        real = list(args)
        try:
            if name == 'amdsmi_get_processor_handles':
                self._handles = fn()
                return len(self._handles)
            if name.startswith('amdsmi_get_gpu') or \
                    name.startswith('amdsmi_get_pcie'):
                real[0] = self._handles[args[0]]
            if name == 'amdsmi_get_gpu_process_info':
                real[1] = self._procs[args[0]][args[1]]
            out = fn(*real)
            if name == 'amdsmi_get_gpu_process_list':
                self._procs = getattr(self, '_procs', {})
                self._procs[args[0]] = out
                out = [p if isinstance(p, dict) else {'handle': i}
                       for i, p in enumerate(out)]
            return plain(out)
        except self.lib.AmdSmiException as err:
            raise NvmlError(getattr(err, 'err_code', None), str(err)) \
                from None


def read(api=None, run_id=None, ours_pids=(), roots=()):
    if api is None:
        try:
            api = LiveAmdsmi()
        except ImportError as err:
            return not_checked(f'amdsmi not checked: the amdsmi Python '
                               f'module is not importable ({err})', 'amdsmi')
    try:
        api.call('amdsmi_init')
        count = api.call('amdsmi_get_processor_handles')
    except NvmlError as err:
        return not_checked(f'amdsmi not checked: {err.text}', 'amdsmi')
    state = NodeState(vendor='amd', library='amdsmi')
    try:
        for i in range(count):
            state.gpus.append(read_gpu(api, i, run_id, ours_pids, roots))
    finally:
        try:
            api.call('amdsmi_shut_down')
        except NvmlError:
            pass
    return state


def read_gpu(api, i, run_id=None, ours_pids=(), roots=()):
    g = GpuState(i)

    def get(fact, name, *args):
        try:
            return api.call(name, i, *args)
        except NvmlError as err:
            if err.code == NOT_SUPPORTED:
                if fact not in g.unsupported:
                    g.unsupported.append(fact)
            else:
                g.unread.setdefault(fact, err.text)
            return None

    g.uuid = str(get('uuid', 'amdsmi_get_gpu_device_uuid') or '')
    try:          # its PCI address (``0000:c1:00.0``): its AER in sysfs
        g.pci = str(api.call('amdsmi_get_gpu_device_bdf', i) or '')
    except NvmlError:
        g.pci = ''
    asic = get('model', 'amdsmi_get_gpu_asic_info') or {}
    g.model = str(asic.get('market_name') or '')
    vram = get('memory', 'amdsmi_get_gpu_vram_usage') or {}
    if 'vram_used' in vram and 'vram_total' in vram:
        g.memory_used = int(vram['vram_used']) * MB
        g.memory_total = int(vram['vram_total']) * MB
    act = get('utilization', 'amdsmi_get_gpu_activity') or {}
    if isinstance(act.get('gfx_activity'), int):
        g.utilization = act['gfx_activity']
    for p in get('processes', 'amdsmi_get_gpu_process_list') or []:
        if 'handle' in p:
            p = get('processes', 'amdsmi_get_gpu_process_info',
                    p['handle']) or {}
        pid = p.get('pid')
        if not isinstance(pid, int):
            continue
        mem = (p.get('memory_usage') or {}).get('vram_mem', p.get('mem'))
        ours = process_is_ours(api, pid, run_id, ours_pids, roots)
        try:
            name = api.call('procComm', pid) or p.get('name') or ''
        except NvmlError:
            name = p.get('name') or ''
        g.processes.append(Process(pid, str(name), mem if isinstance(
            mem, int) else None, ours))
    ecc = get('ecc', 'amdsmi_get_gpu_total_ecc_count')
    if isinstance(ecc, dict):
        g.ecc['volatile'] = {'corrected': ecc.get('correctable_count'),
                             'uncorrected': ecc.get('uncorrectable_count')}
    pages = get('retired_pages', 'amdsmi_get_gpu_bad_page_info')
    if isinstance(pages, list):
        g.retired_pages = {'count': len(pages), 'pending': any(
            'pending' in str(p.get('status', '')).lower() for p in pages
            if isinstance(p, dict))}
    pcie = get('pcie', 'amdsmi_get_pcie_info')
    if isinstance(pcie, dict):
        st, me = pcie.get('pcie_static') or {}, pcie.get('pcie_metric') or {}
        g.pcie_width, g.pcie_width_max = me.get('pcie_width'), \
            st.get('max_pcie_width')
        g.pcie_gen = PCIE_GEN.get(me.get('pcie_speed'))
        g.pcie_gen_max = PCIE_GEN.get(st.get('max_pcie_speed'))
    else:
        cur = get('pcie', 'amdsmi_get_pcie_link_status') or {}
        cap = get('pcie', 'amdsmi_get_pcie_link_caps') or {}
        g.pcie_width, g.pcie_width_max = cur.get('pcie_lanes'), \
            cap.get('pcie_lanes')
        g.pcie_gen = PCIE_GEN.get(cur.get('pcie_speed'))
        g.pcie_gen_max = PCIE_GEN.get(cap.get('pcie_speed'))
    return g
