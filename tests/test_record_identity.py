"""One identity for a record (issue 37, item 3; issue 41, class 4): every
door's run id is made by :func:`ccl_health.identity.new`, unique and never
reused or overwritten, and a pending check is recorded only in the
database it was meant for.

The hooks here are the real hook (``python -m ccl_health.hook``) on the
tests' stand-in node (tests/test_health_trust.py), with a stand-in clock:
a ``sitecustomize`` that fixes ``datetime.datetime.now`` to the instant in
``$CCL_TEST_CLOCK`` (seconds since the epoch), so that checks land in the
same second (or the same microsecond) however slow the machine is."""

import datetime
import os
import random
import subprocess
import sys
import time

import pytest

from conftest import REPO
from ccl_health import CclHealthError, dburl, identity, outputs
from ccl_health.db import store
from ccl_health.hook import pending
from helpers.node import environ, hook
from helpers.stores import REPORT, case_rows, locked

#: the stand-in clock: ``datetime.datetime.now`` fixed to $CCL_TEST_CLOCK
CLOCK = '''
import datetime
import os

_AT = os.environ.get('CCL_TEST_CLOCK')
if _AT:
    class _Fixed(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.fromtimestamp(float(_AT), tz)

    datetime.datetime = _Fixed
'''

MISSING_GPU = ('--expect-gpus', '2')


def _clock(tmp_path, at, env=None):
    """The environment of a hook whose clock reads ``at`` (epoch s)."""
    folder = tmp_path / 'clock'
    folder.mkdir(exist_ok=True)
    (folder / 'sitecustomize.py').write_text(CLOCK)
    return dict(env or {}, CCL_TEST_CLOCK=repr(at),
                PYTHONPATH=f'{folder}{os.pathsep}{REPO}')


def _second():
    """An instant early in the current second (so +50 ms is the same
    second), never in the future."""
    now = time.time()
    return float(int(now)) + 0.1 if now - int(now) > 0.1 else \
        float(int(now)) - 0.9


def _report(db, *args):
    return subprocess.run(REPORT + ['--db', str(db)] + list(args),
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=REPO))


def test_the_clock_stand_in_holds(tmp_path):
    """The stand-in clock is what the hook's process reads."""
    at = _second()
    p = subprocess.run(
        [sys.executable, '-c', 'import datetime; from ccl_health import '
         'identity; print(datetime.datetime.now(datetime.timezone.utc)'
         '.timestamp()); print(identity.stamp())'],
        env=dict(os.environ, **_clock(tmp_path, at)), capture_output=True,
        text=True, timeout=60)
    got, stamp = p.stdout.split()
    assert abs(float(got) - at) < 1e-6, p.stderr
    assert stamp == datetime.datetime.fromtimestamp(
        at, datetime.timezone.utc).strftime('%Y%m%dT%H%M%S.%fZ')


def test_two_checks_of_a_node_in_one_second_are_two_records(tmp_path):
    """A missing-GPU check and a healthy one 50 ms later on the same host:
    two records, and ``report failed`` names the failure (it said
    "nothing failed" when the second overwrote the first)."""
    at = _second()
    code, line, _ = hook(tmp_path, *MISSING_GPU, env=_clock(
        tmp_path, at, {'CCL_HEALTH_FAKE_GPUS': '1'}))
    assert code == 1 and 'missing GPU' in line, line
    code, line, _ = hook(tmp_path, '--no-pairs',
                         env=_clock(tmp_path, at + 0.05))
    assert code == 0 and line.startswith('HEALTHY: '), line
    rows = case_rows(tmp_path / 'db.sqlite')
    assert sorted(r['verdict'] for r in rows) == ['missing-gpu', 'pass']
    assert len({r['run_id'] for r in rows}) == 2
    # the same second in the records' own time
    assert rows[0]['time'] == rows[1]['time']
    p = _report(tmp_path / 'db.sqlite', 'failed')
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert 'node-health: MISSING-GPU: ' in p.stdout, p.stdout
    assert 'missing GPU: nvidia-smi lists 1 of the 2 GPUs' in p.stdout


