"""The nightly's rehearsal (``scripts/nightly --rehearse SCENARIO``,
ccl_health/rehearsal): real nights through the nightly's own code (the
lock, ``scripts/run`` with ReFrame, the recording, the history findings,
the page, the mail) on this host without GPUs or Slurm, the sweep's
program the package's replay stand-in playing the shipped H100 net-socket
captures as each scenario makes them.  SQLite; one series of nights in
one folder: healthy, healthy again, drift, collapse, crash, hang.  The
wall time of each night is printed (``-s``)."""

import json
import os
import re
import shlex
import subprocess
import sys
import time

import pytest

from conftest import REPO
from ccl_health.db import store
from ccl_health.evidence import nccltests
from ccl_health.rehearsal import healthy_captures, scenarios

#: the system tier (tests/conftest.py): the nightly's rehearsal: ReFrame runs of the captures, night after night
pytestmark = pytest.mark.system

pytest.importorskip('reframe')

NIGHTLY = os.path.join(REPO, 'scripts', 'nightly')


def _env(tmp_path, **extra):
    """The environment of a site's login node: its real database and
    published folder named (the rehearsal must not use them), no GPUs."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('CCL_HEALTH_')}
    env.update(CCL_HEALTH_DB=str(tmp_path / 'site-real.db'),
               CCL_HEALTH_PUBLISH=str(tmp_path / 'site-real-www'),
               CCL_HEALTH_OUTPUT=str(tmp_path / 'out'))
    env.update(extra)
    return env


def rehearse(env, scenario, *extra, cwd):
    t0 = time.monotonic()
    p = subprocess.run([NIGHTLY, '--rehearse', scenario, *extra], env=env,
                       cwd=cwd, capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - t0
    print(f'rehearsal night {scenario}: exit {p.returncode}, {wall:.1f} s')
    return p, [ln for ln in p.stdout.splitlines() if ln.strip()], wall


def _night(www, mail):
    """night.json of the night whose page the mail names."""
    page = mail[-1].split('page: ', 1)[1]
    folder = os.path.dirname(page)
    assert os.path.dirname(folder) == str(www / 'nights'), page
    with open(os.path.join(folder, 'night.json')) as fp:
        return json.load(fp), open(page).read()


def _case(db, run_id):
    with store.open_store(db, readonly=True) as s:
        [case] = s.cases('WHERE run_id = ?', (run_id,))
        records = s.records()
    return case, [r for r in records if r['run_id'] == run_id]


def _standins_left(root):
    left = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as fp:
                if str(root).encode() in fp.read():
                    left.append(pid)
        except OSError:
            pass
    return left


def test_a_series_of_rehearsal_nights(tmp_path):
    env = _env(tmp_path)
    root = tmp_path / 'out' / 'rehearsal'
    db, www = str(root / 'ccl-health.db'), root / 'www'
    walls = {}
    seen = []

    def night(scenario, want_rc):
        p, mail, wall = rehearse(env, scenario, cwd=tmp_path)
        walls.setdefault(scenario, []).append(round(wall, 1))
        print('\n'.join(mail))
        rcs = want_rc if isinstance(want_rc, set) else {want_rc}
        assert p.returncode in rcs, p.stdout + p.stderr
        assert 'Traceback' not in p.stdout + p.stderr
        # the mail's first line and the page say it is a rehearsal
        assert re.match(rf'ccl-health nightly local:gpu \(rehearsal: '
                        rf'{scenario}\) \S+: ', mail[0]), mail
        meta, page = _night(www, mail)
        assert meta['lines'] == mail[:-1] and meta['exit'] == p.returncode
        assert f'rehearsal: {scenario}' in page
        case, records = _case(db, meta['run_id'])
        seen.append(meta['run_id'])
        return mail, case, records

    # night 1 and 2: healthy; the second compares with the first
    mail, case, records = night('healthy', 0)
    assert 'all clear, nothing new (1 case: 1 pass; nothing told before)' \
        in mail[0]
    assert case['verdict'] == 'pass' and case['proven'] == 'net-socket'
    assert case['case_name'].startswith('AllReduceSweep %transport='
                                        'net-socket')
    healthy_1 = {r['size']: r['busbw'] for r in records}
    want = {r.size: r.busbw for r in nccltests.parse_text(
        open(healthy_captures()[0]).read()).rows}
    assert healthy_1 == want             # what the capture measured
    mail, case, records = night('healthy', 0)
    assert f'all clear, nothing new (1 case: 1 pass; vs run {seen[0]})' \
        in mail[0]
    # night 3: drift: -5 %, inside the reference's tolerance: a pass,
    # recorded 5 % below the capture it replays (night 3: capture 3)
    # (its exit is what history makes of one run 5 % low: the nightly's
    # news, tested there)
    mail, case, records = night('drift', {0, 1})
    assert case['verdict'] == 'pass'
    want = {r.size: r.busbw for r in nccltests.parse_text(
        open(healthy_captures()[2]).read()).rows}
    got = {r['size']: r['busbw'] for r in records}
    assert set(got) == set(want) and all(
        abs(got[s] - scenarios.DRIFT * want[s]) <= 0.011 for s in want), \
        (got, want)
    # night 4: collapse: -90 %: below the reference, new: exit 1
    mail, case, records = night('collapse', 1)
    assert 'NEW: 1 new failure(s)' in mail[0]
    assert mail[1].startswith('BELOW-REFERENCE AllReduceSweep') and \
        '(-90%)' in mail[1], mail
    assert case['verdict'] == 'below-reference' and len(records) == 3
    # night 5: crash: a new failure of another kind, named: exit 1
    mail, case, records = night('crash', 1)
    assert 'NEW: 1 new failure(s)' in mail[0]
    assert mail[1].startswith('CRASH AllReduceSweep') and \
        'exited with status 3' in mail[1], mail
    assert case['verdict'] == 'crash'
    assert 'Connection closed by remote peer' in case['reason'] and \
        '(fatal: connection)' in case['reason'], case['reason']
    # night 6: hang: the output stops, the job's time limit ends it
    mail, case, records = night('hang', 1)
    assert mail[1].startswith('HANG AllReduceSweep') and \
        'time limit' in mail[1], mail
    assert case['verdict'] == 'hang'
    assert _standins_left(root / 'world') == []
    # the index lists the six nights, each marked
    index = (www / 'index.html').read_text()
    for s in ('healthy', 'drift', 'collapse', 'crash', 'hang'):
        assert f'rehearsal: {s}' in index
    assert os.path.realpath(www / 'latest') == os.path.dirname(
        mail[-1].split('page: ')[1])
    # the site's own database and folder were never touched
    assert not (tmp_path / 'site-real.db').exists()
    assert not (tmp_path / 'site-real-www').exists()
    print('rehearsal night wall times (s):', walls)




def test_db_and_publish_given_are_used_and_a_gpu_missing_is_seen(tmp_path):
    """``--db`` / ``--publish`` given: the rehearsal writes there.  With
    ``CCL_HEALTH_ASSUME_GPUS=1:sm_90`` the node has one GPU where the case
    needs two: the case is skipped, as on a real node with a GPU lost."""
    env = _env(tmp_path, CCL_HEALTH_ASSUME_GPUS='1:sm_90')
    db, www = tmp_path / 'mine.db', tmp_path / 'mine-www'
    p, mail, _ = rehearse(env, 'healthy', '--db', str(db), '--publish',
                          str(www), cwd=tmp_path)
    # nothing measured is never an all-clear (issue 28): exit 2, the reason
    assert p.returncode == 2, p.stdout + p.stderr
    assert 'NOTHING MEASURED' in mail[0] or 'not measured' in p.stdout, \
        p.stdout
    meta, page = _night(www, mail)
    case, records = _case(str(db), meta['run_id'])
    assert case['verdict'] == 'skipped' and not [
        r for r in records if r['busbw'] is not None]
    assert 'rehearsal: healthy' in mail[0] and 'rehearsal: healthy' in page
    assert not (tmp_path / 'out' / 'rehearsal' / 'ccl-health.db').exists()


def test_a_rehearsal_of_another_system_is_one_line(tmp_path):
    p, mail, _ = rehearse(_env(tmp_path), 'healthy', '--system', 'frontier',
                          cwd=tmp_path)
    assert p.returncode == 2 and mail == []
    assert p.stderr.strip().splitlines() == [
        'ccl-health nightly: COULD NOT RUN: --rehearse replays its captures '
        'on this host (--system local --partition gpu), not on frontier']
    p = subprocess.run([NIGHTLY, '--rehearse', 'meltdown'], env=_env(
        tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "invalid choice: 'meltdown'" in p.stderr


# -- the scenarios, on the shipped captures ---------------------------------

def _capture(i=0):
    return scenarios.as_the_sweep_prints(open(healthy_captures()[i]).read())


def test_rows_are_rewritten_with_the_upstream_formats():
    """A factor of 1 gives the capture back byte for byte: the rows are
    written with nccl-tests' own format strings (src/util.cu)."""
    for path in healthy_captures():
        text = scenarios.as_the_sweep_prints(open(path).read())
        assert 'NCCL version' not in text
        assert scenarios.scaled(text, 1.0) == text
    assert scenarios.float_str(36486.04, 7) == '36486.0'
    assert scenarios.float_str(144989.2, 7) == ' 144989'
    assert scenarios.float_str(1.75, 6) == '  1.75'
    assert scenarios.float_str(0.1845, 6) == '  0.18'


