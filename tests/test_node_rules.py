"""Issue 42, part B: what the node's state names in the hook's line.

- NVLink error counters judged as NVIDIA's DCGM health watch judges them
  (``DcgmHealthWatch.cpp`` ``MonitorNVLink4Fields`` with
  ``DcgmGPUHardwareLimits.h``): a replay or recovery error during the
  check names its link and drains; CRC errors only at 100 per second or
  more over the check (summed over the GPU's links, as DCGM's ``_TOTAL``
  fields are); ECC data counters never; what is not named stays in the
  readings.  On counters read through the NVML reader from answers keyed
  by NVML's own function and counter numbers, and on the real 4x H200
  readings of ``tests/fixtures/device/ras/hook.json``.
- The GPU a process holds most on is named, with each GPU it holds.
- PCIe: a link trained below what both ends support (under load), AER
  counters that rose during the check (sysfs trees built as the kernel
  writes them).
"""

import json
import os

from ccl_health.evidence.nodestate import nvml
from ccl_health.evidence.nodestate.diagnose import diagnose
from ccl_health.evidence.nodestate.nodedata import GIB, NodeState

HERE = os.path.dirname(os.path.abspath(__file__))
H200_RAS = os.path.join(HERE, 'fixtures', 'device', 'ras', 'hook.json')

#: the oracle: DCGM's numbers, written out here, not imported from the code
DCGM_CRC_PER_SECOND = 100.0
#: nvmlNvLinkErrorCounter_t (nvml.h)
DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA, DL_ECC_DATA = range(5)


def nvml_reading(gpus):
    """NVML answers of one reading: ``gpus`` is ``[{link: {counter:
    value}}]`` (every link active), with ``processes`` per GPU where given
    (``{'_processes': [(pid, bytes)]}``)."""
    calls = [('nvmlInit', [], None),
             ('nvmlDeviceGetCount', [], len(gpus)),
             ('nvmlShutdown', [], None)]
    for i, links in enumerate(gpus):
        calls.append(('nvmlDeviceGetUUID', [i], f'GPU-{i}'))
        calls.append(('nvmlDeviceGetName', [i], 'NVIDIA H200'))
        calls.append(('nvmlDeviceGetComputeRunningProcesses', [i], [
            {'pid': pid, 'usedGpuMemory': used}
            for pid, used in links.get('_processes', [])]))
        for pid, _ in links.get('_processes', []):
            calls.append(('procComm', [pid], 'python3'))
            calls.append(('procEnvironHas', [pid, 'CCL_HEALTH_RUN_ID=run'],
                          False))
        nlinks = [k for k in links if k != '_processes']
        for link in nlinks:
            calls.append(('nvmlDeviceGetNvLinkState', [i, link], 1))
            for counter, value in links[link].items():
                calls.append(('nvmlDeviceGetNvLinkErrorCounter',
                              [i, link, counter], value))
        calls.append(('nvmlDeviceGetNvLinkState', [i, len(nlinks)],
                      nvml.INVALID_ARGUMENT))
    out = []
    for name, args, ok in calls:
        if name == 'nvmlDeviceGetNvLinkState' and ok == nvml.INVALID_ARGUMENT:
            out.append({'call': name, 'args': args, 'error': ok,
                        'text': 'Invalid Argument'})
        else:
            out.append({'call': name, 'args': args, 'ok': ok})
    return {'readings': [{'calls': out}]}


def read(gpus, at):
    s = nvml.read(api=nvml.RecordedNvml(nvml_reading(gpus)), run_id='run')
    s.time = at
    return s


def counters(replay=0, recovery=0, flit=0, data=0, ecc=0):
    return {DL_REPLAY: replay, DL_RECOVERY: recovery, DL_CRC_FLIT: flit,
            DL_CRC_DATA: data, DL_ECC_DATA: ecc}


