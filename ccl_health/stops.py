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


class Stopped(Exception):
    """A stop arrived (SIGTERM / SIGINT / SIGHUP): raised by
    :meth:`Held.check` at a point where the work can clean up."""

    def __init__(self, signum):
        self.signum = int(signum)
        super().__init__(f'stopped by {self.name}')

    @property
    def name(self):
        return signal.Signals(self.signum).name

    @property
    def exit_code(self):
        """128 + the signal, as a shell reports a command it stopped."""
        return 128 + self.signum


class Held:
    """The stops that arrived inside :func:`held`, first first."""

    def __init__(self):
        self.signals = []

    def __bool__(self):
        return bool(self.signals)

    @property
    def first(self):
        return self.signals[0] if self.signals else None

    def check(self):
        """Raise :class:`Stopped` (the first stop) if one arrived."""
        if self.signals:
            raise Stopped(self.signals[0])


@contextlib.contextmanager
def held():
    """While inside, SIGTERM / SIGINT / SIGHUP do not stop this process at
    once: each is noted in the :class:`Held` yielded; the work asks
    ``check()`` at its safe points, which raises :class:`Stopped` for the
    first, and cleans up.  A second stop during that cleanup is noted and
    cuts nothing short (a handler that raised would).  Off the main thread
    (no handlers can be set there) nothing is installed.  The old handlers
    come back on leaving."""
    got = Held()

    def on_signal(signum, _frame):
        got.signals.append(signum)

    old = {}
    try:
        for s in STOPS:
            old[s] = signal.signal(s, on_signal)
    except ValueError:                  # not the main thread
        pass
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)
