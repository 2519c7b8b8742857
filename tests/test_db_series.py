"""Each history series once, a case's by its integer id (schema 9,
ccl_health/db/seriestable.py, issue 30): the migration of a database recorded
before it gives the same answers; a key's text is the same whichever way
its numbers came; a case written again into another series moves, and
the series it left is dropped; the series of a scope are read from the
table of the series, and the kind index leaves the health probes out."""

import datetime
import os
import shutil
import sqlite3
import sys

import pytest

from conftest import REPO
from ccl_health.db import answers, newestruns, scopes, windowfindings, store
from ccl_health.db import seriestable as series
from ccl_health.db import keyhistory

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import db_gen  # noqa: E402

END = datetime.datetime(2026, 11, 20, 12, tzinfo=datetime.timezone.utc)


def _answers(path):
    """What the read commands answer: each key's history (by the bounded
    key reads), its newest case, the failures and findings of the
    history, the scope keys of each transport."""
    with store.open_store(path, readonly=True) as db:
        keys = sorted(scopes.series_keys(db), key=lambda k: tuple(map(str,
                                                                     k)))
        hist = {k: [(r['run_id'], r['size'], r['busbw']) for r in
                    keyhistory.key_history(db, k, END - datetime.timedelta(
                        days=400))] for k in keys}
        found = sorted((f.kind, f.run_id, f.key, f.size) for f in
                       windowfindings.detect_in(db))
        scoped = {t: answers.scope_keys(db, t) for t in
                  scopes.index_distinct(db, 'transport', kind=('sweep',))}
        nodes = scopes.index_distinct(db, 'node', kind='health probe')
        return keys, hist, found, answers.failed(db, 1e6), scoped, nodes


def _copy(src, dst):
    for ext in ('', '-wal', '-shm'):
        if os.path.exists(src + ext):
            shutil.copy(src + ext, dst + ext)
    return dst


def _as_schema_8(path):
    with store.open_store(path) as db:
        db_gen.as_schema_8(db)
    return path


@pytest.fixture(scope='module')
def recorded(tmp_path_factory):
    """A month of 12 nodes' checks (5 % failing) and 40 nights."""
    path = str(tmp_path_factory.mktemp('series') / 'now.db')
    with store.open_store(path) as db:
        db_gen.write_nights(db, 'perlmutter', 40, END)
        db_gen.write_checks(db, 'perlmutter', 12, 30, 4, END, fail=0.05,
                            batch=2000)
    return path


def test_a_schema_8_database_migrates_to_the_same_answers(recorded,
                                                          tmp_path):
    old = _as_schema_8(_copy(recorded, str(tmp_path / 'old.db')))
    with store.open_store(old, readonly=True) as db:
        assert db.schema_version() == 8 and not series.ided(db)
        before = _answers(old)
    with store.open_store(old) as db:           # opened for writing
        assert db.schema_version() == store.SCHEMA_VERSION
        n = db.query('SELECT count(*) AS n FROM series')[0]['n']
        assert n == 12 + 15
        assert db.query('SELECT count(*) AS n FROM cases WHERE series_id '
                        'IS NULL')[0]['n'] == 0
    after = _answers(old)
    assert after == before == _answers(recorded)
    assert len(before[0]) == 27 and len(before[5]) == 12
    assert sum(map(len, before[1].values())) > 1000 and before[2]
    # the migration read the old series index, the new one serves now
    with sqlite3.connect(old) as conn:
        names = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert 'cases_by_series' in names and 'cases_series' not in names


def test_a_key_has_one_text_whichever_way_its_numbers_came():
    key = ('perlmutter', 'gpu', 'intra', 'all_reduce', '1', 4.0, 'default',
           'health probe', 'nid00001')
    same = ('perlmutter', 'gpu', 'intra', 'all_reduce', 1, 4, 'default',
            'health probe', 'nid00001')
    assert series.key_text(key) == series.key_text(same)
    assert series.key_text(same[:8] + (None,)) != series.key_text(
        same[:8] + ('',))
    assert series.normal(('s', 'p', 't', 'c', 'x', None, 'a', 'k', None))[4:6] \
        == ('x', None)