def test_parallel_checks_and_a_drain_lose_nothing(tmp_path):
    """Two checks kept pending (their database locked), then N checks at
    once in the same microsecond, then ``ingest --pending``: N + 2
    records, each its own run id, and nothing left pending (33 checks
    left 7 rows when the run id was the time to the second)."""
    n = 6
    at = _second()
    db = tmp_path / 'db.sqlite'
    folder = tmp_path / 'pending'
    env = _clock(tmp_path, at, {'CCL_HEALTH_PENDING_DIR': str(folder)})
    lock = locked(db)
    try:
        for fake in ('1', '2'):        # a missing-GPU check, a healthy one
            code, _, err = hook(tmp_path, *MISSING_GPU, env=dict(
                env, CCL_HEALTH_FAKE_GPUS=fake))
            assert 'kept in ' in err, err
    finally:
        lock.close()
    assert len(pending.files(str(folder))) == 2
    cmd = [sys.executable, '-m', 'ccl_health.hook', '--no-pairs',
           '--tests-prefix', os.path.join(REPO, 'tests', 'replay'),
           '--launcher', os.path.join(REPO, 'tests', 'replay', 'fake-node',
                                      'launch')]
    procs = [subprocess.Popen(cmd + ['--json', str(tmp_path / f'{i}.json')],
                              env=environ(tmp_path, env),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(n)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert len(out.splitlines()) == 1, (out, err)
    p = _report(db, 'ingest', '--pending', str(folder))
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert pending.files(str(folder)) == []
    rows = case_rows(db)
    assert len(rows) == n + 2, rows
    assert len({r['run_id'] for r in rows}) == n + 2
    assert sorted(r['verdict'] for r in rows).count('missing-gpu') == 1


def test_a_pending_check_is_recorded_only_in_its_own_database(tmp_path):
    """A check kept pending for database X (locked) is not drained into
    Y by the next check naming Y, nor by ``ingest --pending`` into Y; a
    check naming X records it there."""
    x, y = tmp_path / 'x.sqlite', tmp_path / 'y.sqlite'
    folder = tmp_path / 'pending'
    env = {'CCL_HEALTH_PENDING_DIR': str(folder)}
    lock = locked(x)
    try:
        code, _, err = hook(tmp_path, *MISSING_GPU, env=dict(
            env, CCL_HEALTH_DB=str(x), CCL_HEALTH_FAKE_GPUS='1'))
    finally:
        lock.close()
    assert code == 1 and 'kept in ' in err, err
    [(kept, _)] = pending.files(str(folder))
    case = pending.read(kept)
    assert case.verdict == 'missing-gpu'
    # the next check names Y: its own record only, X's check left in place
    code, _, err = hook(tmp_path, '--no-pairs',
                        env=dict(env, CCL_HEALTH_DB=str(y)))
    assert code == 0 and err == '', err
    assert [r['verdict'] for r in case_rows(y)] == ['pass']
    assert [f for f, _ in pending.files(str(folder))] == [kept]
    assert pending.load(kept) == (case, os.path.realpath(x))
    # an ingest into Y leaves it too, and says for which database
    p = _report(y, 'ingest', '--pending', str(folder))
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert f'pending: 1 file(s) meant for {os.path.realpath(x)}, not ' \
        f'{os.path.realpath(y)}: left in {folder}' in p.stderr, p.stderr
    assert '0 pending health check(s) recorded' in p.stdout
    assert [r['verdict'] for r in case_rows(y)] == ['pass']
    assert [f for f, _ in pending.files(str(folder))] == [kept]
    # a check naming X (another spelling of the same file) records it there
    code, _, err = hook(tmp_path, '--no-pairs', env=dict(
        env, CCL_HEALTH_DB=f'sqlite:///{tmp_path}/./x.sqlite'))
    assert code == 0 and err == '', err
    assert pending.files(str(folder)) == []
    assert sorted(r['verdict'] for r in case_rows(x)) == ['missing-gpu', 'pass']
    assert [r['run_id'] for r in case_rows(x) if r['verdict'] ==
            'missing-gpu'] == [case.run_id]


def test_a_pending_file_names_its_database_without_a_password(tmp_path):
    """A check meant for a PostgreSQL database (unreachable: port 1) is
    kept pending naming the database without its password, and the note
    and ``--json`` never print the password."""
    url = 'postgresql://hook:s3cr3t-pw@127.0.0.1:1/perf?password=s3cr3t-pw'
    pytest.importorskip('psycopg')
    folder = tmp_path / 'pending'
    code, line, err = hook(tmp_path, '--no-pairs', env={
        'CCL_HEALTH_DB': url, 'CCL_HEALTH_PENDING_DIR': str(folder)})
    assert code == 0 and 'kept in ' in err, err
    [(kept, _)] = pending.files(str(folder))
    text = open(kept).read() + err + line + \
        (tmp_path / 'detail.json').read_text()
    assert 's3cr3t-pw' not in text
    assert pending.load(kept)[1] == 'postgresql://hook@127.0.0.1:1/perf'


# -- the identity itself ----------------------------------------------------

def test_identities_are_unique_and_sort_by_time():
    at = datetime.datetime(2026, 11, 28, 19, 54, 22, 5,
                           tzinfo=datetime.timezone.utc)
    same = [identity.new('health-', 'n01', when=at) for _ in range(2000)]
    assert len(set(same)) == len(same)
    assert all(i.startswith('health-20261128T195422.000005Z-n01-')
               for i in same)
    rng = random.Random(1)
    times = sorted({at + datetime.timedelta(microseconds=rng.randrange(
        10 ** 9)) for _ in range(200)})
    made = [identity.new('health-', 'n' * rng.randrange(1, 9), when=t)
            for t in times]
    assert sorted(made) == made
    # an older version's identities of the same second sort before, of
    # an earlier second before, of a later second after
    assert 'health-2026-11-28T19:54:22+00:00-n01' < same[0]
    assert 'nightly-20261128T195422-login1-42' < identity.new(
        'nightly-', 'login1', when=at)
    assert 'nightly-20261128T195423-login1-42' > identity.new(
        'nightly-', 'login1', when=at)
    # a file name whatever the host is called
    assert '/' not in identity.new('case-', '../../etc/x y')


def test_every_door_makes_its_run_id_with_the_one_function():
    """No door builds a run id from the time itself."""
    import re
    pattern = re.compile(r"run_id\s*=\s*\(?\s*f['\"]|strftime\(['\"]%Y%m%dT"
                         r"%H%M%S")
    found = []
    for top, _, files in os.walk(os.path.join(REPO, 'ccl_health')):
        for f in files:
            if f.endswith('.py'):
                path = os.path.join(top, f)
                text = open(path, encoding='utf-8').read()
                found += [f'{os.path.relpath(path, REPO)}: {m.group(0)!r}'
                          for m in pattern.finditer(text)]
    assert not found, found


# -- the store never lets another check take a stored identity ---------------

def _check(verdict, reason, when='2026-11-28T19:54:22+00:00'):
    return store.CaseRecord(
        run_id='health-2026-11-28T19:54:22+00:00-n01',
        case_name='node-health', verdict=verdict, time=when, system='big',
        partition='gpu', nodelist='n01', nodes=1, collective='all_reduce',
        transport='intra', reason=reason, source='health',
        sizes=[store.SizeRecord(1 << 30, 300.0 if verdict == 'pass' else
                                None, verdict=verdict)])


@pytest.mark.parametrize('old_sqlite', [False, True])
def test_another_check_never_replaces_a_stored_one(tmp_path, monkeypatch,
                                                   old_sqlite):
    """Two checks under one identity (pending files of an older version,
    whose run id was the time to the second): the second is refused
    (:class:`identity.Taken`), the first kept whole; the same check
    written again is one record.  Also through the writer of SQLite before
    3.35 (no RETURNING)."""
    if old_sqlite:
        monkeypatch.setattr(store.sqlite3, 'sqlite_version_info', (3, 31, 1))
    db = str(tmp_path / 'db.sqlite')
    failing = _check('missing-gpu', 'UNHEALTHY: missing GPU: 1 of 2')
    with store.open_store(db) as s:
        s.add_case(failing)
        s.add_case(failing)                 # a drain retried: one record
        with pytest.raises(CclHealthError) as err:
            s.add_case(_check('pass', 'HEALTHY: 300 GB/s'))
        assert isinstance(err.value, identity.Taken)
        assert 'already recorded by another check (missing-gpu at ' \
            '2026-11-28T19:54:22+00:00)' in str(err.value)
        rows = s.cases()
        assert [(r['verdict'], r['reason']) for r in rows] == [
            ('missing-gpu', 'UNHEALTHY: missing GPU: 1 of 2')]
        assert len(s.records()) == 1
        # another door's part of the same run still completes it: the
        # check's record, then the run report's verdict
        check = store.CaseRecord('run-1', 'sweep', 'pass', source='check',
                                 sizes=[store.SizeRecord(8, 1.0)])
        s.add_case(check)
        s.add_case(store.CaseRecord('run-1', 'sweep', 'below-reference',
                                    time='2026-11-28T20:00:00+00:00',
                                    reason='below', source='report'))
        assert s.cases("WHERE run_id = 'run-1'")[0]['verdict'] == \
            'below-reference'


def test_a_pending_file_whose_identity_is_taken_is_named_and_kept(tmp_path):
    folder = tmp_path / 'pending'
    db = str(tmp_path / 'db.sqlite')
    with store.open_store(db) as s:
        s.add_case(_check('pass', 'HEALTHY: 300 GB/s'))
    path, _ = pending.keep(_check('missing-gpu', 'UNHEALTHY: missing GPU'),
                           str(folder), 10, 1 << 20, db)
    p = _report(db, 'ingest', '--pending', str(folder))
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert 'already recorded by another check (pass at ' in p.stderr
    assert [f for f, _ in pending.files(str(folder))] == [path]


def test_a_database_is_named_without_its_password():
    assert dburl.without_password('postgresql://u:pw@h:5/db?sslmode=disable&'
                            'password=pw') == \
        'postgresql://u@h:5/db?sslmode=disable'
    assert outputs.database_key('postgres://u:pw@h/db') == 'postgresql://u@h/db'
    assert dburl.without_password('/x/y.db') == '/x/y.db'
    assert outputs.database_key('sqlite:////x/./y.db') == \
        os.path.realpath('/x/y.db')
