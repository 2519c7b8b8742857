"""The history judge one value at a time (issue 30): the state of one key
and size after its newest value, and the step that judges the next.

:func:`ccl_health.judge.history.detect` (a whole history) and the
database's state kept per key (:mod:`ccl_health.db.keystate`: each case judged
as it is written) run these same steps, so a value is judged the same
whichever way: the rules are those of :mod:`ccl_health.judge.history`
(:func:`~ccl_health.judge.finding.judge_recent` for a drop,
:class:`Cusum` for a drift).  A state is bounded: the last ``window``
healthy values, the drift detector's baseline pool and the current
excursion (at most ``window`` values before it is flagged or absorbed),
the drops of the last ``window`` values.  It is kept as JSON
(:meth:`SeriesJudge.state`; floats round-trip exactly)."""

import collections
import dataclasses
import statistics

from ccl_health.judge.baselines import (
    DRIFT_CLIP, DRIFT_H, DRIFT_K, DRIFT_MIN_HISTORY, DRIFT_MIN_NOISE,
    DRIFT_MIN_RUNS, DRIFT_MIN_SHIFT, DRIFT_MIN_SIZE, Baseline, Level,
    baseline, seeded)
from ccl_health.judge.finding import Finding, Shift, judge_recent
from ccl_health.judge.verdicts import IN_BASELINE


def _level(data):
    if data is None:
        return None
    return Level(**dict(data, runs=tuple(data.get('runs') or ())))


def _level_data(level):
    return None if level is None else dataclasses.asdict(level)


class Cusum:
    """The sustained-drop detector of one key and size
    (:func:`ccl_health.judge.history.sustained_drops`, whose rules and
    constants it runs), fed one healthy value at a time (:meth:`step`)."""

    def __init__(self, k=DRIFT_K, h=DRIFT_H, clip=DRIFT_CLIP,
                 min_noise=DRIFT_MIN_NOISE, min_shift=DRIFT_MIN_SHIFT,
                 min_history=DRIFT_MIN_HISTORY, min_runs=DRIFT_MIN_RUNS,
                 window=30, level=None):
        self.k, self.h, self.clip, self.min_noise = k, h, clip, min_noise
        self.min_shift, self.min_history = min_shift, min_history
        self.min_runs, self.window, self.level = min_runs, window, level
        #: the baseline's values (the newest ``max(window, min_history)``:
        #: all a baseline or its count reads)
        self.pool = []
        self.s, self.start, self.devs = 0.0, None, []
        #: the values of the current excursion, ``[value, excluded]``
        #: (dropped once it is flagged: a flagged excursion never joins
        #: the pool)
        self.exc = []
        self.flagged = False

    def _add(self, values):
        self.pool += values
        del self.pool[:-max(self.window, self.min_history)]

    def _base(self):
        if len(self.pool) >= self.min_history:
            return baseline(self.pool[-self.window:])
        if self.level is not None and self.level.median is not None:
            return seeded(self.level, self.pool)
        return None

    def step(self, i, x, excluded=False):
        """Judge the healthy value ``x`` at index ``i`` of its series
        (``excluded``: a single-run drop, judged, never in the baseline);
        a :class:`~ccl_health.judge.finding.Shift` where it is flagged."""
        base = self._base()
        if base is None or base.median <= 0:
            if not excluded:
                self._add([x])
            return None
        sigma = base.drift_noise(self.min_noise)
        z = max((x - base.median) / sigma, -self.clip)
        self.s = max(0.0, self.s - z - self.k)
        if self.s == 0.0:
            if self.start is not None and not self.flagged:
                self._add([v for v, e in self.exc if not e])
            self._reset()
            if not excluded:
                self._add([x])
            return None
        if self.start is None:
            self.start = i
        elif i - self.start >= self.window and not self.flagged:
            # a shift that lasted a whole window unflagged (too small to
            # matter) is the key's new normal
            self._add([v for v, e in self.exc if not e] +
                      ([] if excluded else [x]))
            self.s = 0.0
            self._reset()
            return None
        if not self.flagged:
            self.exc.append([x, excluded])
        self.devs.append(x / base.median - 1)
        del self.devs[:-self.min_runs]
        shift = statistics.fmean(self.devs[-self.min_runs:])
        if self.s > self.h and z < -self.k and \
                len(self.devs) >= self.min_runs and -shift >= self.min_shift:
            self.flagged, self.exc = True, []
            return Shift(i, self.start, shift, sigma / base.median, base,
                           self.s)
        return None

    def _reset(self):
        self.start, self.devs, self.exc, self.flagged = None, [], [], False

    _FIELDS = ('pool', 's', 'start', 'devs', 'exc', 'flagged')

    def state(self):
        return {f: getattr(self, f) for f in self._FIELDS}

    def load(self, data):
        for f in self._FIELDS:
            setattr(self, f, data[f])
        return self


