"""Every read of the performance database is bounded by its window and
keys, not by what was ever recorded (issue 30): the same reads on a
database and on one holding 10 times its history read the same rows, in
about the same time.

The databases: 30 nodes checked 10 times a day by the hook (its own
record, benchmarks/db_gen.py) for 40 and 400 days, and a nightly sweep
(15 cases x 31 sizes) for 100 and 1,000 nights (each longer than every
window read: 30 days, and each key's 60 cases before it): the larger
holds 135,000 cases and 585,000 size rows and takes ~40 s to write here
(more would pass a minute on 2 shared cores).  The reads: ``report failed`` (24 h),
``report detect`` (30 days), the nightly's comparison and news of the
last night, ``report runs`` (its newest 20), ``history``, ``since``,
``scripts/calibrate --db`` 's read and the report page's data (its 30
days)."""

import datetime
import os
import sys
import time

import pytest

from conftest import REPO
from ccl_health.db import answers, changedcases, newestruns, scopes, store
from ccl_health.db import windowfindings
from ccl_health.db import keyhistory
from ccl_health.db import schema

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import db_gen  # noqa: E402

# the system tier: databases of 40 and 400 days generated, and the reads
# timed on them (minutes)
pytestmark = pytest.mark.system

NODES, PER_DAY = 30, 10
#: (days of checks, nights): longer than every window read (30 days, and
#: each key's 60 cases before it)
SMALL, LARGE = (40, 100), (400, 1000)
#: the larger database may take this much longer per read (it holds 10x)
TIME_RATIO = 3.0
#: and read at most this many more rows
ROWS_RATIO = 1.2


def _write(path, days, end):
    with store.open_store(path) as db:
        db_gen.write_nights(db, 'perlmutter', days[1], end)
        db_gen.write_checks(db, 'perlmutter', NODES, days[0], PER_DAY, end,
                            batch=10000)
    return path


@pytest.fixture(scope='module')
def dbs(tmp_path_factory):
    end = datetime.datetime.now(datetime.timezone.utc).replace(
        microsecond=0)
    base = tmp_path_factory.mktemp('scale')
    return (_write(str(base / 'small.db'), SMALL, end),
            _write(str(base / 'large.db'), LARGE, end))


def _failed(db):
    return answers.failed(db, 24)


def _detect(db):
    from ccl_health.reportcli import _detect_scope
    args = type('Args', (), {'run': None, 'days': 30})()
    keys, since, runs, _ = _detect_scope(db, args)
    return windowfindings.judge_keys(db, keys, since, runs, standing={})


def _nightly(db):
    from ccl_health import findings, news, nightly
    last = next(r.run_id for r in newestruns.newest_first(db)
                if r.run_id.startswith('nightly-'))
    found = findings.run_findings(db, last)
    return found, news.night(db, last, 'perlmutter', 'gpu', 'head').lines


def _runs(db):
    """``report runs`` (its default: the newest 20 and whether there are
    more) and ``runs --kind sweep``."""
    import itertools
    return [list(itertools.islice(newestruns.newest_first(db, kinds),
                                  newestruns.DEFAULT_LAST + 1))
            for kinds in (None, newestruns.KINDS['sweep'])]


#: a node of the hook's checks (db_gen: ``nid`` and its number)
NODE = 'nid00007'


def _history(db):
    """``report history`` of a sweep's transport at a size, of every size,
    and of a node's health probes."""
    return (answers.history(db, 'net-plugin', '1G'),
            answers.history(db, 'intra', last=5),
            answers.history(db, 'intra', '1G', node=NODE))


def _since(db):
    """``report since`` of a sweep's transport (at a size) and of a node's
    probes: the streak walked from the newest case back, its findings the
    kept ones."""
    return (answers.since_when(db, 'net-plugin', '1G'),
            answers.latest(db, 'net-plugin'),
            answers.since_when(db, 'intra', node=NODE),
            answers.latest(db, 'intra', node=NODE))


def _calibrate(db):
    """``scripts/calibrate --db`` 's read: each configuration's last 20
    healthy runs."""
    from ccl_health.db import calibrate
    return calibrate.runs_from_store(db, 'perlmutter', 'gpu', 20)


def _page(db):
    from ccl_health import report
    from ccl_health.report import health
    since, newest = report.page_window(db)
    cases = windowfindings.window_cases(db, since, kinds=report.CASE_KINDS)
    recs = windowfindings.window_cases(db, since, kinds=report.CASE_KINDS,
                              records=True)
    return (len(cases), len(recs), health.probe_summary(db, since),
            len(windowfindings.window_cases(db, since, kinds=('health probe',),
                                   failing=True)))


