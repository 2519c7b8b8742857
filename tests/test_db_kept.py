"""What the page and ``failed`` ask every day, kept instead of recomputed
(issue 45, schema 10): each closed day's health checks
(ccl_health/db/health_days.py ``keep``, table ``kept_days``) and the list
of stale keys (ccl_health/db/keystate.py ``listed``, table ``stale_keys``).

The oracle is today's reading of the same data: the database with the
kept tables and their triggers dropped and its schema set back to 9,
opened read-only (the reads of a schema-9 database: every day counted,
every key of the window looked at).  What a read prints must be the same,
on SQLite and PostgreSQL: ``failed``, the page (every line of it), its
health-check days and counts, ``detect`` (its findings and how each key
is judged: the standing line each key's writer keeps, schema 11), with
every day kept, with the newest days not kept (counted at read), with a
late case of a kept day (its day dropped by the database), and with every
key's state gone (every key stale: judged at read)."""

import argparse
import contextlib
import datetime
import io
import os
import random
import re
import shutil
import sys

import pytest

from conftest import REPO
from ccl_health.db import health_days, answers, store
from ccl_health.report import health

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import db_gen  # noqa: E402
from helpers.dbhistory import (END, pg_db,  # noqa: E402,F401  (a fixture)
                               write_history)

#: the system tier (tests/conftest.py): databases of many generated days, written and read again
pytestmark = pytest.mark.system

#: the page's window and the days it lists, from END
SINCE = END - datetime.timedelta(days=30)


def _as_schema_9(url):
    """The database ``url`` without what schema 10 keeps: today's
    reading of it (read-only, nothing migrated)."""
    with store.open_store(url) as db:
        db_gen.as_schema_9(db)
    return url


def _page(url, out):
    """Every line of the page of ``url`` (drawn into ``out``), the
    database's name left out."""
    from ccl_health import report
    with store.open_store(url, readonly=True) as db:
        page, text = report.build(db, str(out), now=END)
        where = str(db.where)
    with open(page, encoding='utf-8') as fp:
        html = fp.read().replace(where, 'DB')
    return re.sub(r'\s+', ' ', html), text


def _detect(db, days=7):
    """What ``scripts/report detect --days N`` prints of ``db``."""
    from ccl_health import reportcli
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        reportcli._detect(db, argparse.Namespace(run=None, days=days))
    return text.getvalue().splitlines()


def _reads(url, out):
    """What ``failed`` and ``detect`` print and the page shows, and the
    page's health-check days and counts, of the database ``url``."""
    with store.open_store(url, readonly=True) as db:
        got = {'failed': answers.failed(db, 24, now=END),
               'detect': _detect(db),
               'days': health.days_rows(db, SINCE.date().isoformat(),
                                        str(out / 'days')),
               'counts': health.probe_summary(db, SINCE, now=END)}
    got['page'], got['summary'] = _page(url, out / 'page')
    return got


@pytest.fixture(scope='module')
def written(tmp_path_factory):
    """tests/test_db_state.py's database (drops, recoveries, drifts, an
    intermittent node, a backfill, an acceptance), written at this schema,
    and today's reading of its copy."""
    base = tmp_path_factory.mktemp('kept')
    path = write_history(str(base / 'db.db'))
    with store.open_store(path) as db:          # as the nightly does
        assert len(health_days.keep(db)) >= 12
    old = str(base / 'old.db')
    shutil.copy(path, old)
    return path, _reads(_as_schema_9(old), base / 'old')


def _kept(path):
    with store.open_store(path, readonly=True) as db:
        return {r['day'] for r in db.query('SELECT day FROM kept_days')}


def _copy(path, tmp_path, name='copy.db'):
    copy = str(tmp_path / name)
    shutil.copy(path, copy)
    return copy


def test_every_read_is_todays_with_the_days_kept(written, tmp_path,
                                                 monkeypatch):
    path, today = written
    # every day of the data was closed when it was written (END is past)
    assert _kept(path) >= {(END - datetime.timedelta(days=d)).date()
                           .isoformat() for d in range(12)}
    computed = []
    real = health_days.health_days
    monkeypatch.setattr(health_days, 'health_days', lambda *a, **kw: (
        computed.append(a[1:]), real(*a, **kw))[1])
    got = _reads(path, tmp_path)
    assert got == today
    assert computed == []           # every day read as kept
    assert any(line.startswith('DROP') for line in got['failed'])
    assert got['days'] and got['counts']
    assert any('judged on its history' in line for line in got['detect'])


