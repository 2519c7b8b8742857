"""ccl-health-probe's -O 0 (NCCL's communicators made after the copy
matrix, the default) against -O 1 (made in a thread while the copies run):
per mode, the medians of the copy matrix's GB/s (every direction), its
ncclCommInitAll seconds, its own total and the process's wall (its start
and exit included: what a faster exit could save), over the runs of
benchmarks/device/hook_timing.sh.  -O 1 may become the hook's default only
where its copies' GB/s are those of -O 0 (within their spread) and its
total is lower.
    python3 benchmarks/device/_probe_overlap_table.py OUTPUT...
(each output named ...-O<mode>-<run>.txt)"""
import collections
import re
import statistics
import sys

ROW = re.compile(r'^(\d+|host) (\d+|host) \d+ [0-9.]+ ([0-9.]+)$', re.M)
NUMBERS = {'init': re.compile(r'^# nccl init ([0-9.]+) s', re.M),
           'total': re.compile(r'^# probe total ([0-9.]+) s$', re.M),
           # the process's wall, its start and exit included (the script's)
           'wall': re.compile(r'^# wall ([0-9.]+) s$', re.M)}


def main(paths):
    runs = collections.defaultdict(list)
    for path in paths:
        mode = re.search(r'-O(\d)-\d+\.txt$', path)
        if not mode:
            continue
        text = open(path, errors='replace').read()
        got = {k: float(m[1]) for k, p in NUMBERS.items()
               for m in [p.search(text)] if m}
        got['gbps'] = [float(m[3]) for m in ROW.finditer(text)]
        got['ok'] = 'total' in got and bool(got['gbps'])
        runs[int(mode[1])].append(got)
    print('\n## ccl-health-probe -O 0 (NCCL after the copies) and -O 1 (NCCL '
          'during the copies)\n')
    print('| -O | runs | complete | copy GB/s median | copy GB/s min | '
          'nccl init median s | probe total median s | process wall median '
          's |')
    print('|---|---|---|---|---|---|---|---|')
    for mode in sorted(runs):
        rs = runs[mode]
        ok = [r for r in rs if r['ok']]
        gbps = [g for r in ok for g in r['gbps']]

        def med(key):
            vals = [r[key] for r in ok if key in r]
            return f'{statistics.median(vals):.3f}' if vals else ''
        print(f'| {mode} | {len(rs)} | {len(ok)} | '
              f'{statistics.median(gbps) if gbps else 0:.1f} | '
              f'{min(gbps) if gbps else 0:.1f} | {med("init")} | '
              f'{med("total")} | {med("wall")} |')


if __name__ == '__main__':
    main(sys.argv[1:])
