"""The performance database on a real PostgreSQL server, through the same
code as SQLite (a postgresql:// URL).  The test starts its own server
(Debian's PostgreSQL, installed if missing) in a temporary folder, as the
postgres user, and stops it afterwards."""

import dataclasses
import os
import shutil
import subprocess
import sys

import pytest

from ccl_health import identity
from ccl_health.db import windowfindings
from ccl_health.judge import history
from ccl_health.db import store
from ccl_health.db import schema
from ccl_health.judge import series
from conftest import CAPTURE
from helpers.postgres import fresh as _fresh
from helpers.postgres import intra_case as _case

psycopg = pytest.importorskip('psycopg')


def test_same_code_path_on_postgresql(pg_server):
    url = _fresh(pg_server, 'same_code_path')
    with store.open_store(url) as db:
        assert db.kind == 'postgresql'
        for i in range(1, 12):
            db.add_case(_case(f'run-{i:02d}', 1.0 + (i % 3) * 0.002))
        db.add_case(_case('run-12', 0.5))
        # another check under the same identity is refused (in the
        # pipeline: the connection goes on), the first kept
        with pytest.raises(identity.Taken):
            db.add_case(_case('run-12', 0.7, verdict='below-reference'))
        assert db.cases("WHERE run_id = 'run-12'")[0]['verdict'] == 'pass'
        # a second write of the same case (the run report after the
        # check) updates, never duplicates
        db.add_case(dataclasses.replace(
            _case('run-12', 0.5, verdict='below-reference'),
            source='report'))
        assert len(db.cases()) == 12
        assert db.cases("WHERE run_id = 'run-12'")[0]['verdict'] == \
            'below-reference'
        drops = [f for f in history.detect(db.records()) if f.kind == 'drop']
        assert drops and {f.run_id for f in drops} == {'run-12'}
    with store.open_store(url) as db:      # reopen: no migration again
        assert db.query("SELECT value FROM meta WHERE key = "
                        "'schema_version'")[0]['value'] == \
            str(schema.SCHEMA_VERSION)


def test_accept_and_undo_on_postgresql(pg_server):
    """Schema 3 (acceptances) on PostgreSQL: a run accepted restarts the
    history there; undone, the drop is flagged again."""
    url = _fresh(pg_server, 'accept_undo')
    with store.open_store(url) as db:
        for i in range(1, 12):
            db.add_case(_case(f'run-{i:02d}', 1.0 + (i % 3) * 0.002))
        for i in range(12, 15):
            db.add_case(_case(f'run-{i:02d}', 0.5))
        assert windowfindings.detect_in(db, run_id='run-14')
        [row] = [r for r in db.records("WHERE run_id = 'run-12'")][:1]
        key = series.series_key(row)
        [acc] = db.accept([{'run_id': 'run-12', 'run_time': row['time'],
                            **dict(zip(store.ACCEPT_KEY, key)),
                            'size': None}], 'alice', 'new NCCL')
        assert not windowfindings.detect_in(db, run_id='run-14')
        assert db.acceptances()[0]['who'] == 'alice'
        db.undo_acceptance(acc, 'bob')
        assert windowfindings.detect_in(db, run_id='run-14')
        assert db.acceptances(active=True) == []


def test_calibration_baseline_on_postgresql(pg_server, tmp_path):
    """Schema 4 (baselines) on PostgreSQL: calibrate --db records what it
    measured; the history is judged against it from the next run (a 3 %
    step found on its third run)."""
    from ccl_health import cli
    url = _fresh(pg_server, 'calibration_baseline')
    with store.open_store(url) as db:
        for i in (1, 2):
            db.add_case(_case(f'run-{i:02d}', 1.0 + i * 0.001))
    (tmp_path / 'ref').mkdir()
    assert cli.main(['calibrate', '--db', url, '--system', 'local',
                     '--partition', 'gpu', '--reference-dir',
                     str(tmp_path / 'ref'), '--min-size', '64M']) == 0
    with store.open_store(url) as db:
        rows = db.baselines()
        assert rows and all(r['runs'] == ['run-01', 'run-02'] and
                            r['n'] == 2 and r['run_id'] == 'run-02'
                            for r in rows)
        for i in (3, 4, 5):
            db.add_case(_case(f'run-{i:02d}', 0.97))
        assert not windowfindings.detect_in(db, run_id='run-04')
        found = windowfindings.detect_in(db, run_id='run-05')
        assert found and {f.kind for f in found} == {'drift'}
        assert {f.size for f in found} == {r['size'] for r in rows
                                            if r['size'] >= 64 << 20}


# -- issue 30: migrate, bounded reads, concurrent writers --------------------

def _everything(url):
    from ccl_health.db import answers
    with store.open_store(url, readonly=True) as db:
        cases = [{k: v for k, v in c.items() if not k.endswith('_ref')}
                 for c in db.cases()]
        records = sorted(db.records(), key=lambda r: (r['run_id'],
                                                      r['case_name'],
                                                      r['size'] or 0))
        found = sorted((f.kind, f.run_id, f.key, f.size) for f in
                       windowfindings.detect_in(db))
        return cases, records, found, answers.failed(db, 1e6)


