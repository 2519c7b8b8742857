"""The health checks of the whole machine, per day: the distribution of
the health probe's busbw over the nodes checked that day.  One query (the
same on SQLite and PostgreSQL) reads a window's probes through the time
index, and the nodes' medians and each day's distribution are computed as
it is read: 0.2 s for Frontier's 94,080 probes of a day, where SQLite's
window functions took 0.7 s (the page asks one day at a time,
:func:`ccl_health.report.health.days_rows`).

Each node's own probes are its own history series
(:func:`ccl_health.judge.history.series_key`); this is the fleet-wide view
beside them, never a series judged against history.  A node counts once a
day: its value is the median of its probes that day, so a node checked a
hundred times weighs as much as one checked once.  The day is the date of
the recorded time (the hook records UTC)."""

import statistics

from ccl_health.judge.series import HEALTH_NAMES, HEALTH_SOURCE
from ccl_health.judge.verdicts import GOOD

#: what one distribution is of (besides the day)
GROUP = ('system', 'partition', 'transport', 'collective', 'ranks', 'size')
#: what the checks of a day are counted by (a probe that measured nothing
#: recorded no ranks and no size)
COUNTED = GROUP[:4]


def _is_probe(alias='c'):
    """SQL: the case ``alias`` is a health probe (the rule of
    :func:`ccl_health.judge.history.kind_of`) and its node is recorded;
    with its parameters."""
    names = ' OR '.join(f'{alias}.case_name LIKE ?' for _ in HEALTH_NAMES)
    return (f"({alias}.source = ? OR {names}) AND {alias}.nodelist IS NOT "
            f"NULL AND {alias}.nodelist <> ''",
            (HEALTH_SOURCE,) + tuple(f'{n}%' for n in HEALTH_NAMES))


def _window(since=None, until=None):
    """SQL and its parameters: the cases of the days ``since`` to before
    ``until`` (``YYYY-MM-DD``), the recorded time compared as text (the
    same as comparing its day, its first ten characters, but the time
    index serves it)."""
    sql, params = '', ()
    if since:
        sql += ' AND c.time >= ?'
        params += (since,)
    if until:
        sql += ' AND c.time < ?'
        params += (until,)
    return sql, params


#: two ids of a window this far apart are read as two ranges (the
#: measurements between them, of other cases, are not read)
ID_GAP = 5000


def _sizes(store, ids):
    """``{case id: [(size, busbw)]}`` of the cases ``ids``: their
    measurements read by ranges of ids (the unique index on case id and
    size), each range a run of ids no more than :data:`ID_GAP` apart (a
    window's cases are written together; one written later, a backfill,
    is a range of its own)."""
    want = set(ids)
    ids = sorted(want)
    out = {}
    start = 0
    for i in range(1, len(ids) + 1):
        if i < len(ids) and ids[i] - ids[i - 1] <= ID_GAP:
            continue
        for case_id, size, busbw in store.execute(
                'SELECT case_id, size, busbw FROM measurements WHERE '
                'case_id >= ? AND case_id <= ?', (ids[start], ids[i - 1])):
            if case_id in want:
                out.setdefault(case_id, []).append((size, busbw))
        start = i
    return out


def health_days(store, since=None, until=None):
    """One row per (:data:`GROUP`, day) of the health probes that measured
    a busbw: ``nodes`` (checked that day), ``median``, ``p10`` (nearest
    rank: the ceil(n/10)-th slowest node) and ``min`` of the nodes' busbw
    (GB/s), then ``checks`` and ``not_good`` (every probe of the group's
    system, partition, transport and collective that day, and those whose
    verdict is not good: a probe that measured nothing, and so recorded
    no ranks or size, counts there).  ``since``: the first day, ``until``:
    the day after the last (``YYYY-MM-DD``).  Oldest day first."""
    probe, params = _is_probe()
    window, more = _window(since, until)
    # every probe of the window counted, and its sizes' busbw gathered
    # (its measurements read by ranges of its ids: PostgreSQL joined them
    # by hashing every measurement ever recorded, 1 s a day at a month of
    # Frontier, more with every month)
    probes = store.execute(
        f"""SELECT c.system, c.partition, c.transport, c.collective,
                   substr(c.time, 1, 10) AS day, c.id, c.verdict, c.ranks,
                   c.nodelist FROM cases c WHERE {probe}{window}""",
        params + more).fetchall()
    sizes = _sizes(store, [p[5] for p in probes])
    days, counts = {}, {}
    for (system, partition, transport, collective, day, case_id, verdict,
         ranks, node) in probes:
        counted = (system, partition, transport, collective, day)
        c = counts.setdefault(counted, [0, 0])
        c[0] += 1
        c[1] += verdict not in GOOD
        for size, busbw in sizes.get(case_id, ()):
            if busbw is not None:
                days.setdefault((system, partition, transport, collective,
                                 ranks, size, day), {}).setdefault(
                    node, []).append(busbw)
    rows = []
    for (*group, day), nodes in days.items():
        values = sorted(statistics.median(v) for v in nodes.values())
        n = len(values)
        c = counts.get(tuple(group[:len(COUNTED)]) + (day,), (0, 0))
        rows.append(dict(zip(GROUP, group), day=day, nodes=n,
                         median=statistics.median(values),
                         p10=values[(n + 9) // 10 - 1], min=values[0],
                         checks=c[0], not_good=c[1]))
    rows.sort(key=lambda r: (r['day'],) + tuple(
        (r[k] is None, r[k]) for k in GROUP))
    return rows
