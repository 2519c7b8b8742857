"""The performance database: every test case of every run, whatever its
outcome, with one row per message size.

SQLite is the embedded default (one file); PostgreSQL is reached through the
same code with a ``postgresql://`` URL (needs ``psycopg``).  The schema is
small and versioned; :func:`open_store` migrates it on open.  Every write is
one transaction, so a run killed midway loses at most the case being written,
and two runs writing at once wait for each other instead of corrupting the
file (SQLite WAL + busy timeout)."""

import contextlib
import dataclasses
import datetime
import json
import os
import pathlib
import sqlite3
from typing import Dict, List, Optional

from ccl_health import CclHealthError, dburl, identity
from ccl_health.judge.verdicts import NAMES, Verdict

# the schema's versions and statements (tests read _MIGRATIONS here)
from ccl_health.db.schema import READABLE_VERSIONS, SCHEMA_VERSION, _MIGRATIONS
from ccl_health.db.seriestable import SERIES_COLUMNS

#: columns of a test case, in order (besides id)
CASE_COLUMNS = (
    'run_id', 'case_name', 'time', 'system', 'partition', 'environ',
    'nodelist', 'nodes', 'ranks', 'collective', 'transport', 'proven', 'algo',
    'verdict', 'reason', 'nccl_version', 'plugin_version',
    'libfabric_version', 'provider', 'cuda_driver', 'driver',
    'tests_version', 'suite_revision', 'versions_json', 'env_json', 'source',
    'detail_json')
SIZE_COLUMNS = (
    'size', 'busbw', 'busbw_oop', 'busbw_ip', 'algbw_oop', 'algbw_ip',
    'time_oop_us', 'time_ip_us', 'ref', 'tolerance', 'verdict')


def series_columns(row):
    """``(kind, node)`` of a case row or :class:`CaseRecord`: the kind
    of case and the node of a health probe
    (:func:`ccl_health.judge.history.kind_of` / ``node_of``), as stored in
    :data:`SERIES_COLUMNS`."""
    from ccl_health.judge.series import kind_of, node_of
    if not isinstance(row, dict):
        row = {'source': row.source, 'case_name': row.case_name,
               'collective': row.collective, 'nodelist': row.nodelist}
    kind = kind_of(row)
    return kind, node_of(row, kind)



#: the columns of a news ledger row (:func:`ccl_health.db.ledger.record`)
TOLD_COLUMNS = ('system', 'partition', 'key', 'size', 'state', 'verdict',
                'band', 'finding', 'run_id')
#: the columns of a told night (:func:`ccl_health.db.ledger.record`)
NIGHT_COLUMNS = ('system', 'partition', 'run_id', 'status', 'measured')

#: the columns of an acceptance that name what it accepts (None: any)
ACCEPT_KEY = ('system', 'partition', 'transport', 'collective', 'nodes',
              'ranks', 'algo', 'kind', 'size')


#: the columns of a recorded baseline (besides id): the key
#: (:data:`ACCEPT_KEY`, its size never None), the median busbw and relative
#: noise of the ``n`` runs named in ``runs``, the newest of them (``run_id``,
#: ``run_time``: the history after it is judged against this baseline), what
#: made it and when
BASELINE_COLUMNS = ACCEPT_KEY + ('median', 'noise', 'n', 'runs', 'run_id',
                                 'run_time', 'source', 'created')


@dataclasses.dataclass
class SizeRecord:
    size: int
    busbw: Optional[float] = None
    busbw_oop: Optional[float] = None
    busbw_ip: Optional[float] = None
    algbw_oop: Optional[float] = None
    algbw_ip: Optional[float] = None
    time_oop_us: Optional[float] = None
    time_ip_us: Optional[float] = None
    ref: Optional[float] = None
    tolerance: Optional[float] = None
    verdict: Optional[str] = None


