"""Judging a run against its own history: a drop after maintenance, an
intermittent collapse, a recovery.

For each key (system, partition, transport, collective, nodes, ranks, algo,
message size) the baseline is the median of the recent healthy values and
its noise the MAD (scaled to a standard deviation).  A value is a drop when
it falls below the median by more than the larger of the tolerance and
``k`` times the noise (:meth:`Baseline.allowed_drop`).

A key's history starts at a :class:`Level`: what a calibration measured
(``scripts/calibrate --db``: the median and noise of its runs) or a run an
operator accepted (``scripts/report accept``).  From its first run on, a key
is judged against the level (:func:`seeded`: its median and noise, joined
by the healthy values since), until its own history is long enough
(``min_history`` healthy values for a drop, :data:`DRIFT_MIN_HISTORY` for a
drift).  A key with no level is judged on its history alone, and not before
``min_history`` healthy values exist
(:func:`ccl_health.judge.standing.standing` says which).

This is the one noise rule of the suite: ``calibrate`` gives a size whose
runs are noisier than the entry's tolerance the same ``allowed_drop`` as its
own tolerance (with its ``k``, rounded up to a whole percent).

A small lasting drop (a few percent, under the tolerance) is a *drift*:
:func:`sustained_drops` runs a one-sided CUSUM on robust z-scores of each
key and size (by default only sizes of at least :data:`DRIFT_MIN_SIZE`)
and flags a run once the shift it sums up is both significant against the
key's own recorded noise and at least :data:`DRIFT_MIN_SHIFT` large.

The key of a series carries the kind of case (:func:`kind_of`: a sweep and
the health hook's probe of the same transport, collective and ranks are
two series, never one) and, for a health probe, its node: each node's
probes are its own series, judged against that node's own baseline.  A
fleet run's steps (``scripts/fleet``) have no history here: the fleet
compares the nodes of one run with each other (stragglers, pairs), and its
thousands of pair steps never join the nightly's series.  Only healthy verdicts (:data:`HEALTHY`: measured
and not broken) feed a baseline: a ``contended``, ``aborted``,
``could-not-check`` or any other case never does."""

import dataclasses
import math
import statistics
from typing import Optional

from ccl_health.judge.series import (  # noqa: F401  (the history's names)
    FLEET_NAMES, FLEET_SOURCE, HEALTH_NAMES, HEALTH_SOURCE, HISTORY_KINDS,
    KEY, has_history, kind_of, node_of, series_key, simulated)


HEALTHY = ('pass', 'below-reference')   # measured, not broken

#: -- the sustained-shift (drift) detector: one-sided CUSUM on robust
#: z-scores ``z = (x - median) / noise`` of the key's healthy baseline.
#: ``S = max(0, S - max(z, -DRIFT_CLIP) - DRIFT_K)``; a run is flagged when
#: ``S > DRIFT_H``, the run itself is low (``z < -DRIFT_K``: it added to
#: ``S``), at least :data:`DRIFT_MIN_RUNS` runs are in the excursion (since
#: ``S`` left 0) and the mean shift of the last :data:`DRIFT_MIN_RUNS` of
#: them is at least :data:`DRIFT_MIN_SHIFT`.
#:
#: Why these numbers (measured by ``benchmarks/drift_table.py``, results
#: in ``benchmarks/results/drift_table.md``): a 3 % step at 0.8 % noise is
#: a 3.75-sigma shift per run; with slack ``k = 1.5`` each run adds ~2.25
#: to ``S``, so ``h = 3.5`` is crossed after 2 runs and the flag comes at
#: the third (about 9 series in 10; a 4 % step: 99 in 100).  Under the null
#: (no shift, known baseline) the run length to a false alarm of
#: ``k = 1.5, h = 3.5`` is ~1e4 runs (Siegmund's approximation); the
#: three-run and 2 % minimum-shift rules cut it further: 0 false alarms in
#: 1000 seeded healthy series of 35 runs at 0.8 % noise.  A smaller ``k``
#: (1.0) finds 2 % steps a little sooner but quadruples the false alarms at
#: 2 % noise on a baseline of 15 values (whose median is itself ~0.3 sigma
#: off); a larger ``h`` (5) costs the third run.
DRIFT_K = 1.5
DRIFT_H = 3.5
#: one run counts at most this many noise units: a single collapse is the
#: large-drop rule's business (``DRIFT_CLIP - DRIFT_K = 2.5 < DRIFT_H``), two
#: slow runs together reach the threshold only with a third (measured on the
#: real 128 MiB series: a clip of 5.5 raised 13 false alarms, 4 none)
DRIFT_CLIP = 4.0
#: the noise is never taken below this fraction of the median: a key whose
#: baseline happens to be nearly constant (MAD ~ 0; nccl-tests prints two
#: decimals: at 1.85 GB/s one step is 0.5 %) would make every wiggle
#: significant
DRIFT_MIN_NOISE = 0.005
#: a shift smaller than this (relative) is no drop, however significant
#: (a super-quiet key moving by 1 %)
DRIFT_MIN_SHIFT = 0.02
#: sizes judged for drift by default (small sizes are latency-bound and
#: noisy in other ways)
DRIFT_MIN_SIZE = 64 << 20
#: healthy values a key needs before its drift is judged (the noise of a
#: baseline of fewer is too uncertain: 10 values doubled the false alarms)
DRIFT_MIN_HISTORY = 15
#: the weight of the interquartile noise in :meth:`Baseline.drift_noise`:
#: real healthy runs are skewed (the 256 MiB device series: 60 % of the
#: runs at the ceiling, slow stretches of -2..-7 % below it), which the
#: centre's spread misses (0.8 %) and the IQR sees (3.6 %); weight 1 cost
#: the 3 % step at 0.8 % Gaussian noise its third run in 1 series of 5
#: (78 % flagged within 3 runs), 0.75 keeps 91 % and leaves no false alarm
#: in the recorded healthy series (benchmarks/results/drift_table.md)
DRIFT_IQR_WEIGHT = 0.75
#: a drift is sustained: at least this many runs below (two slow runs in a
#: row are not a lasting drop)
DRIFT_MIN_RUNS = 3


