"""Parse the output of nccl-tests and rccl-tests.

The forms read, each as its program writes it:

* the text table on stdout, which every version prints: nccl-tests from its
  2.0 releases (no ``redop`` / ``root`` columns for some collectives, an
  ``error`` column holding the largest difference from the expected value
  in place of ``#wrong``) to today's (``#wrong``, optional per-iteration
  and timestamp columns), and rccl-tests' (optional algorithm / protocol /
  channel columns, in-place only with ``-O 0``); possibly interleaved with
  ``NCCL INFO`` lines, and with every line prefixed by a launcher or a log
  collector (``[1,0]<stdout>:``, ``srun --label``'s ``0: ``, a host name,
  a timestamp);
* the JSON file that nccl-tests >= 2.17 writes with ``-J file.json``;
* rccl-tests' ``-x file -Z json`` output: one JSON object per result, one
  per line (older releases, written as it goes) or in a JSON array (newer
  ones, written at the end).

All give a :class:`SweepResult`.  :func:`parse` takes stdout and the JSON
file of one run; :func:`parse_any` detects the form of one file.
"""

import dataclasses
import json
import math
import re
from typing import List, Optional

from ccl_health import CclHealthError


@dataclasses.dataclass
class Measurement:
    time_us: float
    algbw: float          # GB/s
    busbw: float          # GB/s
    wrong: Optional[int]  # None when not checked (-c 0, printed N/A)
    #: nccl-tests < 2.12: the largest difference from the expected values
    #: (the ``error`` column); ``wrong`` is then 1 when it is beyond the
    #: version's tolerance for the type, else 0
    max_delta: Optional[float] = None
    #: why a value of this measurement is not a finite number, or None
    invalid: Optional[str] = None

    @property
    def finite(self):
        return self.invalid is None and all(
            isinstance(v, (int, float)) and math.isfinite(v)
            for v in (self.time_us, self.algbw, self.busbw))


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
        compared against); nan when either is not a finite number."""
        vals = [m.busbw for m in (self.out_of_place, self.in_place) if m]
        if not vals:
            return None
        if any(not isinstance(v, (int, float)) or not math.isfinite(v)
               for v in vals):
            return math.nan
        return max(vals)

    @property
    def wrong(self):
        vals = [m.wrong for m in (self.out_of_place, self.in_place)
                if m and m.wrong is not None]
        return sum(vals) if vals else None

    @property
    def nonfinite(self):
        """True when a time, bandwidth or check value is nan / inf or
        unreadable."""
        ms = [m for m in (self.out_of_place, self.in_place) if m]
        return not ms or any(not m.finite for m in ms)


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
    #: what was read: 'nccl-tests', 'nccl-tests-2.0' (``error`` column),
    #: 'rccl-tests', 'nccl-tests-json', 'rccl-tests-json',
    #: 'rccl-tests-json-lines'
    format: str = 'nccl-tests'
    #: True when the program's closing lines were read (both summary lines
    #: of the text, the summary keys of the JSON, the end of rccl-tests'
    #: JSON array), False when they were looked for and are missing, None
    #: when the result was not read from a program's output
    closed: Optional[bool] = None
    #: NCCL_TESTS_MIN_BW: the program's own average check said FAILED
    avg_busbw_failed: bool = False
    #: the JSON file could not be used (damaged or cut): the text was judged
    json_error: Optional[str] = None
    #: lines worth showing that are not failures (the library's last error
    #: message, a reduced maximum size, a damaged JSON file)
    notes: List[str] = dataclasses.field(default_factory=list)
    #: the check column's header: '#wrong' or 'error' (None: not seen)
    check_column: Optional[str] = None
    #: the run header's ``minBytes`` / ``maxBytes`` / ``step: N(factor)``
    #: or ``N(bytes)`` (None: no header read); ``maxBytes`` after a
    #: ``Reducing maxBytes to N`` line is N
    header_sizes: Optional[tuple] = None

    @property
    def complete(self):
        """True when the run printed its closing summary."""
        return self.out_of_bounds is not None and self.closed is not False

    @property
    def nonfinite_sizes(self):
        """Sizes of the rows with a nan / inf (or unreadable) value."""
        return [r.size for r in self.rows if r.nonfinite]

    def by_size(self):
        return {r.size: r for r in self.rows}

    @property
    def wrong_total(self):
        return sum(r.wrong or 0 for r in self.rows)


# -- text ------------------------------------------------------------------

# A line NCCL's logger writes: "host:pid:tid [dev] NCCL INFO ..."
_NCCL_LOG = re.compile(r'\S+:\d+:\d+ \[\d+\] (?:\S+ )?NCCL '
                       r'(INFO|WARN|TRACE|ERROR)')
_NUM = r'[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)'
# prefixes that launchers and log collectors put before every line
_PREFIXES = (
    # Open MPI's --tag-output: "[1,0]<stdout>:"
    re.compile(r'^\[\d+,\d+\]<std(?:out|err)>:\s?'),
    # timestamps: "2024-05-01T12:00:00.123Z ", "[2024-05-01 12:00:00] "
    re.compile(r'^\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?'
               r'(?:Z|[+-]\d{2}:?\d{2})?\]?:?\s+'),
    # srun --label: "0: ", "12: "
    re.compile(r'^\s*\d+:\s'),
)
# pdsh / kubectl / a collector: "host: " before what the program prints
_HOST_PREFIX = re.compile(r'^[A-Za-z][\w.-]*:\s+')
_TABLE_START = re.compile(r'^(?:#|\s*\d+\s+\d+\s|rccl-tests:|[NR]CCL version'
                          r'|\S+:\d+:\d+ \[\d+\])')
_BARE_HOST = re.compile(r'^\s*(?:[A-Za-z][\w.-]*:\s*)?$')
_RANK_LINE = re.compile(r'^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+'
                        r'(\S+)\s+device\s+(\d+)\s+\[([^\]]+)\]\s*(.*)$')
_HEADER = re.compile(r'^#\s+size\s+count\s+type\b(.*)$')
_OOB = re.compile(r'^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?')
_AVG = re.compile(r'^#\s*Avg bus bandwidth\s*:\s*(' + _NUM + r'|-nan)'
                  r'\s*(OK|FAILED)?')
_VERSION = re.compile(r'^#\s*nccl-tests version\s+(\S+)\s+nccl-headers=(\d+)'
                      r'\s+nccl-library=(\d+)')
_RCCL_TESTS_VERSION = re.compile(r'^rccl-tests:\s*Version\s+(\S+)')
_LIB_VERSION = re.compile(r'^(?:NCCL|RCCL) version\s*:?\s*(\S+)')
_STARTING = re.compile(r'^#\s*Collective test starting:\s*(\S+)')
_REDUCED = re.compile(r'^#\s*Reducing maxBytes to (\d+)')
_SIZES_HEADER = re.compile(r'minBytes:?\s*(\d+)\s+maxBytes:?\s*(\d+)\s+'
                           r'step:?\s*(\d+)\s*\((factor|bytes)\)')
_LAST_ERROR = re.compile(r'^#\s*error:\s*(.*)$')
_TIMEOUT = re.compile(r'Test timeout \((\d+)s\)')
# what nccl-tests, rccl-tests, NCCL/RCCL, the HIP/CUDA runtime and MPI
# print when the program failed (a launcher's own messages are not: the
# exit status tells those)
_ERROR = re.compile(
    r'(Test (?:NCCL|CUDA|HIP) failure|Test failure|\bCuda failure\b'
    r'|\bCUDA failure\b|\bNCCL failure\b|\bHIP failure\b|\bhipError\w*'
    r'|\bHip error\b|\bHIP error\b|NCCL error|MPI_ABORT|MPI_Abort'
    r'|#wrong=)')
_DATE = re.compile(r'^\d{4}-\d{2}-\d{2}$')
_TIME = re.compile(r'^\d{2}:\d{2}:\d{2}$')
_COUNT = re.compile(r'^-?\d+$')

#: nccl-tests < 2.12 (``error`` column): a result is wrong when its largest
#: difference exceeds DeltaMaxValue(type) * (nranks - 1)
#: (src/common.cu of nccl-tests 2.0.0 .. 2.11.0)
DELTA_MAX = {'half': 1e-2, 'float16': 1e-2, 'bfloat16': 1e-2,
             'float': 1e-5, 'float32': 1e-5, 'double': 1e-12,
             'float64': 1e-12}
_DELTA_MAX_OTHER = 1e-200        # every integer type, and the default


def delta_tolerance(dtype, nranks):
    """The largest difference nccl-tests < 2.12 accepts for ``dtype`` on
    ``nranks`` ranks (the strictest, 2 ranks, when unknown)."""
    n = nranks if nranks and nranks > 1 else 2
    return DELTA_MAX.get(dtype, _DELTA_MAX_OTHER) * (n - 1)


def strip_prefixes(line):
    """``line`` without the prefixes launchers and log collectors add."""
    while True:
        for rx in _PREFIXES:
            new = rx.sub('', line, count=1)
            if new != line:
                line = new
                break
        else:
            m = _HOST_PREFIX.match(line)
            if m:
                rest = strip_prefixes(line[m.end():])
                if _TABLE_START.match(rest):
                    return rest
            return line


def _number(tok):
    """(value, None) for a number (nan / inf included), else
    (None, reason)."""
    try:
        return float(tok), None
    except ValueError:
        return None, f'{tok!r} is not a number'


def _is_word(tok):
    return _number(tok)[0] is None


def _measurement(tokens, delta_col):
    """One of the 4-value groups (time algbw busbw check), or None when the
    tokens are not numbers at all (not a table row)."""
    vals = []
    for tok in tokens[:3]:
        v, _ = _number(tok)
        if v is None:
            return None
        vals.append(v)
    check = tokens[3]
    m = Measurement(vals[0], vals[1], vals[2], None)
    bad = [n for n, v in zip(('time', 'algbw', 'busbw'), vals)
           if not math.isfinite(v)]
    if check == 'N/A':
        pass
    else:
        v, why = _number(check)
        if v is None or ('.' in check and 'e' not in check.lower() and
                         math.isfinite(v)):
            return None       # %g of a count, %5.0le: never a bare 1.5
        if not math.isfinite(v):
            bad.append('error' if delta_col else '#wrong')
        elif delta_col or ('e-' in check.lower()) or check.lower() in (
                '0e+00', '0e+0'):
            m.max_delta = v          # judged against the tolerance later
        else:
            m.wrong = int(v)
    if bad:
        m.invalid = 'non-finite ' + '/'.join(bad)
    return m


def _parse_row(line, delta_col=False, per_iter=False):
    toks = line.split()
    if len(toks) < 7 or not toks[0].isdigit() or not toks[1].isdigit():
        return None
    size, count, dtype = int(toks[0]), int(toks[1]), toks[2]
    if _number(dtype)[0] is not None:
        return None
    rest = toks[3:]
    # trailing columns: a timestamp (nccl-tests -t), rccl-tests' algorithm,
    # protocol and channels
    if len(rest) >= 2 and _DATE.match(rest[-2]) and _TIME.match(rest[-1]):
        rest = rest[:-2]
    if len(rest) >= 3 and _is_word(rest[-3]) and _is_word(rest[-2]) and \
            (_COUNT.match(rest[-1]) or rest[-1] == 'N/A'):
        rest = rest[:-3]
    nkeys = len(rest) % 4
    if nkeys == 3:
        return None
    keys, vals = rest[:nkeys], rest[nkeys:]
    redop, root = '', None
    for k in keys:
        if _COUNT.match(k):
            root = int(k)
        elif _number(k)[0] is None and not redop:
            redop = k
        else:
            return None
    if len(vals) == 16:              # per-iteration timing: 8 per group
        groups = [vals[0:4], vals[8:12]]
    elif len(vals) == 8 and per_iter:  # one group, with per-iteration
        groups = [None, vals[0:4]]
    elif len(vals) == 8:
        groups = [vals[0:4], vals[4:8]]
    elif len(vals) == 4:             # one of in-place / out-of-place only
        groups = [None, vals]
    else:
        return None
    ms = [None if g is None else _measurement(g, delta_col) for g in groups]
    if any(g is not None and m is None for g, m in zip(groups, ms)):
        return None
    return Row(size, count, dtype, redop, root, ms[0], ms[1])


def _strip_nccl_log(lines, warn_lines=None):
    """Yield the lines of ``lines`` without prefixes and with NCCL's own
    log lines removed, joining a table row that a log line cut in two.
    NCCL WARN lines go to ``warn_lines``."""
    pending = ''
    for line in lines:
        line = strip_prefixes(line)
        m = _NCCL_LOG.search(line)
        if m:
            if m.group(1) in ('WARN', 'ERROR') and warn_lines is not None:
                warn_lines.append(line[m.start():].strip())
            head = line[:m.start()]
            if not _BARE_HOST.match(head):     # a row cut by the log line
                pending += head
            continue
        yield pending + line
        pending = ''
    if pending:
        yield pending


def _finish(res):
    """What can be known only once everything is read: rank count, the
    wrong-ness of ``error`` columns, the format."""
    if res.devices:
        res.nranks = len(res.devices)
    for row in res.rows:
        for m in (row.out_of_place, row.in_place):
            if m is None or m.max_delta is None:
                continue
            if res.nranks is None and res.out_of_bounds == 0:
                # rank count unknown: the program's own count (it compares
                # with the tolerance for the real rank count) says none
                m.wrong = 0
            else:
                m.wrong = int(m.max_delta > delta_tolerance(row.dtype,
                                                            res.nranks))
    if any(m is not None and m.max_delta is not None
           for r in res.rows for m in (r.out_of_place, r.in_place)):
        res.format = 'nccl-tests-2.0'
    return res


def parse_text(text):
    """Parse the stdout of an nccl-tests / rccl-tests binary."""
    res = SweepResult(source='text', closed=False)
    warns = []
    saw_avg = per_iter = False
    for line in _strip_nccl_log(text.splitlines(), warns):
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
            m = _HEADER.match(s)
            if m:
                cols = m.group(1).split()
                if 'error' in cols:
                    res.check_column = 'error'
                elif '#wrong' in cols:
                    res.check_column = '#wrong'
                per_iter = 'i_min' in cols
                continue
            m = _OOB.match(s)
            if m:
                res.out_of_bounds = int(m.group(1))
                if m.group(2) == 'FAILED' and not res.out_of_bounds:
                    res.out_of_bounds = 1        # never 0 with FAILED
                continue
            m = _AVG.match(s)
            if m:
                saw_avg = True
                res.avg_busbw = float(m.group(1))
                res.avg_busbw_failed = m.group(2) == 'FAILED'
                continue
            m = _VERSION.match(s)
            if m:
                res.tests_version = m.group(1)
                res.nccl_version = int(m.group(3))
            m = _STARTING.match(s)
            if m:
                res.collective = m.group(1)
            m = _SIZES_HEADER.search(s)
            if m:
                res.header_sizes = (int(m.group(1)), int(m.group(2)),
                                    int(m.group(3)), m.group(4))
            m = _REDUCED.match(s)
            if m:
                res.notes.append(s.lstrip('# '))
                if res.header_sizes:
                    res.header_sizes = (res.header_sizes[0], int(m.group(1)),
                                        *res.header_sizes[2:])
            m = _LAST_ERROR.match(s)
            if m and m.group(1).strip():
                res.notes.append(f'library error message: {m.group(1)}')
            continue
        m = _RCCL_TESTS_VERSION.match(s)
        if m:
            res.tests_version = 'rccl-tests ' + m.group(1)
            res.format = 'rccl-tests'
            continue
        m = _LIB_VERSION.match(s)
        if m:
            res.library_version = f'{s.split()[0]} {m.group(1)}'
            continue
        if _TIMEOUT.search(s):
            res.timed_out = True
            res.errors.append(s)
            continue
        row = _parse_row(s, res.check_column == 'error', per_iter)
        if row:
            res.rows.append(row)
        elif _ERROR.search(s):
            res.errors.append(s)
    res.errors.extend(w for w in warns if _ERROR.search(w))
    if saw_avg and text and not text.endswith(('\n', '\r')) and \
            _AVG.match(strip_prefixes(text.splitlines()[-1]).strip()):
        saw_avg = False            # the output was cut inside that line
    res.closed = res.out_of_bounds is not None and saw_avg
    return _finish(res)


# -- JSON --------------------------------------------------------------------

# nan / inf as C's printf writes them, which JSON does not allow
_BARE_NONFINITE = re.compile(r'(?<=[:\[,])(\s*)(-?(?:nan|inf)(?:inity)?)'
                             r'(?=\s*[,}\]])', re.IGNORECASE)


def _loads(text):
    return json.loads(_BARE_NONFINITE.sub(r'\1"\2"', text))


def _float(v):
    return float(v)       # accepts "nan", "-nan", "inf" (as strings too)


def _json_measurement(d):
    if not d:
        return None
    t = d.get('time', d.get('cpu_time'))
    wrong = d.get('nwrong', d.get('wrong'))
    m = Measurement(_float(t), _float(d['alg_bw']), _float(d['bus_bw']),
                    None)
    bad = [n for n, v in (('time', m.time_us), ('algbw', m.algbw),
                          ('busbw', m.busbw)) if not math.isfinite(v)]
    if wrong not in (None, 'N/A'):
        w = _float(wrong)
        if math.isfinite(w):
            m.wrong = int(w)
        else:
            bad.append('#wrong')
    if bad:
        m.invalid = 'non-finite ' + '/'.join(bad)
    return m


def parse_json(text, origin='<json>'):
    """Parse the file that ``-J`` writes (nccl-tests >= 2.17)."""
    try:
        doc = _loads(text)
    except json.JSONDecodeError as err:
        raise CclHealthError(f'{origin}: not valid nccl-tests JSON: {err}') \
            from None
    if not isinstance(doc, dict) or 'version' not in doc:
        raise CclHealthError(f'{origin}: not an nccl-tests JSON report '
                             f'(no "version" key)')
    res = SweepResult(source='json', format='nccl-tests-json')
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
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise CclHealthError(f'{origin}: malformed result entry {r!r}: '
                                 f'{err}') from None
    oob = _find_key(doc, 'out_of_bounds')
    if isinstance(oob, dict) and 'count' in oob:
        res.out_of_bounds = int(oob['count'])
        if str(oob.get('okay')).lower() == 'false' and not res.out_of_bounds:
            res.out_of_bounds = 1
    avg = _find_key(doc, 'average_bus_bandwidth')
    if isinstance(avg, dict) and 'bandwidth' in avg:
        res.avg_busbw = _float(avg['bandwidth'])
        res.avg_busbw_failed = str(avg.get('okay')).lower() == 'false'
    res.closed = res.out_of_bounds is not None and res.avg_busbw is not None
    # the library's last error message (ncclGetLastError), "" when none:
    # the program itself does not fail on it
    res.notes.extend(f'library error message: {e}'
                     for e in (_find_key(doc, 'errors') or []) if e)
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


# rccl-tests -Z json: {"name":"AllReduce", "nodes":1, "ranks":8,
# "ranksPerNode":8, "gpusPerRank":1, "size":1024, "type":"float",
# "redop":"sum", "inPlace":0, "time":12.3, "algBw":0.1, "busBw":0.1,
# "wrong":"0"} (newer releases add "numCycle" and write a JSON array)
_RCCL_KEYS = ('size', 'inPlace', 'busBw')


def _rccl_rows(entries, origin):
    res = SweepResult(source='json', format='rccl-tests-json-lines')
    rows = {}
    for e in entries:
        try:
            m = _json_measurement({'time': e['time'], 'alg_bw': e['algBw'],
                                   'bus_bw': e['busBw'],
                                   'wrong': e.get('wrong')})
            key = (e.get('numCycle'), int(e['size']))
            row = rows.get(key)
            if row is None:
                row = rows[key] = Row(int(e['size']), 0, str(e.get('type')),
                                      str(e.get('redop')), None, None, None)
                res.rows.append(row)
            if int(e['inPlace']):
                row.in_place = m
            else:
                row.out_of_place = m
        except (KeyError, TypeError, ValueError) as err:
            raise CclHealthError(f'{origin}: malformed rccl-tests result '
                                 f'{e!r}: {err}') from None
        if res.collective is None and e.get('name'):
            res.collective = str(e['name'])
        if res.nranks is None:
            n = e.get('ranks', e.get('gpus'))
            res.nranks = int(n) if isinstance(n, (int, float)) else None
    return res


def parse_rccl_json(text, origin='<json>'):
    """Parse rccl-tests' ``-Z json`` file: JSON lines (written as the run
    goes, so never complete by themselves) or a JSON array (written at the
    end: complete, with the out-of-bounds count as the number of results
    with wrong elements)."""
    stripped = text.strip()
    if stripped.startswith('['):
        try:
            doc = _loads(stripped)
        except json.JSONDecodeError as err:
            raise CclHealthError(f'{origin}: not valid rccl-tests JSON: '
                                 f'{err}') from None
        if not isinstance(doc, list) or not all(
                isinstance(e, dict) and all(k in e for k in _RCCL_KEYS)
                for e in doc):
            raise CclHealthError(f'{origin}: not an rccl-tests JSON array')
        res = _rccl_rows(doc, origin)
        res.format = 'rccl-tests-json'
        res.closed = True
        res.out_of_bounds = sum(1 for r in res.rows
                                for m in (r.out_of_place, r.in_place)
                                if m and m.wrong)
        return res
    entries = []
    for n, line in enumerate(stripped.splitlines(), 1):
        if not line.strip():
            continue
        try:
            e = _loads(line)
        except json.JSONDecodeError as err:
            raise CclHealthError(f'{origin}:{n}: not an rccl-tests JSON '
                                 f'line: {err}') from None
        if not isinstance(e, dict) or not all(k in e for k in _RCCL_KEYS):
            raise CclHealthError(f'{origin}:{n}: not an rccl-tests JSON '
                                 f'line (needs {", ".join(_RCCL_KEYS)})')
        entries.append(e)
    if not entries:
        raise CclHealthError(f'{origin}: no rccl-tests JSON lines')
    res = _rccl_rows(entries, origin)
    res.closed = None         # JSON lines have no closing summary
    return res


def parse_json_any(text, origin='<json>'):
    """The JSON of nccl-tests (``-J``) or of rccl-tests (``-Z json``)."""
    s = text.lstrip()
    if s.startswith('{') and '"version"' not in s[:2000] and \
            '"busBw"' in s.split('\n', 1)[0]:
        return parse_rccl_json(text, origin)
    if s.startswith('['):
        return parse_rccl_json(text, origin)
    try:
        return parse_json(text, origin)
    except CclHealthError as err:
        if 'no "version" key' not in str(err):
            raise
        raise CclHealthError(f'{err}; nor rccl-tests JSON lines (no '
                             f'"busBw" key)') from None


def looks_like_json(text):
    s = text.lstrip()
    return s.startswith('{') or s.startswith('[{') or \
        (s.startswith('[') and s[1:].lstrip().startswith('{'))


def parse(stdout_text, json_text=None, origin='<output>'):
    """Parse one run: the JSON report when there is one and it is complete,
    completed by what only stdout says (timeouts, errors, devices, the
    closing summary).  A damaged or cut JSON never hides a complete text
    table: the text is then judged, and ``json_error`` says why."""
    if json_text is None and looks_like_json(stdout_text or ''):
        return parse_any(stdout_text, origin)
    text = parse_text(stdout_text or '')
    if json_text is None:
        return text
    try:
        res = parse_json_any(json_text, origin)
    except CclHealthError as err:
        text.json_error = str(err)
        text.notes.append(f'JSON not used: {err}')
        return text
    if res.format == 'nccl-tests-json' and not res.complete and \
            (text.complete or len(text.rows) > len(res.rows)):
        text.json_error = f'{origin}: the JSON report has no closing summary'
        text.notes.append(f'JSON not used: {text.json_error}')
        return text
    res.timed_out = text.timed_out
    res.errors = text.errors + [e for e in res.errors if e not in text.errors]
    res.notes = text.notes + [n for n in res.notes if n not in text.notes]
    res.tests_version = text.tests_version
    res.library_version = res.library_version or text.library_version
    res.collective = text.collective or res.collective
    if not res.devices:
        res.devices, res.hosts = text.devices, text.hosts
        res.nranks = text.nranks or res.nranks
    if res.format.startswith('rccl-tests') and (stdout_text or '').strip():
        # the summary lives in the text only
        if text.out_of_bounds is not None:
            res.out_of_bounds = max(text.out_of_bounds,
                                    res.out_of_bounds or 0)
        if res.format == 'rccl-tests-json-lines':
            res.closed = text.closed
        res.avg_busbw = text.avg_busbw
        res.avg_busbw_failed = text.avg_busbw_failed
    if res.out_of_bounds is None or (text.out_of_bounds or 0) > \
            res.out_of_bounds:
        res.out_of_bounds = text.out_of_bounds
    if res.avg_busbw is None:
        res.avg_busbw = text.avg_busbw
    res.avg_busbw_failed = res.avg_busbw_failed or text.avg_busbw_failed
    if not res.rows:
        res.rows = text.rows
    # what the text table says wrong stays wrong
    text_wrong = {r.size: r for r in text.rows if r.wrong}
    for r in res.rows:
        tr = text_wrong.get(r.size)
        if tr is not None and not r.wrong:
            for m, tm in ((r.out_of_place, tr.out_of_place),
                          (r.in_place, tr.in_place)):
                if m is not None and tm is not None and tm.wrong:
                    m.wrong = tm.wrong
    # a nan the JSON rounds away is still a nan in the text
    bad = set(text.nonfinite_sizes) - set(res.nonfinite_sizes)
    if bad:
        res.notes.append(f'non-finite values in the text table at '
                         f'{sorted(bad)} B')
        for r in res.rows:
            if r.size in bad:
                for m in (r.out_of_place, r.in_place):
                    if m is not None:
                        m.invalid = m.invalid or 'non-finite in the text table'
    return res


def parse_any(text, origin='<output>'):
    """Parse one file whose form is not known: nccl-tests / rccl-tests
    JSON, rccl-tests JSON lines, or a text output."""
    if looks_like_json(text):
        return parse_json_any(text, origin)
    return parse_text(text)
