"""Damage real nccl-tests / rccl-tests outputs the ways runs and log
collectors damage them.  Every function takes the text of a real capture
and returns a new text; the failure lines are built from the programs' own
format strings (cited at each).  Used by tests/test_output_faults.py and by
any consumer's fault-matrix test."""

import glob
import json
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, 'tests', 'fixtures')


def _read(path):
    with open(path, errors='replace') as fp:
        return fp.read()


def _rc(path):
    """The exit status in a capture's rc.txt (``rc=N wall=...``)."""
    m = re.search(r'rc=(\d+)', _read(path)) if os.path.exists(path) else None
    return int(m.group(1)) if m else None


def captures():
    """Every real capture of a finished nccl-tests / rccl-tests run:
    ``[(name, stdout, json_or_None, exit_status)]``.  The published outputs
    carry no exit status; they are given 0 (their closing lines are there
    and nccl-tests exits 0 after them unless something was wrong)."""
    out = []
    for d in sorted(glob.glob(os.path.join(FIXTURES, 'device', 'cap', '*'))):
        so = os.path.join(d, 'stdout.txt')
        if not os.path.exists(so):
            continue
        js = os.path.join(d, 'result.json')
        out.append((f'cap/{os.path.basename(d)}', _read(so),
                    _read(js) if os.path.exists(js) else None,
                    _rc(os.path.join(d, 'rc.txt'))))
    for so in sorted(glob.glob(os.path.join(
            FIXTURES, 'device', '*', 'keep', '**', 'rfm_job.out'),
            recursive=True)):
        text = _read(so)
        if 'nccl-tests version' not in text:
            continue                 # torch / health outputs
        js = os.path.join(os.path.dirname(so), 'result.json')
        name = os.path.relpath(os.path.dirname(so),
                               os.path.join(FIXTURES, 'device'))
        out.append((name, text, _read(js) if os.path.exists(js) else None,
                    None))
    for p in sorted(glob.glob(os.path.join(FIXTURES, 'published', '*'))):
        if p.endswith(('.txt', '.log')):
            out.append((f'published/{os.path.basename(p)}', _read(p), None,
                        0))
    return out


def complete_captures():
    """The captures that end with their closing lines and exited 0 (or
    carry no status): the ones a judge may pass."""
    return [(n, s, j, 0) for n, s, j, rc in captures()
            if rc in (0, None) and AVG_LINE.search(s) and ROW.search(s)]


# -- the parts of an output ---------------------------------------------------

#: a table row (after any prefix): size and count, then a type name
ROW = re.compile(r'^(?P<pre>.*?)(?P<row>\s*\d+\s+\d+\s+[A-Za-z]\w*\s+.*\d.*)$',
                 re.M)
OOB_LINE = re.compile(r'^(?P<pre>.*?)# Out of bounds values\s*:\s*\d+\s*\w*',
                      re.M)
AVG_LINE = re.compile(r'^(?P<pre>.*?)# Avg bus bandwidth\s*:.*$', re.M)
_NCCL_LOG = re.compile(r'\S+:\d+:\d+ \[\d+\] NCCL (INFO|WARN)')


def lines(text):
    return text.splitlines(keepends=True)


def row_indexes(text):
    """Line numbers of the table rows (NCCL log lines left out)."""
    from ccl_health.evidence import nccltests
    out = []
    for i, ln in enumerate(lines(text)):
        if _NCCL_LOG.search(ln):
            continue
        s = nccltests.strip_prefixes(ln.rstrip('\n')).strip()
        if s and not s.startswith('#') and nccltests._parse_row(s):
            out.append(i)
    return out


def closing_index(text):
    """The line number of the "Avg bus bandwidth" line (the last closing
    line a judge needs)."""
    for i, ln in enumerate(lines(text)):
        if AVG_LINE.match(ln.rstrip('\n')):
            return i
    return None


# -- mutations --------------------------------------------------------------

def truncate_lines(text, n):
    """The first ``n`` lines of ``text`` (a run killed, a log cut)."""
    return ''.join(lines(text)[:n])


def truncate_chars(text, n):
    return text[:n]


def drop_closing(text):
    """The table without its closing summary lines."""
    return ''.join(ln for ln in lines(text)
                   if not OOB_LINE.match(ln) and not AVG_LINE.match(ln))


def only_header(text):
    """Everything before the first row (zero rows), closing lines kept."""
    rows = set(row_indexes(text))
    return ''.join(ln for i, ln in enumerate(lines(text)) if i not in rows)


def _replace_field(line, k, value):
    """``line`` with its ``k``-th whitespace-separated field (counted in the
    row after any prefix) replaced by ``value``, right-aligned in the old
    width."""
    spans = [m.span() for m in re.finditer(r'\S+', line)]
    # skip the prefix: the row starts at the first field that is the size
    from ccl_health.evidence import nccltests
    body = nccltests.strip_prefixes(line)
    skip = len(spans) - len(body.split())
    a, b = spans[skip + k]
    width = b - a
    return line[:a] + value.rjust(width) + line[b:]


