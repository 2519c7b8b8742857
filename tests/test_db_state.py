"""History judging kept by the writer (issue 30, ccl_health/db/keystate.py):
``report failed`` and ``report detect`` give the same findings from the
state kept per key as from each key's history judged at read (the state
tables emptied), on a database with drops, recoveries, drifts, an
intermittent node, an acceptance and cases written out of time order."""

import datetime
import os
import random
import shutil
import sys

import pytest

from conftest import REPO
from ccl_health.db import windowfindings, store
from ccl_health.db import keystate as state
from ccl_health.db import schema

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import db_gen  # noqa: E402
from helpers.dbhistory import (END, NIGHTS, NODES, STEP,  # noqa: E402,F401
                               answers_of, emptied, judged_in_place, pg_db,
                               write_history, written)  # (two fixtures)

def test_the_state_and_the_history_judge_the_same(written, tmp_path):
    kept = answers_of(written)
    assert kept == answers_of(emptied(written, tmp_path))
    # the database holds what the test is about
    lines = '\n'.join(kept['detect 40'])
    for what in ('DROP', 'RECOVERY', 'DRIFT', 'INTERMITTENT'):
        assert what in lines, what
    assert any('nid00003' in line and 'INTERMITTENT' in line
               for line in kept['detect 3'])
    assert any('DRIFT' in line and 'nid00004' in line
               for line in kept['detect 3'])
    assert any('DROP' in line for _, line in kept['failed'])


def test_reads_take_the_kept_findings(written, judged_at_read):
    """With a state, no key is judged at read: the acceptance written last
    judged the keys it names again (state.relevel) with their cases."""
    answers_of(written)
    assert judged_at_read == []
    with store.open_store(written, readonly=True) as db:
        assert len(db.query('SELECT key FROM key_state')) == NODES + 15


def test_a_level_whose_keys_were_not_judged_again_is_judged_at_read(
        written, tmp_path, judged_at_read):
    """An acceptance written without :func:`state.relevel` (by an older
    ccl-health): only the keys it names (their levels changed after their
    state was made) are judged at read, with the answers of the history
    judged at read."""
    path = str(tmp_path / 'level.db')
    shutil.copy(written, path)
    with store.open_store(path) as db:
        # an older ccl-health writes a schema-9 database (it refuses a
        # newer one); the next writer of this version migrates it
        db_gen.as_schema_9(db)
        run = db.query("SELECT run_id, time FROM cases WHERE transport = "
                       "'intra' AND collective = 'all_gather' ORDER BY time "
                       "LIMIT 1 OFFSET 30")[0]
        with db.transaction():
            db.execute(
                'INSERT INTO acceptances (run_id, run_time, system, '
                'partition, transport, collective, who, reason, created) '
                "VALUES (?, ?, 'perlmutter', 'gpu', 'intra', 'all_gather', "
                "'test', 'old', ?)", (run['run_id'], run['time'],
                                      store.now()))
    with store.open_store(path) as db:       # schema 10: the stale listed
        assert db.query('SELECT count(*) AS n FROM stale_keys')[0]['n']
    kept = answers_of(path)
    assert judged_at_read and {(k[2], k[3], k[7]) for k in judged_at_read} \
        == {('intra', 'all_gather', 'sweep')}
    assert kept == answers_of(emptied(path, tmp_path))


def _kept_is_the_history(path, tmp_path, judged_at_read):
    """``report failed`` and ``report detect`` on ``path`` judge no key at
    read, and answer as every key's history judged at read (a SQLite
    database: a copy without its kept judging; PostgreSQL: the same
    database, every key's state left unread); returns the answers."""
    judged_at_read.clear()
    kept = answers_of(path)
    assert judged_at_read == []
    if path.startswith('postgresql://'):
        mp = pytest.MonkeyPatch()
        # no key's kept state read: by its levels (schema 8) or its
        # standing line (schema 11)
        mp.setattr(state, 'fresh', lambda *a, **kw: {})
        mp.setattr(state, 'kept_standing', lambda *a, **kw: {})
        try:
            whole = answers_of(path)
        finally:
            mp.undo()
    else:
        whole = answers_of(emptied(path, tmp_path))
    assert judged_at_read
    assert kept == whole
    return kept


