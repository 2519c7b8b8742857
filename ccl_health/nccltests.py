"""Parse the output of nccl-tests and rccl-tests.

Two forms are read:

* the JSON file that nccl-tests >= 2.17 writes with ``-J file.json``;
* the text table on stdout, which every version of nccl-tests and
  rccl-tests prints, possibly interleaved with ``NCCL INFO`` lines when
  ``NCCL_DEBUG`` is sent to stdout.

Both give a :class:`SweepResult`.
"""

import dataclasses
import json
import re
from typing import List, Optional

from . import CclHealthError


@dataclasses.dataclass
class Measurement:
    time_us: float
    algbw: float          # GB/s
    busbw: float          # GB/s
    wrong: Optional[int]  # None when not checked (-c 0, printed N/A)


@dataclasses.dataclass
class Row:
    size: int
    count: int
    dtype: str
    redop: str
    root: Optional[int]
    out_of_place: Optional[Measurement]
    in_place: Optional[Measurement]

    @property
    def busbw(self):
        """The better of in-place and out-of-place busbw (what a reference is
        compared against)."""
        vals = [m.busbw for m in (self.out_of_place, self.in_place) if m]
        return max(vals) if vals else None

    @property
    def wrong(self):
        vals = [m.wrong for m in (self.out_of_place, self.in_place)
                if m and m.wrong is not None]
        return sum(vals) if vals else None


@dataclasses.dataclass
class SweepResult:
    collective: Optional[str] = None     # e.g. 'all_reduce_perf'
    rows: List[Row] = dataclasses.field(default_factory=list)
    nranks: Optional[int] = None
    devices: List[str] = dataclasses.field(default_factory=list)
    hosts: List[str] = dataclasses.field(default_factory=list)
    out_of_bounds: Optional[int] = None  # None when the summary is missing
    avg_busbw: Optional[float] = None
    nccl_version: Optional[int] = None   # e.g. 22807
    library_version: Optional[str] = None  # 'RCCL 2.22.3-HEAD:7d8d67c'
    tests_version: Optional[str] = None
    timed_out: bool = False              # nccl-tests' own -T fired
    errors: List[str] = dataclasses.field(default_factory=list)
    source: str = 'text'                 # 'json' or 'text'

    @property
    def complete(self):
        """True when the run printed its closing summary."""
        return self.out_of_bounds is not None

    def by_size(self):
        return {r.size: r for r in self.rows}

    @property
    def wrong_total(self):
        return sum(r.wrong or 0 for r in self.rows)


# -- text ------------------------------------------------------------------

# A line NCCL's logger writes: "host:pid:tid [dev] NCCL INFO ..."
_NCCL_LOG = re.compile(r'\S+:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN|TRACE|ERROR)')
_NUM = r'[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)'
# Open MPI's --tag-output prefix: "[1,0]<stdout>:"
_MPI_TAG = re.compile(r'^\[\d+,\d+\]<std(?:out|err)>:')
_RANK_LINE = re.compile(r'^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+'
                        r'(\S+)\s+device\s+(\d+)\s+\[([^\]]+)\]\s*(.*)$')
_OOB = re.compile(r'^#\s*Out of bounds values\s*:\s*(\d+)')
_AVG = re.compile(r'^#\s*Avg bus bandwidth\s*:\s*(' + _NUM + ')')
_VERSION = re.compile(r'^#\s*nccl-tests version\s+(\S+)\s+nccl-headers=(\d+)'
                      r'\s+nccl-library=(\d+)')
_RCCL_TESTS_VERSION = re.compile(r'^rccl-tests:\s*Version\s+(\S+)')
_LIB_VERSION = re.compile(r'^(?:NCCL|RCCL) version\s*:?\s*(\S+)')
_STARTING = re.compile(r'^#\s*Collective test starting:\s*(\S+)')
_TIMEOUT = re.compile(r'Test timeout \((\d+)s\)')
_ERROR = re.compile(r'(Test NCCL failure|Test CUDA failure|Test failure'
                    r'|NCCL error|MPI_ABORT|#wrong=)')


def _measurement(tokens):
    time_us, algbw, busbw, wrong = tokens
    try:
        return Measurement(float(time_us), float(algbw), float(busbw),
                           None if wrong == 'N/A' else int(float(wrong)))
    except ValueError:
        return None


def _parse_row(line):
    toks = line.split()
    if len(toks) < 8 or not toks[0].isdigit() or not toks[1].isdigit():
        return None
    size, count, dtype, redop = int(toks[0]), int(toks[1]), toks[2], toks[3]
    rest = toks[4:]
    root = None
    if len(rest) in (5, 9):           # with a root column
        try:
            root = int(rest[0])
        except ValueError:
            return None
        rest = rest[1:]
    if len(rest) == 8:
        oop, ip = _measurement(rest[:4]), _measurement(rest[4:])
        if oop is None or ip is None:
            return None
    elif len(rest) == 4:              # in-place only (trace replay)
        oop, ip = None, _measurement(rest)
        if ip is None:
            return None
    else:
        return None
    return Row(size, count, dtype, redop, root, oop, ip)


