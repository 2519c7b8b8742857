"""The node state (ccl_health.evidence.nodestate) without a GPU: the causes
(diagnose) on states built field by field, the XID parser, the amdsmi
reader, the recorder / replayer round trip, the hook's cause-first line, the
sweep's `contended`, the history baseline leaving `contended` out.  The
readers on NVML answers recorded on a real H100 are in
tests/test_nodestate_device.py."""

import dataclasses
import json
import types

import pytest

from ccl_health.judge.verdicts import IN_BASELINE
from ccl_health.judge import history
from ccl_health.evidence import nodestate
from ccl_health.db import recorder
from ccl_health.evidence.nodestate import amd, nvml, xid
from ccl_health.evidence.nodestate.nodedata import (
    GIB, NODE_STATE_KEY, GpuState, Link, NodeState, Process, not_checked)
from ccl_health.evidence.nodestate.diagnose import (Cause, contention, diagnose,
                                           MEMORY_HELD_FRACTION)


def gpu(i=0, **kw):
    base = dict(uuid=f'GPU-{i}', model='NVIDIA H100 80GB HBM3',
                memory_used=int(0.5 * GIB), memory_total=80 * GIB,
                utilization=0, pcie_gen=5, pcie_gen_max=5, pcie_width=16,
                pcie_width_max=16, throttle=['gpu_idle'],
                ecc={'volatile': {'corrected': 0, 'uncorrected': 0},
                     'aggregate': {'corrected': 0, 'uncorrected': 0}},
                row_remap={'correctable': 0, 'uncorrectable': 0,
                           'pending': False, 'failure': False})
    base.update(kw)
    return GpuState(i, **base)


def node(*gpus, **kw):
    return NodeState(vendor='nvidia', gpus=list(gpus) or [gpu()], **kw)


def kinds(causes):
    return [c.kind for c in causes]


def test_a_clean_idle_node_has_no_cause():
    # idle: PCIe generation 1 of 5 is power saving, not a fault
    s = node(gpu(0, pcie_gen=1), gpu(1, pcie_gen=1))
    assert diagnose(s, s, expected_model='H100', expected_count=2) == []


def test_foreign_process_named_first_with_pid_name_memory():
    p = Process(4242, 'python3', 12 * GIB, ours=False)
    mine = Process(7, 'all_reduce_perf', 2 * GIB, ours=True)
    before = node(gpu(0), gpu(1, processes=[p], memory_used=int(12.5 * GIB)))
    after = node(gpu(0, processes=[mine], memory_used=int(2.5 * GIB)),
                 gpu(1, processes=[p], memory_used=int(12.5 * GIB),
                     pcie_width=8, utilization=90))
    causes = diagnose(before, after)
    assert kinds(causes) == ['foreign-process', 'pcie-width']
    assert causes[0].text == 'GPU 1 in use by pid 4242 (python3, 12.0 GiB)'
    # a link trained down under load drains too (issue 42)
    assert causes[0].drain and causes[1].drain
    assert causes[1].text == 'GPU 1 PCIe x8 instead of x16'


def test_memory_held_by_no_visible_process():
    held = gpu(0, memory_used=56 * GIB)
    causes = diagnose(node(held), node(held))
    assert kinds(causes) == ['memory-held']
    assert causes[0].text == ('GPU 0 memory 56.0 GiB of 80.0 GiB held (no '
                              'process visible here holds it)')
    # below the threshold (5% of 80 GiB = 4 GiB): nothing
    small = gpu(0, memory_used=int(3.9 * GIB))
    assert diagnose(node(small)) == []
    assert MEMORY_HELD_FRACTION == 0.05
    # a process whose memory NVML does not give: nothing is concluded
    unknown = gpu(0, memory_used=56 * GIB,
                  processes=[Process(5, 'x', None, ours=True)])
    assert diagnose(node(unknown)) == []