@dataclasses.dataclass
class Baseline:
    median: float
    noise: float          # 1.4826 * MAD
    n: int
    #: the standard deviation of the values within 4 MAD-noises of the
    #: median: as blind to a stray collapse as the MAD, and a steadier
    #: estimate of the spread of a few values (the drift detector's noise)
    spread: Optional[float] = None

    #: the interquartile range / 1.349: the spread of a skewed baseline
    #: (a bandwidth has a ceiling, slow runs spread below it) that the
    #: symmetric estimates miss
    iqr_noise: Optional[float] = None

    def drift_noise(self, floor=DRIFT_MIN_NOISE):
        """The noise the drift detector divides by: the largest of
        :attr:`spread` (else :attr:`noise`), :data:`DRIFT_IQR_WEIGHT` x
        :attr:`iqr_noise` and ``floor`` x the median."""
        spread = self.noise if self.spread is None else self.spread
        return max(spread, DRIFT_IQR_WEIGHT * (self.iqr_noise or 0.0),
                   floor * abs(self.median))

    def noise_fraction(self, k):
        """``k`` times the noise as a fraction of the median (infinite
        at a median of 0: nothing is known to be steady)."""
        if self.median <= 0:
            return math.inf if self.noise else 0.0
        return k * self.noise / self.median

    def allowed_drop(self, tolerance, k, whole_percent=False):
        """How far below the median a value may fall, as a fraction: the
        larger of ``tolerance`` and ``k`` times the noise.
        ``whole_percent``: the noise term rounded up to a whole percent
        first (what a reference file holds)."""
        noise = self.noise_fraction(k)
        if whole_percent and math.isfinite(noise):
            noise = math.ceil(100 * noise) / 100
        return max(tolerance, noise)

    def threshold(self, tolerance, k):
        """The lowest healthy value: the median less :meth:`allowed_drop`."""
        if self.median <= 0:
            return self.median - k * self.noise
        return self.median * (1 - self.allowed_drop(tolerance, k))


def baseline(values):
    """The :class:`Baseline` of ``values`` (None ignored), or None when
    there is none.  (One sort: ``statistics.median`` and ``quantiles``'
    exclusive method on it, their numbers exactly.)"""
    values = [v for v in values if v is not None]
    if not values:
        return None
    ordered = sorted(values)
    med = _median_sorted(ordered)
    mad = _median_sorted(sorted([abs(v - med) for v in values]))
    noise = 1.4826 * mad
    near = [v for v in values if abs(v - med) <= 4 * noise]
    spread = _pstdev(near) if len(near) > 1 else noise
    iqr = 0.0
    n = len(ordered)
    if n >= 4:
        q = []
        for i in (1, 3):                # statistics.quantiles, exclusive
            j = min(max(i * (n + 1) // 4, 1), n - 1)
            delta = i * (n + 1) - j * 4
            q.append((ordered[j - 1] * (4 - delta) + ordered[j] * delta) / 4)
        iqr = (q[1] - q[0]) / 1.349
    return Baseline(med, noise, n, spread, iqr)


def _median_sorted(ordered):
    n = len(ordered)
    i = n // 2
    return ordered[i] if n % 2 else (ordered[i - 1] + ordered[i]) / 2


def _pstdev(values):
    """``statistics.pstdev`` in floats (it sums exact fractions: the hot
    spot of a long history, issue 30)."""
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) /
                     len(values))


