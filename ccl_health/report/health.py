"""The health probes on the page, over the whole machine and counted in
the database, never read probe by probe: the summary rows per group
(:func:`probe_summary`), the distribution of the nodes' busbw per day
(:func:`health_sections`, from :mod:`ccl_health.db.health_days`) and the
nodes that need a look (:func:`node_rows`: not good in the window, or a
finding against their own history), listed, never drawn one by one."""

import dataclasses
import datetime
import json
import os
import re
from typing import List

from ccl_health import CclHealthError
from ccl_health.db import keyhistory, seriestable
from ccl_health.db.verdictsql import GOOD_SQL
from ccl_health.judge.series import KEY, PROBE_KIND
from ccl_health.units import format_size

#: days of the health probes' distribution listed per group (newest
#: first; the figure has every day)
HEALTH_DAYS_LISTED = 31
#: nodes listed (those with the newest problem first; all are counted)
NODES_LISTED = 200


def _when(text):
    from ccl_health.db.keyhistory import when
    return when(text)


def _slug(text):
    return re.sub(r'[^A-Za-z0-9._-]+', '_', text).strip('_')


def probe_summary(store, since, now=None):
    """The summary rows of the health probes since ``since``, one per
    system, partition, collective, transport, nodes, ranks and algo over
    every node, counted in the database (never read probe by probe; the
    closed days' counts kept: :func:`ccl_health.db.health_days.
    window_counts`)."""
    from ccl_health.db.health_days import COUNTS_GROUP as g, _is_probe
    from ccl_health.db.health_days import window_counts
    probe, params = _is_probe()
    # per group, the kept days' counts and the others' (schema 10)
    rows = window_counts(store, keyhistory.sql_time(since))
    now = now or datetime.datetime.now(datetime.timezone.utc)
    out = []
    for r in rows:
        last = store.query(
            f'SELECT c.id, c.verdict FROM cases c WHERE c.time = ? AND '
            f'{probe} AND ' + ' AND '.join(
                f'c.{k} IS NULL' if r[k] is None else f'c.{k} = ?'
                for k in g) + ' ORDER BY c.id DESC LIMIT 1',
            (r['last'],) + params + tuple(r[k] for k in g
                                          if r[k] is not None))[0]
        m = store.query('SELECT size, busbw, ref FROM measurements WHERE '
                        'case_id = ? AND ref IS NOT NULL AND busbw IS NOT '
                        'NULL ORDER BY size DESC LIMIT 1', (last['id'],))
        failed = _when(r['last_failure']) if r['last_failure'] \
            else None
        out.append({
            'system': r['system'] or '', 'partition': r['partition'] or '',
            'kind': 'health probe', 'collective': r['collective'] or '',
            'transport': r['transport'] or '',
            'nodes x ranks': f'{r["nodes"] or "?"} x {r["ranks"] or "?"}',
            'algo': r['algo'] or '',
            'last run': str(r['last'])[:16].replace('T', ' '),
            'last verdict': last['verdict'],
            'last vs reference': (f'{m[0]["busbw"]:.2f} / '
                                  f'{m[0]["ref"]:.2f} GB/s at '
                                  f'{format_size(int(m[0]["size"]))}'
                                  if m else ''),
            'runs': int(r['checks']), 'failures': int(r['failures'] or 0),
            'days since failure': ((now - failed).days if failed else
                                   'never failed')})
    return out


@dataclasses.dataclass
class HealthSection:
    """The health probes of one group (system, partition, transport,
    collective, ranks, size) over the nodes, per day."""
    title: str
    anchor: str
    rows: List[dict]          # newest day first, HEALTH_DAYS_LISTED at most
    days: int
    figures: list


def health_sections(store, figures, since=None):
    """The machine-wide view of the health probes: per group, the
    distribution of the nodes' busbw per day
    (:func:`ccl_health.db.health_days.health_days`, from the day of
    ``since``) as a table and a figure (drawn into ``figures``, a
    :class:`ccl_health.report.figures.Figures`)."""
    from ccl_health.db.health_days import GROUP
    from ccl_health.report import plots
    groups = {}
    for r in days_rows(store, since.date().isoformat() if since else None,
                       figures.cache):
        groups.setdefault(tuple(r[k] for k in GROUP), []).append(r)
    out = []
    for key, rows in sorted(groups.items(),
                            key=lambda kv: tuple(map(str, kv[0]))):
        k = dict(zip(GROUP, key))
        title = (f'{k["system"]}:{k["partition"]} health probe '
                 f'{k["collective"] or "-"} {k["transport"] or "-"} '
                 f'{k["ranks"] or "?"}r {format_size(int(k["size"]))}')
        slug = _slug(title)
        out.append(HealthSection(
            title, f'nodes_{slug}',
            list(reversed(rows))[:HEALTH_DAYS_LISTED], len(rows),
            [figures.add(f'nodes_{slug}.png', 'busbw over the nodes per day',
                         lambda: plots.health_days(rows), rows)]))
    return out


