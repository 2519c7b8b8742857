"""Each history series once (schema 9, issue 30): the table ``series``
holds a series' columns and its key text, a case its series' integer id
(``cases.series_id``), and the index ``cases_by_series`` is on
``(series_id, time)``.  Before, the series index held the ten text
columns of the key in every entry: 185 bytes a health check on
PostgreSQL, of its 1,250.

A series is a history key (:func:`ccl_health.judge.series.series_key`:
system, partition, transport, collective, nodes, ranks, algo, kind,
node).  Its key text (:func:`key_text`) is what the writer stores and a
reader looks up: the same key, the same text, whether its numbers came
from a record (``'2'``) or from the database (``2``).

* the writer (:meth:`ccl_health.db.store.Store._write_case`) stores the
  series with the case, in its transaction, and the case's ``series_id``
  is read by the insert itself (:data:`MARK`: no round trip);
* a reader selects a key's cases by ``series_id`` (:func:`where`) and
  finds the series of a scope in this small table (:func:`distinct`: a
  row a node and key, never a scan of the cases);
* ``scripts/report prune`` removes the series left without a case
  (:func:`drop_orphans`);
* each series' newest time (``series.last_time``, schema 12) is kept by
  the database itself (:data:`TRIGGERS`: a case written, moved or
  removed), so the series measured since a time are rows of this small
  table (:func:`measured_since`: ``detect``'s 7 days), never the
  window's cases (660,000 entries of the time index at Frontier)."""

import json

from ccl_health.db import inlists
from ccl_health.judge.series import KIND, NODE, STORED_ORDER

#: the columns a schema-6 case has beside
#: :data:`ccl_health.db.store.CASE_COLUMNS`: its history series' kind and
#: node (:func:`ccl_health.db.store.series_columns`)
SERIES_COLUMNS = (KIND, NODE)

#: the placeholder of a case's ``series_id`` in its insert: the id of the
#: series stored just before it in the same transaction (:func:`put`)
MARK = '(SELECT id FROM series WHERE key = ?)'


def ided(store):
    """Does the store have the table ``series`` and the cases' ids of it
    (schema 9)?"""
    return store.schema_version() >= 9