def _centre(values):
    """The median and MAD noise of ``values`` (a :class:`Baseline` without
    the drift detector's spreads): all a drop is judged with."""
    med = _median_sorted(sorted(values))
    mad = _median_sorted(sorted([abs(v - med) for v in values]))
    return Baseline(med, 1.4826 * mad, len(values))


@dataclasses.dataclass
class Level:
    """A baseline a person set for a key and size: what a calibration
    measured (a row of the store's ``baselines``) or a run accepted as the
    new level (a row of its ``acceptances``: the accepted run's value, the
    noise known before it).  The history after it is judged against it from
    its first run."""
    source: str                 # 'calibration' | 'acceptance'
    run_id: str                 # the newest run it was made from
    run_time: str
    median: Optional[float]     # None: the accepted run measured no value
    noise: Optional[float]      # relative; None: not known
    #: how many runs it stands for beside the history after it (the
    #: accepted run is the first value of that history: 0)
    n: int = 0
    created: str = ''
    runs: tuple = ()
    ident: Optional[int] = None

    def starts_after(self, rec):
        """Is the record ``rec`` judged against this level?  A
        calibration's history starts after its newest run, an acceptance's
        at the accepted run."""
        at = (rec['time'], rec['run_id'])
        cut = (self.run_time, self.run_id)
        return at >= cut if self.source == 'acceptance' else at > cut

    def text(self):
        """``the calibration of 2026-11-24 (2 runs, newest run-002)`` or
        ``the level accepted from run X (#3, 2026-11-24)``."""
        if self.source == 'acceptance':
            return (f'the level accepted from run {self.run_id} (#'
                    f'{self.ident}, {self.created[:10]})')
        return (f'the calibration of {self.created[:10]} ({self.n} run'
                f'{"s" if self.n != 1 else ""}, newest {self.run_id})')


def few_noise(values):
    """The noise of a few values (a calibration's, those since a level):
    the larger of :meth:`Baseline.drift_noise` (no floor: the floor is the
    judge's) and the lower semi-deviation from the median scaled to a
    standard deviation (``sqrt(2 mean(min(0, x - median)^2))``).  A
    bandwidth has a ceiling and its slow runs spread below it: of five runs
    of the 256 MiB series recorded on the device (H100, drift) four at
    the ceiling and one 6 % below, the IQR sees 1.6 %, the lower tail 3.7 %;
    the slow stretches of -3..-7 % that follow are that key's normal, not a
    drift (benchmarks/results/drift_table.md, section E)."""
    base = baseline(values)
    low = math.sqrt(2 * statistics.fmean(
        min(0.0, v - base.median) ** 2 for v in values))
    return max(base.drift_noise(floor=0.0), low)


def measured(values):
    """``(median, relative noise)`` of a calibration's values at one size
    (:func:`few_noise`, as a fraction of the median)."""
    med = statistics.median(values)
    return med, (few_noise(values) / med if med > 0 else 0.0)


def seeded(level, values):
    """The :class:`Baseline` of the healthy ``values`` since ``level``,
    seeded by it: the median of the level's median (counted as its ``n``
    runs, at most :data:`DRIFT_MIN_HISTORY`) and the values; the noise the
    larger of the level's and, from 3 values on, the values' own
    (:func:`few_noise`).  The judge's floors apply on top."""
    pool = [level.median] * min(level.n, DRIFT_MIN_HISTORY) + list(values)
    med = statistics.median(pool or [level.median])
    noise = (level.noise or 0.0) * abs(med)
    if len(values) >= 3:
        noise = max(noise, few_noise(values))
    return Baseline(med, noise, len(pool), noise, 0.0)


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
    #: database's: kept with it, :mod:`ccl_health.db.state`)
    case_id: Optional[int] = dataclasses.field(default=None, compare=False)

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
    """A sustained shift found by :func:`sustained_drops` at one run."""
    index: int            # the run flagged (index into the values)
    start: int            # the first run of the shift
    shift: float          # mean relative shift of the last runs (negative)
    noise: float          # the relative noise the z-scores used
    baseline: Baseline
    score: float          # the CUSUM statistic


