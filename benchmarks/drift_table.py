"""The drift table (issue 13 part 4): how many runs until a sustained drop
is flagged (``history.detect``: the large-drop rule and the drift
detector), and the false alarms over healthy runs.

Real series: ``tests/fixtures/device/drift/raw/*.out``, the nccl-tests
outputs of ``benchmarks/device/drift_on_device.sh`` on one H100 (two ranks
on GPU 0 over NET/Socket, all_reduce 64/128/256 MiB, 8 iterations), read
with the suite's parser (busbw: the better of in- and out-of-place, as
recorded).  Sections:

A. false alarms over the 30 healthy runs (recorded order and its 29
   rotations), every size;
B. the real degradations measured (NCCL settings), after the 30 healthy
   runs: runs until flagged;
C. graded drops on the real noise: a rotation of the healthy series, its
   last 10 runs scaled by (1 - d): runs until flagged (30 rotations);
D. synthetic Gaussian series (seeded): false alarms over 1000 healthy
   series of 35 runs at 0.8 % and 2 % noise (20 judged runs each), and
   runs until a step of d at 0.8 % noise is flagged (1000 seeds);
E. judged from a calibration (issue 28: the history seeded by the baseline
   ``scripts/calibrate --db`` records, :class:`history.Level`): false alarms
   over the healthy runs after a calibration from the first 2 or 5 runs
   (every rotation); the real degradations and graded drops after a
   calibration from 2 runs and 5 healthy runs; synthetic steps at 0.5 and
   1 % noise (calibration from 2 runs, 5 healthy runs, then the step) and
   false alarms over 1000 healthy series of 2 + 33 runs.

    python benchmarks/drift_table.py [--seeds 1000] [--out DIR]
"""

import argparse
import collections
import json
import os
import random
import re
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from ccl_health.judge import history
from ccl_health.judge import baselines
from ccl_health.evidence import nccltests  # noqa: E402
from ccl_health.units import format_size  # noqa: E402

DEVICE = os.path.join(REPO, 'tests', 'fixtures', 'device', 'drift')
TOLERANCE = 0.10          # the example: a 10 % reference tolerance
HEALTHY_BEFORE = 20       # runs before the step (C, D)


def device_runs(folder=DEVICE):
    """[(label, {size: busbw})] in run order, from the raw outputs."""
    out = []
    for name in sorted(os.listdir(os.path.join(folder, 'raw'))):
        m = re.match(r'(\d+)-(.+)\.out$', name)
        if not m:
            continue
        with open(os.path.join(folder, 'raw', name)) as fp:
            res = nccltests.parse_text(fp.read())
        out.append((m.group(2), {r.size: r.busbw for r in res.rows}))
    return out


def records(series, case='AllReduceSweep %transport=net-socket'):
    """History records of ``series`` (a list of {size: busbw}), one run
    each, in order."""
    out = []
    for i, sizes in enumerate(series):
        for size, busbw in sizes.items():
            out.append({
                'run_id': f'run-{i:03d}', 'time': f'2026-11-23T{i:06d}',
                'case_name': case, 'case_verdict': 'pass', 'size': size,
                'busbw': busbw, 'tolerance': TOLERANCE, 'system': 'h100',
                'partition': 'gpu', 'transport': 'net-socket',
                'collective': 'all_reduce', 'nodes': 2, 'ranks': 2,
                'algo': 'default'})
    return out


def calibration(series, runs):
    """The baseline rows (the store's ``baselines``) a calibration from the
    first ``runs`` runs of ``series`` records (:func:`history.measured`)."""
    rows = []
    for size in series[0]:
        median, noise = baselines.measured([s[size] for s in series[:runs]])
        rows.append({
            'system': 'h100', 'partition': 'gpu', 'transport': 'net-socket',
            'collective': 'all_reduce', 'nodes': 2, 'ranks': 2,
            'algo': 'default', 'kind': 'sweep', 'size': size,
            'median': median, 'noise': noise, 'n': runs,
            'runs': [f'run-{i:03d}' for i in range(runs)],
            'run_id': f'run-{runs - 1:03d}',
            'run_time': f'2026-11-23T{runs - 1:06d}', 'created': '',
            'source': 'benchmark'})
    return rows


