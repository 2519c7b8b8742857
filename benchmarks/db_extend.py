#!/usr/bin/env python3
"""A longer history in minutes instead of hours (issue 45): a SQLite
database written by ``benchmarks/db_gen.py`` (through the project's
recording path: ~2,751 s for Frontier's 31 days on 2 cores, ~2.5 h for 90)
extended backwards by copies of its own rows, in SQL.

Each copy ``k`` (1 .. ``--copies``) is every case and size row of
the source shifted back by ``k`` x its span in whole days (31 days: the
copies hold days -31 .. -1 and -62 .. -32 before the first): a new time,
a new run id of that time (the recorder's own forms: ``health-<time>-
<node>``, ``nightly-<YYYYmmddTHHMMSSZ>-gen``: refused if a row has another),
a new case id (an offset; the older a copy the smaller its ids, above the
source's), the same node, series (history key), documents and values.
The newest month's rows are the source's, unchanged.

Then the kept rows made consistent by the project's own code:

* the closed days of the health checks (``kept_days``): the inserts drop
  nothing (those days were never kept: the database's triggers), and
  :func:`ccl_health.db.health_days.keep` keeps every day of the copies,
  as the nightly keeps a day after it closes;
* each key's state, its standing line, its findings and its stale listing
  (``key_state``, ``findings``, ``stale_keys``): every key judged again
  from its whole history (:func:`ccl_health.db.keystate.rejudge`, the path
  of a key judged stale), as the recorder's judge of each case would have
  left them (a state counts the healthy values ever recorded: the
  standing line says "93 healthy runs", not 31).  No finding is copied;
  the findings are then written again in the order of their times, as
  the recorder writes them.

No level (acceptance, calibration), news ledger or daily-health row is
copied (the Frontier sets have none: a copied level would make keys
stale).  The reads of the newest month (failed: 24 h, detect: 7 days, the
page: 30 days, runs, history's newest 60, since, the nightly's comparison)
read the same rows as in the source; what grows is every table and index
under them.

    python benchmarks/db_extend.py SRC.db DST.db [--copies 2]
"""

import argparse
import json
import os
import sqlite3
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from ccl_health.db import health_days, keystate, store  # noqa: E402


def _shifted(days, col='time'):
    """SQL: the recorded time ``col`` (``YYYY-MM-DDTHH:MM:SS+00:00``)
    ``days`` days earlier, in the same form."""
    return f"strftime('%Y-%m-%dT%H:%M:%S+00:00', {col}, '-{days} days')"


def _run_of(days, run='run_id', time_col='time'):
    """SQL: the run id of a row ``days`` days earlier: the hook's
    ``health-<time>-<node>``, the generated nightly's
    ``nightly-<stamp>-gen``."""
    new = _shifted(days, time_col)
    return (f"CASE WHEN {run} LIKE 'health-%' THEN 'health-' || {new} || "
            f"substr({run}, 33) ELSE 'nightly-' || strftime("
            f"'%Y%m%dT%H%M%SZ', {new}) || '-gen' END")


def _check_forms(conn):
    """Refuse a source whose times or run ids are not of the forms the
    copy rewrites (the copy would then not be a recorder's)."""
    bad = conn.execute(
        "SELECT count(*) FROM cases WHERE length(time) <> 25 OR "
        "substr(time, 20) <> '+00:00' OR run_id <> CASE WHEN run_id LIKE "
        "'health-%' THEN 'health-' || time || '-' || node ELSE 'nightly-' "
        "|| strftime('%Y%m%dT%H%M%SZ', time) || '-gen' END").fetchone()[0]
    odd = conn.execute(
        'SELECT count(*) FROM findings f JOIN cases c ON c.id = f.case_id '
        'WHERE f.time <> c.time OR f.run_id <> c.run_id').fetchone()[0]
    levels = sum(conn.execute(f'SELECT count(*) FROM {t}').fetchone()[0]
                 for t in ('acceptances', 'baselines'))
    if bad or odd or levels:
        raise SystemExit(f'not a generated database: {bad} cases of '
                         f'another time or run id form, {odd} findings not '
                         f'of their case, {levels} level rows')


def span_days(conn):
    """The source's span in whole days (first to last case)."""
    first, last = conn.execute(
        'SELECT julianday(min(time)), julianday(max(time)) FROM '
        'cases').fetchone()
    return int(last - first) + 1