READS = {'failed': _failed, 'detect': _detect, 'nightly': _nightly,
         'runs': _runs, 'page': _page, 'history': _history,
         'since': _since, 'calibrate': _calibrate}


def _measure(path, read, monkeypatch):
    """(best of 3 seconds, rows read) of ``read`` on ``path``."""
    rows = []
    query = store.Store.query

    def counting(self, sql, params=()):
        out = query(self, sql, params)
        rows.append(len(out))
        return out
    best = None
    with monkeypatch.context() as m:
        m.setattr(store.Store, 'query', counting)
        for _ in range(3):
            rows.clear()
            with store.open_store(path, readonly=True) as db:
                t = time.perf_counter()
                read(db)
                dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
    return best, sum(rows)


@pytest.mark.parametrize('name', sorted(READS))
def test_each_read_is_bounded_by_its_window(dbs, name, monkeypatch):
    small, large = dbs
    t_small, r_small = _measure(small, READS[name], monkeypatch)
    t_large, r_large = _measure(large, READS[name], monkeypatch)
    # the news lists the nightly runs (ccl_health.news._starts: one row a
    # night, 365 a year); everything else the nightly reads is bounded
    nights = LARGE[1] - SMALL[1] if name == 'nightly' else 0
    assert r_large <= ROWS_RATIO * r_small + 10 + nights, \
        (name, r_small, r_large)
    # a read that scans the history takes ~10x (and 10x the rows above)
    assert t_large <= TIME_RATIO * t_small + 0.05, (name, t_small, t_large)


def test_failed_and_detect_read_the_kept_findings(dbs, judged_at_read):
    """Each key's judging is kept by its writer (ccl_health/db/keystate.py):
    ``failed`` and ``detect`` judge no key's history at read."""
    judged = judged_at_read
    _, large = dbs
    with store.open_store(large, readonly=True) as db:
        assert _failed(db) is not None and _detect(db) is not None
        assert db.query('SELECT count(*) AS n FROM key_state')[0]['n'] == \
            NODES + 15
    assert judged == []


def test_the_plans_use_the_indexes(dbs):
    """SQLite's plans of the bounded reads: an index search, never a scan
    of the cases."""
    from ccl_health.judge.series import series_key
    _, large = dbs
    since = datetime.datetime.now(datetime.timezone.utc) - \
        datetime.timedelta(hours=24)
    with store.open_store(large, readonly=True) as db:
        key = series_key(windowfindings.window_cases(db, since)[-1])
        where, params, exact = keyhistory.key_where(db, key)
        assert exact
        plans = {
            'window': ('SELECT id FROM cases c WHERE c.time >= ? ORDER BY '
                       'c.time', (keyhistory.sql_time(since),)),
            'key': (f'SELECT id FROM cases c WHERE {where} AND c.time < ? '
                    f'ORDER BY c.time DESC LIMIT 60',
                    tuple(params) + (keyhistory.sql_time(since),)),
            'failing': ("SELECT id FROM cases c WHERE c.time >= ? AND "
                        "c.verdict NOT IN ('pass', 'skipped')",
                        (keyhistory.sql_time(since),)),
            'run': ('SELECT id FROM cases c WHERE c.run_id = ?', ('x',)),
            # report runs: the cases newest first, a page at a time
            'newest': ('SELECT run_id FROM cases c WHERE (c.time, c.id) < '
                       '(?, ?) ORDER BY c.time DESC, c.id DESC LIMIT 500',
                       ('9', 0)),
            # (the kind index leaves the health probes out: the query
            # says so, newestruns._kind_where)
            'kind': (f'SELECT run_id FROM cases c WHERE '
                     f'{newestruns._kind_where(db, "sweep")}(c.time, c.id) < '
                     f'(?, ?) ORDER BY c.time DESC, c.id DESC LIMIT 500',
                     ('sweep', '9', 0)),
            # since, history, calibrate: a series' newest cases
            'series': (f'SELECT id FROM cases c WHERE {where} ORDER BY '
                       f'c.time DESC, c.id DESC LIMIT 30', tuple(params)),
        }
        for name, (sql, args) in plans.items():
            plan = ' '.join(r[3] for r in db.conn.execute(
                'EXPLAIN QUERY PLAN ' + sql, args))
            assert 'USING' in plan and 'INDEX' in plan, (name, plan)
            assert not plan.startswith('SCAN c') and 'TEMP B-TREE' not in \
                plan, (name, plan)
        # a key's cases by its series id (schema 9), not ten text columns
        assert 'cases_by_series' in ' '.join(r[3] for r in db.conn.execute(
            'EXPLAIN QUERY PLAN ' + plans['series'][0], plans['series'][1]))
        # the series of a scope are found in the table of the series (a
        # row a node and key), never by reading the cases
        seen = []
        db.conn.set_trace_callback(seen.append)
        try:
            keys = scopes.series_keys(db, system='perlmutter',
                                     kind=('sweep', 'health probe'))
        finally:
            db.conn.set_trace_callback(None)
        assert len(keys) == NODES + 15, len(keys)
        assert seen and all('FROM series' in q and 'FROM cases' not in q
                            for q in seen), seen


