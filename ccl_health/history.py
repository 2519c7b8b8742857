"""Judging a run against its own history: a drop after maintenance, an
intermittent collapse, a recovery.

For each key (system, partition, transport, collective, nodes, ranks, algo,
message size) the baseline is the median of the recent healthy values and
its noise the MAD (scaled to a standard deviation).  A value is a drop when
it falls below the median by more than the larger of the tolerance and
``k`` times the noise (:meth:`Baseline.allowed_drop`); nothing is judged
before ``min_history`` healthy values exist.

This is the one noise rule of the suite: ``calibrate`` gives a size whose
runs are noisier than the entry's tolerance the same ``allowed_drop`` as its
own tolerance (with its ``k``, rounded up to a whole percent)."""

import dataclasses
import json
import math
import statistics
from typing import Optional

KEY = ('system', 'partition', 'transport', 'collective', 'nodes', 'ranks',
       'algo')
HEALTHY = ('pass', 'below-reference')   # measured, not broken


@dataclasses.dataclass
class Baseline:
    median: float
    noise: float          # 1.4826 * MAD
    n: int

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
    there is none."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return Baseline(med, 1.4826 * mad, len(values))


@dataclasses.dataclass
class Finding:
    kind: str             # 'drop' | 'recovery' | 'intermittent'
    run_id: str
    time: str
    key: tuple
    size: int
    value: float
    baseline: Optional[Baseline]
    threshold: Optional[float]
    note: str = ''

    def line(self):
        from .units import format_size
        where = '/'.join(str(k) for k in self.key[:3]) + \
            f' {self.key[3]} {self.key[4]}n/{self.key[5]}r'
        if self.kind == 'drop':
            pct = 100 * (1 - self.value / self.baseline.median)
            return (f'DROP {where} {format_size(self.size)}: '
                    f'{self.value:.2f} GB/s vs baseline '
                    f'{self.baseline.median:.2f} (-{pct:.0f}%, threshold '
                    f'{self.threshold:.2f}, n={self.baseline.n}) in run '
                    f'{self.run_id}')
        return f'{self.kind.upper()} {where} {format_size(self.size)}: ' \
               f'{self.note} (run {self.run_id})'


def _series(records):
    """{(key, size): [record, ...]} in time order."""
    out = {}
    for r in sorted(records, key=lambda r: (r['time'], r['run_id'])):
        if r.get('size') is None or r.get('busbw') is None:
            continue
        key = tuple(r[k] for k in KEY)
        out.setdefault((key, r['size']), []).append(r)
    return out


def judge(history, current, tolerance=0.05, k=3.0, min_history=5,
          window=30):
    """Is ``current`` (a record) a drop against ``history`` (earlier
    records of the same key and size)?  Returns a Finding or None."""
    healthy = [r['busbw'] for r in history
               if r['case_verdict'] in HEALTHY and not r.get('_drop')]
    healthy = healthy[-window:]
    if len(healthy) < min_history:
        return None
    base = baseline(healthy)
    tol = current.get('tolerance') or tolerance
    thr = base.threshold(tol, k)
    if current['busbw'] < thr:
        return Finding('drop', current['run_id'], current['time'],
                       tuple(current[k] for k in KEY), current['size'],
                       current['busbw'], base, thr)
    return None


def detect(records, run_id=None, **kw):
    """Findings for the run ``run_id`` (default: every run, in order, each
    against the runs before it).  Also: a recovery (a key back above its
    threshold right after a drop) and an intermittent pattern (at least two
    drops among the last ``window`` values of a key, healthy ones between)."""
    findings = []
    window = kw.get('window', 30)
    for (key, size), series in _series(records).items():
        drops = []
        for i, rec in enumerate(series):
            if rec['case_verdict'] not in HEALTHY:
                continue
            f = judge(series[:i], rec, **kw)
            if f:
                rec['_drop'] = True
                drops.append(i)
            if run_id is not None and rec['run_id'] != run_id:
                continue
            if f:
                findings.append(f)
            elif drops and drops[-1] == i - 1:
                findings.append(Finding(
                    'recovery', rec['run_id'], rec['time'], key, size,
                    rec['busbw'], None, None,
                    f'back to {rec["busbw"]:.2f} GB/s after a drop in run '
                    f'{series[i - 1]["run_id"]}'))
        recent = [d for d in drops if d >= len(series) - window]
        if len(recent) >= 2 and (run_id is None or
                                 series[-1]['run_id'] == run_id):
            healthy_between = any(
                j not in drops for j in range(recent[0], recent[-1]))
            if healthy_between:
                findings.append(Finding(
                    'intermittent', series[-1]['run_id'], series[-1]['time'],
                    key, size, series[-1]['busbw'], None, None,
                    f'{len(recent)} drops among the last '
                    f'{min(window, len(series))} runs, healthy runs between'))
    return findings


ATTRIBUTION_FIELDS = ('nccl_version', 'plugin_version', 'libfabric_version',
                      'provider', 'cuda_driver', 'driver', 'tests_version',
                      'suite_revision', 'nodelist')


def attribute(cases, finding):
    """What changed between the last good run of the finding's key and the
    flagged one: versions, node list, environment.  ``cases``: the store's
    case rows."""
    same = [c for c in cases if tuple(c[k] for k in KEY) == finding.key]
    bad = next((c for c in same if c['run_id'] == finding.run_id), None)
    if bad is None:
        return []
    good = [c for c in same if c['time'] < bad['time'] and
            c['verdict'] == 'pass']
    if not good:
        return ['no earlier passing run of this configuration']
    good = good[-1]
    changes = [f'{f}: {good[f]} -> {bad[f]}' for f in ATTRIBUTION_FIELDS
               if (good.get(f) or '') != (bad.get(f) or '')]
    genv = json.loads(good.get('env_json') or '{}')
    benv = json.loads(bad.get('env_json') or '{}')
    for var in sorted(set(genv) | set(benv)):
        if var in ('NCCL_DEBUG_FILE', 'CCL_HEALTH_RUN_ID',
                   'ccl_health.node_state', 'node_state', 'probes'):
            continue
        if genv.get(var) != benv.get(var):
            changes.append(f'env {var}: {genv.get(var)} -> {benv.get(var)}')
    return changes or [f'nothing recorded changed since run {good["run_id"]} '
                       f'({good["time"]})']