def test_detect_reads_each_keys_kept_standing(written, judged_at_read):
    """``detect`` reads how each key of its window is judged from the line
    its writer kept (schema 11), never a key's state, and judges no key
    at read; a key listed stale is judged from its history, and only it."""
    path, today = written
    with store.open_store(path, readonly=True) as db:
        plans = _plans(db, _detect)
    kept = [sql for sql, _ in plans if 'key_state' in sql]
    assert kept and all(re.match(r'SELECT key, standing FROM key_state ',
                                 sql) for sql in kept), kept
    assert judged_at_read == []
    assert _detect_of(path) == today['detect']


def _detect_of(path):
    with store.open_store(path, readonly=True) as db:
        return _detect(db)


def test_detect_judges_the_stale_keys_only(written, tmp_path,
                                           judged_at_read):
    """A key listed stale (its state made with other levels) is judged
    from its history, the others read as kept: the same lines."""
    path, today = written
    copy = _copy(path, tmp_path)
    with store.open_store(copy) as db:
        key = db.query('SELECT key FROM key_state ORDER BY key LIMIT 1')[0][
            'key']
        with db.transaction():
            db.execute("UPDATE key_state SET levels = '[\"other\"]', "
                       "standing = 'not this line' WHERE key = ?", (key,))
            db.execute('INSERT INTO stale_keys (key) VALUES (?)', (key,))
    assert _detect_of(copy) == today['detect']
    import json
    assert judged_at_read == [tuple(json.loads(key))]


def test_a_state_kept_before_schema_11_gives_its_line(written, tmp_path):
    """A state kept without its line (a schema-10 database's, or one
    copied from it) is read with the line made from it."""
    path, today = written
    copy = _copy(path, tmp_path)
    with store.open_store(copy) as db:
        with db.transaction():
            db.execute('UPDATE key_state SET standing = NULL')
    assert _detect_of(copy) == today['detect']


@pytest.fixture
def changes_read(monkeypatch):
    """The findings whose ``changed:`` lines a read looked up in their
    cases (:func:`ccl_health.db.changedcases.attribution_many`),
    collected."""
    from ccl_health.db import changedcases
    read = []
    real = changedcases.attribution_many

    def counting(db, found, *a, **kw):
        read.extend(found)
        return real(db, found, *a, **kw)
    monkeypatch.setattr(changedcases, 'attribution_many', counting)
    return read


def _kept_changes(path):
    """``{kind: (findings, with their changed: lines kept)}``."""
    with store.open_store(path, readonly=True) as db:
        return {r['kind']: (r['n'], r['kept']) for r in db.query(
            'SELECT kind, count(*) AS n, count(changed) AS kept FROM '
            'findings GROUP BY kind')}


def _failed_and_detect(path):
    with store.open_store(path, readonly=True) as db:
        return answers.failed(db, 24, now=END), _detect(db)


def test_what_changed_is_kept_with_each_drop(written, changes_read):
    """The writer that finds a drop or a drift keeps its ``changed:``
    lines with it (schema 12): ``failed`` and ``detect`` read no case for
    them (three random rows of the whole history a drop, where a machine
    has thousands of drops a week) and print what today's reading prints
    (each drop's cases read at read: the schema-9 copy)."""
    path, today = written
    kept = _kept_changes(path)
    assert kept['drop'][0] == kept['drop'][1] > 0
    assert kept['drift'][0] == kept['drift'][1] > 0
    assert kept['recovery'][1] == 0
    failed, detect = _failed_and_detect(path)
    assert changes_read == []
    assert (failed, detect) == (today['failed'], today['detect'])
    assert any(line.startswith('    changed: ') for line in failed)
    assert any(line.startswith('    changed: ') for line in detect)


def test_an_older_database_keeps_what_changed(written, tmp_path,
                                              changes_read):
    """A schema-11 database (no lines kept) is brought to schema 12 by
    its first writer: every drop's and drift's lines kept, the same
    answers; a finding without them (none kept) is read from its cases."""
    path, today = written
    copy = _copy(path, tmp_path)
    with store.open_store(copy) as db:
        with db.transaction():
            db.execute('ALTER TABLE findings DROP COLUMN changed')
            db.execute("UPDATE meta SET value = '11' WHERE key = "
                       "'schema_version'")
    assert _failed_and_detect(copy) == (today['failed'], today['detect'])
    assert changes_read                 # read from the cases
    with store.open_store(copy) as db:          # the first writer
        assert db.schema_version() == store.SCHEMA_VERSION
    assert _kept_changes(copy) == _kept_changes(path)
    changes_read.clear()
    assert _failed_and_detect(copy) == (today['failed'], today['detect'])
    assert changes_read == []
    with store.open_store(copy) as db:
        with db.transaction():
            db.execute("UPDATE findings SET changed = NULL WHERE kind = "
                       "'drift'")
    assert _failed_and_detect(copy) == (today['failed'], today['detect'])
    assert changes_read and {f.kind for f in changes_read} == {'drift'}


