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

import datetime
import statistics

from ccl_health.db.verdictsql import GOOD_SQL
from ccl_health.judge.series import HEALTH_NAMES, HEALTH_SOURCE, KEY
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


# -- the probes counted per group (the page's summary rows) ------------------

#: what the probes are counted by on the page's summary
COUNTS_GROUP = KEY


def probe_counts(store, since=None, until=None):
    """Per :data:`COUNTS_GROUP` of the health probes recorded at times
    (text) from ``since`` to before ``until``: ``checks``, ``last`` (the
    newest time), ``failures`` (not good) and ``last_failure`` (its
    newest time, or None); counted in the database."""
    probe, params = _is_probe()
    window, more = _window(since, until)
    cols = ', '.join(f'c.{k}' for k in COUNTS_GROUP)
    rows = store.query(
        f"""SELECT {cols}, COUNT(*) AS checks, MAX(c.time) AS last,
                   SUM(CASE WHEN c.verdict NOT IN {GOOD_SQL} THEN 1 ELSE 0
                       END) AS failures,
                   MAX(CASE WHEN c.verdict NOT IN {GOOD_SQL} THEN c.time
                       END) AS last_failure
            FROM cases c WHERE {probe}{window}
            GROUP BY {cols}""", params + more)
    return [dict({k: r[k] for k in COUNTS_GROUP}, checks=int(r['checks']),
                 last=r['last'], failures=int(r['failures'] or 0),
                 last_failure=r['last_failure']) for r in rows]


def _merge_counts(parts):
    """The rows of :func:`probe_counts` of several windows as one window's
    (sums and newest times per group), in the order of the groups."""
    out = {}
    for r in parts:
        k = tuple(r[c] for c in COUNTS_GROUP)
        have = out.get(k)
        if have is None:
            out[k] = dict(r)
            continue
        have['checks'] += r['checks']
        have['failures'] += r['failures']
        have['last'] = max(have['last'], r['last'])
        have['last_failure'] = max(
            (t for t in (have['last_failure'], r['last_failure'])
             if t is not None), default=None)
    return [out[k] for k in sorted(out, key=lambda k: tuple(
        (v is None, str(v)) for v in k))]


# -- each closed day kept (schema 10, issue 45) -------------------------------

#: the version of a kept day: a day kept by another version of this code
#: is computed again (and kept anew by the next :func:`keep`)
KEPT_VERSION = 1
#: the days :func:`keep` keeps, back from the newest case (the page's 30
#: days and the day its window starts in)
KEEP_DAYS = 31

#: the triggers that drop a kept day when a case of it (or a size of such
#: a case) is written, changed or removed: the database itself keeps the
#: kept days true, whoever writes
TRIGGERS = [
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS cases_day_added AFTER INSERT
        ON cases BEGIN DELETE FROM kept_days WHERE day =
        substr(NEW.time, 1, 10); END"""),
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS cases_day_changed AFTER
        UPDATE ON cases BEGIN DELETE FROM kept_days WHERE day IN
        (substr(OLD.time, 1, 10), substr(NEW.time, 1, 10)); END"""),
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS cases_day_removed AFTER
        DELETE ON cases BEGIN DELETE FROM kept_days WHERE day =
        substr(OLD.time, 1, 10); END"""),
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS sizes_day_changed AFTER
        UPDATE ON measurements BEGIN DELETE FROM kept_days WHERE day IN
        (SELECT substr(time, 1, 10) FROM cases WHERE id IN
        (OLD.case_id, NEW.case_id)); END"""),
    ('sqlite', """CREATE TRIGGER IF NOT EXISTS sizes_day_removed AFTER
        DELETE ON measurements BEGIN DELETE FROM kept_days WHERE day IN
        (SELECT substr(time, 1, 10) FROM cases WHERE id = OLD.case_id);
        END"""),
    ('postgresql', """CREATE OR REPLACE FUNCTION ccl_health_day_changed()
        RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          IF TG_OP <> 'INSERT' THEN
            DELETE FROM kept_days WHERE day = substr(OLD.time, 1, 10);
          END IF;
          IF TG_OP <> 'DELETE' THEN
            DELETE FROM kept_days WHERE day = substr(NEW.time, 1, 10);
          END IF;
          RETURN NULL; END $$"""),
    ('postgresql', """CREATE OR REPLACE FUNCTION ccl_health_size_changed()
        RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          DELETE FROM kept_days WHERE day IN (SELECT substr(c.time, 1, 10)
            FROM cases c WHERE c.id = OLD.case_id);
          IF TG_OP = 'UPDATE' THEN
            DELETE FROM kept_days WHERE day IN (SELECT substr(c.time, 1,
              10) FROM cases c WHERE c.id = NEW.case_id);
          END IF;
          RETURN NULL; END $$"""),
    ('postgresql', """CREATE TRIGGER cases_day_changed AFTER INSERT OR
        UPDATE OR DELETE ON cases FOR EACH ROW EXECUTE FUNCTION
        ccl_health_day_changed()"""),
    ('postgresql', """CREATE TRIGGER sizes_day_changed AFTER UPDATE OR
        DELETE ON measurements FOR EACH ROW EXECUTE FUNCTION
        ccl_health_size_changed()"""),
]


