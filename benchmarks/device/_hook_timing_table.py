"""The table of benchmarks/device/hook_timing.sh: per GPU set and path, the
hook's wall time (median, max, runs) and its time outside the probes (wall
minus the probe programs' wall: --json's timings.probe, else each try's
processes counted once: the one probe process stands behind two probes of
a try, the all_reduce's and the copy matrix's), then the medians of the
phases --json's timings name (ccl_health/hook/timings.py), what became of
the probe process started ahead (--json's probe_ahead), then one line of
each.
    python3 benchmarks/device/_hook_timing_table.py RUNS.tsv KEEP NGPU"""
import collections
import json
import os
import statistics
import sys


def probes_wall(doc):
    """Seconds the probe programs ran, each process once."""
    timings = doc.get('timings') or {}
    if timings.get('probe') is not None:
        return timings['probe']
    one = str(doc.get('probe_path') or '').startswith('one process')
    tries = collections.defaultdict(list)
    for p in doc.get('probes', []):
        tries[p.get('attempt', 1)].append(p.get('seconds') or 0)
    return sum(max(s) if one else sum(s) for s in tries.values())


def main(runs_tsv, keep, ngpu):
    rows = collections.OrderedDict()
    for line in open(runs_tsv):
        kind, label, i, rc, wall, text = line.rstrip('\n').split('\t', 5)
        try:
            doc = json.load(open(os.path.join(keep,
                                              f'{kind}-{label}-{i}.json')))
        except (OSError, ValueError):
            doc = {}
        rows.setdefault((label, kind), []).append(
            (float(wall), float(wall) - probes_wall(doc), int(rc), text,
             doc.get('probe_path'), doc.get('timings') or {},
             doc.get('probe_ahead')))
    print(f'# The hook as NHC runs it (env -i), {ngpu} GPU(s) on this node\n')
    print('| GPUs | kind | median s | max s | runs | outside the probes, '
          'median s | exits |')
    print('|---|---|---|---|---|---|---|')
    for (label, kind), rs in rows.items():
        gpus = ngpu if label == 'all' else len(label.split(','))
        walls = [r[0] for r in rs]
        print(f'| {gpus} ({label}) | {kind} | {statistics.median(walls):.2f} '
              f'| {max(walls):.2f} | {len(rs)} | '
              f'{statistics.median(r[1] for r in rs):.2f} | '
              f'{",".join(sorted({str(r[2]) for r in rs}))} |')
    phases = []
    for rs in rows.values():
        for r in rs:
            phases += [k for k in r[5] if k not in phases]
    if phases:
        print('\n## Where the time went: --json timings, median s\n')
        print('| GPUs | kind | ' + ' | '.join(phases) + ' |')
        print('|---|---|' + '---|' * len(phases))
        for (label, kind), rs in rows.items():
            cells = []
            for k in phases:
                vals = [r[5][k] for r in rs if r[5].get(k) is not None]
                cells.append(f'{statistics.median(vals):.3f}' if vals
                             else '')
            print(f'| {label} | {kind} | ' + ' | '.join(cells) + ' |')
    print('\n## The probe process started ahead (--json probe_ahead)\n')
    for (label, kind), rs in rows.items():
        said = collections.Counter(
            str(r[6] or 'none started').split(': its go')[0] for r in rs)
        print(f'- {label} {kind}: ' + '; '.join(
            f'{n} x {what}' for what, n in said.most_common()))
    print('\n## One line of each\n')
    for (label, kind), rs in rows.items():
        print(f'- {label} {kind} ({rs[-1][4]}): `{rs[-1][3]}`')


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