def test_a_case_written_again_moves_to_its_series(tmp_path):
    """The run report writes a case again: a case given another transport
    is in that transport's series only, and the series it left, now
    empty, is gone."""
    from helpers.postgres import intra_case
    path = str(tmp_path / 'moved.db')
    with store.open_store(path) as db:
        db.add_case(intra_case('run-01', 1.0))
        db.add_case(intra_case('run-02', 1.0))
        moved = intra_case('run-02', 1.0)
        moved.transport, moved.sizes = 'net-socket', []
        db.add_case(moved)
        keys = scopes.series_keys(db)
        assert sorted(k[2] for k in keys) == ['intra', 'net-socket']
        for key in keys:
            runs = [c['run_id'] for c in keyhistory.key_cases_before(
                db, key, '9999', 10, ('id', 'run_id'))]
            assert runs == (['run-02'] if key[2] == 'net-socket' else
                            ['run-01'])
        moved = intra_case('run-01', 1.0)
        moved.transport, moved.sizes = 'net-socket', []
        db.add_case(moved)
        assert [k[2] for k in scopes.series_keys(db)] == ['net-socket']
        assert db.query('SELECT count(*) AS n FROM series')[0]['n'] == 1


def test_the_kind_index_leaves_the_probes_out_and_is_used(recorded):
    """``cases_kind`` holds no health probe (they are nearly every case);
    a kind's newest cases are read by it, the probes' by the time
    index."""
    with sqlite3.connect(recorded) as conn:
        entries = conn.execute(
            "SELECT count(*) FROM cases INDEXED BY cases_kind WHERE kind <> "
            "'health probe'").fetchone()[0]
        probes = conn.execute("SELECT count(*) FROM cases WHERE kind = "
                              "'health probe'").fetchone()[0]
    assert entries == 40 * 15 and probes == 12 * 30 * 4
    with store.open_store(recorded, readonly=True) as db:
        for kind, index in (('sweep', 'cases_kind'),
                            ('health probe', 'cases_time')):
            sql = (f'SELECT c.id FROM cases c WHERE '
                   f'{newestruns._kind_where(db, kind)}'
                   f'(c.time, c.id) < (?, ?) '
                   f'ORDER BY c.time DESC, c.id DESC LIMIT 5')
            plan = ' '.join(r[3] for r in db.conn.execute(
                'EXPLAIN QUERY PLAN ' + sql, (kind, '9', 0)))
            assert index in plan and 'TEMP B-TREE' not in plan, plan
        got = list(newestruns.newest_case_rows(db, ('sweep',)))
        assert len(got) == 40 * 15
        assert [r['id'] for r in got] == sorted(
            (r['id'] for r in got), reverse=True)


def test_an_older_source_migrates_into_postgresql_with_its_series(
        recorded, tmp_path):
    """scripts/report migrate from a schema-8 file: the series numbered on
    the way; the same answers from PostgreSQL."""
    pytest.importorskip('psycopg')
    from helpers import postgres
    gen = postgres.local_server()
    url = postgres.fresh(next(gen), 'series8')
    try:
        old = _as_schema_8(_copy(recorded, str(tmp_path / 'old.db')))
        from ccl_health.db import migrate
        with store.open_store(old, readonly=True) as db:
            counts = migrate.migrate(db, url)
        assert counts['series'] == 27
        assert _answers(url) == _answers(recorded)
        with store.open_store(url) as db:      # writing goes on
            db.add_case(postgres.intra_case('run-29', 1.0))
            db.add_case(postgres.intra_case('run-28', 1.0))
            assert db.query('SELECT count(*) AS n FROM series')[0]['n'] == 28
            # a series stored draws no id: 34 M checks a year would
            assert db.query("SELECT last_value AS n FROM "
                            "series_id_seq")[0]['n'] == 28
    finally:
        for _ in gen:
            pass