@pytest.fixture
def rebuilt(monkeypatch):
    """The keys judged again from their whole history (state.rebuild),
    collected."""
    keys = []
    rebuild = state.rebuild

    def counting(db, key, *a, **kw):
        keys.append(key)
        return rebuild(db, key, *a, **kw)
    monkeypatch.setattr(state, 'rebuild', counting)
    return keys


def _report(path, *args):
    from ccl_health import cli
    return cli.main(['--prog', 'scripts/report', 'db', '--db', path, *args])


def _keys(path, where, params=()):
    """The history keys of the cases ``where``."""
    with store.open_store(path, readonly=True) as db:
        return windowfindings.history_keys(db.cases(where, params))


def _check_run(path, node):
    with store.open_store(path, readonly=True) as db:
        return db.query('SELECT run_id FROM cases WHERE node = ? ORDER BY '
                        'time LIMIT 1 OFFSET 40', (node,))[0]['run_id']


def test_accept_keeps_the_state_of_the_keys_it_names(
        written, tmp_path, judged_at_read, rebuilt):
    """``scripts/report accept`` of a night and of one node's health
    check: the keys it names (every key of the night; every node's probe
    key: a probe's level is every node's) are judged again in its
    transaction, no other; then no key is judged at read, and the answers
    are those of the history judged at read."""
    path = str(tmp_path / 'accept.db')
    shutil.copy(written, path)
    night = db_gen.sweep_cases('perlmutter', 35, END - datetime.timedelta(
        days=NIGHTS - 36, hours=6), random.Random(1))[0].run_id
    assert _report(path, 'accept', night, '--reason', 'new level') == 0
    assert set(rebuilt) == _keys(path, 'WHERE run_id = ?', (night,))
    assert len(rebuilt) == 15
    _kept_is_the_history(path, tmp_path, judged_at_read)
    rebuilt.clear()
    check = _check_run(path, 'nid00006')
    assert _report(path, 'accept', check, '--reason', 'new firmware') == 0
    assert set(rebuilt) == _keys(path, "WHERE source = 'health'")
    assert len(rebuilt) == NODES
    _kept_is_the_history(path, tmp_path, judged_at_read)


def test_an_acceptance_and_its_keys_judged_again_are_one_transaction(
        written, tmp_path, monkeypatch):
    """A failure judging the keys again (a stop, a lost connection)
    records no acceptance and leaves every state as it was."""
    path = str(tmp_path / 'stop.db')
    shutil.copy(written, path)

    def tables():
        with store.open_store(path, readonly=True) as db:
            return [db.query(f'SELECT * FROM {t} ORDER BY 1')
                    for t in ('acceptances', 'key_state', 'findings')]
    old = tables()
    rebuild, done = state.rebuild, []

    def stops(db, key, *a, **kw):
        if done:
            raise KeyboardInterrupt
        done.append(key)
        return rebuild(db, key, *a, **kw)
    monkeypatch.setattr(state, 'rebuild', stops)
    check = _check_run(path, 'nid00006')
    try:
        rc = _report(path, 'accept', check, '--reason', 'stopped')
    except KeyboardInterrupt:
        rc = None
    assert rc != 0 and done and tables() == old


def test_undo_keeps_the_state_of_the_keys_it_named(
        written, tmp_path, judged_at_read, rebuilt):
    """``scripts/report accept --undo`` judges the keys the acceptance
    named again (the fixture's: net-socket reduce_scatter, any nodes)."""
    path = str(tmp_path / 'undo.db')
    shutil.copy(written, path)
    before = answers_of(path)
    assert _report(path, 'accept', '--undo', '1') == 0
    assert {(k[2], k[3], k[7]) for k in rebuilt} == {
        ('net-socket', 'reduce_scatter', 'sweep')}
    assert _kept_is_the_history(path, tmp_path, judged_at_read) != before


def _calibratable(path):
    """The database at ``path`` without the sweeps of the generator's
    transport that a reference file does not name (net-plugin-noGDR): the
    rest calibrates; their keys and states go with them."""
    gone = 'net-plugin-noGDR'
    with store.open_store(path) as db:
        with db.transaction():
            ids = [r['id'] for r in db.query(
                'SELECT id FROM cases WHERE transport = ?', (gone,))]
            for table, col in (('findings', 'case_id'),
                               ('measurements', 'case_id'), ('cases', 'id')):
                db.execute(f'DELETE FROM {table} WHERE {col} IN (SELECT id '
                           f'FROM cases WHERE transport = ?)', (gone,))
            db.execute('DELETE FROM key_state WHERE key LIKE ?',
                       (f'%"{gone}"%',))
    assert ids
    return path


