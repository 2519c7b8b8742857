"""What the history judge finds (:class:`Finding`: a drop, drift, recovery
or intermittent pattern of a key at a size; :class:`Shift`: a sustained
shift of the drift detector) and the drop rule of one value against its
key's recent healthy values (:func:`judge_recent`).  Below both the whole
history's judge (:mod:`ccl_health.judge.history`) and its steps one value
at a time (:mod:`ccl_health.judge.stream`)."""

import dataclasses
from typing import Optional

from ccl_health.judge.baselines import Baseline, centre, seeded
from ccl_health.judge.series import series_key
from ccl_health.judge.verdicts import IN_BASELINE


def where_text(key):
    """``system/partition/transport collective Nn/Rr`` (and the kind of
    case when it is not a sweep, and the node of a health probe: ``on
    NODE``) of a history key."""
    text = '/'.join(str(k) for k in key[:3]) + \
        f' {key[3]} {key[4]}n/{key[5]}r'
    if len(key) > 7 and key[7] not in ('sweep', None):
        text += f' [{key[7]}]'
    if len(key) > 8 and key[8]:
        text += f' on {key[8]}'
    return text


@dataclasses.dataclass
class Finding:
    kind: str             # 'drop' | 'drift' | 'recovery' | 'intermittent'
    run_id: str
    time: str
    key: tuple
    size: int
    value: float
    baseline: Optional[Baseline]
    threshold: Optional[float]
    note: str = ''
    #: a drift: the relative shift (negative), over how many runs, since
    #: which run (its time), with which relative noise
    shift: Optional[float] = None
    runs: int = 0
    since_run: str = ''
    since_time: str = ''
    noise: Optional[float] = None
    #: the id of the case it was found in, where the record had one (the
    #: database's: kept with it, :mod:`ccl_health.db.keystate`)
    case_id: Optional[int] = dataclasses.field(default=None, compare=False)
    #: a drop's or drift's ``changed:`` lines, as kept with it when it
    #: was found (the database's, schema 12: :mod:`ccl_health.db.keystate`);
    #: None where none were kept (read when it is shown)
    changed: Optional[tuple] = dataclasses.field(default=None,
                                                 compare=False)

    def line(self):
        from ccl_health.units import format_size
        where = where_text(self.key)
        if self.kind == 'drop':
            pct = 100 * (1 - self.value / self.baseline.median)
            return (f'DROP {where} {format_size(self.size)}: '
                    f'{self.value:.2f} GB/s vs baseline '
                    f'{self.baseline.median:.2f} (-{pct:.0f}%, threshold '
                    f'{self.threshold:.2f}, n={self.baseline.n}) in run '
                    f'{self.run_id}')
        if self.kind == 'drift':
            return (f'DRIFT {where} {format_size(self.size)}: '
                    f'{100 * self.shift:+.1f} % sustained over {self.runs} '
                    f'run{"s" if self.runs != 1 else ""} (noise '
                    f'{100 * self.noise:.1f} %; {self.value:.2f} GB/s vs '
                    f'baseline {self.baseline.median:.2f}, '
                    f'n={self.baseline.n}, since run {self.since_run}) in '
                    f'run {self.run_id}')
        return f'{self.kind.upper()} {where} {format_size(self.size)}: ' \
               f'{self.note} (run {self.run_id})'


@dataclasses.dataclass
class Shift:
    """A sustained shift found at one run by
    :func:`ccl_health.judge.history.sustained_drops`."""
    index: int            # the run flagged (index into the values)
    start: int            # the first run of the shift
    shift: float          # mean relative shift of the last runs (negative)
    noise: float          # the relative noise the z-scores used
    baseline: Baseline
    score: float          # the CUSUM statistic


def judge(history, current, tolerance=0.05, k=3.0, min_history=5,
          window=30, level=None):
    """Is ``current`` (a record) a drop against ``history`` (earlier
    records of the same key and size, since ``level`` where there is one:
    until ``min_history`` healthy values exist the baseline is
    :func:`~ccl_health.judge.baselines.seeded` by it)?  Returns a Finding
    or None."""
    healthy = [r['busbw'] for r in history
               if r['case_verdict'] in IN_BASELINE and not r.get('_drop')]
    return judge_recent(healthy[-window:], current, tolerance, k,
                        min_history, level)


def judge_recent(healthy, current, tolerance=0.05, k=3.0, min_history=5,
                 level=None):
    """:func:`judge` from the key's last ``window`` healthy values."""
    if len(healthy) >= min_history:
        base = centre(healthy)
    elif level is not None and level.median is not None:
        base = seeded(level, list(healthy))
    else:
        return None
    tol = current.get('tolerance') or tolerance
    thr = base.threshold(tol, k)
    if current['busbw'] < thr:
        return Finding('drop', current['run_id'], current['time'],
                       series_key(current), current['size'],
                       current['busbw'], base, thr)
    return None