def _check_last_times(url):
    """Each series' kept newest time (schema 12) is its cases' newest."""
    with store.open_store(url, readonly=True) as db:
        kept = {r['id']: r['last_time'] for r in db.query(
            'SELECT id, last_time FROM series')}
        real = {r['series_id']: r['t'] for r in db.query(
            'SELECT series_id, max(time) AS t FROM cases GROUP BY '
            'series_id')}
    assert kept and kept == {i: real.get(i) for i in kept}


def _move_newest(url):
    """The newest case of one series removed, of another moved 20 years
    back, of a third moved to another series; commits."""
    with store.open_store(url) as db:
        rows = db.query('SELECT id, series_id FROM cases ORDER BY time '
                        'DESC, id DESC LIMIT 40')
        a, b = rows[0], next(r for r in rows if r['series_id'] !=
                             rows[0]['series_id'])
        c = next(r for r in rows if r['series_id'] not in
                 (a['series_id'], b['series_id']))
        with db.transaction():
            db.execute('DELETE FROM cases WHERE id = ?', (a['id'],))
            db.execute("UPDATE cases SET time = '2006-01-01T00:00:00+00:00'"
                       " WHERE id = ?", (b['id'],))
            db.execute('UPDATE cases SET series_id = ? WHERE id = ?',
                       (a['series_id'], c['id']))


def test_each_series_keeps_its_newest_time(written, tmp_path):
    """Schema 12: each series' newest time is kept by the database (a
    case written, written late, written again, removed, moved), and
    ``detect`` reads its keys from it: no range of the time index (a
    week of it is 660,000 entries at Frontier), the same lines."""
    path, today = written
    _check_last_times(path)
    with store.open_store(path, readonly=True) as db:
        plans = _plans(db, _detect)
    assert not [p for sql, p in plans if 'cases' in sql and
                re.search(r'\(time>', p)], plans
    assert _detect_of(path) == today['detect']
    copy = _copy(path, tmp_path)
    _move_newest(copy)
    _check_last_times(copy)
    old = _as_schema_9(_copy(copy, tmp_path, 'old.db'))
    assert _detect_of(copy) == _detect_of(old)


def test_each_series_keeps_its_newest_time_on_postgresql(pg_db, written):
    """The same on PostgreSQL (its copy of the database, a database of
    its own on the tests' server)."""
    import psycopg
    from ccl_health.db import migrate
    path, today = written
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS series_last')
        conn.execute('CREATE DATABASE series_last')
    url = pg_db.rsplit('/', 1)[0] + '/series_last'
    with store.open_store(path, readonly=True) as src:
        migrate.migrate(src, url)
    _check_last_times(url)
    with store.open_store(url, readonly=True) as db:
        assert _detect(db) == today['detect']
    _move_newest(url)
    _check_last_times(url)


def test_the_days_not_kept_are_counted(written, tmp_path):
    path, today = written
    copy = _copy(path, tmp_path)
    with store.open_store(copy) as db:
        with db.transaction():
            db.execute('DELETE FROM kept_days WHERE day >= ?',
                       ((END - datetime.timedelta(days=2)).date()
                        .isoformat(),))
    assert _reads(copy, tmp_path) == today


def test_a_case_of_a_kept_day_drops_it(written, tmp_path):
    path, today = written
    copy = _copy(path, tmp_path)
    day = (END - datetime.timedelta(days=3)).date().isoformat()
    assert day in _kept(copy)
    late = db_gen.hook_case('perlmutter', 'nid00009', END - datetime.
                            timedelta(days=3, hours=-1), random.Random(3))
    late.verdict = 'crash'
    with store.open_store(copy) as db:
        db.add_case(late)
    assert day not in _kept(copy)
    old = _as_schema_9(_copy(copy, tmp_path, 'old.db'))
    want = _reads(old, tmp_path / 'old')
    assert want != today            # the late case is on the page
    assert _reads(copy, tmp_path / 'new') == want
    # kept again, with it
    with store.open_store(copy) as db:
        assert day in health_days.keep(db)
    assert _reads(copy, tmp_path / 'again') == want