def test_nvlink_down_and_errors_rising():
    links = [Link(i, True, {'replay': 0, 'crc_flit': 0}) for i in range(4)]
    before = node(gpu(0, nvlinks=links), gpu(1, nvlinks=links))
    after_links = [Link(0, False)] + [
        Link(i, True, {'replay': 5 if i == 2 else 0, 'crc_flit': 0})
        for i in range(1, 4)]
    after = node(gpu(0, nvlinks=after_links), gpu(1, nvlinks=links))
    causes = diagnose(before, after)
    assert kinds(causes) == ['nvlink-down', 'nvlink-errors']
    assert causes[0].text == 'GPU 0 NVLink link(s) 0 went down'
    assert causes[0].drain
    # a replay error during the check: a fault (DCGM's FAIL), drained
    assert causes[1].text == ('GPU 0 NVLink errors during the check: link 2 '
                              'replay +5')
    assert causes[1].drain
    # a GPU with fewer active links than its peers, from the start
    few = [Link(i, i < 2) for i in range(4)]
    s = node(gpu(0, nvlinks=few), gpu(1, nvlinks=links))
    assert [c.text for c in diagnose(s, s)] == [
        'GPU 0 has 2 active NVLink links, its peers 4']


def test_pcie_generation_only_under_load():
    idle = gpu(0, pcie_gen=1, utilization=0)
    work = [Process(9, 'all_reduce_perf', GIB, ours=True)]
    busy = gpu(0, pcie_gen=3, utilization=95, processes=work)
    assert diagnose(node(idle)) == []
    # busy time averaged after the probe's processes exited: not load
    assert diagnose(node(gpu(0, pcie_gen=1, utilization=95))) == []
    assert [c.text for c in diagnose(node(busy))] == [
        'GPU 0 PCIe gen 3 instead of 5 under load (95% busy)']


def test_throttle_reasons_that_count():
    for normal in (['gpu_idle'], ['applications_clocks'], ['sw_power_cap'],
                   ['gpu_idle', 'sw_power_cap']):
        assert diagnose(node(gpu(0, throttle=normal))) == []
    hot = gpu(0, throttle=['sw_power_cap', 'hw_thermal_slowdown'],
              temperature=91)
    c = diagnose(node(hot))
    assert [x.text for x in c] == [
        'GPU 0 clocks slowed: hw_thermal_slowdown, 91 C']
    assert not c[0].drain


def test_memory_faults():
    bad = gpu(0, row_remap={'correctable': 0, 'uncorrectable': 3,
                            'pending': True, 'failure': True},
              ecc={'volatile': {'corrected': 0, 'uncorrected': 2}})
    causes = diagnose(node(bad))
    assert kinds(causes) == ['row-remap-failure', 'ecc-uncorrected',
                             'retirement-pending']
    assert [c.drain for c in causes] == [True, True, False]
    # lifetime (aggregate) uncorrectable errors: only when they rise
    old = gpu(0, ecc={'aggregate': {'uncorrected': 4}})
    new = gpu(0, ecc={'aggregate': {'uncorrected': 5}})
    assert diagnose(node(old), node(old)) == []
    assert [c.text for c in diagnose(node(old), node(new))] == [
        'GPU 0 uncorrectable ECC errors rose 4 -> 5']


def test_xids_model_count_lost():
    s = node(gpu(0, model='NVIDIA A100-SXM4-80GB'), xids=[
        {'time': 1.0, 'pci': 'PCI:0000:3b:00', 'xid': 79,
         'text': 'GPU has fallen off the bus.'},
        {'time': 2.0, 'pci': 'PCI:0000:3b:00', 'xid': 13, 'text': 'Graphics '
         'Engine Exception'}])
    causes = diagnose(s, expected_model='H100', expected_count=2)
    assert kinds(causes) == ['gpu-count', 'xid', 'gpu-model', 'xid-other']
    assert causes[1].text == ('XID 79 on PCI:0000:3b:00: GPU has fallen off '
                              'the bus.')
    assert [c.drain for c in causes] == [True, True, False, False]
    lost = node(gpu(0, unread={'gpu_lost': 'GPU is lost'}))
    assert kinds(diagnose(lost)) == ['gpu-lost']


def test_not_checked_states_give_no_cause():
    nc = not_checked('NVML not checked: no library', 'nvml')
    assert diagnose(nc, nc, expected_count=8) == []
    assert diagnose(None, None) == []
    assert contention([nc, None]) is None


def test_contention_only_for_other_processes_on_the_gpus():
    mine = Process(10, 'all_reduce_perf', GIB, ours=True)
    theirs = Process(20, 'all_reduce_perf', GIB, ours=False)
    clean = node(gpu(0, processes=[mine], memory_used=int(1.5 * GIB)))
    assert contention([clean, clean]) is None
    shared = node(gpu(0, processes=[mine, theirs], memory_used=3 * GIB))
    c = contention([clean, shared, clean])
    assert c.text == 'GPU 0 in use by pid 20 (all_reduce_perf, 1.0 GiB)'
    assert contention([shared], gpus=[1]) is None