def test_a_healthy_check_is_recorded_in_under_1_kb(dbs):
    """The file grows by under 1 KB per healthy check (the case, its
    size, the indexes; environment and versions stored once)."""
    small, large = dbs
    grow = os.path.getsize(large) + _wal(large) - os.path.getsize(small) - \
        _wal(small)
    checks = NODES * PER_DAY * (LARGE[0] - SMALL[0])
    nights = (LARGE[1] - SMALL[1]) * 15 * 31 * 120  # a size row ~120 bytes
    # the findings kept with their cases (ccl_health/db/keystate.py): the
    # drops of the failing checks (1 %) and the recoveries after them, and
    # the sweeps': a finding's record, not a healthy check's
    found = _bytes(large, 'findings') - _bytes(small, 'findings')
    assert (grow - nights - found) / checks < 1024, grow / checks


def _bytes(path, table):
    """The bytes of ``table`` and its indexes in the SQLite file."""
    import sqlite3
    with sqlite3.connect(path) as conn:
        return conn.execute('SELECT sum(pgsize) FROM dbstat WHERE name LIKE '
                            '?', (table + '%',)).fetchone()[0] or 0


def _wal(path):
    return os.path.getsize(path + '-wal') if os.path.exists(
        path + '-wal') else 0


def test_opening_a_current_database_takes_no_write_lock(tmp_path):
    """A writer opening a database whose schema is current reads its
    version only (DB_SCALE item 7): while another holds the write lock,
    it opens at once; only its own write waits (and a locked database past
    the hook's bound is an error, never a hang)."""
    import sqlite3
    path = str(tmp_path / 'w.db')
    store.open_store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute('BEGIN IMMEDIATE')
    try:
        t = time.perf_counter()
        with store.open_store(path, timeout=0.2) as db:
            assert time.perf_counter() - t < 0.2
            assert db.schema_version() == schema.SCHEMA_VERSION
            with pytest.raises(sqlite3.OperationalError, match='locked'):
                db.add_case(store.CaseRecord('r', 'c', 'pass'))
    finally:
        holder.execute('ROLLBACK')
        holder.close()


def _attribution_one(db, finding):
    """What changed's cases of one finding read one by one (the reads
    before attribution_many): the flagged run's case of the key, the
    first of a drift's, the key's last passing case before them."""
    mine = keyhistory.of_key(finding.key)
    out = [c for c in windowfindings.run_cases(
        db, finding.run_id, changedcases.CASE_ATTRIBUTED) if mine(c)]
    if not out:
        return []
    before = out[0]['time']
    if finding.since_run:
        first = [c for c in windowfindings.run_cases(db, finding.since_run,
                                            changedcases.CASE_ATTRIBUTED)
                 if mine(c)]
        out += first
        before = first[0]['time'] if first else \
            finding.since_time or before
    out += keyhistory.key_cases_before(db, finding.key, before, 1,
                                       changedcases.CASE_ATTRIBUTED,
                                       verdict='pass')
    return sorted(out, key=lambda c: (c['time'], c['id']))


def test_what_changed_is_read_for_all_findings_at_once(dbs):
    """``report detect`` and ``failed`` list a machine's drops, each with
    what changed: the cases it compares are read for all the findings
    together (changedcases.attribution_many), the same rows as one read a
    finding, in a few queries (not four a finding: 27,000 round trips, 10
    of detect's 12 s at a month of Frontier on PostgreSQL)."""
    _, large = dbs
    with store.open_store(large, readonly=True) as db:
        found = [f for f in _detect(db) if f.kind in ('drop', 'drift')]
        assert len(found) > 20, len(found)
        one_by_one = [_attribution_one(db, f) for f in found]
        seen = []
        db.conn.set_trace_callback(seen.append)
        try:
            together = changedcases.attribution_many(db, found, batch=7)
        finally:
            db.conn.set_trace_callback(None)
    assert together == one_by_one
    assert sum(len(c) >= 2 for c in together) > 20   # a passing case before
    assert len(seen) <= len(found) / 7 + 6, (len(seen), len(found))
