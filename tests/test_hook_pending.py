"""A check the hook could not record is never lost (issue 30,
ccl_health/hook/pending.py): its database held locked by another writer,
the hook gives up within its bound with its verdict's exit code, keeps the
case in a private pending file, and the next check (or ``scripts/report
ingest --pending``) records it and removes the file; the same case written
twice is one case; a pending check older than its key's newest is judged
in its place."""

import datetime
import json
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import time

import pytest

from conftest import REPO
from ccl_health import CclHealthError, safefile
from ccl_health.db import store
from ccl_health.hook import pending
from helpers.node import CAP, hook, wrong_1g
from helpers.stores import REPORT, case_rows, locked
from helpers.dbhistory import END, judged_in_place
from helpers.dbhistory import written  # noqa: F401 (the fixture)

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import db_gen  # noqa: E402

def _sizes(path):
    with store.open_store(str(path), readonly=True) as db:
        return db.query('SELECT case_id, size FROM measurements')


def _mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def _healthy(tmp_path, folder, *args):
    return hook(tmp_path, *args, env={'CCL_HEALTH_PENDING_DIR': str(folder)})


def test_a_locked_database_keeps_the_check_and_the_next_one_records_it(
        tmp_path):
    db = tmp_path / 'db.sqlite'
    folder = tmp_path / 'state' / 'pending'
    lock = locked(db)
    try:
        code, line, err = _healthy(tmp_path, folder)
    finally:
        lock.close()
    assert code == 0 and line.startswith('HEALTHY: '), (line, err)
    kept = pending.files(str(folder))
    assert len(kept) == 1, os.listdir(folder)
    path = kept[0][0]
    # the note names the file and how it will be recorded
    assert 'not recorded in the performance database' in err
    assert 'database is locked' in err or 'gave up' in err, err
    assert f'kept in {path}, recorded by the next check or scripts/report ' \
        f'ingest --pending' in err, err
    doc = json.loads((tmp_path / 'detail.json').read_text())
    assert path in doc['recorded'] and doc['verdict'] == 'pass'
    # private: the folder 0700, the file 0600, and the case whole
    assert _mode(folder) == 0o700 and _mode(path) == 0o600
    case = pending.read(path)
    assert case.verdict == 'pass' and case.nodelist == 'ci-test-host'
    # its identity: the time to the microsecond, host, process, count and
    # random bits (ccl_health.identity.new), never the time to the second
    assert re.fullmatch(r'health-\d{8}T\d{6}\.\d{6}Z-ci-test-host-\d+-\d+-'
                        r'[0-9a-f]{8}', case.run_id), case.run_id
    assert pending.load(path)[1] == os.path.realpath(db)
    assert case.sizes and case.sizes[0].size == 1 << 30 and \
        case.sizes[0].busbw == doc['probes'][0]['busbw']
    assert case.versions == doc['probes'][0]['versions'] and case.env
    assert case.detail['probes'] and case.reason == doc['line']
    assert case_rows(db) == []
    # the lock released: the next check records itself, then the kept one
    code, line, err = _healthy(tmp_path, folder)
    assert code == 0 and err == '', err
    assert pending.files(str(folder)) == []
    rows = case_rows(db)
    assert len(rows) == 2 and rows[0]['run_id'] == case.run_id, rows
    # kept with the time it was measured, not the time it was written
    assert rows[0]['time'] == case.time
    assert 'and 1 pending check(s)' in json.loads(
        (tmp_path / 'detail.json').read_text())['recorded']


