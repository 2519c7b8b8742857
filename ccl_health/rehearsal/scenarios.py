"""What each rehearsal scenario makes of a healthy capture: the output, the
exit status, the debug logs and the stall of the program a night replays
(:mod:`ccl_health.rehearsal.standin`).

- ``healthy``: the capture as it is.
- ``drift``: busbw and algbw :data:`DRIFT` times the capture's, the time per
  call as much longer (a few percent: inside the reference's tolerance,
  a change only history can see).
- ``collapse``: the same at :data:`COLLAPSE` (-90 %).
- ``crash``: rank 1 dies during the second size: rank 0's NCCL logs the
  fatal ``socketProgress: Connection closed by remote peer`` (NVIDIA/nccl
  ``src/misc/socket.cc``), nccl-tests prints its ``Test NCCL failure`` and
  the ``Test failure`` trace (nccl-tests 2.19.6 ``src/common.h``
  NCCLCHECK / TESTCHECK, at the lines of ``src/common.cu`` and
  ``src/all_reduce.cu`` an asynchronous error takes) and exits 3
  (``testNcclError``).
- ``hang``: the header and the first size, then nothing: the program
  sleeps past the job's time limit.

Every line written is built from the upstream format strings (nccl-tests
``src/util.cu``: ``%12li  %12li  %8s  %6s  %6s`` and ``  %7s  %6s  %6s
%6g`` per half, its ``getFloatStr``; ``# %-20s : %g`` for the average)."""

import re

SCENARIOS = ('healthy', 'drift', 'collapse', 'crash', 'hang')

#: the busbw factor of the ``drift`` scenario (-5 %)
DRIFT = 0.95
#: the busbw factor of the ``collapse`` scenario (-90 %)
COLLAPSE = 0.10

#: nccl-tests' exit status for an NCCL error (``testNcclError``,
#: src/common.h of nccl-tests 2.19.6)
TEST_NCCL_ERROR = 3

#: where nccl-tests 2.19.6 reports an asynchronous NCCL error of a timed
#: call and the TESTCHECK trace back to main (src/common.cu: NCCLCHECK
#: (ncclAsyncErr) in testStreamSynchronize, completeColl, BenchTime,
#: TimeTest; src/all_reduce.cu AllReduceRunTest; threadRunTests, run(),
#: main)
NCCL_FAILURE_AT = 'common.cu:514'
TRACE = ('common.cu:632', 'common.cu:769', 'common.cu:939',
         'all_reduce.cu:574', 'common.cu:972', 'common.cu:1768',
         'common.cu:1454')
#: ncclGetErrorString(ncclRemoteError) (NVIDIA/nccl src/init.cc)
REMOTE_ERROR = 'remote process exited or there was a network error'
#: the WARN of a peer's socket closing (NVIDIA/nccl src/misc/socket.cc,
#: socketProgress); the port is the rehearsal's (any ephemeral port)
CLOSED_WARN = 'socketProgress: Connection closed by remote peer {addr}<43407>'

_ROW = re.compile(r'^\s*\d+\s+\d+\s+\S+\s+\S+\s+-?\d+\s')
_RANK = re.compile(r'^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+(\d+)\s+on\s+'
                   r'(\S+)', re.M)
_NCCL_LINE = re.compile(r'^NCCL version |^[^\s:#]+:\d+:\d+ \[\d+\] NCCL ')
_AVG = re.compile(r'^# Avg bus bandwidth\s+:\s+(\S+)')
_LOG_PREFIX = re.compile(r'^([^\s:]+):(\d+):(\d+) \[(\d+)\]', re.M)
_SOCKET_ADDR = re.compile(r'NET/Socket : Using \[\d+\]\w+:([^<\s]+)<')
_PROXY_TID = re.compile(r'^[^\s:]+:\d+:(\d+) \[\d+\] NCCL INFO \[Proxy '
                        r'Progress\]', re.M)


def float_str(value, width):
    """nccl-tests' ``getFloatStr``: ``%*.2f``, else ``%*.1f``, else
    ``%*.0f``, else scientific, whichever fits ``width``."""
    for fmt in ('%*.2f', '%*.1f', '%*.0f'):
        s = fmt % (width, value)
        if len(s) <= width:
            return s
    return ('%*.1e' if width >= 7 else '%*.0e') % (width, value)


