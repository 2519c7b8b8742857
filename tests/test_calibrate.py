"""scripts/calibrate never damages a reference file: inputs checked first,
what it does not change kept (comments, sources, curated per-size
tolerances, other entries byte for byte), the result validated, the file
replaced atomically; --dry-run shows the diff and writes nothing.  Driven
through the command line on a real run report (2x H200, nvidia-h200-x2)."""

import copy
import json
import os
import shutil

import pytest

from ccl_health import cli
from ccl_health.judge import reference, reference_file
from conftest import REPO

REPORT = os.path.join(REPO, 'tests', 'fixtures', 'device', 'suite-run',
                      'keep', 'o-main', 'reports', 'run-20261122T220404.json')
SHIPPED = os.path.join(REPO, 'reference', 'local.yaml')

CURATED = """\
# local reference, curated by hand
system: local
partitions:
  gpu:
    # no GPUDirect here
    gdr: {supported: false, reason: no FI_HMEM in the tcp provider}
    entries:
      # the NVLink row
      - transport: intra
        collective: all_reduce
        nodes: 1
        gpus_per_node: 2
        tolerance: 0.1
        source: 'hand-measured on the node, 2026-11-01'   # keep me
        busbw:
          1MiB: [50.0, 0.3]     # latency-bound: noisier
          4MiB: 100.0
          64KiB: 5.0            # not measured by the run: stays
      # a row calibrate never touches
      - transport: intra
        collective: broadcast
        nodes: 1
        gpus_per_node: 2
        tolerance: 0.05
        source: "elsewhere"
        busbw: {4MiB: 167.28}
"""


def calibrate(tmp_path, *args, report=REPORT):
    return cli.main(['calibrate', '--report', str(report), '--reference-dir',
                     str(tmp_path / 'ref'), *args])


def refdir(tmp_path, text):
    (tmp_path / 'ref').mkdir(exist_ok=True)
    path = tmp_path / 'ref' / 'local.yaml'
    path.write_text(text)
    return path


def measured(transport):
    """busbw per size of ``transport`` in the run report, by size."""
    with open(REPORT) as fp:
        cases = json.load(fp)['runs'][-1]['testcases']
    tc = next(t for t in cases if t.get('transport') == transport and
              not t.get('fixture'))
    return {s: float(v[0]) for s, v in
            reference.busbw_perfvalues(tc['perfvalues'])}


@pytest.mark.parametrize('tol', ['1.5', '1', '-0.1', 'nan', 'inf', 'abc', '',
                                 'nvl=0.1', 'intra=', 'intra=2',
                                 'intra=0.1=0.2'])
def test_bad_tolerance_leaves_the_file_byte_identical(tmp_path, capsys, tol):
    path = refdir(tmp_path, CURATED)
    before = path.read_bytes()
    assert calibrate(tmp_path, '--tolerance', tol) == 2
    out, err = capsys.readouterr()
    assert err.count('\n') == 1 and err.startswith(
        'ccl-health: error: --tolerance ')
    assert out == ''
    assert path.read_bytes() == before
    assert os.listdir(tmp_path / 'ref') == ['local.yaml']


