"""The hook's command line: options, signals, the one line, the ``--json``
document, then the bounded recording.  Nothing here raises: every error of
the hook is one ``COULD-NOT-CHECK`` line, exit 2."""

import json
import os
import signal
import stat
import sys
import time

from ccl_health.hook import bounded as run
from ccl_health import safefile
from ccl_health.oneline import clean
from ccl_health.judge.verdicts import Verdict
from ccl_health.hook.settings import COULD_NOT_CHECK, RECORD_BOUND

#: the signals that stop the hook with one line (NHC's watchdog sends
#: SIGTERM, a wrapper's ``timeout`` SIGALRM / SIGTERM, a closed terminal
#: SIGHUP, a user SIGINT)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM)
#: a signal that arrived before the handlers below were set
#: (``ccl_health.hook.__main__`` sets an early one that only notes it)
EARLY = []


def _on_signal(signum, frame):
    from ccl_health.hook.settings import Interrupted
    run.stop_all()
    raise Interrupted(signal.Signals(signum).name)


def _note_early(signum, frame):
    EARLY.append(signal.Signals(signum).name)


def install_early():
    """Note a stop signal until :func:`main` takes over (the first thing
    ``python -m ccl_health.hook`` does)."""
    try:
        for s in STOP_SIGNALS:
            signal.signal(s, _note_early)
    except ValueError:
        pass


def main(argv=None):
    """Print the one verdict line, return 0 / 1 / 2."""
    from ccl_health.hook.settings import Interrupted
    t0 = time.monotonic()
    try:
        old = {s: signal.signal(s, _on_signal) for s in STOP_SIGNALS}
    except ValueError:            # not the main thread (tests)
        old = {}
    settings = res = None
    found = ('', '')
    from ccl_health.hook.timings import Clock
    global CLOCK
    CLOCK = Clock(t0)
    try:
        try:
            if EARLY:
                raise Interrupted(EARLY[0])
            from ccl_health.hook import judging
            from ccl_health.hook.settings import (CouldNotCheck, parse)
            try:
                settings = parse(argv, t0=t0, description=_description())
                if settings.db and not settings.no_record:
                    # the database's modules imported while the probe runs,
                    # not inside the bounded write at the end
                    from ccl_health.db.preload import preload_in_background
                    preload_in_background(settings.db)
                from ccl_health.hook.check import check
                CLOCK.mark('options')
                res, settings = check(settings, clock=CLOCK)
            except CouldNotCheck as err:
                res = judging.unjudged(str(err), t0, found)
        except Interrupted as sig:
            res = _stopped(sig, t0, settings)
        except ImportError as err:
            res = _plain(f'a Python module is missing ({sys.executable}): '
                         f'{type(err).__name__}: {err}', t0)
        except SystemExit as end:  # --help (argparse printed it): no check
            return 0 if end.code in (0, None) else COULD_NOT_CHECK
        except Exception as err:   # our own bug must never drain a node
            res = _plain(f'internal error {type(err).__name__}: {err}', t0)
        finally:
            # the cleanup runs whole: a second stop signal (a wrapper or
            # NHC's watchdog passing its own on) is only noted from here
            _note_signals()
            run.stop_all()
            run.remove_folders()
        return _finish(res, settings, t0)
    except Interrupted as sig:    # a signal while finishing
        if res is None:
            res = _stopped(sig, t0, settings)
        return _emit(res)
    finally:
        for s, h in old.items():
            try:
                signal.signal(s, h)
            except (ValueError, TypeError):
                pass


def _note_signals():
    """From now on a stop signal is noted, not raised: the verdict is
    decided and what the probes left is being removed."""
    for s in STOP_SIGNALS:
        try:
            signal.signal(s, _note_early)
        except (ValueError, TypeError):      # not the main thread (tests)
            pass


def _stopped(sig, t0, settings):
    return _plain(f'stopped by {sig} before the check finished', t0,
                  (getattr(settings, 'system', '') or '',
                   getattr(settings, 'partition', '') or ''))


