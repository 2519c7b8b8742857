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

import math
import re

from ccl_health import CclHealthError
from ccl_health.evidence.results import (
    Measurement, Row, SweepResult)
from ccl_health.evidence.nccltests_json import looks_like_json, parse_json_any


# -- text ------------------------------------------------------------------

# A line NCCL's logger writes: "host:pid:tid [dev] NCCL INFO ..."
# (src/debug.cc); pasted logs lose the prefix: "[0] NCCL INFO ...", or a
# bare "NCCL INFO ..." at the start of the line
_NCCL_LOG = re.compile(r'(?:\S+:\d+:\d+ \[\d+\] (?:\S+ )?|\[\d+\] |^\s*)'
                       r'[NR]CCL (INFO|WARN|TRACE|ERROR)\b')
_NUM = r'[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)'
# prefixes that launchers and log collectors put before every line
_PREFIXES = (
    # Open MPI's --tag-output: "[1,0]<stdout>:"
    # (indented where a Kubernetes job's log is quoted)
    re.compile(r'^\s*\[\d+,\d+\]<std(?:out|err)>:\s?'),
    # timestamps: "2024-05-01T12:00:00.123Z ", "[2024-05-01 12:00:00] "
    re.compile(r'^\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?'
               r'(?:Z|[+-]\d{2}:?\d{2})?\]?:?\s+'),
    # srun --label: "0: ", "12: ", "  0: "; MPICH / srun tags "[0] " (a
    # "[0] NCCL INFO" line stays one of NCCL's: _NCCL_LOG reads it bare)
    re.compile(r'^\s*\d+:\s'),
    re.compile(r'^\s*\[\d+\]\s(?!\s*[NR]CCL )'),
    # kubectl logs --prefix: "[pod/nccl-worker-0/mpi] "
    re.compile(r'^\[(?:pod|job|deployment)/[^\]\s]+\]\s'),
)
# pdsh / kubectl / a collector: "host: " before what the program prints
_HOST_PREFIX = re.compile(r'^[A-Za-z][\w.-]*:\s+')
_TABLE_START = re.compile(r'^(?:#|\s*\d+\s+\d+\s|rccl-tests:|[NR]CCL version'
                          r'|\S+:\d+:\d+ \[\d+\])')
_BARE_HOST = re.compile(r'^\s*(?:[A-Za-z][\w.-]*:\s*)?$')
# "#   Rank %2d [Group %2d] [Pid %6d] on %10s device %2d [%s] %s" (no Pid
# before nccl-tests 2.4, no Group before 2.13)
_RANK_LINE = re.compile(r'^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?'
                        r'(?:Pid\s+(?P<pid>\d+)\s+)?on\s+'
                        r'(?P<host>\S+)\s+device\s+(?P<dev>\d+)\s+'
                        r'\[([^\]]+)\]\s*(?P<model>.*)$')
# the column header: "size count type" since 2.4; the first releases
# (2017-2019) printed "bytes N type op ... res" (res: the largest delta)
_HEADER = re.compile(r'^#\s+(?:size\s+count|bytes\s+N)\s+type\b(.*)$')
_OOB = re.compile(r'^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?')
_AVG = re.compile(r'^#\s*Avg bus bandwidth\s*:\s*(' + _NUM + r'|-nan)'
                  r'\s*(OK|FAILED)?')
# the first releases printed the run's header and the summary without '#'
_HASHLESS = re.compile(r'^(?:nThreads?:? \d|Out of bounds values\s*:'
                       r'|Avg bus bandwidth\s*:|(?:size\s+count|bytes\s+N)'
                       r'\s+type\s)')