def test_state_json_round_trip():
    s = node(gpu(0, processes=[Process(1, 'a', 5, True)],
                 nvlinks=[Link(0, True, {'replay': 1})]),
             xids=[], not_checked={'amdsmi': 'no'})
    back = NodeState.from_dict(json.loads(s.to_json()))
    assert back == s


# -- the XID parser: the driver's line as NVIDIA documents it ---------------
# ("NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.";
# no XID was seen on the device: these are that documented form)

def test_xid_kmsg_and_journal_lines():
    kmsg = ('6,1200,5000000,-;nvidia-nvswitch: probe\n'
            '4,1201,7000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, '
            'name=python3, GPU has fallen off the bus.\n'
            'garbage line\n')
    ev = xid.parse_kmsg(kmsg, boot_epoch=1000.0)
    assert ev == [{'time': 1007.0, 'pci': 'PCI:0000:3b:00', 'xid': 79,
                   'text': 'pid=1234, name=python3, GPU has fallen off the '
                           'bus.'}]
    journal = ('1795460000.123456 node12 kernel: NVRM: Xid '
               '(PCI:0000:9b:00): 48, An uncorrectable double bit error\n')
    assert xid.parse_journal(journal)[0]['xid'] == 48


def test_xid_state_file_keeps_the_last_check(tmp_path, monkeypatch):
    seen = []

    def events_since(since):
        seen.append(since)
        return [], None
    monkeypatch.setattr(xid, 'events_since', events_since)
    state = tmp_path / 'x' / 'last'
    assert xid.since_last(str(state), now=10000.0) == ([], None)
    assert seen == [10000.0 - xid.FIRST_LOOK_BACK]
    assert float(state.read_text()) == 10000.0
    xid.since_last(str(state), now=10060.0)
    assert seen[-1] == 10000.0
    # an unreadable log: "not checked", the state file left as it was
    monkeypatch.setattr(xid, 'events_since',
                        lambda since: (None, 'XIDs not checked: no log'))
    assert xid.since_last(str(state), now=10100.0) == (
        None, 'XIDs not checked: no log')
    assert float(state.read_text()) == 10060.0


# -- NVML through a stand-in library ----------------------------------------

class _Err(Exception):
    def __init__(self, value):
        super().__init__(f'NVML error {value}')
        self.value = value


def _raise(code):
    raise _Err(code)


def fake_pynvml(procs=(), lost=False):
    mem = types.SimpleNamespace(total=80 * GIB, used=13 * GIB, free=0)
    return types.SimpleNamespace(
        NVMLError=_Err, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 1,
        nvmlSystemGetNVMLVersion=lambda: '13.580',
        nvmlSystemGetDriverVersion=lambda: '580.1',
        nvmlDeviceGetHandleByIndex=lambda i: ('h', i),
        nvmlDeviceGetUUID=(lambda h: _raise(15)) if lost else (
            lambda h: b'GPU-x'),
        nvmlDeviceGetName=lambda h: 'NVIDIA H100',
        nvmlDeviceGetMemoryInfo=lambda h: {'total': mem.total,
                                           'used': mem.used},
        nvmlDeviceGetUtilizationRates=lambda h: _raise(3),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            types.SimpleNamespace(pid=p, usedGpuMemory=12 * GIB)
            for p in procs],
        nvmlDeviceGetNvLinkState=lambda h, link: _raise(3),
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x1 | 0x40)


def test_live_reader_not_supported_is_no_fault():
    api = nvml.Recording(nvml.LiveNvml(fake_pynvml(procs=[999999999])))
    s = nodestate.read(nvml=api)
    g = s.gpus[0]
    assert (g.uuid, g.model, g.memory_used) == ('GPU-x', 'NVIDIA H100',
                                                13 * GIB)
    # not in the stand-in library, or NOT_SUPPORTED: "not supported"
    assert {'utilization', 'nvlink', 'ecc', 'pcie'} <= set(g.unsupported)
    assert g.unread == {}
    assert g.throttle == ['gpu_idle', 'hw_thermal_slowdown']
    assert g.processes == [Process(999999999, '', 12 * GIB, False)]
    # the recording answers the same calls offline, to the same state
    again = nodestate.read(nvml=nvml.RecordedNvml(
        {'readings': [{'calls': api.calls}]}))
    assert again.gpus == s.gpus