def test_nvlink_as_dcgm_judges_it():
    t0 = 1000.0
    before = read([{0: counters(data=473, ecc=3426),
                    1: counters(data=476, ecc=2392)}], t0)
    # a healthy H200 under traffic: ECC data +655 (corrected in the link),
    # CRC +20 over 2 s (10/s): nothing named, counts kept
    quiet = read([{0: counters(data=483, ecc=4081),
                   1: counters(data=486, ecc=2803)}], t0 + 2)
    assert diagnose(before, quiet) == []
    assert quiet.gpus[0].nvlinks[0].errors['ecc_data'] == 4081
    # CRC at the rate, summed over the links as DCGM's _TOTAL field is:
    # 2 x 101 over 2 s = 101/s (each link alone 50.5/s)
    rate = 2 * 101 / 2.0
    assert rate >= DCGM_CRC_PER_SECOND > rate / 2
    crc = read([{0: counters(data=574, ecc=4081),
                 1: counters(data=577, ecc=2803)}], t0 + 2)
    causes = diagnose(before, crc)
    assert [(c.kind, c.drain, c.gpu) for c in causes] == [
        ('nvlink-errors', True, 0)]
    assert causes[0].text == (
        'GPU 0 NVLink CRC errors at 101/s over the 2.0 s check (>= 100/s): '
        'link 0 crc_data +101, link 1 crc_data +101')
    # the same rise over 3 s: 67/s, below DCGM's rate: nothing
    slow = read([{0: counters(data=574), 1: counters(data=577)}], t0 + 3)
    assert diagnose(before, slow) == []
    # one recovery error: a fault whatever the rate
    rec = read([{0: counters(data=473, ecc=3426),
                 1: counters(recovery=1, data=476, ecc=9999)}], t0 + 60)
    causes = diagnose(before, rec)
    assert [(c.kind, c.drain) for c in causes] == [('nvlink-errors', True)]
    assert causes[0].text == ('GPU 0 NVLink errors during the check: link 1 '
                              'recovery +1')
    # no time between the readings: the rate is not known, CRC not named
    same = read([{0: counters(data=9000), 1: counters(data=9000)}], 0.0)
    assert diagnose(before, same) == []


def h200_states():
    with open(H200_RAS) as fp:
        detail = json.load(fp)['node_state']
    return (NodeState.from_dict(detail['before']),
            NodeState.from_dict(detail['after']))


def test_real_h200_counters_name_nothing():
    """4x H200 (NV18), the hook's 49 s check of issue 44: every link's
    ECC data counter rose by hundreds, CRC by none: a healthy node."""
    before, after = h200_states()
    rose = [ln.errors['ecc_data'] - old.errors['ecc_data']
            for g, g0 in zip(after.gpus, before.gpus)
            for ln, old in zip(g.nvlinks, g0.nvlinks) if ln.errors]
    assert max(rose) > 600
    assert diagnose(before, after) == []


def test_healthy_line_is_the_same_on_every_healthy_run():
    """The HEALTHY line on the real H200 readings: nothing noted, cut
    nowhere; a hang on them is named by the hang, not by the counters."""
    from ccl_health.hook import judging
    from ccl_health.judge.verdicts import Verdict
    before, after = h200_states()
    line = ('all_reduce 1GiB on 4 GPUs 371.2 GB/s (reference 360.0) on '
            'local:gpu, ccl-health-links 256MiB: 12 GPU->GPU 370.1-372.4 '
            'GB/s, 1.4 s')
    res = judging.with_node_state(judging.result(Verdict.PASS, line),
                                  before, after)
    assert (res.code, res.line) == (0, f'HEALTHY: {line}')
    assert res.node_state['after']['gpus'][0]['nvlinks'][0]['errors'][
        'ecc_data'] == 4081
    hang = ('hang: all_reduce on GPUs 0,1,2,3 did not finish within the 48 '
            's left')
    res = judging.with_node_state(judging.result(Verdict.HANG, hang),
                                  before, after)
    assert res.line == f'UNHEALTHY: {hang}'


