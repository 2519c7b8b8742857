"""The schema of the performance database: each version's statements
(:func:`ccl_health.db.store.Store._migrate` runs those a database
lacks, in order).  A statement is SQL (``{pk}``, ``{blob}``: the
dialect's), ``(dialect, SQL)`` for one dialect only, or a function of the
store."""

from ccl_health.db import health_days
from ccl_health.db import seriestable as series
from ccl_health.db.verdictsql import GOOD_SQL
from ccl_health.judge.series import KEY, PROBE_KIND, STORED_ORDER

SCHEMA_VERSION = 12
#: older schema versions this version still reads (opened read-only,
#: nothing migrated): what they lack reads as None
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)


#: the history key's columns as SQL lists: of a configuration (schema 1),
#: of a series in the order the database keeps it (schema 6, 9)
_KEY_SQL = ', '.join(KEY)
_SERIES_SQL = ', '.join(STORED_ORDER)
#: the SQL type of each column of a series (its node and rank counts are
#: whole numbers)
_SERIES_TYPES = ', '.join(
    f'{c} {"INTEGER" if c in ("nodes", "ranks") else "TEXT"}'
    for c in STORED_ORDER)

#: one row per case and size (schema 1)
_RECORDS_VIEW = """CREATE VIEW records AS
           SELECT c.run_id, c.case_name, c.time, c.system, c.partition,
                  c.nodelist, c.nodes, c.ranks, c.collective, c.transport,
                  c.proven, c.algo, c.verdict AS case_verdict, c.reason,
                  c.nccl_version, c.plugin_version, c.libfabric_version,
                  c.provider, c.cuda_driver, c.driver, c.tests_version,
                  c.suite_revision, m.size, m.busbw, m.busbw_oop, m.busbw_ip,
                  m.algbw_oop, m.algbw_ip, m.time_oop_us, m.time_ip_us,
                  m.ref, m.tolerance, m.verdict AS size_verdict
           FROM cases c LEFT JOIN measurements m ON m.case_id = c.id"""

#: the list of stale keys kept by the database (schema 10): a key's state
#: written (its levels those of now: every writer judges with them) takes
#: it off the list, a state removed (a key emptied, a test's) puts it on
_STALE_TRIGGERS = [
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS key_state_added AFTER INSERT
        ON key_state BEGIN DELETE FROM stale_keys WHERE key = NEW.key;
        END"""),
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS key_state_changed AFTER
        UPDATE ON key_state BEGIN DELETE FROM stale_keys WHERE key =
        NEW.key; INSERT OR IGNORE INTO stale_keys (key) SELECT OLD.key
        WHERE OLD.key <> NEW.key; END"""),
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS key_state_removed AFTER
        DELETE ON key_state BEGIN INSERT OR IGNORE INTO stale_keys (key)
        VALUES (OLD.key); END"""),
    ('postgresql', """CREATE OR REPLACE FUNCTION ccl_health_state_changed()
        RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          IF TG_OP <> 'INSERT' AND (TG_OP = 'DELETE' OR OLD.key <> NEW.key)
          THEN
            INSERT INTO stale_keys (key) VALUES (OLD.key)
              ON CONFLICT DO NOTHING;
          END IF;
          IF TG_OP <> 'DELETE' THEN
            DELETE FROM stale_keys WHERE key = NEW.key;
          END IF;
          RETURN NULL; END $$"""),
    ('postgresql', """CREATE TRIGGER key_state_changed AFTER INSERT OR
        UPDATE OR DELETE ON key_state FOR EACH ROW EXECUTE FUNCTION
        ccl_health_state_changed()"""),
]


def _fill_stale(store):
    """Schema 10: the keys whose kept state is not theirs, listed
    (:func:`ccl_health.db.keystate.fill_stale`; that module reads this
    one)."""
    from ccl_health.db import keystate as state
    state.fill_stale(store)


def _keep_standing(store):
    """Schema 11: each kept state's standing line kept beside it
    (:func:`ccl_health.db.keystate.fill_standing`)."""
    from ccl_health.db import keystate as state
    state.fill_standing(store)


def _keep_changed(store):
    """Schema 12: each kept drop's and drift's ``changed:`` lines kept
    with it (:func:`ccl_health.db.keystate.fill_changed`)."""
    from ccl_health.db import keystate as state
    if 'changed' not in store.columns('findings'):
        store.execute('ALTER TABLE findings ADD COLUMN changed TEXT')
    state.fill_changed(store)


def _keep_days(store):
    """Schema 10: the closed days of the page's window kept, in the
    migration's transaction (:func:`ccl_health.db.health_days.keep`)."""
    health_days.keep(store, each_day=False)


