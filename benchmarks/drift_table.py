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
   runs until a step of d at 0.8 % noise is flagged (1000 seeds).

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


def flagged(series):
    """{size: {run index: kind}} of the drop and drift findings."""
    out = collections.defaultdict(dict)
    for f in history.detect(records(series)):
        if f.kind in ('drop', 'drift'):
            out[f.size][int(f.run_id.split('-')[1])] = f.kind
    return out


def until_flagged(series, step):
    """{size: (runs after the step until the first flag or None, its kind,
    false alarms before the step)}."""
    out = {}
    for size, runs in flagged(series).items():
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
                'noise': {s: history.baseline([h[s] for h in healthy])
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


def table(res):
    r, lines = res['real'], []
    add = lines.append
    add('# Drift table (issue 13 part 4)\n')
    add(f'Detector: history.detect (large-drop rule, tolerance '
        f'{TOLERANCE:.0%}; drift: CUSUM k={history.DRIFT_K}, '
        f'h={history.DRIFT_H}, clip={history.DRIFT_CLIP}, noise floor '
        f'{history.DRIFT_MIN_NOISE:.1%}, minimum shift '
        f'{history.DRIFT_MIN_SHIFT:.0%}, {history.DRIFT_MIN_HISTORY} healthy '
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
    add('| setting | size | drop | runs | runs until flagged | by |')
    add('|---|---|---|---|---|---|')
    for label, per in r['B'].items():
        for s, v in per.items():
            add(f'| {label} | {format_size(s)} | {100 * v["drop"]:.1f} % | '
                f'{v["runs"]} | {v["until"] or "not flagged"} | '
                f'{v["kind"] or "-"} |')
    add(f'\nC. Graded drops applied to the real healthy noise (each of '
        f'{r["healthy_runs"]} rotations: {HEALTHY_BEFORE} healthy runs, then '
        f'10 runs x (1 - d)):\n')
    add('| drop d | size | flagged within 3 runs | median runs | max runs |'
        ' missed (of 10 runs) |')
    add('|---|---|---|---|---|---|')
    for d, v in r['C'].items():
        for s, st in v['per_size'].items():
            add(f'| {100 * float(d):.0f} % | {format_size(s)} | '
                f'{100 * st["within_3"]:.0f} % | {st["median"]} | '
                f'{st["max"]} | {st["missed"]} of {st["n"]} |')
    add('\nFalse alarms before the step in C: ' + ', '.join(
        f'{100 * float(d):.0f} %: {v["false_alarms_before"]}'
        for d, v in r['C'].items()))
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
    return '\n'.join(lines) + '\n'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seeds', type=int, default=1000)
    ap.add_argument('--out', help='write drift_table.md and .json here')
    ap.add_argument('--device', default=DEVICE,
                    help='a folder with raw/NNN-LABEL.out (the outputs of '
                         'benchmarks/device/drift_on_device.sh)')
    args = ap.parse_args()
    res = {'real': real(device_runs(args.device)), 'synthetic': synthetic(args.seeds)}
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
