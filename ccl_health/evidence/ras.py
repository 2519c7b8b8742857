"""Asking NCCL's RAS (reliability, availability, serviceability) service
which ranks of a job stopped, before the job is killed at its time limit.

What RAS is and says, from NCCL's own source (tag v2.28.3-1, the version
of the device machines; the user guide's page
``docs/userguide/source/troubleshooting/ras.rst``):

* since NCCL 2.24 every NCCL process runs a RAS thread (on by default,
  ``NCCL_RAS_ENABLE``: ``src/bootstrap.cc:615``); the threads of one job
  form a network, so ONE of them answers for the whole job, every node;
* it listens for clients on ``NCCL_RAS_ADDR``, default
  ``localhost:28028`` (``src/ras/ras_internal.h:10``
  ``NCCL_RAS_CLIENT_PORT``; ``src/ras/client_support.cc:146-151``), read
  by ``ncclSocketGetAddrFromString`` (``src/misc/socket.cc:275``):
  ``host:port`` or ``[ipv6]:port``; the first address ``host`` resolves
  to (``localhost`` may be ``::1``: RCCL's ``rcclras`` is reached there);
* the protocol is text, one command a line (``client_support.cc:326-373``):
  ``CLIENT PROTOCOL <n>`` is answered ``SERVER PROTOCOL 2``
  (``ras_internal.h:11`` ``NCCL_RAS_CLIENT_PROTOCOL 2``;
  ``client_support.cc:334-343``); ``TIMEOUT <s>`` is answered ``OK`` or
  ``ERROR: Invalid timeout value ...`` (``:344-359``); ``STATUS`` /
  ``VERBOSE STATUS`` start the report (``:360-366``); anything else is
  ``ERROR: Unknown command ...`` (``:368-372``).  NCCL's own client
  (``src/ras/client.cc:191-271``) sends exactly that and reads the report
  until the server closes the connection (``client.cc:277-294``); it
  allows 1 s to connect and ``RAS_COLLECTIVE_LEG_TIMEOUT_SEC`` (5) +
  ``RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC`` (5) + 1 s for the answer
  (``client.cc:142, 246-252``; ``ras_internal.h:13-14``);
* the report (``client_support.cc:553-1620``): ``Job summary``, then
  ``Communicators... (N.NNs)`` and a table whose rows end in a status
  (``NOCOMM INIT RUNNING FINALIZE ABORT``, ``:902``) and errors (``OK``,
  ``MISMATCH``, ``ERROR``, ``INCOMPLETE`` and their combinations,
  ``:904-912``); then ``Errors`` and ``Warnings``:

  - ``INCOMPLETE`` / ``Missing communicator data from N job process(es)``
    and ``  Process <pid> on node <host> managing GPU <g>`` (``:1164-1228``);
  - ``DEAD`` / ``N job process(es) ... considered dead`` and the same
    ``Process`` lines (``:1230-1258``);
  - ``#<g>-<c> (<hash>) INCOMPLETE`` / ``Missing communicator data from N
    rank(s)`` / ``  Rank <r> -- GPU <g> managed by process <pid> on node
    <host>`` (``:1271-1296``): the ranks that did not answer (stopped,
    unresponsive);
  - ``#<g>-<c> (<hash>) ERROR`` with initialisation / asynchronous errors
    (``:1298-1323``);
  - ``#<g>-<c> (<hash>) MISMATCH`` / ``Communicator ranks have different
    <Func> operation counts`` (``ncclFuncStr``: ``Broadcast Reduce
    AllGather ReduceScatter AllReduce``, ``src/init.cc:48``) / ``<n> ranks
    have launched up to operation <count>`` and ``Rank <r> has launched up
    to operation <count> -- GPU ...`` (``:1480-1560``): who is behind;
    ``Communicator ranks have different status`` / ``<n> ranks have status
    <S>`` (``:1394-1470``).

  A GPU is ``<cuda>`` or ``<cuda> (NVML <nvml>)`` (``:1849-1855``).  The
  format "varies from release to release" (the user guide): what is not
  understood is kept as text, never guessed at.

RCCL carries the same service from RCCL 2.25.1 (ROCm 7.0.0, compatible
with NCCL 2.24.3: RCCL's CHANGELOG), its client named ``rcclras``.

This module decides nothing: :func:`ask` returns an :class:`Answer` (what
RAS said, structured, or why it could not be asked); the judge words it.
Bounded: a deadline for the whole query, a size cap, any bytes taken."""