def test_calibrate_keeps_the_state_of_the_keys_it_names(
        written, tmp_path, judged_at_read, rebuilt, capsys):
    """``scripts/calibrate --db`` records its baselines and judges the
    keys they name again, in one transaction; its dry run writes
    nothing."""
    from ccl_health import cli
    path = str(tmp_path / 'calibrate.db')
    shutil.copy(written, path)
    _calibratable(path)
    (tmp_path / 'ref').mkdir()
    args = ['calibrate', '--db', path, '--system', 'perlmutter',
            '--partition', 'gpu', '--reference-dir', str(tmp_path / 'ref'),
            '--min-size', '1G']

    def tables():
        with store.open_store(path, readonly=True) as db:
            return [db.query(f'SELECT * FROM {t} ORDER BY 1')
                    for t in ('baselines', 'key_state', 'findings')]
    old = tables()
    assert cli.main(args + ['--dry-run']) == 0
    assert 'would record the baseline' in capsys.readouterr().out
    assert tables() == old and rebuilt == []
    assert cli.main(args) == 0
    assert 'recorded the baseline' in capsys.readouterr().out
    with store.open_store(path, readonly=True) as db:
        named = state.level_keys(db, db.baselines())
    assert named and sorted(rebuilt, key=state.key_text) == named
    _kept_is_the_history(path, tmp_path, judged_at_read)


def test_a_backfilled_case_is_judged_in_its_place(written, tmp_path):
    """A check older than its node's newest (an ingest of old logs): the
    node is judged again, its old collapse found, and the answers still
    those of the history judged at read."""
    path = str(tmp_path / 'backfill.db')
    shutil.copy(written, path)
    rng = random.Random(3)
    old = db_gen.hook_case('perlmutter', 'nid00006',
                           END - datetime.timedelta(days=1, minutes=7), rng)
    old.sizes[0].busbw *= 0.5
    with store.open_store(path) as db:
        before = db.query("SELECT last_time FROM key_state WHERE key LIKE "
                          "'%nid00006%'")[0]['last_time']
        assert old.time < before
        db.add_case(old)
        assert db.query("SELECT last_time FROM key_state WHERE key LIKE "
                        "'%nid00006%'")[0]['last_time'] == before
    judged_in_place(path, tmp_path, 'nid00006', old.run_id)


def test_an_old_database_gets_its_state_from_its_next_cases(tmp_path):
    """A database of schema 7 (no state) migrates to empty tables; a key's
    next case judges its whole history once and keeps it."""
    path = str(tmp_path / 'old.db')
    rng = random.Random(5)
    with store.open_store(path) as db:
        for n in range(20):
            db.add_case(db_gen.hook_case(
                'perlmutter', 'nid00001', END - STEP * (30 - n), rng))
        with db.transaction():
            db.execute('DROP TABLE key_state')
            db.execute('DROP TABLE findings')
            db.execute("UPDATE meta SET value = '7' WHERE key = "
                       "'schema_version'")
    with store.open_store(path) as db:
        assert db.schema_version() == schema.SCHEMA_VERSION
        assert not db.query('SELECT * FROM key_state')
        db.add_case(db_gen.hook_case('perlmutter', 'nid00001',
                                     END - STEP * 5, rng))
        [row] = db.query('SELECT * FROM key_state')
        import json
        [data] = json.loads(row['state']).values()
        assert data['n'] == 21


