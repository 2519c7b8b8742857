"""The step of first_week.sh: which NCCL setting lowers the nightly's
judged sizes by 3-5 %, from bare ``all_reduce_perf`` outputs.

    python3 _first_week_step.py DIR

``DIR/base-N.out``: the runs without a setting; ``DIR/cand-LABEL.out``
with ``DIR/cand-LABEL.env`` (``NAME=VALUE``): a run with one setting.
Prints every size's busbw (nccl-tests' columns: the better of out-of-place
and in-place, as the suite reads them) and each candidate's change against
the median of the bare runs; writes ``DIR/choice.env`` (``NAME=VALUE``) with
the candidate whose mean change over the judged sizes is -3 to -5 % and no
size outside -0.5 to -8 % (every size lower, none a collapse), the one
nearest -4 %; exit 0 with a choice, 3 without one."""

import glob
import os
import statistics
import sys

#: the sizes the nightly judges for a drift (64 MiB and more), up to the
#: nights' -S max_size=1G
JUDGED = (64 << 20, 128 << 20, 256 << 20, 512 << 20, 1 << 30)
WANT = (3.0, 5.0)          # percent, the mean change over JUDGED
EACH = (0.5, 8.0)          # percent, each size


def busbw(path):
    """``{size: GB/s}`` of an nccl-tests output."""
    out = {}
    try:
        with open(path) as fp:
            lines = fp.read().splitlines()
    except OSError:
        return out
    for line in lines:
        f = line.split()
        if len(f) < 13 or not f[0].isdigit():
            continue
        try:
            out[int(f[0])] = max(float(f[7]), float(f[11]))
        except ValueError:
            continue
    return out


def main(d):
    bases = [busbw(p) for p in sorted(glob.glob(os.path.join(d, 'base-*.out')))]
    bases = [b for b in bases if all(s in b for s in JUDGED)]
    if not bases:
        print(f'no bare run without a setting measured every judged size '
              f'({d}/base-*.out)')
        return 3
    base = {s: statistics.median(b[s] for b in bases) for s in JUDGED}
    noise = {s: (max(b[s] for b in bases) - min(b[s] for b in bases)) /
             base[s] * 100 for s in JUDGED}
    head = 'label'.ljust(28) + ''.join(f'{s >> 20:>10}M' for s in JUDGED)
    print(head + '   mean')
    print(f'bare (median of {len(bases)})'.ljust(28) +
          ''.join(f'{base[s]:>11.2f}' for s in JUDGED))
    print('bare spread %'.ljust(28) +
          ''.join(f'{noise[s]:>11.2f}' for s in JUDGED))
    best = None
    for p in sorted(glob.glob(os.path.join(d, 'cand-*.out'))):
        label = os.path.basename(p)[5:-4]
        with open(p[:-4] + '.env') as fp:
            setting = fp.read().strip()
        got = busbw(p)
        if not all(s in got for s in JUDGED):
            print(f'{label:<28}incomplete ({setting})')
            continue
        drop = [(1 - got[s] / base[s]) * 100 for s in JUDGED]
        mean = sum(drop) / len(drop)
        ok = WANT[0] <= mean <= WANT[1] and all(EACH[0] <= x <= EACH[1]
                                                 for x in drop)
        print(f'{label:<28}' + ''.join(f'{-x:>+10.2f}%' for x in drop) +
              f' {-mean:+.2f}%  {setting}{"  <- fits" if ok else ""}')
        if ok and (best is None or abs(mean - 4) < abs(best[0] - 4)):
            best = (mean, setting)
    if best is None:
        print(f'no setting gave a {WANT[0]:g}-{WANT[1]:g} % step at every '
              f'judged size')
        return 3
    with open(os.path.join(d, 'choice.env'), 'w') as fp:
        fp.write(best[1] + '\n')
    print(f'chosen: {best[1]} ({-best[0]:+.2f} % mean at '
          f'{", ".join(f"{s >> 20}M" for s in JUDGED)})')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