def test_migrate_a_sqlite_database_into_postgresql(pg_server, tmp_path):
    """scripts/report migrate --to: every case, size and document moved
    with its id; the questions answer alike; a second migration into a
    database that holds cases is refused; writing goes on after it."""
    import datetime
    import sys
    from conftest import REPO
    sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
    import db_gen
    end = datetime.datetime.now(datetime.timezone.utc)
    src = str(tmp_path / 'm.db')
    with store.open_store(src) as db:
        db_gen.write_nights(db, 'perlmutter', 3, end)
        db_gen.write_checks(db, 'perlmutter', 6, 2, 10, end, fail=0.05)
    url = _fresh(pg_server, 'migrated')
    cmd = [os.path.join(REPO, 'scripts', 'report'), '--db', src, 'migrate',
           '--to', url]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f'moved {src} into {url}: 165 cases, '), \
        p.stdout
    before, after = _everything(src), _everything(url)
    assert after[0] == before[0] and len(after[0]) == 45 + 120
    assert after[1:] == before[1:]
    assert any(json_env(c) for c in after[0])       # documents resolved
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and 'already holds cases' in p.stderr
    with store.open_store(url) as db:           # the ids go on after it
        new = db.add_case(_case('run-30', 1.0))
        assert new > max(c['id'] for c in after[0])


def json_env(case):
    import json
    return json.loads(case['env_json'] or '{}').get('NCCL_DEBUG') == 'WARN'


def test_migrate_an_older_schema_fills_the_series(pg_server, tmp_path):
    """A schema-5 database (a recorded device run) moves with each case's
    kind and node filled in: the same findings, read bounded."""
    src = os.path.join(os.path.dirname(CAPTURE), 'news-first-week',
                       'news.db')
    copy = tmp_path / 'news.db'
    for ext in ('', '-wal', '-shm'):
        if os.path.exists(src + ext):
            shutil.copy(src + ext, str(copy) + ext)
    url = _fresh(pg_server, 'older')
    from ccl_health.db import migrate
    with store.open_store(str(copy), readonly=True) as db:
        assert db.schema_version() == 5
        counts = migrate.migrate(db, url)
    assert counts['cases'] == 12 and counts['measurements'] == 36 and \
        counts['baselines'] == 3
    assert _everything(url)[1:] == _everything(str(copy))[1:]
    with store.open_store(url, readonly=True) as db:
        assert {r['kind'] for r in db.query('SELECT kind FROM cases')} == \
            {'sweep'}


def _relations_bytes(url):
    """Every table and index of the database, in bytes; the state of each
    key and the newest time of each series (schema 12) (a row a key,
    updated by each of its checks: the versions an update leaves are
    autovacuum's, never more than a share of the table) as they are once
    vacuumed."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute('VACUUM FULL key_state')
        conn.execute('VACUUM FULL series')
    with store.open_store(url, readonly=True) as db:
        return int(db.query(
            "SELECT sum(pg_total_relation_size(c.oid)) AS n FROM pg_class c "
            "JOIN pg_namespace s ON s.oid = c.relnamespace WHERE "
            "s.nspname = 'public' AND c.relkind = 'r'")[0]['n'])


def test_a_healthy_check_is_recorded_in_under_1_kb(pg_server):
    """On PostgreSQL too (issue 30): the database grows by under 1 KB for
    each healthy health check written by the hook's own record (the case,
    its size, every index; the series, environment and versions stored
    once).  Measured as the growth from 2 to 12 days of 40 nodes' checks
    (4,800 checks), written by the PostgreSQL write path."""
    import datetime
    import sys
    from conftest import REPO
    sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
    import db_gen
    url = _fresh(pg_server, 'bytes')
    end = datetime.datetime(2026, 11, 20, tzinfo=datetime.timezone.utc)
    with store.open_store(url) as db:
        db_gen.write_checks(db, 'frontier', 40, 2, 10, end -
                            datetime.timedelta(days=10), fail=0, batch=400)
    first = _relations_bytes(url)
    with store.open_store(url) as db:
        n = db_gen.write_checks(db, 'frontier', 40, 10, 10, end, fail=0,
                                batch=400)
    grow = (_relations_bytes(url) - first) / n
    assert n == 4000 and grow < 1024, grow


def _files_holding(root, secret):
    out = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                with open(path, 'rb') as fp:
                    if secret.encode() in fp.read():
                        out.append(path)
            except OSError:
                pass
    return out


def test_a_password_in_the_url_leaves_no_trace(pg_server, tmp_path):
    """Issue 41, class 5: a night with a password in its --db URL (the
    test's server trusts every local connection, so the password is
    accepted and unused): not in the mail, the page, night.json, run.log,
    reframe.log or the run's files; not in the hook's line, stderr or
    --json."""
    from conftest import REPO
    secret = 'Sup3rSecretPw'
    url = _fresh(pg_server, 'secret_night').replace(
        'postgres@', f'postgres:{secret}@')
    env = dict(os.environ, CCL_HEALTH_OUTPUT=str(tmp_path / 'out'))
    env.pop('CCL_HEALTH_DB', None)
    p = subprocess.run([os.path.join(REPO, 'scripts', 'nightly'),
                        '--rehearse', 'crash', '--db', url, '--publish',
                        str(tmp_path / 'www')], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr      # the crash, told
    assert secret not in p.stdout + p.stderr
    assert _files_holding(str(tmp_path), secret) == []
    hook = subprocess.run(
        [sys.executable, '-m', 'ccl_health.hook', '--system', 'local',
         '--db', url, '--json', str(tmp_path / 'hook.json')],
        env=dict(env, CCL_HEALTH_ASSUME_GPUS='2:sm_90'), cwd=REPO,
        capture_output=True, text=True, timeout=300)
    assert secret not in hook.stdout + hook.stderr, hook.stdout + hook.stderr
    assert _files_holding(str(tmp_path), secret) == []