def kept(store):
    """Does the store keep its days (schema 10)?"""
    return store.schema_version() >= 10


def _next_day(day):
    return (datetime.date.fromisoformat(day) +
            datetime.timedelta(days=1)).isoformat()


def _is_day(text):
    try:
        datetime.date.fromisoformat(text)
    except (TypeError, ValueError):
        return False
    return len(text) == 10


def newest_day(store):
    """The day of the newest case (``YYYY-MM-DD``), None if none (or not
    a date)."""
    t = store.query('SELECT max(time) AS t FROM cases')[0]['t']
    return str(t)[:10] if t and _is_day(str(t)[:10]) else None


def kept_days(store, first):
    """``{day: (rows, counts)}`` of the days kept from ``first`` on (of
    this :data:`KEPT_VERSION`): :func:`health_days` and
    :func:`probe_counts` of each, as they were when it was kept (a case
    of that day written, changed or removed since drops it)."""
    import json
    return {str(r['day']): (json.loads(r['rows']), json.loads(r['counts']))
            for r in store.query(
                'SELECT day, rows, counts FROM kept_days WHERE day >= ? AND '
                'version = ?', (first, KEPT_VERSION))}


def _day_values(store, day):
    """The JSON texts of one day's :func:`health_days` and
    :func:`probe_counts`."""
    import json
    after = _next_day(day)
    rows = json.dumps([dict(r) for r in health_days(store, day, after)],
                      default=float)
    return rows, json.dumps(probe_counts(store, day, after))


def keep(store, today=None, days=KEEP_DAYS, each_day=True):
    """Keep each closed day (before ``today``, default the UTC date of
    now) of the ``days`` days to the newest case that is not kept yet: its
    :func:`health_days` and :func:`probe_counts` computed once and written
    to ``kept_days``.  ``each_day``: each day in a write transaction of
    its own (False: in the caller's, the migration to schema 10): on
    SQLite the one writer; on PostgreSQL the table ``kept_days`` locked
    against the triggers of the cases' writers, so a case of the day
    written meanwhile waits (the day's computing, about half a second at
    Frontier) and then drops it: never a day kept without it.  Returns
    the days kept."""
    import contextlib
    if each_day and not kept(store):
        return []
    last = newest_day(store)
    if last is None:
        return []
    today = today or datetime.datetime.now(datetime.timezone.utc).date()
    end = min(datetime.date.fromisoformat(last),
              today - datetime.timedelta(days=1))
    day = datetime.date.fromisoformat(last) - datetime.timedelta(days=days)
    have = set(kept_days(store, day.isoformat())) if each_day else set()
    done = []
    while day <= end:
        text = day.isoformat()
        day += datetime.timedelta(days=1)
        if text in have:
            continue
        if each_day and store.kind == 'postgresql':
            store.conn.commit()         # a transaction of its own
        with (store.transaction() if each_day else
              contextlib.nullcontext()):
            if store.kind == 'postgresql':
                store.execute('LOCK TABLE kept_days IN SHARE ROW EXCLUSIVE '
                              'MODE')
            rows, counts = _day_values(store, text)
            store.execute(
                'INSERT INTO kept_days (day, version, rows, counts, made) '
                'VALUES (?, ?, ?, ?, ?) ON CONFLICT (day) DO UPDATE SET '
                'version = excluded.version, rows = excluded.rows, '
                'counts = excluded.counts, made = excluded.made',
                (text, KEPT_VERSION, rows, counts,
                 datetime.datetime.now(datetime.timezone.utc).isoformat(
                     timespec='seconds')))
        done.append(text)
    return done


def window_counts(store, since):
    """:func:`probe_counts` of every probe from the time (text) ``since``
    on: the kept days' counts (schema 10) and the others counted (the
    day ``since`` falls in, and those not kept)."""
    first = str(since)[:10]
    last = newest_day(store) if kept(store) and _is_day(first) else None
    if last is None:
        return _merge_counts(probe_counts(store, since))
    have = kept_days(store, _next_day(first))
    parts = probe_counts(store, since, _next_day(first))
    day = _next_day(first)
    while day <= last:
        if day in have:
            parts += have[day][1]
            day = _next_day(day)
            continue
        end = day
        while end <= last and end not in have:
            end = _next_day(end)
        parts += probe_counts(store, day, end if end <= last else None)
        day = end
    return _merge_counts(parts)