import dataclasses
import re
import socket
import time
from typing import List, Optional

#: ``NCCL_RAS_ADDR``'s default (``ras_internal.h:10``)
DEFAULT_HOST, DEFAULT_PORT = 'localhost', 28028
#: the protocol NCCL 2.24-2.28's client speaks (``ras_internal.h:11``)
PROTOCOL = 2
#: the most of an answer read (a job of thousands of ranks stays below)
MAX_BYTES = 1 << 20
#: the whole query's bound, seconds (NCCL's client: 1 + 5 + 5)
DEFAULT_BOUND = 11.0
#: ``TIMEOUT`` asked of RAS: its collective leg's bound (5 s by default)
LEG_TIMEOUT = 5


@dataclasses.dataclass
class RankNote:
    """One rank (or process) RAS names."""
    #: 'unresponsive' (no data: stopped or hung), 'dead' (unreachable for
    #: 60 s), 'behind' (launched fewer operations than the others),
    #: 'error' (an NCCL error), 'status' (a different state), 'other'
    state: str
    rank: Optional[int] = None
    host: str = ''
    gpu: str = ''
    pid: Optional[int] = None
    #: ``#0-0 (cf264af53edbe986)``: the communicator, as RAS numbers it
    comm: str = ''
    #: ``AllReduce``: the collective whose counts differ
    collective: str = ''
    #: the operation it launched up to (None: not said)
    count: Optional[int] = None
    #: ``FINALIZE``, an error's name, ...
    detail: str = ''


@dataclasses.dataclass
class Waiting:
    """A group of ranks RAS counts at one operation (the ones not behind)."""
    ranks: int
    collective: str
    count: int
    comm: str = ''


@dataclasses.dataclass
class Answer:
    """What asking RAS at ``address`` gave."""
    address: str
    #: RAS answered the handshake (``SERVER PROTOCOL``)
    answered: bool = False
    #: why there is no usable answer ('' when there is one)
    why: str = ''
    #: the report as read (capped, control characters removed)
    text: str = ''
    #: the rows of the communicators' table: ``[(status, errors)]``
    comms: List[tuple] = dataclasses.field(default_factory=list)
    notes: List[RankNote] = dataclasses.field(default_factory=list)
    waiting: List[Waiting] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    truncated: bool = False
    #: the server's protocol version (``SERVER PROTOCOL n``)
    protocol: Optional[int] = None

    @property
    def ok(self):
        """A report was read and understood."""
        return self.answered and not self.why

    @property
    def all_running(self):
        """Every communicator ``RUNNING OK`` and nothing named."""
        return self.ok and bool(self.comms) and not self.notes and all(
            s == 'RUNNING' and e == 'OK' for s, e in self.comms)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        """The answer kept by ``--watch`` (garbage: None)."""
        if not isinstance(d, dict) or not isinstance(d.get('address'), str):
            return None
        try:
            notes = [RankNote(**n) for n in d.get('notes') or []]
            waiting = [Waiting(**w) for w in d.get('waiting') or []]
            return cls(d['address'], bool(d.get('answered')),
                       str(d.get('why') or ''), str(d.get('text') or ''),
                       [tuple(c) for c in d.get('comms') or []], notes,
                       waiting, float(d.get('seconds') or 0.0),
                       bool(d.get('truncated')), d.get('protocol'))
        except (TypeError, ValueError):
            return None


def address(env) -> tuple:
    """``(host, port)`` of RAS for a job run with ``env``
    (``NCCL_RAS_ADDR``: ``host:port`` or ``[v6]:port``)."""
    val = (env or {}).get('NCCL_RAS_ADDR') or ''
    val = val.strip()
    if not val:
        return DEFAULT_HOST, DEFAULT_PORT
    m = re.match(r'^\[([^\]]+)\](?::(\d+))?$', val) or \
        re.match(r'^([^:\[\]]+)(?::(\d+))?$', val)
    if not m:
        return DEFAULT_HOST, DEFAULT_PORT
    port = int(m.group(2)) if m.group(2) else DEFAULT_PORT
    return m.group(1), port