# "nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) ..."
# (nccl-tests), "nThreads: %d nGpus: %d nRanks: %d minBytes: %ld maxBytes:
# %ld step: %ld(%s) ..." (rccl-tests; its nRanks is ranks per GPU)
_RUN_HEADER = re.compile(
    r'^#?\s*nThreads?:?\s+(\d+)\s+nGpus:?\s+(\d+)\s+(?:nRanks:?\s+\d+\s+)?'
    r'minBytes:?\s+(\d+)\s+maxBytes:?\s+(\d+)\s+step:\s*(\d+)\((\w+)\)')
# "# nccl-tests version %s nccl-headers=%d nccl-library=%d" (nccl-tests
# src/util.cu); rccl-tests since its 2.18 releases prints the same banner
# with its own names: "# rccl-tests version %s rccl-headers=%d
# rccl-library=%d"
_VERSION = re.compile(r'^#\s*([nr]ccl)-tests version\s+(\S+)\s+'
                      r'[nr]ccl-headers=(\d+)\s+[nr]ccl-library=(\d+)')
# the hook's one probe process (builders/src/ccl_health_links.cu built as
# ccl-health-probe) prints nccl-tests' table under its own banner:
# "# ccl-health-probe version %d nccl-headers=%d nccl-library=%d"
_PROBE_VERSION = re.compile(r'^#\s*(ccl-health-probe) version\s+(\S+)\s+'
                            r'[nr]ccl-headers=(\d+)\s+[nr]ccl-library=(\d+)')
_RCCL_TESTS_VERSION = re.compile(r'^rccl-tests:\s*Version\s+(\S+)')
_LIB_VERSION = re.compile(r'^(?:NCCL|RCCL) version\s*:?\s*(\S+)')
_STARTING = re.compile(r'^#\s*Collective test starting:\s*(\S+)')
_REDUCED = re.compile(r'^#\s*Reducing maxBytes to (\d+)')
_LAST_ERROR = re.compile(r'^#\s*error:\s*(.*)$')
#: the program's own timeout (nccl-tests -T), and PyTorch's
#: ProcessGroupNCCL watchdog ("Watchdog caught collective operation
#: timeout: WorkNCCL(...)"): an operation that never completed, a hang
_TIMEOUT = re.compile(r'Test timeout \((\d+)s\)|Watchdog caught collective '
                      r'operation timeout')
# what nccl-tests, rccl-tests, NCCL/RCCL, the HIP/CUDA runtime and MPI
# print when the program failed (a launcher's own messages are not: the
# exit status tells those)
_ERROR = re.compile(
    r'(Test (?:NCCL|CUDA|HIP) failure|Test failure|\bCuda failure\b'
    r'|\bCUDA failure\b|\bNCCL failure\b|\bHIP failure\b|\bhipError\w*'
    r'|\bHip error\b|\bHIP error\b|NCCL error|MPI_ABORT|MPI_Abort'
    r'|#wrong=)')
#: the errors the test program itself prints (nccl-tests / rccl-tests
#: src/common.h NCCLCHECK/CUDACHECK "%s: Test NCCL failure %s:%d", "Test
#: failure", the first releases' "NCCL failure common.cu:%d", the timeout
#: and a wrong-count report): a text with one is the program's output; an
#: application's "NCCL error in: ..." in a training log is not
TEST_ERROR = re.compile(
    r'\bTest (?:NCCL|CUDA|HIP) failure\b|\bTest failure\b|'
    r'\bNCCL failure \S+\.cu:\d+|Test timeout|#wrong=')
#: the names of the signals a crashed process is announced with
_SIGNAL_NAMES = {4: 'Illegal instruction', 6: 'Aborted', 7: 'Bus error',
                 8: 'Floating point exception', 11: 'Segmentation fault'}
