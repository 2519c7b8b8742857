"""Verdicts from real ReFrame run reports of the suite on 2x H200
(tests/fixtures/device/suite-run, made by benchmarks/device/suite_on_device.sh)."""

import glob
import os
import shutil
import subprocess
import sys

import pytest

from ccl_health import CclHealthError
from ccl_health import summary
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
    with pytest.raises(CclHealthError, match='r.json: not a run report'):
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


# -- captured on the device (tests/fixtures/device/real-failures, H100, one GPU) ----

TRUST = os.path.join(REPO, 'tests', 'fixtures', 'device', 'real-failures')


def test_device_damaged_libfabric_tarball_fails_the_plugin_transports():
    """The real run report of scripts/run on the device with a truncated
    libfabric tarball in the mirror: libfabric failed its checksum, so the
    plugin could not build (ReFrame: fail_deps) and the plugin sweeps were
    skipped by ReFrame: both are build-failed (exit 1); intra and
    net-socket skipped for their own reason (one GPU)."""
    report = summary.load_report(os.path.join(TRUST, 'a-run-report.json'))
    got = {cv.transport: cv for cv in summary.case_verdicts(report)}
    assert got['net-plugin'].verdict == 'build-failed'
    assert got['net-plugin-gdr'].verdict == 'build-failed'
    assert 'LibfabricBuild' in got['net-plugin'].reason
    assert got['intra'].verdict == 'skipped' and 'at least 2 GPUs' in \
        got['intra'].reason
    assert summary.run_exit_code(list(got.values())) == 1


def test_device_damaged_tarball_is_listed_by_report_failed(tmp_path):
    report = os.path.join(TRUST, 'a-run-report.json')
    db = str(tmp_path / 'db.sqlite')
    subprocess.run([sys.executable, '-m', 'ccl_health.cli', 'db', '--db', db,
                    'ingest', report], cwd=REPO, check=True,
                   capture_output=True)
    p = subprocess.run([sys.executable, '-m', 'ccl_health.cli', 'db', '--db',
                        db, 'failed', '--hours', '1000000'], cwd=REPO,
                       capture_output=True, text=True)
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.count('BUILD-FAILED') == 2


def test_device_sigterm_midway_case_is_rebuilt_from_its_stage(tmp_path):
    """What scripts/run recorded on the device after a SIGTERM in the middle
    of a real net-socket sweep (b.db), and the same record rebuilt here from
    the stage files the case left (b-stage)."""
    from ccl_health.db import aborted
    from ccl_health.db import store
    with store.open_store(os.path.join(TRUST, 'b.db'), readonly=True) as db:
        [case] = db.cases()
        sizes = [r['size'] for r in db.records()]
    assert case['verdict'] == 'aborted'
    assert 'stopped by SIGTERM after 4 of 11 size(s)' in case['reason']
    assert sizes == [1 << 20, 2 << 20, 4 << 20, 8 << 20]
    stage = tmp_path / 'stage' / 'local' / 'gpu' / 'builtin' / 'Sweep'
    shutil.copytree(os.path.join(TRUST, 'b-stage'), stage)
    [again] = aborted.cases_in_flight(str(tmp_path / 'stage'),
                                      'sigterm-midway', stopped_by='SIGTERM')
    assert again.verdict == 'aborted' and again.transport == 'net-socket'
    assert [s.size for s in again.sizes] == sizes
    assert again.reason == case['reason']
    assert again.proven == 'net-socket'      # NCCL_HOSTID: two "hosts"
    assert aborted.cases_in_flight(str(tmp_path / 'stage'), 'another-run') \
        == []


