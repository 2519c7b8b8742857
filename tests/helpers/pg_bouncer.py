"""A PgBouncer of the tests in front of their PostgreSQL server
(tests/test_store_postgres.py ``postgres_server``), in transaction mode: the
pooler a site puts in front of its PostgreSQL for the health hook of every
node (docs/database.md, "The hook of every node at once: a pooler").  Used by
tests/test_store_pgbouncer.py and benchmarks/db_scale.py.

Debian's ``pgbouncer`` is installed when missing (as root, with apt-get);
it runs as the postgres user (it refuses to run as root), in the
foreground, with its configuration, log and pid file in a temporary folder,
and is ended by its own process id."""

import os
import shutil
import signal
import subprocess
import tempfile
import time

from helpers.ports import free_ports

#: server connections per database and user: what the 2 shared cores of
#: the tests' machine run at once without queueing in the server
#: (CCL_HEALTH_PGBOUNCER_POOL: a machine of more cores, e.g. the device)
POOL_SIZE = int(os.environ.get('CCL_HEALTH_PGBOUNCER_POOL', 4))
#: PgBouncer processes on one port (so_reuseport; CCL_HEALTH_PGBOUNCER_PROCS)
PROCS = int(os.environ.get('CCL_HEALTH_PGBOUNCER_PROCS', 1))


def pgbouncer_bin(install=True):
    """The path of ``pgbouncer``, installed with apt-get where missing and
    possible (``install``); None when there is none."""
    found = os.environ.get('CCL_HEALTH_PGBOUNCER') or \
        shutil.which('pgbouncer') or (
        '/usr/sbin/pgbouncer' if os.path.exists('/usr/sbin/pgbouncer')
        else None)
    if found or not install or os.geteuid() != 0 or \
            not shutil.which('apt-get'):
        return found
    cmd = ['apt-get', 'install', '-y', '-q', 'pgbouncer']
    if subprocess.run(cmd, capture_output=True).returncode:
        subprocess.run(['apt-get', 'update', '-q'], capture_output=True)
        subprocess.run(cmd, capture_output=True)
    return pgbouncer_bin(install=False)


def pgbouncer_server(binary, pg_url, pool_size=POOL_SIZE, procs=PROCS):
    """A PgBouncer in transaction mode in front of the PostgreSQL server of
    ``pg_url`` (``postgresql://user@host:port/db``, trust authentication),
    every database of it by the same name: ``procs`` processes on the same
    port (``so_reuseport``: PgBouncer is one thread, so a site runs one a
    core it gives it), each with ``pool_size`` server connections.  A
    generator: yields ``(url of the same database through the pooler,
    pids)`` once it answers; ends them and removes its folder when
    resumed."""
    import psycopg
    rest = pg_url.split('://', 1)[1]
    user, rest = rest.split('@', 1)
    hostport, db = rest.split('/', 1)
    host, port = hostport.rsplit(':', 1)
    base = tempfile.mkdtemp(prefix='ccl-health-pgbouncer-')
    os.chmod(base, 0o777)
    [listen] = free_ports(1)
    with open(os.path.join(base, 'users.txt'), 'w') as fp:
        fp.write(f'"{user}" ""\n')
    running, logs = [], []
    url = f'postgresql://{user}@127.0.0.1:{listen}/{db}'
    try:
        for i in range(procs):
            ini = os.path.join(base, f'pgbouncer{i}.ini')
            with open(ini, 'w') as fp:
                fp.write(f"""[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
so_reuseport = {1 if procs > 1 else 0}
auth_type = trust
auth_file = {base}/users.txt
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 1000
logfile = {base}/pgbouncer{i}.log
""")
            cmd = [binary, ini]
            if os.geteuid() == 0:
                cmd = ['runuser', '-u', 'postgres', '--'] + cmd
            log = open(os.path.join(base, f'stderr{i}'), 'w')
            logs.append(log)
            running.append(subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True))
        for _ in range(100):
            try:
                psycopg.connect(url, connect_timeout=2).close()
                break
            except psycopg.Error:
                if any(p.poll() is not None for p in running):
                    break
                time.sleep(0.1)
        for i, proc in enumerate(running):
            if proc.poll() is not None:
                with open(os.path.join(base, f'stderr{i}')) as fp:
                    raise RuntimeError(f'pgbouncer exited {proc.returncode}:'
                                       f' {fp.read()[-500:]}')
        yield url, [pgbouncer_pid(p) for p in running]
    finally:
        for proc in running:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        for log in logs:
            log.close()
        shutil.rmtree(base, ignore_errors=True)


def pgbouncer_pid(proc):
    """The pid of pgbouncer itself (``proc`` may be runuser, its
    parent)."""
    for _ in range(20):
        try:
            kids = open(f'/proc/{proc.pid}/task/{proc.pid}/children').read()
        except OSError:
            return proc.pid
        if kids.split():
            return int(kids.split()[0])
        if os.path.basename(os.readlink(f'/proc/{proc.pid}/exe')) == \
                'pgbouncer':
            return proc.pid
        time.sleep(0.05)
    return proc.pid