def test_lost_gpu_and_missing_library():
    s = nodestate.read(nvml=nvml.LiveNvml(fake_pynvml(lost=True)))
    assert 'gpu_lost' in s.gpus[0].unread
    assert kinds(diagnose(s)) == ['gpu-lost']
    broken = types.SimpleNamespace(NVMLError=_Err,
                                   nvmlInit=lambda: _raise(12))
    s = nodestate.read(nvml=nvml.LiveNvml(broken))
    assert not s.checked and 'cannot load it' in s.not_checked['nvml']


# -- NVML held open for a run's readings (issue 42) -------------------------

class CountingNvml:
    """:func:`fake_pynvml` with NVML's reference count (nvml.h: it starts
    when the count goes from 0 to 1, shuts down back at 0): ``starts``,
    ``stops``, every init; ``fail_inits``: how many inits fail first."""

    def __init__(self, fail_inits=0, **kw):
        import threading
        self.lib = fake_pynvml(**kw)
        self.lib.nvmlInit, self.lib.nvmlShutdown = self.init, self.shutdown
        self.count = self.starts = self.stops = self.inits = 0
        self.fail_inits = fail_inits
        self.lock = threading.Lock()

    def init(self):
        with self.lock:
            self.inits += 1
            if self.fail_inits:
                self.fail_inits -= 1
                _raise(12)                  # LIBRARY_NOT_FOUND
            self.starts += self.count == 0
            self.count += 1

    def shutdown(self):
        with self.lock:
            self.count -= 1
            self.stops += self.count == 0


def test_a_session_starts_nvml_once_for_many_readings_in_threads():
    from concurrent.futures import ThreadPoolExecutor
    lib = CountingNvml()
    alone = nodestate.read(nvml=nvml.LiveNvml(lib.lib))   # the oracle
    assert (lib.starts, lib.stops) == (1, 1)
    session = nvml.Session(nvml.LiveNvml(lib.lib))
    with ThreadPoolExecutor(4) as pool:
        states = list(pool.map(lambda k: nodestate.read(
            session=session, light=k % 2 == 1), range(20)))
    # one start for the 20 readings, held until the session closes
    assert (lib.starts, lib.stops, lib.count) == (2, 1, 1)
    assert lib.inits == 1 + 1 + 20 and session.starts == 1
    full = [s for k, s in enumerate(states) if k % 2 == 0]
    assert all(s.checked and s.gpus == alone.gpus for s in full)
    session.close()
    session.close()                                  # idempotent
    assert (lib.starts, lib.stops, lib.count) == (2, 2, 0)
    # a reading after the close (a thread still running) on its own
    late = nodestate.read(session=session)
    assert late.gpus == alone.gpus
    assert (lib.starts, lib.stops, lib.count) == (3, 3, 0)


def test_a_session_whose_start_failed_tries_again():
    lib = CountingNvml(fail_inits=1)
    with nvml.Session(nvml.LiveNvml(lib.lib)) as session:
        first = nodestate.read(session=session, vendor='nvidia')
        assert not first.checked and 'cannot load it' in \
            first.not_checked['nvml']
        assert nodestate.read(session=session).checked
        assert nodestate.read(session=session).checked
        assert (lib.starts, lib.stops, session.starts) == (1, 0, 1)
    assert (lib.starts, lib.stops, lib.count) == (1, 1, 0)


def test_a_session_without_nvidia_ml_py_says_what_a_reading_says(
        monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, 'pynvml', None)      # not installed
    alone = nodestate.read(vendor='nvidia')
    held = nodestate.read(vendor='nvidia', session=nvml.Session())
    assert not held.checked and held.not_checked == alone.not_checked
    assert 'not installed' in held.not_checked['nvml']


# -- amdsmi: answers built from the API's documented structure --------------