class SeriesJudge:
    """One part of one key and size's history (since its level, where it
    has one: :func:`ccl_health.judge.history.parts`), judged record by
    record (:meth:`step`); what the whole history judged
    (:func:`ccl_health.judge.history.detect`) and what each write adds
    (:mod:`ccl_health.db.keystate`) are these steps."""

    def __init__(self, key, size, level=None, drift_min_size=DRIFT_MIN_SIZE,
                 window=30, **judge_kw):
        self.key, self.size, self.level = tuple(key), size, level
        self.window, self.judge_kw = window, judge_kw
        self.drift = drift_min_size is not None and size >= drift_min_size
        self.n = 0                      # records of the part judged
        self.healthy = 0                # healthy values, not drops
        self.recent = collections.deque(maxlen=window)
        self.drops = []                 # indices, the last window's
        self.prev_run = None            # the run of the record before
        self.last = None                # (run_id, time, busbw) of the last
        #: the drift's excursion: its first record's run and time, and the
        #: healthy records since
        self.first, self.since = None, 0
        self.cusum = Cusum(window=window, level=level)

    def step(self, rec):
        """Judge the record ``rec`` (the next of the series): ``(drop or
        recovery findings, drift findings)``."""
        i = self.n
        self.n += 1
        prev_run, self.prev_run = self.prev_run, rec['run_id']
        self.last = (rec['run_id'], rec['time'], rec['busbw'],
                     rec.get('case_id'))
        if rec['case_verdict'] not in IN_BASELINE:
            return [], []
        found, drifts = [], []
        f = judge_recent(self.recent, rec, level=self.level,
                           **self.judge_kw)
        if f:
            rec['_drop'] = True
        if not rec.get('_drop'):
            self.recent.append(rec['busbw'])
            self.healthy += 1
        if f:
            f.case_id = rec.get('case_id')
            found.append(f)
        elif self.drops and self.drops[-1] == i - 1:
            found.append(Finding(
                'recovery', rec['run_id'], rec['time'], self.key, self.size,
                rec['busbw'], None, None,
                f'back to {rec["busbw"]:.2f} GB/s after a drop in run '
                f'{prev_run}', case_id=rec.get('case_id')))
        if f:
            self.drops.append(i)
        self.drops = [d for d in self.drops if d >= self.n - self.window] \
            or self.drops[-1:]
        if self.drift:
            if self.cusum.start is None:
                self.first, self.since = None, 0
            sh = self.cusum.step(i, rec['busbw'], excluded=bool(f))
            if self.cusum.start is not None:
                if self.first is None:
                    self.first = (rec['run_id'], rec['time'])
                self.since += 1
            if sh is not None and not f:
                drifts.append(Finding(
                    'drift', rec['run_id'], rec['time'], self.key,
                    self.size, rec['busbw'], sh.baseline, None,
                    shift=sh.shift, runs=self.since,
                    since_run=self.first[0], since_time=self.first[1],
                    noise=sh.noise, case_id=rec.get('case_id')))
        return found, drifts

    def intermittent(self):
        """The intermittent pattern as of the last record: at least two
        drops among the last ``window`` records, a healthy one between."""
        last = [d for d in self.drops if d >= self.n - self.window]
        if len(last) < 2 or last[-1] - last[0] <= len(last) - 1:
            return None
        run_id, time, busbw, case_id = self.last
        return Finding(
            'intermittent', run_id, time, self.key, self.size, busbw, None,
            None, f'{len(last)} drops among the last '
            f'{min(self.window, self.n)} runs, healthy runs between',
            case_id=case_id)

    # -- kept as JSON ---------------------------------------------------
    def state(self):
        return {'size': self.size, 'level': _level_data(self.level),
                'window': self.window, 'judge_kw': self.judge_kw,
                'drift': self.drift, 'n': self.n, 'healthy': self.healthy,
                'recent': list(self.recent), 'drops': self.drops,
                'prev_run': self.prev_run,
                'last': list(self.last) if self.last else None,
                'first': list(self.first) if self.first else None,
                'since': self.since, 'cusum': self.cusum.state()}

    @classmethod
    def load(cls, key, data):
        j = cls(key, data['size'], _level(data['level']), None,
                data['window'], **data['judge_kw'])
        j.drift, j.n, j.healthy = data['drift'], data['n'], data['healthy']
        j.recent.extend(data['recent'])
        j.drops, j.prev_run = data['drops'], data['prev_run']
        j.last = tuple(data['last']) if data['last'] else None
        j.first = tuple(data['first']) if data['first'] else None
        j.since = data['since']
        j.cusum.load(data['cusum'])
        return j


#: the fields of a finding kept beside its key, size, kind, run and time
#: (which the database keeps in columns of their own)
_BODY = ('value', 'threshold', 'note', 'shift', 'runs', 'since_run',
         'since_time', 'noise')


def finding_data(f):
    """A :class:`~ccl_health.judge.finding.Finding` as JSON data, short:
    ``[fields of _BODY, baseline fields or None]``."""
    base = None if f.baseline is None else \
        list(dataclasses.astuple(f.baseline))
    return [getattr(f, name) for name in _BODY] + [base]


def finding_of(data, kind, run_id, time, key, size, case_id=None):
    """The :class:`~ccl_health.judge.finding.Finding` of
    :func:`finding_data` and its columns."""
    *fields, base = data
    return Finding(kind=kind, run_id=run_id, time=time, key=tuple(key),
                     size=size, baseline=None if base is None else
                     Baseline(*base), case_id=case_id,
                     **dict(zip(_BODY, fields)))
