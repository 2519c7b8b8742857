"""benchmarks/db_extend.py (issue 45): a longer history made from a
generated database by copying its rows back in time, then kept by the
project's own code.  The oracle is the source: its rows (the newest
month) unchanged, `failed` answering the same, every older copy's cases
those of the source a span earlier, every key judged as from its whole
history (no key stale, each state the one `rebuild` makes), every closed
day kept."""

import datetime
import json
import os
import shutil
import sqlite3
import sys

import pytest

from conftest import REPO
from ccl_health.db import answers, health_days, keystate, store

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import db_extend  # noqa: E402
import db_gen  # noqa: E402

#: the system tier (tests/conftest.py): databases of generated days
pytestmark = pytest.mark.system

END = datetime.datetime(2026, 11, 20, 12, 0, tzinfo=datetime.timezone.utc)
NODES, DAYS = 6, 5


@pytest.fixture(scope='module')
def extended(tmp_path_factory):
    base = tmp_path_factory.mktemp('extend')
    src = str(base / 'src.db')
    with store.open_store(src) as db:
        db_gen.write_nights(db, 'frontier', DAYS, END)
        db_gen.write_checks(db, 'frontier', NODES, DAYS, 10, END,
                            batch=1000, seed=5)
    dst = str(base / 'dst.db')
    assert db_extend.main([src, dst]) == 0
    return src, dst


def _rows(path, sql, params=()):
    with store.open_store(path, readonly=True) as db:
        return [dict(r) for r in db.query(sql, params)]


def test_the_newest_rows_are_the_sources(extended):
    src, dst = extended
    cols = 'id, run_id, case_name, time, verdict, series_id'
    old = _rows(src, f'SELECT {cols} FROM cases ORDER BY id')
    top = old[-1]['id']
    assert _rows(dst, f'SELECT {cols} FROM cases WHERE id <= ? ORDER BY '
                 f'id', (top,)) == old
    assert _rows(dst, 'SELECT count(*) AS n FROM cases')[0]['n'] == \
        3 * len(old)
    with store.open_store(src, readonly=True) as a, \
            store.open_store(dst, readonly=True) as b:
        now = END + datetime.timedelta(hours=1)
        assert answers.failed(b, 24, now=now) == \
            answers.failed(a, 24, now=now)


def test_each_copy_is_the_source_a_span_earlier(extended):
    src, dst = extended
    old = _rows(src, 'SELECT id, time, node, kind FROM cases ORDER BY id')
    with sqlite3.connect(src) as conn:
        span = db_extend.span_days(conn)
    top = old[-1]['id']
    for k, off in ((1, 2 * top), (2, top)):
        new = _rows(dst, 'SELECT id, run_id, time, node, kind FROM cases '
                    'WHERE id > ? AND id <= ? ORDER BY id', (off, off + top))
        assert len(new) == len(old)
        for a, b in zip(old, new):
            t = datetime.datetime.fromisoformat(a['time']) - \
                datetime.timedelta(days=k * span)
            assert b['time'] == t.isoformat()
            assert (b['node'], b['kind']) == (a['node'], a['kind'])
            assert b['run_id'] == (f'health-{b["time"]}-{b["node"]}' if
                                   b['kind'] == 'health probe' else
                                   f'nightly-{t:%Y%m%dT%H%M%SZ}-gen')


def test_what_is_kept_is_the_projects(extended, tmp_path):
    _, dst = extended
    assert _rows(dst, 'SELECT key FROM stale_keys') == []
    with store.open_store(dst, readonly=True) as db:
        first = db.query('SELECT min(time) AS t FROM cases')[0]['t'][:10]
        kept = set(health_days.kept_days(db, first))
    day, want = datetime.date.fromisoformat(first), set()
    while day < END.date():
        want.add(day.isoformat())
        day += datetime.timedelta(days=1)
    assert want <= kept
    times = [r['time'] for r in _rows(dst, 'SELECT time FROM findings '
                                      'ORDER BY id')]
    assert times == sorted(times)
    # each key's state is what judging its whole history makes
    copy = str(tmp_path / 'copy.db')
    shutil.copy(dst, copy)
    before = _rows(copy, 'SELECT key, state, standing FROM key_state '
                   'ORDER BY key')
    with store.open_store(copy) as db:
        keystate.rejudge(db, [tuple(json.loads(r['key'])) for r in before])
    assert _rows(copy, 'SELECT key, state, standing FROM key_state ORDER '
                 'BY key') == before
    assert any('15 healthy' in (r['standing'] or '') for r in before)


def test_a_source_of_another_form_is_refused(extended, tmp_path):
    src, _ = extended
    odd = str(tmp_path / 'odd.db')
    shutil.copy(src, odd)
    with store.open_store(odd) as db:
        with db.transaction():
            db.execute("UPDATE cases SET run_id = 'mine' WHERE id = 1")
    with pytest.raises(SystemExit, match='not a generated database'):
        db_extend.main([odd, str(tmp_path / 'out.db')])