def test_amdsmi_reader_on_documented_answers():
    """Not captured on an AMD node (none here): each answer has the shape
    ROCm/amdsmi's py-interface/README.md documents for its call."""
    calls = [
        ('amdsmi_init', [], None),
        ('amdsmi_get_processor_handles', [], 1),
        ('amdsmi_get_gpu_device_uuid', [0], 'a1ff74a1-0000-1000-807e-'),
        ('amdsmi_get_gpu_device_bdf', [0], '0000:c1:00.0'),
        ('amdsmi_get_gpu_asic_info', [0], {'market_name': 'AMD Instinct '
                                           'MI250X', 'vendor_id': 4098}),
        ('amdsmi_get_gpu_vram_usage', [0], {'vram_total': 65520,
                                            'vram_used': 31000}),
        ('amdsmi_get_gpu_activity', [0], {'gfx_activity': 100,
                                          'umc_activity': 3}),
        ('amdsmi_get_gpu_process_list', [0], [{'handle': 0}]),
        ('amdsmi_get_gpu_process_info', [0, 0], {
            'name': 'python3', 'pid': 4242, 'mem': 100,
            'memory_usage': {'gtt_mem': 0, 'cpu_mem': 0,
                             'vram_mem': 30 * GIB}}),
        ('procComm', [4242], ''),
        ('amdsmi_get_gpu_total_ecc_count', [0], {
            'correctable_count': 1, 'uncorrectable_count': 0}),
        ('amdsmi_get_gpu_bad_page_info', [0], []),
        ('amdsmi_get_pcie_info', [0], {
            'pcie_static': {'max_pcie_width': 16, 'max_pcie_speed': 16000},
            'pcie_metric': {'pcie_width': 8, 'pcie_speed': 16000}}),
        ('amdsmi_shut_down', [], None)]
    doc = {'readings': [{'calls': [{'call': c, 'args': a, 'ok': r}
                                   for c, a, r in calls]}]}
    s = amd.read(api=nvml.RecordedNvml(doc))
    g = s.gpus[0]
    assert s.vendor == 'amd' and g.model == 'AMD Instinct MI250X'
    assert g.memory_total == 65520 * amd.MB and g.utilization == 100
    assert g.processes == [Process(4242, 'python3', 30 * GIB, False)]
    assert (g.pcie_width, g.pcie_width_max, g.pcie_gen) == (8, 16, 4)
    assert g.pci == '0000:c1:00.0'
    assert [c.text for c in diagnose(s)] == [
        'GPU 0 in use by pid 4242 (python3, 30.0 GiB)',
        'GPU 0 PCIe x8 instead of x16']


# -- the hook: the cause first ----------------------------------------------

def hook_result(code, line, verdict):
    from ccl_health.hook import judging
    return judging.HookResult(code, line, [], 1.0, 1, verdict, 'local', 'gpu')


def test_hook_line_names_the_action_of_the_cause():
    """Issue 24 on the hook: a leftover process is ``reset`` (a reboot is
    expected to clear it), a link down ``isolate``; ``monitor`` (a site's
    choice) never drains: exit 2, the verdict kept."""
    from ccl_health.hook import judging
    p = Process(4242, 'python3', 12 * GIB)
    busy = node(gpu(0), gpu(1, processes=[p], memory_used=int(12.5 * GIB)))
    res = judging.with_action(judging.with_node_state(hook_result(
        0, 'HEALTHY: all_reduce 1GiB on 2 GPUs 330.4 GB/s', 'pass'),
        busy, busy))
    assert (res.code, res.action, res.cause) == (1, 'reset',
                                                 'leftover-process')
    assert res.line.startswith('UNHEALTHY: reset (a reboot is expected to '
                               'clear it): GPU 1 in use by pid 4242 ')
    down = node(gpu(0, nvlinks=[Link(0, False)]),
                gpu(1, nvlinks=[Link(0, True)]))
    res = judging.with_action(judging.with_node_state(hook_result(
        0, 'HEALTHY: all_reduce 1GiB on 2 GPUs 330.4 GB/s', 'pass'),
        down, down))
    assert (res.code, res.action, res.cause) == (1, 'isolate', 'link-down')
    assert res.line.startswith('UNHEALTHY: isolate: GPU 0 ')
    # a probe's own fault, no cause: the verdict's action
    res = judging.with_action(hook_result(
        1, 'UNHEALTHY: GPUs 0<->1: wrong-results: 3 wrong elements',
        'wrong-results'))
    assert (res.code, res.action) == (1, 'isolate')
    assert res.line == ('UNHEALTHY: isolate: GPUs 0<->1: wrong-results: 3 '
                        'wrong elements')
    # the site says monitor: never a drain, never a pass
    res = judging.with_action(hook_result(
        1, 'UNHEALTHY: GPUs 0<->1: wrong-results: 3 wrong elements',
        'wrong-results'), {'wrong-results': 'monitor'})
    assert (res.code, res.action, res.verdict) == (2, 'monitor',
                                                   'wrong-results')
    assert res.line == ('COULD-NOT-CHECK: monitor (not drained): GPUs '
                        '0<->1: wrong-results: 3 wrong elements')
    # nothing to do with a node that passed or could not be checked
    for code, line, verdict in ((0, 'HEALTHY: x', 'pass'), (
            2, 'COULD-NOT-CHECK: no reference', 'could-not-check')):
        res = judging.with_action(hook_result(code, line, verdict))
        assert (res.code, res.line, res.action) == (code, line, None)


