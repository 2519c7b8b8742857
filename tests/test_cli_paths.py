"""Issue 21, 3: an ordinary mistake in a path is one line naming it and
exit 2 (could not check), never a traceback and never exit 1 (the code for
"a failure was found").  Every command's path options are walked with a
missing path, a folder where a file belongs (unreadable as a file, also
for root), a binary file, and an unwritable place (a path under a regular
file: no user can create it)."""

import os
import subprocess
import sys

import pytest

from conftest import REPO

PY = sys.executable
SCRIPTS = os.path.join(REPO, 'scripts')
REPORT = os.path.join(REPO, 'tests', 'fixtures', 'device', 'suite-run',
                      'keep', 'o-main', 'reports', 'run-20261122T220404.json')
#: an nccl-tests output (2x H200, intra)
OUTPUT = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap', 'intra',
                      'stdout.txt')


@pytest.fixture(scope='module')
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp('paths')
    binary = d / 'binary.json'
    binary.write_bytes(bytes(range(256)) * 8)
    folder = d / 'folder.json'
    folder.mkdir()
    db = d / 'good.db'
    p = subprocess.run([os.path.join(SCRIPTS, 'report'), '--db', str(db),
                        'ingest', REPORT], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    ref = d / 'ref'
    ref.mkdir()
    return {'missing': str(d / 'no' / 'such.json'), 'folder': str(folder),
            'binary': str(binary),
            'unwritable': str(binary / 'sub'), 'db': str(db),
            'ref': str(ref), 'dir': str(d)}


KINDS = ('missing', 'folder', 'binary')


def _cases():
    """(id, argv with {P} for the path under test, kinds)"""
    report = os.path.join(SCRIPTS, 'report')
    cal = os.path.join(SCRIPTS, 'calibrate')
    explain = os.path.join(SCRIPTS, 'explain')
    fleet = os.path.join(SCRIPTS, 'fleet')
    hook = [PY, '-m', 'ccl_health.hook']
    return [
        ('report-db', [report, '--db', '{P}', 'failed'], KINDS),
        ('report-db-runs', [report, '--db', '{P}', 'runs'], KINDS),
        ('report-ingest', [report, '--db', '{db}', 'ingest', '{P}'], KINDS),
        ('report-ingest-db', [report, '--db', '{P}', 'ingest', REPORT],
         ('folder', 'binary', 'unwritable')),
        ('report-out', [report, '--db', '{db}', 'report', '--out', '{P}'],
         ('unwritable', 'binary')),
        ('calibrate-report', [cal, '--report', '{P}', '--reference-dir',
                              '{ref}'], KINDS),
        ('calibrate-db', [cal, '--db', '{P}', '--system', 'local',
                          '--partition', 'gpu', '--reference-dir', '{ref}'],
         KINDS),
        ('calibrate-reference-dir', [cal, '--report', REPORT,
                                     '--reference-dir', '{P}'],
         ('missing', 'binary', 'unwritable')),
        ('explain-file', [explain, '{P}'], KINDS),
        ('explain-reference', [explain, '--reference', '{P}', OUTPUT],
         KINDS),
        ('fleet-site', [fleet, '--site', '{P}', '-w', 'n[1-4]',
                        '--simulate', '{P}'], KINDS),
        ('fleet-simulate', [fleet, '--site', 'local', '--partition', 'gpu',
                            '-w', 'n[1-4]', '--simulate', '{P}'], KINDS),
        ('hook-site-dir', hook + ['--site-dir', '{P}'],
         ('missing', 'binary')),
        ('hook-reference-dir', hook + ['--reference-dir', '{P}'],
         ('missing', 'binary')),
    ]


CASES = [(f'{name}-{kind}', argv, kind) for name, argv, kinds in _cases()
         for kind in kinds]


@pytest.mark.parametrize('argv,kind', [(a, k) for _, a, k in CASES],
                         ids=[i for i, _, _ in CASES])
def test_a_bad_path_is_one_line_and_exit_2(paths, argv, kind, tmp_path):
    path = paths[kind]
    argv = [a.replace('{P}', path).replace('{db}', paths['db'])
            .replace('{ref}', paths['ref']) for a in argv]
    env = dict(os.environ, CCL_HEALTH_OUTPUT=str(tmp_path / 'out'),
               CCL_HEALTH_ASSUME_GPUS='0')
    env.pop('CCL_HEALTH_DB', None)
    p = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    err = p.stderr
    assert 'Traceback' not in err + p.stdout, err[-3000:]
    assert p.returncode == 2, (p.returncode, p.stdout[-1500:], err[-1500:])
    # the hook says its verdict line on stdout (NHC reads it there)
    lines = [ln for ln in (err or p.stdout).splitlines() if ln.strip()]
    shown = path if kind != 'unwritable' else os.path.dirname(path)
    assert any(shown in ln for ln in lines), err
    # the user's path is in a one-line error, not a wall of text
    assert len(lines) <= 3, err
    if kind == 'missing':
        assert not os.path.exists(path)