def free_address():
    """``localhost:<port>`` of a port free now: a RAS address of a run's
    own (runs side by side on one node must not answer for each other)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return f'localhost:{s.getsockname()[1]}'


def share(remaining):
    """Seconds of a run's bound ``remaining`` kept to ask RAS before it is
    killed: 15 %, at least 0.5 s, at most :data:`DEFAULT_BOUND`."""
    return min(DEFAULT_BOUND, max(0.5, 0.15 * max(0.0, remaining)))


def disabled(env):
    """Why RAS does not run in a job run with ``env``; '' where it does."""
    if str((env or {}).get('NCCL_RAS_ENABLE', '1')).strip() == '0':
        return 'RAS disabled (NCCL_RAS_ENABLE=0)'
    return ''


def _clean(data: bytes) -> str:
    text = data.decode('utf-8', errors='replace')
    return ''.join(c for c in text if c in '\n\t' or
                   (c.isprintable() and c != '\ufffd'))


def _recv_line(sock, deadline, cap=4096):
    buf = b''
    while b'\n' not in buf and len(buf) < cap:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout('no line within the bound')
        sock.settimeout(left)
        chunk = sock.recv(cap - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def query(host=DEFAULT_HOST, port=DEFAULT_PORT, bound=DEFAULT_BOUND,
          verbose=True, max_bytes=MAX_BYTES) -> Answer:
    """Ask RAS at ``host:port`` for its (``verbose``) status, within
    ``bound`` seconds in all; never raises."""
    where = f'[{host}]:{port}' if ':' in host else f'{host}:{port}'
    t0 = time.monotonic()
    deadline = t0 + max(0.1, float(bound))
    ans = Answer(where)

    def done(why=''):
        ans.why = why
        ans.seconds = round(time.monotonic() - t0, 3)
        return ans

    try:
        sock = socket.create_connection(
            (host, port), timeout=max(0.05, min(2.0, bound / 2)))
    except socket.timeout:
        return done(f'no connection to RAS at {where} within the bound')
    except OSError as err:
        return done(f'RAS not listening at {where} '
                    f'({err.strerror or err})')
    try:
        with sock:
            sock.sendall(f'CLIENT PROTOCOL {PROTOCOL}\n'.encode())
            line = _recv_line(sock, deadline)
            text = _clean(line).strip()
            m = re.match(r'(?i)^SERVER PROTOCOL (\d+)$', text)
            if not m:
                return done(f'not a RAS answer at {where}: '
                            f'{text[:40]!r}' if text else
                            f'RAS at {where} closed the connection without '
                            f'an answer')
            ans.answered, ans.protocol = True, int(m.group(1))
            left = int(deadline - time.monotonic())
            if left > 2:
                sock.sendall(f'TIMEOUT {min(LEG_TIMEOUT, left // 2)}\n'
                             .encode())
                ok = _clean(_recv_line(sock, deadline)).strip()
                if ok.upper() != 'OK':
                    return done(f'RAS at {where} refused TIMEOUT: '
                                f'{ok[:80]!r}')
            sock.sendall(b'VERBOSE STATUS\n' if verbose else b'STATUS\n')
            data = b''
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    ans.text = _clean(data)
                    return done(f'RAS at {where} did not finish its report '
                                f'within {bound:.3g} s ({len(data)} bytes)')
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
                if len(data) > max_bytes:
                    data, ans.truncated = data[:max_bytes], True
                    break
    except socket.timeout:
        return done(f'RAS at {where} did not answer within {bound:.3g} s')
    except OSError as err:
        return done(f'RAS at {where}: {err.strerror or err}')
    ans.text = _clean(data)
    parse(ans.text, ans)
    if not ans.comms and not ans.notes:
        first = ans.text.strip().splitlines()[:1]
        if ans.truncated:
            return done(f'RAS at {where} sent more than {max_bytes} bytes '
                        f'and no communicator report')
        return done(f'RAS at {where} sent no communicator report' + (
            f': {first[0][:40]!r}' if first else ' (empty)'))
    return done()


_GPU = r'GPUs? (?P<gpu>[\d, ]+(?: \(NVML [\d, ]+\))?)'
_WHO = _GPU + r' managed by process (?P<pid>\d+) on node (?P<host>\S+)'
_ROW = re.compile(r'^\s*\d+\s+\d+\s+\d+\s+\S+\s+\d+\s+\d+\s+'
                  r'(NOCOMM|INIT|RUNNING|FINALIZE|ABORT|UNKNOWN)\s+'
                  r'([A-Z,]+)\s*$')
_COMM = re.compile(r'^#(\d+-\d+) \(([0-9a-fA-F]+)\) (INCOMPLETE|ERROR|'
                   r'MISMATCH)\s*$')
_PROC = re.compile(r'^\s+Process (?P<pid>\d+) on node (?P<host>\S+) '
                   r'managing ' + _GPU + r'\s*$')
_RANK = re.compile(r'^\s+Rank (?P<rank>\d+)(?P<what>.*?) -- (?:' + _WHO +
                   r'|\[process information not found\])\s*$')
_FUNC = re.compile(r'different (\w+) operation counts')
_GROUP = re.compile(r'^\s+(\d+) ranks have (?:launched up to operation '
                    r'(\d+)|not launched any operations|status (\w+))')
_AT = re.compile(r' has launched up to operation (\d+)')
_STATUS = re.compile(r' has status (\w+)')


def parse(text, ans=None) -> Answer:
    """The report ``text`` of ``VERBOSE STATUS`` into ``ans``: the
    table's rows, the ranks and processes named, the groups counted."""
    ans = ans if ans is not None else Answer('')
    section = head = comm = coll = ''
    group = None                # (kind, count or status) of the last group
    for line in (text or '').splitlines():
        s = line.strip()
        if s in ('Errors', 'Warnings', 'Job summary') or \
                s.startswith('Communicators...'):
            section, head, comm = s.split('.')[0], '', ''
            continue
        m = _ROW.match(line)
        if m:
            ans.comms.append((m.group(1), m.group(2)))
            continue
        if section in ('Errors', 'Warnings') and s in ('INCOMPLETE', 'DEAD',
                                                        'TIMEOUT'):
            head, comm = s, ''
            continue
        m = _COMM.match(s)
        if m:
            comm, head, coll, group = (f'#{m.group(1)} ({m.group(2)})',
                                       m.group(3), '', None)
            continue
        m = _FUNC.search(s)
        if m:
            coll, group = m.group(1), None
            continue
        if 'different status' in s:
            coll, group = '', None
            continue
        m = _GROUP.match(line)
        if m:
            group = ('count', int(m.group(2) or 0)) if m.group(3) is None \
                else ('status', m.group(3))
            if group[0] == 'count':
                ans.waiting.append(Waiting(int(m.group(1)), coll, group[1],
                                           comm))
            continue
        m = _PROC.match(line)
        if m and head in ('INCOMPLETE', 'DEAD') and not comm:
            ans.notes.append(RankNote(
                'dead' if head == 'DEAD' else 'unresponsive',
                host=m.group('host'), gpu=m.group('gpu').strip(),
                pid=int(m.group('pid'))))
            continue
        m = _RANK.match(line)
        if m and comm:
            what = m.group('what') or ''
            note = RankNote('other', int(m.group('rank')),
                            host=m.group('host') or '',
                            gpu=(m.group('gpu') or '').strip(),
                            pid=int(m.group('pid')) if m.group('pid')
                            else None, comm=comm, collective=coll)
            at, st = _AT.search(what), _STATUS.search(what)
            if head == 'INCOMPLETE':
                note.state = 'unresponsive'
            elif head == 'ERROR':
                note.state, note.detail = 'error', what.strip()
            elif at or 'not launched any' in what:
                note.state, note.count = 'behind', int(at.group(1)) if at \
                    else 0
            elif st:
                note.state, note.detail = 'status', st.group(1)
            elif group and group[0] == 'count':
                note.state, note.count = 'behind', group[1]
            elif group and group[0] == 'status':
                note.state, note.detail = 'status', group[1]
            ans.notes.append(note)
    _settle(ans)
    return ans


