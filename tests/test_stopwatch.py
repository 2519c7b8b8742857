"""benchmarks/stopwatch.py: the seconds a benchmark splits a step into
(``nightly_first_night``, ``page_scale``, ``db_scale`` wrap the code under
test with it).  The oracle: the wall clock read around the calls, and the
sleeps the calls are made of."""

import os
import sys
import time

import pytest

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import stopwatch  # noqa: E402

NAP = 0.02


def _nap(x=None):
    time.sleep(NAP)
    return x


def test_each_call_is_added_to_its_name():
    spent = {}
    f = stopwatch.timed(spent, 'f', _nap)
    t = time.perf_counter()
    assert [f(1), f(2), f(3)] == [1, 2, 3]
    wall = time.perf_counter() - t
    assert 3 * NAP <= spent['f'] <= wall
    assert f.__name__ == '_nap'


def test_a_call_that_raises_is_counted_and_raises():
    spent = {}

    def boom():
        time.sleep(NAP)
        raise ValueError('x')
    with pytest.raises(ValueError):
        stopwatch.timed(spent, 'boom', boom)()
    assert spent['boom'] >= NAP


def test_a_call_within_a_timed_call_is_not_counted_again():
    """With ``inside`` shared, the inner function's time is the outer
    one's (db_scale's page: a health count that draws no figure twice);
    called on its own, it is counted under its own name."""
    spent, inside = {}, []
    inner = stopwatch.timed(spent, 'inner', _nap, inside)
    outer = stopwatch.timed(spent, 'outer',
                            lambda: (time.sleep(NAP), inner())[1], inside)
    outer()
    assert 'inner' not in spent and spent['outer'] >= 2 * NAP
    inner()
    assert NAP <= spent['inner'] < spent['outer'] and inside == []
    # not shared: each wrapper counts its own calls, nested or not
    spent = {}
    inner = stopwatch.timed(spent, 'inner', _nap)
    stopwatch.timed(spent, 'outer', lambda: inner())()
    assert spent['inner'] >= NAP and spent['outer'] >= spent['inner']
