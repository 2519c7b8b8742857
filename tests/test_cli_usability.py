"""Issue 15, a site engineer's first week: results in one place, a user's
selection that is not silently replaced, progress and no colour codes off a
terminal, help on every option, the dry run's banner saying what it
rendered, sites from a laptop, failures readable at 3 a.m."""

import json
import os
import re
import subprocess
import sys

import pytest

from ccl_health import cli, progress
from ccl_health.db import answers
from ccl_health.db import store
from ccl_health.judge.verdicts import Verdict
from conftest import REPO

SCRIPTS = os.path.join(REPO, 'scripts')
PY = sys.executable


def _env(**kw):
    env = dict(os.environ, CCL_HEALTH_ASSUME_GPUS='2:sm_90', **kw)
    env.pop('CCL_HEALTH_OUTPUT', None)
    env.pop('CCL_HEALTH_DB', None)
    return env


# -- 1. results in one place -------------------------------------------------
def test_loading_the_configuration_creates_nothing(tmp_path):
    code = ('import runpy, sys; '
            f'c = runpy.run_path({os.path.join(REPO, "config", "settings.py")!r}); '
            'print(c["site_configuration"]["systems"][0]["stagedir"])')
    p = subprocess.run([PY, '-c', code], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert os.listdir(tmp_path) == []
    assert p.stdout.strip() == str(tmp_path / 'ccl-health-output' / 'stage')
    assert not os.path.exists(os.path.join(REPO, 'config',
                                           'ccl-health-output'))


def test_reframe_from_any_folder_writes_under_that_folder(tmp_path):
    """reframe -C <checkout>/config/settings.py run in a folder: stage,
    report, log and ReFrame's results storage all under
    ./ccl-health-output there, as scripts/run and scripts/report use."""
    exe = os.path.join(os.path.dirname(PY), 'reframe')
    p = subprocess.run([exe, '-C', os.path.join(REPO, 'config', 'settings.py'),
                        '-c', os.path.join(REPO, 'checks',
                                           'collective_sweep.py'),
                        '-n', 'AllReduceSweep%transport=intra', '--dry-run'],
                       cwd=tmp_path, env=_env(), capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    out = tmp_path / 'ccl-health-output'
    assert (out / 'reframe.log').exists()
    assert list((out / 'stage').rglob('rfm_job.sh'))
    assert list((out / 'reports').glob('*.json'))
    assert sorted(os.listdir(tmp_path)) == ['ccl-health-output']
    assert not os.path.exists(os.path.join(REPO, 'config',
                                           'ccl-health-output'))


def test_every_entry_point_has_the_same_default(tmp_path, monkeypatch):
    from ccl_health import outputs
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv('CCL_HEALTH_OUTPUT', raising=False)
    monkeypatch.delenv('CCL_HEALTH_DB', raising=False)
    assert outputs.output_dir() == str(tmp_path / 'ccl-health-output')
    assert outputs.database() == str(tmp_path / 'ccl-health-output' /
                                     'ccl-health.db')
    monkeypatch.setenv('CCL_HEALTH_OUTPUT', 'elsewhere')
    assert outputs.output_dir() == str(tmp_path / 'elsewhere')
    # scripts/report's database follows the same rule
    with pytest.raises(Exception, match=re.escape(
            str(tmp_path / 'elsewhere' / 'ccl-health.db'))):
        store.open_store(readonly=True)


# -- 2. selection --------------------------------------------------------------
@pytest.mark.parametrize('args, selects', [
    ([], False), (['-S', 'max_size=1G'], False),
    (['-n', 'CollectiveSweep'], True), (['-nCollectiveSweep'], True),
    (['--name=x'], True), (['-t', 'collectives'], True),
    (['--tag', 'scale'], True), (['--mode', 'collectives'], True),
    (['-E', 'num_nodes>1'], True), (['--failed'], True),
    (['-x', 'net-plugin'], False), (['-p', 'gnu'], False),
    (['--cpu-only'], False), (['-T', 'scale'], False),
    (['--system', 'frontier'], False)])
def test_user_selection_replaces_the_default(args, selects):
    assert cli.user_selects(args) is selects


def run_cli(tmp_path, *args, env=None):
    cmd = [PY, '-m', 'ccl_health.cli', 'run', '--output',
           str(tmp_path / 'out')] + list(args)
    return subprocess.run(cmd, cwd=REPO, env=env or _env(),
                          capture_output=True, text=True, timeout=600)


def test_name_selection_reaches_reframe(tmp_path):
    p = run_cli(tmp_path, '--dry-run', '--',
                '-n', 'CollectiveSweep%transport=intra%collective=alltoall')
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert '--tag=nightly' not in p.stdout
    assert re.search(r'dry run rendered [1-9]\d* job scripts: 1 x 2 tasks on '
                     r'1 node of local:gpu', p.stdout), p.stdout[-1500:]
    assert 'CollectiveSweep %transport=intra %collective=alltoall' in p.stdout


def test_nothing_selected_is_said_not_passed(tmp_path):
    p = run_cli(tmp_path, '--dry-run', '--', '-n', 'NoSuchCheck')
    assert p.returncode == 2
    assert 'nothing was selected' in p.stderr and '-n NoSuchCheck' in \
        p.stderr
    assert 'wrote no report' not in p.stderr


# -- 5. progress, colour -------------------------------------------------------
def test_no_colour_codes_off_a_terminal(tmp_path):
    p = run_cli(tmp_path, '--dry-run', '--', '-n',
                'AllReduceSweep%transport=intra')
    assert p.returncode == 0, p.stdout[-3000:]
    assert '\x1b[' not in p.stdout and '\x1b[' not in p.stderr
    assert '[       OK ]' in p.stdout or '[      OK ]' in p.stdout


def _stage(tmp_path):
    case = tmp_path / 'stage' / 'local' / 'gpu' / 'builtin'
    build = case / 'NcclTestsBuild_20da727d'
    sweep = case / 'AllReduceSweep_a9fd2800'
    build.mkdir(parents=True)
    sweep.mkdir(parents=True)
    return build / 'rfm_build.out', sweep / 'rfm_job.out'


def test_progress_of_builds_and_sweeps(tmp_path):
    build, job = _stage(tmp_path)
    now = [100.0]
    prog = progress.Progress(str(tmp_path / 'stage'), start=100.0,
                             clock=lambda: now[0])
    prog.saw_line('[ \x1b[32mRUN     \x1b[0m ] AllReduceSweep '
                  '%transport=intra /a9fd2800 @local:gpu+builtin')
    build.write_text('ccl-health: nccl-tests 2.19.6: fetch\n'
                     'ccl-health: nccl-tests 2.19.6: unpack\n'
                     'ccl-health: nccl-tests 2.19.6: make\n')
    now[0] = 112.0
    assert prog.poll() == ['ccl-health: [  0m12s] build nccl-tests 2.19.6: '
                           'make (0m00s in this step)']
    now[0] = 130.0
    assert prog.poll() == []                    # nothing new, said recently
    now[0] = 180.0
    assert prog.poll() == ['ccl-health: [  1m20s] build nccl-tests 2.19.6: '
                           'make (1m08s in this step)']
    with open(build, 'a') as f:
        f.write('ccl-health: nccl-tests 2.19.6 installed in /c/x\n')
    # the sweep, from the output captured on the device: a partial line
    # is not read until it is whole
    rows = open(os.path.join(REPO, 'tests', 'fixtures', 'device',
                             'suite-run', 'keep', 'o-main', 'stage', 'local',
                             'gpu', 'builtin', 'AllReduceSweep_a9fd2800',
                             'rfm_job.out')).read().splitlines(True)
    data = [r for r in rows if re.match(r'\s+\d+\s+\d+\s+float', r)]
    job.write_text(''.join(data[:18]) + data[18][:20])
    now[0] = 200.0
    lines = sorted(prog.poll())
    assert lines[1] == 'ccl-health: [  1m40s] build nccl-tests 2.19.6: ' \
        'installed'
    assert re.fullmatch(r'ccl-health: \[  1m40s\] AllReduceSweep '
                        r'%transport=intra: 1MiB reached, busbw [\d.]+ GB/s',
                        lines[0]), lines
    with open(job, 'a') as f:
        f.write(data[18][20:])
    now[0] = 220.0
    assert prog.poll()[0].startswith('ccl-health: [  2m00s] AllReduceSweep '
                                     '%transport=intra: 2MiB reached')


def test_progress_through_the_main_command_with_the_replay(tmp_path):
    """The whole path without GPUs (the replay stand-ins of
    tests/test_reframe_replay.py): progress lines while ReFrame runs,
    ReFrame's own lines kept, its log file named at the end."""
    from helpers.replay import run_suite
    p, report, out = run_suite(tmp_path, '-n',
                               'AllReduceSweep%transport=intra',
                               env={'CCL_HEALTH_PROGRESS_S': '0.05'})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert re.search(r'ccl-health: \[\s*\d+m\d\ds\] AllReduceSweep '
                     r'%transport=intra %collective=all_reduce '
                     r'%algo=default: \d+[KMG]?i?B reached, busbw', p.stdout), \
        p.stdout[-3000:]
    assert '[ RUN' in p.stdout and '\x1b[' not in p.stdout
    assert f'{out}/reframe.log (ReFrame\'s full log)' in p.stdout


# -- 7. sites from a laptop ------------------------------------------------------
def test_site_dry_run_banner_and_account(tmp_path):
    env = _env(CCL_HEALTH_MODULES_SYSTEM='nomod', CCL_HEALTH_ACCOUNT='abc123')
    p = run_cli(tmp_path, '--dry-run', '--', '--system', 'frontier',
                '-n', 'AllReduceSweep%transport=(intra|net-socket)', env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert 'dry run rendered 2 job scripts: 1 x 8 tasks on 1 node of ' \
        'frontier:batch (8 per node); 1 x 16 tasks on 2 nodes of ' \
        'frontier:batch (8 per node)' in p.stdout
    assert 'a node with 2 GPUs' not in p.stdout
    script = next((tmp_path / 'out' / 'stage').rglob('rfm_job.sh'))
    assert '#SBATCH -A abc123' in script.read_text()


def test_perlmutter_account():
    code = ('import runpy; s = runpy.run_path("config/systems/'
            'perlmutter.py")["system"]; print(s["partitions"][0]["access"])')
    p = subprocess.run([PY, '-c', code], cwd=REPO, capture_output=True,
                       text=True, env=_env(CCL_HEALTH_ACCOUNT='m1234'))
    assert "'-A m1234'" in p.stdout
    p = subprocess.run([PY, '-c', code], cwd=REPO, capture_output=True,
                       text=True, env=_env())
    assert '-A' not in p.stdout


def test_lmod_missing_gives_the_hint(tmp_path):
    env = _env(LMOD_CMD='', PATH=os.environ['PATH'])
    env.pop('CCL_HEALTH_MODULES_SYSTEM', None)
    env.pop('LMOD_CMD')
    p = run_cli(tmp_path, '--dry-run', '--', '--system', 'frontier',
                env=env)
    if 'sane Lmod' not in p.stdout:
        pytest.skip('this machine has Lmod')
    # the tool could not run (2): never the code of a measured failure (1)
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr
    assert 'CCL_HEALTH_MODULES_SYSTEM=nomod' in p.stderr


# -- 8. help -----------------------------------------------------------------------
HELPS = {'run': 'scripts/run', 'report': 'scripts/report',
         'calibrate': 'scripts/calibrate',
         'ccl-health-check': 'ccl-health-check', 'explain': 'scripts/explain',
         'init-site': 'scripts/init-site'}


def _options(text):
    """{option: its help text} of argparse's help output."""
    out, cur = {}, None
    section = False
    for ln in text.splitlines():
        if re.match(r'^(options|optional arguments|positional arguments):',
                    ln):
            section = True
            continue
        if not section or not ln.strip():
            cur = None
            continue
        m = re.match(r'^  (\S.*?)(?:\s{2,}(\S.*))?$', ln)
        if m and not ln.startswith('    '):
            cur = m.group(1)
            out[cur] = m.group(2) or ''
        elif cur:
            out[cur] += ' ' + ln.strip()
    return out


@pytest.mark.parametrize('script', sorted(HELPS))
def test_every_option_has_help(script):
    p = subprocess.run([os.path.join(SCRIPTS, script), '--help'],
                       capture_output=True, text=True, timeout=120)
    # every --help exits 0, the hook's too (issue 32.4)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f'usage: {HELPS[script]} '), p.stdout[:200]
    assert 'ccl-health db' not in p.stdout
    opts = _options(p.stdout)
    assert len(opts) > 2
    for opt, text in opts.items():
        assert text.strip(), f'{script}: {opt} has no help'
    assert '(default: None)' not in p.stdout


def test_defaults_are_shown():
    p = subprocess.run([os.path.join(SCRIPTS, 'calibrate'), '--help'],
                       capture_output=True, text=True)
    assert '(default: 1M)' in ' '.join(p.stdout.split())
    p = subprocess.run([os.path.join(SCRIPTS, 'report'), 'history',
                        '--help'], capture_output=True, text=True)
    assert p.stdout.startswith('usage: scripts/report history')
    assert '(default: 30)' in p.stdout
    p = subprocess.run([os.path.join(SCRIPTS, 'run'), '--help'],
                       capture_output=True, text=True)
    assert '--tag=nightly' in p.stdout and 'ccl-health-output' in p.stdout


def test_report_subcommands_have_help():
    for sub in ('ingest', 'failed', 'runs', 'since', 'history', 'compare',
                'detect', 'report', 'prune', 'migrate'):
        p = subprocess.run([os.path.join(SCRIPTS, 'report'), sub, '--help'],
                           capture_output=True, text=True)
        assert p.returncode == 0 and p.stdout.startswith(
            f'usage: scripts/report {sub}'), (sub, p.stdout[:200])
        for opt, text in _options(p.stdout).items():
            assert text.strip(), f'report {sub}: {opt} has no help'


# -- 4. failures readable at 3 a.m. ---------------------------------------------
HIST = os.path.join(REPO, 'tests', 'fixtures', 'device', 'history-health',
                    'keep')


def test_failed_groups_drops_per_run_and_transport():
    with store.open_store(os.path.join(HIST, 'hist.db'), readonly=True) as db:
        lines = [ln for _, ln in answers.failures(db, 1e7)]
    drops = [ln for ln in lines if ln.startswith('DROP')]
    # 3 single-size drops of healthy runs, one line per degraded run
    assert len(drops) == 5, lines
    assert ('DROP local/gpu/intra all_reduce 1n/2r in run '
            'degraded-nchannels4: 11 sizes below history (1MiB..1GiB); '
            'worst 1GiB 82.78 GB/s vs baseline 330.55 (-75%') in lines[
                lines.index(next(ln for ln in drops
                                 if 'degraded-nchannels4' in ln))]
    i = next(i for i, ln in enumerate(lines) if 'degraded-proto-ll:' in ln)
    assert lines[i + 1] == '    changed: NCCL_PROTO: (unset) -> LL'
    assert sum('NCCL_PROTO' in ln for ln in lines) == 1


def test_failed_reasons_are_whole_and_said_once():
    with store.open_store(os.path.join(HIST, 'hist.db'), readonly=True) as db:
        lines = [ln for _, ln in answers.failures(db, 1e7)]
    below = [ln for ln in lines if 'BELOW-REFERENCE' in ln]
    assert below and all(not ln.rstrip().endswith('performance error:')
                         for ln in below)
    assert any('BELOW-REFERENCE: below reference at 1MiB 24.87 vs 70.91 GB/s '
               '(-65%)' in ln for ln in below), below
    with store.open_store(os.path.join(HIST, 'health.db'),
                          readonly=True) as db:
        lines = [ln for _, ln in answers.failures(db, 1e7)]
    assert any('COULD-NOT-CHECK: /tmp/nobin' in ln for ln in lines)
    assert not any('COULD-NOT-CHECK: COULD-NOT-CHECK' in ln for ln in lines)


def test_missing_gpu_is_its_own_failure():
    v = Verdict('missing-gpu')
    assert v.failed and not v.unjudged