def sustained_drops(values, exclude=(), k=DRIFT_K, h=DRIFT_H,
                    clip=DRIFT_CLIP, min_noise=DRIFT_MIN_NOISE,
                    min_shift=DRIFT_MIN_SHIFT, min_history=DRIFT_MIN_HISTORY,
                    min_runs=DRIFT_MIN_RUNS, window=30, level=None):
    """The runs of one key and size in a sustained drop: ``{index:
    Shift}``.  ``values``: the series in time order, ``None`` where a run
    is not healthy (it is skipped: it neither feeds the baseline nor the
    sum).  ``exclude``: indices that may be judged but never join the
    baseline (single-run drops).

    One-sided CUSUM on robust z-scores (see :data:`DRIFT_K`): the
    baseline is the median and :meth:`Baseline.drift_noise` of the last
    ``window`` healthy values before the current excursion (the run where
    the sum last left 0), so a shift never lowers its own baseline; the
    runs of an excursion join the baseline only when the sum comes back to
    0 without a flag.  Once flagged, every later run of the excursion is
    flagged too while it is low (the drop lasts until the key is back).

    ``level``: a :class:`Level` the series starts at: until ``min_history``
    healthy values exist the baseline is :func:`seeded` by it (judged from
    the first run), instead of nothing judged.  The steps are
    :class:`ccl_health.judge.stream.Cusum`'s (one value at a time)."""
    from ccl_health.judge.stream import Cusum
    exclude = set(exclude)
    cusum = Cusum(k, h, clip, min_noise, min_shift, min_history, min_runs,
                  window, level)
    out = {}
    for i, x in enumerate(values):
        if x is not None:
            sh = cusum.step(i, x, i in exclude)
            if sh is not None:
                out[i] = sh
    return out


def _series(records):
    """{(key, size): [record, ...]} in time order (key: :func:`series_key`),
    of the keys that have a history (:func:`has_history`); a simulated
    run's numbers are not measurements."""
    out = {}
    for r in sorted(records, key=lambda r: (r['time'], r['run_id'])):
        if r.get('size') is None or r.get('busbw') is None or simulated(r):
            continue
        key = series_key(r)
        if has_history(key):
            out.setdefault((key, r['size']), []).append(r)
    return out


def judge(history, current, tolerance=0.05, k=3.0, min_history=5,
          window=30, level=None):
    """Is ``current`` (a record) a drop against ``history`` (earlier
    records of the same key and size, since ``level`` where there is one:
    until ``min_history`` healthy values exist the baseline is
    :func:`seeded` by it)?  Returns a Finding or None."""
    healthy = [r['busbw'] for r in history
               if r['case_verdict'] in HEALTHY and not r.get('_drop')]
    return judge_recent(healthy[-window:], current, tolerance, k,
                        min_history, level)


def judge_recent(healthy, current, tolerance=0.05, k=3.0, min_history=5,
                 level=None):
    """:func:`judge` from the key's last ``window`` healthy values."""
    if len(healthy) >= min_history:
        base = _centre(healthy)
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


def accepts(acc, key, size):
    """Does the acceptance row ``acc`` (scripts/report accept) or baseline
    row (scripts/calibrate) name the history key ``key`` at ``size``?  Its
    empty fields match anything."""
    fields = dict(zip(KEY + ('kind',), key))
    fields['size'] = size
    for name, want in fields.items():
        have = acc.get(name)
        if have is not None and have != want:
            return False
    return True


def levels(key, size, accepted=(), baselines=()):
    """The :class:`Level` s of a key and size, in the order their history
    starts: the recorded baselines (the store's ``baselines``) and the
    active acceptances (``acceptances``; their median and noise are known
    only from the history: :func:`parts`)."""
    out = [Level('calibration', b['run_id'], b['run_time'], b['median'],
                 b['noise'], b['n'], b['created'], tuple(b['runs']),
                 b.get('id'))
           for b in baselines if accepts(b, key, size)]
    out += [Level('acceptance', a['run_id'], a['run_time'], None, None, 0,
                  a['created'], (a['run_id'],), a['id'])
            for a in accepted
            if not a.get('undone_at') and accepts(a, key, size)]
    return sorted(out, key=lambda lv: (lv.run_time, lv.run_id,
                                       lv.source != 'acceptance'))


