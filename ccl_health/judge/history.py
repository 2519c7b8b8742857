"""Judging a run against its own history: a drop after maintenance, an
intermittent collapse, a recovery.

For each key (system, partition, transport, collective, nodes, ranks, algo,
message size) the baseline is the median of the recent healthy values and
its noise the MAD (scaled to a standard deviation).  A value is a drop when
it falls below the median by more than the larger of the tolerance and
``k`` times the noise (:meth:`Baseline.allowed_drop`).

A key's history starts at a :class:`Level`: what a calibration measured
(``scripts/calibrate``, from run reports or from the database: the median
and noise of its runs, :mod:`ccl_health.db.levels`; the reference file's
calibrated entry where the database holds no newer level) or a run an
operator accepted (``scripts/report accept``: its value, with the noise of
the key's history before it at least, :func:`parts`).  From its first run
on, a key is judged against the level (:func:`seeded`: its median and
noise, joined by the healthy values since), until its own history is long
enough (``min_history`` healthy values for a drop, :data:`DRIFT_MIN_HISTORY`
for a drift).  A key with no level is judged on its history alone, and
not before ``min_history`` healthy values exist
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
thousands of pair steps never join the nightly's series.  Only the verdicts of
:data:`ccl_health.judge.verdicts.IN_BASELINE` (measured, not a drop) feed a baseline: a ``contended``, ``aborted``,
``could-not-check`` or any other case never does.

Below this module, and named here too: the baseline, the level and the
drift constants (:mod:`ccl_health.judge.baselines`), the findings and the
drop rule of one value (:mod:`ccl_health.judge.finding`), the steps of one
value at a time (:mod:`ccl_health.judge.stream`)."""

import dataclasses
import statistics

from ccl_health.judge.series import KEY, has_history, series_key, simulated
from ccl_health.judge.baselines import (
    DRIFT_CLIP, DRIFT_H, DRIFT_K, DRIFT_MIN_HISTORY, DRIFT_MIN_NOISE,
    DRIFT_MIN_RUNS, DRIFT_MIN_SHIFT, DRIFT_MIN_SIZE, Level, baseline,
    few_noise, seeded)
from ccl_health.judge.stream import Cusum, SeriesJudge
from ccl_health.judge.verdicts import IN_BASELINE


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
            if r['case_verdict'] in IN_BASELINE and not r.get('_drop')]


def _noise(level, values, min_history=5, window=30):
    """The relative noise known at the end of a history part: seeded by
    its level while the part is short, else its own (of two to
    ``min_history`` values without a level: :func:`few_noise`, as a
    calibration of those runs would record it); None: not known."""
    if level is not None and level.median is not None and \
            len(values) < DRIFT_MIN_HISTORY:
        base = seeded(level, values)
    elif len(values) >= min_history:
        base = baseline(values[-window:])
    elif level is None and len(values) >= 2:
        med = statistics.median(values)
        return few_noise(values) / med if med > 0 else None
    else:
        return level.noise if level is not None else None
    return base.drift_noise(floor=0.0) / base.median \
        if base.median > 0 else None


def _larger(*noises):
    known = [n for n in noises if n is not None]
    return max(known) if known else None


def parts(series, key, size, accepted=(), baselines=(), window=30):
    """``series`` (one key and size, in time order) cut at its levels:
    ``(level or None, records)`` pairs, the records judged against it
    (those of an older part no longer count).  An acceptance's level is the
    accepted run's value (when it is healthy), with the noise known before
    it: the larger of the noise of the part before (else the last one
    known: a calibration's) and that of the key's last ``window`` healthy
    values before it, whatever their parts (:func:`_noise` without a
    level).  A level of one run is never judged tighter than the history
    it replaced: a calibration of two runs, or a part too short to judge
    on its own, understates the noise of latency-bound sizes that vary
    10-30 % night to night (issue 40).  The history before an acceptance
    usually holds the step it accepts: its noise then counts the step too
    (a drift within it waits for the nights after the acceptance to be a
    history of their own: :data:`DRIFT_MIN_HISTORY`), but a drop is never
    told from a spread the key always had.  A generator: a part's
    noise is read once the parts before it were judged (their drops
    marked)."""
    cuts = levels(key, size, accepted, baselines)
    cur, part, ci = None, [], 0
    known = None                    # the last noise known
    before = []                     # the healthy values judged so far
    for rec in series + [None]:
        while ci < len(cuts) and (rec is None or cuts[ci].starts_after(rec)):
            if part or cur is not None:
                yield cur, part
                values = _healthy(part)
                known = _noise(cur, values, window=window) or known
                before = (before + values)[-window:]
            cur, part, ci = cuts[ci], [], ci + 1
            if cur.source == 'acceptance':
                first = next((r for r in series if r['run_id'] ==
                              cur.run_id), None)
                ok = first is not None and \
                    first['case_verdict'] in IN_BASELINE
                cur = dataclasses.replace(
                    cur, median=first['busbw'] if ok else None,
                    noise=_larger(known, _noise(None, before,
                                                window=window)))
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
    (the state the database keeps, :mod:`ccl_health.db.keystate`)."""
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
            last = _detect_series(findings, key, size, series, runs,
                                  drift_min_size, kw, level)
        if judges is not None:
            judges[(key, size)] = last
    return findings


def _detect_series(findings, key, size, series, runs, drift_min_size, kw,
                   level=None):
    """The findings of one part of a key and size's history, judged record
    by record (:class:`ccl_health.judge.stream.SeriesJudge`: the same
    steps as the database's state kept per key); those of the records
    ``runs`` says yes to appended to ``findings``.  Returns the judge (its
    state after the last record)."""
    series_judge = SeriesJudge(key, size, level, drift_min_size, **kw)
    drifts = []
    for rec in series:
        found, drifted = series_judge.step(rec)
        if runs is None or runs(rec):
            findings += found
            drifts += drifted
    f = series_judge.intermittent()
    if f is not None and (runs is None or runs(series[-1])):
        findings.append(f)
    findings += drifts
    return series_judge
