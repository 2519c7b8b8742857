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
