"""The one bounded-subprocess helper of the hook: every probe (the
all_reduce, the pair rounds, the copy matrix) runs through :func:`bounded`
with the same rules:

* its own process group (a stop or a timeout kills the whole group), and
  on Linux a parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)`` in
  the child before it runs the program): a hook killed by SIGKILL takes the
  program with it;
* a wall-clock bound; past it the group is killed and the output so far is
  kept, with whether the program had *started* its timed work (a pattern
  the caller gives: its header or first row), so that a hang is told from
  a start-up the limit left no time for;
* a registry of what runs, so that a signal to the hook stops every probe
  (:func:`stop_all`), and of the temporary folders, removed at the end
  (:func:`temporary_folder`, :func:`remove_folders`) unless kept
  (:func:`keep_folder`)."""

import dataclasses
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from ccl_health import stops

_RUNNING = set()
_FOLDERS = set()
#: re-entrant: a stop signal's handler (:func:`stop_all`) runs in the main
#: thread, which may hold it at that moment
_LOCK = threading.RLock()


@dataclasses.dataclass
class Outcome:
    """What a bounded run gave."""
    output: str = ''
    returncode: object = None
    seconds: float = 0.0
    #: it did not end within its bound (then it was killed)
    timed_out: bool = False
    #: the caller's start pattern was seen in its output
    started: bool = False
    #: it could not be started at all (``OSError``): the reason
    not_started: str = ''
    #: what the caller's ``before_kill`` returned (a timed-out run only)
    asked: object = None


def bounded(cmd, env, timeout, started=None, before_kill=None):
    """Run ``cmd`` (stdout and stderr together) for at most ``timeout``
    seconds (:class:`Outcome`); ``started``: a compiled pattern whose
    match in the output means the program began its timed work;
    ``before_kill``: called (bounded by the caller) when the bound has
    passed, before the group is killed (NCCL's RAS asked which rank
    stopped), its answer kept in ``asked``."""
    t0 = time.monotonic()
    proc = start(cmd, env)
    if isinstance(proc, Outcome):
        proc.seconds = time.monotonic() - t0
        return proc
    return finish(proc, timeout, started, before_kill)


def start(cmd, env, stdin=False):
    """``cmd`` started under the rules above (its own group, dying with
    the hook, in the registry :func:`stop_all` kills); ``stdin``: a pipe
    it reads its go from (:func:`finish`'s ``text``), else nothing.
    Returns the process, or an :class:`Outcome` saying why it could not
    start.  Every process started is ended by :func:`finish` or
    :func:`cancel` (or :func:`stop_all`)."""
    try:
        proc = subprocess.Popen(
            list(cmd), env=dict(env), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            text=True, errors='replace', start_new_session=True,
            preexec_fn=stops.dies_with_parent(signal.SIGKILL))
    except OSError as err:
        return Outcome(not_started=str(err.strerror or err))
    with _LOCK:
        _RUNNING.add(proc)
    return proc


def finish(proc, timeout, started=None, before_kill=None, text=None):
    """Wait at most ``timeout`` seconds for ``proc`` (:func:`start`),
    ``text`` written to its standard input first (then closed); the
    rules and the :class:`Outcome` of :func:`bounded`, ``seconds``
    counted from this call."""
    t0 = time.monotonic()
    timed_out, asked = False, None
    try:
        try:
            out = proc.communicate(input=text, timeout=max(0.01, timeout))[0]
        except subprocess.TimeoutExpired:
            timed_out = True
            if before_kill is not None:
                try:
                    asked = before_kill()
                except Exception as err:    # never in the way of the kill
                    asked = err
            kill(proc)
            try:        # a rank that left the group may hold the pipe
                out = proc.communicate(timeout=2)[0]
            except subprocess.TimeoutExpired as err:
                out = err.output or ''
                if isinstance(out, bytes):
                    out = out.decode(errors='replace')
    finally:
        with _LOCK:
            _RUNNING.discard(proc)
    out = out or ''
    return Outcome(out, None if timed_out else proc.returncode,
                   time.monotonic() - t0, timed_out,
                   bool(started.search(out)) if started is not None else
                   bool(out.strip()), asked=asked)


def cancel(proc):
    """End a process of :func:`start` that is no longer wanted: its group
    killed, waited for (at most 2 s), out of the registry."""
    kill(proc)
    try:
        proc.communicate(timeout=2)
    except (subprocess.TimeoutExpired, OSError, ValueError):
        pass
    with _LOCK:
        _RUNNING.discard(proc)


def kill(proc):
    """SIGKILL to the process group of ``proc``."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except OSError:
        pass


def stop_all():
    """Kill every probe running now (a signal to the hook)."""
    with _LOCK:
        running = list(_RUNNING)
    for proc in running:
        kill(proc)
    for proc in running:
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass


def temporary_folder(prefix='ccl-health-', parent=None):
    """A new temporary folder, removed by :func:`remove_folders`."""
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    with _LOCK:
        _FOLDERS.add(path)
    return path


def remove_folders():
    with _LOCK:
        folders = list(_FOLDERS)
        _FOLDERS.clear()
    for path in folders:
        _rmtree(path)


def _rmtree(path, tries=5):
    """Remove ``path``; the ranks of a probe whose process group was just
    sent SIGKILL may still be writing in it for a moment (the kill is
    asynchronous): try again, a little later, a few times."""
    for i in range(tries):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return
        time.sleep(0.05 * (i + 1))


def remove_folder(path):
    """Remove one folder of :func:`temporary_folder` now."""
    shutil.rmtree(path, ignore_errors=True)
    with _LOCK:
        _FOLDERS.discard(path)


def keep_folder(path):
    """Keep a folder of :func:`temporary_folder` (a failing check's
    evidence, :mod:`ccl_health.hook.keep`) and the folders made in it:
    no longer removed."""
    inside = path.rstrip(os.sep) + os.sep
    with _LOCK:
        for f in [f for f in _FOLDERS if f == path or f.startswith(inside)]:
            _FOLDERS.discard(f)
