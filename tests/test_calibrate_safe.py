"""Issue 21, 2: calibrate loses and writes no data.  Two calibrations of
one folder at once both keep their change (a lock around the
read-modify-write, the file read again under it); the database is only
read (read-only, never created nor migrated: a 0-byte file stays 0 bytes);
YAML anchors and aliases survive; every module a user can start with
``python -m`` works or names the command to use."""

import hashlib
import os
import subprocess
import sys
import textwrap

import pytest

from ccl_health.judge import reference, reference_file
from conftest import REPO
from helpers.stores import old_database

PY = sys.executable
REPORT = os.path.join(REPO, 'tests', 'fixtures', 'device', 'suite-run',
                      'keep', 'o-main', 'reports', 'run-20261122T220404.json')

START = """\
system: local
partitions:
  gpu:
    entries: []
"""


def _calibrate(ref, *args):
    return subprocess.Popen(
        [PY, '-m', 'ccl_health.cli', 'calibrate', '--report', REPORT,
         '--reference-dir', str(ref), *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_calibrations_at_once_both_keep_their_change(tmp_path):
    """Real processes: one writes the net-socket entry, one the intra
    entry (--tolerance differs per transport: each prints its change);
    whatever their order, the file holds both.  Each process's read, edit
    and write is slow enough (ruamel, validation) that without a lock the
    second's read sees no entry of the first."""
    ref = tmp_path / 'ref'
    ref.mkdir()
    for trial in range(4):
        (ref / 'local.yaml').write_text(START)
        # a fresh file each trial; both start together
        procs = [_calibrate(ref, '--tolerance', 'intra=0.11',
                            '--tolerance', 'net-socket=0.12'),
                 _calibrate(ref, '--tolerance', 'intra=0.13',
                            '--tolerance', 'net-socket=0.14',
                            '--min-size', '2M')]
        outs = [p.communicate(timeout=300) for p in procs]
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0, err
        r = reference.load(str(ref / 'local.yaml'))
        intra = r.lookup('gpu', 'intra', 'all_reduce', 1, 2)
        sock = r.lookup('gpu', 'net-socket', 'all_reduce', 1, 2)
        # the second to write saw the first's entries (merge keeps the
        # curated sizes of the other): the sizes below 2 MiB that only the
        # first run measured are still there, whatever the order
        assert 1 << 20 in intra.busbw and 2 << 20 in intra.busbw, trial
        assert intra.tolerance in (0.11, 0.13) and \
            sock.tolerance in (0.12, 0.14)
        assert reference_file.lock_path(str(ref / 'local.yaml')) == \
            str(ref / '.local.yaml.lock')


def test_lock_is_held_across_processes(tmp_path):
    """While one process holds the lock of a file, another's calibration
    of it waits (it does not read the file before the lock is free)."""
    path = tmp_path / 'ref' / 'local.yaml'
    path.parent.mkdir()
    path.write_text(START)
    holder = subprocess.Popen(
        [PY, '-c', textwrap.dedent(f"""
            import sys, time
            from ccl_health.judge import reference_file
            with reference_file.locked({str(path)!r}):
                print('held', flush=True)
                sys.stdin.readline()
                open({str(path)!r}, 'a').write('# written under the lock\\n')
        """)], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True)
    assert holder.stdout.readline().strip() == 'held'
    cal = _calibrate(tmp_path / 'ref')
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            cal.wait(timeout=8)       # it waits for the lock
        holder.stdin.write('\n')
        holder.stdin.close()
        holder.wait(timeout=60)
        out, err = cal.communicate(timeout=300)
    finally:
        holder.kill()
        cal.kill()
    assert cal.returncode == 0, err
    # the calibration read the file as the holder left it
    assert '# written under the lock' in path.read_text()
    assert reference.load(str(path)).lookup('gpu', 'intra', 'all_reduce',
                                            1, 2)


def _digest(path):
    with open(path, 'rb') as fp:
        return hashlib.sha256(fp.read()).hexdigest()


@pytest.mark.parametrize('dry', [True, False])
def test_calibrate_db_never_migrates_or_creates(tmp_path, dry):
    from ccl_health import cli
    ref = tmp_path / 'ref'
    ref.mkdir()
    old = str(tmp_path / 'old.db')
    old_database(old, 1).close()
    before = _digest(old)
    extra = ['--dry-run'] if dry else []
    args = ['calibrate', '--system', 'local', '--partition', 'gpu',
            '--reference-dir', str(ref)] + extra
    cli.main(args + ['--db', old])
    assert _digest(old) == before
    assert sorted(os.listdir(tmp_path)) == ['old.db', 'ref']
    empty = tmp_path / 'empty.db'
    empty.write_bytes(b'')
    assert cli.main(args + ['--db', str(empty)]) == 2
    assert empty.stat().st_size == 0
    assert cli.main(args + ['--db', str(tmp_path / 'none.db')]) == 2
    assert not (tmp_path / 'none.db').exists()


ANCHORED = """\
system: local
partitions:
  gpu:
    entries:
      - transport: intra
        collective: all_reduce
        nodes: 1
        gpus_per_node: &gpn 2
        tolerance: &tol 0.1
        source: 'hand'
        busbw: &bw
          1MiB: 50.0
          4MiB: 100.0
      - transport: intra
        collective: broadcast
        nodes: 1
        gpus_per_node: *gpn
        tolerance: *tol
        source: "elsewhere"
        busbw: *bw
"""


@pytest.mark.parametrize('dry', [True, False])
def test_anchors_and_aliases_survive_a_calibration(tmp_path, capsys, dry):
    from ccl_health import cli
    ref = tmp_path / 'ref'
    ref.mkdir()
    (ref / 'local.yaml').write_text(ANCHORED)
    rc = cli.main(['calibrate', '--report', REPORT, '--reference-dir',
                   str(ref)] + (['--dry-run'] if dry else []))
    assert rc == 0, capsys.readouterr().err
    text = (ref / 'local.yaml').read_text()
    if dry:
        assert text == ANCHORED
        return
    assert text.count('&gpn') == 1 and text.count('*gpn') == 1
    assert text.count('&tol') == 1 and text.count('*tol') == 1
    r = reference.load(str(ref / 'local.yaml'))
    bc = r.lookup('gpu', 'intra', 'broadcast', 1, 2)
    assert bc.tolerance == 0.1 and bc.source == 'elsewhere'
    ar = r.lookup('gpu', 'intra', 'all_reduce', 1, 2)
    assert ar.busbw[8 << 20] > 0


#: modules a user may start with ``python -m``, and a word of their usage
COMMANDS = {
    'ccl_health.cli': 'usage: ccl-health',
    'ccl_health.db.calibrate': 'usage: ccl-health calibrate',
    'ccl_health.explain': 'usage:',
    'ccl_health.hook': 'usage: ccl-health-check',
    'ccl_health.hookcli': 'usage: ccl-health-check',
    'ccl_health.nightly': 'usage:',
    'ccl_health.fleet': 'usage:',
    'ccl_health.fleetcli': 'usage:',
    'ccl_health.torch_bench': 'usage:',
    'ccl_health.torch_bench.benchcli': 'usage:',
    'ccl_health.evidence.nodestate': 'usage:',
    'ccl_health.rehearsal.standin': 'usage:',
    'ccl_health.judge.validate': 'usage: scripts/validate',
    'ccl_health.report': 'usage:',
    'ccl_health.initsite': 'usage: scripts/init-site',
    'ccl_health.evidence.ras': 'usage: python -m ccl_health.evidence.ras',
    'ccl_health.torch_bench.port': 'usage: python3 -m '
                                   'ccl_health.torch_bench.port',
}


def _runnable_modules():
    """Every module of ccl_health with a command in it (a ``main`` or
    ``command`` function, or a ``__main__``)."""
    root = os.path.join(REPO, 'ccl_health')
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(('_', '.'))]
        for f in files:
            if not f.endswith('.py'):
                continue
            text = open(os.path.join(d, f)).read()
            if f == '__main__.py' or '\ndef main(' in text or \
                    '\ndef command(' in text:
                rel = os.path.relpath(os.path.join(d, f), REPO)[:-3]
                mod = rel.replace(os.sep, '.')
                yield mod[:-len('.__main__')] if f == '__main__.py' else mod


def test_every_command_module_is_listed():
    assert set(_runnable_modules()) <= set(COMMANDS)


@pytest.mark.parametrize('module', sorted(COMMANDS))
def test_python_m_works_or_names_the_command(module):
    p = subprocess.run([PY, '-m', module, '--help'], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert COMMANDS[module] in out, out[-2000:]
    assert p.returncode in (0, 2)


def test_python_m_calibrate_calibrates(tmp_path):
    ref = tmp_path / 'ref'
    ref.mkdir()
    p = subprocess.run([PY, '-m', 'ccl_health.db.calibrate', '--report',
                        REPORT, '--reference-dir', str(ref)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert reference.load(str(ref / 'local.yaml')).lookup(
        'gpu', 'intra', 'all_reduce', 1, 2)