def test_the_gpu_a_process_holds_most_on_is_named():
    """Issue 42: 100 GiB on GPU 1, a 0.5 GiB context on GPU 0: named by
    GPU 1, with GPU 0; ``--json`` keeps both."""
    held = [{0: counters(), '_processes': [(4242, GIB // 2)]},
            {0: counters(), '_processes': [(4242, 100 * GIB),
                                           (777, 2 * GIB)]}]
    s = read(held, 1.0)
    causes = diagnose(s, s)
    assert [(c.kind, c.gpu, c.drain) for c in causes] == [
        ('foreign-process', 1, True), ('foreign-process', 1, True)]
    assert causes[0].text == ('GPU 1 in use by pid 4242 (python3, 100.0 '
                              'GiB; also on GPU 0 0.5 GiB) and 1 more')
    assert causes[0].detail['gpus'] == {'0': GIB // 2, '1': 100 * GIB}
    assert causes[1].text == ('GPU 1 in use by pid 777 (python3, 2.0 GiB) '
                              'and 1 more')
    from ccl_health.hook import judging
    from ccl_health.judge.verdicts import Verdict
    res = judging.with_node_state(judging.result(Verdict.PASS, 'x'), s, s)
    assert res.line.startswith('UNHEALTHY: GPU 1 in use by pid 4242 '
                               '(python3, 100.0 GiB; also on GPU 0 0.5 GiB)'
                               ' and 1 more (leftover process on an idle '
                               'node: drain)')


# -- PCIe: sysfs trees as the kernel writes them ------------------------------

def device(root, path, vendor, cls, **files):
    """A PCI device at ``<root>/devices/<path>`` with its link under
    ``<root>/bus/pci/devices``, as on this machine (``/sys/bus/pci/devices/
    0000:00:03.0 -> ../../../devices/pci0000:00/0000:00:03.0``; ``vendor``
    ``0x1af4``, ``class`` ``0x020000``, newline-ended); ``files``: the
    other attributes (``current_link_speed='32.0 GT/s PCIe'``)."""
    d = os.path.join(root, 'devices', *path.split('/'))
    os.makedirs(d, exist_ok=True)
    for name, text in dict(files, vendor=f'{vendor:#06x}',
                           **{'class': f'{cls:#08x}'}).items():
        with open(os.path.join(d, name), 'w') as fp:
            fp.write(f'{text}\n')
    link = os.path.join(root, 'bus', 'pci', 'devices', path.split('/')[-1])
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(os.path.relpath(d, os.path.dirname(link)), link)


def aer(total, kind='FATAL', **counts):
    """An ``aer_dev_fatal`` / ``aer_dev_nonfatal`` file as the kernel's
    ``aer_stats_dev_attr`` writes it: a line per named bit, then the
    total."""
    names = ('Undefined', 'DLP', 'SDES', 'TLP', 'FCP', 'CmpltTO',
             'CmpltAbrt', 'UnxCmplt', 'RxOF', 'MalfTLP', 'ECRC', 'UnsupReq',
             'ACSViol', 'UncorrIntErr', 'BlockedTLP', 'AtomicOpBlocked',
             'TLPBlockedErr', 'PoisonTLPBlocked')
    return '\n'.join([f'{n} {counts.get(n, 0)}' for n in names] +
                     [f'TOTAL_ERR_{kind} {total}'])


GEN5, GEN4 = '32.0 GT/s PCIe', '16.0 GT/s PCIe'
PORT = dict(max_link_speed=GEN5, max_link_width='16',
            current_link_speed=GEN5, current_link_width='16')


def node_tree(root, nic_width='16', nic_port_width='16', gpu_fatal=0,
              gpu_nonfatal=0, port_nonfatal=0):
    """One GPU and one ConnectX behind a switch of root complex
    ``pci0000:17``; a Broadcom BMC NIC on ``pci0000:00`` (another root
    complex: not near a GPU) and this machine's virtio NIC."""
    device(root, 'pci0000:00/0000:00:03.0', 0x1af4, 0x020000)
    device(root, 'pci0000:00/0000:00:1c.0/0000:02:00.0', 0x14e4, 0x020000,
           current_link_speed='2.5 GT/s PCIe', current_link_width='1',
           max_link_speed='5.0 GT/s PCIe', max_link_width='1')
    device(root, 'pci0000:17/0000:17:01.0', 0x8086, 0x060400, **PORT,
           aer_dev_fatal=aer(0),
           aer_dev_nonfatal=aer(port_nonfatal, 'NONFATAL',
                                CmpltTO=port_nonfatal))
    device(root, 'pci0000:17/0000:17:01.0/0000:18:00.0', 0x10de, 0x030200,
           current_link_speed='2.5 GT/s PCIe', current_link_width='16',
           max_link_speed=GEN5, max_link_width='16',
           aer_dev_fatal=aer(gpu_fatal, DLP=gpu_fatal),
           aer_dev_nonfatal=aer(gpu_nonfatal, 'NONFATAL',
                                UnsupReq=gpu_nonfatal))
    device(root, 'pci0000:17/0000:17:02.0', 0x8086, 0x060400,
           **dict(PORT, max_link_width=nic_port_width))
    device(root, 'pci0000:17/0000:17:02.0/0000:19:00.0', 0x15b3, 0x020700,
           current_link_speed=GEN5, current_link_width=nic_width,
           max_link_speed=GEN5, max_link_width='16')


def test_sysfs_formats():
    from ccl_health.evidence.nodestate import pcilinks
    assert [pcilinks.parse_speed(t) for t in (
        '2.5 GT/s PCIe', '8.0 GT/s PCIe', '32.0 GT/s PCIe', '8 GT/s',
        'Unknown', 'Unknown speed', '')] == [2.5, 8.0, 32.0, 8.0, None,
                                             None, None]
    assert [pcilinks.parse_width(t) for t in ('16', 'x8', '0', '')] == [
        16, 8, 0, None]
    assert pcilinks.parse_aer(aer(3, DLP=1, MalfTLP=2) +
                              '\ndev_fatal_errs_bit[27] 1')['MalfTLP'] == 2
    assert pcilinks.same_address('00000000:18:00.0', '0000:18:00.0')


def test_pci_links_of_the_gpus_and_the_nics_near_them(tmp_path):
    from ccl_health.evidence.nodestate import pcilinks
    root = str(tmp_path)
    node_tree(root, nic_width='8')
    links = pcilinks.read(root)
    # the BMC's Broadcom sits under another root complex, virtio is no
    # NIC maker of NCCL's: neither is read
    assert sorted(links) == ['0000:18:00.0', '0000:19:00.0']
    gpu, nic = links['0000:18:00.0'], links['0000:19:00.0']
    assert (gpu['role'], gpu['upstream'], gpu['speed'], gpu['max_speed'],
            gpu['width'], gpu['max_width']) == (
        'gpu', '0000:17:01.0', 2.5, 32.0, 16, 16)
    assert gpu['aer_fatal']['TOTAL_ERR_FATAL'] == 0
    assert gpu['upstream_aer_nonfatal']['TOTAL_ERR_NONFATAL'] == 0
    assert (nic['role'], nic['vendor'], nic['width'], nic['max_width']) == (
        'nic', 'Mellanox', 8, 16)
    assert pcilinks.read(str(tmp_path / 'none')) is None


def pci_reading(root, at, gpus=1):
    """A full reading (NVML answers with the GPUs' bus ids, the PCIe links
    from the tree at ``root``)."""
    from ccl_health.evidence import nodestate
    doc = nvml_reading([{0: counters()} for _ in range(gpus)])
    doc['readings'][0]['calls'].append({
        'call': 'nvmlDeviceGetPciInfo', 'args': [0],
        'ok': {'busId': '00000000:18:00.0', 'domain': 0, 'bus': 0x18}})
    s = nodestate.read(nvml=nvml.RecordedNvml(doc), vendor='nvidia',
                       sysfs=root)
    s.time = at
    return s


def test_a_nic_trained_down_is_named_not_drained(tmp_path):
    root = str(tmp_path / 'x8')
    node_tree(root, nic_width='8')
    s = pci_reading(root, 1.0)
    causes = diagnose(s, s)
    assert [(c.kind, c.drain, c.text) for c in causes] == [(
        'nic-pcie', False,
        'NIC 0000:19:00.0 (Mellanox) PCIe x8 instead of x16')]
    # x8 where its slot has only 8 lanes: what both ends support
    root = str(tmp_path / 'slot8')
    node_tree(root, nic_width='8', nic_port_width='8')
    s = pci_reading(root, 1.0)
    assert diagnose(s, s) == []
    # the GPU's link at 2.5 GT/s idle (its sysfs speed): never judged
    assert s.pci['0000:18:00.0']['speed'] == 2.5


def test_aer_counters_that_rose_during_the_check(tmp_path):
    before = pci_reading(_tree(tmp_path, 'a'), 1.0)
    after = pci_reading(_tree(tmp_path, 'b', gpu_fatal=1, gpu_nonfatal=2,
                              port_nonfatal=3), 3.0)
    causes = diagnose(before, after)
    assert [(c.kind, c.drain, c.gpu) for c in causes] == [
        ('pcie-aer-fatal', True, 0), ('pcie-aer', False, 0),
        ('pcie-aer', False, 0)]
    assert [c.text for c in causes] == [
        'GPU 0 (0000:18:00.0) PCIe AER fatal errors +1 during the check '
        '(DLP +1)',
        'GPU 0 (0000:18:00.0) PCIe AER non-fatal errors +2 during the check'
        ' (UnsupReq +2)',
        'GPU 0 (0000:18:00.0) upstream port 0000:17:01.0 PCIe AER non-fatal'
        ' errors +3 during the check (CmpltTO +3)']
    # counts that were there before the check and did not rise: nothing
    assert diagnose(after, after) == []
    from ccl_health.hook import judging
    from ccl_health.judge.verdicts import Verdict
    res = judging.with_action(judging.with_node_state(
        judging.result(Verdict.PASS, 'x'), before, after))
    assert (res.code, res.verdict, res.action) == (1, 'node-fault',
                                                   'isolate')


def _tree(tmp_path, name, **kw):
    root = str(tmp_path / name)
    node_tree(root, **kw)
    return root


def light(gen, width=16, busy=100, procs=True, gen_max=5):
    from ccl_health.evidence.nodestate.nodedata import GpuState, Process
    return NodeState(vendor='nvidia', gpus=[GpuState(
        0, pcie_gen=gen, pcie_width=width, pcie_gen_max=gen_max,
        pcie_width_max=16, utilization=busy,
        processes=[Process(9, 'all_reduce_perf', GIB, True)] if procs
        else [])], time=2.0)


def test_gpu_link_judged_on_the_highest_seen_under_load():
    """Idle before and after (gen 1: power saving), the probes' readings
    show what the link trained to."""
    from ccl_health.hook import judging
    from ccl_health.judge.verdicts import Verdict
    idle = light(1, busy=0, procs=False)

    def judged(samples):
        return judging.with_node_state(judging.result(Verdict.PASS, 'x'),
                                       idle, idle, under_load=samples)
    # the idle readings alone: nothing
    assert diagnose(idle, idle) == []
    ok = judged([light(2, busy=5), light(5), light(5)])
    assert (ok.code, ok.line) == (0, 'HEALTHY: x')
    assert ok.node_state['under_load'] == {
        'readings': 3, 'gpus': {'0': {'gen': 5, 'width': 16, 'busy': 100}}}
    # gen 4 at best under load, gen 5 possible: trained down, drained
    bad = judged([light(4), light(4, busy=97), light(5, busy=3)])
    assert bad.code == 1 and bad.line == (
        'UNHEALTHY: GPU 0 PCIe gen 4 instead of 5 under load (100% busy): '
        'although the probes passed: x')
    # busy without a process (the probes had exited): not load
    assert judged([light(4, procs=False)]).code == 0
    # a lane lost
    assert judged([light(5, width=8)]).line.startswith(
        'UNHEALTHY: GPU 0 PCIe x8 instead of x16')
    # AMD: its PCIe DPM follows the link's traffic too: named, not drained
    amd = light(4)
    amd.vendor = 'amd'
    causes = diagnose(amd, amd)
    assert [(c.kind, c.drain) for c in causes] == [('pcie-gen', False)]


def test_sampler_keeps_the_readings_taken_while_it_ran():
    import itertools
    import time as _time
    from ccl_health.evidence.nodestate.sampler import Sampler
    n = itertools.count()

    def read():
        k = next(n)
        if k == 1:
            raise RuntimeError('NVML went away')   # left out, not fatal
        return light(5) if k % 2 == 0 else NodeState()
    s = Sampler(read, interval=0.01, keep=3).start()
    _time.sleep(0.3)
    got = s.stop()
    assert 1 <= len(got) <= 3 and all(x.checked for x in got)
    # it stops by itself after its seconds
    t = Sampler(lambda: light(5), interval=0.01, seconds=0.05).start()
    _time.sleep(0.3)
    assert not t._thread.is_alive()


def test_counts_not_named_stay_in_json_and_the_record():
    """The real H200 readings: the line names nothing, ``--json`` and the
    healthy record keep what each GPU's counters rose by."""
    from ccl_health.hook import judging, record
    from ccl_health.judge.verdicts import Verdict
    before, after = h200_states()
    res = judging.with_node_state(judging.result(Verdict.PASS, 'x'),
                                  before, after)
    rises = res.node_state['rises']
    # the oracle: the fixture's raw JSON, link by link
    with open(H200_RAS) as fp:
        raw = json.load(fp)['node_state']
    for n in range(4):
        links = zip(raw['before']['gpus'][n]['nvlinks'],
                    raw['after']['gpus'][n]['nvlinks'])
        want = sum(b['errors']['ecc_data'] - a['errors']['ecc_data']
                   for a, b in links if b['errors'])
        assert want > 1000
        assert rises['nvlink'][str(n)] == {'ecc_data': want}
    assert rises['seconds'] == round(after.time - before.time, 3)
    assert record.short_detail(res, {})['rises'] == rises
    assert res.line == 'HEALTHY: x'


def test_the_port_above_two_functions_of_a_nic_is_named_once(tmp_path):
    """A dual-port ConnectX is two functions under one port: the port's
    AER errors that rose are one cause, not one per function."""
    from ccl_health.evidence.nodestate.diagnose import counter_rises

    def tree(name, port_nonfatal):
        root = str(tmp_path / name)
        node_tree(root)
        port = os.path.join(root, 'devices', 'pci0000:17', '0000:17:02.0')
        with open(os.path.join(port, 'aer_dev_nonfatal'), 'w') as fp:
            fp.write(aer(port_nonfatal, 'NONFATAL', CmpltTO=port_nonfatal)
                     + '\n')
        device(root, 'pci0000:17/0000:17:02.0/0000:19:00.1', 0x15b3,
               0x020700, current_link_speed=GEN5, current_link_width='16',
               max_link_speed=GEN5, max_link_width='16')
        return root
    before = pci_reading(tree('a', 0), 1.0)
    after = pci_reading(tree('b', 4), 2.0)
    assert sorted(after.pci) == ['0000:18:00.0', '0000:19:00.0',
                                 '0000:19:00.1']
    causes = diagnose(before, after)
    assert [(c.kind, c.drain, c.text) for c in causes] == [(
        'pcie-aer', False, 'NIC 0000:19:00.0 (Mellanox) upstream port '
        '0000:17:02.0 PCIe AER non-fatal errors +4 during the check '
        '(CmpltTO +4)')]
    # both functions keep what they saw in --json
    assert counter_rises(before, after)['aer'] == {
        '0000:19:00.0': {'upstream_aer_nonfatal': 4},
        '0000:19:00.1': {'upstream_aer_nonfatal': 4}}


def test_the_hook_timing_captures_name_no_counter(tmp_path):
    """The hook's --json of issue 42's timing runs on 2x H200
    (tests/fixtures/device/hook-timing-x2): each HEALTHY line there ended
    with ``noted: GPU 0 NVLink errors rising: ...`` (CRC and ECC data
    counters a few up in 1-2 s); judged again, nothing is noted and the
    counts stay in ``node_state.rises``."""
    import glob
    from ccl_health.hook import judging
    from ccl_health.judge.verdicts import Verdict
    paths = sorted(glob.glob(os.path.join(
        HERE, 'fixtures', 'device', 'hook-timing-x2', 'keep', '*.json')))
    healthy = 0
    for path in paths:
        with open(path) as fp:
            doc = json.load(fp)
        ns = doc['node_state']
        if doc['code'] != 0 or not ns.get('after'):
            continue
        healthy += 1
        # the old rule noted them
        assert any('NVLink errors rising' in c['text']
                   for c in ns['causes']), path
        before = NodeState.from_dict(ns['before'])
        after = NodeState.from_dict(ns['after'])
        head = doc['line'].split('; noted: ')[0][len('HEALTHY: '):]
        res = judging.with_node_state(judging.result(Verdict.PASS, head),
                                      before, after)
        assert (res.code, res.line) == (0, f'HEALTHY: {head}'), path
        assert res.node_state['causes'] == []
        rose = res.node_state['rises']['nvlink']
        assert any(r.get('crc_data') or r.get('ecc_data')
                   for r in rose.values())
    assert healthy == 3