def flagged(series, calibrated=None):
    """{size: {run index: kind}} of the drop and drift findings;
    ``calibrated``: judged from a calibration from that many first runs."""
    out = collections.defaultdict(dict)
    rows = calibration(series, calibrated) if calibrated else ()
    for f in history.detect(records(series), baselines=rows):
        if f.kind in ('drop', 'drift'):
            out[f.size][int(f.run_id.split('-')[1])] = f.kind
    return out


def until_flagged(series, step, calibrated=None):
    """{size: (runs after the step until the first flag or None, its kind,
    false alarms before the step)}."""
    out = {}
    for size, runs in flagged(series, calibrated).items():
        after = sorted(i for i in runs if i >= step)
        out[size] = (after[0] - step + 1 if after else None,
                     runs[after[0]] if after else '',
                     sum(1 for i in runs if i < step))
    for size in series[0]:
        out.setdefault(size, (None, '', 0))
    return out


def rotations(values):
    return [values[r:] + values[:r] for r in range(len(values))]


def summary(delays):
    got = [d for d in delays if d is not None]
    return {'n': len(delays), 'missed': len(delays) - len(got),
            'within_3': sum(1 for d in got if d <= 3) / len(delays),
            'median': statistics.median(got) if got else None,
            'max': max(got) if got else None}


def real(runs):
    healthy = [s for label, s in runs if label == 'healthy']
    sizes = sorted(healthy[0])
    out = {'healthy_runs': len(healthy), 'sizes': sizes}
    # A. false alarms over the healthy runs
    fa, judged = collections.Counter(), 0
    recorded = {s: len(r) for s, r in flagged(healthy).items()}
    for rot in rotations(healthy):
        for size, runs_ in flagged(rot).items():
            fa[size] += len(runs_)
        judged += len(rot) - 5
    out['A'] = {'series': len(healthy), 'judged_runs_per_size': judged,
                'recorded_order': {s: recorded.get(s, 0) for s in sizes},
                'false_alarms': {s: fa[s] for s in sizes},
                'noise': {s: baselines.baseline([h[s] for h in healthy])
                          .drift_noise() / statistics.median(
                              [h[s] for h in healthy]) for s in sizes}}
    # B. real degradations
    base = {s: statistics.median(h[s] for h in healthy) for s in sizes}
    out['B'] = {}
    for label in dict.fromkeys(lb for lb, _ in runs):
        if label.startswith('healthy'):
            continue
        bad = [s for lb, s in runs if lb == label]
        res = until_flagged(healthy + bad, len(healthy))
        out['B'][label] = {s: {'drop': 1 - statistics.median(
            b[s] for b in bad) / base[s], 'runs': len(bad),
            'until': res[s][0], 'kind': res[s][1]} for s in sizes}
    # C. graded drops on the real noise
    out['C'] = {}
    for d in (0.01, 0.02, 0.03, 0.04, 0.05, 0.07, 0.10):
        delays, kinds, before = collections.defaultdict(list), \
            collections.Counter(), 0
        for rot in rotations(healthy):
            series = rot[:HEALTHY_BEFORE] + [
                {s: v * (1 - d) for s, v in h.items()}
                for h in rot[HEALTHY_BEFORE:]]
            for size, (n, kind, fa_) in until_flagged(
                    series, HEALTHY_BEFORE).items():
                delays[size].append(n)
                kinds[kind or 'missed'] += 1
                before += fa_
        out['C'][d] = {'per_size': {s: summary(delays[s]) for s in sizes},
                       'kinds': dict(kinds), 'false_alarms_before': before}
    return out


#: E: the calibration's runs, then healthy runs before the step (the issue's
#: device case: 2 nights, calibrate, 5 healthy nights)
CALIBRATED, SINCE = 2, 5