_SIGNAL_NUMBERS = {v.lower(): k for k, v in _SIGNAL_NAMES.items()}
#: a process of the run that died of a signal, as the one who saw it
#: announces it (each a ``(regex, how)``; ``how`` gives the signal's name
#: and number from the match):
#: Open MPI's handler (opal/util/stacktrace.c: "[%s:%05d] Signal: %s
#: (%d)"), mpirun / prterun ("... noticed that process rank %d with PID %d
#: on node %s exited on signal %d (%s)."), MPICH's "EXIT STRING: %s
#: (signal %d)", UCX's "Caught signal %d (%s: ...)", the shell and srun
#: ("Segmentation fault (core dumped)", "srun: error: %s: task %d:
#: Aborted (core dumped)"), and glibc's abort on a damaged heap
#: (malloc/malloc.c malloc_printerr: "free(): corrupted unsorted chunks",
#: "double free or corruption (out)", ...; older glibc wraps it as "*** Error
#: in `%s': %s: 0x%s ***", older still "*** glibc detected *** %s: %s: 0x%s
#: ***") and on a smashed stack: both abort (signal 6)
_SIGNAL = (
    (re.compile(r'\bSignal: ([A-Z][\w ]*?) \((\d+)\)'),
     lambda m: (m.group(1), int(m.group(2)))),
    (re.compile(r'\bexited on signal (\d+)(?: \(([^)]+)\))?'),
     lambda m: (m.group(2), int(m.group(1)))),
    (re.compile(r'EXIT STRING: ([A-Z][\w ]*?) \(signal (\d+)\)'),
     lambda m: (m.group(1), int(m.group(2)))),
    (re.compile(r'\bCaught signal (\d+) \(([A-Z][\w ]*?)[:)]'),
     lambda m: (m.group(2), int(m.group(1)))),
    (re.compile(r'^(?:.*?: line \d+: *\d+ +|srun: error: \S+: tasks? '
                r'[\d,\-]+: )?(Segmentation fault|Aborted|Bus error|'
                r'Illegal instruction|Floating point exception)'
                r'(?: +\(core dumped\))?(?:\s|$)'),
     lambda m: (m.group(1), None)),
    (re.compile(r'^(?:\*\*\* Error in `[^`]*\'?: |\*\*\* glibc detected '
                r'\*\*\* [^:]*: )?(?:(?:free|malloc|realloc|'
                r'calloc|munmap_chunk|malloc_consolidate|_int_free|'
                r'_int_malloc|tcache_thread_shutdown)\(\): [a-z]|double free '
                r'or corruption|corrupted size vs\. prev_size|corrupted '
                r'double-linked list)|\*\*\* stack smashing detected \*\*\*'),
     lambda m: ('Aborted', 6)),
)


def signal_of(line):
    """``'<name> (<number>)'`` of the signal ``line`` announces a process
    died of (:data:`_SIGNAL`), or None."""
    for rx, how in _SIGNAL:
        m = rx.search(line)
        if m:
            name, num = how(m)
            if num is None:
                num = _SIGNAL_NUMBERS.get((name or '').lower())
            name = name or _SIGNAL_NAMES.get(num) or 'signal'
            return f'{name} ({num})' if num is not None else name
    return None


#: the command line of a run pasted with its output: the program
#: (``all_reduce_perf``, ``all_gather_perf_mpi``) and its ``-b`` / ``-e`` /
#: ``-f`` (nccl-tests src/common.cu: ``--minbytes``, ``--maxbytes``,
#: ``--stepfactor``; sizes with a K / M / G suffix, powers of 1024)
_COMMAND = re.compile(r'(?:^|[\s/])([a-z_]+)_perf(?:_mpi)?(?=\s)(.*)$')
_CMD_OPT = re.compile(r'(?:^|\s)(-b|-e|-f|--minbytes|--maxbytes|'
                      r'--stepfactor)(?:\s+|=)(\d+)([KkMmGg]?)\b')