def days_rows(store, since, cache):
    """:func:`ccl_health.db.health_days.health_days` from the day
    ``since`` (``YYYY-MM-DD``; None: every day), each day's rows kept in
    the folder ``cache`` under a hash of that day's cases (how many and
    the newest id, counted from the time index) and of the code: a day is
    computed again only when a case of it was added or removed, so a
    nightly page computes its newest day, not the month.  The days the
    database keeps (schema 10, :func:`ccl_health.db.health_days.keep`)
    are read as kept, and only the days after them counted."""
    from ccl_health.db import health_days as hd
    from ccl_health.report.figures import digest, write_whole
    # the kept days (schema 10) as kept; the others from the first of
    # them on (today's, as a rule) by the cache below
    have = hd.kept_days(store, since) if since and hd.kept(store) else {}
    last = hd.newest_day(store) if have else None
    rest = since
    while rest and last and rest <= last and rest in have:
        rest = hd._next_day(rest)
    marks = store.query(
        'SELECT substr(c.time, 1, 10) AS day, COUNT(*) AS n, MAX(c.id) AS '
        'last FROM cases c' + (' WHERE c.time >= ?' if rest else '') +
        ' GROUP BY substr(c.time, 1, 10)', (rest,) if rest else ())
    with open(hd.__file__, 'rb') as fp:
        code = fp.read()
    out = []
    days = {str(m['day']): m for m in marks if str(m['day']) not in have}
    for day in sorted(set(days) | set(have)):
        if day in have:
            out += have[day][0]
            continue
        m = days[day]
        try:
            after = (datetime.date.fromisoformat(day) +
                     datetime.timedelta(days=1)).isoformat()
        except ValueError:      # not a date: every day in one query
            return hd.health_days(store, since)
        path = os.path.join(cache, f'health-days-{day}-'
                            f'{digest(code, int(m["n"]), m["last"])}.json')
        try:
            with open(path, encoding='utf-8') as fp:
                out += json.load(fp)
            os.utime(path)
            continue
        except (OSError, ValueError):
            pass
        got = hd.health_days(store, day, after)
        text = json.dumps([dict(r) for r in got], default=float)
        rows = json.loads(text)     # as the cache gives them: plain numbers
        try:
            write_whole(path, text.encode())
        except CclHealthError:
            pass                # no cache: computed again next time
        out += rows
    return out


#: the nodes to look at that get a trend figure of their own probes (the
#: newest problems first)
NODE_TRENDS = 12


def node_trend_rows(store, node, since):
    """``[(time, transport, size, busbw, verdict)]`` of ``node``'s health
    probes since ``since``, oldest first: at each probe's largest size
    (one point per probe), busbw None where it measured nothing."""
    from ccl_health.db.health_days import _is_probe
    probe, params = _is_probe()
    # the node's own series (schema 9: a few rows of the small table
    # ``series``), its cases by the series index; never the window's
    # probes of every node read through the time index for one node's
    by = ''
    if seriestable.ided(store):
        by = (f"c.series_id IN (SELECT s.id FROM series s WHERE s.kind = "
              f"'{PROBE_KIND}' AND s.node = ?) AND ")
    rows = store.query(
        f"""SELECT c.id AS id, c.time AS time, c.transport AS transport,
                   c.verdict AS verdict, m.size AS size, m.busbw AS busbw
            FROM cases c LEFT JOIN measurements m ON m.case_id = c.id
            WHERE {by}c.time >= ? AND c.nodelist = ? AND {probe}""",
        ((node,) if by else ()) + (keyhistory.sql_time(since), node) +
        params)
    best = {}
    for r in rows:
        old = best.get(r['id'])
        if old is None or (r['size'] or 0) > (old['size'] or 0):
            best[r['id']] = r
    return sorted((str(r['time']), r['transport'] or '-',
                   int(r['size'] or 0),
                   None if r['busbw'] is None else float(r['busbw']),
                   r['verdict']) for r in best.values())


def node_trends(store, figures, nodes, since):
    """Each of the first :data:`NODE_TRENDS` ``nodes`` (rows of
    :func:`node_rows`) given ``figure``: the trend of its own health
    probes (:func:`ccl_health.report.plots.node_trend`); the others'
    ``figure`` None (the page lists every node, strict about names)."""
    from ccl_health.report import plots
    for row in nodes:
        row['figure'] = None
    for row in nodes[:NODE_TRENDS]:
        data = node_trend_rows(store, row['node'], since)
        if not data:
            continue
        row['figure'] = figures.add(
            f'node_{_slug(row["node"])}.png',
            f'{row["node"]}: its health probes over time',
            lambda d=data, n=row['node']: plots.node_trend(d, n), data)
    return nodes


def node_rows(store, since, findings=()):
    """The nodes whose health probes need a look: those with probes that
    were not good since ``since`` (counted per node and verdict in the
    database, from the index of the cases that are not good) and those
    with a finding against their own history (``findings``, of the health
    probes).  One row per node, the newest problem first: ``node``,
    ``not_good`` (how many), ``verdicts`` (each verdict's count),
    ``last`` (the newest problem's time), ``findings`` (their lines)."""
    from ccl_health.db.health_days import _is_probe
    probe, params = _is_probe()
    nodes = {}
    for r in store.query(
            f"""SELECT c.nodelist AS node, c.verdict AS verdict,
                       COUNT(*) AS n, MAX(c.time) AS last
                FROM cases c WHERE c.time >= ? AND c.verdict NOT IN
                {GOOD_SQL} AND {probe} GROUP BY c.nodelist, c.verdict""",
            (keyhistory.sql_time(since),) + params):
        row = nodes.setdefault(r['node'], {'node': r['node'], 'not_good': 0,
                                           'verdicts': {}, 'last': '',
                                           'findings': []})
        row['not_good'] += int(r['n'])
        row['verdicts'][r['verdict']] = int(r['n'])
        row['last'] = max(row['last'], str(r['last']))
    for f in findings:
        node = f.key[8] if len(f.key) > 8 else None
        if not node:
            continue
        row = nodes.setdefault(node, {'node': node, 'not_good': 0,
                                      'verdicts': {}, 'last': '',
                                      'findings': []})
        row['findings'].append(f.line())
        row['last'] = max(row['last'], str(f.time))
    out = sorted(nodes.values(), key=lambda r: (r['last'], r['node']),
                 reverse=True)
    for r in out:
        r['verdicts'] = ', '.join(f'{n} {v}' for v, n in sorted(
            r['verdicts'].items(), key=lambda kv: -kv[1]))
    return out