def _plain(why, t0, found=('', '')):
    from ccl_health.hook.judging import HookResult
    why = clean(why, None) or 'unknown error'
    return HookResult(COULD_NOT_CHECK, f'COULD-NOT-CHECK: {why}', [],
                      time.monotonic() - t0, 1, 'could-not-check', *found)


_PRINTED = []
#: where this run's time went (:mod:`ccl_health.hook.timings`)
CLOCK = None


def _emit(res):
    """Print the one line: what NHC and Slurm's HealthCheckProgram hand
    to ``scontrol`` (the drain reason) and ``logger``, so clean and capped
    (:func:`ccl_health.oneline.clean`); ``--json`` and the database keep
    the whole line."""
    if not _PRINTED:
        line = clean(res.line)
        print(line, flush=True)
        _PRINTED.append(line)
    return res.code


def _finish(res, settings, t0):
    """The --json document, the line, then the bounded recording (and
    the pending checks after it, or this one kept pending)."""
    from ccl_health.hook.record import bounded_record, json_document
    _PRINTED.clear()
    path = getattr(settings, 'json', None)
    unwritten = None
    if CLOCK is not None:
        res.timings = CLOCK.as_dict()
    if path:
        try:
            _write_json(path, json_document(res, settings))
        except (OSError, TypeError, ValueError) as err:
            # an extra file: the measured verdict stands (the fleet's
            # probe always passes --json; a full folder must not hide a
            # bad node), and a note says what was not written
            unwritten = f'--json {path}: cannot write: {err}'
    dropped = dict(getattr(settings, 'dropped', ()) or ())
    if dropped and res.code != 0 and res.verdict in (
            Verdict.FALLBACK, Verdict.BELOW_REFERENCE):
        # what the caller asked for was not used: say so where it matters
        res.line += (f' (clean environment: dropped the caller\'s '
                     f'{", ".join(sorted(dropped))})')
    code = _emit(res)
    if CLOCK is not None:
        CLOCK.mark('line')
    if unwritten:
        _say(f'({unwritten}; the verdict above stands)')
    note = None
    if settings is not None and not settings.no_record:
        if not settings.db:
            note = ('not recorded: no performance database named (--db, '
                    'CCL_HEALTH_DB or the site file\'s health.db)')
        else:
            left = settings.deadline - time.monotonic() - 0.1
            note, drained = bounded_record(settings, res, dict(settings.env),
                                           min(RECORD_BOUND, left))
            if note:
                _say(f'({note})')
            elif drained:
                note = (f'recorded, and {drained} pending check(s) from '
                        f'{settings.pending_dir}')
    if CLOCK is not None and note is not None:
        CLOCK.mark('record')
        res.timings = CLOCK.as_dict()
    if path and note is not None and not unwritten:
        try:
            _write_json(path, json_document(res, settings, recorded=note or
                                            'recorded'))
        except (OSError, TypeError, ValueError):
            pass
    return code


def _say(note):
    """A note on stderr; one that cannot be written (a full disk behind
    stderr) is dropped, never an error after the verdict."""
    try:
        print(note, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _write_json(path, doc):
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is not None and (stat.S_ISCHR(st.st_mode) or
                           stat.S_ISFIFO(st.st_mode)):
        # a device or a pipe named itself (not through a link): written
        # into, never replaced by a file
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, 'w') as fp:
            json.dump(doc, fp, indent=1)
            fp.write('\n')
        return
    try:
        safefile.write_json(path, doc)
    except PermissionError:
        # a folder we may not write in: the file itself, never through a
        # link
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
        with os.fdopen(fd, 'w') as fp:
            json.dump(doc, fp, indent=1)


def _description():
    from ccl_health.hook import check
    return (check.__doc__ or '').split('\n\n')[0]


if __name__ == "__main__":
    sys.exit(main())
