"""The tests' PostgreSQL server (tests/helpers/postgres.py) stops when its
generator is closed as well as when it is resumed: a module fixture that
ends with ``gen.close()`` left a server running per test run (found
running days later beside the machine's other work)."""

import pytest

from helpers import postgres


@pytest.mark.parametrize('end', ['close', 'resume'])
def test_the_server_stops_however_its_generator_ends(end):
    psycopg = pytest.importorskip('psycopg')
    gen = postgres.local_server()
    url = next(gen)
    psycopg.connect(url).close()
    if end == 'close':
        gen.close()
    else:
        assert next(gen, 'ended') == 'ended'
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=3).close()