def test_the_exit_code_is_the_verdicts_and_the_failure_is_kept_whole(
        tmp_path):
    d = tmp_path / 'replay'
    shutil.copytree(os.path.join(CAP, 'intra'), d / 'intra')
    (d / 'intra' / 'stdout.txt').write_text(
        wrong_1g((d / 'intra' / 'stdout.txt').read_text()))
    db = tmp_path / 'db.sqlite'
    folder = tmp_path / 'pending'
    lock = locked(db)
    try:
        code, line, err = hook(tmp_path, env={
            'CCL_HEALTH_PENDING_DIR': str(folder),
            'CCL_HEALTH_REPLAY_DIR': str(d)})
    finally:
        lock.close()
    assert code == 1 and line.startswith('UNHEALTHY: isolate: '), line
    doc = json.loads((tmp_path / 'detail.json').read_text())
    [(path, _)] = pending.files(str(folder))
    case = pending.read(path)
    assert case.verdict == doc['verdict'] == 'wrong-results'
    # a failure's detail whole: every probe, the node state
    assert len(case.detail['probes']) == len(doc['probes'])
    assert case.detail.get('node_state') == doc['node_state']
    code, _, _ = hook(tmp_path, '--no-pairs', env={
        'CCL_HEALTH_PENDING_DIR': str(folder)})
    assert code == 0
    assert [r['verdict'] for r in case_rows(db)].count('wrong-results') == 1
    assert pending.files(str(folder)) == []


def _case(node, minutes, rng=None):
    return db_gen.hook_case('perlmutter', node, END - datetime.timedelta(
        minutes=minutes), rng or random.Random(minutes))


def _keep(folder, case, age, most=100, max_bytes=1 << 30, db=None):
    """``case`` kept pending in ``folder``, meant for the database ``db``
    (default: ``db.sqlite`` beside the folder), ``age`` its time."""
    db = db or os.path.join(os.path.dirname(str(folder)), 'db.sqlite')
    path, dropped = pending.keep(case, str(folder), most, max_bytes, db)
    os.utime(path, (1e9 + age, 1e9 + age))       # oldest: smallest age
    return path, dropped


def test_report_ingest_pending_records_them_and_names_a_bad_file(tmp_path):
    folder = tmp_path / 'pending'
    cases = [_case(f'nid0000{i}', 10 * i) for i in range(1, 4)]
    paths = [_keep(folder, c, i)[0] for i, c in enumerate(cases, 1)]
    bad = folder / 'case-20261120T000000-nid9-1-0000.json'
    bad.write_text('{"format": "ccl-health-pending/1", "case": {"run')
    os.utime(bad, (1e9, 1e9))                     # the oldest
    db = tmp_path / 'db.sqlite'
    p = subprocess.run(REPORT + ['--db', str(db), 'ingest', '--pending',
                                 str(folder)], capture_output=True,
                       text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=REPO))
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert f'{bad}: cannot read the pending check: ' in p.stderr
    assert 'pending: 4 of 4 file(s) read, 3 recorded' in p.stderr
    assert '3 pending health check(s) recorded from' in p.stdout
    assert [f for f, _ in pending.files(str(folder))] == [str(bad)]
    assert sorted(r['run_id'] for r in case_rows(db)) == sorted(
        c.run_id for c in cases)
    assert not any(os.path.exists(p) for p in paths)
    # nothing left but the bad file: again, nothing recorded twice
    p = subprocess.run(REPORT + ['--db', str(db), 'ingest', '--pending',
                                 str(folder)], capture_output=True,
                       text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=REPO))
    assert p.returncode == 2 and len(case_rows(db)) == 3
    # a folder named that is not there: one line, exit 2, no database made
    p = subprocess.run(REPORT + ['--db', str(tmp_path / 'new.db'), 'ingest',
                                 '--pending', str(tmp_path / 'nope')],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=REPO))
    assert p.returncode == 2 and 'no such folder' in p.stderr
    assert not (tmp_path / 'new.db').exists()


def test_the_hook_drains_oldest_first_and_keeps_a_bad_file(tmp_path):
    folder = tmp_path / 'pending'
    old = _case('nid00001', 30)
    newer = _case('nid00002', 20)
    second = _keep(folder, newer, 2)[0]
    first = _keep(folder, old, 1)[0]
    bad = folder / 'case-x.json'
    bad.write_text('[]')
    db = str(tmp_path / 'db.sqlite')
    with store.open_store(db) as s:
        # no time left: nothing started, nothing removed
        assert pending.drain(s, str(folder), 0.0) == []
        assert len(pending.files(str(folder))) == 3
        # another process recording them (a folder many nodes share)
        with safefile.locked(str(folder / pending.LOCK)) as held:
            assert held
            assert pending.drain(s, str(folder), time.monotonic() + 60) == []
        assert len(pending.files(str(folder))) == 3
        done = pending.drain(s, str(folder), time.monotonic() + 60)
    assert done == [first, second]
    assert [r['run_id'] for r in case_rows(db)] == [old.run_id, newer.run_id]
    assert [p for p, _ in pending.files(str(folder))] == [str(bad)]