def test_rejudge_gives_every_stale_key_its_state(written, tmp_path,
                                                 judged_at_read):
    """``scripts/report rejudge``: a database whose keys lost their state
    (an upgrade to schema 8, an accept) gets it back in one command: the
    same answers, and afterwards no key judged at read."""
    import subprocess
    path = emptied(written, tmp_path)
    with store.open_store(path, readonly=True) as db:
        stale = state.stale_keys(db)
    assert len(stale) == NODES + 15
    report = os.path.join(REPO, 'scripts', 'report')
    dry = subprocess.run([report, '--db', path, 'rejudge', '--dry-run'],
                         capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert f'{NODES + 15} key(s) to judge again' in dry.stdout
    p = subprocess.run([report, '--db', path, 'rejudge'],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert f'judged {NODES + 15} key(s) again' in p.stdout
    assert f'rejudge: {NODES + 15}/{NODES + 15} keys' in p.stderr
    with store.open_store(path, readonly=True) as db:
        assert state.stale_keys(db) == []
    want = answers_of(written)
    judged_at_read.clear()
    assert answers_of(path) == want
    assert judged_at_read == []
    again = subprocess.run([report, '--db', path, 'rejudge'],
                           capture_output=True, text=True)
    assert '0 key(s) to judge again' in again.stdout


def test_a_state_is_one_keys_few_values(written):
    """Bounded: the last window of healthy values and the detector's, not
    the key's history."""
    import json
    with store.open_store(written, readonly=True) as db:
        for row in db.query('SELECT state FROM key_state'):
            for data in json.loads(row['state']).values():
                assert len(data['recent']) <= 30
                assert len(data['cusum']['pool']) <= 30
                assert len(data['cusum']['exc']) <= 30
                assert len(data['drops']) <= 30
    assert state.EVER.year == 1


def test_on_postgresql_the_same(pg_db, tmp_path):
    write_history(pg_db)
    kept = answers_of(pg_db)
    assert any('DRIFT' in line for line in kept['detect 40'])
    assert kept == answers_of(emptied(pg_db, tmp_path))


def test_levels_keep_the_state_on_postgresql(pg_db, tmp_path,
                                             judged_at_read):
    """On PostgreSQL: accept, its undo and calibrate --db judge the keys
    they name again; no key is judged at read after each."""
    from ccl_health import cli
    import psycopg
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS state_levels')
        conn.execute('CREATE DATABASE state_levels')
    url = pg_db.rsplit('/', 1)[0] + '/state_levels'
    write_history(url)
    _kept_is_the_history(url, tmp_path, judged_at_read)
    check = _check_run(url, 'nid00006')
    assert _report(url, 'accept', check, '--reason', 'new firmware') == 0
    _kept_is_the_history(url, tmp_path, judged_at_read)
    assert _report(url, 'accept', '--undo', '1') == 0
    _kept_is_the_history(url, tmp_path, judged_at_read)
    with store.open_store(url) as db:      # rejudge's locks on PostgreSQL
        keys = state.level_keys(db, db.acceptances(active=True))
        assert state.rejudge(db, keys) == NODES
    _kept_is_the_history(url, tmp_path, judged_at_read)
    (tmp_path / 'ref').mkdir()
    _calibratable(url)
    assert cli.main(['calibrate', '--db', url, '--system', 'perlmutter',
                     '--partition', 'gpu', '--reference-dir',
                     str(tmp_path / 'ref'), '--min-size', '1G']) == 0
    with store.open_store(url, readonly=True) as db:
        assert db.baselines()
    _kept_is_the_history(url, tmp_path, judged_at_read)


def test_two_writers_of_one_key_on_postgresql(pg_db, tmp_path):
    """Two writers of one node's checks at once, their times interleaved
    (each case older than the other's newest half the time): the key's
    state and findings are those of its whole history judged again."""
    import threading
    rng = random.Random(11)
    t0 = END + datetime.timedelta(days=1)
    cases = [db_gen.hook_case('perlmutter', 'nid09999', t0 + STEP * i, rng)
             for i in range(40)]
    for c in cases[25:]:
        c.sizes[0].busbw *= 0.5
    store.open_store(pg_db).close()      # its schema made first
    errors = []

    def write(part):
        try:
            with store.open_store(pg_db) as db:
                for c in part:
                    db.add_case(c)
        except Exception as err:          # reported below
            errors.append(err)
    threads = [threading.Thread(target=write, args=(cases[i::2],))
               for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with store.open_store(pg_db) as db:
        [row] = db.query('SELECT * FROM key_state WHERE key LIKE ?',
                         ('%nid09999%',))
        import json
        [data] = json.loads(row['state']).values()
        assert data['n'] == 40 and row['last_run'] == cases[-1].run_id
        drops = ("SELECT run_id FROM findings WHERE key LIKE ? AND kind = "
                 "'drop'", ('%nid09999%',))
        kept = sorted(r['run_id'] for r in db.query(*drops))
        with db.transaction():
            state.rebuild(db, tuple(json.loads(row['key'])))
        again = sorted(r['run_id'] for r in db.query(*drops))
        assert kept == again and kept[0] == cases[25].run_id
        [rebuilt] = db.query('SELECT state FROM key_state WHERE key = ?',
                             (row['key'],))
        assert json.loads(rebuilt['state']) == json.loads(row['state'])
