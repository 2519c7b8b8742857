"""History judging kept by the writer (issue 30, ccl_health/db/state.py):
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
from ccl_health.db import queries, reads, state, store

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import db_gen  # noqa: E402

END = datetime.datetime(2026, 11, 20, 12, 0, tzinfo=datetime.timezone.utc)
NODES, DAYS, PER_DAY, NIGHTS = 8, 12, 10, 40
STEP = datetime.timedelta(days=1) / PER_DAY


def _checks(rng):
    """The hook's cases of every node, oldest first, with what happened to
    each node: ``nid00001`` single drops (and recoveries) through its
    history, ``nid00002`` a 4 % drift from its 60th check, ``nid00003``
    drops on and off in the last day, ``nid00004`` a drift in the last
    day; the others healthy."""
    out = []
    start = END - datetime.timedelta(days=DAYS)
    for k in range(DAYS * PER_DAY):
        for n in range(1, NODES + 1):
            node = f'nid{n:05d}'
            case = db_gen.hook_case('perlmutter', node, start + STEP * (k + 1)
                                    - datetime.timedelta(seconds=n), rng)
            size = case.sizes[0]
            factor = 1.0
            if n == 1 and k in (30, 31, 70, 100):
                factor = 0.7
            if n == 2 and k >= 60:
                factor = 0.96
            if n == 3 and k >= DAYS * PER_DAY - 8 and k % 2:
                factor = 0.6
            if n == 4 and k >= DAYS * PER_DAY - 6:
                factor = 0.95
            size.busbw *= factor
            out.append((n, k, case))
    return out


def _nights(rng):
    out = []
    for night in range(NIGHTS):
        level = 0.96 if night >= 30 else 1.0
        cases = db_gen.sweep_cases('perlmutter', night, END - datetime.
                                   timedelta(days=NIGHTS - 1 - night,
                                             hours=6), rng, level)
        if night == 20:
            for s in cases[0].sizes[-6:]:
                s.busbw *= 0.5
        out.append(cases)
    return out


@pytest.fixture(scope='module')
def written(tmp_path_factory):
    """The database, written in time order but for what is held back and
    written last (a backfill): node 5's checks of its 20th..29th and one
    night; then one night's case written again (the run report after the
    check) and an acceptance of a key."""
    return _write(str(tmp_path_factory.mktemp('state') / 'db.db'))


def _write(path):
    rng = random.Random(7)
    checks, nights = _checks(rng), _nights(rng)
    late = [c for n, k, c in checks if n == 5 and 20 <= k < 30]
    with store.open_store(path) as db:
        for i in range(0, len(checks), 97):
            db.add_cases([c for n, k, c in checks[i:i + 97]
                          if not (n == 5 and 20 <= k < 30)])
        for night, cases in enumerate(nights):
            if night != 12:
                db.add_cases(cases)
        db.add_cases(late)
        db.add_cases(nights[12])
        again = nights[-1][3]
        again.reason = 'the run report'
        db.add_case(again)
        run = nights[25][5]
        db.accept([{'run_id': run.run_id, 'run_time': run.time,
                    'system': run.system, 'partition': run.partition,
                    'transport': run.transport,
                    'collective': run.collective}], 'test', 'new level')
    return path


def _emptied(path, tmp_path):
    """A copy of the database at ``path`` without its kept judging (a
    PostgreSQL database: itself)."""
    copy = path
    if not path.startswith('postgresql://'):
        copy = str(tmp_path / 'emptied.db')
        shutil.copy(path, copy)
    with store.open_store(copy) as db:
        with db.transaction():
            db.execute('DELETE FROM key_state')
            db.execute('DELETE FROM findings')
    return copy


def _answers(path):
    """What ``report failed`` (the last 24 h) and ``report detect`` (the
    last 3 and 40 days) answer, and how each key is judged."""
    from ccl_health.db.cli import _detect_scope
    out = {}
    with store.open_store(path, readonly=True) as db:
        out['failed'] = queries.failures(db, 24, now=END)
        for days in (3, 40):
            args = type('Args', (), {'run': None, 'days': days})()
            keys, since, runs, _ = _detect_scope(db, args)
            how = {}
            found = reads.judge_keys(db, keys, since, runs, standing=how)
            out[f'detect {days}'] = [f.line() for f in found]
            out[f'standing {days}'] = sorted(how.values())
        run = db.query('SELECT run_id FROM cases WHERE run_id LIKE ? ORDER '
                       'BY time DESC LIMIT 1', ('nightly-%',))[0]['run_id']
        out['run'] = [f.line() for f in reads.detect_in(db, run_id=run)]
    return out


def test_the_state_and_the_history_judge_the_same(written, tmp_path):
    kept = _answers(written)
    assert kept == _answers(_emptied(written, tmp_path))
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
    """With a state, only the accepted key (its levels changed after its
    state was made) is judged at read."""
    judged = judged_at_read
    _answers(written)
    assert judged and {k[7] for k in judged} == {'sweep'}
    assert {(k[2], k[3]) for k in judged} == {('net-socket',
                                               'reduce_scatter')}
    with store.open_store(written, readonly=True) as db:
        assert len(db.query('SELECT key FROM key_state')) == NODES + 15


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


def judged_in_place(path, tmp_path, node, run_id):
    """The backfilled case ``run_id`` of ``node`` (older than the node's
    newest) is its node's one kept drop, ``detect`` names it, and the
    answers are those of the history judged at read."""
    with store.open_store(path, readonly=True) as db:
        assert [r['run_id'] for r in db.query(
            "SELECT run_id FROM findings WHERE kind = 'drop' AND key LIKE ?",
            (f'%{node}%',))] == [run_id]
    kept = _answers(path)
    assert any(run_id in line for line in kept['detect 3'])
    assert kept == _answers(_emptied(path, tmp_path))


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
        assert db.schema_version() == store.SCHEMA_VERSION
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
    path = _emptied(written, tmp_path)
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
    want = _answers(written)
    judged_at_read.clear()
    assert _answers(path) == want
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


@pytest.fixture(scope='module')
def pg_db(tmp_path_factory):
    """A fresh PostgreSQL database of the tests' server."""
    pytest.importorskip('psycopg')
    import test_store_postgres as tsp
    gen = tsp.pg_url.__wrapped__(tmp_path_factory)
    url = next(gen)
    import psycopg
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS state_test')
        conn.execute('CREATE DATABASE state_test')
    yield url.rsplit('/', 1)[0] + '/state_test'
    gen.close()


def test_on_postgresql_the_same(pg_db, tmp_path):
    _write(pg_db)
    kept = _answers(pg_db)
    assert any('DRIFT' in line for line in kept['detect 40'])
    assert kept == _answers(_emptied(pg_db, tmp_path))


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