def test_hook_names_the_cause_first():
    from ccl_health.hook import judging
    p = Process(4242, 'python3', 12 * GIB)
    busy = node(gpu(0), gpu(1, processes=[p], memory_used=int(12.5 * GIB)))
    res = judging.with_node_state(hook_result(
        1, 'UNHEALTHY: GPUs 0<->1 all_reduce 1GiB: 149.4 GB/s < 297.5 '
        '(reference 330.6 GB/s; channels P2P)', 'below-reference'),
        busy, busy)
    assert res.line == (
        'UNHEALTHY: GPU 1 in use by pid 4242 (python3, 12.0 GiB; leftover '
        'process on an idle node: drain): GPUs 0<->1 all_reduce 1GiB: '
        '149.4 GB/s < 297.5 (reference 330.6 GB/s; channels P2P)')
    assert res.code == 1 and res.verdict == 'contended'
    assert res.node_state['causes'][0]['kind'] == 'foreign-process'
    # passing probes with a drain cause: still UNHEALTHY
    res = judging.with_node_state(hook_result(
        0, 'HEALTHY: all_reduce 1GiB on 2 GPUs 330.4 GB/s', 'pass'),
        busy, busy)
    assert res.code == 1 and res.verdict == 'contended'
    assert res.line.startswith('UNHEALTHY: GPU 1 in use by pid 4242')
    down = node(gpu(0, nvlinks=[Link(0, False)]),
                gpu(1, nvlinks=[Link(0, True)]))
    res = judging.with_node_state(hook_result(
        0, 'HEALTHY: all_reduce 1GiB on 2 GPUs 330.4 GB/s', 'pass'),
        down, down)
    assert (res.code, res.verdict) == (1, 'node-fault')
    # a cause that does not drain, probes passing: HEALTHY, noted
    hot = node(gpu(0, throttle=['hw_slowdown']))
    res = judging.with_node_state(hook_result(
        0, 'HEALTHY: all_reduce 1GiB on 2 GPUs 330.4 GB/s', 'pass'),
        hot, hot)
    assert res.code == 0 and res.line.endswith(
        '; noted: GPU 0 clocks slowed: hw_slowdown')
    # unjudged with a cause that drains: the node state was read first,
    # its fault is the verdict whatever else is missing (issue 20, class 6)
    res = judging.with_node_state(hook_result(
        2, 'COULD-NOT-CHECK: no reference', 'could-not-check'), busy, busy)
    assert (res.code, res.verdict) == (1, 'contended')
    assert res.line == ('UNHEALTHY: GPU 1 in use by pid 4242 (python3, 12.0 '
                        'GiB; leftover process on an idle node: drain) (also '
                        'could not check: no reference)')
    # no NVML: the verdict unchanged, "not checked" in the detail
    nc = not_checked('NVML not checked: no library', 'nvml')
    res = judging.with_node_state(hook_result(
        0, 'HEALTHY: x', 'pass'), nc, nc)
    assert (res.code, res.line) == (0, 'HEALTHY: x')
    assert res.node_state['not_checked'] == {
        'nvml': 'NVML not checked: no library'}


# -- the store and the history ----------------------------------------------

def test_contended_is_left_out_of_the_history_baseline():
    assert 'contended' not in IN_BASELINE
    recs = []
    for i in range(8):
        verdict = 'contended' if i in (5, 6) else 'pass'
        recs.append({'run_id': f'r{i}', 'time': f'2026-11-0{i + 1}',
                     'system': 's', 'partition': 'p', 'transport': 'intra',
                     'collective': 'all_reduce', 'nodes': 1, 'ranks': 2,
                     'algo': 'default', 'size': 1 << 30,
                     'busbw': 100.0 if verdict == 'pass' else 40.0,
                     'case_verdict': verdict, 'tolerance': 0.05})
    # the contended runs are neither judged nor part of the baseline
    assert history.detect(recs) == []
    base = [r['busbw'] for r in recs if r['case_verdict'] in
            IN_BASELINE]
    assert base == [100.0] * 6


