"""Stops from outside (``scancel``, Slurm's time limit, a cron stop,
Ctrl-C, a closed terminal) passed on to the child that does the work: the
main command's ReFrame, the nightly's main command."""

import contextlib
import ctypes
import os
import signal
import sys

#: the signals a scheduler, cron or a terminal stops a command with
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def passed_on(proc, got):
    """While inside, SIGTERM / SIGINT / SIGHUP to this process go on to
    ``proc`` as one SIGTERM (it aborts its cases and records them); the
    first signal's name is appended to the list ``got``.  The old handlers
    come back on leaving."""
    def on_signal(signum, _frame):
        if not got:
            got.append(signal.Signals(signum).name)
            try:
                proc.send_signal(signal.SIGTERM)
            except OSError:
                pass
    old = {s: signal.signal(s, on_signal) for s in STOPS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


PR_SET_PDEATHSIG = 1


def dies_with_parent(signum):
    """A ``preexec_fn`` for :class:`subprocess.Popen` (None off Linux):
    the child gets ``signum`` when this process dies, even by SIGKILL
    (``prctl(PR_SET_PDEATHSIG)``); a parent already gone before the
    ``prctl`` (a race) sends it at once."""
    if not sys.platform.startswith('linux'):
        return None
    parent = os.getpid()

    def preexec():
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
        except Exception:       # no prctl: the stop signals still go on
            return
        if os.getppid() != parent:
            os.kill(os.getpid(), signum)
    return preexec
