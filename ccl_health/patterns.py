"""Communication patterns of a real job, to replay: a CSV with the columns

    routine,num_samples,datatype,nranks,ALGO,PROTOCOL,TOTALBYTES,TIME_FOR_EACH_NCCL_COMM_CALL_MICROSEC

one line per distinct call, as the public NCCL-log pattern extractors write
it from an ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL`` log:

* ``routine``: the NCCL call, lower case as NCCL logs it (``allreduce``,
  ``allgather``, ``reducescatter``, ``broadcast``, ``reduce``,
  ``alltoall``, ``send``, ``recv``); ``AllReduce`` and ``all_reduce`` are
  read too;
* ``num_samples``: the element count of the call (the extractors put the
  ``count`` of NCCL's log line in this column, whatever its name says);
* ``datatype``: NCCL's name (``float32``, ``bfloat16``, ...; ``float``,
  ``half`` are read too);
* ``nranks``: ranks of the communicator in the job;
* ``ALGO``, ``PROTOCOL``: what NCCL chose in the job (``Ring``, ``Tree``,
  ``Simple``, ``LL128`` ...; ``?`` when the log did not say);
* ``TOTALBYTES``: bytes of the call as NCCL logged them (all ranks' data for
  all_gather and reduce_scatter: the ``size`` of nccl-tests);
* ``TIME_FOR_EACH_NCCL_COMM_CALL_MICROSEC``: the time NCCL logged, µs, or
  ``?``.

:func:`load` / :func:`parse` give :class:`Call` records; every error names
the file and line.  Pure: no torch.

The suite ships one pattern, :data:`EXAMPLE` (``ccl_health/data/patterns``,
package data; hand-written, its README says how), the default of the
pattern-replay check.
"""

import csv
import dataclasses
import io
import os
from typing import Optional

from ccl_health import CclHealthError

#: the patterns the suite ships (package data)
SHIPPED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'data', 'patterns')
#: the shipped example: one step of a 2-GPU DDP training of a
#: ResNet-50-sized model (hand-written; ``SHIPPED_DIR/README.md``)
EXAMPLE = os.path.join(SHIPPED_DIR, 'example.csv')

COLUMNS = ('routine', 'num_samples', 'datatype', 'nranks', 'ALGO',
           'PROTOCOL', 'TOTALBYTES', 'TIME_FOR_EACH_NCCL_COMM_CALL_MICROSEC')

#: NCCL routine (as logged, lower case, no '_') -> the collective's name in
#: the suite (ccl_health.evidence.collectives)
ROUTINES = {
    'allreduce': 'all_reduce', 'allgather': 'all_gather',
    'reducescatter': 'reduce_scatter', 'broadcast': 'broadcast',
    'reduce': 'reduce', 'alltoall': 'alltoall', 'send': 'sendrecv',
    'recv': 'sendrecv', 'sendrecv': 'sendrecv',
}

#: NCCL datatype name -> (canonical name, bytes per element)
DATATYPES = {
    'int8': ('int8', 1), 'char': ('int8', 1), 'uint8': ('uint8', 1),
    'int32': ('int32', 4), 'int': ('int32', 4), 'uint32': ('uint32', 4),
    'int64': ('int64', 8), 'uint64': ('uint64', 8),
    'float16': ('float16', 2), 'half': ('float16', 2),
    'float32': ('float32', 4), 'float': ('float32', 4),
    'float64': ('float64', 8), 'double': ('float64', 8),
    'bfloat16': ('bfloat16', 2),
    'float8e4m3': ('float8e4m3', 1), 'float8e5m2': ('float8e5m2', 1),
}

NCCL_ALGOS = ('Tree', 'Ring', 'CollnetDirect', 'CollnetChain', 'Nvls',
              'NvlsTree', 'Pat')
NCCL_PROTOS = ('LL', 'LL128', 'Simple')


class PatternError(CclHealthError):
    pass


@dataclasses.dataclass
class Call:
    line: int              # line of the CSV file (header = line 1)
    routine: str           # as written
    collective: str        # the suite's name: all_reduce, sendrecv, ...
    count: int             # elements (the num_samples column)
    datatype: str          # canonical NCCL name
    type_size: int         # bytes per element
    nranks: int
    algo: str              # as written ('?' when unknown)
    protocol: str
    total_bytes: int
    time_us: Optional[float]   # None when '?'