def test_collapse_and_drift_scale_busbw_and_time():
    text = _capture()
    base = nccltests.parse_text(text)
    for factor in (scenarios.DRIFT, scenarios.COLLAPSE):
        res = nccltests.parse_text(scenarios.scaled(text, factor))
        assert res.complete and len(res.rows) == len(base.rows) == 3
        for a, b in zip(base.rows, res.rows):
            assert abs(b.busbw - a.busbw * factor) <= 0.006
            oop_a, oop_b = a.out_of_place, b.out_of_place
            assert abs(oop_b.time_us * factor / oop_a.time_us - 1) < 1e-3


def test_crash_and_hang_outputs():
    logs = [open(os.path.join(os.path.dirname(healthy_captures()[0]),
                              f)).read()
            for f in ('nccl-debug.vm.1326.log', 'nccl-debug.vm.1327.log')]
    out, rc, new_logs, stall = scenarios.make('crash', _capture(), logs, 99)
    res = nccltests.parse_text(out)
    assert rc == 3 and stall == 0 and not res.complete
    assert [r.size for r in res.rows] == [64 << 20]
    assert "Test NCCL failure common.cu:514 'remote process exited or " \
        "there was a network error / socketProgress: Connection closed by " \
        "remote peer 192.0.2.2<43407>'" in out
    assert ' .. vm pid 707: Test failure common.cu:1454' in out
    # rank 0's log ends with the WARN, in NCCL's logger form
    assert new_logs[0].splitlines()[-1] == (
        'vm:1326:1347 [0] misc/socket.cc:50 NCCL WARN socketProgress: '
        'Connection closed by remote peer 192.0.2.2<43407>')
    assert new_logs[1] == logs[1]
    out, rc, _, stall = scenarios.make('hang', _capture(), logs, 99)
    res = nccltests.parse_text(out)
    assert stall == 99 and [r.size for r in res.rows] == [64 << 20]
    assert not res.complete


