"""Seconds spent in a function of the code under test, added up: how the
benchmarks split a step's time (``nightly_first_night``, ``page_scale``,
``db_scale``), the function wrapped where it is looked up."""

import functools
import time


def timed(spent, name, fn, inside=None):
    """``fn`` wrapped: the seconds of each call added to ``spent[name]``.
    ``inside``, a list the wrappers of one measure share: a call made
    within another timed call is not counted again (its time is in the
    outer one's)."""
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        if inside is not None:
            if inside:
                return fn(*a, **kw)
            inside.append(name)
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
            if inside is not None:
                inside.pop()
    return wrapper
