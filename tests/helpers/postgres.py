"""The PostgreSQL server of the tests: found (or installed with apt-get
where this is root), started as the postgres user in a folder of its own on
a free port, a fresh database on it, and a case to write into it."""

import glob
import os
import shutil
import subprocess
import time

import pytest

from ccl_health.db import recorder, store
from conftest import CAPTURE, read
from helpers.ports import free_ports


def pg_bin():
    # CCL_HEALTH_PG_BIN: a PostgreSQL of another layout (the device's,
    # benchmarks/device/db_writers_on_device.sh)
    if os.environ.get('CCL_HEALTH_PG_BIN'):
        return os.environ['CCL_HEALTH_PG_BIN']
    found = sorted(glob.glob('/usr/lib/postgresql/*/bin/initdb'))
    return os.path.dirname(found[-1]) if found else None


def _as_postgres(cmd):
    if os.geteuid() == 0:
        cmd = ['runuser', '-u', 'postgres', '--'] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def postgres_server(pgbin, address, port, trust_net=None):
    """A PostgreSQL server of the test (``initdb`` in a temporary folder
    outside pytest's root-only tmp, as the postgres user), listening on
    ``address:port`` (``trust_net``: a network also let in, e.g. a test
    cluster's bridge).  A generator: yields its URL once it answers,
    stops it and removes its folder when resumed or closed."""
    import pathlib
    import tempfile
    import psycopg
    base = pathlib.Path(tempfile.mkdtemp(prefix='ccl-health-pg-'))
    os.chmod(base, 0o777)
    data, sock = base / 'data', base / 'sock'
    sock.mkdir()
    os.chmod(sock, 0o777)
    if os.geteuid() == 0:
        shutil.chown(base, 'postgres')
        shutil.chown(sock, 'postgres')
    r = _as_postgres([f'{pgbin}/initdb', '-D', str(data), '-A', 'trust',
                      '-U', 'postgres'])
    assert r.returncode == 0, r.stderr
    if trust_net:
        with open(data / 'pg_hba.conf', 'a') as fp:
            fp.write(f'host all all {trust_net} trust\n')
    r = _as_postgres([f'{pgbin}/pg_ctl', '-D', str(data), '-w', '-l',
                      str(base / 'log'), '-o',
                      f'-p {port} -k {sock} -c listen_addresses={address}',
                      'start'])
    assert r.returncode == 0, r.stderr + r.stdout
    url = f'postgresql://postgres@{address}:{port}/postgres'
    for _ in range(50):
        try:
            psycopg.connect(url).close()
            break
        except psycopg.Error:
            time.sleep(0.2)
    try:
        yield url
    finally:
        # also where the generator is closed (``gen.close()``: GeneratorExit
        # at the yield) rather than resumed: a server never left running
        _as_postgres([f'{pgbin}/pg_ctl', '-D', str(data), '-m', 'immediate',
                      'stop'])
        shutil.rmtree(base, ignore_errors=True)


def local_server(install=True):
    """A server on a free port of 127.0.0.1 (a generator, as
    :func:`postgres_server`); PostgreSQL installed first where it is
    missing and ``install`` (root with apt-get), else the test skipped."""
    pytest.importorskip('psycopg')
    if install and pg_bin() is None and os.geteuid() == 0 and \
            shutil.which('apt-get'):
        cmd = ['apt-get', 'install', '-y', '-q', 'postgresql']
        if subprocess.run(cmd, capture_output=True).returncode:
            subprocess.run(['apt-get', 'update', '-q'], capture_output=True)
            subprocess.run(cmd, capture_output=True)
    pgbin = pg_bin()
    if pgbin is None:
        pytest.skip('PostgreSQL is not installed and cannot be installed')
    [port] = free_ports(1)
    yield from postgres_server(pgbin, '127.0.0.1', port)


def fresh(pg_url, name):
    """A new, empty database of the test's server: its URL."""
    import psycopg
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS {name}')
        conn.execute(f'CREATE DATABASE {name}')
    return pg_url.rsplit('/', 1)[0] + '/' + name


def intra_case(run, busbw, verdict='pass'):
    """The 2-GPU intra all_reduce captured on the device, as run ``run``
    (its last two digits: the day) with its busbw times ``busbw``."""
    from ccl_health.evidence import nccltests_json as nccltests
    res = nccltests.parse_json(read(CAPTURE, 'intra', 'result.json'))
    sizes = recorder.sizes_from_sweep(res)
    for s in sizes:
        s.busbw = s.busbw * busbw
    return store.CaseRecord(run, 'AllReduceSweep %transport=intra', verdict,
                            time=f'2026-11-{int(run[-2:]):02d}T02:00:00+00:00',
                            system='local', partition='gpu', nodes=1,
                            ranks=2, collective='all_reduce',
                            transport='intra', sizes=sizes,
                            versions={'nccl_version': '2.28.3'})