def _healthy(part):
    return [r['busbw'] for r in part
            if r['case_verdict'] in HEALTHY and not r.get('_drop')]


def _noise(level, values, min_history=5, window=30):
    """The relative noise known at the end of a history part: seeded by
    its level while the part is short, else its own; None: not known."""
    if level is not None and level.median is not None and \
            len(values) < DRIFT_MIN_HISTORY:
        base = seeded(level, values)
    elif len(values) >= min_history:
        base = baseline(values[-window:])
    else:
        return level.noise if level is not None else None
    return base.drift_noise(floor=0.0) / base.median \
        if base.median > 0 else None


def parts(series, key, size, accepted=(), baselines=(), window=30):
    """``series`` (one key and size, in time order) cut at its levels:
    ``(level or None, records)`` pairs, the records judged against it
    (those of an older part no longer count).  An acceptance's level is the
    accepted run's value (when it is healthy), with the noise known before
    it (the part before, else the last calibration's).  A generator: a
    part's noise is read once the parts before it were judged (their
    drops marked)."""
    cuts = levels(key, size, accepted, baselines)
    cur, part, ci = None, [], 0
    known = None                    # the last noise known
    for rec in series + [None]:
        while ci < len(cuts) and (rec is None or cuts[ci].starts_after(rec)):
            if part or cur is not None:
                yield cur, part
                known = _noise(cur, _healthy(part), window=window) or known
            cur, part, ci = cuts[ci], [], ci + 1
            if cur.source == 'acceptance':
                first = next((r for r in series if r['run_id'] ==
                              cur.run_id), None)
                ok = first is not None and \
                    first['case_verdict'] in HEALTHY
                cur = dataclasses.replace(
                    cur, median=first['busbw'] if ok else None, noise=known)
        if rec is not None:
            part.append(rec)
    yield cur, part


def detect(records, run_id=None, drift_min_size=DRIFT_MIN_SIZE,
           accepted=(), baselines=(), runs=None, judges=None, **kw):
    """Findings for the run ``run_id`` (default: every run, in order, each
    against the runs before it; ``runs``: only those runs, or the records
    a function of a record says yes to).  Also: a
    recovery (a key back above its threshold right after a drop), an
    intermittent pattern (at least two
    drops among the last ``window`` values of a key, healthy ones between)
    and a drift (a sustained drop of a few percent, :func:`sustained_drops`)
    at sizes of at least ``drift_min_size`` (None: no drift judged); a run
    that is a drop at a size is not also a drift there.  ``accepted``: the
    acceptance rows (:meth:`ccl_health.db.store.Store.acceptances`),
    ``baselines``: the recorded baselines
    (:meth:`ccl_health.db.store.Store.baselines`): a key's history restarts
    at each, judged against it from its first run (:func:`parts`).  Each
    value is judged once, from the key's last ``window`` healthy values
    (and its level): the time is linear in the records given.
    ``judges``: a dict given each key and size's
    :class:`ccl_health.judge.stream.SeriesJudge` after its last record
    (the state the database keeps, :mod:`ccl_health.db.state`)."""
    findings = []
    window = kw.get('window', 30)
    if run_id is not None:
        runs = {run_id} if runs is None or run_id in runs else set()
    if runs is not None and not callable(runs):
        runs = (lambda rs: lambda rec: rec['run_id'] in rs)(
            runs if isinstance(runs, (set, frozenset)) else set(runs))
    for (key, size), whole in _series(records).items():
        for level, series in parts(whole, key, size, accepted, baselines,
                                   window):
            judge = _detect_series(findings, key, size, series, runs,
                                   drift_min_size, kw, level)
        if judges is not None:
            judges[(key, size)] = judge
    return findings


def _detect_series(findings, key, size, series, runs, drift_min_size, kw,
                   level=None):
    """The findings of one part of a key and size's history, judged record
    by record (:class:`ccl_health.judge.stream.SeriesJudge`: the same
    steps as the database's state kept per key); those of the records
    ``runs`` says yes to appended to ``findings``.  Returns the judge (its
    state after the last record)."""
    from ccl_health.judge.stream import SeriesJudge
    judge = SeriesJudge(key, size, level, drift_min_size, **kw)
    drifts = []
    for rec in series:
        found, drifted = judge.step(rec)
        if runs is None or runs(rec):
            findings += found
            drifts += drifted
    f = judge.intermittent()
    if f is not None and (runs is None or runs(series[-1])):
        findings.append(f)
    findings += drifts
    return judge