def _number(value):
    """A node or rank count as the database holds it (an INTEGER column):
    ``'2'`` and ``2.0`` are 2."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip('-').isdigit():
        return int(value)
    return value


def normal(key):
    """The series key ``key`` (:func:`ccl_health.judge.series.series_key`
    order) with its counts as numbers."""
    key = tuple(key)
    return key[:4] + (_number(key[4]), _number(key[5])) + key[6:]


def key_text(key):
    """The ``key`` column of the series ``key``."""
    return json.dumps(list(normal(key)))


def by_column(key):
    """``{column: value}`` of a series key."""
    from ccl_health.judge.series import KEY
    return dict(zip(KEY + ('kind', 'node'), normal(key)))


def put(store, key):
    """Store the series ``key`` unless it is stored (in the caller's
    transaction; sent without waiting on PostgreSQL's pipeline); returns
    its key text, the parameter of :data:`MARK`."""
    text = key_text(key)
    values = by_column(key)
    cols = ', '.join(STORED_ORDER + ('key',))
    marks = ', '.join('?' * (len(STORED_ORDER) + 1))
    params = tuple(values[c] for c in STORED_ORDER) + (text,)
    if store.kind == 'sqlite':
        store.execute(f'INSERT OR IGNORE INTO series ({cols}) VALUES '
                      f'({marks})', params)
    else:       # no id drawn from the sequence for a series stored
        marks = ', '.join('CAST(? AS INTEGER)' if c in ('nodes', 'ranks')
                          else 'CAST(? AS TEXT)' for c in STORED_ORDER + ('key',))
        store.execute(f'INSERT INTO series ({cols}) SELECT {marks} WHERE '
                      f'NOT EXISTS (SELECT 1 FROM series WHERE key = ?) ON '
                      f'CONFLICT (key) DO NOTHING', params + (text,))
    return text


def where(key, alias='c'):
    """SQL and its parameters selecting the cases of the series ``key``
    (by the index ``cases_by_series``)."""
    return f'{alias}.series_id = {MARK}', [key_text(key)]


def ids(store, keys):
    """``{key text: id}`` of the stored series among ``keys``."""
    texts = sorted({key_text(k) for k in keys})
    out = {}
    out.update((r['key'], r['id']) for r in inlists.query_in(
        store, 'SELECT id, key FROM series WHERE key IN (?...)', texts))
    return out


def distinct(store, columns, fixed):
    """The distinct tuples of ``columns`` (of :data:`STORED_ORDER`) of the
    series whose columns equal ``fixed`` (a value, or a tuple of the
    values allowed; None: IS NULL), sorted column by column, None
    first."""
    conds, params = [], []
    for col, want in fixed.items():
        if col not in STORED_ORDER:
            continue
        values = want if isinstance(want, tuple) else (want,)
        known = [v for v in values if v is not None]
        alts = ([f'{col} IN ({", ".join("?" * len(known))})']
                if known else []) + \
            ([f'{col} IS NULL'] if None in values else [])
        conds.append('(' + ' OR '.join(alts or ['1 = 0']) + ')')
        params += [_number(v) if col in ('nodes', 'ranks') else v
                   for v in known]
    rows = store.query(
        f'SELECT DISTINCT {", ".join(columns)} FROM series' +
        (' WHERE ' + ' AND '.join(conds) if conds else ''), tuple(params))
    return sorted((tuple(r[c] for c in columns) for r in rows),
                  key=lambda t: tuple((v is not None, v if v is not None
                                       else 0) for v in t))


def fill(store):
    """Schema 9: the column ``series_id``, the series of the cases
    recorded before it, and each case's id of its series (one update a
    series, by the schema-6 series index that is still there)."""
    from ccl_health.judge.series import KEY
    if 'series_id' not in store.columns('cases'):
        store.execute('ALTER TABLE cases ADD COLUMN series_id INTEGER')
    names = KEY + ('kind', 'node')
    keys = store.query(f'SELECT DISTINCT {", ".join(names)} FROM cases')
    for row in keys:
        key = tuple(row[c] for c in names)
        text = put(store, key)
        conds, params = [], []
        for col, value in zip(names, key):
            conds.append(f'{col} IS NULL' if value is None else f'{col} = ?')
            params += [] if value is None else [value]
        store.execute(f'UPDATE cases SET series_id = {MARK} WHERE '
                      f'{" AND ".join(conds)}', (text,) + tuple(params))


def fill_kinds(store):
    """Schema 6: the kind and node (:func:`ccl_health.db.store.
    series_columns`) of the cases recorded before it."""
    from ccl_health.judge.series import series_key
    rows = store.query('SELECT id, source, case_name, collective, '
                       'nodelist FROM cases')
    cur = store.conn.cursor()
    cur.executemany(store._sql('UPDATE cases SET kind = ?, node = ? WHERE '
                               'id = ?'),
                    [series_key(r)[7:] + (r['id'],) for r in rows])


def moved(store, row):
    """The case ``row`` (its stored columns, ``id`` and ``series_id``),
    written again, into its series: a case written again keeps the
    columns it is not given, and its series is the stored row's, which it
    may have left (then dropped if no case holds it)."""
    from ccl_health.judge.series import series_key
    key = series_key(row)
    store.execute(f'UPDATE cases SET kind = ?, node = ?, series_id = {MARK} '
                  f'WHERE id = ?', key[7:] + (put(store, key), row['id']))
    drop_orphans(store, [row['series_id']])


def drop_orphans(store, ids=None):
    """Remove the series (of the ids ``ids``; None: any) that no case
    holds any more; returns how many."""
    sql = ('DELETE FROM series WHERE NOT EXISTS (SELECT 1 FROM cases c '
           'WHERE c.series_id = series.id)')
    params = ()
    if ids is not None:
        ids = sorted({i for i in ids if i is not None})
        if not ids:
            return 0
        sql += f' AND id IN ({", ".join("?" * len(ids))})'
        params = tuple(ids)
    cur = store.execute(sql, params)
    return max(cur.rowcount or 0, 0)


#: the newest time of each series (``series.last_time``, schema 12) kept
#: by the database whoever writes a case: raised by a newer case, read
#: again from the series index when its newest case moves or goes
TRIGGERS = [
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS series_last_added AFTER
        INSERT ON cases WHEN NEW.series_id IS NOT NULL BEGIN UPDATE series
        SET last_time = NEW.time WHERE id = NEW.series_id AND (last_time IS
        NULL OR last_time < NEW.time); END"""),
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS series_last_changed AFTER
        UPDATE OF time, series_id ON cases BEGIN UPDATE series SET
        last_time = (SELECT max(c.time) FROM cases c WHERE c.series_id =
        series.id) WHERE id IN (OLD.series_id, NEW.series_id); END"""),
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS series_last_removed AFTER
        DELETE ON cases BEGIN UPDATE series SET last_time = (SELECT
        max(c.time) FROM cases c WHERE c.series_id = series.id) WHERE id =
        OLD.series_id AND last_time = OLD.time; END"""),
    ('postgresql', """CREATE OR REPLACE FUNCTION ccl_health_series_last()
        RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          IF TG_OP = 'INSERT' THEN
            UPDATE series SET last_time = NEW.time WHERE id = NEW.series_id
              AND (last_time IS NULL OR last_time < NEW.time);
          ELSIF TG_OP = 'DELETE' THEN
            UPDATE series s SET last_time = (SELECT max(c.time) FROM cases
              c WHERE c.series_id = s.id) WHERE s.id = OLD.series_id AND
              s.last_time = OLD.time;
          ELSIF OLD.time IS DISTINCT FROM NEW.time OR OLD.series_id IS
              DISTINCT FROM NEW.series_id THEN
            UPDATE series s SET last_time = (SELECT max(c.time) FROM cases
              c WHERE c.series_id = s.id) WHERE s.id IN (OLD.series_id,
              NEW.series_id);
          END IF;
          RETURN NULL; END $$"""),
    ('postgresql', """CREATE TRIGGER series_last_changed AFTER INSERT OR
        UPDATE OR DELETE ON cases FOR EACH ROW EXECUTE FUNCTION
        ccl_health_series_last()"""),
]


def keeps_last(store):
    """Does the store keep each series' newest time (schema 12)?"""
    return store.schema_version() >= 12


def fill_last(store):
    """Schema 12 (and a copy of an older database): each series' newest
    time, read from the series index (one index search a series)."""
    if 'last_time' not in store.columns('series'):
        store.execute('ALTER TABLE series ADD COLUMN last_time TEXT')
    store.execute('UPDATE series SET last_time = (SELECT max(c.time) FROM '
                  'cases c WHERE c.series_id = series.id)')


def measured_since(store, columns, bound):
    """The rows (``columns``) of the series with a case recorded at or
    after the text time ``bound`` (schema 12: their kept newest time)."""
    return store.query(f'SELECT {", ".join(columns)} FROM series WHERE '
                       f'last_time >= ?', (bound,))