def _measure_fields(line):
    """Field numbers (in the row) of the measurement groups: ``[(time,
    algbw, busbw, check), ...]``."""
    from ccl_health.evidence import nccltests
    toks = nccltests.strip_prefixes(line).split()
    n = len(toks) - 3
    nkeys = n % 4
    first = 3 + nkeys
    groups = []
    for g in range((n - nkeys) // 4):
        s = first + 4 * g
        groups.append((s, s + 1, s + 2, s + 3))
    return groups


def set_value(text, row, group, column, value):
    """Replace one value of table row number ``row`` (0 = first row):
    ``group`` 0 out-of-place / 1 in-place (-1: the last), ``column`` 0 time,
    1 algbw, 2 busbw, 3 #wrong / error."""
    ls = lines(text)
    i = row_indexes(text)[row]
    body = ls[i].rstrip('\n')
    k = _measure_fields(body)[group][column]
    ls[i] = _replace_field(body, k, value) + ls[i][len(body):]
    return ''.join(ls)


#: what printf writes for non-finite doubles (glibc %f / %g)
NONFINITE = ('nan', '-nan', 'inf', '-inf')


def inject_nonfinite(text, row, group=0, column=2, value='nan'):
    return set_value(text, row, group, column, value)


def set_wrong(text, row, n=3, group=0):
    """A nonzero #wrong (nccl-tests >= 2.12: ``%6g`` of the count) or, in
    a 2.0-format table, an ``error`` beyond any tolerance (``%5.0le``)."""
    ls = lines(text)
    body = nccltests_row(ls[row_indexes(text)[row]])
    check = body.split()[_measure_fields(body)[group][3]]
    value = f'{float(n):5.0e}' if 'e' in check else f'{float(n):g}'
    return set_value(text, row, group, 3, value)


def nccltests_row(line):
    from ccl_health.evidence import nccltests
    return nccltests.strip_prefixes(line.rstrip('\n'))


def oob_failed(text, n=2):
    """``# %-20s : %d %s`` with FAILED (util.cu writeResultFooter)."""
    return OOB_LINE.sub(lambda m: f'{m.group("pre")}# Out of bounds values '
                        f': {n} FAILED', text)


def avg_failed(text):
    """NCCL_TESTS_MIN_BW set and not met: ``... : %g FAILED``."""
    return AVG_LINE.sub(lambda m: m.group(0).rstrip() + ' FAILED', text)


def insert_line(text, at, line):
    """``line`` inserted before line number ``at`` (beyond the end:
    appended)."""
    ls = lines(text)
    if ls and not ls[-1].endswith('\n'):
        ls[-1] += '\n'
    ls.insert(min(at, len(ls)), line.rstrip('\n') + '\n')
    return ''.join(ls)


#: failure lines, each from its program's format string
FAILURE_LINES = {
    # nccl-tests src/common.h CUDACHECK: "%s: Test CUDA failure %s:%d '%s'\n"
    'test-cuda': "vm: Test CUDA failure common.cu:1180 'an illegal memory "
                 "access was encountered'",
    # NCCLCHECK (NCCL >= 2.13): "%s: Test NCCL failure %s:%d '%s / %s'\n"
    'test-nccl': "vm: Test NCCL failure common.cu:1089 'unhandled system "
                 "error (run with NCCL_DEBUG=INFO for details) / '",
    # TESTCHECK: " .. %s pid %d: Test failure %s:%d\n"
    'test-failure': ' .. vm pid 25480: Test failure common.cu:1145',
    # nccl-tests 1.x CUDACHECK / NCCLCHECK: "Cuda failure %s:%d '%s'\n",
    # "NCCL failure %s:%d '%s'\n"
    'cuda-failure': "Cuda failure common.cu:393 'out of memory'",
    'nccl-failure': "NCCL failure common.cu:417 'unhandled cuda error'",
    # NCCL's own CUDACHECK through its logger: WARN("Cuda failure '%s'")
    'nccl-warn-cuda': "vm:25480:25510 [0] NCCL WARN Cuda failure 'an "
                      "illegal memory access was encountered'",
    # RCCL's HIP check: WARN("HIP failure '%s'")
    'rccl-warn-hip': "gpu-53:3844613:3844700 [0] NCCL WARN HIP failure "
                     "'hipErrorIllegalAddress'",
    # rccl-tests CHECK_HIP_ERROR: "Hip error: '%s'(%d) at %s:%d\n"
    'hip-error': "Hip error: 'hipErrorOutOfMemory'(2) at common.cu:1288",
    # Open MPI's MPI_Abort message
    'mpi-abort': 'MPI_ABORT was invoked on rank 1 in communicator '
                 'MPI_COMM_WORLD with errorcode 1.',
}


#: line prefixes that launchers and collectors add
PREFIXES = {
    'openmpi-tag': lambda i: '[1,0]<stdout>:',
    'srun-label': lambda i: '0: ',
    'hostname': lambda i: 'nid001234: ',
    'iso-time': lambda i: f'2024-05-01T12:00:{i % 60:02d}.123Z ',
    'bracket-time': lambda i: f'[2024-05-01 12:00:{i % 60:02d}] ',
    'time+openmpi': lambda i: '2024-05-01T12:00:00Z [1,0]<stdout>:',
}


def prefix_lines(text, kind):
    make = PREFIXES[kind]
    return ''.join(make(i) + ln for i, ln in enumerate(lines(text)))


# -- JSON ----------------------------------------------------------------

def truncate_json(json_text, n):
    return json_text[:n]


def json_nonfinite(json_text, index=0, key='bus_bw', value='nan'):
    """nccl-tests' jsonDouble writes nan as the string "nan" and inf as
    printf's bare inf (util.cu)."""
    doc = json.loads(json_text)
    doc['results'][index]['out_of_place'][key] = 'NAN_MARK'
    text = json.dumps(doc)
    lit = '"nan"' if value == 'nan' else value
    return text.replace('"NAN_MARK"', lit)


def json_wrong(json_text, index=0, n=5):
    doc = json.loads(json_text)
    doc['results'][index]['out_of_place']['nwrong'] = float(n)
    return json.dumps(doc)


def rccl_json_lines(result, nodes=1, array=False):
    """rccl-tests' ``-Z json`` output for the rows of ``result``: one object
    per (size, in-place) written as Reporter::addResult does (numbers with
    std::to_string, strings quoted, ``wrong`` a quoted count); ``array``:
    the newer form (a JSON array with "numCycle", written at the end)."""
    def num(v):
        if isinstance(v, float):
            return ('-nan' if v != v else 'inf' if v == float('inf') else
                    '-inf' if v == float('-inf') else f'{v:.6f}')
        return str(v)
    out = []
    n = result.nranks or 2
    for r in result.rows:
        for inplace, m in ((0, r.out_of_place), (1, r.in_place)):
            if m is None:
                continue
            kv = ([('numCycle', '0')] if array else []) + [
                ('name', '"AllReduce"'), ('nodes', str(nodes)),
                ('ranks', str(n)), ('ranksPerNode', str(n // nodes)),
                ('gpusPerRank', '1'), ('size', str(r.size)),
                ('type', f'"{r.dtype}"'), ('redop', f'"{r.redop}"'),
                ('inPlace', str(inplace)), ('time', num(m.time_us)),
                ('algBw', num(m.algbw)), ('busBw', num(m.busbw)),
                ('wrong', '"N/A"' if m.wrong is None else f'"{m.wrong}"')]
            out.append('{' + ', '.join(f'"{k}":{v}' for k, v in kv) + '}')
    if array:
        return '[\n' + ',\n'.join(out) + '\n]\n'
    return '\n'.join(out) + '\n'


# -- a registry, for fault matrices -------------------------------------------

def _cut(text, rnd):
    return truncate_lines(text, rnd.randint(0, closing_index(text)))


def _cut_chars(text, rnd):
    end = sum(len(ln) for ln in lines(text)[:closing_index(text) + 1])
    return truncate_chars(text, rnd.randint(0, end - 1))


def _nonfinite(text, rnd):
    return inject_nonfinite(text, rnd.randrange(len(row_indexes(text))),
                            rnd.choice([0, -1]), rnd.randint(0, 2),
                            rnd.choice(NONFINITE))


def _failure(text, rnd):
    return insert_line(text, rnd.randint(0, len(lines(text))),
                       FAILURE_LINES[rnd.choice(sorted(FAILURE_LINES))])


def _wrong(text, rnd):
    return set_wrong(text, rnd.randrange(len(row_indexes(text))),
                     rnd.randint(1, 10 ** 6), rnd.choice([0, -1]))


#: mutations that the output alone shows (a judge of the table with no
#: logs, no reference and no ceiling must fail them), whatever the exit
#: status: name -> f(text, random.Random) -> text
OUTPUT_DAMAGING = {
    'truncate-lines': _cut,
    'truncate-chars': _cut_chars,
    'drop-closing': lambda t, rnd: drop_closing(t),
    'zero-rows': lambda t, rnd: only_header(t),
    'nonfinite': _nonfinite,
    'failure-line': _failure,
    'wrong': _wrong,
    'oob-failed': lambda t, rnd: oob_failed(t, rnd.randint(1, 1000)),
    'avg-failed': lambda t, rnd: avg_failed(t),
}

#: mutations that change nothing a judge may see
HARMLESS = {f'prefix-{k}': (lambda k: lambda t, rnd: prefix_lines(t, k))(k)
            for k in PREFIXES}


# -- the judge's classes (issue 19: 4 impossible numbers, 5 ambiguous or
# damaged tables, 6 NCCL WARN lines); every door judges these through
# ccl_health.judge.casejudge (tests/test_cross_door.py) -------------------------

#: NCCL's logger prefix of a WARN line (src/debug.cc: "%s:%d:%d [%d] NCCL
#: WARN "), the texts from NCCL's proxy.cc ("[Service thread] Error
#: encountered progressing operation=%s, res=%d, closing connection") and
#: aws-ofi-nccl's NCCL_OFI_WARN("Unable to register memory (type = %d) for
#: device %d. RC: %d, Error: %s")
WARN_LINES = {
    'warn-progress': 'vm:1:1 [0] NCCL WARN [Service thread] Error '
                     'encountered progressing operation=Connect, res=3, '
                     'closing connection',
    'warn-regmem': 'vm:1:1 [0] NCCL WARN NET/OFI Unable to register memory '
                   '(type = 2) for device 0. RC: -22, Error: Invalid argument',
    'warn-cuda': 'vm:1:1 [0] NCCL WARN Cuda failure 700 \'an illegal memory '
                 'access was encountered\'',
}


#: ``(mutation, transport)``: mutations that are no damage of a case of
#: that transport: the net plugin's WARN (NET/OFI) on an intra-node run,
#: whose asked and proven transport needs no network (issue 27: named,
#: not fatal)
NOT_OF_THE_CASE = {('warn-regmem', 'intra')}


def add_warn(text, rnd, key):
    """A WARN line of ``key`` among the lines before the closing summary."""
    return insert_line(text, rnd.randint(0, closing_index(text)),
                       WARN_LINES[key])


def _last_row(text):
    return len(row_indexes(text)) - 1


def impossible_busbw(text, rnd):
    """A busbw of 1e308 (``%7.2f`` prints its 309 digits)."""
    return set_value(text, rnd.randrange(len(row_indexes(text))),
                     rnd.choice([0, -1]), 2, f'{1e308:.2f}')


def nonpositive_time(text, rnd):
    return set_value(text, rnd.randrange(len(row_indexes(text))),
                     rnd.choice([0, -1]), 0, rnd.choice(['-12.50', '0.00']))


def repeat_size(text, rnd):
    """A row printed again with another busbw (two runs pasted together)."""
    ls = lines(text)
    rows = row_indexes(text)
    i = rows[rnd.randrange(len(rows))]
    again = set_value(ls[i], 0, 0, 2, '999.99')
    return ''.join(ls[:i + 1] + [again if again.endswith('\n')
                                 else again + '\n'] + ls[i + 1:])


def drop_row(text, rnd, where='middle'):
    """One row taken out, the closing lines kept: a middle row, or the
    last ones (a table that ends before the header's maxBytes)."""
    rows = row_indexes(text)
    if where == 'middle':
        gone = {rows[rnd.randrange(1, len(rows) - 1)]}
    else:
        gone = set(rows[-rnd.randint(1, max(1, len(rows) // 3)):])
    return ''.join(ln for i, ln in enumerate(lines(text)) if i not in gone)


def version_mismatch(text, rnd):
    """Two ranks that report different NCCL versions (NCCL's init line
    "NCCL version %s" per rank)."""
    at = rnd.randint(0, closing_index(text))
    text = insert_line(text, at, 'vm:7001:7001 [0] NCCL INFO NCCL version '
                       '2.28.3+cuda13.0')
    return insert_line(text, at + 1, 'vm:7002:7002 [1] NCCL INFO NCCL '
                       'version 2.21.5+cuda12.4')


#: what the judge sees beyond the table alone (the physical ceiling, the
#: WARN lines, the ranks' versions) and the header's sizes
JUDGE_DAMAGING = {
    'impossible-busbw': impossible_busbw,
    'nonpositive-time': nonpositive_time,
    'repeated-size': repeat_size,
    'missing-middle-size': lambda t, rnd: drop_row(t, rnd, 'middle'),
    'ends-before-max': lambda t, rnd: drop_row(t, rnd, 'end'),
    'version-mismatch': version_mismatch,
    **{k: (lambda k: lambda t, rnd: add_warn(t, rnd, k))(k)
       for k in WARN_LINES},
}


#: every mutation after which no door may judge a case fine (the sweep, the
#: health hook, explain, a fleet step, ingest): the output's own faults and
#: the judge's classes
DAMAGING = dict(OUTPUT_DAMAGING, **JUDGE_DAMAGING)
