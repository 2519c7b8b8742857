"""Retention (``scripts/report prune``, issue 30): the healthy health
checks older than a site-set age roll up into daily aggregates per node
and key (the table ``health_daily``: checks, busbw min / median / max,
first and last time, per verdict), and their cases go.

Never rolled up, whatever their age:

* a failure (any verdict but ``pass`` and ``skipped``), and every case that
  is not a health check (sweeps, fleet runs, acceptances' runs);
* a finding against history (a drop, drift, recovery, intermittent
  collapse of the node's series: :func:`ccl_health.judge.history.detect`)
  and the :data:`ccl_health.db.keyhistory.LOOKBACK` cases of its series before
  it, so that it is judged the same afterwards, and every case a finding
  was kept with (:mod:`ccl_health.db.keystate`);
* the :data:`~ccl_health.db.keyhistory.LOOKBACK` newest cases of each series
  before the cut, the history the checks after it are judged from.

Each key's judging state (:mod:`ccl_health.db.keystate`) is kept as it was:
it is the judging of the whole history, the cases rolled up included (a
key judged again later, after a backfill, is judged from what is left).

Whole days (UTC) are rolled, oldest first, one transaction a day; a day
rolled is not rolled again (nothing healthy is left of it).  The file's
freed pages are reused by later checks (SQLite) or by autovacuum
(PostgreSQL)."""

import dataclasses
import datetime
import statistics

from ccl_health import CclHealthError
from ccl_health.db import inlists
from ccl_health.db import seriestable as series
from ccl_health.db.verdictsql import GOOD_SQL

#: the youngest age a site may roll up (days): the nights and the
#: hook's last days stay as they were
MIN_DAYS = 7


@dataclasses.dataclass
class Plan:
    cutoff: str                     # the first day kept (YYYY-MM-DD)
    days: list = dataclasses.field(default_factory=list)
    checks: int = 0                 # healthy checks rolled up
    rows: int = 0                   # aggregate rows written
    kept_findings: int = 0          # findings kept (with their history)
    kept_history: int = 0           # cases kept as history
    failures: int = 0               # failing checks before the cut (kept)

    def lines(self, dry_run):
        verb = 'would roll up' if dry_run else 'rolled up'
        if not self.days:
            return [f'nothing to roll up before {self.cutoff} (healthy '
                    f'health checks only; {self.failures} failing check(s) '
                    f'before it are kept)']
        return [f'{verb} {self.checks} healthy health check(s) of '
                f'{len(self.days)} day(s) ({self.days[0]} .. '
                f'{self.days[-1]}) into {self.rows} daily row(s) per node '
                f'and key; kept: {self.failures} failing check(s), '
                f'{self.kept_findings} finding(s) against history and '
                f'{self.kept_history} case(s) of history they and the '
                f'newer checks are judged from']


def _probe_sql():
    from ccl_health.db.health_days import _is_probe
    return _is_probe()


def _day_rows(store, day):
    """The healthy health checks of ``day`` (light case rows)."""
    from ccl_health.db import keyhistory
    probe, params = _probe_sql()
    return store.query(
        f'SELECT {", ".join("c." + c for c in keyhistory.CASE_LIGHT)} '
        f'FROM cases c WHERE c.time >= ? AND c.time < ? AND c.verdict IN {GOOD_SQL} '
        f'AND {probe} ORDER BY c.time, c.id',
        (day, _next_day(day)) + params)


def _next_day(day):
    return (datetime.date.fromisoformat(day) +
            datetime.timedelta(days=1)).isoformat()


def _days(store, cutoff):
    """The days before ``cutoff`` that hold a healthy health check."""
    probe, params = _probe_sql()
    first = store.query(
        f'SELECT min(c.time) AS t FROM cases c WHERE c.time < ? AND '
        f'c.verdict IN {GOOD_SQL} AND {probe}',
        (cutoff,) + params)[0]['t']
    if not first:
        return []
    day, out = str(first)[:10], []
    while day < cutoff:
        out.append(day)
        day = _next_day(day)
    return out


def _kept(store, days, cutoff):
    """(ids of the cases kept: findings and their history, the history
    before the cut; how many findings)."""
    from ccl_health.db import windowfindings
    from ccl_health.db import keystate as state
    from ccl_health.db import keyhistory
    from ccl_health.judge.history import detect
    from ccl_health.judge.series import series_key
    keep, findings = set(), 0
    acc, base = store.acceptances(), store.baselines()
    keys_seen = set()
    for day in days:
        rows = _day_rows(store, day)
        if not rows:
            continue
        start = datetime.datetime.fromisoformat(day).replace(
            tzinfo=datetime.timezone.utc)
        keys = windowfindings.history_keys(rows)
        keys_seen |= keys
        records = windowfindings.history_records(store, keys, start,
                                        start + datetime.timedelta(days=1))
        runs = {r['run_id'] for r in rows}
        for f in detect(records, runs=runs, accepted=acc, baselines=base):
            findings += 1
            mine = [r for r in rows if r['run_id'] == f.run_id and
                    series_key(r) == f.key]
            keep.update(r['id'] for r in mine)
            keep.update(r['id'] for r in keyhistory.key_cases_before(
                store, f.key, f.time, keyhistory.LOOKBACK))
    for key in keys_seen:        # what the checks after the cut need
        keep.update(r['id'] for r in keyhistory.key_cases_before(
            store, key, cutoff, keyhistory.LOOKBACK))
    if state.has_state(store):   # the findings kept with their cases
        keep.update(r['case_id'] for r in store.query(
            'SELECT DISTINCT case_id FROM findings WHERE time < ?',
            (_next_day(cutoff),)))
    return keep, findings