def test_the_same_case_written_again_is_one_case(tmp_path):
    """A write the hook gave up on may still commit in its abandoned
    thread, and the kept file be recorded later: one case, one size."""
    db = str(tmp_path / 'db.sqlite')
    case = _case('nid00001', 5)
    with store.open_store(db) as s:
        s.add_case(case)
    folder = tmp_path / 'pending'
    _keep(folder, case, 1)
    with store.open_store(db) as s:
        assert pending.ingest(s, str(folder), err=open(os.devnull, 'w')) \
            == (1, [])
    rows = case_rows(db)
    assert [r['run_id'] for r in rows] == [case.run_id]
    assert len(_sizes(db)) == len(case.sizes) == 1


def test_the_pending_folder_is_bounded_the_oldest_dropped_first(tmp_path):
    folder = tmp_path / 'pending'
    paths = [_keep(folder, _case('nid00001', i), i, most=3)[0]
             for i in range(1, 4)]
    path, dropped = pending.keep(_case('nid00001', 9), str(folder), 3,
                                 1 << 30, str(tmp_path / 'db.sqlite'))
    assert dropped == [paths[0]]
    assert sorted(p for p, _ in pending.files(str(folder))) == sorted(
        paths[1:] + [path])
    # the bytes: the new one stays whatever its size
    size = os.path.getsize(path)
    path2, dropped = pending.keep(_case('nid00001', 10), str(folder), 100,
                                  size, str(tmp_path / 'db.sqlite'))
    assert sorted(dropped) == sorted(paths[1:] + [path])
    assert [p for p, _ in pending.files(str(folder))] == [path2]


def test_the_hook_says_what_it_dropped(tmp_path):
    folder = tmp_path / 'pending'
    first = _keep(folder, _case('nid00001', 30), 1)[0]
    db = tmp_path / 'db.sqlite'
    lock = locked(db)
    try:
        code, _, err = hook(tmp_path, '--no-pairs', env={
            'CCL_HEALTH_PENDING_DIR': str(folder),
            'CCL_HEALTH_PENDING_KEEP': '1'})
    finally:
        lock.close()
    assert code == 0
    assert 'dropped the 1 oldest pending check(s) over 1 files' in err, err
    assert os.path.basename(first) in err and not os.path.exists(first)
    assert len(pending.files(str(folder))) == 1


def test_a_pending_folder_that_is_not_private_is_not_used(tmp_path):
    folder = tmp_path / 'pending'
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)
    with pytest.raises(CclHealthError) as err:
        pending.keep(_case('nid00001', 1), str(folder), 10, 1 << 20,
                     str(tmp_path / 'db.sqlite'))
    assert 'lets others write in it' in str(err.value)
    assert pending.files(str(folder)) == []


def test_a_pending_check_recorded_late_is_judged_in_its_place(
        written, tmp_path):  # noqa: F811
    """A check kept pending while its node went on being recorded: older
    than its key's newest when it comes in, the key is judged again and
    the answers are those of the history judged at read."""
    path = str(tmp_path / 'late.db')
    shutil.copy(written, path)
    old = db_gen.hook_case('perlmutter', 'nid00007', END - datetime.
                           timedelta(days=1, minutes=13), random.Random(4))
    old.sizes[0].busbw *= 0.5
    folder = tmp_path / 'pending'
    _keep(folder, old, 1, db=path)
    with store.open_store(path) as db:
        before = db.query("SELECT last_time FROM key_state WHERE key LIKE "
                          "'%nid00007%'")[0]['last_time']
        assert old.time < before
        assert pending.ingest(db, str(folder), err=open(os.devnull, 'w')) \
            == (1, [])
    judged_in_place(path, tmp_path, 'nid00007', old.run_id)
