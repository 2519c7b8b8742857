"""The copy-engine bandwidth of a node's GPU links, read from the two
programs that measure it in one process:

* ``ccl-health-links`` (``builders/src/ccl_health_links.cu``, installed
  beside nccl-tests' binaries): header lines starting with ``#``
  (``# gpu 0 0000:19:00.0 NVIDIA H100 80GB HBM3``, ``# peer 0 1 yes``,
  ``# bytes 268435456 repeats 5 warmup 1``, ``# init 0.671 s``), one line
  per measured direction ``SRC DST BYTES SECONDS GB/s`` (SRC / DST: a GPU
  index or ``host``), ``# done N directions in X s (total Y s)`` last; a
  CUDA / HIP error is one ``# error: ...`` line.
* NVIDIA's ``nvbandwidth`` (text output, ``output.cpp`` and
  ``inline_common.h`` of github.com/NVIDIA/nvbandwidth): ``Running
  <testcase>.``, a description line, then a matrix: a header of column
  indices (``setw(10)``), one row per GPU (``setw(2)`` index, ``setw(10)``
  values with two decimals, ``N/A`` where nothing was measured: the
  diagonal and pairs without peer access), a blank line and ``SUM <testcase>
  <sum>``.  ``device_to_device_memcpy_write_ce``: the row GPU writes into
  the column GPU (data flows row -> column); ``..._read_ce``: the row GPU
  reads from the column GPU (data flows column -> row).

Pure: no GPU, no ReFrame.  The verdict on a result is
:func:`ccl_health.judge.linkjudge.judge_links`'s."""

import dataclasses
import math
import re
from typing import Dict, List, Optional, Tuple

#: the program the builders install beside nccl-tests / rccl-tests
PROGRAM = 'ccl-health-links'
#: the same source built with NCCL / RCCL: the copy matrix, then the
#: all_reduce of every GPU, in one process (``builders/nccl_tests.py``)
PROBE_PROGRAM = 'ccl-health-probe'
NVBANDWIDTH = 'nvbandwidth'

#: what a direction is, by its ends (the keys of a reference's
#: ``peer_copy.gbps``)
GPU_TO_GPU, IN_GPU, HOST_TO_GPU, GPU_TO_HOST = (
    'gpu_to_gpu', 'in_gpu', 'host_to_gpu', 'gpu_to_host')
KINDS = (GPU_TO_GPU, IN_GPU, HOST_TO_GPU, GPU_TO_HOST)


@dataclasses.dataclass
class Link:
    """One measured direction: ``src`` / ``dst`` are GPU indices (as the
    program numbers its visible GPUs) or ``'host'``."""
    src: str
    dst: str
    bytes: int
    seconds: float
    gbps: float

    @property
    def kind(self):
        if self.src == 'host':
            return HOST_TO_GPU
        if self.dst == 'host':
            return GPU_TO_HOST
        return IN_GPU if self.src == self.dst else GPU_TO_GPU

    def name(self, label=str):
        """``GPU 0->1``, ``GPU 0 (inside)``, ``host->GPU 0``,
        ``GPU 0->host``; ``label`` turns the program's GPU index into the
        node's (the hook's visible GPUs)."""
        def g(x):
            return 'host' if x == 'host' else label(int(x))
        if self.kind == IN_GPU:
            return f'GPU {g(self.src)} (inside)'
        if self.kind == HOST_TO_GPU:
            return f'host->GPU {g(self.dst)}'
        if self.kind == GPU_TO_HOST:
            return f'GPU {g(self.src)}->host'
        return f'GPU {g(self.src)}->{g(self.dst)}'


@dataclasses.dataclass
class LinksResult:
    tool: str
    #: index -> "bus id name" as the program printed it
    gpus: Dict[int, str] = dataclasses.field(default_factory=dict)
    links: List[Link] = dataclasses.field(default_factory=list)
    #: directed pairs (a, b) the program says cannot peer (a cannot reach
    #: b's memory)
    no_peer: List[Tuple[int, int]] = dataclasses.field(default_factory=list)
    #: directed pairs the program says can peer
    peer: List[Tuple[int, int]] = dataclasses.field(default_factory=list)
    bytes: Optional[int] = None
    init_s: Optional[float] = None
    copy_s: Optional[float] = None
    total_s: Optional[float] = None
    #: the closing line was printed
    complete: bool = False
    errors: List[str] = dataclasses.field(default_factory=list)
    #: lines neither header nor table nor known (kept for the reason)
    unknown: List[str] = dataclasses.field(default_factory=list)

    @property
    def gpu_count(self):
        return len(self.gpus)

    def expected_directions(self):
        """The (src, dst) directions the program must have measured: every
        ordered pair of GPUs that can peer both ways; with one GPU, the
        copy inside it and host<->GPU."""
        if self.gpu_count == 1:
            return [('0', '0'), ('0', 'host'), ('host', '0')]
        can = set(self.peer)
        return [(str(a), str(b)) for a in sorted(self.gpus)
                for b in sorted(self.gpus)
                if a != b and (a, b) in can and (b, a) in can]


_ROW = re.compile(r'^(\d+|host)\s+(\d+|host)\s+(\d+)\s+(\S+)\s+(\S+)$')
_GPU = re.compile(r'^#\s*gpu\s+(\d+)\s+(.*)$')
_PEER = re.compile(r'^#\s*peer\s+(\d+)\s+(\d+)\s+(yes|no)$')
_BYTES = re.compile(r'^#\s*bytes\s+(\d+)\b')
_INIT = re.compile(r'^#\s*init\s+(\S+)\s+s$')
_DONE = re.compile(r'^#\s*done\s+(\d+)\s+directions\s+in\s+(\S+)\s+s\s+'
                   r'\(total\s+(\S+)\s+s\)$')
