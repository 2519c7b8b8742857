"""`scripts/report` never gives an all-clear on a typo (issue 11, items 9,
and the report side of 2 and 10): a missing database is not created, unknown
names are errors that list what is recorded, `failed` lists every failing
and unjudged verdict of the verdict model with its exit code, a read-only
database can be read, and the store refuses verdict names it does not know.
Everything goes through the real command line (scripts/report)."""

import datetime
import glob
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

from ccl_health import CclHealthError
from ccl_health.db import store
from ccl_health.judge import verdicts as verdict
from ccl_health.judge.verdicts import Verdict
from conftest import REPO

REPORT = os.path.join(REPO, 'scripts', 'report')
NOW = datetime.datetime.now(datetime.timezone.utc)
FIXTURE_DBS = sorted(glob.glob(os.path.join(REPO, 'tests', 'fixtures', '**',
                                            '*.db'), recursive=True))


def report(db, *args):
    """Run scripts/report --db DB ARGS; (exit code, stdout, stderr)."""
    cmd = ['bash', REPORT, '--db', str(db), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def ago(**kw):
    return (NOW - datetime.timedelta(**kw)).isoformat(timespec='seconds')


def case(run, transport, v, when, system='local', partition='gpu',
         sizes=(), reason=''):
    return store.CaseRecord(
        run, f'AllReduceSweep %transport={transport}', v, time=when,
        system=system, partition=partition, nodes=1, ranks=2,
        collective='all_reduce', transport=transport, reason=reason,
        sizes=[store.SizeRecord(s, bw, ref=330.0, tolerance=0.1,
                                verdict='pass') for s, bw in sizes])


SIZES = ((1 << 20, 40.0), (1 << 30, 330.0))


@pytest.fixture
def db(tmp_path):
    """Three days ago every transport passed; then a run whose net-socket
    build failed; an hour ago the net-socket build failed again and
    net-plugin had no reference; a frontier run of intra only, at 1 GiB."""
    path = tmp_path / 'perf.db'
    with store.open_store(str(path)) as s:
        for t in ('intra', 'net-socket', 'net-plugin'):
            s.add_case(case('old', t, 'pass', ago(days=3), sizes=SIZES))
        s.add_case(case('bf', 'net-socket', 'build-failed', ago(days=2.5),
                        reason='build-failed: nccl-tests did not build'))
        s.add_case(case('new', 'intra', 'pass', ago(hours=1), sizes=SIZES))
        s.add_case(case('new', 'net-socket', 'build-failed', ago(hours=1),
                        reason='build-failed: nccl-tests did not build'))
        s.add_case(case('new', 'net-plugin', 'no-reference', ago(hours=1),
                        sizes=SIZES, reason='no-reference: no reference for '
                        'local:gpu net-plugin 1 node x 2 GPUs'))
        s.add_case(case('fr-1', 'intra', 'pass', ago(days=2),
                        system='frontier', partition='batch',
                        sizes=SIZES[1:]))
    return path


# -- a missing database is an error, never created ----------------------------
@pytest.mark.parametrize('args', [
    ['failed'], ['runs'], ['since', 'intra'], ['history', 'intra'],
    ['compare', 'a', 'b'], ['detect', '--run', 'x'], ['report'], []])
def test_missing_database_is_not_created(tmp_path, args):
    path = tmp_path / 'typo' / 'perf.db'
    rc, out, err = report(path, *args)
    assert rc == 2, (out, err)
    assert f'ccl-health: error: {path}: no such performance database' in err
    assert not path.exists() and not path.parent.exists()
    assert 'nothing failed' not in out


def test_default_database_path_missing_is_an_error(tmp_path):
    env = dict(os.environ, CCL_HEALTH_OUTPUT=str(tmp_path / 'out'))
    env.pop('CCL_HEALTH_DB', None)
    p = subprocess.run(['bash', REPORT, 'failed'], capture_output=True,
                       text=True, cwd=REPO, env=env, timeout=120)
    assert p.returncode == 2
    assert 'no such performance database' in p.stderr
    assert not (tmp_path / 'out').exists()


def test_after_a_rehearsal_the_error_names_its_database(tmp_path):
    """The nightly's rehearsal keeps its database under
    <output>/rehearsal/: `scripts/report failed` says where (issue 40)."""
    out = tmp_path / 'out'
    rehearsed = out / 'rehearsal' / 'ccl-health.db'
    rehearsed.parent.mkdir(parents=True)
    with store.open_store(str(rehearsed)) as db:
        db.add_case(case('run-1', 'intra', 'pass', ago(hours=1),
                         sizes=SIZES))
    env = dict(os.environ, CCL_HEALTH_OUTPUT=str(out))
    env.pop('CCL_HEALTH_DB', None)
    p = subprocess.run(['bash', REPORT, 'failed'], capture_output=True,
                       text=True, cwd=REPO, env=env, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.splitlines() == [
        f'ccl-health: error: {out}/ccl-health.db: no such performance '
        f'database; the nightly\'s rehearsal keeps its own: {rehearsed} '
        f'(scripts/report failed --db {rehearsed})'], p.stderr
    assert not (out / 'ccl-health.db').exists()
    rc, text, err = report(rehearsed, 'failed')
    assert rc == 0 and 'nothing failed' in text, (text, err)


def test_history_of_an_unknown_node_in_an_older_database(tmp_path):
    """A database written before the series columns (schema 1, health
    probes of node vm), read without migrating: one line, exit 2, the
    nodes recorded (issue 40: was sqlite3.OperationalError, exit 1)."""
    src = os.path.join(REPO, 'tests', 'fixtures', 'device', 'history-health',
                       'keep', 'health.db')
    path = tmp_path / 'health.db'
    shutil.copy(src, path)
    for cmd in ('history', 'since'):
        rc, out, err = report(path, cmd, 'intra', '--node', 'nosuch')
        assert rc == 2, (out, err)
        assert err.splitlines() == [
            "ccl-health: error: no health probes of intra on node 'nosuch' "
            "(recorded: 1 node(s): vm)"], err
    rc, out, err = report(path, 'history', 'intra', '--node', 'vm')
    assert rc == 0 and 'health-' in out, (out, err)
    with sqlite3.connect(path) as conn:      # read as it was: not migrated
        assert conn.execute('SELECT value FROM meta').fetchone() == ('1',)


def test_ingest_may_create_the_database(tmp_path):
    run = glob.glob(os.path.join(REPO, 'tests', 'fixtures', 'device',
                                 'suite-run', 'keep', 'o-main', 'reports',
                                 'run-*.json'))[0]
    path = tmp_path / 'new' / 'perf.db'
    rc, out, err = report(path, 'ingest', run)
    assert rc == 0 and '4 test case(s) recorded' in out, err
    rc, out, _ = report(path, 'runs')
    assert rc == 0 and '4 cases: 3 pass, 1 skipped' in out


@pytest.mark.parametrize('args', [['runs'], ['detect'], ['failed'],
                                  ['since', 'intra']])
def test_empty_database_answers_nothing(tmp_path, args):
    path = tmp_path / 'empty.db'
    store.open_store(str(path)).close()
    rc, out, err = report(path, *args)
    assert rc == 2 and 'nothing failed' not in out and 'healthy' not in out
    assert err.startswith('ccl-health: error: ')


def test_not_a_performance_database(tmp_path):
    # ReFrame's own results database: SQLite, but not ours
    reframe_db = glob.glob(os.path.join(REPO, 'tests', 'fixtures', 'device',
                                        'suite-run', 'keep', '*',
                                        'results.db'))[0]
    shutil.copy(reframe_db, tmp_path / 'results.db')
    rc, _, err = report(tmp_path / 'results.db', 'failed')
    assert rc == 2 and 'not a ccl-health performance database' in err
    (tmp_path / 'x.json').write_text('{"runs": []}\n')
    rc, _, err = report(tmp_path / 'x.json', 'runs')
    assert rc == 2 and 'cannot read the database' in err
    rc, _, err = report(tmp_path, 'runs')           # a folder
    assert rc == 2 and 'no such performance database' in err


# -- failed: every failing and unjudged verdict, with its exit code -----------
def test_failed_lists_build_failed_and_no_reference(db):
    rc, out, err = report(db, 'failed')
    assert rc == 1, err
    lines = out.splitlines()
    assert any('transport=net-socket: BUILD-FAILED: build-failed: '
               'nccl-tests did not build' in ln for ln in lines)
    assert any('transport=net-plugin: NO-REFERENCE: no-reference' in ln
               for ln in lines)
    assert not any('transport=intra' in ln for ln in lines)
    assert len(lines) == 2


@pytest.mark.parametrize('name', verdict.FAILING + verdict.UNJUDGED)
def test_failed_lists_every_bad_verdict(tmp_path, name):
    path = tmp_path / 'one.db'
    with store.open_store(str(path)) as s:
        s.add_case(case('r', 'intra', 'pass', ago(hours=2), sizes=SIZES))
        s.add_case(case('r', 'net-socket', name, ago(hours=2),
                        reason=f'{name}: why'))
    rc, out, _ = report(path, 'failed')
    assert f'transport=net-socket: {name.upper()}: {name}: why' in out
    assert rc == verdict.exit_code([name]) == (
        1 if Verdict(name).failed else 2)


def test_failed_only_unjudged_is_exit_2(tmp_path):
    path = tmp_path / 'u.db'
    with store.open_store(str(path)) as s:
        s.add_case(case('r', 'intra', 'pass', ago(hours=2), sizes=SIZES))
        s.add_case(case('r', 'net-plugin', 'could-not-check', ago(hours=2),
                        reason='could not check: the transport was not '
                        'proven (no debug log)'))
    rc, out, _ = report(path, 'failed')
    assert rc == 2 and 'COULD-NOT-CHECK' in out


def test_failed_all_clear_only_with_cases(db, tmp_path):
    path = tmp_path / 'ok.db'
    with store.open_store(str(path)) as s:
        s.add_case(case('r', 'intra', 'pass', ago(hours=2), sizes=SIZES))
        s.add_case(case('r', 'net-plugin-gdr', 'skipped', ago(hours=2),
                        reason='skipped: GPUDirect RDMA unsupported'))
    rc, out, _ = report(path, 'failed')
    assert rc == 0
    assert out.strip() == ('nothing failed in the last 24 h (2 case(s) in '
                           '1 run(s), all pass or skipped)')
    # the window holds no run at all: not "nothing failed"
    rc, out, err = report(path, 'failed', '--hours', '0.5')
    assert rc == 2 and 'nothing failed' not in out
    assert 'nothing recorded in the last 0.5 h; 1 older run(s), the ' \
        'newest r at' in err
    # the command it names shows that run (issue 32.3)
    hours = re.search(r'scripts/report failed --hours (\d+)', err).group(1)
    rc, out, err = report(path, 'failed', '--hours', hours)
    assert rc == 0 and '2 case(s) in 1 run(s)' in out, (out, err)


def test_failed_counts_the_older_runs_up_to_a_bound(tmp_path, monkeypatch):
    """Nothing in the window: the older runs counted up to
    OLDER_RUNS_COUNTED (exact up to it, "more than" beyond), never every
    run of the database (each health check is one)."""
    from ccl_health.db import answers
    monkeypatch.setattr(answers, 'OLDER_RUNS_COUNTED', 3)
    path = str(tmp_path / 'older.db')

    def said(n):
        with store.open_store(path) as s:
            for i in range(len(s.query('SELECT id FROM cases')), n):
                s.add_case(case(f'r{i}', 'intra', 'pass',
                                ago(hours=10 + i), sizes=SIZES))
            with pytest.raises(CclHealthError) as err:
                answers.failures(s, 1)
        return str(err.value)
    assert 'nothing recorded in the last 1 h; 3 older run(s), the newest ' \
        'r0 at' in said(3)
    assert '; more than 3 older runs, the newest r0 at' in said(5)
    assert re.search(r': see them with scripts/report failed --hours \d+ '
                     r'\(or scripts/report runs\)$', said(5))


def test_failed_window_with_times_in_other_zones(tmp_path):
    """A site whose run reports carry local times (-08:00): an hour ago is
    inside a 2 h window, whatever the string order of the times says."""
    pst = datetime.timezone(datetime.timedelta(hours=-8))
    local = (NOW - datetime.timedelta(hours=1)).astimezone(pst).isoformat(
        timespec='seconds')
    assert local < (NOW - datetime.timedelta(hours=2)).isoformat()
    path = tmp_path / 'tz.db'
    with store.open_store(str(path)) as s:
        s.add_case(case('utc', 'intra', 'pass', ago(hours=1.5), sizes=SIZES))
        s.add_case(case('pst', 'net-socket', 'build-failed', local,
                        reason='build-failed: nccl-tests did not build'))
    rc, out, _ = report(path, 'failed', '--hours', '2')
    assert rc == 1 and 'BUILD-FAILED' in out
    rc, out, _ = report(path, 'runs')
    assert [ln.split()[1] for ln in out.splitlines()] == ['pst', 'utc']


def test_stored_name_unknown_to_this_version_is_not_good(db):
    """Old data (or another tool's) is read, never failed on, and a name
    this version does not know is could-not-check, not an all-clear."""
    conn = sqlite3.connect(str(db))
    conn.execute("UPDATE cases SET verdict = 'weird' WHERE run_id = 'new' "
                 "AND transport = 'intra'")
    conn.execute("UPDATE cases SET verdict = 'pass' WHERE run_id = 'new' "
                 "AND transport != 'intra'")
    conn.commit()
    conn.close()
    rc, out, _ = report(db, 'failed')
    assert rc == 2
    assert "COULD-NOT-CHECK (UNKNOWN VERDICT 'WEIRD')" in out
    rc, out, _ = report(db, 'runs', '--last', '1')
    assert rc == 0 and '3 cases: 2 pass, 1 weird' in out


# -- unknown names are errors that list what exists ---------------------------
@pytest.mark.parametrize('cmd', ['since', 'history'])
def test_unknown_transport(db, cmd):
    rc, out, err = report(db, cmd, 'net-pluginn')
    assert rc == 2 and out == ''
    assert ("ccl-health: error: unknown transport 'net-pluginn' (recorded: "
            "intra, net-plugin, net-socket)") in err


@pytest.mark.parametrize('cmd', ['since', 'history'])
def test_unknown_system_and_partition(db, cmd):
    rc, _, err = report(db, cmd, 'intra', '--system', 'frontiier')
    assert rc == 2
    assert "unknown system 'frontiier' (recorded: frontier, local)" in err
    rc, _, err = report(db, cmd, 'intra', '--partition', 'gpus')
    assert rc == 2
    assert "unknown partition 'gpus' (recorded: batch, gpu)" in err


@pytest.mark.parametrize('cmd', ['since', 'history'])
def test_transport_never_run_on_that_system(db, cmd):
    rc, out, err = report(db, cmd, 'net-socket', '--system', 'frontier')
    assert rc == 2 and 'healthy' not in out
    assert ("no cases of transport 'net-socket' on system frontier "
            "(recorded there: intra)") in err


@pytest.mark.parametrize('cmd', ['since', 'history'])
def test_unknown_size(db, cmd):
    rc, _, err = report(db, cmd, 'intra', '--size', '3G')
    assert rc == 2
    assert 'size 3GiB never recorded for intra (recorded: 1MiB, 1GiB)' in err
    # recorded for another transport, never for this one
    rc, _, err = report(db, cmd, 'intra', '--size', '1M', '--system',
                        'frontier')
    assert rc == 2
    assert ('size 1MiB never recorded for intra on frontier (recorded: '
            '1GiB)') in err
    rc, _, err = report(db, cmd, 'intra', '--size', '1Q')
    assert rc == 2 and "not a message size: '1Q'" in err


def test_unknown_runs(db):
    for args in (['compare', 'old', 'nwe'], ['compare', 'olld', 'new'],
                 ['detect', '--run', 'nwe']):
        rc, out, err = report(db, *args)
        bad = [a for a in args if a in ('nwe', 'olld')][0]
        assert rc == 2 and out == ''
        assert (f"unknown run '{bad}' (recorded: new, fr-1, bf, old; list "
                f"them with: scripts/report runs)") in err


def test_detect_known_run(db):
    rc, out, _ = report(db, 'detect', '--run', 'new')
    assert rc == 0
    first, *keys = out.strip().splitlines()
    # its keys judged (each key's history: the lines that follow)
    assert first == (f'no drops against history in run new ({len(keys)} '
                     f'key(s) judged, each as below)')
    # then how each key is judged: too few runs, no baseline recorded
    assert keys and all(': not judged yet: ' in k and
                        'no baseline recorded' in k for k in keys), keys


def test_compare_known_runs(db):
    rc, out, _ = report(db, 'compare', 'old', 'new')
    assert rc == 0
    assert len(out.splitlines()) == 4      # intra + net-plugin x 2 sizes
    assert 'x1.000' in out
    # no measurement in common: an error, not an empty answer
    rc, _, err = report(db, 'compare', 'old', 'bf')
    assert rc == 2 and "runs 'old' and 'bf' have no measured case" in err


def test_since_and_history_of_known_names(db):
    rc, out, _ = report(db, 'since', 'net-socket', '--system', 'local')
    assert rc == 1
    assert out.startswith('net-socket: bad since ')
    assert '(run bf, 2 run(s) in a row; last: build-failed)' in out
    rc, out, _ = report(db, 'since', 'net-plugin')
    assert rc == 2 and 'last: no-reference' in out
    rc, out, _ = report(db, 'since', 'intra', '--system', 'local')
    assert rc == 0
    assert out.startswith('intra: healthy in the last run (run new at ')
    rc, out, _ = report(db, 'history', 'intra', '--size', '1G', '--system',
                        'local')
    assert rc == 0 and len(out.splitlines()) == 2
    assert all('1073741824' in ln and '330.00 GB/s' in ln
               for ln in out.splitlines())


# -- runs ---------------------------------------------------------------------
def test_runs_newest_first_with_counts(db):
    rc, out, _ = report(db, 'runs')
    assert rc == 0
    lines = out.splitlines()
    assert [ln.split()[1] for ln in lines] == ['new', 'fr-1', 'bf', 'old']
    assert lines[0].endswith('local:gpu  3 cases: 1 pass, 1 build-failed, '
                             '1 no-reference')
    assert lines[1].endswith('frontier:batch  1 case: 1 pass')
    assert lines[2].endswith('local:gpu  1 case: 1 build-failed')
    assert lines[3].endswith('local:gpu  3 cases: 3 pass')
    rc, out, _ = report(db, 'runs', '--last', '1')
    assert rc == 0 and out.splitlines() == lines[:1]


# -- read-only databases ------------------------------------------------------
def test_questions_open_read_only(db):
    before = db.read_bytes()
    with store.open_store(str(db), readonly=True) as s:
        assert len(s.cases()) == 8
        with pytest.raises(sqlite3.OperationalError, match='readonly'):
            s.execute('CREATE TABLE t (x)')
    assert db.read_bytes() == before


def test_read_only_file_in_read_only_folder(db, tmp_path):
    """0444 file in a 0555 folder (SQLite cannot create its -shm there).
    Root ignores file modes: as root, the commands run without the
    capabilities that let it (CAP_DAC_OVERRIDE ...), and the old, writable
    open is shown to fail there first."""
    drop = []
    if os.geteuid() == 0:
        if not shutil.which('setpriv'):
            pytest.skip('root without setpriv: file modes cannot bite')
        drop = ['setpriv',
                '--bounding-set=-dac_override,-dac_read_search,-fowner']
    ro = tmp_path / 'ro'
    ro.mkdir()
    path = ro / 'perf.db'
    shutil.copy(db, path)
    path.chmod(0o444)
    ro.chmod(0o555)
    try:
        p = subprocess.run(
            drop + [sys.executable, '-c',
                    'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); '
                    'c.execute("PRAGMA journal_mode=WAL")', str(path)],
            capture_output=True, text=True)
        assert p.returncode != 0 and 'readonly' in p.stderr
        for args, want_rc, want in (
                (['runs'], 0, '1 case: 1 build-failed'),
                (['failed'], 1, 'BUILD-FAILED'),
                (['history', 'intra', '--size', '1G'], 0, '330.00 GB/s')):
            p = subprocess.run(drop + ['bash', REPORT, '--db', str(path)] +
                               args, capture_output=True, text=True,
                               cwd=REPO, timeout=120)
            assert p.returncode == want_rc and want in p.stdout, p.stderr
        assert os.listdir(ro) == ['perf.db']
    finally:
        ro.chmod(0o755)


# -- the store: only verdict names --------------------------------------------
def test_store_rejects_unknown_verdict_names(tmp_path):
    path = str(tmp_path / 's.db')
    with store.open_store(path) as s:
        with pytest.raises(CclHealthError,
                           match=r"r1 c: unknown verdict 'build_failed' "
                                 r"\(known: pass, below-reference"):
            s.add_case(store.CaseRecord('r1', 'c', 'build_failed'))
        with pytest.raises(CclHealthError,
                           match=r"unknown size 1024 verdict 'ok'"):
            s.add_case(store.CaseRecord(
                'r1', 'c', 'pass', sizes=[store.SizeRecord(1024, 1.0,
                                                           verdict='ok')]))
        assert s.cases() == []
        s.add_case(store.CaseRecord('r1', 'c', Verdict.BUILD_FAILED))
        assert [c['verdict'] for c in s.cases()] == ['build-failed']


def _ours(path):
    """The fixture database's verdict names, or None when it is not a
    ccl-health database (ReFrame's own results.db)."""
    conn = sqlite3.connect(f'file:{path}?mode=ro', uri=True)
    try:
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if 'cases' not in tables:
            return None
        return {r[0] for r in conn.execute(
            'SELECT verdict FROM cases UNION SELECT verdict FROM '
            'measurements') if r[0] is not None}
    finally:
        conn.close()


def test_fixture_databases_hold_only_verdict_names():
    ours = {p: _ours(p) for p in FIXTURE_DBS}
    ours = {p: v for p, v in ours.items() if v is not None}
    assert len(ours) >= 4
    for path, names in ours.items():
        assert names <= set(verdict.NAMES), (path, names)


@pytest.mark.parametrize('name', [p for p in FIXTURE_DBS
                                  if 'suite-run' not in p])
def test_fixture_databases_through_the_cli(tmp_path, name):
    """Every recorded device database answers `runs` and `failed` (a copy:
    tests never touch the record), with the exit code of its verdicts."""
    path = tmp_path / os.path.basename(name)
    shutil.copy(name, path)
    names = _ours(name)
    with store.open_store(str(path), readonly=True) as s:
        cases = s.cases()
    rc, out, err = report(path, 'runs', '--all')
    assert rc == 0, err
    assert sum(int(ln.split('  ')[3].split()[0])
               for ln in out.splitlines()) == len(cases)
    rc, out, err = report(path, 'failed', '--hours', '1e6')
    listed = [c['verdict'] for c in cases
              if not Verdict(c['verdict']).good]
    findings = out.startswith(('DROP', 'DRIFT')) or any(
        f'\n{k}' in out for k in ('DROP', 'DRIFT', 'INTERMITTENT'))
    if listed:
        # a history finding needs a person: it counts as a failure
        assert rc == verdict.exit_code(listed + (['drop'] if findings
                                                 else [])), (out, err)
        for v in set(listed):
            assert f': {v.upper()}: ' in out
    else:
        assert rc in (0, 1)    # 1 only for drops found against history
        assert rc == (1 if out.startswith('DROP') or '\nDROP' in out or
                      'INTERMITTENT' in out else 0), out
    assert names is not None


def test_summary_table_counts_build_failed(db):
    from ccl_health import report as rep
    with store.open_store(str(db), readonly=True) as s:
        table = rep.summary_table(s)
    row = next(r for r in table if r['transport'] == 'net-socket')
    assert row['last verdict'] == 'build-failed' and row['failures'] == 2
    row = next(r for r in table if r['transport'] == 'net-plugin')
    assert row['failures'] == 1           # no-reference is not a pass
    from ccl_health.judge.verdicts import BROKEN
    assert set(BROKEN) >= {'build-failed', 'aborted', 'incomplete',
                           'could-not-check', 'no-reference'}