def from_calibration(runs, seeds):
    """E: judged from a calibration (real series, then synthetic)."""
    healthy = [s for label, s in runs if label == 'healthy']
    sizes = sorted(healthy[0])
    out = {'false_alarms': {}, 'B': {}, 'C': {}, 'synthetic': {}}
    for first in (2, 5):
        fa, recorded = collections.Counter(), {}
        for r, rot in enumerate(rotations(healthy)):
            for size, runs_ in flagged(rot, first).items():
                fa[size] += len(runs_)
                if r == 0:
                    recorded[size] = len(runs_)
        out['false_alarms'][first] = {
            'judged_runs_per_size': len(healthy) * (len(healthy) - first),
            'recorded_order': {s: recorded.get(s, 0) for s in sizes},
            'rotations': {s: fa[s] for s in sizes}}
    start = healthy[:CALIBRATED + SINCE]
    base = {s: statistics.median(h[s] for h in healthy) for s in sizes}
    for label in dict.fromkeys(lb for lb, _ in runs):
        if label.startswith('healthy'):
            continue
        bad = [s for lb, s in runs if lb == label]
        res = until_flagged(start + bad, len(start), CALIBRATED)
        out['B'][label] = {s: {'drop': 1 - statistics.median(
            b[s] for b in bad) / base[s], 'runs': len(bad),
            'until': res[s][0], 'kind': res[s][1]} for s in sizes}
    step = CALIBRATED + SINCE
    for d in (0.02, 0.03, 0.04, 0.06):
        delays, before = collections.defaultdict(list), 0
        for rot in rotations(healthy):
            series = rot[:step] + [{s: v * (1 - d) for s, v in h.items()}
                                   for h in rot[step:step + 10]]
            for size, (n, _, fa_) in until_flagged(
                    series, step, CALIBRATED).items():
                delays[size].append(n)
                before += fa_
        out['C'][d] = {'per_size': {s: summary(delays[s]) for s in sizes},
                       'false_alarms_before': before}
    size = 128 << 20
    for noise in (0.005, 0.01):
        alarms = series_fa = 0
        for seed in range(seeds):
            rng = random.Random(20_000 + seed)
            s = [{size: 100 * (1 + rng.gauss(0, noise))} for _ in range(35)]
            n = sum(len(r) for r in flagged(s, CALIBRATED).values())
            series_fa += n > 0
            alarms += n
        steps = {}
        for d in (0.03, 0.04, 0.06):
            delays, before = [], 0
            for seed in range(seeds):
                rng = random.Random(30_000 + seed)
                s = [{size: 100 * (1 + rng.gauss(0, noise)) *
                      (1 - d if i >= step else 1)}
                     for i in range(step + 10)]
                n, _, fa_ = until_flagged(s, step, CALIBRATED)[size]
                delays.append(n)
                before += fa_
            steps[d] = dict(summary(delays), false_alarms_before=before)
        out['synthetic'][noise] = {
            'null': {'series': seeds, 'runs_each': 35,
                     'judged_runs_each': 35 - CALIBRATED,
                     'series_with_alarm': series_fa, 'alarms': alarms},
            'steps': steps}
    return out


def synthetic(seeds):
    size = 128 << 20
    out = {'seeds': seeds, 'null': {}, 'steps': {}}
    for noise in (0.008, 0.02):
        series_fa, runs_fa = 0, 0
        for seed in range(seeds):
            rng = random.Random(seed)
            s = [{size: 100 * (1 + rng.gauss(0, noise))} for _ in range(35)]
            n = sum(len(r) for r in flagged(s).values())
            series_fa += n > 0
            runs_fa += n
        out['null'][noise] = {'series': seeds, 'runs_each': 35,
                              'judged_runs_each': 35 - 15,
                              'series_with_alarm': series_fa,
                              'alarms': runs_fa}
    for d in (0.02, 0.025, 0.03, 0.04, 0.05):
        delays, before = [], 0
        for seed in range(seeds):
            rng = random.Random(10_000 + seed)
            s = [{size: 100 * (1 + rng.gauss(0, 0.008)) *
                  (1 - d if i >= HEALTHY_BEFORE else 1)}
                 for i in range(HEALTHY_BEFORE + 10)]
            n, _, fa_ = until_flagged(s, HEALTHY_BEFORE)[size]
            delays.append(n)
            before += fa_
        out['steps'][d] = dict(summary(delays), false_alarms_before=before)
    return out