_ERROR = re.compile(r'^#\s*(error|usage error):\s*(.*)$')


def _float(text):
    try:
        return float(text)
    except ValueError:
        return math.nan


def parse_links(text):
    """A :class:`LinksResult` from ``ccl-health-links``' output."""
    res = LinksResult(PROGRAM)
    for raw in (text or '').splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _ROW.match(line)
        if m:
            res.links.append(Link(m[1], m[2], int(m[3]), _float(m[4]),
                                  _float(m[5])))
            continue
        if m := _GPU.match(line):
            res.gpus[int(m[1])] = m[2].strip()
        elif m := _PEER.match(line):
            (res.peer if m[3] == 'yes' else res.no_peer).append(
                (int(m[1]), int(m[2])))
        elif m := _BYTES.match(line):
            res.bytes = int(m[1])
        elif m := _INIT.match(line):
            res.init_s = _float(m[1])
        elif m := _DONE.match(line):
            res.complete = int(m[1]) == len(res.links)
            if not res.complete:
                res.errors.append(f'the closing line counts {m[1]} '
                                  f'directions, the table has '
                                  f'{len(res.links)}')
            res.copy_s, res.total_s = _float(m[2]), _float(m[3])
        elif m := _ERROR.match(line):
            res.errors.append(f'{m[1]}: {m[2]}')
        elif not line.startswith('#'):
            res.unknown.append(line)
    return res


_RUNNING = re.compile(r'^Running\s+(\S+?)\.?$')
_SUM = re.compile(r'^SUM\s+(\S+)\s+(\S+)$')
_NVB_ERROR = re.compile(r'^(ERROR|Waived)\b:?\s*(.*)$')
_NVB_DEVICE = re.compile(r'^Device\s+(\d+):\s+(.*)$')
#: the testcases whose matrices are GPU->GPU copies, and which way the data
#: flows: 'row' (row -> column) or 'column' (column -> row)
NVB_FLOW = {'device_to_device_memcpy_write_ce': 'row',
            'device_to_device_memcpy_read_ce': 'column'}


def parse_nvbandwidth(text, testcase='device_to_device_memcpy_write_ce',
                      nbytes=None):
    """A :class:`LinksResult` from nvbandwidth's text output, the matrix of
    ``testcase`` (one of :data:`NVB_FLOW`).  Its ``N/A`` cells off the
    diagonal are pairs without peer access (nvbandwidth skips a pair whose
    ``enablePeerAcess`` fails); ``complete`` once the matrix's ``SUM``
    line was read.  nvbandwidth reports no time: ``seconds`` is derived
    from ``nbytes`` (its ``-b`` in bytes) where given, else nan."""
    flow = NVB_FLOW[testcase]
    res = LinksResult(NVBANDWIDTH, bytes=nbytes)
    lines = (text or '').splitlines()
    current, cols, in_matrix = None, None, False
    for raw in lines:
        line = raw.strip()
        if m := _NVB_DEVICE.match(line):
            res.gpus[int(m[1])] = m[2].strip()
            continue
        if m := _RUNNING.match(line):
            current, cols, in_matrix = m[1], None, False
            continue
        if current != testcase:
            if m := _NVB_ERROR.match(line):
                if current == testcase or m[1] == 'ERROR':
                    res.errors.append(line)
            continue
        if m := _NVB_ERROR.match(line):
            res.errors.append(f'{testcase}: {line}')
            current = None
            continue
        if m := _SUM.match(line):
            res.complete = m[1] == testcase and cols is not None
            current = None
            continue
        if not line:
            continue
        words = line.split()
        if cols is None:
            if words and all(w.isdigit() for w in words):
                cols = [int(w) for w in words]
                in_matrix = True
            continue          # the description line
        if in_matrix and words[0].isdigit() and len(words) == len(cols) + 1:
            r = int(words[0])
            for c, cell in zip(cols, words[1:]):
                if c == r:
                    continue
                src, dst = (r, c) if flow == 'row' else (c, r)
                if cell == 'N/A':
                    res.no_peer.append((src, dst))
                    continue
                gbps = _float(cell)
                res.peer.append((src, dst))
                secs = nbytes / (gbps * 1e9) if nbytes and gbps > 0 else \
                    math.nan
                res.links.append(Link(str(src), str(dst), nbytes or 0, secs,
                                      gbps))
        else:
            res.unknown.append(line)
    if not res.gpus and cols:
        res.gpus = {c: '' for c in cols}
    return res


def nvbandwidth_options(nbytes, testcase='device_to_device_memcpy_write_ce'):
    """nvbandwidth's command line for one matrix of ``nbytes`` per copy
    (its ``-b`` is in MiB, at least 1)."""
    return ['-t', testcase, '-b', str(max(1, int(nbytes) >> 20))]


#: the line of ``ccl-health-probe`` between its copy matrix and its
#: all_reduce (nccl-tests' table, :mod:`ccl_health.evidence.nccltests`)
PROBE_ALL_REDUCE = '# ccl-health-probe all_reduce'


def split_probe_output(text):
    """``ccl-health-probe``'s output as ``(copy matrix, all_reduce)``:
    the lines before its all_reduce line (``ccl-health-links``' output),
    and from that line on (None where it never began)."""
    lines = (text or '').splitlines(True)
    for i, line in enumerate(lines):
        if line.strip() == PROBE_ALL_REDUCE:
            return ''.join(lines[:i]), ''.join(lines[i:])
    return text or '', None


def links_options(nbytes, repeats=5, warmup=1):
    """``ccl-health-links``' command line."""
    return ['-b', str(int(nbytes)), '-n', str(int(repeats)), '-w',
            str(int(warmup))]
