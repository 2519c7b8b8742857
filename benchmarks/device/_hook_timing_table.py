"""The table of benchmarks/device/hook_timing.sh: per GPU set and path, the
hook's wall time (median, max, runs) and its time outside the probes
(wall minus the probes' seconds in --json), then one line of each.
    python3 benchmarks/device/_hook_timing_table.py RUNS.tsv KEEP NGPU"""
import collections
import json
import os
import statistics
import sys

runs_tsv, keep, ngpu = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = collections.OrderedDict()
for line in open(runs_tsv):
    kind, label, i, rc, wall, text = line.rstrip('\n').split('\t', 5)
    try:
        doc = json.load(open(os.path.join(keep, f'{kind}-{label}-{i}.json')))
    except (OSError, ValueError):
        doc = {}
    probes = sum(p.get('seconds') or 0 for p in doc.get('probes', []))
    rows.setdefault((label, kind), []).append(
        (float(wall), float(wall) - probes, int(rc), text,
         doc.get('probe_path')))
print(f'# The hook as NHC runs it (env -i), {ngpu} GPU(s) on this node\n')
print('| GPUs | kind | median s | max s | runs | outside the probes, median s '
      '| exits |')
print('|---|---|---|---|---|---|---|')
for (label, kind), rs in rows.items():
    gpus = ngpu if label == 'all' else len(label.split(','))
    walls = [r[0] for r in rs]
    print(f'| {gpus} ({label}) | {kind} | {statistics.median(walls):.2f} | '
          f'{max(walls):.2f} | {len(rs)} | '
          f'{statistics.median(r[1] for r in rs):.2f} | '
          f'{",".join(sorted({str(r[2]) for r in rs}))} |')
print('\n## One line of each\n')
for (label, kind), rs in rows.items():
    print(f'- {label} {kind} ({rs[-1][4]}): `{rs[-1][3]}`')
