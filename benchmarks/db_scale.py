#!/usr/bin/env python3
"""The performance database at machine scale (issue 30), measured with the
project's own recorder (benchmarks/db_gen.py: the hook's ``case_of``,
sweeps through ``Store.add_cases``) on SQLite and on PostgreSQL (the
tests' server, tests/helpers/postgres.py ``postgres_server``, loaded
with ``scripts/report migrate``).

Sets (each one run of at most ~10 minutes on 2 cores):

  nights      1 and 365 nights of sweeps (15 cases x 31 sizes a night)
  perlmutter  30 nights and 30 days of Perlmutter's checks (1,800 nodes x
              10 a day: 540,000); --nodes/--days scale it down
  frontier    Frontier's checks (9,408 nodes x 10 a day) for --days days
              (default 10: every node's 60 checks of history and its last
              day: what any read of a longer database reads)
  writers     64 (and 8) hooks recording at once, SQLite and PostgreSQL:
              the latency of each write (open, migration check, the case)

Every read command is timed as a person runs it (a process: wall seconds
and peak memory): ``report failed``, ``report detect``, ``report runs
--last 5``, the report page, the nightly's comparison and news of its last
night.  File and table sizes; the query plans of the main queries.
Results: --json (a set's numbers, merged into one file) and --out (the
page, from every set recorded).

    python benchmarks/db_scale.py --set nights [--set perlmutter ...]
        [--json benchmarks/results/db_scale.json]
        [--out benchmarks/results/db_scale.md] [--work DIR] [--no-pg]
"""

import argparse
import contextlib
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
sys.path.insert(0, os.path.join(REPO, 'tests'))

import db_gen  # noqa: E402
import coldcache  # noqa: E402
import stopwatch  # noqa: E402
import db_writers  # noqa: E402
from ccl_health.db import store  # noqa: E402
from ccl_health.db import schema

REPORT = os.path.join(REPO, 'scripts', 'report')
PY = sys.executable
READS = ('failed', 'detect', 'runs', 'history', 'since', 'nightly', 'page')


# -- the PostgreSQL server of the tests ---------------------------------------

class Postgres:
    def __init__(self):
        from helpers import postgres as t
        pgbin = t.pg_bin()
        if pgbin is None:
            raise SystemExit('PostgreSQL is not installed (apt-get install '
                             'postgresql), or run with --no-pg')
        from helpers.ports import free_ports
        [port] = free_ports(1)
        self._gen = t.postgres_server(pgbin, '127.0.0.1', port)
        self.url = next(self._gen)
        self._t, self._bin = t, pgbin
        import psycopg
        with psycopg.connect(self.url, autocommit=True) as conn:
            self.data = conn.execute('SHOW data_directory').fetchone()[0]

    def restart(self):
        """Its shared buffers emptied (the options it was started with:
        postmaster.opts)."""
        r = self._t._as_postgres([f'{self._bin}/pg_ctl', '-D', self.data,
                                  '-w', '-m', 'fast', '-l', os.path.join(
                                      os.path.dirname(self.data), 'log'),
                                  'restart'])
        assert r.returncode == 0, r.stderr

    def database(self, name):
        import psycopg
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS {name}')
            conn.execute(f'CREATE DATABASE {name}')
        return self.url.rsplit('/', 1)[0] + '/' + name

    def stop(self):
        for _ in self._gen:
            pass


# -- timing a command ----------------------------------------------------------

