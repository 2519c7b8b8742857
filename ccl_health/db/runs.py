"""The recorded runs, newest first (``scripts/report runs``), read from
the newest case back through the time index (issue 30): every health
check is its own run, so a year of a large machine holds millions; the
listing is bounded by what it shows, and ``--all`` streams them with the
cases of a run read by its id, never the whole table at once."""

import dataclasses
from typing import Dict, List

from ccl_health.db import reads
from ccl_health.db.keyreads import when
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
    (:func:`ccl_health.db.reads.newest_case_rows`), each new run's cases
    read by its id.  Held in memory: the ``slack`` runs read ahead, and the
    ids of the runs whose oldest case the reading has not passed yet."""
    ahead, seen, n = [], {}, 0
    for row in reads.newest_case_rows(store, kinds):
        at = (row['time'], row['id'])
        n += 1
        if n % 1000 == 0:       # the runs it has passed for good
            seen = {r: oldest for r, oldest in seen.items()
                    if oldest <= at}
        if row['run_id'] in seen:
            continue
        cases = reads.run_cases(store, row['run_id'], _COLUMNS)
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
