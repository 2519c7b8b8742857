"""The numbers a user gives on a command line, checked once: finite, in
range, and an error of one line that names the option (argparse's own:
``error: argument --hours: ...``, exit 2) instead of a traceback or a
nonsense answer ("nothing recorded in the last -5 h")."""

import argparse
import math


def _convert(text, kind):
    try:
        value = kind(str(text).strip())
    except (TypeError, ValueError, OverflowError):
        raise argparse.ArgumentTypeError(
            f'{text!r} is not {"an integer" if kind is int else "a number"}'
        ) from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f'{text!r} is not a finite number')
    return value


def bounded(kind, low, high, low_open=False, what=''):
    """An argparse ``type``: a ``kind`` (``int`` or ``float``) between
    ``low`` and ``high`` (``low`` excluded where ``low_open``)."""
    unit = f' {what}' if what else ''

    def parse(text):
        value = _convert(text, kind)
        if value < low or (low_open and value == low) or value > high:
            lo = f'more than {low:g}' if low_open else f'at least {low}'
            hi = f'{high}' if kind is int else f'{high:g}'
            raise argparse.ArgumentTypeError(
                f'{text!r}: must be {lo} and at most {hi}{unit}')
        return value
    parse.__name__ = kind.__name__     # argparse names it in its messages
    return parse


#: a window of hours: more than 0, at most 10 million (1,141 years: "all
#: of it", and still a date the calendar of Python holds)
HOURS = bounded(float, 0, 1e7, low_open=True, what='hours')
#: a number of days: more than 0, at most 1,000 years
DAYS = bounded(float, 0, 365000, low_open=True, what='days')
#: a count of runs, rows or repetitions: 1 to a million
COUNT = bounded(int, 1, 10 ** 6)
#: a database row id (SQLite's and PostgreSQL's bigint)
ROW_ID = bounded(int, 1, 2 ** 63 - 1)
#: seconds of a bound: more than 0, at most a week
SECONDS = bounded(float, 0, 7 * 24 * 3600, low_open=True, what='s')
#: a factor (a straggler's k): more than 0, at most 1000
FACTOR = bounded(float, 0, 1000, low_open=True)
#: a process exit status as shells and Python report it
EXIT_STATUS = bounded(int, -255, 255)