_MIGRATIONS = {
    1: [
        """CREATE TABLE IF NOT EXISTS cases (
            id {pk},
            run_id TEXT NOT NULL, case_name TEXT NOT NULL, time TEXT NOT NULL,
            system TEXT, partition TEXT, environ TEXT, nodelist TEXT,
            nodes INTEGER, ranks INTEGER, collective TEXT, transport TEXT,
            proven TEXT, algo TEXT, verdict TEXT NOT NULL, reason TEXT,
            nccl_version TEXT, plugin_version TEXT, libfabric_version TEXT,
            provider TEXT, cuda_driver TEXT, driver TEXT, tests_version TEXT,
            suite_revision TEXT, versions_json TEXT, env_json TEXT,
            source TEXT,
            UNIQUE (run_id, case_name))""",
        """CREATE TABLE IF NOT EXISTS measurements (
            case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
            size BIGINT NOT NULL, busbw REAL, busbw_oop REAL, busbw_ip REAL,
            algbw_oop REAL, algbw_ip REAL, time_oop_us REAL,
            time_ip_us REAL, ref REAL, tolerance REAL, verdict TEXT,
            UNIQUE (case_id, size))""",
        f'CREATE INDEX IF NOT EXISTS cases_key ON cases ({_KEY_SQL}, time)',
        _RECORDS_VIEW,
    ],
    # the health hook's probe detail moves out of the environment into its
    # own column: env_json holds only environment variables (issue 13)
    2: [
        'ALTER TABLE cases ADD COLUMN detail_json TEXT',
        """UPDATE cases SET detail_json = env_json, env_json = NULL
           WHERE source = 'health' AND
                 substr(env_json, 1, 10) = '{"probes":'""",
    ],
    # an operator's acceptance of a new level (scripts/report accept): the
    # history baseline of the matching keys restarts at run_id; who, why
    # and when kept, undone (never deleted) by scripts/report accept --undo
    3: [
        """CREATE TABLE IF NOT EXISTS acceptances (
            id {pk},
            run_id TEXT NOT NULL, run_time TEXT NOT NULL,
            system TEXT, partition TEXT, transport TEXT, collective TEXT,
            nodes INTEGER, ranks INTEGER, algo TEXT, kind TEXT, size BIGINT,
            who TEXT NOT NULL, reason TEXT NOT NULL, created TEXT NOT NULL,
            undone_by TEXT, undone_at TEXT)""",
    ],
    # the news ledger (ccl_health.news): what each nightly mail told, per
    # key and size (failing with its verdict and band, a finding, clear),
    # appended, never rewritten; and the nightly runs whose news was told
    4: [
        """CREATE TABLE IF NOT EXISTS news_told (
            id {pk},
            system TEXT NOT NULL, partition TEXT NOT NULL, key TEXT NOT NULL,
            size BIGINT, state TEXT NOT NULL, verdict TEXT, band INTEGER,
            finding TEXT, run_id TEXT NOT NULL, told_in TEXT NOT NULL,
            told_at TEXT NOT NULL)""",
        'CREATE INDEX IF NOT EXISTS news_told_key ON news_told (system, '
        'partition, key, size, id)',
        """CREATE TABLE IF NOT EXISTS news_nights (
            id {pk},
            system TEXT NOT NULL, partition TEXT NOT NULL,
            run_id TEXT NOT NULL, status TEXT NOT NULL, measured INTEGER,
            told_in TEXT NOT NULL, told_at TEXT NOT NULL)""",
    ],
    # what a calibration measured (db/levels.py): per key and size
    # the median and relative noise of the runs it used, the first baseline
    # of the history judge (ccl_health.judge.history.Level); rows are only
    # ever added, a later calibration is a new row
    5: [
        """CREATE TABLE IF NOT EXISTS baselines (
            id {pk},
            system TEXT, partition TEXT, transport TEXT, collective TEXT,
            nodes INTEGER, ranks INTEGER, algo TEXT, kind TEXT,
            size BIGINT NOT NULL, median DOUBLE PRECISION NOT NULL,
            noise DOUBLE PRECISION NOT NULL, n INTEGER NOT NULL,
            runs TEXT NOT NULL, run_id TEXT NOT NULL, run_time TEXT NOT NULL,
            source TEXT NOT NULL, created TEXT NOT NULL)""",
    ],
    # reads bounded by key and time window (issue 30): each case's history
    # series (its kind and, for a health probe, its node:
    # ccl_health.judge.history.series_key) in columns of their own, filled
    # for the cases already recorded; indexes on the time, on the series
    # and time, on the kind and time, on the failures' time; the
    # never-used cases_key goes (a write pays for every index)
    6: [
        'ALTER TABLE cases ADD COLUMN kind TEXT',
        'ALTER TABLE cases ADD COLUMN node TEXT',
        series.fill_kinds,
        'DROP INDEX IF EXISTS cases_key',
        'CREATE INDEX IF NOT EXISTS cases_time ON cases (time)',
        f'CREATE INDEX IF NOT EXISTS cases_series ON cases ({_SERIES_SQL}, '
        'time)',
        'CREATE INDEX IF NOT EXISTS cases_kind ON cases (kind, time)',
        'CREATE INDEX IF NOT EXISTS cases_bad ON cases (time) WHERE '
        f'verdict NOT IN {GOOD_SQL}',
    ],
    # a record's size (issue 30): its long JSON documents (environment,
    # versions, detail) stored once, compressed, and referenced
    # (ccl_health.db.docs); the daily aggregates of the healthy health
    # checks rolled up by scripts/report prune (ccl_health.db.retention)
    7: [
        """CREATE TABLE IF NOT EXISTS blobs (
            id {pk}, digest TEXT NOT NULL UNIQUE, body {blob} NOT NULL)""",
        'ALTER TABLE cases ADD COLUMN env_ref BIGINT',
        'ALTER TABLE cases ADD COLUMN versions_ref BIGINT',
        'ALTER TABLE cases ADD COLUMN detail_ref BIGINT',
        """CREATE TABLE IF NOT EXISTS health_daily (
            id {pk}, day TEXT NOT NULL,
            system TEXT, partition TEXT, transport TEXT, collective TEXT,
            nodes INTEGER, ranks INTEGER, algo TEXT, node TEXT,
            size BIGINT, verdict TEXT NOT NULL, checks INTEGER NOT NULL,
            busbw_min DOUBLE PRECISION, busbw_median DOUBLE PRECISION,
            busbw_max DOUBLE PRECISION, first_time TEXT NOT NULL,
            last_time TEXT NOT NULL, created TEXT NOT NULL)""",
        'CREATE INDEX IF NOT EXISTS health_daily_day ON health_daily '
        '(day, system, partition)',
        # PostgreSQL's REAL is 4 bytes (SQLite's 8): the numbers as
        # measured, in 8 (the view that reads them is made again)
        ('postgresql', 'DROP VIEW IF EXISTS records'),
        ('postgresql', 'ALTER TABLE measurements ' + ', '.join(
            f'ALTER COLUMN {c} TYPE DOUBLE PRECISION' for c in (
                'busbw', 'busbw_oop', 'busbw_ip', 'algbw_oop', 'algbw_ip',
                'time_oop_us', 'time_ip_us', 'ref', 'tolerance'))),
        ('postgresql', _RECORDS_VIEW),
    ],
    # history judging kept by the writer (issue 30,
    # ccl_health.db.keystate): each series key's judging state after its
    # newest case, and the findings each case was judged to have, written
    # with the case; a database migrated to it has neither yet: its keys
    # are judged from their history at read, each until its next case
    8: [
        """CREATE TABLE IF NOT EXISTS key_state (
            key TEXT PRIMARY KEY, last_time TEXT NOT NULL,
            last_run TEXT NOT NULL, levels TEXT NOT NULL,
            state TEXT NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS findings (
            id {pk},
            case_id BIGINT NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
            key TEXT NOT NULL, size BIGINT NOT NULL, kind TEXT NOT NULL,
            run_id TEXT NOT NULL, time TEXT NOT NULL, body TEXT NOT NULL)""",
        'CREATE INDEX IF NOT EXISTS findings_time ON findings (time)',
        'CREATE INDEX IF NOT EXISTS findings_run ON findings (run_id)',
        'CREATE INDEX IF NOT EXISTS findings_key ON findings (key, kind)',
        'CREATE INDEX IF NOT EXISTS findings_case ON findings (case_id)',
    ],
    # a healthy check in under 1 KB on PostgreSQL too (issue 30): each
    # history series once, in the table ``series`` (its columns and its
    # key text, ccl_health.db.seriestable), a case's series by its integer id;
    # the series index on (series_id, time) instead of ten text columns
    # (its entries were 185 bytes a check on PostgreSQL, now ~50), and the
    # kind index without the health probes (they are nearly every case:
    # their window is the time index's), a literal the queries repeat
    9: [
        'CREATE TABLE IF NOT EXISTS series (id {pk}, ' + _SERIES_TYPES +
        ', key TEXT NOT NULL UNIQUE)',
        series.fill,
        'DROP INDEX IF EXISTS cases_series',
        'CREATE INDEX IF NOT EXISTS cases_by_series ON cases (series_id, '
        'time)',
        'DROP INDEX IF EXISTS cases_kind',
        'CREATE INDEX IF NOT EXISTS cases_kind ON cases (kind, time) WHERE '
        f"kind <> '{PROBE_KIND}'",
    ],
    # what the page and ``failed`` ask every day, kept instead of
    # recomputed (issue 45): each closed day's health checks (their
    # distribution over the nodes and their counts, ccl_health.db.
    # health_days ``keep``), a day's row dropped by the database itself
    # when a case of that day is written, changed or removed; and the keys
    # whose kept judging state is not theirs (made before schema 8, or
    # with levels an older ccl-health recorded: ccl_health.db.keystate), a
    # list the writer of a key's state empties, so a read judges those
    # keys only, never looks at every key of its window
    10: [
        """CREATE TABLE IF NOT EXISTS kept_days (
            day TEXT PRIMARY KEY, version INTEGER NOT NULL,
            rows TEXT NOT NULL, counts TEXT NOT NULL, made TEXT NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS stale_keys (key TEXT PRIMARY KEY)""",
        # the time index with each case's id and series id: the series
        # of a window (detect's 7 days, 660,000 checks at Frontier) read
        # from the index alone, never from the cases' rows; still in the
        # order of (time, id), the order every window and page reads
        'DROP INDEX IF EXISTS cases_time',
        'CREATE INDEX IF NOT EXISTS cases_time ON cases (time, id, '
        'series_id)',
    ] + health_days.TRIGGERS + _STALE_TRIGGERS + [
        _fill_stale,
        _keep_days,
    ],
    # how each key is judged now (``scripts/report detect``'s last lines,
    # ccl_health.judge.standing), kept with its state by the writer that
    # keeps the state: ``detect`` reads the line of each key of its
    # window, never the key's state (issue 45)
    11: [
        'ALTER TABLE key_state ADD COLUMN standing TEXT',
        _keep_standing,
    ],
    # what changed before each drop and drift (its ``changed:`` lines:
    # the flagged case, the first of a drift's and the key's last passing
    # case before them compared), kept with the finding by the writer that
    # finds it: ``detect`` and ``failed`` read no case for them, where
    # they read three (random rows of the whole history) a drop (issue 45)
    # and each series' newest time, kept by the database (triggers on
    # the cases): the keys of ``detect``'s window read from the table of
    # the series, not from a week of the time index (issue 45)
    12: [
        _keep_changed,
        series.fill_last,
    ] + series.TRIGGERS,
}