def timed(cmd, env=None, cpu=None):
    """(wall seconds, peak RSS MiB, exit code, last line) of ``cmd``;
    ``cpu``: a dict given its CPU seconds (user + system: what the
    command itself spent, whatever else the machine ran) and the machine's
    load average (1 minute) as it started."""
    load = os.getloadavg()[0]
    t = time.perf_counter()
    p = subprocess.run(['/usr/bin/time', '-f', '%U %S %M'] + cmd,
                       capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    err = p.stderr.strip().splitlines()
    last = err[-1].split() if err else []
    rss = None
    if len(last) == 3 and last[2].isdigit():
        rss = int(last[2]) / 1024
        if cpu is not None:
            cpu.update(cpu_s=round(float(last[0]) + float(last[1]), 2),
                       load=round(load, 1))
    out = (p.stdout.strip().splitlines() or [''])
    return wall, rss, p.returncode, out[0][:160]


def read_cmd(name, url, work, again=False):
    """The command of the read ``name``; ``again``: the page drawn again
    into the folder of the one before (the nightly's: its figures and
    closed days that did not change are not drawn or counted again)."""
    if name == 'failed':
        return [REPORT, '--db', url, 'failed']
    if name == 'detect':
        return [REPORT, '--db', url, 'detect']
    if name == 'runs':
        return [REPORT, '--db', url, 'runs', '--last', '5']
    if name == 'history':
        return [REPORT, '--db', url, 'history', 'intra', '--size', '1G']
    if name == 'since':
        return [REPORT, '--db', url, 'since', 'net-plugin', '--size', '1G']
    if name == 'page':
        out = os.path.join(work, 'page')
        if not again:
            shutil.rmtree(out, ignore_errors=True)
        return [REPORT, '--db', url, 'report', '--out', out]
    return [PY, os.path.abspath(__file__), '--nightly-read', url]


def nightly_read(url):
    """The nightly's comparison and news of its last night (what
    scripts/nightly reads after its run); ``url``: or an open store."""
    from ccl_health import findings, news
    from ccl_health.db import newestruns
    with (contextlib.nullcontext(url) if hasattr(url, 'query') else
          store.open_store(url)) as db:
        last = next(r.run_id for r in newestruns.newest_first(db)
                    if r.run_id.startswith('nightly-'))
        found, new, prev = findings.run_findings(db, last)
        night = news.night(db, last, 'perlmutter', 'gpu', 'bench')
        print(f'{len(found)} finding(s), {len(new)} new vs {prev}; '
              f'{night.lines[0][:80]}')


def cold(url, pg):
    """Nothing of the database ``url`` in memory: the SQLite file (and
    its WAL) dropped from the page cache; PostgreSQL restarted (its
    shared buffers) and its files dropped."""
    if url.startswith('postgresql://'):
        pg.restart()
        coldcache.uncache(pg.data)
    else:
        coldcache.sqlite(url)


def page_split(url, out):
    """The page of ``url`` drawn in this process, its time split: the
    health checks counted (their days, counts and nodes: ``counts``), the
    figures drawn (``figures``: pandas and matplotlib imported there), the
    database's other reads (``reads``: the window's cases, records and
    findings, the nodes' trends) and the page's own Python (``python``:
    its tables, the page written); ``queries`` is reads and Python
    together (as measured before 2026-11-29).  Prints it as JSON."""
    from ccl_health import report
    from ccl_health.report import figures, health
    spent = {'counts': 0.0, 'figures': 0.0, 'reads': 0.0}
    inside = []

    def timing(fn, what):       # within a part timed already: not again
        return stopwatch.timed(spent, what, fn, inside)
    for name in ('days_rows', 'probe_summary', 'node_rows'):
        setattr(health, name, timing(getattr(health, name), 'counts'))
    report.probe_summary = health.probe_summary
    report.node_rows = health.node_rows
    add = figures.Figures.add

    def add_timed(self, name, caption, draw, *data):
        return add(self, name, caption, timing(draw, 'figures'), *data)
    figures.Figures.add = add_timed
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    with store.open_store(url, readonly=True) as db:
        db.query = timing(db.query, 'reads')
        report.build(db, out)
    total = time.perf_counter() - t
    rest = total - spent['counts'] - spent['figures']
    print(json.dumps({'total': round(total, 2), 'counts': round(
        spent['counts'], 2), 'figures': round(spent['figures'], 2),
        'queries': round(rest, 2), 'reads': round(spent['reads'], 2),
        'python': round(rest - spent['reads'], 2)}))


def time_reads(url, work, pg=None, reads=READS):
    out = {}
    for name in reads:
        cold(url, pg)
        first, second = {}, {}
        wall, rss, rc, line = timed(read_cmd(name, url, work), cpu=first)
        again = timed(read_cmd(name, url, work, again=True), cpu=second)[0]
        out[name] = {'s': round(wall, 2), 'again_s': round(again, 2),
                     'rss_mib': rss and round(rss), 'rc': rc, 'line': line,
                     'cpu_s': first.get('cpu_s'), 'load': first.get('load'),
                     'again_cpu_s': second.get('cpu_s'),
                     'again_load': second.get('load')}
        print(f'    {name:8} {wall:7.2f} s cold {again:7.2f} s again '
              f'(CPU {first.get("cpu_s")} / {second.get("cpu_s")} s, load '
              f'{first.get("load")} / {second.get("load")}) '
              f'{rss or 0:6.0f} MiB rc={rc}  {line[:60]}', flush=True)
    if 'page' not in reads:
        return out
    cold(url, pg)
    out['page_split'] = json.loads(subprocess.run(
        [PY, os.path.abspath(__file__), '--page-split', url, os.path.join(
            work, 'page-split')], capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1])
    print(f'    page split (cold): {out["page_split"]}', flush=True)
    page = os.path.join(work, 'page')
    out['page']['mib'] = round(sum(
        os.path.getsize(os.path.join(page, f)) for f in os.listdir(page)) /
        2**20, 1) if os.path.isdir(page) else None
    return out


# -- sizes and plans -----------------------------------------------------------

def sqlite_sizes(path):
    import sqlite3
    size = os.path.getsize(path) + (os.path.getsize(path + '-wal') if
                                    os.path.exists(path + '-wal') else 0)
    conn = sqlite3.connect(path)
    tables = {}
    try:
        for name, n in conn.execute('SELECT name, SUM(pgsize) FROM dbstat '
                                    'GROUP BY name'):
            tables[name] = n
    except sqlite3.Error:
        pass
    counts = {t: conn.execute(f'SELECT count(*) FROM {t}').fetchone()[0]
              for t in ('cases', 'measurements', 'blobs')}
    conn.close()
    return {'bytes': size, 'tables': tables, 'rows': counts}


def pg_sizes(url):
    with store.open_store(url, readonly=True) as db:
        total = db.query('SELECT pg_database_size(current_database()) AS '
                         'n')[0]['n']
        tables = {r['t']: r['n'] for r in db.query(
            "SELECT relname AS t, pg_total_relation_size(oid) AS n FROM "
            "pg_class WHERE relname IN ('cases', 'measurements', 'blobs', "
            "'health_daily')")}
    return {'bytes': total, 'tables': tables}


def plans(url):
    """The plans of the main queries (SQLite EXPLAIN QUERY PLAN,
    PostgreSQL EXPLAIN)."""
    from ccl_health.db import newestruns
    from ccl_health.db import keyhistory
    from ccl_health.judge.series import series_key
    out = {}
    with store.open_store(url, readonly=True) as db:
        have = db.schema_version()
        newest = db.query('SELECT max(time) AS t FROM cases')[0]['t']
        since = keyhistory.sql_time(datetime.datetime.fromisoformat(newest) -
                               datetime.timedelta(hours=24))
        probe = db.query("SELECT * FROM cases WHERE source = 'health' "
                         "ORDER BY id DESC LIMIT 1")
        sweep = db.query("SELECT * FROM cases WHERE source = 'sweep' "
                         "ORDER BY id DESC LIMIT 1")
        queries = {
            'the window (report failed before schema 10)': (
                'SELECT c.id, c.run_id, c.time, c.verdict FROM cases c '
                'WHERE c.time >= ? ORDER BY c.time, c.id', (since,))}
        for what, row in (('a node\'s history (its last 60 checks)', probe),
                          ('a sweep key\'s history', sweep)):
            if row:
                where, params, _ = keyhistory.key_where(db, series_key(row[0]))
                queries[what] = (
                    f'SELECT c.id FROM cases c WHERE {where} AND c.time < ? '
                    f'ORDER BY c.time DESC, c.id DESC LIMIT 60',
                    tuple(params) + (since,))
        queries['the failures of a window (the page)'] = (
            "SELECT c.id FROM cases c WHERE c.time >= ? AND c.verdict NOT "
            "IN ('pass', 'skipped')", (since,))
        queries['a run\'s cases'] = (
            'SELECT c.id FROM cases c WHERE c.run_id = ?',
            (sweep[0]['run_id'] if sweep else 'x',))
        queries['the newest cases, a page (report runs)'] = (
            'SELECT c.run_id FROM cases c WHERE (c.time, c.id) < (?, ?) '
            'ORDER BY c.time DESC, c.id DESC LIMIT 500', ('99999', 0))
        for kind in ('sweep', 'health probe'):
            queries[f'a kind\'s newest cases (report runs --kind: {kind})'] = (
                f'SELECT c.run_id FROM cases c WHERE '
                f'{newestruns._kind_where(db, kind)}(c.time, c.id) < (?, ?) '
                f'ORDER BY c.time DESC, c.id DESC LIMIT 500',
                (kind, '99999', 0))
        queries['the series of a scope (since, history, calibrate, accept)'] \
            = ('SELECT DISTINCT system, partition, kind, transport, '
               'collective, nodes, ranks, algo, node FROM series WHERE '
               'system = ? AND kind = ?', ('frontier', 'sweep'))
        queries['the nightly runs (news)'] = (
            "SELECT run_id, min(time) FROM cases WHERE run_id LIKE ? AND "
            "system || '' = ? AND kind IN ('sweep', 'framework', 'other') "
            "AND kind <> 'health probe' GROUP BY run_id",
            ('nightly-%', 'frontier'))
        from ccl_health.db import health_days
        from ccl_health.judge.series import PROBE_KIND
        probe, pargs = health_days._is_probe()
        week = keyhistory.sql_time(datetime.datetime.fromisoformat(newest) -
                              datetime.timedelta(days=7))
        today = newest[:10]
        queries.update({
            'the findings of a window (failed; the page\'s probes)': (
                'SELECT case_id, key, size, kind, run_id, time, body'
                + (', changed' if have >= 12 else '') + ' FROM '
                'findings WHERE time >= ?', (since,)),
            'the other kinds\' runs of a window (failed)': (
                f"SELECT c.run_id, c.time FROM cases c WHERE c.time >= ? "
                f"AND c.kind <> '{PROBE_KIND}' AND c.kind IN (?, ?, ?) "
                f"ORDER BY c.time, c.id", (since, 'sweep', 'framework',
                                           'other')),
            'the stale keys (failed; the page\'s probes)': (
                'SELECT key FROM stale_keys', ()),
            'each key\'s kept standing (detect; 500 keys a query)': (
                'SELECT key, standing FROM key_state WHERE key IN (?, ?)',
                tuple(r['key'] for r in db.query(
                    'SELECT key FROM key_state ORDER BY key LIMIT 2')) or
                ('x', 'y')),
            'the kept days (the page)': (
                'SELECT day, rows, counts FROM kept_days WHERE day >= ? AND '
                'version = ?', (today, health_days.KEPT_VERSION)),
            'a day\'s probes counted (the page: the open day)': (
                f'SELECT c.system, c.partition, c.collective, c.transport, '
                f'c.nodes, c.ranks, c.algo, COUNT(*) AS checks, MAX(c.time) '
                f'FROM cases c WHERE {probe} AND c.time >= ? AND c.time < ? '
                f'GROUP BY c.system, c.partition, c.collective, c.transport,'
                f' c.nodes, c.ranks, c.algo', pargs + (today, '9999')),
            'a day\'s probes (the page: the open day)': (
                f'SELECT c.id, c.verdict, c.ranks, c.nodelist FROM cases c '
                f'WHERE {probe} AND c.time >= ? AND c.time < ?',
                pargs + (today, '9999')),
            'the keys of 7 days (detect)': (
                'SELECT system, partition, transport, collective, nodes, '
                'ranks, algo, kind, node FROM series WHERE last_time >= ?'
                if have >= 12 else
                'SELECT s.system, s.partition, s.transport, s.collective, '
                's.nodes, s.ranks, s.algo, s.kind, s.node FROM series s '
                'WHERE s.id IN (SELECT c.series_id FROM cases c WHERE '
                'c.time >= ?)', (week,)),
            'the sweeps of the page\'s 30 days': (
                f"SELECT c.id FROM cases c WHERE c.time >= ? AND c.kind <> "
                f"'{PROBE_KIND}' AND c.kind IN (?, ?, ?, ?) ORDER BY c.time, "
                f"c.id", (keyhistory.sql_time(datetime.datetime.fromisoformat(
                    newest) - datetime.timedelta(days=30)), 'sweep',
                    'framework', 'fleet', 'other')),
        })
        for what, (sql, args) in queries.items():
            if db.kind == 'sqlite':
                lines = [r[3] for r in db.conn.execute(
                    'EXPLAIN QUERY PLAN ' + sql, args)]
            else:
                lines = [r['QUERY PLAN'] for r in db.query(
                    'EXPLAIN ' + sql, args)]
            out[what] = {'sql': ' '.join(sql.split()), 'plan': lines}
    return out


# -- the sets ------------------------------------------------------------------

def vm_counts(path, size='1G'):
    """What each read but the page does on the SQLite database ``path``,
    in this process (warm): ``{read: {'vm': SQLite VM instructions (to
    the thousand), 'rows': rows its queries returned, 'queries': how
    many, 's': seconds}}``: a read that does the same work at 31 and 93
    days reads what a month reads."""
    import argparse as ap
    import contextlib
    import io
    from ccl_health import reportcli
    from ccl_health.db import answers
    reads = {
        'failed': lambda db: answers.failed(db, 24),
        'detect': lambda db: reportcli._detect(db, ap.Namespace(
            run=None, days=7)),
        'runs': lambda db: reportcli.cmd_runs(db, ap.Namespace(
            last=5, all=False, kind=None)),
        'history': lambda db: answers.history(db, 'intra', size),
        'since': lambda db: answers.since_when(db, 'net-plugin', size),
        'nightly': lambda db: nightly_read(db)}
    out = {}
    query = store.Store.query
    for name, read in reads.items():
        rows = []

        def counting(self, sql, params=()):
            got = query(self, sql, params)
            rows.append(len(got))
            return got
        store.Store.query = counting
        steps = [0]
        try:
            with store.open_store(path, readonly=True) as db, \
                    contextlib.redirect_stdout(io.StringIO()):
                db.conn.set_progress_handler(
                    lambda: steps.__setitem__(0, steps[0] + 1), 1000)
                t = time.perf_counter()
                read(db)
                dt = time.perf_counter() - t
        finally:
            store.Store.query = query
        out[name] = {'vm': steps[0] * 1000, 'rows': sum(rows),
                     'queries': len(rows), 's': round(dt, 2)}
    return out


def query_split(url, name):
    """Where the read ``name`` (failed, detect) of ``url`` spends its
    time, in this process: ``{'s': its seconds, 'cpu_s': this process's
    CPU seconds, 'queries_s': seconds inside the store's queries (sent,
    run by the server, rows fetched and made dicts), 'queries': how many,
    'slowest': the five slowest [seconds, rows, SQL]}``."""
    import argparse as ap
    import contextlib
    import io
    from ccl_health import reportcli
    from ccl_health.db import answers
    read = {'failed': lambda db: answers.failed(db, 24),
            'detect': lambda db: reportcli._detect(db, ap.Namespace(
                run=None, days=7))}[name]
    spent = []
    query = store.Store.query

    def timing(self, sql, params=()):
        t = time.perf_counter()
        got = query(self, sql, params)
        spent.append((time.perf_counter() - t, len(got), ' '.join(
            sql.split())[:120]))
        return got
    store.Store.query = timing
    try:
        c, t = time.process_time(), time.perf_counter()
        with store.open_store(url, readonly=True) as db, \
                contextlib.redirect_stdout(io.StringIO()):
            read(db)
        total, cpu = time.perf_counter() - t, time.process_time() - c
    finally:
        store.Store.query = query
    return {'s': round(total, 2), 'cpu_s': round(cpu, 2),
            'queries_s': round(sum(x[0] for x in spent), 2),
            'queries': len(spent), 'slowest': [
                [round(x[0], 3), x[1], x[2]] for x in sorted(
                    spent, reverse=True)[:5]]}


def measure(name, path, work, pg, result, reads=READS):
    """Sizes, plans and reads of the SQLite database ``path`` and of its
    PostgreSQL copy."""
    print(f'  {name}: SQLite {os.path.getsize(path) / 2**20:.0f} MiB',
          flush=True)
    upgrade = None
    with store.open_store(path, readonly=True) as db:
        have = db.schema_version()
    if have < store.SCHEMA_VERSION:     # the first writer migrates it
        t = time.perf_counter()
        with store.open_store(path):
            pass
        upgrade = {'from': have, 's': round(time.perf_counter() - t, 1)}
        print(f'  schema {have} -> {store.SCHEMA_VERSION}: '
              f'{upgrade["s"]} s', flush=True)
    entry = {'sqlite': {'sizes': sqlite_sizes(path), 'plans': plans(path),
                        'reads': time_reads(path, work, pg, reads)}}
    if upgrade:
        entry['sqlite']['upgrade'] = upgrade
    if pg:
        url = pg.database(name.replace('-', '_'))
        t = time.perf_counter()
        wall, rss, rc, line = timed([REPORT, '--db', path, 'migrate', '--to',
                                     url])
        print(f'  migrate {wall:.1f} s rc={rc} {line[:80]}', flush=True)
        entry['postgresql'] = {'migrate_s': round(time.perf_counter() - t,
                                                  1),
                               'sizes': pg_sizes(url), 'plans': plans(url),
                               'reads': time_reads(url, work, pg, reads)}
    entry['schema'] = schema.SCHEMA_VERSION
    result[name] = entry


def fresh(path):
    for ext in ('', '-wal', '-shm'):
        if os.path.exists(path + ext):
            os.remove(path + ext)
    return path


def set_nights(args, work, pg, result):
    end = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    for n in (1, 365):
        path = fresh(os.path.join(work, f'nights{n}.db'))
        t = time.perf_counter()
        with store.open_store(path) as db:
            db_gen.write_nights(db, 'perlmutter', n, end)
        gen = time.perf_counter() - t
        measure(f'nights-{n}', path, work, pg, result)
        result[f'nights-{n}']['write_s'] = round(gen, 1)
        result[f'nights-{n}']['cases'] = 15 * n


def _checks(args, work, pg, result, machine, name):
    end = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    nodes = args.nodes or db_gen.MACHINES[machine][1]
    path = os.path.join(work, f'{name}.db')
    if args.reuse and os.path.exists(path):
        # the database of an earlier run (its write as recorded then)
        with open(args.json) as fp:
            gen = json.load(fp)[name]['write_s']
        with store.open_store(path, readonly=True) as db:
            n = db.query("SELECT count(*) AS n FROM cases WHERE source = "
                         "'health'")[0]['n']
        measure(name, path, work, pg, result)
        result[name].update(write_s=gen, checks=n, nodes=nodes,
                            days=args.days, cases=n + 15 * args.days)
        return
    path = fresh(path)
    t = time.perf_counter()
    with store.open_store(path) as db:
        db_gen.write_nights(db, machine, args.days, end)
        n = db_gen.write_checks(
            db, machine, nodes, args.days, 10, end, batch=10000,
            progress=lambda k: k % 100000 == 0 and print(
                f'    {k} checks written, {time.perf_counter() - t:.0f} s',
                flush=True))
    gen = time.perf_counter() - t
    print(f'  wrote {n} checks and {args.days} nights in {gen:.0f} s '
          f'({n / gen:.0f} checks/s)', flush=True)
    measure(name, path, work, pg, result)
    result[name].update(write_s=round(gen, 1), checks=n, nodes=nodes,
                        days=args.days, cases=n + 15 * args.days)


def set_perlmutter(args, work, pg, result):
    _checks(args, work, pg, result, 'perlmutter',
            f'perlmutter-{args.days}d' + (f'-{args.nodes}n' if args.nodes
                                          else ''))


def set_frontier(args, work, pg, result):
    _checks(args, work, pg, result, 'frontier',
            f'frontier-{args.days}d' + (f'-{args.nodes}n' if args.nodes
                                        else ''))


# -- concurrent writers (benchmarks/db_writers.py) -----------------------------

def set_writers(args, work, pg, result):
    db_writers.set_writers(args, work, pg, result, fresh)


# -- the page -------------------------------------------------------------------

NOTES = [
    '- Schema 10 (issue 45): `failed` reads the window\'s failing cases '
    'by the partial index `cases_bad` and its findings by the time index '
    'of `findings` (and those of the other kinds\' runs of its window '
    'before it, by `findings_run`), and judges at read only the keys the '
    'database lists stale (`stale_keys`, kept by triggers on `key_state`):'
    ' no longer every case and every key of its day (94,080 checks, 9,423'
    ' keys at Frontier).'
    '  The page reads each closed day of the health checks as kept '
    '(`kept_days`: the nightly keeps them, a case of a kept day written, '
    'changed or removed drops it, by triggers) and counts only the others'
    ' (today\'s); its probes\' findings as `failed`\'s.  `detect`\'s keys '
    'of 7 days from the time index alone (`cases_time` on time, id and '
    'series id: each key once from `series`).',
    '- Schema 11 (issue 45): `detect` reads how each key of its window is '
    'judged (its last lines) from the line the writer of the key\'s state '
    'keeps beside it (`key_state.standing`, 500 keys a query by the '
    'primary key), never the state itself, and judges at read only the '
    'keys listed stale (tests/test_db_kept.py).',
    '- `failed` and `detect`: the findings each case was judged to have '
    'when it was written (`ccl_health/db/keystate.py`: each key\'s judging '
    'state after its newest case, stepped in the write\'s transaction), '
    'read by index: of the window\'s runs (`failed`) or time (`detect`); '
    'and each key\'s kept standing line (schema 11; before, its state row)'
    ' for how it is judged. '
    ' No key\'s history is read or judged, unless its state is missing or '
    'was made with other levels (an acceptance, a calibration since): '
    'that key is judged from its whole history at read, the same findings '
    '(tests/test_db_state.py).  Their time grows with the keys and '
    'findings of the window, not with the history.  What changed for each '
    'drop is read for all of them together '
    '(`windowfindings.attribution_many`: at frontier-31d, 6,724 drops, '
    '27,000 round trips before, 10 of '
    'PostgreSQL\'s 12 s of `detect`).',
    '- the nightly\'s comparison and news: tonight\'s keys and the night '
    'compared with (the nightly runs by the kind-and-time index), their '
    'findings kept as above.',
    '- the report page: the last 30 days recorded (the sweeps case by case,'
    ' the health checks counted in the database per day and group), the '
    'health checks\' findings of the last 24 hours; most of its time is '
    'its ~90 figures (matplotlib), whatever the history.',
    '- `runs --last N`: read from the newest case back, a page at a time.',
    '- a key\'s cases (schema 9): by its series\' integer id '
    '(`cases_by_series`, the id read from the table of the series in the '
    'same statement); the series of a scope (`since`, `history`, '
    '`calibrate`, `accept`) from that table, a row a node and key.',
    '- the probes\' days on the page: a day\'s probes by the time index, '
    'their measurements by ranges of their ids (PostgreSQL joined them by '
    'hashing every measurement ever recorded: 0.7 s a day at frontier-31d, '
    'growing with the history; now 0.4 s).',
    '- Judging at write: each value once, from its key\'s state (the last '
    '30 healthy values and the drift detector\'s: a few hundred bytes a '
    'key and size); the write reads and writes one state row a key.  A '
    'case older than its key\'s newest (a backfill) judges that key again '
    'from its history, in the writer\'s transaction.',
    '- The page: bounded (figures only where a person must look, drawn '
    'again only when their data changed) and measured at frontier-31d '
    '(what a year\'s page reads) in 22.6 s cold and 11.7 s drawn again '
    '(benchmarks/results/page_scale.md).',
    '- The 64-writer p99: 44.3 and 44.7 ms with the database on 8 cores '
    'of its own behind 4 PgBouncer processes (one port, so_reuseport); '
    'on schema 9, 43.4-46.6 ms in four runs (tests/fixtures/device/'
    'db-writers/x2-4poolers-schema9-*); '
    'not under 50 ms with one PgBouncer (66.7 ms), directly (54-60 ms) or '
    'with the writers sharing the database\'s cores ("Concurrent writers" '
    'above).  No write failed or passed 2 s on PostgreSQL; SQLite gave up '
    'writes at 2 s with 64 writers (the hook keeps them as pending '
    'records).',
]

#: a year of Frontier (the issue's goal): 9,408 nodes x 10 checks a day
FRONTIER_YEAR = 9408 * 10 * 365
#: what DB_SCALE.md measured before (project at 3d7b908), SQLite seconds
BEFORE = {'nights-365': 'failed 16-23, detect 16-24, nightly 31-36, page '
                        '48-52, 88 MB',
          'perlmutter-30d': 'failed killed at 900 s (12 GB), nightly '
                            'MemoryError, page MemoryError, 11.2 GB'}
#: ``failed`` / ``detect`` seconds before each key's judging was kept by
#: its writer (every key's history judged at read; project at 63c1a24)
BEFORE_STATE = {
    ('nights-365', 'sqlite'): (0.4, 0.5),
    ('nights-365', 'postgresql'): (0.5, 0.6),
    ('perlmutter-10d', 'sqlite'): (3.00, 3.95),
    ('perlmutter-10d', 'postgresql'): (3.61, 5.05),
    ('perlmutter-30d', 'sqlite'): (2.95, 6.13),
    ('perlmutter-30d', 'postgresql'): (4.11, 7.55),
    ('frontier-8d', 'sqlite'): (18.15, 17.39),
    ('frontier-8d', 'postgresql'): (29.46, 23.95),
}


def _mib(n):
    return f'{n / 2**20:,.0f} MiB' if n < 2**30 else f'{n / 2**30:.2f} GiB'


def _cell(r):
    if not r:
        return '-'
    s = f'{r["s"]:.1f}'
    return s + (f' ({r["rss_mib"]} MiB)' if r.get('rss_mib') else '') + \
        ('' if r['rc'] in (0, 1) else f' rc={r["rc"]}')


def page_table():
    """The report page before and after its figures were cut to what needs
    a look and cached (``benchmarks/page_scale.py``'s numbers, if
    measured)."""
    path = os.path.join(REPO, 'benchmarks', 'results', 'page_scale.json')
    try:
        with open(path) as fp:
            page = json.load(fp)
    except (OSError, ValueError):
        return []
    out = ['### The report page, before and after (SQLite)', '',
           'Measured by `benchmarks/page_scale.py` (' +
           page.get('_machine', '?') + '; detail and where the time goes: '
           '`benchmarks/results/page_scale.md`): before, the code at ' +
           page.get('_before', '?') + ' (about 90 figures drawn and inlined '
           'every time); after, drawn from nothing (cold) and drawn again '
           'into the same folder (again: the nightly, whose figures and '
           'days that did not change are not drawn or computed again).  '
           'frontier-31d holds every case a year\'s page reads (its 30 '
           'days).', '',
           '| data | cases | page before | after, cold | after, again |',
           '|---|---|---|---|---|']
    first = ('nights-1', 'nights-365', 'perlmutter-30d', 'frontier-8d')
    for k, e in sorted(page.items(), key=lambda kv: (
            first.index(kv[0]) if kv[0] in first else len(first), kv[0])):
        if k.startswith('_'):
            continue
        out.append(f'| {k} | {e["cases"]:,} | ' + ' | '.join(
            f'{e[x]["s"]:.1f} ({e[x]["rss_mib"]} MiB)' if e.get(x) else '-'
            for x in ('before', 'cold', 'again')) + ' |')
    return out + ['']


def _case_rows(entry, checks):
    """Bytes a check of the tables ``cases`` and ``measurements`` and
    their indexes (SQLite: dbstat's; PostgreSQL: total relation sizes)."""
    tables = entry['sizes'].get('tables', {})
    return sum(v for t, v in tables.items() if t in (
        'cases', 'measurements') or t.startswith((
            'cases_', 'sqlite_autoindex_cases', 'measurements_',
            'sqlite_autoindex_measurements'))) / checks


#: issue 45's goals, cold seconds
GOALS = {'failed': 2, 'detect': 2, 'runs': 2, 'history': 2, 'since': 2,
         'nightly': 2, 'page': 10}


def kept_table(data, sets):
    """Issue 45 (schema 10: the closed days kept, the stale keys listed):
    each read cold (the database dropped from memory: the SQLite file
    from the page cache, PostgreSQL restarted and its files dropped) and
    again, against its goal; the page's time split."""
    rows = [(k, be) for k in sets for be in ('sqlite', 'postgresql')
            if be in data[k] and 'page_split' in data[k][be]['reads']]
    if not rows:
        return []
    out = ['', '### Schemas 10 and 11: what the page, `failed` and '
           '`detect` ask every day, kept (issue 45)', '',
           'Cold: the database dropped from memory before the read (the '
           'SQLite file and its WAL from the page cache, `posix_fadvise`; '
           'PostgreSQL restarted and its files dropped); again: the same '
           'read at once after (the page: drawn again into the same '
           'folder, as the nightly draws it, where measured so: schema 11).'
           '  Seconds, cold / again; **bold**: past the goal (' +
           ', '.join(f'{k} {v} s' for k, v in GOALS.items()) + ').  In '
           'brackets, where measured: the command\'s own CPU seconds (user '
           '+ system) cold / again, and the machine\'s load average (1 '
           'minute) as the cold read started.  `history intra --size 1G`, '
           '`since net-plugin --size 1G`.',
           '', '| data | backend | ' + ' | '.join(
               f'`{r}`' for r in READS) + ' | page in-process, cold: '
           'health-check counts / the rest (reads, tables, pandas and '
           'matplotlib imports) / figures drawn |',
           '|---|---|' + '---|' * len(READS) + '---|']
    for k, be in rows:
        r = data[k][be]['reads']

        def cell(x):
            if x not in r:
                return '-'
            c, a = r[x]['s'], r[x].get('again_s')
            text = f'{c:.1f} / {a:.1f}' if a is not None else f'{c:.1f}'
            text = f'**{text}**' if c > GOALS[x] else text
            if r[x].get('cpu_s') is not None:
                text += (f' (CPU {r[x]["cpu_s"]:.1f} / '
                         f'{r[x].get("again_cpu_s") or 0:.1f}; load '
                         f'{r[x]["load"]:.1f})')
            return text
        sp = r['page_split']
        out.append(f'| {k} | {be} | ' + ' | '.join(cell(x) for x in READS)
                   + f' | {sp["counts"]:.1f} / {sp["queries"]:.1f} / '
                   f'{sp["figures"]:.1f} (of {sp["total"]:.1f}) |')
    ups = [(k, data[k]['sqlite']['upgrade']) for k in sets
           if data[k].get('sqlite', {}).get('upgrade')]
    if ups:
        out += ['', 'The first writer of an older database brings it to '
                'this schema (from 9: lists the stale keys, reading every '
                'key\'s state once, and keeps the 31 closed days before the '
                'newest case; from 10: makes the standing line of every '
                'kept state once): ' +
                '; '.join(f'{k}: {u["s"]} s (SQLite, from schema '
                          f'{u["from"]})' for k, u in ups) + '.  The '
                'PostgreSQL copy was made by `scripts/report migrate` from '
                'the upgraded file (the kept rows copied).']
    before = data.get('_issue45_schema10')
    return out + [''] + data.get('_issue45', []) + [''] + (
        ['#### The schema-10 measurement (frontier-12d-schema10), as '
         'written then', ''] + before + [''] if before else [])


def render(data):
    sets = [k for k in ('nights-1', 'nights-365') if k in data] + sorted(
        k for k in data if k.startswith('perlmutter')) + sorted(
        k for k in data if k.startswith('frontier'))
    out = ['# The performance database at machine scale (issue 30)', '',
           'Measured by `benchmarks/db_scale.py` (numbers: '
           '`benchmarks/results/db_scale.json`), with the project\'s own '
           'recorder (`benchmarks/db_gen.py`: the hook\'s `case_of`, the '
           'sweeps through `Store.add_cases`), on SQLite and on PostgreSQL '
           '(the tests\' server on the same machine, loaded with `scripts/'
           'report migrate`).  Machine: ' + data.get('_machine', '?') +
           ', shared with other work: the figures are one run each and vary '
           'by about a third from run to run.  Times are wall seconds of '
           'the command as a person runs it (a process: start-up included),'
           ' with its peak memory.', '',
           '## Reads', '',
           '| data | cases | SQLite / PostgreSQL size | backend | `failed` | '
           '`detect` | `runs --last 5` | nightly comparison + news | report '
           'page |', '|---|---|---|---|---|---|---|---|---|']
    for k in sets:
        e = data[k]
        size = _mib(e['sqlite']['sizes']['bytes']) + (
            ' / ' + _mib(e['postgresql']['sizes']['bytes'])
            if 'postgresql' in e else '')
        for be in ('sqlite', 'postgresql'):
            if be not in e:
                continue
            r = e[be]['reads']
            out.append(f'| {k} (schema {e.get("schema", 8)}) | '
                       f'{e.get("cases", "?"):,} | '
                       f'{size if be == "sqlite" else ""} | {be} | ' +
                       ' | '.join(_cell(r.get(x)) for x in (
                           'failed', 'detect', 'runs', 'nightly', 'page')) +
                       ' |')
    out += kept_table(data, sets)
    out += ['', 'Before (DB_SCALE.md, SQLite): ' + '; '.join(
        f'{k}: {v}' for k, v in BEFORE.items()) + '.', ''] + page_table()
    kept = [(k, be) for k in sets for be in ('sqlite', 'postgresql')
            if (k, be) in BEFORE_STATE and be in data[k]]
    if kept:
        out += ['Before each key\'s judging was kept by its writer (every '
                'key\'s history judged at read), and now:', '',
                '| data | backend | `failed` before | `failed` now | '
                '`detect` before | `detect` now |', '|---|---|---|---|---|---|']
        for k, be in kept:
            f0, d0 = BEFORE_STATE[(k, be)]
            r = data[k][be]['reads']
            out.append(f'| {k} | {be} | {f0:.1f} | {r["failed"]["s"]:.1f} | '
                       f'{d0:.1f} | {r["detect"]["s"]:.1f} |')
        out.append('')
    checks = [k for k in sets if data[k].get('checks')]
    if checks:
        out += ['## Record size', '',
                '| data | schema | checks | SQLite bytes a check | PostgreSQL '
                'bytes a check | a check\'s case and size rows, SQLite / '
                'PostgreSQL | write (SQLite, bulk) |',
                '|---|---|---|---|---|---|---|']
        for k in checks:
            e = data[k]
            n = e['checks']
            night = 15 * e['days'] * 31 * 120
            sq = (e['sqlite']['sizes']['bytes'] - night) / n
            pg = ((e['postgresql']['sizes']['bytes'] - 8 * 2**20 - night) / n
                  if 'postgresql' in e else None)
            rows = ' / '.join(f'{_case_rows(e[be], n):,.0f}' for be in (
                'sqlite', 'postgresql') if be in e)
            out.append(f'| {k} | {e.get("schema", 8)} | {n:,} | '
                       f'{sq:,.0f} | '
                       f'{f"{pg:,.0f}" if pg else "-"} | {rows} | '
                       f'{n / e["write_s"]:,.0f} checks/s |')
        out += ['', 'A check\'s bytes: the file over its checks, less the '
                'nights (~120 bytes a size row) and, for PostgreSQL, its '
                'empty database (8 MiB); indexes included: with the 1 % '
                'of failing checks\' whole detail (compressed, in `blobs`) '
                'and every key\'s state and findings.  A check\'s case '
                'and size rows: the tables `cases` and `measurements` and '
                'their indexes over the cases (a healthy check\'s record; '
                'the failing checks\' rows are of its size, their detail '
                'referenced).  On PostgreSQL the unique index of a case\'s '
                'run and name is half full (a health check\'s run id sorts '
                'just before the nightly\'s: every insert lands left of them '
                'and splits its page in two): 156 of its bytes at '
                'frontier-31d, 86 where only checks are written.  Schema 8: the '
                'series index of ten text columns, the kind index of every '
                'case, the checks written in the order of the nodes (runs '
                'of falling times, the worst fill of every time index); '
                'schema 9: each series once and its id in the case '
                '(ccl_health/db/seriestable.py), the kind index without the '
                'health probes, a healthy check\'s detail compact, the '
                'checks written in the order of their time (as a database '
                'receives them).', '']
    # the windows: failed 1 day, detect 7, the page 30; each key's 60
    # cases before (6 days of a node checked 10 times a day)
    slope = {}
    pm = sorted((data[k]['checks'], k) for k in sets
                if k.startswith('perlmutter') and data[k].get('checks'))
    if len(pm) >= 2:
        (n0, k0), (n1, k1) = pm[0], pm[-1]
        d0, d1 = data[k0]['days'], data[k1]['days']
        out += ['## How each read grows', '',
                f'{k0} and {k1}: {n1 / n0:.1f}x the checks.  `failed` (its '
                f'day\'s findings), `detect` (7 days\' findings and each '
                f'key\'s state), `runs` and the nightly read full windows in '
                f'both: their difference is the noise.  The page (30 days) '
                f'was still filling its window at {d0} days: its growth is '
                f'the window\'s content (per check in the page\'s window), '
                f'used for Frontier below.  With full windows, 10x the '
                f'history reads the same rows (tests/test_db_scale.py).', '',
                '| backend | read | ' + k0 + ' s | ' + k1 + ' s |',
                '|---|---|---|---|']
        for be in ('sqlite', 'postgresql'):
            if be not in data[k0] or be not in data[k1]:
                continue
            for x in READS:
                if x not in data[k0][be]['reads'] or \
                        x not in data[k1][be]['reads']:
                    continue
                a0 = data[k0][be]['reads'][x]['s']
                a1 = data[k1][be]['reads'][x]['s']
                out.append(f'| {be} | {x} | {a0:.2f} | {a1:.2f} |')
            p0, p1 = (data[k]['checks'] * min(30, data[k]['days']) /
                      data[k]['days'] for k in (k0, k1))
            slope[be] = max(0.0, (data[k1][be]['reads']['page']['s'] -
                                  data[k0][be]['reads']['page']['s']) /
                            (p1 - p0))
        out.append('')
    fr = sorted((k for k in sets if k.startswith('frontier') and
                 data[k].get('checks')), key=lambda k: (
                     data[k]['checks'], data[k].get('schema', 8)))
    if fr:
        e = data[fr[-1]]
        n, nodes, days = e['checks'], e['nodes'], e['days']
        out += ['## A year of Frontier (extrapolated)', '',
                f'Measured: {fr[-1]} ({n:,} checks of {nodes:,} nodes, '
                f'{days} days).  Extrapolated, not measured, to '
                f'{FRONTIER_YEAR:,} checks: the sizes by the bytes a check; '
                f'`failed`, `detect`, `runs` and the nightly as measured '
                f'(their windows were full, and no read judges a key\'s '
                f'history: each key\'s judging is kept by its writer); the '
                f'page plus the checks its 30 days hold more (at the '
                f'Perlmutter growth above).', '']
        for be in ('sqlite', 'postgresql'):
            if be not in e:
                continue
            r = e[be]['reads']
            per = e[be]['sizes']['bytes'] / n
            det = r['detect']['s']
            page = r['page']['s'] + slope.get(be, 0.0) * (
                nodes * 10 * 30 - nodes * 10 * min(30, days))
            out.append(f'- {be}: {_mib(per * FRONTIER_YEAR)} ({per:,.0f} '
                       f'bytes a check; before: ~570 GB); failed '
                       f'{r["failed"]["s"]:.0f} s, detect {det:.0f} s, runs '
                       f'{r["runs"]["s"]:.1f} s, nightly '
                       f'{r["nightly"]["s"]:.1f} s, page {page:.0f} s.')
        out.append('')
    if 'writers' in data:
        import glob
        device = sorted(glob.glob(os.path.join(
            REPO, 'tests', 'fixtures', 'device', 'db-writers', '**',
            'db_writers.json'), recursive=True))
        out += db_writers.render(
            data['writers'], data.get('writers_before'),
            data.get('writers_machine'),
            [json.load(open(p)) for p in device])
    up = data.get('upgrade')
    if up:
        out += ['## The upgrade to schema 9', '',
                f'A schema-8 database of {up["cases"]:,} cases (Perlmutter, '
                f'{up["nodes"]:,} nodes checked 10 times a day for '
                f'{up["days"]} days, and its nights) opened for writing: the '
                f'first writer fills the table of the series and every '
                f'case\'s series id in its transaction (`ccl_health/db/'
                f'series.py` `fill`).  ' + '; '.join(
                    f'{be}: {up[be]["s"]} s ({up[be]["series"]:,} series)'
                    for be in ('sqlite', 'postgresql') if be in up) +
                '.  It grows with the cases (each row written once): at a '
                'year of Frontier about ' + '; '.join(
                    f'{be} {up[be]["s"] * 34_339_200 / up["cases"] / 60:.0f}'
                    f' min' for be in ('sqlite', 'postgresql') if be in up) +
                ' (extrapolated by the cases, not measured); PostgreSQL '
                'leaves each old row version to VACUUM.', '']
    out += ['## What bounds each read, and what is left', ''] + NOTES + ['']
    # the plans of the newest schema measured, each of its sets (a month's
    # plans beside 12 days': the same indexes at every fill of the window)
    newest = max((data[k].get('schema', 8) for k in sets), default=None)
    for big in sorted((k for k in sets if data[k].get('schema', 8) ==
                       newest), key=lambda k: data[k].get('cases', 0)):
        out += [f'## Query plans ({big}, schema {newest})', '']
        for be in ('sqlite', 'postgresql'):
            if be not in data[big] or 'plans' not in data[big][be]:
                continue
            out += [f'### {be}', '']
            for what, p in data[big][be]['plans'].items():
                out += [f'{what}: `{p["sql"]}`', '', '```'] + p['plan'] + \
                    ['```', '']
    return '\n'.join(out) + '\n'


def set_upgrade(args, work, pg, result):
    """The first writer of a schema-8 database brings it to schema 9 (one
    update a series: every case row written once): Perlmutter's checks of
    --days days, as schema 8, opened for writing; on SQLite and on its
    PostgreSQL copy (made schema 8 there too)."""
    end = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    nodes = args.nodes or db_gen.MACHINES['perlmutter'][1]
    path = fresh(os.path.join(work, 'upgrade.db'))
    with store.open_store(path) as db:
        db_gen.write_nights(db, 'perlmutter', args.days, end)
        n = db_gen.write_checks(db, 'perlmutter', nodes, args.days, 10, end,
                                batch=10000)
    out = {'cases': n + 15 * args.days, 'days': args.days, 'nodes': nodes}
    urls = [('sqlite', path)]
    if pg:
        url = pg.database('upgrade')
        wall, rss, rc, line = timed([REPORT, '--db', path, 'migrate', '--to',
                                     url])
        urls.append(('postgresql', url))
    for backend, url in urls:
        with store.open_store(url) as db:
            db_gen.as_schema_8(db)
        t = time.perf_counter()
        with store.open_store(url) as db:        # the first writer
            assert db.schema_version() == schema.SCHEMA_VERSION
            series = db.query('SELECT count(*) AS n FROM series')[0]['n']
        out[backend] = {'s': round(time.perf_counter() - t, 2),
                        'series': series}
        print(f'  {backend}: schema 8 -> 9 in {out[backend]["s"]} s '
              f'({series} series, {out["cases"]} cases)', flush=True)
    result['upgrade'] = out


SETS = {'nights': set_nights, 'perlmutter': set_perlmutter,
        'frontier': set_frontier, 'writers': set_writers,
        'upgrade': set_upgrade}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--set', action='append', choices=sorted(SETS),
                    default=[])
    ap.add_argument('--days', type=int, default=30)
    ap.add_argument('--nodes', type=int, help='scale the machine down')
    ap.add_argument('--work', help='folder for the databases (default: a '
                    'temporary one, removed)')
    ap.add_argument('--no-pg', action='store_true')
    ap.add_argument('--reuse', action='store_true', help='measure the '
                    'database a set wrote into --work before (its write '
                    'time from --json), not a new one')
    ap.add_argument('--json', default=os.path.join(
        REPO, 'benchmarks', 'results', 'db_scale.json'))
    ap.add_argument('--out', default=os.path.join(
        REPO, 'benchmarks', 'results', 'db_scale.md'))
    ap.add_argument('--nightly-read', help=argparse.SUPPRESS)
    ap.add_argument('--page-split', nargs=2, help=argparse.SUPPRESS)
    ap.add_argument('--plans-only', metavar='SET', help='only the query '
                    'plans of the database SET (e.g. frontier-12d) in '
                    '--work, into --json')
    ap.add_argument('--render', action='store_true',
                    help='only write --out from --json')
    ap.add_argument('--measure', metavar='NAME', help='measure the '
                    'database NAME.db in --work as it is (one written by '
                    'benchmarks/db_extend.py), into --json')
    ap.add_argument('--reads', default=','.join(READS),
                    help='the reads --measure times (default: all)')
    ap.add_argument('--vm', nargs='+', metavar='DB', help='only the SQLite '
                    'VM instructions and rows of each read of these SQLite '
                    'files, as JSON')
    ap.add_argument('--split', nargs=2, metavar=('DB', 'READ'),
                    help='only where the read (failed, detect) of DB '
                    'spends its time, in this process, as JSON')
    args = ap.parse_args(argv)
    if args.vm:
        print(json.dumps({p: vm_counts(p) for p in args.vm}, indent=1))
        return 0
    if args.split:
        print(json.dumps(query_split(*args.split)))
        return 0
    if args.nightly_read:
        return nightly_read(args.nightly_read)
    if args.page_split:
        return page_split(*args.page_split)
    if args.plans_only:
        # the plans of --set's database in --work, SQLite and its
        # PostgreSQL copy, into --json (the reads measured before)
        with open(args.json) as fp:
            data = json.load(fp)
        name = args.plans_only
        path = os.path.join(args.work, f'{name}.db')
        data[name]['sqlite']['plans'] = plans(path)
        if not args.no_pg:
            pg = Postgres()
            try:
                url = pg.database(name.replace('-', '_'))
                timed([REPORT, '--db', path, 'migrate', '--to', url])
                data[name]['postgresql']['plans'] = plans(url)
            finally:
                pg.stop()
        with open(args.json, 'w') as fp:
            json.dump(data, fp, indent=1, sort_keys=True)
        return 0
    if args.render:
        with open(args.json) as fp:
            data = json.load(fp)
        with open(args.out, 'w') as fp:
            fp.write(render(data))
        return 0
    work = args.work or tempfile.mkdtemp(prefix='ccl-health-dbscale-')
    os.makedirs(work, exist_ok=True)
    pg = None if args.no_pg else Postgres()
    result = {}
    try:
        if args.measure:
            path = os.path.join(work, f'{args.measure}.db')
            print(f'== {args.measure}', flush=True)
            measure(args.measure, path, work, pg, result,
                    tuple(args.reads.split(',')))
        for name in args.set:
            print(f'== {name}', flush=True)
            t = time.perf_counter()
            SETS[name](args, work, pg, result)
            print(f'== {name}: {time.perf_counter() - t:.0f} s', flush=True)
    finally:
        if pg:
            pg.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    old = {}
    if os.path.exists(args.json):
        with open(args.json) as fp:
            old = json.load(fp)
    old.update(result)
    old['_machine'] = f'{os.cpu_count()} cores, {time.strftime("%Y-%m-%d")}'
    with open(args.json, 'w') as fp:
        json.dump(old, fp, indent=1, sort_keys=True)
    if args.measure:
        # a database written elsewhere: no write of its own to render
        # (its numbers go into the page by hand: db_scale.md, "Session 3")
        print(f'numbers: {args.json}')
        return 0
    with open(args.out, 'w') as fp:
        fp.write(render(old))
    print(f'numbers: {args.json}; page: {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