def test_the_standin_writes_the_logs_as_its_output_s_processes(tmp_path):
    """The stand-in (as the rehearsal installs it) replays a capture
    folder: the output, the exit status, and the debug logs with the pids
    of the output's rank lines (the WARN line's too)."""
    from ccl_health import rehearsal
    prefix = tmp_path / 'nccl-tests'
    rehearsal.write_standin(str(prefix))
    rehearsal.write_capture(str(tmp_path / 'caps' / 'c'), 'crash',
                            healthy_captures()[1])
    env = dict(os.environ, CCL_HEALTH_REPLAY_DIR=str(tmp_path / 'caps'),
               CCL_HEALTH_REPLAY_NET_SOCKET='c', NCCL_P2P_DISABLE='1',
               NCCL_NET_PLUGIN='none',
               NCCL_DEBUG_FILE=str(tmp_path / 'nccl-debug.%h.%p.log'))
    p = subprocess.run([str(prefix / 'bin' / 'all_reduce_perf'), '-g', '1'],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3 and 'Test NCCL failure' in p.stdout
    logs = sorted(tmp_path.glob('nccl-debug.*.log'))
    assert len(logs) == 2
    pids = [set(re.findall(r'^[^\s:]+:(\d+):\d+ \[', f.read_text(), re.M))
            for f in logs]
    assert pids == [{'760'}, {'761'}]        # capture 2's rank lines
    assert 'vm:760:1347 [0] misc/socket.cc:50 NCCL WARN' in \
        logs[0].read_text()

def test_the_standin_runs_from_a_folder_with_a_space(tmp_path, monkeypatch):
    """A checkout in a folder with a space (its .venv's Python there):
    the stand-in the rehearsal installs still runs, by that Python.  Its
    ``#!<python>`` line made the kernel look for the path up to the space:
    exit 127, every rehearsed night a CRASH."""
    from ccl_health import rehearsal
    here = tmp_path / 'my checkout'
    here.mkdir()
    python = here / 'python'
    # that Python: this one, at a path with a space
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} '
                      f'"$@"\n')
    python.chmod(0o755)
    monkeypatch.setattr(sys, 'executable', str(python))
    prefix = here / 'nccl-tests'
    rehearsal.write_standin(str(prefix))
    p = subprocess.run([str(prefix / 'bin' / 'all_reduce_perf'), '--help'],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith('usage: all_reduce_perf [nccl-tests '
                               'options]: a stand-in'), p.stdout


def test_a_calibration_is_the_level_of_the_nights_after_it(tmp_path):
    """Issue 37: two healthy nights, a calibration from their run reports
    as docs/sites.md shows first (``scripts/calibrate --report``, into the
    rehearsal's reference: each size's noise beside its value; the level
    recorded in the database of the runs reported, the rehearsal's), a
    healthy night, then the drift scenario (-5 %, inside the reference's
    tolerance): all clear twice, and the third drift night tells a DRIFT at each size,
    exit 1.  Before, the key waited for 15 runs and the three nights were
    all clear."""
    env = _env(tmp_path)
    root = tmp_path / 'out' / 'rehearsal'
    for _ in range(2):
        p, mail, _ = rehearse(env, 'healthy', cwd=tmp_path)
        assert p.returncode == 0 and 'all clear' in mail[0], p.stdout
    reports = sorted((root / 'reports').iterdir())
    assert len(reports) == 2
    p = subprocess.run(
        [os.path.join(REPO, 'scripts', 'calibrate'),
         *[a for r in reports for a in ('--report', str(r))],
         '--reference-dir', str(root / 'world' / 'reference'),
         '--min-size', '64M'], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    # the database of the runs reported: the rehearsal's, beside its
    # reports/ (never $CCL_HEALTH_DB, the site's)
    assert f'{root / "ccl-health.db"}: recorded the baseline of 1 ' \
        f'configuration(s) (3 sizes)' in p.stdout, p.stdout
    text = (root / 'world' / 'reference' / 'local.yaml').read_text()
    assert 'noise: {64MiB: ' in text and 'calibrated: {runs: 2, ' in text
    p, mail, _ = rehearse(env, 'healthy', cwd=tmp_path)
    assert p.returncode == 0 and 'all clear, nothing new' in mail[0], mail
    for n in range(3):
        p, mail, _ = rehearse(env, 'drift', cwd=tmp_path)
        print('\n'.join(mail))
        if n < 2:
            assert p.returncode == 0 and 'all clear, nothing new' in \
                mail[0], mail
    assert p.returncode == 1 and 'NEW: 0 new failure(s), 3 new ' \
        'finding(s)' in mail[0], mail
    drifts = [ln for ln in mail if ln.startswith(
        'DRIFT local/gpu/net-socket all_reduce 1n/2r ')]
    assert [ln.split()[4] for ln in drifts] == \
        ['64MiB:', '128MiB:', '256MiB:'], mail
    assert all('sustained over 3 runs' in ln for ln in drifts), drifts
    # the site's own database was never touched
    assert not (tmp_path / 'site-real.db').exists()
