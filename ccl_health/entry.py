"""A command run for the user: what the user must fix (a
:class:`ccl_health.CclHealthError`, a path they gave that cannot be used,
an extra that is not installed) is one line on stderr and exit 2; Ctrl-C
is exit 130.  The ``ccl-health`` command (:mod:`ccl_health.cli`) and
``python -m ccl_health.db.calibrate`` run their functions through it."""

import os
import sys

from ccl_health import CclHealthError, resources


def reader_gone():
    """Quiet, as a Unix tool is when its reader stops reading (``| head``):
    what is left of stdout goes nowhere (no second error when Python flushes
    it at exit), and the exit status is a shell's for SIGPIPE (141)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141


def run(func, args):
    """``func(args)``'s exit code, or 2 with one line for an error of the
    user's, or 130 for Ctrl-C."""
    try:
        return func(args)
    except BrokenPipeError:         # the reader went away (``| head``)
        return reader_gone()
    except CclHealthError as err:
        print(f'ccl-health: error: {err}', file=sys.stderr)
        return 2
    except OSError as err:          # a path the user gave: one line, exit 2
        print(f'ccl-health: error: {err.filename or ""}'
              f'{": " if err.filename else ""}{err.strerror or err}',
              file=sys.stderr)
        return 2
    except ImportError as err:      # an extra that is not installed
        line = resources.missing_extra(err)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