_UNITS = {'': 1, 'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30}
#: the processes a launcher line asks for: mpirun / mpiexec / prterun
#: ``-np N`` / ``-n N``; srun ``-n N`` / ``--ntasks=N``, or ``-N`` /
#: ``--nodes`` times ``--ntasks-per-node``
_MPI_NP = re.compile(r'\b(?:mpirun|mpiexec|prterun)\b.*?\s(?:-np|-n|--np|'
                     r'-c)[\s=]+(\d+)\b')
_SRUN = re.compile(r'\bsrun\b')
_SRUN_NTASKS = re.compile(r'\s(?:-n|--ntasks)[\s=]+(\d+)\b')
_SRUN_NODES = re.compile(r'\s(?:-N|--nodes)[\s=]+(\d+)\b')
_SRUN_PER_NODE = re.compile(r'\s--ntasks-per-node[\s=]+(\d+)\b')


def _launched(line):
    """The processes the launcher part ``line`` of a command asks for, or
    None."""
    m = _MPI_NP.search(line)
    if m:
        return int(m.group(1))
    if _SRUN.search(line):
        m = _SRUN_NTASKS.search(line)
        if m:
            return int(m.group(1))
        n, per = _SRUN_NODES.search(line), _SRUN_PER_NODE.search(line)
        if n and per:
            return int(n.group(1)) * int(per.group(1))
    return None


def _command(res, line):
    """Read the collective and the sizes asked of a pasted command line
    (a sweep by a factor: ``-b``, ``-e`` and ``-f`` >= 2 all given)."""
    m = _COMMAND.search(line)
    if not m:
        return False
    opts = {}
    for o in _CMD_OPT.finditer(m.group(2)):
        key = {'--minbytes': '-b', '--maxbytes': '-e',
               '--stepfactor': '-f'}.get(o.group(1), o.group(1))
        opts[key] = int(o.group(2)) * _UNITS[o.group(3).lower()]
    if not ('-b' in opts or '-e' in opts):
        return False
    res.collective = res.collective or m.group(1) + '_perf'
    procs = _launched(line[:m.start()])
    if procs:
        per = 1
        for flag in ('-g', '-t'):
            o = re.search(r'(?:^|\s)' + flag + r'\s+(\d+)\b', m.group(2))
            per *= int(o.group(1)) if o else 1
        res.launcher_ranks = procs * per
    if '-b' in opts and '-e' in opts and opts.get('-f', 0) >= 2:
        res.command_sizes = (opts['-b'], opts['-e'], opts['-f'])
    return True


_DATE = re.compile(r'^\d{4}-\d{2}-\d{2}$')
#: the start of a data row: size, count, type
_ROW_START = re.compile(r'^\d+\s+\d+\s+[A-Za-z]\w*\b')
_TIME = re.compile(r'^\d{2}:\d{2}:\d{2}$')
#: an error printed behind the start of a size's row: nccl-tests prints a
#: size's preamble (size, count, type, redop, root) before timing it, and a
#: rank that fails there prints its "<host>: Test NCCL failure ..." on the
#: same line, glued to the root column
_ROW_THEN_ERROR = re.compile(
    r'^(?P<size>\d+)\s+\d+\s+[A-Za-z]\w*\s+\S+\s+-?\d+(?P<err>\S.*)$')
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


#: the communicator's size on NCCL's own lines ("rank 0 nranks 16",
#: "rank 0 nRanks 16 nNodes 2"): src/init.cc
_LOG_NRANKS = re.compile(r'\brank \d+ nranks (\d+)', re.I)


#: a launcher's tag at the end of a line's text: where another process's
#: line (its own tag first) was written into the middle of a row
_TAG_TAIL = re.compile(r'\s*\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?\s*$')
_TAG_MID = re.compile(r'\s*\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?\s*')


def _strip_nccl_log(lines, warn_lines=None, sizes=None):
    """Yield the lines of ``lines`` without prefixes and with NCCL's own
    log lines removed, joining a table row that a log line cut in two.
    NCCL WARN lines go to ``warn_lines``; the communicator sizes NCCL's
    lines name go to ``sizes``."""
    pending = ''
    for line in lines:
        line = strip_prefixes(line)
        m = _NCCL_LOG.search(line)
        if m:
            if m.group(1) in ('WARN', 'ERROR') and warn_lines is not None:
                warn_lines.append(line[m.start():].strip())
            n = _LOG_NRANKS.search(line)
            if n and sizes is not None:
                sizes.append(int(n.group(1)))
            # the launcher's tag of the other process's line ("[1] ",
            # "[1,1]<stdout>: ") that cut the row is not the row's
            head = _TAG_TAIL.sub(' ', line[:m.start()])
            if not _BARE_HOST.match(head):     # a row cut by the log line
                pending += head
            continue
        yield pending + line
        pending = ''
    if pending:
        yield pending


def _processes_cut(res):
    """Whether the rank lines leave a process short: nccl-tests' header
    ``# nThread %d nGpus %d`` gives each process ``nThread x nGpus`` ranks,
    each printing one ``#  Rank %2d Group %2d Pid %6d on %10s ...`` line
    (src/util.cu, writeDeviceReport: ``rank = proc*nThreads*nGpus+i``).
    A process with fewer lines, or fewer lines in all than a whole number
    of processes, is an excerpt: the lines then give a lower bound only
    (the number of processes is printed nowhere)."""
    per_proc = (res.threads or 0) * (res.gpus_per_process or 0)
    if per_proc <= 1 or not res.rank_ids or res.repeated_ranks:
        return False
    if all(p is not None for p in res.rank_pids):
        procs = {}
        for host, pid in zip(res.rank_hosts, res.rank_pids):
            procs[(host, pid)] = procs.get((host, pid), 0) + 1
        return any(n != per_proc for n in procs.values())
    return len(set(res.rank_ids)) % per_proc != 0


def _rank_count(res, logged):
    """The communicator's size: the rank lines where they cover ranks 0 ..
    n-1 (a rank printed twice is two processes that each ran alone: the
    distinct ranks); else, where only some were pasted, the size NCCL's own
    lines name (``logged``), the busbw / algbw factor of the collective
    (:func:`ccl_health.evidence.collectives.ranks_of_factor`), or None:
    unknown, never one rank by default."""
    ids = set(res.rank_ids)
    factor = _factor_ranks(res)
    if res.devices and not _processes_cut(res) and (
            res.repeated_ranks or not res.rank_ids or
            ids == set(range(len(ids)))):
        seen = len(ids) if res.repeated_ranks else len(res.devices)
        # the rank lines are cut where the launcher line, NCCL's own
        # lines or the busbw / algbw factor name more ranks
        more = [n for n in (max(logged) if logged else None,
                            res.launcher_ranks, factor) if n and n > seen]
        if res.repeated_ranks or not more:
            return seen
    res.rank_lines_partial = bool(res.devices)
    if logged:
        return max(logged)
    return res.launcher_ranks or factor


def _factor_ranks(res):
    """The rank count the busbw / algbw factor of the collective shows,
    or None."""
    if not (res.collective and res.rows):
        return None
    from ccl_health.evidence import collectives
    pairs = [(m.algbw, m.busbw) for r in res.rows
             for m in (r.out_of_place, r.in_place) if m is not None]
    try:
        return collectives.ranks_of_factor(res.collective, pairs)
    except CclHealthError:
        return None


def _finish(res, logged=()):
    """What can be known only once everything is read: rank count, the
    wrong-ness of ``error`` columns, the format."""
    res.nranks = _rank_count(res, list(logged))
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


def _run_header(res, m):
    res.threads, res.gpus_per_process = int(m.group(1)), int(m.group(2))
    res.min_bytes, res.max_bytes = int(m.group(3)), int(m.group(4))
    res.step = int(m.group(5))
    res.step_factor = res.step if m.group(6) == 'factor' else None


def _error_of(line):
    """The error of ``line`` without the row preamble it was printed
    behind (:data:`_ROW_THEN_ERROR`): ``vm: Test NCCL failure ... (at size
    134217728 B)``; other lines as they are."""
    m = _ROW_THEN_ERROR.match(line)
    if not m or not _ERROR.search(m.group('err')):
        return line
    return f'{m.group("err").strip()} (at size {m.group("size")} B)'


# long: one pass over the lines of an output: a state machine
def parse_text(text):
    """Parse the stdout of an nccl-tests / rccl-tests binary."""
    res = SweepResult(source='text', closed=False)
    warns, logged = [], []
    saw_avg = per_iter = False
    head = ''            # the start of a row that a line break cut
    for line in _strip_nccl_log(text.splitlines(), warns, logged):
        s = line.strip()
        if not s:
            continue
        if head:
            row = _parse_row(head + ' ' + s, res.check_column == 'error',
                             per_iter)
            head = ''
            if row:
                res.rows.append(row)
                continue
        if _HASHLESS.match(s):
            s = '# ' + s
        if s.startswith('#') and _ROW_START.match(s.lstrip('#').strip()):
            # a data row pasted behind a '#' (a commented or typeset table)
            row = _parse_row(s.lstrip('#').strip(),
                             res.check_column == 'error', per_iter)
            if row:
                res.rows.append(row)
                continue
        if s.startswith('#'):
            m = _RUN_HEADER.match(s)
            if m:
                _run_header(res, m)
                continue
            m = _RANK_LINE.match(s)
            if m:
                host = m.group('host')
                res.rank_hosts.append(host)
                res.rank_ids.append(int(m.group(1)))
                res.rank_pids.append(int(m.group('pid')) if m.group('pid')
                                     else None)
                res.devices.append(f'{host}:{m.group("dev")} '
                                   f'{m.group("model")}'.strip())
                if host not in res.hosts:
                    res.hosts.append(host)
                continue
            m = _HEADER.match(s)
            if m:
                cols = m.group(1).split()
                if 'error' in cols or 'res' in cols:
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
            m = _VERSION.match(s) or _PROBE_VERSION.match(s)
            if m:
                if m.group(1) == 'ccl-health-probe':
                    res.tests_version = f'{m.group(1)} {m.group(2)}'
                elif m.group(1) == 'rccl':
                    res.tests_version = 'rccl-tests ' + m.group(2)
                    res.format = 'rccl-tests'
                else:
                    res.tests_version = m.group(2)
                res.nccl_version = int(m.group(4))
            m = _STARTING.match(s)
            if m:
                res.collective = m.group(1)
            m = _REDUCED.match(s)
            if m:
                res.notes.append(s.lstrip('# '))
                if res.max_bytes is not None:    # what the run now covers
                    res.max_bytes = int(m.group(1))
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
        if not row and _ROW_START.match(s) and _TAG_MID.search(s):
            # a launcher's tag written into the middle of the row
            row = _parse_row(_TAG_MID.sub(' ', s),
                             res.check_column == 'error', per_iter)
        if row:
            res.rows.append(row)
            continue
        sig = signal_of(s)
        if sig:
            res.errors.append(s)
            res.signal = res.signal or sig
        elif '_perf' in s and _command(res, s):
            continue
        elif _ERROR.search(s):
            res.errors.append(_error_of(s))
        elif _ROW_START.match(s) and res.check_column is not None:
            head = s          # joined with the rest of the row that follows
    res.errors.extend(w for w in warns if _ERROR.search(w))
    if saw_avg and text and not text.endswith(('\n', '\r')) and \
            _AVG.match(strip_prefixes(text.splitlines()[-1]).strip()):
        saw_avg = False            # the output was cut inside that line
    res.closed = res.out_of_bounds is not None and saw_avg
    return _finish(res, logged)


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
        res.rank_hosts, res.rank_pids = text.rank_hosts, text.rank_pids
        res.rank_ids = text.rank_ids
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