def _aggregates(store, rows):
    """The daily rows of the checks ``rows`` (with their measurements),
    per node, key, size and verdict."""
    from ccl_health.judge.series import KEY, node_of
    ids = [r['id'] for r in rows]
    sizes = {}
    for m in inlists.query_in(
            store, 'SELECT case_id, size, busbw FROM measurements WHERE '
            'case_id IN (?...)', ids):
        sizes.setdefault(m['case_id'], []).append(m)
    groups = {}
    for r in rows:
        for m in sizes.get(r['id']) or [{'size': None, 'busbw': None}]:
            k = (r['time'][:10],) + tuple(r[c] for c in KEY) + (
                node_of(r), m['size'], r['verdict'])
            groups.setdefault(k, []).append((r['time'], m['busbw']))
    out = []
    for k, vals in groups.items():
        bws = [b for _, b in vals if b is not None]
        times = sorted(t for t, _ in vals)
        out.append(dict(zip(('day',) + KEY + ('node', 'size', 'verdict'), k),
                        checks=len(vals),
                        busbw_min=min(bws) if bws else None,
                        busbw_median=statistics.median(bws) if bws else None,
                        busbw_max=max(bws) if bws else None,
                        first_time=times[0], last_time=times[-1]))
    return out


AGG_COLUMNS = ('day', 'system', 'partition', 'transport', 'collective',
               'nodes', 'ranks', 'algo', 'node', 'size', 'verdict', 'checks',
               'busbw_min', 'busbw_median', 'busbw_max', 'first_time',
               'last_time')


def prune(store, older_than, dry_run=False, now=None):
    """Roll up the healthy health checks of the days more than
    ``older_than`` days before ``now`` (:class:`Plan`; ``dry_run``:
    only say what would be done)."""
    from ccl_health.db.store import now as stamp
    if older_than < MIN_DAYS:
        raise CclHealthError(f'prune: --older-than {older_than:g} is under '
                             f'{MIN_DAYS} days (the last nights and checks '
                             f'stay as recorded)')
    if store.schema_version() < 7:
        raise CclHealthError(f'{store.where}: schema version '
                             f'{store.schema_version()}: open it for writing '
                             f'once to migrate it before pruning')
    now = now or datetime.datetime.now(datetime.timezone.utc)
    cutoff = (now - datetime.timedelta(days=older_than)).date().isoformat()
    plan = Plan(cutoff)
    probe, params = _probe_sql()
    plan.failures = store.query(
        f'SELECT count(*) AS n FROM cases c WHERE c.time < ? AND '
        f'c.verdict NOT IN {GOOD_SQL} AND {probe}',
        (cutoff,) + params)[0]['n']
    days = _days(store, cutoff)
    keep, plan.kept_findings = _kept(store, days, cutoff)
    plan.kept_history = len(keep)
    cols = ', '.join(AGG_COLUMNS + ('created',))
    for day in days:
        rows = [r for r in _day_rows(store, day) if r['id'] not in keep]
        if not rows:
            continue
        aggs = _aggregates(store, rows)
        plan.days.append(day)
        plan.checks += len(rows)
        plan.rows += len(aggs)
        if dry_run:
            continue
        created = stamp()
        with store.transaction():
            for a in aggs:
                store.execute(f'INSERT INTO health_daily ({cols}) VALUES '
                              f'({", ".join("?" * (len(AGG_COLUMNS) + 1))})',
                              tuple(a[c] for c in AGG_COLUMNS) + (created,))
            ids = [r['id'] for r in rows]
            for part in inlists.batches(ids):
                marks_ = inlists.marks(len(part))
                held = [r['s'] for r in store.query(
                    f'SELECT DISTINCT series_id AS s FROM cases WHERE id IN '
                    f'({marks_})', tuple(part))] if series.ided(store) \
                    else []
                store.execute(f'DELETE FROM measurements WHERE case_id IN '
                              f'({marks_})', tuple(part))
                store.execute(f'DELETE FROM cases WHERE id IN ({marks_})',
                              tuple(part))
                # a series no case holds any more (a node gone)
                series.drop_orphans(store, held)
    return plan


def daily(store, since=None):
    """The rolled-up rows (``health_daily``), oldest day first."""
    if store.schema_version() < 7:
        return []
    where, params = ('WHERE day >= ?', (since,)) if since else ('', ())
    return store.query(f'SELECT * FROM health_daily {where} ORDER BY day, '
                       f'id', params)
