"""Proof of the history detection on recorded runs (issue: drops over time).

Every healthy run is judged leave-one-out against all the OTHER healthy
runs (none may be flagged); every degraded run is judged against all the
healthy runs (it must be flagged at the affected sizes).  Prints the figures
and writes them as JSON.

    python benchmarks/history_proof.py --db hist.db --degraded RUN_ID[,..] \
        [--json out.json]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ccl_health.judge import baselines
from ccl_health.judge import finding
from ccl_health.db import store  # noqa: E402
from ccl_health.units import format_size  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--db', required=True)
    ap.add_argument('--degraded', default='',
                    help='run ids recorded with a real degradation')
    ap.add_argument('--transport', default='intra')
    ap.add_argument('--json')
    args = ap.parse_args()
    degraded = {r for r in args.degraded.split(',') if r}
    with store.open_store(args.db) as db:
        recs = [r for r in db.records() if r['transport'] == args.transport
                and r['size'] is not None and r['busbw'] is not None]
    runs = sorted({r['run_id'] for r in recs})
    healthy = [r for r in runs if r not in degraded]
    by_run = {}
    for r in recs:
        by_run.setdefault(r['run_id'], []).append(r)
    out = {'healthy_runs': len(healthy), 'degraded_runs': sorted(degraded),
           'false_alarms': [], 'detected': {}, 'missed': {}}
    for run in runs:
        others = [r for r in recs if r['run_id'] in healthy and
                  r['run_id'] != run]
        for rec in by_run[run]:
            hist = [r for r in others if r['size'] == rec['size']]
            f = finding.judge(hist, dict(rec, case_verdict='pass'))
            if run in degraded:
                bucket = 'detected' if f else 'missed'
                out[bucket].setdefault(run, []).append({
                    'size': rec['size'], 'busbw': rec['busbw'],
                    'baseline': baselines.baseline(
                        [h['busbw'] for h in hist]).median})
            elif f:
                out['false_alarms'].append({'run': run, 'size': rec['size'],
                                            'busbw': rec['busbw'],
                                            'threshold': f.threshold})
    print(f'{len(healthy)} healthy runs, leave-one-out: '
          f'{len(out["false_alarms"])} false alarm(s)')
    for run in sorted(degraded):
        hit = out['detected'].get(run, [])
        miss = out['missed'].get(run, [])
        print(f'degraded run {run}: flagged at {len(hit)} of '
              f'{len(hit) + len(miss)} sizes')
        for h in hit:
            print(f'   {format_size(h["size"]):>7}  {h["busbw"]:8.2f} GB/s '
                  f'vs baseline {h["baseline"]:8.2f}')
        for m in miss:
            print(f'   {format_size(m["size"]):>7}  {m["busbw"]:8.2f} GB/s '
                  f'vs baseline {m["baseline"]:8.2f}  (not flagged)')
    if args.json:
        with open(args.json, 'w') as fp:
            json.dump(out, fp, indent=1)
    return 1 if out['false_alarms'] else 0


if __name__ == '__main__':
    sys.exit(main())
