"""A database of generated history (issue 30): eight nodes' hook checks
over twelve days and forty nightly sweeps, with drops, recoveries, drifts,
an intermittent node, an acceptance and cases written out of time order
(the fixture ``written``); the answers of ``report failed`` and ``report
detect`` on it, from the state kept per key or judged at read; the
PostgreSQL database of the tests' server (the fixture ``pg_db``)."""

import datetime
import os
import random
import shutil
import sys

import pytest

from ccl_health.db import answers, store, windowfindings
from conftest import REPO

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
    return write_history(str(tmp_path_factory.mktemp('state') / 'db.db'))


def write_history(path):
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
        again.reason, again.source = 'the run report', 'report'
        db.add_case(again)
        run = nights[25][5]
        db.accept([{'run_id': run.run_id, 'run_time': run.time,
                    'system': run.system, 'partition': run.partition,
                    'transport': run.transport,
                    'collective': run.collective}], 'test', 'new level')
    return path


def emptied(path, tmp_path):
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


def answers_of(path):
    """What ``report failed`` (the last 24 h) and ``report detect`` (the
    last 3 and 40 days) answer, and how each key is judged."""
    from ccl_health.reportcli import _detect_scope
    out = {}
    with store.open_store(path, readonly=True) as db:
        out['failed'] = answers.failures(db, 24, now=END)
        for days in (3, 40):
            args = type('Args', (), {'run': None, 'days': days})()
            keys, since, runs, _ = _detect_scope(db, args)
            how = {}
            found = windowfindings.judge_keys(db, keys, since, runs,
                                              standing=how)
            out[f'detect {days}'] = [f.line() for f in found]
            out[f'standing {days}'] = sorted(how.values())
        run = db.query('SELECT run_id FROM cases WHERE run_id LIKE ? ORDER '
                       'BY time DESC LIMIT 1', ('nightly-%',))[0]['run_id']
        out['run'] = [f.line() for f in windowfindings.detect_in(
            db, run_id=run)]
    return out


def judged_in_place(path, tmp_path, node, run_id):
    """The backfilled case ``run_id`` of ``node`` (older than the node's
    newest) is its node's one kept drop, ``detect`` names it, and the
    answers are those of the history judged at read."""
    with store.open_store(path, readonly=True) as db:
        assert [r['run_id'] for r in db.query(
            "SELECT run_id FROM findings WHERE kind = 'drop' AND key LIKE ?",
            (f'%{node}%',))] == [run_id]
    kept = answers_of(path)
    assert any(run_id in line for line in kept['detect 3'])
    assert kept == answers_of(emptied(path, tmp_path))


@pytest.fixture(scope='module')
def pg_db(tmp_path_factory):
    """A fresh PostgreSQL database of the tests' server."""
    pytest.importorskip('psycopg')
    from helpers import postgres
    gen = postgres.local_server()
    url = next(gen)
    import psycopg
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS state_test')
        conn.execute('CREATE DATABASE state_test')
    yield url.rsplit('/', 1)[0] + '/state_test'
    gen.close()