def _strip_nccl_log(lines):
    """Yield the lines of ``lines`` with NCCL's own log lines removed, joining
    a table row that a log line cut in two."""
    pending = ''
    for line in lines:
        line = _MPI_TAG.sub('', line)
        m = _NCCL_LOG.search(line)
        if m:
            pending += line[:m.start()]
            continue
        yield pending + line
        pending = ''
    if pending:
        yield pending


def parse_text(text):
    """Parse the stdout of an nccl-tests / rccl-tests binary."""
    res = SweepResult(source='text')
    for line in _strip_nccl_log(text.splitlines()):
        s = line.strip()
        if not s:
            continue
        if s.startswith('#'):
            m = _RANK_LINE.match(s)
            if m:
                res.devices.append(f'{m.group(2)}:{m.group(3)} {m.group(5)}'
                                   .strip())
                if m.group(2) not in res.hosts:
                    res.hosts.append(m.group(2))
                continue
            for rx, attr, conv in ((_OOB, 'out_of_bounds', int),
                                   (_AVG, 'avg_busbw', float)):
                m = rx.match(s)
                if m:
                    setattr(res, attr, conv(m.group(1)))
            m = _VERSION.match(s)
            if m:
                res.tests_version = m.group(1)
                res.nccl_version = int(m.group(3))
            m = _STARTING.match(s)
            if m:
                res.collective = m.group(1)
            continue
        m = _RCCL_TESTS_VERSION.match(s)
        if m:
            res.tests_version = 'rccl-tests ' + m.group(1)
            continue
        m = _LIB_VERSION.match(s)
        if m:
            res.library_version = f'{s.split()[0]} {m.group(1)}'
            continue
        if _TIMEOUT.search(s):
            res.timed_out = True
            res.errors.append(s)
            continue
        row = _parse_row(s)
        if row:
            res.rows.append(row)
        elif _ERROR.search(s):
            res.errors.append(s)
    if res.devices:
        res.nranks = len(res.devices)
    return res


# -- JSON --------------------------------------------------------------------

def _json_measurement(d):
    if not d:
        return None
    t = d.get('time', d.get('cpu_time'))
    wrong = d.get('nwrong', d.get('wrong'))
    return Measurement(float(t), float(d['alg_bw']), float(d['bus_bw']),
                       None if wrong in (None, 'N/A') else int(wrong))


def parse_json(text, origin='<json>'):
    """Parse the file that ``-J`` writes (nccl-tests >= 2.17)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise CclHealthError(f'{origin}: not valid nccl-tests JSON: {err}') \
            from None
    if not isinstance(doc, dict) or 'version' not in doc:
        raise CclHealthError(f'{origin}: not an nccl-tests JSON report '
                             f'(no "version" key)')
    res = SweepResult(source='json')
    res.nccl_version = doc.get('nccl_version')
    args = doc.get('args') or []
    if args:
        res.collective = str(args[0]).rsplit('/', 1)[-1]
    for dev in (_find_key(doc, 'devices') or []):
        if isinstance(dev, dict):
            host = dev.get('hostname', '?')
            res.devices.append(f'{host}:{dev.get("device")} '
                               f'{dev.get("device_info", "")}'.strip())
            if host not in res.hosts:
                res.hosts.append(host)
    if res.devices:
        res.nranks = len(res.devices)
    for r in _find_key(doc, 'results') or []:
        try:
            root = r.get('root')
            root = int(root) if root not in (None, '') else None
            res.rows.append(Row(int(r['size']), int(r['count']), r['type'],
                                r['redop'], root,
                                _json_measurement(r.get('out_of_place')),
                                _json_measurement(r.get('in_place'))))
        except (KeyError, TypeError, ValueError) as err:
            raise CclHealthError(f'{origin}: malformed result entry {r!r}: '
                                 f'{err}') from None
    oob = _find_key(doc, 'out_of_bounds')
    if isinstance(oob, dict) and 'count' in oob:
        res.out_of_bounds = int(oob['count'])
    avg = _find_key(doc, 'average_bus_bandwidth')
    if isinstance(avg, dict) and 'bandwidth' in avg:
        res.avg_busbw = float(avg['bandwidth'])
    res.errors.extend(str(e) for e in (_find_key(doc, 'errors') or []) if e)
    return res


def _find_key(doc, key):
    """The value of ``key`` at the top of ``doc`` or one level down (the
    report's nesting has changed between nccl-tests versions)."""
    if key in doc:
        return doc[key]
    for val in doc.values():
        if isinstance(val, dict) and key in val:
            return val[key]
    return None


def parse(stdout_text, json_text=None, origin='<output>'):
    """Parse one run: the JSON report when there is one, completed by what
    only stdout says (timeouts, errors, devices, the closing summary)."""
    text = parse_text(stdout_text or '')
    if not json_text:
        return text
    res = parse_json(json_text, origin)
    res.timed_out = text.timed_out
    res.errors = text.errors + [e for e in res.errors if e not in text.errors]
    res.tests_version = text.tests_version
    res.collective = text.collective or res.collective
    if not res.devices:
        res.devices, res.hosts, res.nranks = (text.devices, text.hosts,
                                              text.nranks)
    if res.out_of_bounds is None:
        res.out_of_bounds = text.out_of_bounds
    if res.avg_busbw is None:
        res.avg_busbw = text.avg_busbw
    if not res.rows:
        res.rows = text.rows
    return res