@dataclasses.dataclass
class CaseRecord:
    """One test case of one run: the library's record type."""
    run_id: str
    case_name: str
    verdict: str
    time: str = ''
    system: str = ''
    partition: str = ''
    environ: str = ''
    nodelist: str = ''
    nodes: Optional[int] = None
    ranks: Optional[int] = None
    collective: str = ''
    transport: str = ''
    proven: str = ''
    algo: str = 'default'
    reason: str = ''
    versions: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: the environment of the run (:func:`ccl_health.db.recorder.run_environment`)
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    suite_revision: str = ''
    source: str = ''
    sizes: List[SizeRecord] = dataclasses.field(default_factory=list)
    #: what the tool measured beside the sizes (the health hook's probes)
    detail: Dict = dataclasses.field(default_factory=dict)

    def row(self):
        v = self.versions
        return (self.run_id, self.case_name, self.time or now(), self.system,
                self.partition, self.environ, self.nodelist, self.nodes,
                self.ranks, self.collective, self.transport, self.proven,
                self.algo or 'default', str(self.verdict), self.reason,
                v.get('nccl_version') or v.get('rccl_version'),
                v.get('plugin_version'), v.get('libfabric_version'),
                v.get('provider'), v.get('cuda_driver'), v.get('driver'),
                v.get('nccl_tests') or v.get('tests_version'),
                self.suite_revision,
                json.dumps(v, sort_keys=True) if v else None,
                json.dumps(self.env, sort_keys=True) if self.env else None,
                self.source,
                # compact: inline in every health check (issue 30)
                json.dumps(self.detail, sort_keys=True,
                           separators=(',', ':')) if self.detail else None)


def check_verdicts(case):
    """A case's verdict and its sizes' verdicts must be :class:`Verdict`
    names (a guard against typos anywhere that would be stored, and read
    back, as something nobody counts as a failure)."""
    named = [('verdict', case.verdict)] + [
        (f'size {s.size} verdict', s.verdict) for s in case.sizes
        if s.verdict is not None]
    for what, name in named:
        if Verdict.parse(name, default=False) is False:
            raise CclHealthError(
                f'{case.run_id} {case.case_name}: unknown {what} {name!r} '
                f'(known: {", ".join(NAMES)})')


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec='seconds')