def test_stale_keys_are_judged_at_read(written, tmp_path):
    """Every key's state gone (a database written before schema 8): the
    database lists every key stale, and the reads judge them from their
    history: the same answers."""
    path, today = written
    copy = _copy(path, tmp_path)
    with store.open_store(copy) as db:
        with db.transaction():
            db.execute('DELETE FROM key_state')
            db.execute('DELETE FROM findings')
        assert len(db.query('SELECT key FROM stale_keys')) > 8
    assert _reads(copy, tmp_path) == today
    # a key judged again is taken off the list
    with store.open_store(copy) as db:
        from ccl_health.db import keystate as state
        keys = state.stale_keys(db)
        state.rejudge(db, keys)
        assert db.query('SELECT key FROM stale_keys') == []
    assert _reads(copy, tmp_path / 'again') == today


def test_an_older_database_is_migrated_with_its_days_and_stale_keys(
        written, tmp_path):
    path, today = written
    old = _as_schema_9(_copy(path, tmp_path))
    with store.open_store(old) as db:        # the first writer
        assert db.schema_version() == store.SCHEMA_VERSION
    assert _kept(old) == _kept(path)
    assert _reads(old, tmp_path) == today


def test_on_postgresql_the_same(pg_db, written, tmp_path):
    path, today = written
    with store.open_store(path, readonly=True) as src:
        from ccl_health.db import migrate
        migrate.migrate(src, pg_db)
    with store.open_store(pg_db, readonly=True) as db:
        assert {r['day'] for r in db.query('SELECT day FROM kept_days')} \
            == _kept(path)
    kept = _reads(pg_db, tmp_path / 'kept')
    # a case of a kept day drops it (the PostgreSQL trigger)
    day = (END - datetime.timedelta(days=3)).date().isoformat()
    with store.open_store(pg_db) as db:
        with db.transaction():
            db.execute("UPDATE cases SET verdict = 'crash' WHERE id = "
                       "(SELECT min(id) FROM cases WHERE time >= ? AND "
                       "source = 'health')", (day,))
        assert day not in {r['day'] for r in db.query(
            'SELECT day FROM kept_days')}
        with db.transaction():
            db.execute('DELETE FROM key_state')
        assert db.query('SELECT count(*) AS n FROM stale_keys')[0]['n'] > 8
    changed = _reads(pg_db, tmp_path / 'changed')
    _as_schema_9(pg_db)
    assert _reads(pg_db, tmp_path / 'old') == changed
    # before the change, with the kept findings: the same failures,
    # days and counts as SQLite's reading (the page's order of the keys'
    # standing differs between the backends, whatever is kept)
    assert {k: kept[k] for k in ('failed', 'detect', 'days', 'counts')} \
        == {k: today[k] for k in ('failed', 'detect', 'days', 'counts')}


def _plans(db, run):
    """The SQLite plans of every query ``run(db)`` sends."""
    asked = []
    query, execute = db.query, db.execute
    db.query = lambda sql, params=(): (asked.append((sql, params)),
                                       query(sql, params))[1]
    db.execute = lambda sql, params=(): (asked.append((sql, params)),
                                         execute(sql, params))[1]
    run(db)
    return [(sql, ' '.join(r[3] for r in db.conn.execute(
        'EXPLAIN QUERY PLAN ' + sql, params))) for sql, params in asked]


def test_the_pages_sweeps_are_read_by_the_kind_index(written):
    """The page's window of sweeps (every kind but the probes) is read
    through the partial kind index, never through the time index over
    every check of its 30 days."""
    from ccl_health.db import windowfindings
    from ccl_health.report import CASE_KINDS
    path, _ = written
    with store.open_store(path, readonly=True) as db:
        for records in (False, True):
            rows = windowfindings.window_cases(db, SINCE, kinds=CASE_KINDS,
                                      records=records)
            assert rows and all(r.get('source') != 'health' for r in rows)
        plans = _plans(db, lambda db: [windowfindings.window_cases(
            db, SINCE, kinds=CASE_KINDS, records=r) for r in (False, True)])
    assert plans and all('cases_kind' in plan for sql, plan in plans
                         if 'FROM cases' in sql), plans


def test_failed_reads_no_case_beyond_its_window(written):
    """Every query of ``failed`` on the cases searches an index by its
    window (none scans the table or a whole index: the unique index of
    every run was SQLite's choice for the other kinds' runs)."""
    path, _ = written
    with store.open_store(path, readonly=True) as db:
        plans = _plans(db, lambda db: answers.failed(db, 24, now=END))
    cases = [(sql, plan) for sql, plan in plans if 'cases' in sql]
    assert cases and not [p for p in cases if re.search(
        r'\bSCAN (c|cases)\b', p[1])], cases
