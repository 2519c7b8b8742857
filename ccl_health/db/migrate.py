"""``scripts/report migrate --to postgresql://...`` (issue 30): a SQLite
performance database moved into PostgreSQL, every table, row for row
(ids kept, so references stay true), with PostgreSQL's ``COPY``.

The target gets the current schema first (:func:`ccl_health.db.store.
open_store`) and must hold no case (a migration never merges two
databases: it would double every run).  A source of an older schema is
read as it is: what it lacks (a case's kind and node, schema 6) is filled
on the way (:func:`ccl_health.db.store.series_columns`), and so are its
series and each case's series id (schema 9, :mod:`ccl_health.db.
series`: numbered here, written after the cases).  Each key's
judging state and its cases' findings (schema 8, :mod:`ccl_health.db.
state`) move with the cases; a source without them leaves its keys to be
judged from their history until their next case.  All or nothing:
one transaction on the target.  The source is only read."""

from ccl_health import CclHealthError, dburl
from ccl_health.judge.series import STORED_ORDER

#: the tables moved, parents first
TABLES = ('cases', 'series', 'measurements', 'blobs', 'acceptances',
          'news_told', 'news_nights', 'baselines', 'health_daily',
          'key_state', 'findings', 'kept_days', 'stale_keys')
#: the tables whose triggers keep what is kept (schema 10): off while the
#: rows are copied as they are (the kept rows with them)
KEEPING = ('cases', 'measurements', 'key_state')
#: rows read from the source at a time
BATCH = 5000


def migrate(src, url, progress=None):
    """Copy the store ``src`` into the PostgreSQL database ``url``;
    returns ``{table: rows}``."""
    from ccl_health.db import seriestable as series_of
    from ccl_health.db.store import open_store, series_columns
    from ccl_health.judge.series import series_key
    if not dburl.is_postgres(url):
        raise CclHealthError(f'migrate --to {dburl.shown(url)}: a postgresql:// URL '
                             f'(the SQLite file is the source, --db)')
    counts = {}
    with open_store(url) as dst:
        if dst.query('SELECT 1 AS x FROM cases LIMIT 1'):
            raise CclHealthError(
                f'migrate: {dburl.shown(url)} already holds cases: a migration never '
                f'merges two databases (give an empty database)')
        with dst.transaction():
            for table in KEEPING:
                dst.execute(f'ALTER TABLE {table} DISABLE TRIGGER USER')
            for table in TABLES:
                have = src.columns(table)
                if not have:
                    continue
                want = dst.columns(table)
                cols = [c for c in want if c in have]
                fill = table == 'cases' and 'kind' not in have
                if fill:
                    cols += ['kind', 'node']
                number = table == 'cases' and 'series_id' not in have
                if number:
                    cols += ['series_id']
                    made = {}       # key text: (id, series key)
                n = 0
                cur = src.conn.cursor()
                cur.execute(f'SELECT {", ".join(c for c in cols if c in have)}'
                            f' FROM {table} ORDER BY 1')
                names = [d[0] for d in cur.description]
                with dst.conn.cursor().copy(
                        f'COPY {table} ({", ".join(cols)}) FROM STDIN') \
                        as copy:
                    while True:
                        rows = cur.fetchmany(BATCH)
                        if not rows:
                            break
                        for values in rows:
                            if fill:
                                values = tuple(values) + series_columns(
                                    dict(zip(names, values)))
                            if number:
                                row = dict(zip(cols, values))
                                key = series_key(row)[:7] + (row['kind'],
                                                             row['node'])
                                text = series_of.key_text(key)
                                made.setdefault(text, (len(made) + 1, key))
                                values = tuple(values) + (made[text][0],)
                            copy.write_row(values)
                        n += len(rows)
                        if progress:
                            progress(table, n)
                counts[table] = n
                if number:
                    counts['series'] = _write_series(dst, made)
                if 'id' in cols:
                    _sequence(dst, table)
            if 'last_time' not in src.columns('series'):  # older than 12
                series_of.fill_last(dst)
            if 'stale_keys' not in counts:      # an older source
                from ccl_health.db import health_days, keystate as state
                state.fill_stale(dst)
                health_days.keep(dst, each_day=False)
            for table in KEEPING:
                dst.execute(f'ALTER TABLE {table} ENABLE TRIGGER USER')
        dst.execute('ANALYZE')
        dst.conn.commit()
    return counts


def _sequence(dst, table):
    """``table``'s id sequence after its highest id."""
    dst.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"GREATEST((SELECT max(id) FROM {table}), 1))")


def _write_series(dst, made):
    """The series numbered while the cases of a source older than schema
    9 were copied (``{key text: (id, series key)}``); returns how many."""
    from ccl_health.db import seriestable as series
    with dst.conn.cursor().copy(
            f'COPY series (id, {", ".join(STORED_ORDER)}, key) FROM '
            f'STDIN') as copy:
        for text, (sid, key) in made.items():
            by = series.by_column(key)
            copy.write_row((sid,) + tuple(by[c] for c in STORED_ORDER) +
                           (text,))
    _sequence(dst, 'series')
    return len(made)