class Store:
    def __init__(self, conn, kind, where):
        self.conn, self.kind, self.where = conn, kind, where

    # -- plumbing -------------------------------------------------------
    def _sql(self, sql):
        return sql.replace('?', '%s') if self.kind == 'postgresql' else sql

    def execute(self, sql, params=()):
        cur = self.conn.cursor()
        cur.execute(self._sql(sql), params)
        return cur

    def query(self, sql, params=()):
        """Rows as dicts."""
        return self.rows(self.execute(sql, params))

    @staticmethod
    def rows(cur):
        """The rows of an executed cursor as dicts.  In a PostgreSQL
        pipeline (a case's write) several cursors executed before the first
        of them is read come back in one round trip."""
        rows = cur.fetchall()     # first: in a pipeline it waits for them
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in rows]

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _migrate(self):
        """Bring the schema to :data:`SCHEMA_VERSION`.  A database already
        there is only read (no write transaction: every hook opens the
        store, and a second write lock each would double the waits)."""
        if self._current():
            return
        pk = ('BIGSERIAL PRIMARY KEY' if self.kind == 'postgresql'
              else 'INTEGER PRIMARY KEY AUTOINCREMENT')
        blob = 'BYTEA' if self.kind == 'postgresql' else 'BLOB'
        with self.transaction():
            self.execute('CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY '
                         'KEY, value TEXT)')
            rows = self.query("SELECT value FROM meta WHERE key = "
                              "'schema_version'")
            have = int(rows[0]['value']) if rows else 0
            if have > SCHEMA_VERSION:
                raise CclHealthError(
                    f'{self.where}: schema version {have} is newer than this '
                    f'ccl-health ({SCHEMA_VERSION}); upgrade ccl-health')
            for version in range(have + 1, SCHEMA_VERSION + 1):
                for stmt in _MIGRATIONS[version]:
                    if callable(stmt):
                        stmt(self)
                        continue
                    if isinstance(stmt, tuple):
                        if stmt[0] != self.kind:
                            continue
                        stmt = stmt[1]
                    self.execute(stmt.replace('{pk}', pk)
                                 .replace('{blob}', blob))
                self.execute("DELETE FROM meta WHERE key = 'schema_version'")
                self.execute("INSERT INTO meta (key, value) VALUES "
                             "('schema_version', ?)", (str(version),))
                self._version = version

    def _current(self):
        """Is the schema :data:`SCHEMA_VERSION` already?  (Read outside
        any transaction; a newer one is refused.)"""
        if self.kind == 'postgresql':     # one round trip, no transaction
            self.conn.autocommit = True
        try:
            rows = self.query("SELECT value FROM meta WHERE key = "
                              "'schema_version'")
        except driver_errors():
            return False
        finally:
            if self.kind == 'postgresql':
                self.conn.autocommit = False
        have = int(rows[0]['value']) if rows else 0
        self._version = have
        if have > SCHEMA_VERSION:
            raise CclHealthError(
                f'{self.where}: schema version {have} is newer than this '
                f'ccl-health ({SCHEMA_VERSION}); upgrade ccl-health')
        return have == SCHEMA_VERSION

    def columns(self, table):
        """The columns of ``table`` ([] where it has none)."""
        if self.kind == 'sqlite':
            return [r[1] for r in self.conn.execute(
                f'PRAGMA table_info({table})')]
        return [r['column_name'] for r in self.query(
            'SELECT column_name FROM information_schema.columns WHERE '
            'table_name = ? ORDER BY ordinal_position', (table,))]

    def _check(self):
        """A store opened read-only: it must hold a ccl-health schema that
        this version reads (nothing is migrated)."""
        try:
            rows = self.query("SELECT value FROM meta WHERE key = "
                              "'schema_version'")
        except Exception as err:          # sqlite3 / psycopg errors
            hint = ''
            if self.kind == 'sqlite':
                try:
                    tables = {r[0] for r in self.conn.execute(
                        "SELECT name FROM sqlite_master WHERE type = "
                        "'table'")}
                except Exception:
                    tables = set()
                if {'sessions', 'testcases'} <= tables:
                    hint = ("; it is ReFrame's results storage (reframe "
                            "--list-stored-sessions reads it): the "
                            "performance database is ccl-health.db beside it")
            self.close()
            raise CclHealthError(f'{self.where}: not a ccl-health performance '
                                 f'database ({err}){hint}') from None
        have = int(rows[0]['value']) if rows else 0
        if have not in READABLE_VERSIONS:
            self.close()
            raise CclHealthError(
                f'{self.where}: schema version {have}, this ccl-health reads '
                f'{SCHEMA_VERSION}; ' + (
                    'upgrade ccl-health' if have > SCHEMA_VERSION else
                    'open it for writing once (scripts/report ingest) to '
                    'migrate it'))
        return self

    def transaction(self):
        store = self

        class _Tx:
            def __enter__(self):
                if store.kind == 'sqlite':
                    store.conn.execute('BEGIN IMMEDIATE')
                return store

            def __exit__(self, exc_type, exc, tb):
                if exc_type is None:
                    store.conn.commit()
                else:
                    store.conn.rollback()
                    # blob ids of this transaction are gone with it
                    store.__dict__.pop('_blob_ids', None)
        return _Tx()

    # -- writing --------------------------------------------------------
    def add_case(self, case):
        """Insert or update one test case and its sizes, atomically.
        Values already stored and not given again are kept (the check
        writes the per-size detail; the run report adds the verdicts)."""
        check_verdicts(case)
        return self.add_cases([case])[0]

    def add_cases(self, cases):
        """:meth:`add_case` for many cases in one transaction (a fleet
        run's steps, an import): all recorded, or none.  Returns their
        ids."""
        cases = list(cases)
        for case in cases:
            check_verdicts(case)
        from ccl_health.db import keystate as state
        with self._write_transaction():
            ids = [self._write_case(case) for case in cases]
            # each key's history judging after them (issue 30)
            state.update(self, ids)
            return ids

    @contextlib.contextmanager
    def _write_transaction(self):
        """:meth:`transaction` for the cases.  PostgreSQL: its statements
        sent without waiting, a result waited for where it is read
        (psycopg's pipeline mode), the BEGIN with the first ones (psycopg
        would wait for its own) and the COMMIT with the last ones: a new
        case in 2 round trips (its documents and row; its sizes with the
        COMMIT), not 5.  (No COPY in a pipeline.)"""
        if self.kind != 'postgresql':
            with self.transaction():
                yield self
            return
        from psycopg.pq import TransactionStatus
        begin = self.conn.info.transaction_status == TransactionStatus.IDLE
        try:
            if begin:
                self.conn.autocommit = True
            with self.conn.pipeline():
                if begin:
                    self.execute('BEGIN')
                yield self
                self.execute('COMMIT')
        except BaseException:
            self.conn.rollback()
            self.__dict__.pop('_blob_ids', None)
            raise
        finally:
            if begin and not self.conn.closed:
                self.conn.autocommit = False

    # long: one case's rows in one transaction, each table in turn
    def _write_case(self, case):
        from ccl_health.db import docs
        from ccl_health.db import seriestable as series
        from ccl_health.judge.series import series_key
        ided = series.ided(self)
        names = CASE_COLUMNS + SERIES_COLUMNS + tuple(
            r for _, r in docs.DOCS) + (('series_id',) if ided else ())
        cols = ', '.join(names)
        keep = {'run_id', 'case_name', 'time', 'source'}
        numeric = {'nodes', 'ranks'}
        updates = ', '.join(
            f'{c} = COALESCE(excluded.{c}, cases.{c})' if c in numeric else
            f'{c} = COALESCE(NULLIF(excluded.{c}, \'\'), cases.{c})'
            for c in CASE_COLUMNS if c not in keep and
            c not in dict(docs.DOCS))
        for col, ref in docs.DOCS:     # a document given replaces both
            absent = f'excluded.{col} IS NULL AND excluded.{ref} IS NULL'
            updates += ''.join(f', {c} = CASE WHEN {absent} THEN cases.{c} '
                               f'ELSE excluded.{c} END' for c in (col, ref))
        back = 'id, source, case_name, collective, nodelist, kind, node, ' \
            'system, partition, transport, nodes, ranks, algo, ' + \
            ', '.join(r for _, r in docs.DOCS) + (', series_id' if ided else '')
        refs = {}

        def insert(case, then):
            # the documents' references by digest where not known: their
            # blobs are stored just before, in this transaction; so is
            # the case's series, its id read by the insert (schema 9)
            row = dict(zip(CASE_COLUMNS, case.row()))
            refs.update(docs.put_all(self, row))
            values = tuple(row[c] for c in CASE_COLUMNS) + \
                series_columns(case) + tuple(refs[c] for c, _ in docs.DOCS)
            marks = [docs.mark(v) for v in values]
            params = [docs.param(v) for v in values]
            if ided:
                marks.append(series.MARK)
                params.append(series.put(self, series_key(row)))
            return (f'INSERT INTO cases ({cols}) VALUES ({", ".join(marks)})'
                    f' ON CONFLICT (run_id, case_name) DO {then}',
                    tuple(params))
        # never another check under a stored one's identity
        same = f' WHERE {identity.SAME_RECORD_SQL}' if case.time else ''
        if self.kind == 'postgresql' or sqlite3.sqlite_version_info >= (
                3, 35):
            # a new case (every hook's) in one round trip; a case written
            # again (the run report after the check) keeps what it had
            got = self.query(*insert(case, f'NOTHING RETURNING {back}'))
            updated = not got
            got = got or self.query(*insert(
                docs.keep_env(self, case),
                f'UPDATE SET {updates}{same} RETURNING {back}'))
        else:
            updated, got = True, []
            if not same or identity.same_record(self._stored(case), case):
                self.execute(*insert(docs.keep_env(self, case),
                                     f'UPDATE SET {updates}'))
                got = self.query(f'SELECT {back} FROM cases WHERE run_id = '
                                 f'? AND case_name = ?', (case.run_id,
                                                          case.case_name))
        if not got:
            raise identity.taken(case, self._stored(case))
        row = got[0]
        docs.stored(self, refs, row)
        case_id = row['id']
        kind_node = series_columns(row)
        if ided and updated:
            series.moved(self, row)
        elif kind_node != (row['kind'], row['node']):   # an update moved it
            self.execute('UPDATE cases SET kind = ?, node = ? WHERE id = ?',
                         kind_node + (case_id,))
        scols = ', '.join(('case_id',) + SIZE_COLUMNS)
        smarks = ', '.join('?' * (len(SIZE_COLUMNS) + 1))
        supd = ', '.join(f'{c} = COALESCE(excluded.{c}, measurements.{c})'
                         for c in SIZE_COLUMNS if c != 'size')
        if case.sizes:
            self.conn.cursor().executemany(
                self._sql(f'INSERT INTO measurements ({scols}) VALUES '
                          f'({smarks}) ON CONFLICT (case_id, size) DO '
                          f'UPDATE SET {supd}'),
                [(case_id,) + tuple(getattr(s, c) for c in SIZE_COLUMNS)
                 for s in case.sizes])
        return case_id

    def _stored(self, case):
        """The stored row of ``case``'s identity (None: none)."""
        return next(iter(self.query(
            'SELECT source, time, verdict, reason FROM cases WHERE run_id = '
            '? AND case_name = ?', (case.run_id, case.case_name))), None)

    # -- acceptances (scripts/report accept) ------------------------------
    def schema_version(self):
        """The schema version (read once: only :meth:`_migrate` changes
        it, and says so)."""
        if self.__dict__.get('_version') is None:
            rows = self.query("SELECT value FROM meta WHERE key = "
                              "'schema_version'")
            self._version = int(rows[0]['value']) if rows else 0
        return self._version

    def acceptances(self, active=False):
        """The acceptances of new levels, oldest first (``active``: those
        not undone); none in a database older than schema 3 (opened
        read-only, not migrated)."""
        if self.schema_version() < 3:
            return []
        return self.rows(self._acceptances(active))

    def _acceptances(self, active=False):
        return self.execute('SELECT * FROM acceptances' +
                            (' WHERE undone_at IS NULL' if active else '') +
                            ' ORDER BY id')

    def accept(self, rows, who, reason):
        """Record acceptances: ``rows`` are dicts with ``run_id``,
        ``run_time`` and :data:`ACCEPT_KEY` fields; returns their ids.
        The keys they name are judged again in the same transaction
        (:func:`ccl_health.db.keystate.relevel`)."""
        from ccl_health.db import keystate as state
        ids = []
        with self.transaction():
            for row in rows:
                cols = ['run_id', 'run_time', *ACCEPT_KEY, 'who', 'reason',
                        'created']
                vals = [row['run_id'], row['run_time'],
                        *(row.get(k) for k in ACCEPT_KEY), who, reason,
                        now()]
                self.execute(f'INSERT INTO acceptances ({", ".join(cols)}) '
                             f'VALUES ({", ".join("?" * len(cols))})', vals)
                ids.append(self.query(
                    'SELECT max(id) AS id FROM acceptances')[0]['id'])
            state.relevel(self, rows)
        return ids

    def undo_acceptance(self, acc_id, who):
        """Mark the acceptance ``acc_id`` undone (the keys it named judged
        again in the same transaction: :func:`ccl_health.db.keystate.
        relevel`); returns its row."""
        from ccl_health.db import keystate as state
        with self.transaction():
            rows = self.query('SELECT * FROM acceptances WHERE id = ?',
                              (acc_id,))
            if not rows:
                raise CclHealthError(f'no acceptance {acc_id} in '
                                     f'{self.where}')
            if rows[0]['undone_at']:
                raise CclHealthError(
                    f'acceptance {acc_id} was undone already, by '
                    f'{rows[0]["undone_by"]} at {rows[0]["undone_at"]}')
            self.execute('UPDATE acceptances SET undone_by = ?, '
                         'undone_at = ? WHERE id = ?', (who, now(), acc_id))
            state.relevel(self, rows)
        return rows[0]

    # -- baselines (a calibration's level: ccl_health/db/levels.py) ------
    def baselines(self):
        """The recorded baselines, oldest first (:data:`BASELINE_COLUMNS`
        and ``id``; ``runs`` a list of run ids); none in a database older
        than schema 5 (opened read-only, not migrated)."""
        if self.schema_version() < 5:
            return []
        return self._baseline_rows(self._baselines())

    def _baselines(self):
        return self.execute('SELECT * FROM baselines ORDER BY id')

    def _baseline_rows(self, cur):
        rows = self.rows(cur)
        for r in rows:
            r['runs'] = json.loads(r['runs'])
        return rows

    def levels(self):
        """``(acceptances, baselines)``, the two read in one round trip
        (schema 5 on: both tables there)."""
        if self.schema_version() < 5:
            return self.acceptances(), self.baselines()
        a, b = self._acceptances(), self._baselines()
        return self.rows(a), self._baseline_rows(b)

    def add_baselines(self, rows):
        """Record baselines (dicts with :data:`BASELINE_COLUMNS` but
        ``created``), in one transaction with the keys they name judged
        again (:func:`ccl_health.db.keystate.relevel`); old rows are never
        changed."""
        from ccl_health.db import keystate as state
        cols = BASELINE_COLUMNS
        created = now()
        with self.transaction():
            for row in rows:
                vals = [json.dumps(list(row['runs'])) if c == 'runs' else
                        created if c == 'created' else row[c] for c in cols]
                self.execute(f'INSERT INTO baselines ({", ".join(cols)}) '
                             f'VALUES ({", ".join("?" * len(cols))})', vals)
            state.relevel(self, rows)
        return len(rows)

    # -- reading --------------------------------------------------------
    def records(self, where='', params=()):
        return self.query(f'SELECT * FROM records {where}', params)

    def cases(self, where='', params=()):
        """Every column of the cases (``where``), their documents as text
        (:func:`ccl_health.db.docs.resolve`): for small databases and
        tests; the commands read bounded (:mod:`ccl_health.db.windowfindings`)."""
        from ccl_health.db import docs
        return docs.resolve(self, self.query(
            f'SELECT * FROM cases {where} ORDER BY time, id', params))


