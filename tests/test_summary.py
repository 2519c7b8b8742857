"""Verdicts from real ReFrame run reports of the suite on 2x H200
(tests/fixtures/device/suite-run, made by benchmarks/device/suite_on_device.sh)."""

import glob
import os

import pytest

from ccl_health import CclHealthError, summary
from conftest import REPO

RUNS = os.path.join(REPO, 'tests', 'fixtures', 'device', 'suite-run', 'keep')


def verdicts(run):
    path = glob.glob(os.path.join(RUNS, run, 'reports', 'run-*.json'))[0]
    return {v.transport: v for v in
            summary.case_verdicts(summary.load_report(path))}


def test_healthy_main_run():
    v = verdicts('o-main')
    assert {t: x.verdict for t, x in v.items()} == {
        'intra': 'pass', 'net-socket': 'pass', 'net-plugin': 'pass',
        'net-plugin-gdr': 'skipped'}
    assert v['intra'].measured[8 << 30] == pytest.approx(348.56, abs=0.01)
    assert v['intra'].checked_sizes == 14
    assert v['net-plugin'].proven == 'net-plugin'
    assert v['net-plugin'].versions['provider'] == 'tcp;ofi_rxm'
    assert 'GDR not supported' in v['net-plugin-gdr'].reason
    text = summary.render(list(v.values()))
    assert '3 passed, 0 failed, 1 skipped' in text


def test_plugin_not_found_on_the_gpu_node_is_a_fallback():
    v = verdicts('o-fallback')['net-plugin']
    assert v.verdict == 'fallback' and v.proven == 'net-socket'
    assert 'Could not find: /nonexistent/libnccl-net-ofi.so' in v.reason


def test_time_limit_on_the_gpu_node_is_a_hang():
    v = verdicts('o-hang')['net-socket']
    assert v.verdict == 'hang'
    assert 'job timed out' in v.reason


def test_below_reference_lists_sizes_and_shortfall():
    report = {'runs': [{'testcases': [{
        'fixture': False, 'display_name': 'AllReduceSweep %transport=intra',
        'transport': 'intra', 'result': 'fail', 'fail_phase': 'performance',
        'fail_reason': 'performance error: failed to meet references',
        'perfvalues': {
            'local:gpu:busbw_1GiB': [100.0, 330.0, -0.1, None, 'GB/s',
                                     'fail'],
            'local:gpu:busbw_2GiB': [339.0, 339.0, -0.1, None, 'GB/s',
                                     'pass'],
            'local:gpu:busbw_1KiB': [0.1, 0, None, None, 'GB/s', None]}}]}]}
    [v] = summary.case_verdicts(report)
    assert v.verdict == 'below-reference' and v.checked_sizes == 2
    line = v.line()
    assert '1 of 2 sizes below reference' in line
    assert '1GiB 100.00 vs 330.00 GB/s (-70%, allowed -10%)' in line


def test_unreadable_report_names_the_file(tmp_path):
    bad = tmp_path / 'r.json'
    bad.write_text('{')
    with pytest.raises(CclHealthError, match='r.json: cannot read'):
        summary.load_report(str(bad))


def test_below_reference_without_sizes_keeps_reframes_reason():
    # a lower bound on samples/s or an upper bound on the first call
    report = {'runs': [{'testcases': [{
        'fixture': False, 'display_name': 'TorchTrainingStep',
        'transport': 'intra', 'collective': 'torch_train_comm',
        'result': 'fail', 'fail_phase': 'performance',
        'fail_reason': 'performance error: failed to meet reference: '
                       'samples_per_s=10, expected 100 (l=90, u=inf)',
        'perfvalues': {'local:gpu:samples_per_s': [10.0, 100.0, -0.1,
                                                   None, 'samples/s',
                                                   'fail']}}]}]}
    [v] = summary.case_verdicts(report)
    assert v.verdict == 'below-reference'
    assert 'samples_per_s=10, expected 100' in v.line()
    assert '0 of 0 sizes' not in v.line()