@pytest.mark.parametrize('name, verdict, words', [
    ('no-device', 'crash', "no CUDA-capable device is detected"),
    ('bad-uuid', 'crash', "no CUDA-capable device is detected"),
    ('ok-1rank-json', None, ''),
])
def test_device_outputs_of_real_failures(name, verdict, words):
    """Real nccl-tests 2.19.6 outputs from the device with their exit
    status: a run with no visible device (CUDA_VISIBLE_DEVICES empty, or a
    UUID that is not there) is a crash naming CUDA's error; a complete
    one-rank run with -J is complete on its text and its JSON."""
    from ccl_health.evidence import nccltests
    from ccl_health.judge import casejudge as V
    d = os.path.join(TRUST, 'd')
    text = open(os.path.join(d, f'{name}.out')).read()
    rc = int(open(os.path.join(d, f'{name}.rc')).read().split('=')[1])
    js = os.path.join(d, 'ok-1rank.json')
    res = nccltests.parse(text, open(js).read() if name.startswith('ok')
                          else None, js)
    got = V.judge_output(res, rc, what='all_reduce_perf')
    if verdict is None:
        assert got is None and res.complete and len(res.rows) == 12
        assert V.judge_output(res, None) is not None   # exit unknown
    else:
        assert str(got[0]) == verdict and words in got[1], got


def test_device_time_limit_is_a_hang_from_the_reports_numbers():
    """The device's net-socket sweep stopped at its 20 s time limit: a hang,
    read from the report's time_run >= time_limit, not from its text."""
    report = summary.load_report(os.path.join(
        REPO, 'tests', 'fixtures', 'device', 'suite-run', 'keep', 'o-hang',
        'reports', 'run-20261122T220747.json'))
    [cv] = summary.case_verdicts(report)
    assert cv.verdict == 'hang'
    tc = [t for t in report['runs'][-1]['testcases'] if not t['fixture']][0]
    tc['fail_reason'] = 'something else entirely'
    [cv] = summary.case_verdicts(report)
    assert cv.verdict == 'hang'
    tc['time_run'] = 5.0
    [cv] = summary.case_verdicts(report)
    assert cv.verdict != 'hang'


TRUST2 = os.path.join(REPO, 'tests', 'fixtures', 'device',
                      'real-failures-rerun')


def test_device_complete_socket_sweep_on_one_gpu_is_judged_in_full():
    """The device run after the structure change (H100, one GPU, two ranks
    told they are two hosts): a complete net-socket sweep with every piece
    of evidence (exit 0, closing lines, proof NET/Socket, the reference for
    local:gpu net-socket 1x2) is judged size by size: two ranks sharing one
    GPU fall short of the two-GPU reference, and it says so (no false
    pass)."""
    report = summary.load_report(os.path.join(TRUST2, 'b2-run-report.json'))
    [cv] = summary.case_verdicts(report)
    assert cv.verdict == 'below-reference' and cv.proven == 'net-socket'
    assert cv.checked_sizes == 7 and len(cv.shortfalls) == 7
    assert summary.run_exit_code([cv]) == 1
    tc = [t for t in report['runs'][-1]['testcases'] if not t['fixture']][0]
    assert tc['collective'] == 'all_reduce' and tc['algo'] == 'default'


def test_device_build_failed_and_aborted_after_issue12():
    """The same proofs after the structure change: build-failed with the
    root build's own line, and a SIGTERM midway recorded as aborted."""
    from ccl_health.db import store
    log = open(os.path.join(TRUST2, 'logs', 'a-build-failed.log')).read()
    assert 'sha256 mismatch' in log and 'scripts/run exit: 1' in log
    with store.open_store(os.path.join(TRUST2, 'b.db'), readonly=True) as db:
        [case] = db.cases()
    assert case['verdict'] == 'aborted'


def test_one_rule_for_a_size_against_its_reference():
    """The sweep's shortfalls and the size records of the database use one
    rule: below ref x (1 - tolerance), and a non-finite value is never
    within it (before, a nan size was recorded as 'pass')."""
    from ccl_health.db import recorder
    from ccl_health.judge import casejudge as V
    for value, below in ((89.9, True), (90.0, False), (120.0, False),
                         (float('nan'), True), (float('inf'), True)):
        assert V.below_reference(value, 100.0, 0.10) is below
        assert recorder.size_verdict(value, 100.0, 0.10) == (
            'below-reference' if below else 'pass')
    assert recorder.size_verdict(float('nan'), None, None) == 'no-reference'
