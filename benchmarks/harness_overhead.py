"""Harness overhead: rerun, bare, the exact nccl-tests command of each sweep
of a finished suite run (same binary, same sizes, same environment minus
NCCL's debug logging, same launcher) and print busbw suite / bare per
transport and size.  Target: >= 0.99 at sizes >= 64 MiB.

    python benchmarks/harness_overhead.py <suite output dir> [--json out.json]
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ccl_health.evidence import nccltests  # noqa: E402
from ccl_health.units import format_size  # noqa: E402

BIG = 64 << 20


def bare_rerun(stage, launcher):
    with open(os.path.join(stage, 'result.json')) as fp:
        doc = json.load(fp)
    env = dict(os.environ)
    for kv in doc.get('env', []):
        k, _, v = kv.partition('=')
        if k.startswith(('NCCL_', 'FI_', 'LD_LIBRARY_PATH', 'OMPI_ALLOW')):
            env[k] = v
    for k in ('NCCL_DEBUG', 'NCCL_DEBUG_FILE', 'NCCL_DEBUG_SUBSYS'):
        env.pop(k, None)
    nranks = len(doc['config']['devices'])
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'bare.json')
        args = list(doc['args'])
        j = args.index('-J')
        args[j + 1] = out
        cmd = launcher + ['-np', str(nranks)] + args
        p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=900)
        js = open(out).read() if os.path.exists(out) else None
        return nccltests.parse(p.stdout, js), doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('output')
    ap.add_argument('--json')
    ap.add_argument('--launcher', default='mpirun')
    args = ap.parse_args()
    table = {}
    for stage in sorted(glob.glob(os.path.join(
            args.output, 'stage', '*', '*', '*', 'AllReduceSweep_*'))):
        if not os.path.exists(os.path.join(stage, 'result.json')):
            continue
        suite = nccltests.parse(open(os.path.join(stage, 'rfm_job.out')).read(),
                                open(os.path.join(stage, 'result.json')).read())
        bare, doc = bare_rerun(stage, args.launcher.split())
        env = dict(kv.split('=', 1) for kv in doc.get('env', []) if '=' in kv)
        transport = ('intra' if env.get('NCCL_P2P_DISABLE') != '1' else
                     'net-socket' if env.get('NCCL_NET_PLUGIN') == 'none'
                     else 'net-plugin')
        b = bare.by_size()
        rows = []
        for r in suite.rows:
            if r.size in b and b[r.size].busbw:
                rows.append((r.size, r.busbw, b[r.size].busbw,
                             r.busbw / b[r.size].busbw))
        table[transport] = rows
    report = {}
    for t, rows in table.items():
        big = [ratio for size, _, _, ratio in rows if size >= BIG]
        report[t] = {'sizes': [{'size': s, 'suite': a, 'bare': b,
                                'ratio': round(r, 4)} for s, a, b, r in rows],
                     'median_ratio_ge_64MiB': (round(statistics.median(big), 4)
                                               if big else None),
                     'min_ratio_ge_64MiB': round(min(big), 4) if big else None}
        print(f'{t}: suite/bare busbw at >= 64 MiB: median '
              f'{report[t]["median_ratio_ge_64MiB"]}, min '
              f'{report[t]["min_ratio_ge_64MiB"]}')
        for s, a, b, r in rows:
            if s >= BIG:
                print(f'   {format_size(s):>7}  suite {a:8.2f}  bare {b:8.2f}'
                      f'  ratio {r:.3f}')
    if args.json:
        with open(args.json, 'w') as fp:
            json.dump(report, fp, indent=1)


if __name__ == '__main__':
    main()
