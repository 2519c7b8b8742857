"""The whole ReFrame path without a GPU: the sweep check runs a stand-in
binary (tests/replay) that replays outputs captured on 2x H200, through the
main command, and the verdicts come out of the run report.  Each scenario
is a real failure mode captured on the device (fallback, one NVLink channel,
a crashed rank) or produced here (a hang past the time limit, a missing
binary)."""

import os
import subprocess
import sys

import pytest
import yaml

from conftest import REPO
from helpers.replay import (cases, make_site, replay_env, run_suite,
                            verdict_lines)

#: the system tier (tests/conftest.py): ReFrame runs of the replay stand-ins
pytestmark = pytest.mark.system

pytest.importorskip('reframe')


def test_healthy_node_every_transport(tmp_path):
    p, report, out = run_suite(tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    v = verdict_lines(p.stdout)
    assert 'PASS' in v['intra'] and '346.5 GB/s at 8GiB' in v['intra']
    assert 'PASS' in v['net-socket'] and 'NET/Socket' in v['net-socket']
    assert 'PASS' in v['net-plugin'] and 'NET/Libfabric' in v['net-plugin']
    assert 'SKIPPED' in v['net-plugin-gdr'] and 'GDR not supported' in \
        v['net-plugin-gdr']
    # no InfiniBand / RoCE on local: net-ib and net-ib-gdr are skipped,
    # with the reason
    for ib in ('net-ib', 'net-ib-gdr'):
        assert 'SKIPPED' in v[ib] and 'not configured for local' in v[ib]
    assert '3 passed, 0 failed, 3 skipped' in p.stdout
    tc = cases(report)
    assert tc['net-plugin']['proven_transport'] == 'net-plugin'
    assert tc['net-plugin']['versions']['plugin_version'] == '1.21.1'
    assert tc['net-plugin']['versions']['provider'] == 'tcp;ofi_rxm'
    # results went into ReFrame's results storage and the perflog too
    assert (out / 'results.db').stat().st_size > 0
    perflogs = list((out / 'perflogs').rglob('*.log'))
    assert perflogs and 'busbw_1GiB' in ''.join(
        f.read_text() for f in perflogs)
    # every rank's NCCL debug log was kept beside the output
    stage = tc['intra']
    assert stage['num_tasks'] == 2 and stage['num_tasks_per_node'] == 2


def test_plugin_fallback_is_a_failure_that_names_the_cause(tmp_path):
    p, report, _ = run_suite(
        tmp_path, '-n', 'AllReducePluginSweep%transport=net-plugin%',
        '-S', 'min_size=1M', '-S', 'max_size=16M', '-S', 'step_factor=4',
        env={'CCL_HEALTH_REPLAY_NET_PLUGIN': 'plugin-missing-fallback'})
    assert p.returncode == 1
    line = verdict_lines(p.stdout)['net-plugin']
    assert 'FALLBACK' in line
    assert 'fell back to NET/Socket' in line
    assert 'Could not find: /nonexistent/libnccl-net-ofi.so' in line
    tc = cases(report)['net-plugin']
    assert tc['verdict'] == 'fallback' and tc['proven_transport'] == \
        'net-socket'


def test_one_nvlink_channel_is_below_reference_with_sizes(tmp_path):
    p, report, _ = run_suite(
        tmp_path, '-n', 'AllReduceSweep%transport=intra',
        '-S', 'min_size=1M', '-S', 'max_size=1G', '-S', 'step_factor=4',
        env={'CCL_HEALTH_REPLAY_INTRA': 'intra-1channel'})
    assert p.returncode == 1
    line = verdict_lines(p.stdout)['intra']
    assert 'BELOW-REFERENCE' in line
    # 1 GiB: 20.98 GB/s on one channel against ~330 expected
    assert '1GiB 20.98 vs' in line and 'allowed -10%' in line


def test_hang_past_the_time_limit_is_recorded(tmp_path):
    p, report, _ = run_suite(
        tmp_path, '-n', 'AllReduceSweep%transport=intra',
        '-S', 'time_limit=3s', env={'CCL_HEALTH_REPLAY_SLEEP': '60'})
    assert p.returncode == 1
    assert 'HANG' in verdict_lines(p.stdout)['intra']
    tc = cases(report)['intra']
    assert tc['result'] == 'fail' and tc['fail_phase'] == 'run'


def test_crashed_rank_is_a_crash(tmp_path):
    p, _, _ = run_suite(
        tmp_path, '-n', 'AllReduceSweep%transport=intra',
        env={'CCL_HEALTH_REPLAY_INTRA': 'missing-gpu'})
    assert p.returncode == 1
    line = verdict_lines(p.stdout)['intra']
    assert 'CRASH' in line and 'Test failure' in line


def test_missing_binary_could_not_check(tmp_path):
    empty = tmp_path / 'empty-tests'
    (empty / 'bin').mkdir(parents=True)
    p, _, _ = run_suite(tmp_path, '-n', 'AllReduceSweep%transport=intra',
                        tests_prefix=str(empty))
    assert p.returncode == 2          # the tool could not judge: not a fault
    line = verdict_lines(p.stdout)['intra']
    assert 'COULD-NOT-CHECK' in line and 'all_reduce_perf is missing' in line


def test_missing_site_prefix_could_not_check(tmp_path):
    """The site names an installation of nccl-tests that is not there: the
    sweep runs the site's binaries (nothing is built) and cannot check,
    naming the site key."""
    p, report, _ = run_suite(tmp_path, '-n', 'AllReduceSweep%transport=intra',
                             tests_prefix=str(tmp_path / 'not-installed'))
    assert p.returncode == 2, p.stdout[-3000:]
    line = verdict_lines(p.stdout)['intra']
    assert 'COULD-NOT-CHECK' in line and 'does not exist' in line
    assert 'build.nccl_tests.prefix' in line
    assert not [tc for tc in report['runs'][-1]['testcases']
                if tc['name'].startswith('CollectiveTestsBuild')]


def test_run_killed_midway_keeps_what_it_recorded(tmp_path):
    """SIGKILL the whole run while the third transport is running: the
    cases already read are in the performance database."""
    import signal
    import time
    from ccl_health.db import store
    out = tmp_path / 'out'
    db = tmp_path / 'db.sqlite'
    env = replay_env(tmp_path, {
        'CCL_HEALTH_DB': str(db),
        # only the plugin run is slow
        'CCL_HEALTH_REPLAY_NET_PLUGIN': 'net-plugin',
        'CCL_HEALTH_REPLAY_SLEEP_NET_PLUGIN': '120'})
    proc = subprocess.Popen([sys.executable, '-m', 'ccl_health.cli', 'run',
                             '--output', str(out)], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    done = set()
    while time.monotonic() < deadline and len(done) < 2:
        time.sleep(0.5)
        if db.exists():
            with store.open_store(str(db)) as s:
                done = {c['transport'] for c in s.cases()}
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with store.open_store(str(db)) as s:
        cases = {c['transport']: c for c in s.cases()}
    assert {'intra', 'net-socket'} <= set(cases)
    assert 'net-plugin' not in cases          # killed while it ran
    assert cases['intra']['verdict'] == 'pass'
    with store.open_store(str(db)) as s:
        sizes = [r for r in s.records() if r['transport'] == 'intra']
        assert len(sizes) == 31               # 8 B .. 8 GiB, all there


def test_sigterm_midway_records_the_case_in_flight_as_aborted(tmp_path):
    """SIGTERM to the main command (what Slurm sends at a time limit and on
    scancel) while the plugin case runs: the cases judged before stay, the
    one in flight is recorded as aborted with what it measured, the verdict
    lines say so, the exit code is 128 + 15, and nothing the run started is
    left running."""
    import signal
    import time
    from ccl_health.db import aborted
    from ccl_health.db import store
    out = tmp_path / 'out'
    db = tmp_path / 'db.sqlite'
    run_id = 'sigterm-test-run'
    env = replay_env(tmp_path, {'CCL_HEALTH_DB': str(db),
                                'CCL_HEALTH_RUN_ID': run_id,
                                'CCL_HEALTH_REPLAY_SLEEP_NET_PLUGIN': '300'})
    proc = subprocess.Popen([sys.executable, '-m', 'ccl_health.cli', 'run',
                             '--output', str(out)], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if aborted.leftover_processes(run_id) and any(
                'all_reduce_perf' in open(f'/proc/{p}/cmdline').read()
                for p in aborted.leftover_processes(run_id)
                if os.path.exists(f'/proc/{p}/cmdline')) and db.exists():
            with store.open_store(str(db)) as s:
                if {'intra', 'net-socket'} <= {c['transport']
                                               for c in s.cases()}:
                    break
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stdout + stderr
    assert 'stopped by SIGTERM' in stdout
    with store.open_store(str(db)) as s:
        cases = {c['transport']: c for c in s.cases('WHERE run_id = ?',
                                                     (run_id,))}
    assert cases['intra']['verdict'] == 'pass'
    assert cases['net-plugin']['verdict'] == 'aborted'
    assert 'stopped by SIGTERM' in cases['net-plugin']['reason']
    line = [ln for ln in stdout.splitlines() if 'net-plugin' in ln and
            'ABORTED' in ln]
    assert line, stdout
    assert aborted.leftover_processes(run_id) == []


def test_failed_plugin_build_fails_only_the_plugin_transports(tmp_path):
    """The plugin does not build (its recipe's source is damaged): the
    plugin transports are build-failed (a failure: exit 1, in the verdict
    lines and the database), intra and net-socket still run and pass."""
    from ccl_health.db import store
    (tmp_path / 'own').mkdir()
    site = make_site(tmp_path / 'own')
    doc = yaml.safe_load(open(os.path.join(site, 'local.yaml')))
    doc['build']['plugin']['prefix'] = None   # not adopted: built here
    open(os.path.join(site, 'local.yaml'), 'w').write(yaml.safe_dump(doc))
    mirror = tmp_path / 'mirror'
    mirror.mkdir()                      # holds no tarball at all
    db = tmp_path / 'db.sqlite'
    p, report, _ = run_suite(
        tmp_path, '-n', 'AllReduce(Plugin)?Sweep',
        env={'CCL_HEALTH_SITE_DIR': site, 'CCL_HEALTH_MIRROR': str(mirror),
             'CCL_HEALTH_DB': str(db)})
    assert p.returncode == 1, p.stdout + p.stderr
    lines = verdict_lines(p.stdout)
    assert 'PASS' in lines['intra'] and 'PASS' in lines['net-socket']
    assert 'BUILD-FAILED' in lines['net-plugin']
    with store.open_store(str(db)) as s:
        got = {c['transport']: c['verdict'] for c in s.cases()}
    assert got['net-plugin'] == 'build-failed'
    assert got['intra'] == 'pass'


def test_output_folder_with_spaces(tmp_path):
    """Stage, reports and database under a folder whose name has spaces:
    ReFrame's job launch cannot take them, so it is given a space-free
    link; the sweep passes and the results land in the folder asked for."""
    out = tmp_path / 'my results' / 'night 1'
    env = replay_env(tmp_path, {
        'CCL_HEALTH_CACHE': str(tmp_path / 'build cache'),
        'CCL_HEALTH_DB': None})
    p = subprocess.run([sys.executable, '-m', 'ccl_health.cli', 'run',
                        '--output', str(out), '--', '-n',
                        'AllReduceSweep%transport=intra'], env=env, cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert 'PASS' in verdict_lines(p.stdout)['intra']
    assert list((out / 'reports').glob('run-*.json'))
    assert (out / 'ccl-health.db').exists()