def copy_back(conn, copies, progress=print):
    """Insert ``copies`` copies of every case and size row, each shifted
    back by its multiple of the source's span; one transaction a copy.
    Returns the shift in days."""
    _check_forms(conn)
    days = span_days(conn)
    top = conn.execute('SELECT max(id) FROM cases').fetchone()[0]
    cols = [r[1] for r in conn.execute('PRAGMA table_info(cases)')
            if r[1] not in ('id', 'run_id', 'time')]
    mcols = [r[1] for r in conn.execute('PRAGMA table_info(measurements)')
             if r[1] != 'case_id']
    for k in range(1, copies + 1):
        shift = k * days
        # the oldest copy takes the smallest ids above the source's
        off = (copies - k + 1) * top
        t = time.perf_counter()
        conn.execute('BEGIN')
        conn.execute(
            f'INSERT INTO cases (id, run_id, time, {", ".join(cols)}) '
            f'SELECT id + {off}, {_run_of(shift)}, {_shifted(shift)}, '
            f'{", ".join(cols)} FROM cases WHERE id <= {top} ORDER BY id')
        conn.execute(
            f'INSERT INTO measurements (case_id, {", ".join(mcols)}) '
            f'SELECT case_id + {off}, {", ".join(mcols)} FROM measurements '
            f'WHERE case_id <= {top} ORDER BY case_id, size')
        conn.execute('COMMIT')
        progress(f'  copy {k}: {shift} days back, ids +{off}: '
                 f'{time.perf_counter() - t:.0f} s')
    return days


def findings_since(db, days):
    """``{kind: count}`` of the findings of the newest ``days`` days."""
    last = db.query('SELECT max(time) AS t FROM cases')[0]['t']
    since = db.query("SELECT strftime('%Y-%m-%dT%H:%M:%S+00:00', ?, "
                     f"'-{days} days') AS t", (last,))[0]['t']
    return {r['kind']: r['n'] for r in db.query(
        'SELECT kind, count(*) AS n FROM findings WHERE time >= ? GROUP BY '
        'kind ORDER BY kind', (since,))}


def rejudge_all(url, progress=print):
    """Every kept key judged again from its whole history
    (:func:`keystate.rejudge`: its state, standing line and findings
    written anew, one transaction a key).  Returns how many."""
    with store.open_store(url) as db:
        keys = [tuple(json.loads(r['key'])) for r in db.query(
            'SELECT key FROM key_state ORDER BY key')]
        t = time.perf_counter()

        def step(i, n):
            if i % 2000 == 0 or i == n:
                progress(f'  judged {i} of {n} keys: '
                         f'{time.perf_counter() - t:.0f} s')
        return keystate.rejudge(db, keys, progress=step)


def findings_in_time_order(path):
    """The table ``findings`` written again in the order of its times
    (new ids), as the recorder writes it (each case's findings with the
    case): judging every key again (:func:`rejudge_all`) wrote them key
    by key, which would scatter a week's findings over the table."""
    cols = 'case_id, key, size, kind, run_id, time, body, changed'
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if 'changed' not in {r[1] for r in conn.execute(
                'PRAGMA table_info(findings)')}:
            cols = cols.rsplit(',', 1)[0]
        conn.execute('BEGIN')
        conn.execute(f'CREATE TEMP TABLE ordered AS SELECT {cols} FROM '
                     'findings ORDER BY time, case_id, id')
        conn.execute('DELETE FROM findings')
        conn.execute(f'INSERT INTO findings ({cols}) SELECT {cols} FROM '
                     'ordered ORDER BY rowid')
        conn.execute('DROP TABLE ordered')
        conn.execute('COMMIT')
        conn.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    finally:
        conn.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('src', help='a generated SQLite database (read only)')
    ap.add_argument('dst', help='the longer copy (must not exist)')
    ap.add_argument('--copies', type=int, default=2)
    args = ap.parse_args(argv)
    if os.path.exists(args.dst):
        raise SystemExit(f'{args.dst} exists')
    t0 = time.perf_counter()
    # the source read (a WAL checkpointed) into a copy
    with sqlite3.connect(f'file:{args.src}?mode=ro', uri=True) as src, \
            sqlite3.connect(args.dst) as dst:
        src.backup(dst)
    print(f'copied {args.src}: {time.perf_counter() - t0:.0f} s', flush=True)
    conn = sqlite3.connect(args.dst, isolation_level=None)
    conn.execute('PRAGMA journal_mode = WAL')
    conn.execute('PRAGMA cache_size = -1000000')     # 1 GB
    days = copy_back(conn, args.copies,
                     progress=lambda s: print(s, flush=True))
    conn.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    conn.close()
    with store.open_store(args.dst) as db:
        before = findings_since(db, days)
    n = rejudge_all(args.dst, progress=lambda s: print(s, flush=True))
    t = time.perf_counter()
    findings_in_time_order(args.dst)
    with store.open_store(args.dst) as db:
        after = findings_since(db, days)
        stale = db.query('SELECT count(*) AS n FROM stale_keys')[0]['n']
        kept = health_days.keep(db, days=(args.copies + 1) * days + 1)
    print(f'{n} keys judged again, {stale} listed stale; the findings of '
          f'the newest {days} days before {before}, after {after}', flush=True)
    print(f'kept {len(kept)} closed days: {time.perf_counter() - t:.0f} s',
          flush=True)
    with sqlite3.connect(args.dst) as conn:
        conn.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    print(f'{args.dst}: {os.path.getsize(args.dst) / 2**30:.2f} GiB, '
          f'{time.perf_counter() - t0:.0f} s', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
