"""The reads of one history series key, bounded by time (issue 30), and
the time bounds every bounded read of the database uses: the history of
a key (:func:`key_history`: its last :data:`LOOKBACK` cases before a time
and every case from it on, read through the series index: ``cases_series``
of schema 6, ``cases_by_series`` of schema 9; a database older than schema 6 is read by the key's other
columns and its kind and node sorted out here) and its cases before a time
(:func:`key_cases_before`).  Below both the window's reads
(:mod:`ccl_health.db.windowfindings`) and the state kept per key
(:mod:`ccl_health.db.keystate`), which both read a key's records."""

import datetime

from ccl_health.db import inlists

#: cases of a key read before the first judged one: the baseline's
#: ``window`` (30) of healthy values and the 30 before them (judged
#: again, so that their drops stay out of the baseline; the drift
#: detector's history of 15 is among them).  A key's judgement needs no
#: more (:func:`ccl_health.judge.history.detect`: each value from the last
#: 30 healthy values before it); a drift flagged more than ~45 cases
#: before the window is the key's level by then.
LOOKBACK = 60
#: the SQL time bounds are this much wider than the window (UTC offsets)
MARGIN = datetime.timedelta(days=1)

#: one row per case and size, the columns of the ``records`` view that
#: history judging reads, with the case's id and source (the kind of
#: case: :func:`ccl_health.judge.history.kind_of`)
RECORDS = (
    'SELECT c.id AS case_id, c.run_id, c.case_name, c.time, c.system, '
    'c.partition, c.nodelist, c.nodes, c.ranks, c.collective, c.transport, '
    'c.algo, c.verdict AS case_verdict, c.source, m.size, m.busbw, m.ref, '
    'm.tolerance, m.verdict AS size_verdict '
    'FROM cases c LEFT JOIN measurements m ON m.case_id = c.id')

#: the columns of a case a listing or a judgement needs
CASE_LIGHT = ('id', 'run_id', 'case_name', 'time', 'system', 'partition',
              'environ', 'nodelist', 'nodes', 'ranks', 'collective',
              'transport', 'proven', 'algo', 'verdict', 'reason',
              'nccl_version', 'plugin_version', 'libfabric_version',
              'provider', 'cuda_driver', 'driver', 'tests_version',
              'suite_revision', 'source')


def when(text):
    """A recorded time as an aware datetime (ISO 8601, any UTC offset; no
    offset: UTC), so that times written in different zones compare right;
    an unreadable one sorts as the newest (never hidden from a window)."""
    try:
        t = datetime.datetime.fromisoformat(str(text).replace('Z', '+00:00'))
    except ValueError:
        return datetime.datetime.max.replace(tzinfo=datetime.timezone.utc)
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def indexed(store):
    """Does the store have the schema-6 series columns and indexes?"""
    return store.schema_version() >= 6


def sql_time(t, later=False):
    """The text bound of the time ``t`` (an aware datetime) for SQL,
    :data:`MARGIN` earlier (``later``: later)."""
    try:
        t = t + MARGIN if later else t - MARGIN
    except OverflowError:
        return '9999' if later else '0000'
    return t.astimezone(datetime.timezone.utc).isoformat(timespec='seconds')


def select_cols(columns, alias='c'):
    """``c.a, c.b`` of the columns ``columns`` (``alias``: of the table)."""
    return ', '.join(f'{alias}.{c}' for c in columns)


def with_refs(store, columns):
    """``columns`` and the references of the documents among them
    (schema 7: :mod:`ccl_health.db.docs`)."""
    from ccl_health.db import docs
    if not any(c in columns for c, _ in docs.DOCS) or \
            not docs.has_blobs(store):
        return columns
    return tuple(columns) + tuple(r for c, r in docs.DOCS if c in columns)


def with_docs(store, rows):
    from ccl_health.db import docs
    return docs.resolve(store, rows)


def key_where(store, key, alias='c'):
    """SQL (and its parameters) selecting the cases of the series ``key``
    (:func:`ccl_health.judge.history.series_key`), and whether it is exact
    (schema 6) or the kind and node are still to be sorted out.  Schema
    9: by the key's series id (:mod:`ccl_health.db.seriestable`)."""
    from ccl_health.judge.series import KEY
    from ccl_health.db import seriestable as series
    if series.ided(store):
        sql, params = series.where(key, alias)
        return sql, params, True
    names = KEY + ('kind', 'node') if indexed(store) else KEY
    where, params = [], []
    for name, value in zip(names, key[:7] + key[7:9]):
        if value is None:
            where.append(f'{alias}.{name} IS NULL')
        else:
            where.append(f'{alias}.{name} = ?')
            params.append(value)
    return ' AND '.join(where), params, indexed(store)


def of_key(key):
    from ccl_health.judge.series import series_key
    return lambda row: series_key(row) == key


def key_cases_before(store, key, t, lookback, columns=('id',),
                     verdict=None):
    """The newest ``lookback`` cases of ``key`` recorded before the text
    time ``t`` (``verdict``: of that verdict only), newest first."""
    where, params, exact = key_where(store, key)
    if verdict is not None:
        where += ' AND c.verdict = ?'
        params.append(verdict)
    columns = with_refs(store, columns)
    sql = (f'SELECT {select_cols(columns)} FROM cases c WHERE {where} AND '
           f'c.time < ? ORDER BY c.time DESC, c.id DESC')
    if exact:
        return with_docs(store, store.query(sql + ' LIMIT ?',
                                        tuple(params) + (t, lookback)))
    # an older schema: the key's kind and node sorted out here
    extra = [c for c in ('source', 'case_name', 'collective', 'nodelist',
                         'system', 'partition', 'transport', 'nodes',
                         'ranks', 'algo') if c not in columns]
    cur = store.execute(sql.replace('SELECT ', 'SELECT ' + select_cols(extra) +
                                    ', ', 1) if extra else sql,
                        tuple(params) + (t,))
    names = [d[0] for d in cur.description]
    mine, out = of_key(key), []
    for values in cur:
        row = dict(zip(names, values))
        if mine(row):
            out.append({c: row[c] for c in columns})
            if len(out) == lookback:
                break
    cur.close()
    return with_docs(store, out)


def key_history(store, key, since, until=None, lookback=LOOKBACK):
    """The records (one per case and size, as the ``records`` view, with
    ``source`` and ``case_id``) of the series ``key``: its last
    ``lookback`` cases before ``since`` and every case from ``since`` on
    (before ``until``), in time order: one query (schema 6)."""
    where, params, exact = key_where(store, key)
    t0 = sql_time(since)
    later, args = f'{where} AND c.time >= ?', list(params) + [t0]
    if until is not None:
        later += ' AND c.time < ?'
        args.append(sql_time(until, later=True))
    if exact:
        before = RECORDS.replace(
            'FROM cases c ', f'FROM (SELECT c.id FROM cases c WHERE {where} '
            f'AND c.time < ? ORDER BY c.time DESC, c.id DESC LIMIT ?) b '
            f'JOIN cases c ON c.id = b.id ', 1)
        rows = store.query(f'{before} UNION ALL {RECORDS} WHERE {later}',
                           tuple(params) + (t0, lookback) + tuple(args))
        return sorted(rows, key=lambda r: (r['time'], r['case_id']))
    ids = [r['id'] for r in key_cases_before(store, key, t0, lookback)]
    return by_ids(store, ids) + [
        r for r in store.query(f'{RECORDS} WHERE {later}', tuple(args))
        if of_key(key)(r)]


def by_ids(store, ids):
    return inlists.query_in(store, f'{RECORDS} WHERE c.id IN (?...)', ids)