def routine_collective(name):
    """The suite's collective name for an NCCL routine name, or None."""
    key = str(name).strip().lower()
    if key.startswith('nccl'):
        key = key[4:]
    key = key.replace('_', '')
    return ROUTINES.get(key)


def datatype_info(name):
    """(canonical name, bytes) of an NCCL datatype name, or None."""
    key = str(name).strip().lower()
    if key.startswith('nccl'):
        key = key[4:]
    return DATATYPES.get(key)


def _number(text, conv, where, column, allow_unknown=False, positive=True):
    s = (text or '').strip()
    if allow_unknown and s in ('?', ''):
        return None
    try:
        val = conv(s)
    except ValueError:
        raise PatternError(f'{where}: {column} is not a number: {s!r}') \
            from None
    if val != val or val < 0 or (positive and val == 0):
        raise PatternError(f'{where}: {column} must be '
                           f'{"positive" if positive else ">= 0"}, got {s!r}')
    return val


def _int(s):
    f = float(s)
    if f != int(f):
        raise ValueError(s)
    return int(f)


def parse(text, path='<pattern>'):
    """The calls of a pattern CSV; errors name ``path`` and the line."""
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise PatternError(f'{path}: line 1: empty file; expected the header '
                           f'{",".join(COLUMNS)}')
    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader)]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise PatternError(
            f'{path}: line 1: missing column(s) {", ".join(missing)} '
            f'(header has: {", ".join(header)}; expected: '
            f'{",".join(COLUMNS)})')
    col = {c: header.index(c) for c in COLUMNS}
    calls = []
    for row in reader:
        lineno = reader.line_num
        where = f'{path}: line {lineno}'
        if not row or not any(c.strip() for c in row):
            continue
        if len(row) < len(header):
            raise PatternError(f'{where}: {len(row)} fields, the header has '
                               f'{len(header)}')
        get = {c: row[i].strip() for c, i in col.items()}
        coll = routine_collective(get['routine'])
        if coll is None:
            raise PatternError(
                f'{where}: unknown routine {get["routine"]!r} (known: '
                f'{", ".join(sorted(ROUTINES))})')
        dt = datatype_info(get['datatype'])
        if dt is None:
            raise PatternError(
                f'{where}: unknown datatype {get["datatype"]!r} (known: '
                f'{", ".join(sorted(set(v[0] for v in DATATYPES.values())))})')
        count = _number(get['num_samples'], _int, where,
                        'num_samples (element count)')
        nranks = _number(get['nranks'], _int, where, 'nranks')
        total = _number(get['TOTALBYTES'], _int, where, 'TOTALBYTES')
        t = _number(get['TIME_FOR_EACH_NCCL_COMM_CALL_MICROSEC'], float,
                    where, 'TIME_FOR_EACH_NCCL_COMM_CALL_MICROSEC',
                    allow_unknown=True)
        calls.append(Call(lineno, get['routine'], coll, count, dt[0], dt[1],
                          nranks, get['ALGO'] or '?',
                          get['PROTOCOL'] or '?', total, t))
    if not calls:
        raise PatternError(f'{path}: no calls after the header')
    return calls


def load(path):
    try:
        with open(path, newline='') as fp:
            text = fp.read()
    except OSError as err:
        raise PatternError(f'{path}: cannot read the pattern file: '
                           f'{err.strerror}') from None
    return parse(text, path)


def algo_proto_reported(env):
    """(ALGO, PROTOCOL, note) a replay reports: NCCL picks both per call and
    they cannot be forced per call inside one process; only NCCL_ALGO /
    NCCL_PROTO set for the whole process fix them."""
    algo = env.get('NCCL_ALGO') or 'Default'
    proto = env.get('NCCL_PROTO') or 'Default'
    note = ('ALGO/PROTOCOL of the replay: NCCL chooses them per call; they '
            'cannot be forced per call inside one process, so they are '
            "'Default' unless NCCL_ALGO/NCCL_PROTO are set for the whole "
            f'process (here: NCCL_ALGO={env.get("NCCL_ALGO") or "unset"}, '
            f'NCCL_PROTO={env.get("NCCL_PROTO") or "unset"})')
    return algo, proto, note


def replay_columns():
    """Columns of a replayed pattern: the input's, then what was measured."""
    return list(COLUMNS) + ['replay_ALGO', 'replay_PROTOCOL', 'replay_nranks',
                            'measured_time_us', 'algbw_GBps', 'busbw_GBps',
                            'ideal_busbw_GBps', 'efficiency_pct']
