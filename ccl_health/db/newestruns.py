"""The newest runs and cases (``scripts/report runs``; the newest cases of
a series key, :func:`newest_cases`), read from the newest case back
through the time index (issue 30): every health
check is its own run, so a year of a large machine holds millions; the
listing is bounded by what it shows, and ``--all`` streams them with the
cases of a run read by its id, never the whole table at once."""

import dataclasses
from typing import Dict, List

from ccl_health.db import windowfindings
from ccl_health.db.keyhistory import (
    indexed, key_cases_before, select_cols, when)
from ccl_health.db.keyhistory import CASE_LIGHT
from ccl_health.judge.verdicts import NAMES

#: the runs ``scripts/report runs`` shows unless told (``--last N``,
#: ``--all``)
DEFAULT_LAST = 20
#: ``--kind``: the stored kinds of case (schema 6, :func:`ccl_health.judge.
#: history.kind_of`) of each kind of run: a sweep (the nightly's, and the
#: framework and other checks it runs), a health check (the hook's probe),
#: a fleet run
KINDS = {'sweep': ('sweep', 'framework', 'other'),
         'health': ('health probe',), 'fleet': ('fleet',)}
#: runs read beyond the one shown before it is shown: a run's time is that
#: of its newest case, real time (UTC offsets), while the cases are read in
#: the order of their recorded text
SLACK = 10
#: the columns of a case a run's line needs
_COLUMNS = ('id', 'run_id', 'time', 'system', 'partition', 'verdict')


@dataclasses.dataclass
class Run:
    run_id: str
    time: str                 # of its first case
    last_time: str
    where: List[str]          # system:partition
    cases: int
    counts: Dict[str, int]    # verdict name -> cases, in verdict order

    def line(self):
        counts = ', '.join(f'{n} {v}' for v, n in self.counts.items())
        return (f'{self.time}  {self.run_id}  {",".join(self.where)}  '
                f'{self.cases} case{"s" if self.cases != 1 else ""}: '
                f'{counts}')

    def order(self):
        """Its place, newest first: by its newest case's real time."""
        return when(self.last_time), self.run_id


def run_of(run_id, cases):
    """The :class:`Run` of the case rows ``cases`` of ``run_id``."""
    names = [c['verdict'] for c in cases]
    order = list(NAMES) + sorted(set(names) - set(NAMES))
    return Run(
        run_id, min((c['time'] for c in cases), key=when),
        max((c['time'] for c in cases), key=when),
        sorted({f'{c["system"]}:{c["partition"]}' for c in cases}),
        len(cases), {v: names.count(v) for v in order if v in names})


def of_cases(cases):
    """The :class:`Run` s of the case rows ``cases``, newest first."""
    by = {}
    for c in cases:
        by.setdefault(c['run_id'], []).append(c)
    return sorted((run_of(r, cs) for r, cs in by.items()), key=Run.order,
                  reverse=True)


def newest_first(store, kinds=None, slack=SLACK):
    """Each :class:`Run` with a case of ``kinds`` (stored kinds; None:
    every run), newest first, as they are read: the cases newest first
    (:func:`newest_case_rows`), each new run's cases
    read by its id.  Held in memory: the ``slack`` runs read ahead, and the
    ids of the runs whose oldest case the reading has not passed yet."""
    ahead, seen, n = [], {}, 0
    for row in newest_case_rows(store, kinds):
        at = (row['time'], row['id'])
        n += 1
        if n % 1000 == 0:       # the runs it has passed for good
            seen = {r: oldest for r, oldest in seen.items()
                    if oldest <= at}
        if row['run_id'] in seen:
            continue
        cases = windowfindings.run_cases(store, row['run_id'], _COLUMNS)
        seen[row['run_id']] = (cases[0]['time'], cases[0]['id'])
        ahead.append(run_of(row['run_id'], cases))
        if len(ahead) > slack:
            yield _take_newest(ahead)
    while ahead:
        yield _take_newest(ahead)


def _take_newest(runs):
    best = max(runs, key=Run.order)
    runs.remove(best)
    return best


def newest_cases(store, keys, n, columns=CASE_LIGHT):
    """``(cases, complete)``: the newest ``n`` cases of the series
    ``keys`` together, newest first (by their recorded time, as the
    database orders it), each key's read through the series index with
    ``LIMIT n``; ``complete``: they are every case of the keys."""
    import heapq
    import itertools
    columns = tuple(columns) + tuple(c for c in ('id', 'time')
                                     if c not in columns)
    per = [key_cases_before(store, key, _LATEST, n, columns)
           for key in keys]
    out = list(itertools.islice(heapq.merge(
        *per, key=lambda c: (c['time'], c['id']), reverse=True), n))
    return out, sum(map(len, per)) <= n and all(len(p) < n for p in per)


def newest_case_rows(store, kinds=None, columns=('id', 'time', 'run_id'),
                     page=500):
    """Every case (``columns``), newest first (by time, then id): pages of
    ``page`` read through the ``cases_time`` index (``kinds``: of these
    kinds only, through ``cases_kind``, one reader a kind merged); never
    all at once."""
    import heapq
    from ccl_health.judge.series import kind_of
    columns = tuple(columns) + tuple(c for c in ('id', 'time')
                                     if c not in columns)
    if kinds is not None and not indexed(store):   # by names, in Python
        extra = ('source', 'case_name', 'collective')
        rows = newest_case_rows(store, None, columns + extra, page)
        return ({c: r[c] for c in columns} for r in rows
                if kind_of(r) in kinds)
    if kinds is None:
        return _pages(store, columns, '', (), page)
    return heapq.merge(*(_pages(store, columns, _kind_where(store, k), (k,),
                                page) for k in kinds),
                       key=lambda c: (c['time'], c['id']), reverse=True)


def _kind_where(store, kind):
    """The condition of the cases of ``kind`` (its parameter: the kind):
    the index ``cases_kind`` of schema 9 leaves the health probes out (the
    planners use it only where the query says so, in a literal); the
    probes are nearly every case, read by the time index."""
    from ccl_health.db import seriestable as series
    from ccl_health.judge.series import PROBE_KIND
    if series.ided(store) and kind != PROBE_KIND:
        return f"c.kind = ? AND c.kind <> '{PROBE_KIND}' AND "
    return 'c.kind = ? AND '

#: later than every recorded time (ISO 8601 text, whatever the collation)
_LATEST = '99999'


def _pages(store, columns, where, params, page):
    sql = (f'SELECT {select_cols(columns)} FROM cases c WHERE {where}'
           f'(c.time, c.id) < (?, ?) ORDER BY c.time DESC, c.id DESC '
           f'LIMIT ?')
    at = (_LATEST, 0)
    while True:
        rows = store.query(sql, tuple(params) + at + (page,))
        yield from rows
        if len(rows) < page:
            return
        at = (rows[-1]['time'], rows[-1]['id'])
