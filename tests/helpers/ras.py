"""A stand-in for NCCL's RAS client service, built from NCCL's source
(tag v2.28.3-1): the commands of ``src/ras/client_support.cc:326-373``
(``CLIENT PROTOCOL`` -> ``SERVER PROTOCOL 2``, ``TIMEOUT n`` -> ``OK``,
``STATUS`` / ``VERBOSE STATUS`` -> the report, then the connection
closed; anything else ``ERROR: Unknown command``) and reports written with
its format strings (``:553-560`` the job summary, ``:729`` and ``:1110``
the communicators' table, ``:1164-1296`` the errors, ``:1336-1560`` the
warnings).  ``python tests/helpers/ras.py MODE PORT`` runs one alone.
Shared by the tests of the hang paths (test_ras, test_fleet_named,
test_framework_checks).

Modes: ``ok`` (``RUNNING OK``), ``incomplete`` (one rank stopped: issue
44's capture on 4x H200), ``mismatch`` (one rank behind on AllReduce),
``dead``, ``silent`` (connects, never answers), ``slow`` (answers after
``delay`` s), ``garbage`` (binary instead of the handshake), ``junk``
(the handshake, then a report of nothing RAS says), ``closed`` (closes at
once), ``huge`` (an endless report)."""

import socket
import sys
import threading
import time

SUMMARY = ("Job summary\n===========\n\n"
           "  Nodes  Processes         GPUs  Processes     GPUs\n"
           "(total)   per node  per process    (total)  (total)\n"
           "%7d  %9d  %11d  %9d  %7d\n")
TABLE = ("Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  "
         "Errors\n    #  in group  per comm  per node  per comm  in group\n")
ROW = "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s\n"


def report(mode, host='node1', pids=(1744, 1745, 1746, 1747), stopped=None):
    """RAS's report of ``mode`` for the ranks of ``pids`` (rank r: GPU r,
    process ``pids[r]``); ``incomplete``: rank ``stopped`` (default 2, the
    last of fewer) is the one missing."""
    n = len(pids)
    head = SUMMARY % (1, n, 1, n, n) + "\nCommunicators... (0.00s)\n" \
        "=============\n\n" + TABLE
    rank = lambda r: (f"  Rank {r} -- GPU {r} managed by process "
                      f"{pids[r]} on node {host}\n")
    if mode == 'ok':
        return head + ROW % (0, 1, 1, n, n, n, 'RUNNING', 'OK')
    if mode == 'incomplete':        # rank 2 stopped (of 2 ranks: rank 1)
        k = min(2, n - 1) if stopped is None else stopped
        return (head.replace('(0.00s)', '(2.05s)') +
                ROW % (0, 1, 1, f'{n - 1}-{n}', n, n, 'RUNNING',
                       'INCOMPLETE') +
                "\nErrors\n======\n\n"
                "INCOMPLETE\n  Missing communicator data from 1 job process\n"
                f"  Process {pids[k]} on node {host} managing GPU {k}\n\n"
                "#0-0 (cf264af53edbe986) INCOMPLETE\n"
                "  Missing communicator data from 1 rank\n" + rank(k) +
                "\nWarnings\n========\n\nTIMEOUT\n  Encountered 2 "
                "communication timeouts while gathering communicator data\n\n")
    if mode == 'dead':
        return (head + ROW % (0, 1, 1, f'{n - 1}-{n}', n, n, 'RUNNING',
                              'INCOMPLETE') +
                "\nErrors\n======\n\nDEAD\n  1 job process is considered "
                "dead (unreachable via the RAS network)\n"
                f"  Process {pids[1]} on node {host} managing GPU 1\n\n"
                "#0-0 (cf264af53edbe986) INCOMPLETE\n"
                "  Missing communicator data from 1 rank\n" + rank(1) + "\n")
    if mode == 'mismatch':
        return (head + ROW % (0, 1, 1, n, n, n, 'RUNNING', 'MISMATCH') +
                "\nErrors\n======\n\nWarnings\n========\n\n"
                "#0-0 (27a079b828ff1a75) MISMATCH\n"
                "  Communicator ranks have different AllReduce operation "
                "counts\n"
                f"  {n - 1} ranks have launched up to operation 812\n"
                f"  Rank 3 has launched up to operation 811 -- GPU 3 "
                f"managed by process {pids[3]} on node {host}\n\n")
    raise ValueError(mode)


def _serve(conn, mode, delay, pids=None, stopped=None):
    pids = tuple(pids) if pids else (1744, 1745, 1746, 1747)
    with conn:
        if mode == 'closed':
            return
        if mode == 'garbage':
            conn.sendall(bytes(range(256)) * 4)
            time.sleep(0.5)
            return
        buf = b''
        while True:
            try:
                data = conn.recv(4096)
            except OSError:
                return
            if not data:
                return
            buf += data
            while b'\n' in buf:
                line, buf = buf.split(b'\n', 1)
                cmd = line.decode(errors='replace').strip().lower()
                if mode == 'silent':
                    continue
                if cmd.startswith('client protocol '):
                    conn.sendall(b'SERVER PROTOCOL 2\n')
                elif cmd.startswith('timeout '):
                    conn.sendall(b'OK\n')
                elif cmd in ('status', 'verbose status'):
                    if mode == 'slow':
                        time.sleep(delay)
                        text = report('incomplete', pids=pids,
                                      stopped=stopped)
                    elif mode == 'junk':
                        text = 'hello there\n\x00\x01 nothing to see\n'
                    elif mode == 'huge':
                        try:
                            while True:
                                conn.sendall(b'x' * 65536)
                        except OSError:
                            return
                    else:
                        text = report(mode, pids=pids, stopped=stopped)
                    try:
                        conn.sendall(text.encode())
                    except OSError:
                        pass
                    return          # RAS closes after its report
                else:
                    conn.sendall(f'ERROR: Unknown command {cmd}\n'.encode())


class Standin:
    """A RAS stand-in listening on ``127.0.0.1:port`` (0: any free port)
    in a thread, until :meth:`close`."""

    def __init__(self, mode='incomplete', port=0, delay=3.0, pids=None,
                 stopped=None):
        self.mode, self.delay, self.pids = mode, delay, pids
        self.stopped = stopped
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(('127.0.0.1', port))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    @property
    def addr(self):
        return f'127.0.0.1:{self.port}'

    def _loop(self):
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=_serve, args=(conn, self.mode,
                                                  self.delay, self.pids,
                                                  self.stopped),
                             daemon=True).start()

    def close(self):
        self._stop = True
        self.sock.close()
        self.thread.join(2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


if __name__ == '__main__':
    s = Standin(sys.argv[1], int(sys.argv[2]))
    print(s.port, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