def test_node_state_recorded_with_the_case():
    p = Process(20, 'python3', GIB)
    before = node(gpu(0))
    sample = node(gpu(0, processes=[p], memory_used=2 * GIB))
    env = recorder.node_state_env({'before': before, 'samples': [sample],
                                   'after': before})
    doc = json.loads(env[NODE_STATE_KEY])
    assert doc['samples'] == 1 and doc['foreign'] == ['20:python3']
    assert doc['causes'][0]['text'] == (
        'GPU 0 in use by pid 20 (python3, 1.0 GiB)')
    assert recorder.node_state_env({}) == {}


def test_store_keeps_the_node_state(tmp_path):
    """The check records the case with its node state; the run report's
    later update of the same case (its job variables only) keeps it."""
    from ccl_health.db import store
    env = {'NCCL_DEBUG': 'INFO', **recorder.node_state_env(
        {'before': node(gpu(0)), 'samples': [], 'after': node(gpu(0))})}
    with store.open_store(str(tmp_path / 'db')) as db:
        db.add_case(store.CaseRecord('r1', 'c', 'pass', env=env,
                                     source='check'))
        db.add_case(store.CaseRecord('r1', 'c', 'pass',
                                     env={'NCCL_DEBUG': 'WARN'},
                                     source='report'))
        kept = json.loads(db.cases()[0]['env_json'])
    assert kept['NCCL_DEBUG'] == 'WARN'
    assert json.loads(kept[NODE_STATE_KEY])['before']['gpus'][0][
        'model'] == 'NVIDIA H100 80GB HBM3'


def test_site_health_settings_of_the_node_state(tmp_path):
    import yaml
    from ccl_health import CclHealthError
    from ccl_health.sitedata import site
    from conftest import REPO
    import os
    doc = yaml.safe_load(open(os.path.join(REPO, 'site', 'local.yaml')))
    doc['health'].update(gpu_model='H100', memory_held=0.1)
    (tmp_path / 'local.yaml').write_text(yaml.safe_dump(doc))
    h = site.load(str(tmp_path), 'local').health
    assert (h.gpu_model, h.memory_held) == ('H100', 0.1)
    doc['health']['memory_held'] = 1.5
    (tmp_path / 'local.yaml').write_text(yaml.safe_dump(doc))
    with pytest.raises(CclHealthError, match='memory_held'):
        site.load(str(tmp_path), 'local')


def test_watch_writes_before_samples_after_until_sigterm(tmp_path):
    """The sampler as the job script runs it: a reading at once, one a
    --interval, the last on SIGTERM (here without NVML: "not checked")."""
    import signal
    import subprocess
    import sys
    import time
    from conftest import REPO
    from ccl_health.evidence.nodestate.__main__ import read_watch
    out = tmp_path / 'w.jsonl'
    p = subprocess.Popen([sys.executable, '-m', 'ccl_health.evidence.nodestate',
                          '--watch', str(out), '--run-id', 'r1',
                          '--interval', '0.2'], cwd=REPO)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (
            not out.exists() or out.read_text().count('\n') < 3):
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 0
    phases = [json.loads(ln)['phase'] for ln in
              out.read_text().splitlines()]
    assert phases[0] == 'before' and phases[-1] == 'after'
    assert set(phases[1:-1]) == {'sample'} and len(phases) >= 4
    w = read_watch(str(out))
    assert w['before'].vendor in ('', 'nvidia', 'amd')
    if not w['before'].checked:          # CI: no GPU library
        assert w['before'].not_checked
        assert contention([w['before'], *w['samples'], w['after']]) is None


def test_memory_held_once_after_our_run_is_not_held():
    """One reading with memory in use and no process (our ranks exiting):
    nothing; before the run, or two readings in a row: held."""
    clean, held = gpu(0), gpu(0, memory_used=30 * GIB)
    assert diagnose(node(clean), node(held)) == []
    assert contention([node(clean), node(held), node(clean)]) is None
    assert kinds(diagnose(node(clean), node(held),
                          samples=[node(held)])) == ['memory-held']
    assert contention([node(clean), node(held), node(held)]).kind == \
        'memory-held'
    assert kinds(diagnose(node(held), node(clean))) == ['memory-held']