def _settle(ans):
    """Of the op-count groups of a communicator, the ranks at the highest
    count are the ones waiting: a named rank there is not behind; every
    process RAS names twice (Errors and a communicator) is named once, as
    its rank."""
    top = {}
    for w in ans.waiting:
        key = (w.comm, w.collective)
        top[key] = max(top.get(key, -1), w.count)
    for n in ans.notes:
        if n.state == 'behind' and n.count is not None and \
                n.count >= top.get((n.comm, n.collective), -1) and \
                top.get((n.comm, n.collective), -1) >= 0:
            n.state = 'other'
    ans.waiting = [w for w in ans.waiting
                   if w.count == top.get((w.comm, w.collective))]
    dead = {(n.host, n.pid) for n in ans.notes if n.rank is None and
            n.state == 'dead'}
    ranked = set()
    for n in ans.notes:
        if n.rank is not None:
            ranked.add((n.host, n.pid))
            if n.state == 'unresponsive' and (n.host, n.pid) in dead:
                n.state = 'dead'
    ans.notes = [n for n in ans.notes if n.state != 'other' and not (
        n.rank is None and (n.host, n.pid) in ranked)]


def ask(env=None, nodes=(), bound=DEFAULT_BOUND, query_fn=None) -> Answer:
    """Ask the RAS of a job run with ``env``: at ``NCCL_RAS_ADDR`` (its
    default, ``localhost:28028``: the node this runs on); where that
    address listens on every interface (``0.0.0.0`` / ``::``), on each of
    ``nodes`` in turn, the first report kept (one RAS answers for the
    whole job).  ``bound``: seconds for all of it.  Never raises."""
    env = env or {}
    host, port = address(env)
    off = disabled(env)
    if off:
        return Answer(f'{host}:{port}', why=off)
    query_fn = query_fn or query
    hosts = [host]
    if host in ('0.0.0.0', '::', '*') :
        hosts = ['localhost'] + [n for n in nodes if n]
    deadline = time.monotonic() + bound
    tried = []
    for h in hosts:
        left = deadline - time.monotonic()
        if left <= 0.2:
            break
        got = query_fn(h, port, left)
        if got.ok:
            return got
        tried.append(got)
    if not tried:
        return Answer(f'{host}:{port}', why='no time left to ask RAS')
    if len(tried) == 1:
        return tried[0]
    last = tried[-1]
    last.why = '; '.join(t.why for t in tried[:4])
    return last