@pytest.mark.parametrize('args,message', [
    (['--min-size', '1 GB-ish'], '--min-size: not a message size'),
    (['--source', ' '], '--source: empty text'),
    (['--gdr-unsupported', ''], '--gdr-unsupported: empty text'),
    (['--db', 'nowhere.db', '--system', 'local', '--partition', 'gpu'],
     '--db nowhere.db: no such file'),
    (['--db', 'x.db'], '--db needs --system and --partition'),
    (['--last', '0', '--db', 'x.db', '--system', 's', '--partition', 'p'],
     '--last 0: not a positive number'),
])
def test_bad_inputs_are_one_line_and_touch_nothing(tmp_path, capsys, args,
                                                   message):
    path = refdir(tmp_path, CURATED)
    before = path.read_bytes()
    assert calibrate(tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and message in err
    assert path.read_bytes() == before


def test_missing_report_is_an_error(tmp_path, capsys):
    path = refdir(tmp_path, CURATED)
    assert calibrate(tmp_path, report=tmp_path / 'no.json') == 2
    assert 'no.json: no such file' in capsys.readouterr().err
    assert path.read_text() == CURATED


def test_a_broken_reference_file_is_refused_not_extended(tmp_path, capsys):
    broken = CURATED.replace('tolerance: 0.05', 'tolerance: 5')
    path = refdir(tmp_path, broken)
    assert calibrate(tmp_path) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1
    assert 'local.yaml: partitions.gpu.entries[1].tolerance: 5 is not a ' \
        'fraction' in err
    assert path.read_text() == broken


def test_dry_run_prints_a_diff_and_writes_nothing(tmp_path, capsys):
    path = refdir(tmp_path, CURATED)
    stat = path.stat()
    assert calibrate(tmp_path, '--dry-run') == 0
    out = capsys.readouterr().out
    assert f'--- {path}\n+++ {path}\n@@ ' in out
    new_4m = round(measured('intra')[4 << 20], 2)
    assert '-          4MiB: 100.0\n' in out
    assert f'+          4MiB: {new_4m}\n' in out
    assert 'dry run: nothing written' in out
    assert path.read_text() == CURATED
    assert path.stat().st_mtime_ns == stat.st_mtime_ns
    assert os.listdir(tmp_path / 'ref') == ['local.yaml']


def test_dry_run_of_a_new_file_creates_nothing(tmp_path, capsys):
    (tmp_path / 'ref').mkdir()
    assert calibrate(tmp_path, '--dry-run') == 0
    out = capsys.readouterr().out
    assert '--- /dev/null' in out and '+system: local' in out
    assert os.listdir(tmp_path / 'ref') == []


def test_comments_sources_and_curated_tolerances_survive(tmp_path):
    path = refdir(tmp_path, CURATED)
    assert calibrate(tmp_path) == 0
    text = path.read_text()
    for comment in ('# local reference, curated by hand', '# no GPUDirect',
                    '# the NVLink row', '# keep me', '# latency-bound',
                    '# not measured by the run: stays',
                    '# a row calibrate never touches'):
        assert comment in text
    ref = reference.load(str(path))          # the result loads
    e = ref.lookup('gpu', 'intra', 'all_reduce', 1, 2)
    got = measured('intra')
    # measured sizes take the new values; the curated 1 MiB tolerance stays
    assert e.busbw[1 << 20] == round(got[1 << 20], 2)
    assert e.tolerance_at(1 << 20) == 0.3
    assert e.busbw[4 << 20] == round(got[4 << 20], 2)
    assert e.busbw[8 << 30] == round(got[8 << 30], 2)
    assert e.busbw[64 << 10] == 5.0          # not measured: kept
    assert e.tolerance == 0.1                # not named by --tolerance
    assert e.source.startswith('hand-measured on the node, 2026-11-01; '
                               'recalibrated: calibrated by scripts/'
                               'calibrate on ')
    assert 'run-20261122T220404.json' in e.source
    assert ref.gdr_unsupported('gpu') == 'no FI_HMEM in the tcp provider'
    # the new transports came in as new entries, in transport order
    keys = [x.key()[:2] for x in ref.partitions['gpu'].entries]
    assert keys == [('intra', 'all_reduce'), ('intra', 'broadcast'),
                    ('net-socket', 'all_reduce'), ('net-plugin',
                                                   'all_reduce')]
    # the untouched entry is the same text
    untouched = CURATED[CURATED.index('      # a row calibrate never'):]
    assert untouched in text


def test_a_second_calibration_replaces_the_first_note(tmp_path):
    path = refdir(tmp_path, CURATED)
    assert calibrate(tmp_path) == 0
    assert calibrate(tmp_path) == 0
    second = path.read_text()
    ref = reference.load(str(path))
    for transport in ('intra', 'net-plugin', 'net-socket'):
        e = ref.lookup('gpu', transport, 'all_reduce', 1, 2)
        assert e.source.count('recalibrated:') == 1, (transport, e.source)
    # the note of a calibration replaces the one before it, never stacks:
    # a third calibration of the same runs leaves the file as it was
    assert calibrate(tmp_path) == 0
    assert path.read_text() == second


def test_tolerance_and_source_options_apply(tmp_path):
    path = refdir(tmp_path, CURATED)
    assert calibrate(tmp_path, '--tolerance', 'intra=0.2', '--tolerance',
                     'net-socket=0.35', '--source', 'acceptance 2026-11') == 0
    ref = reference.load(str(path))
    e = ref.lookup('gpu', 'intra', 'all_reduce', 1, 2)
    assert e.tolerance == 0.2 and e.source == 'acceptance 2026-11'
    assert e.tolerance_at(1 << 20) == 0.3          # curated, wider
    assert ref.lookup('gpu', 'net-socket', 'all_reduce', 1,
                      2).tolerance == 0.35
    assert ref.lookup('gpu', 'net-plugin', 'all_reduce', 1,
                      2).tolerance == 0.1          # the default
    assert ref.lookup('gpu', 'intra', 'broadcast', 1, 2).tolerance == 0.05


def test_shipped_file_other_entries_stay_byte_for_byte(tmp_path):
    shipped = open(SHIPPED).read()
    path = refdir(tmp_path, shipped)
    assert calibrate(tmp_path) == 0
    text = path.read_text()
    blocks = shipped.split('    - transport: ')
    touched = [b for b in blocks[1:] if 'gpus_per_node: 2\n' in b and
               'collective: all_reduce\n' in b]
    assert len(touched) == 3
    for b in blocks:
        if b not in touched:
            assert b in text
    ref = reference.load(str(path))
    assert len(ref.partitions['gpu'].entries) == len(blocks) - 1
    assert ref.lookup('gpu', 'intra', 'all_reduce', 1, 2).tolerance_at(
        1 << 20) == 0.25


def test_a_new_file_is_created_and_loads(tmp_path):
    (tmp_path / 'ref').mkdir()
    assert calibrate(tmp_path, '--gdr-unsupported', 'no FI_HMEM') == 0
    ref = reference.load_for_system(str(tmp_path / 'ref'), 'local')
    assert ref.gdr_unsupported('gpu') == 'no FI_HMEM'
    assert len(ref.partitions['gpu'].entries) == 3
    assert (tmp_path / 'ref' / 'local.yaml').read_text().startswith(
        '# ccl-health reference for local')


def test_unusable_cases_and_nan_values_are_not_calibrated(tmp_path, capsys):
    with open(REPORT) as fp:
        data = json.load(fp)
    data = copy.deepcopy(data)
    for tc in data['runs'][-1]['testcases']:
        if tc.get('transport') == 'net-plugin':
            tc['verdict'] = 'fallback'
        if tc.get('transport') == 'intra':
            for k in tc['perfvalues']:
                if k.endswith('busbw_8GiB'):
                    tc['perfvalues'][k][0] = float('nan')
    report = tmp_path / 'r.json'
    report.write_text(json.dumps(data))
    (tmp_path / 'ref').mkdir()
    assert calibrate(tmp_path, report=report) == 0
    assert 'net-plugin: its verdict is fallback' in capsys.readouterr().out
    ref = reference.load(str(tmp_path / 'ref' / 'local.yaml'))
    assert ref.lookup('gpu', 'net-plugin', 'all_reduce', 1, 2) is None
    intra = ref.lookup('gpu', 'intra', 'all_reduce', 1, 2)
    assert 8 << 30 not in intra.busbw and 4 << 30 in intra.busbw


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = refdir(tmp_path, CURATED)

    def boom(src, dst):
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(os, 'replace', boom)
    assert calibrate(tmp_path) == 2          # one line, could not write
    assert path.read_text() == CURATED
    # no temporary file left; the lock's sidecar file stays (empty)
    assert sorted(os.listdir(tmp_path / 'ref')) == ['.local.yaml.lock',
                                                    'local.yaml']


def test_write_atomic_keeps_the_mode(tmp_path):
    path = tmp_path / 'f.yaml'
    path.write_text('old')
    os.chmod(path, 0o640)
    reference_file.write_atomic(str(path), 'new')
    assert path.read_text() == 'new'
    assert (path.stat().st_mode & 0o777) == 0o640


def test_scripts_calibrate_is_the_cli(tmp_path):
    """scripts/calibrate runs this code (the thin wrapper, no logic)."""
    text = open(os.path.join(REPO, 'scripts', 'calibrate')).read()
    assert 'ccl_health.cli --prog scripts/calibrate calibrate "$@"' in text
    assert shutil.which('bash')


def test_a_new_partition_keeps_the_rest(tmp_path):
    """A partition the file does not have yet: the whole document is
    written by the round-trip dumper, comments and entries kept."""
    with open(REPORT) as fp:
        data = json.load(fp)
    for tc in data['runs'][-1]['testcases']:
        tc['partition'] = 'batch'
    report = tmp_path / 'r.json'
    report.write_text(json.dumps(data))
    path = refdir(tmp_path, CURATED)
    assert calibrate(tmp_path, report=report) == 0
    text = path.read_text()
    for comment in ('# local reference, curated by hand', '# keep me',
                    '# latency-bound', '# a row calibrate never touches'):
        assert comment in text
    ref = reference.load(str(path))
    assert sorted(ref.partitions) == ['batch', 'gpu']
    assert len(ref.partitions['batch'].entries) == 3
    old = reference.parse(CURATED, 'x')
    assert ref.partitions['gpu'] == old.partitions['gpu'].__class__(
        'gpu', False, 'no FI_HMEM in the tcp provider',
        old.partitions['gpu'].entries)


def test_a_first_run_without_reference_is_calibrated_from_the_store(
        tmp_path, capsys):
    """A configuration's first run has no reference: no-reference fails
    ReFrame's sanity, so its run report holds no busbw, but the check
    recorded its proven sizes in the performance database; calibrate --db
    turns them into the entry, and the next run passes against it.
    Through ReFrame with the replay stand-in (2x H200 intra capture)."""
    pytest.importorskip('reframe')
    from helpers.replay import run_suite, verdict_lines
    path = refdir(tmp_path, 'system: local\npartitions:\n  gpu:\n'
                            '    entries: []\n')
    sizes = ('-S', 'min_size=1M', '-S', 'max_size=16M', '-S',
             'step_factor=4')
    env = {'CCL_HEALTH_REFERENCE_DIR': str(tmp_path / 'ref')}
    p, report, out = run_suite(tmp_path, '-n',
                               'AllReduceSweep%transport=intra', *sizes,
                               env=env)
    assert p.returncode == 2, p.stdout[-2000:]
    assert 'NO-REFERENCE' in verdict_lines(p.stdout)['intra']
    [tc] = [t for t in report['runs'][-1]['testcases'] if not t['fixture']]
    assert tc['verdict'] == 'no-reference' and not tc['perfvalues']
    db = str(out / 'ccl-health.db')
    assert cli.main(['calibrate', '--db', db, '--system', 'local',
                     '--partition', 'gpu', '--reference-dir',
                     str(tmp_path / 'ref'), '--min-size', '1M']) == 0
    e = reference.load(str(path)).lookup('gpu', 'intra', 'all_reduce', 1, 2)
    # the stand-in replays the whole capture (1 MiB to 8 GiB): every size
    # of the output >= --min-size, those asked for among them
    assert {1 << 20, 4 << 20, 16 << 20} <= set(e.busbw)
    assert min(e.busbw) == 1 << 20 and all(v > 0 for v in e.busbw.values())
    assert e.tolerance == 0.1
    capsys.readouterr()
    again = tmp_path / 'again'
    again.mkdir()
    p, _, _ = run_suite(again, '-n', 'AllReduceSweep%transport=intra',
                        *sizes, env=env)
    assert p.returncode == 0, p.stdout[-2000:]
    assert 'PASS' in verdict_lines(p.stdout)['intra']


@pytest.mark.parametrize('noise,said', [
    (0.1, 'kept curated tolerance(s): 1MiB 0.3'),
    (0.45, 'widened curated tolerance(s) to the measured noise: '
           '1MiB 0.3 -> 0.45')])
def test_the_change_line_says_what_became_of_a_curated_tolerance(
        tmp_path, noise, said):
    """Issue 32: a curated per-size tolerance that the measured noise
    widened is said to be widened, never "kept"."""
    path = refdir(tmp_path, CURATED)
    ed = reference_file.Editor(str(path), 'local')
    ed.put('gpu', reference.Entry(
        'intra', 'all_reduce', 1, 2, 0.1, 'test', {1 << 20: 51.0},
        size_tolerance={1 << 20: noise}))
    line = ed.changes[-1]
    assert said in line, line
    assert ('kept curated' in line) == (noise < 0.3), line
    assert f'1MiB: [51.0, {max(noise, 0.3):g}]' in ed.render()
