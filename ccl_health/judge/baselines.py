"""The baseline of a history key's healthy values and the level a person
set for it: the numbers the history judge (:mod:`ccl_health.judge.history`)
and its steps one value at a time (:mod:`ccl_health.judge.stream`) judge
against.  :class:`Baseline` (median, MAD noise and the drift detector's
spreads) and :func:`baseline`; a :class:`Level` (a calibration, an accepted
run) and the baseline :func:`seeded` by it, and the drift detector's
constants (which verdicts feed a baseline:
:data:`ccl_health.judge.verdicts.IN_BASELINE`).  Below both judges:
what they share lives here, once."""

import dataclasses
import math
import statistics
from typing import Optional


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


def centre(values):
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