def degradation_rows(b):
    """The table of the real degradations ``b`` (per setting, per size:
    the drop, the runs, the run that flagged it and by which rule)."""
    rows = ['| setting | size | drop | runs | runs until flagged | by |',
            '|---|---|---|---|---|---|']
    for label, per in b.items():
        for s, v in per.items():
            rows.append(f'| {label} | {format_size(s)} | '
                        f'{100 * v["drop"]:.1f} % | {v["runs"]} | '
                        f'{v["until"] or "not flagged"} | '
                        f'{v["kind"] or "-"} |')
    return rows


def graded_rows(c, before):
    """The table of the graded drops ``c`` (per drop, per size: how soon
    flagged, how many missed), then the line ``before``: the false alarms
    before the step, per drop."""
    rows = ['| drop d | size | flagged within 3 runs | median runs | max runs '
            '| missed (of 10 runs) |', '|---|---|---|---|---|---|']
    for d, v in c.items():
        for s, st in v['per_size'].items():
            rows.append(f'| {100 * float(d):.0f} % | {format_size(s)} | '
                        f'{100 * st["within_3"]:.0f} % | {st["median"]} | '
                        f'{st["max"]} | {st["missed"]} of {st["n"]} |')
    rows.append(f'\n{before}: ' + ', '.join(
        f'{100 * float(d):.0f} %: {v["false_alarms_before"]}'
        for d, v in c.items()))
    return rows


def table(res):
    r, lines = res['real'], []
    add = lines.append
    add('# Drift table (issue 13 part 4)\n')
    add(f'Detector: history.detect (large-drop rule, tolerance '
        f'{TOLERANCE:.0%}; drift: CUSUM k={baselines.DRIFT_K}, '
        f'h={baselines.DRIFT_H}, clip={baselines.DRIFT_CLIP}, noise floor '
        f'{baselines.DRIFT_MIN_NOISE:.1%}, minimum shift '
        f'{baselines.DRIFT_MIN_SHIFT:.0%}, {baselines.DRIFT_MIN_HISTORY} healthy '
        f'runs first).\n')
    add('## Real series: one H100, two ranks over NET/Socket '
        f'({r.get("device", "tests/fixtures/device/drift")})\n')
    add(f'A. False alarms over the {r["healthy_runs"]} healthy runs (recorded '
        f'order + {r["healthy_runs"] - 1} rotations, '
        f'{r["A"]["judged_runs_per_size"]} judged runs per size):')
    for s in r['sizes']:
        add(f'- {format_size(s)}: {r["A"]["recorded_order"][s]} in the '
            f'recorded order ({r["healthy_runs"] - 15} judged runs), '
            f'{r["A"]["false_alarms"][s]} over all rotations '
            f'(noise {100 * r["A"]["noise"][s]:.1f} %)')
    add('\nB. Real degradations (NCCL settings) after the healthy runs:\n')
    lines += degradation_rows(r['B'])
    add(f'\nC. Graded drops applied to the real healthy noise (each of '
        f'{r["healthy_runs"]} rotations: {HEALTHY_BEFORE} healthy runs, then '
        f'10 runs x (1 - d)):\n')
    lines += graded_rows(r['C'], 'False alarms before the step in C')
    syn = res['synthetic']
    add(f'\n## Synthetic series (Gaussian noise, {syn["seeds"]} seeds)\n')
    for noise, v in syn['null'].items():
        add(f'- healthy, noise {100 * float(noise):.1f} %: '
            f'{v["series_with_alarm"]} of {v["series"]} series of '
            f'{v["runs_each"]} runs with a false alarm ({v["alarms"]} alarms '
            f'over {v["series"] * v["judged_runs_each"]} judged runs)')
    add('\n| step at 0.8 % noise | flagged within 3 runs | median runs | '
        'max runs | missed (of 10 runs) |')
    add('|---|---|---|---|---|')
    for d, v in syn['steps'].items():
        add(f'| {100 * float(d):.1f} % | {100 * v["within_3"]:.1f} % | '
            f'{v["median"]} | {v["max"]} | {v["missed"]} |')
    if 'E' in res:
        lines += e_table(res['E'], r['sizes'])
    return '\n'.join(lines) + '\n'