def row_preamble(size, count, type_name, op, root):
    return '%12li  %12li  %8s  %6s  %6s' % (size, count, type_name, op,
                                           '%6i' % root)


def row_half(time_us, algbw, busbw, wrong):
    return '  %7s  %6s  %6s  %6g' % (float_str(time_us, 7),
                                     float_str(algbw, 6),
                                     float_str(busbw, 6), wrong)


def is_row(line):
    return bool(_ROW.match(line))


def scaled_row(line, factor):
    """A size's row with busbw and algbw times ``factor`` and the time per
    call divided by it (both halves)."""
    w = line.split()
    out = row_preamble(int(w[0]), int(w[1]), w[2], w[3], int(w[4]))
    for t, alg, bus, wrong in (w[5:9], w[9:13]):
        out += row_half(float(t) / factor, float(alg) * factor,
                        float(bus) * factor, float(wrong))
    return out


def as_the_sweep_prints(text):
    """The output as the sweep's run prints it: the sweep sends NCCL's own
    lines (``NCCL version ...``, the logger's ``host:pid:tid [dev] NCCL``
    lines) to the debug files (``NCCL_DEBUG_FILE``), not to the output."""
    return ''.join(ln for ln in text.splitlines(True)
                   if not _NCCL_LINE.match(ln))


def scaled(text, factor):
    out = []
    for ln in text.splitlines(True):
        m = _AVG.match(ln)
        if is_row(ln):
            ln = scaled_row(ln, factor) + '\n'
        elif m:
            ln = '# %-20s : %g \n' % ('Avg bus bandwidth',
                                      float(m.group(1)) * factor)
        out.append(ln)
    return ''.join(out)


def _header_and_rows(text, rows):
    """The header lines and the first ``rows`` size rows of ``text``."""
    out, seen = [], 0
    for ln in text.splitlines(True):
        if is_row(ln):
            if seen == rows:
                return out, ln
            seen += 1
        elif seen:          # the lines after the table
            break
        out.append(ln)
    return out, None


def crashed(text, logs):
    """(output, debug logs) of rank 1 dying during the second size: the
    second size's preamble (nccl-tests prints it before timing the size),
    the ``Test NCCL failure`` on the same line, the trace; rank 0's log
    ends with the fatal WARN."""
    head, nxt = _header_and_rows(text, 1)
    ranks = {int(r): (pid, host) for r, pid, host in _RANK.findall(text)}
    pid, host = ranks.get(0, ('0', 'localhost'))
    addr = (_SOCKET_ADDR.search(logs[0]) if logs else None)
    warn = CLOSED_WARN.format(addr=addr.group(1) if addr else host)
    w = nxt.split() if nxt else ['0', '0', 'float', 'sum', '-1']
    lines = head + [
        row_preamble(int(w[0]), int(w[1]), w[2], w[3], int(w[4])) +
        f"{host}: Test NCCL failure {NCCL_FAILURE_AT} '{REMOTE_ERROR} / "
        f"{warn}'\n"]
    lines += [f' .. {host} pid {pid}: Test failure {at}\n' for at in TRACE]
    logs = list(logs)
    if logs:
        m = _LOG_PREFIX.search(logs[0])
        tid = _PROXY_TID.search(logs[0])
        if m:
            logs[0] = logs[0].rstrip('\n') + '\n' + (
                f'{m.group(1)}:{m.group(2)}:'
                f'{tid.group(1) if tid else m.group(3)} [{m.group(4)}] '
                f'misc/socket.cc:50 NCCL WARN {warn}\n')
    return ''.join(lines), logs


def hung(text):
    """The header and the first size: then the program prints nothing."""
    head, _ = _header_and_rows(text, 1)
    return ''.join(head)


def make(scenario, text, logs, stall_s):
    """``(output, exit status, debug logs, stall seconds)`` of
    ``scenario`` from the healthy capture ``text`` and its ``logs``."""
    if scenario not in SCENARIOS:
        raise ValueError(f'unknown scenario {scenario!r}')
    text = as_the_sweep_prints(text)
    if scenario == 'drift':
        return scaled(text, DRIFT), 0, logs, 0
    if scenario == 'collapse':
        return scaled(text, COLLAPSE), 0, logs, 0
    if scenario == 'crash':
        out, logs = crashed(text, logs)
        return out, TEST_NCCL_ERROR, logs, 0
    if scenario == 'hang':
        return hung(text), 0, logs, stall_s
    return text, 0, logs, 0