def driver_errors():
    """The errors a database driver raises (SQLite's, PostgreSQL's where
    psycopg is installed) and ``OSError``."""
    errors = [sqlite3.Error, OSError]
    try:
        import psycopg
        errors.append(psycopg.Error)
    except ImportError:
        pass
    return tuple(errors)


def open_store(url=None, readonly=False, timeout=60):
    """``url``: a SQLite file path (or ``sqlite:///path``), or a
    ``postgresql://`` URL; default ``$CCL_HEALTH_DB``, else
    ``<output>/ccl-health.db`` (:mod:`ccl_health.outputs`).

    ``readonly``: for questions only.  A SQLite file that does not exist is
    an error (never created: an empty new database would answer "nothing
    failed"), and the file is opened read-only, so a database in a
    read-only file or folder can still be read.  Nothing is migrated.

    ``timeout``: how long to wait on a locked database (SQLite's busy
    timeout) or to connect (PostgreSQL), s."""
    if not url:
        from ccl_health.outputs import database
        url = database()
    if dburl.is_postgres(url):
        try:
            import psycopg
        except ImportError:
            raise CclHealthError(f'{dburl.shown(url)}: a PostgreSQL database needs the '
                                 f"'postgres' extra: pip install "
                                 f'"ccl-health[postgres]"') from None
        try:
            # never a server-side prepared statement: it outlives the
            # transaction on the server connection, which a pooler in
            # transaction mode (PgBouncer, docs/database.md) hands to the
            # next client ("prepared statement _pg3_0 already exists")
            conn = psycopg.connect(url, connect_timeout=max(1, int(timeout)),
                                   prepare_threshold=None)
            if readonly:
                conn.read_only = True
        except psycopg.Error as err:
            raise CclHealthError(
                f'cannot connect to {dburl.shown(url)}: '
                f'{dburl.hide_in(err, url)}') from None
        store = Store(conn, 'postgresql', dburl.shown(url))
    else:
        path = dburl.sqlite_path(url)
        if readonly:
            return Store(_connect_readonly(path), 'sqlite', path)._check()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
            conn.execute('PRAGMA journal_mode=WAL')
            conn.execute('PRAGMA foreign_keys=ON')
        except sqlite3.Error as err:
            raise CclHealthError(f'{path}: cannot open the database: '
                                 f'{err}') from None
        store = Store(conn, 'sqlite', path)
    if readonly:
        return store._check()
    store._migrate()
    return store


def _connect_readonly(path):
    """A read-only connection to the SQLite file ``path``: ``mode=ro``;
    where SQLite cannot create the WAL index next to the file (a read-only
    folder), ``immutable=1``."""
    if not os.path.isfile(path):
        raise CclHealthError(f'{path}: no such performance database')
    uri = pathlib.Path(os.path.abspath(path)).as_uri()
    err = None
    for query in ('mode=ro', 'mode=ro&immutable=1'):
        try:
            conn = sqlite3.connect(f'{uri}?{query}', uri=True, timeout=60,
                                   isolation_level=None)
        except sqlite3.Error as e:
            err = e
            continue
        try:
            conn.execute('SELECT count(*) FROM sqlite_master').fetchone()
            return conn
        except sqlite3.Error as e:
            err = e
            conn.close()
            if 'not a database' in str(e):
                break
    raise CclHealthError(f'{path}: cannot read the database: {err}')