def e_table(e, sizes):
    lines = []
    add = lines.append
    add('\n## E. Judged from a calibration (issue 28)\n')
    add('The history seeded by the baseline scripts/calibrate --db records '
        '(history.Level: the median and noise of the calibration\'s runs, '
        'joined by the healthy runs since; history.few_noise), from the '
        'first run after it.\n')
    add('False alarms over the healthy runs after a calibration from the '
        'first runs (recorded order; all rotations):')
    for first, v in e['false_alarms'].items():
        add(f'- calibrated from {first} runs ('
            f'{v["judged_runs_per_size"]} judged runs per size over the '
            f'rotations): ' + ', '.join(
                f'{format_size(s)} {v["recorded_order"][s]}; '
                f'{v["rotations"][s]}' for s in sizes))
    add(f'\nReal degradations after a calibration from {CALIBRATED} runs and '
        f'{SINCE} healthy runs:\n')
    lines += degradation_rows(e['B'])
    add(f'\nGraded drops on the real noise (each rotation: calibration from '
        f'{CALIBRATED} runs, {SINCE} healthy runs, then 10 runs x (1 - d)):\n')
    lines += graded_rows(e['C'], 'False alarms before the step')
    add(f'\nSynthetic (Gaussian noise; calibration from {CALIBRATED} runs, '
        f'{SINCE} healthy runs, then the step):\n')
    add('| noise | step | flagged within 3 runs | median runs | max runs | '
        'missed (of 10 runs) | false alarms before |')
    add('|---|---|---|---|---|---|---|')
    for noise, v in e['synthetic'].items():
        for d, st in v['steps'].items():
            add(f'| {100 * float(noise):.1f} % | {100 * float(d):.0f} % | '
                f'{100 * st["within_3"]:.1f} % | {st["median"]} | '
                f'{st["max"]} | {st["missed"]} | '
                f'{st["false_alarms_before"]} |')
    for noise, v in e['synthetic'].items():
        n = v['null']
        add(f'- healthy, noise {100 * float(noise):.1f} %: '
            f'{n["series_with_alarm"]} of {n["series"]} series of '
            f'{n["runs_each"]} runs with a false alarm ({n["alarms"]} alarms '
            f'over {n["series"] * n["judged_runs_each"]} judged runs)')
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seeds', type=int, default=1000)
    ap.add_argument('--out', help='write drift_table.md and .json here')
    ap.add_argument('--device', default=DEVICE,
                    help='a folder with raw/NNN-LABEL.out (the outputs of '
                         'benchmarks/device/drift_on_device.sh)')
    args = ap.parse_args()
    runs = device_runs(args.device)
    res = {'real': real(runs), 'synthetic': synthetic(args.seeds),
           'E': from_calibration(runs, args.seeds)}
    res['real']['device'] = os.path.relpath(os.path.abspath(args.device), REPO)
    text = table(res)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, 'drift_table.md'), 'w') as fp:
            fp.write(text)
        with open(os.path.join(args.out, 'drift_table.json'), 'w') as fp:
            json.dump(res, fp, indent=1, default=str)


if __name__ == '__main__':
    main()