def main(argv=None):
    """``python -m ccl_health.evidence.ras --watch FILE --at SECONDS``:
    wait ``SECONDS`` (the job's time limit less a margin), then ask RAS
    (the job's environment: ``NCCL_RAS_ADDR``, ``SLURM_JOB_NODELIST``) and
    write the answer to ``FILE`` as JSON; ``--now`` asks at once and
    prints it.  The sweep's job script starts it beside the program."""
    import argparse
    import json
    import os
    p = argparse.ArgumentParser(prog='python -m ccl_health.evidence.ras')
    p.add_argument('--watch', metavar='FILE')
    p.add_argument('--at', type=float, default=0.0)
    p.add_argument('--bound', type=float, default=DEFAULT_BOUND)
    p.add_argument('--nodes', default='')
    a = p.parse_args(argv)
    if a.at > 0:
        time.sleep(a.at)
    nodes = [n for n in a.nodes.split(',') if n]
    got = ask(dict(os.environ), nodes, bound=a.bound)
    doc = dict(got.to_dict(), asked_at=time.time())
    if a.watch:
        tmp = a.watch + '.tmp'
        with open(tmp, 'w') as fp:
            json.dump(doc, fp)
        os.replace(tmp, a.watch)
    else:
        print(json.dumps(doc, indent=1))
    return 0


def read_watch(path):
    """The answer ``--watch`` left at ``path``; None: none (never asked:
    the job ended before its time limit) or unreadable."""
    import json
    try:
        with open(path, errors='replace') as fp:
            raw = fp.read(4 * MAX_BYTES)
        return Answer.from_dict(json.loads(raw))
    except (OSError, ValueError):
        return None


if __name__ == '__main__':
    raise SystemExit(main())
