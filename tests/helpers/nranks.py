"""An intra all_reduce capture of N ranks on one node, for the stand-ins
(tests/replay: all_reduce_perf, ccl-health-probe) where no machine of N
GPUs was lent (issue 46: 8 GPUs).  Built from the 2x H200 capture
(tests/fixtures/device/cap/intra: NCCL 2.28.3, nccl-tests 2.19.6), each
line as its program prints it for rank r of N:

- the output: nccl-tests' banner and header as captured, one rank line per
  rank (``"#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s"``,
  util.cu), each row through ``util_cu_row`` (helpers/ncclformats) with
  the captured busbw and the algbw and time N ranks give it (busbw = algbw
  x 2(N-1)/N, NCCL's all_reduce factor), the captured closing lines;
- each rank's debug log: rank 0's captured log with the fields NCCL's
  format strings print for rank r of N (its prefix ``host:pid:tid [dev]``,
  ``rank %d nranks %d cudaDev %d nvmlDev %d busId %lx``, ``rank %d nRanks
  %d nNodes %d localRanks %d localRank %d``, the ring ``Channel %02d/%02d
  : 0 1 ... N-1`` and ``Channel %02d/%d : %d[%d] -> %d[%d] via P2P/CUMEM``
  to the next rank of the ring); its ``Trees`` lines left out (their
  shape depends on N)."""

import os
import re

from conftest import REPO
from helpers.ncclformats import util_cu_row

SOURCE = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap', 'intra')
PID0 = 25480
BUSID0 = 0x60


def _rank_line(r):
    return '#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s' % (
        r, 0, PID0 + r, 'vm', r, f'0000:00:{6 + r:02x}', 'NVIDIA H200')


def _output(text, n):
    factor = 2 * (n - 1) / n
    out, ranks_done = [], False
    for line in text.splitlines():
        if line.startswith('#  Rank '):
            if not ranks_done:
                out += [_rank_line(r) for r in range(n)]
                ranks_done = True
            continue
        toks = line.split()
        if len(toks) == 13 and toks[0].isdigit():
            size, count = int(toks[0]), int(toks[1])
            halves = []
            for busbw in (float(toks[7]), float(toks[11])):
                algbw = busbw / factor
                t = size / (algbw * 1e3) if algbw else float(toks[5])
                halves.append((f'{t:.2f}', algbw, busbw))
            out.append(util_cu_row(size, count, halves).rstrip('\n'))
            continue
        out.append(line)
    return '\n'.join(out) + '\n'


def _log(text, r, n):
    pid = PID0 + r
    bus = f'{BUSID0 + 0x10 * r:x}'
    ring = ' '.join(str(i) for i in range(n))
    nxt = (r + 1) % n
    out = []
    for line in text.splitlines():
        if ' NCCL INFO Trees ' in line:
            continue
        line = re.sub(r'^vm:%d:(\d+) \[\d+\]' % PID0,
                      lambda m: f'vm:{pid}:'
                      f'{pid if m[1] == str(PID0) else m[1]} [{r}]', line)
        line = re.sub(r'rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 60',
                      f'rank {r} nranks {n} cudaDev {r} nvmlDev {r} '
                      f'busId {bus}', line)
        line = re.sub(r'rank 0 nranks 2 cudaDev 0 busId 60',
                      f'rank {r} nranks {n} cudaDev {r} busId {bus}', line)
        line = re.sub(r'rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0',
                      f'rank {r} nRanks {n} nNodes 1 localRanks {n} '
                      f'localRank {r}', line)
        line = re.sub(r'rank 0 nranks 2 total', f'rank {r} nranks {n} total',
                      line)
        line = re.sub(r'(Channel \d+/24 :) 0 1$', rf'\1 {ring}', line)
        line = re.sub(r'(Channel \d+/0 :) 0\[0\] -> 1\[1\]',
                      rf'\1 {r}[{r}] -> {nxt}[{nxt}]', line)
        line = line.replace('MNNVL busId 0x60', f'MNNVL busId 0x{bus}')
        line = line.replace('Affinity for GPU 0 ', f'Affinity for GPU {r} ')
        line = re.sub(r'Device 0 CPU core', f'Device {r} CPU core', line)
        out.append(line)
    return '\n'.join(out) + '\n'


def intra_capture(dst, n):
    """Writes the capture folder ``dst`` (stdout.txt, rc.txt, stderr.txt,
    one nccl-debug.vm.<pid>.log per rank) of an N-rank intra all_reduce;
    returns ``str(dst)``."""
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(SOURCE, 'stdout.txt')) as fp:
        text = fp.read()
    with open(os.path.join(dst, 'stdout.txt'), 'w') as fp:
        fp.write(_output(text, n))
    with open(os.path.join(SOURCE, f'nccl-debug.vm.{PID0}.log')) as fp:
        log = fp.read()
    for r in range(n):
        with open(os.path.join(dst, f'nccl-debug.vm.{PID0 + r}.log'),
                  'w') as fp:
            fp.write(_log(log, r, n))
    with open(os.path.join(dst, 'rc.txt'), 'w') as fp:
        fp.write('rc=0\n')
    open(os.path.join(dst, 'stderr.txt'), 'w').close()
    return str(dst)
