"""The series of a scope, by the indexes (issue 30): which series keys
(:func:`series_keys`) and which values of a series column
(:func:`index_distinct`) the database recorded under the columns fixed
(a system, a transport, a kind), read from the table of the series
(schema 9, :func:`ccl_health.db.seriestable.distinct`) or a loose scan of
the series index, never the cases themselves.  What ``scripts/report``'s
misspelt names are checked against, and what ``since``, ``history``,
``calibrate`` and ``accept`` read their keys from."""

from ccl_health.db.keyhistory import indexed
from ccl_health.judge.series import SERIES_KEY, STORED_ORDER



def _equal(conds, alias=''):
    """``[col = ?, ...]`` (``IS NULL`` for None) and their parameters."""
    where, params = [], []
    for col, value in conds:
        where.append(f'{alias}{col} IS NULL' if value is None else
                     f'{alias}{col} = ?')
        params += [] if value is None else [value]
    return where, params


def index_values(store, column, conds=()):
    """The distinct values of ``column`` (a column of :data:`STORED_ORDER`)
    among the cases whose columns before it equal ``conds`` ((column,
    value) pairs), None first: a loose scan of ``cases_series``, one index
    seek per value, never a read of the cases."""
    where, params = _equal(conds)
    pre = ''.join(w + ' AND ' for w in where)
    out = []
    if store.query(f'SELECT 1 AS x FROM cases WHERE {pre}{column} IS NULL '
                   f'LIMIT 1', tuple(params)):
        out.append(None)
    sql = (f'SELECT {column} AS v FROM cases WHERE {pre}{column} > ? '
           f'ORDER BY {column} LIMIT 1')
    value = store.query(f'SELECT {column} AS v FROM cases WHERE {pre}'
                        f'{column} IS NOT NULL ORDER BY {column} LIMIT 1',
                        tuple(params))
    while value:
        out.append(value[0]['v'])
        value = store.query(sql, tuple(params) + (out[-1],))
    return out


def series_keys(store, **fixed):
    """The series keys (:func:`ccl_health.judge.history.series_key`) of
    the cases whose columns equal ``fixed`` (a column of
    :data:`STORED_ORDER`: a value, or a tuple of the values allowed), by
    :func:`index_values`; a database older than schema 6 (no series
    columns) by its distinct columns, read whole."""
    from ccl_health.judge.series import KEY, series_key
    if not indexed(store):
        cols = KEY + ('source', 'case_name', 'nodelist')
        where, params = _equal((c, v) for c, v in fixed.items()
                               if c in KEY and not isinstance(v, tuple))
        keys = {series_key(r) for r in store.query(
            f'SELECT DISTINCT {", ".join(cols)} FROM cases WHERE 1 = 1' +
            ''.join(' AND ' + w for w in where), tuple(params))}
        return sorted((k for k in keys if all(
            k[SERIES_KEY.index(c)] in (v if isinstance(v, tuple) else (v,))
            for c, v in fixed.items())), key=lambda k: tuple(map(str, k)))
    at = [STORED_ORDER.index(c) for c in SERIES_KEY]
    return [tuple(k[i] for i in at) for k in _walk(store, STORED_ORDER,
                                                   fixed)]


def index_distinct(store, column, **fixed):
    """The distinct values of ``column`` (of :data:`STORED_ORDER`) among
    the cases whose columns equal ``fixed`` (as :func:`series_keys`),
    sorted: by :func:`index_values` where the store has the index, else
    from :func:`series_keys` (read whole)."""
    if not indexed(store):
        # an older database has no series columns (kind, node): its
        # values are those of its series keys, derived from each case
        at = SERIES_KEY.index(column)
        return sorted({k[at] for k in series_keys(store, **fixed)
                       if k[at] is not None})
    upto = STORED_ORDER[:STORED_ORDER.index(column) + 1]
    return sorted({k[-1] for k in _walk(store, upto, fixed)
                   if k[-1] is not None})


def _walk(store, columns, fixed):
    """The distinct tuples of ``columns`` (a start of :data:`STORED_ORDER`)
    of the cases whose columns equal ``fixed``, level by level (schema 9:
    of the table of the series, :func:`ccl_health.db.seriestable.distinct`)."""
    from ccl_health.db import seriestable as series
    if series.ided(store):
        return series.distinct(store, columns, fixed)
    found = [()]
    for col in columns:
        deeper = []
        for got in found:
            conds = list(zip(STORED_ORDER, got))
            if col not in fixed:
                values = index_values(store, col, conds)
            else:
                want = fixed[col]
                values = [v for v in (want if isinstance(want, tuple) else
                                      (want,))
                          if _exists(store, conds + [(col, v)])]
            deeper += [got + (v,) for v in values]
        found = deeper
    return found


def _exists(store, conds):
    where, params = _equal(conds)
    return bool(store.query(f'SELECT 1 AS x FROM cases WHERE '
                            f'{" AND ".join(where)} LIMIT 1', tuple(params)))
