"""Files, folders and lines that cannot be turned against the site (issue
29, items 4 to 7), each tried the way a hostile local user or a hostile
program would:

* a folder made first, at the predictable path of the space-free stage
  folders (``$TMPDIR/ccl-health-<uid>-<sha256(output)[:12]>``), by a
  second local user (``nobody``, through ``runuser``): open to all (777),
  with a ``stage`` link to the user's own folder, or a link itself; one
  line, exit 2, and nothing written there;
* symbolic links planted at the nightly's old temporary names
  (``.index.html.tmp``, ``night.json.tmp``, ``latest.tmp``) and at
  ``run.log``: nothing written through them;
* an NCCL WARN line with escape sequences, a CR and a control character,
  and a 5 kB reason: what reaches the stand-in ``scontrol`` and ``logger``
  (the Slurm HealthCheckProgram wrapper, the fleet's drain) is one clean
  line of at most :data:`ccl_health.oneline.REASON_MAX` characters;
* the log a drain reason names exists after the hook ended, and older
  evidence is pruned past the bounds (count, size), oldest first.
"""

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from ccl_health import nightly, safefile
from ccl_health.fleet import slurmsteps as slurm
from ccl_health.hook import keep
from ccl_health.oneline import REASON_MAX, clean
from conftest import REPO
from helpers.node import CAP, FAKE, REPLAY, environ
from helpers.hostile import SLURM_WRAPPER, site_naming_replay
from helpers.otheruser import as_other, other_user, plant, shared  # noqa: F401,E501

HOOK = [sys.executable, '-m', 'ccl_health.hook']
STD = ['--tests-prefix', REPLAY, '--launcher', os.path.join(FAKE, 'launch')]
#: a control character of any kind: C0, DEL, C1
CONTROL = re.compile(r'[\x00-\x1f\x7f-\x9f]')
#: a WARN line of a fatal class (NCCL's CUDACHECK) carrying an escape
#: sequence that clears the screen, a colour, an OSC title, a CR and a C0
EVIL_WARN = ("vm:25480:25481 [0] NCCL WARN Cuda failure 'an illegal memory "
             "access was encountered' \x1b[2J\x1b[31mEVIL\x1b[0m"
             "\x1b]0;owned\x07\rHIDDEN\x01\n")


def snapshot(path):
    """Every path under ``path`` (links not followed) and its content."""
    out = {}
    for top, dirs, files in os.walk(path):
        for n in dirs + files:
            p = os.path.join(top, n)
            out[p] = os.readlink(p) if os.path.islink(p) else (
                open(p, 'rb').read() if os.path.isfile(p) else None)
    return out


# -- 4. predictable temporary folders -----------------------------------------

def old_stage_root(tmpdir, out):
    """The predictable path the stage folders of an output with whitespace
    had (the issue's): what another user can make first."""
    return os.path.join(tmpdir, 'ccl-health-%d-%s' % (
        os.getuid(), hashlib.sha256(out.encode()).hexdigest()[:12]))


def run_cli(tmp_path, shared, out):
    env = dict(os.environ, TMPDIR=shared, PYTHONPATH=REPO,
               CCL_HEALTH_OUTPUT=out)
    return subprocess.run([sys.executable, '-m', 'ccl_health.cli', '--prog',
                           'scripts/run', 'run', '--output', out,
                           '--dry-run'], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize('hostile', ['open-777', 'stage-link', 'root-link',
                                     'own-777'])
def test_a_stage_folder_made_first_by_another_user_is_not_used(
        tmp_path, shared, hostile):
    out = str(tmp_path / 'my output')
    root = old_stage_root(shared, out)
    trap = os.path.join(shared, 'trap')       # the other user's own folder
    if hostile == 'own-777':
        os.mkdir(root)
        os.chmod(root, 0o777)
    else:
        as_other('mkdir', '-m', '777', trap)
        if hostile == 'open-777':
            as_other('mkdir', '-m', '777', root)
        elif hostile == 'stage-link':
            as_other('mkdir', '-m', '755', root)
            as_other('ln', '-s', trap, os.path.join(root, 'stage'))
        else:
            as_other('ln', '-s', trap, root)
    before = snapshot(shared)
    p = run_cli(tmp_path, shared, out)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in p.stderr, p.stderr
    assert root in lines[0] and 'not used' in lines[0], lines
    assert 'rfm_job.sh' not in p.stdout
    # nothing of the run went there: no job script, no stage folder
    assert snapshot(shared) == before


def test_the_stage_folders_are_this_users_alone(tmp_path, shared,
                                                monkeypatch):
    from ccl_health import cli
    out = str(tmp_path / 'my output')
    monkeypatch.setattr(tempfile, 'tempdir', shared)
    stage, output = cli._job_folders(out)
    root = old_stage_root(shared, out)
    assert os.path.dirname(stage) == root == os.path.dirname(output)
    for d in (root, stage, output):
        st = os.lstat(d)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
        assert stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
    # the same folders the next run (ReFrame replaces a case's stage)
    assert cli._job_folders(out) == (stage, output)
    # no whitespace: the output folder itself, nothing in /tmp
    assert cli._job_folders(str(tmp_path / 'out')) == (
        str(tmp_path / 'out' / 'stage'), str(tmp_path / 'out' / 'output'))


# -- 5. publishing never follows a link ---------------------------------------

@pytest.fixture
def www(shared):
    """A published folder others can write in (the issue's case)."""
    d = os.path.join(shared, 'www')
    os.makedirs(os.path.join(d, 'nights'))
    for p in (d, os.path.join(d, 'nights')):
        os.chmod(p, 0o1777)
    return d


def test_the_index_is_not_written_through_a_planted_link(tmp_path, www):
    victim = tmp_path / 'victim'
    victim.write_text('precious\n')
    night = os.path.join(www, 'nights', '2024-01-01')
    nightly._write_meta(night, {'run_id': 'r1', 'started': '2024-01-01T01',
                                'status': 'ok', 'lines': ['all clear']})
    with open(os.path.join(night, 'index.html'), 'w') as fp:
        fp.write('<html>the night</html>')
    for name in ('.index.html.tmp', 'latest.tmp'):
        plant(os.path.join(www, name), victim)
    os.chmod(victim, 0o644)
    assert nightly.write_index(www) == '2024-01-01'
    assert victim.read_text() == 'precious\n'
    index = os.path.join(www, 'index.html')
    assert stat.S_ISREG(os.lstat(index).st_mode)
    assert 'ccl-health nights' in open(index).read()
    assert os.readlink(os.path.join(www, 'latest')) == \
        os.path.join('nights', '2024-01-01')
    # a link planted at index.html itself is replaced, its target kept
    os.unlink(index)
    plant(index, victim)
    nightly.write_index(www)
    assert victim.read_text() == 'precious\n'
    assert stat.S_ISREG(os.lstat(index).st_mode)


def test_night_json_and_run_log_are_not_written_through_links(tmp_path,
                                                               www):
    victim = tmp_path / 'victim'
    victim.write_text('precious\n')
    os.chmod(victim, 0o644)
    night = os.path.join(www, 'nights', '2024-01-02')
    os.mkdir(night)
    os.chmod(night, 0o777)
    plant(os.path.join(night, 'night.json.tmp'), victim)
    plant(os.path.join(night, 'run.log'), victim)
    nightly._write_meta(night, {'run_id': 'r2', 'status': 'running'})
    meta = os.path.join(night, 'night.json')
    assert stat.S_ISREG(os.lstat(meta).st_mode)
    assert json.load(open(meta))['run_id'] == 'r2'
    with pytest.raises(OSError, match='symbolic link'):
        nightly._run_child([sys.executable, '-c', 'print("x")'],
                           dict(os.environ), os.path.join(night, 'run.log'))
    assert victim.read_text() == 'precious\n'


def test_the_atomic_writer_uses_no_fixed_name_and_keeps_no_partial(tmp_path):
    path = tmp_path / 'f.json'
    for name in ('f.json.tmp', '.f.json.tmp'):
        os.symlink(tmp_path / 'victim', tmp_path / name)
    safefile.write_json(str(path), {'a': 1})
    assert json.loads(path.read_text()) == {'a': 1}
    assert not (tmp_path / 'victim').exists()
    with pytest.raises(TypeError):
        safefile.write_json(str(path), {'a': object()})
    assert json.loads(path.read_text()) == {'a': 1}      # the old file
    assert sorted(os.listdir(tmp_path)) == ['.f.json.tmp', 'f.json',
                                            'f.json.tmp']


# -- 6. control characters and length: one clean line to every sink ----------

def standin_bin(tmp_path):
    """Stand-ins of scontrol and logger that record their argv exactly."""
    b = tmp_path / 'slurmbin'
    b.mkdir()
    calls = tmp_path / 'calls.jsonl'
    for tool in ('scontrol', 'logger'):
        (b / tool).write_text(
            f'#!{sys.executable}\nimport json, sys\n'
            f'with open({str(calls)!r}, "a") as fp:\n'
            f'    fp.write(json.dumps([{tool!r}] + sys.argv[1:]) + "\\n")\n')
        (b / tool).chmod(0o755)
    return b, calls


def calls_of(calls):
    return [json.loads(x) for x in calls.read_text().splitlines()] \
        if calls.exists() else []


def assert_clean(text, cap=REASON_MAX):
    assert not CONTROL.search(text), repr(text)
    assert len(text) <= cap, (len(text), text)


def evil_replay(tmp_path):
    """The real intra capture, with the evil WARN in a rank's debug log."""
    d = tmp_path / 'replay'
    shutil.copytree(os.path.join(CAP, 'intra'), d / 'evil')
    log = sorted((d / 'evil').glob('nccl-debug.*.log'))[0]
    with open(log, 'a') as fp:
        fp.write(EVIL_WARN)
    return {'CCL_HEALTH_REPLAY_DIR': str(d),
            'CCL_HEALTH_REPLAY_INTRA': 'evil'}


def slurm_wrapper(tmp_path, extra):
    b, calls = standin_bin(tmp_path)
    env = environ(tmp_path, extra)
    env['PATH'] = f'{b}{os.pathsep}{env["PATH"]}'
    env.setdefault('CCL_HEALTH_CHECK_LAUNCHER', os.path.join(FAKE, 'launch'))
    env['CCL_HEALTH_SITE_DIR'] = os.path.join(REPO, 'site')
    site_naming_replay(tmp_path / 'prefix-site', env)
    p = subprocess.run([SLURM_WRAPPER], env=env, capture_output=True,
                       text=True, timeout=120, cwd='/')
    assert p.returncode == 0, (p.stdout, p.stderr)
    return calls_of(calls)


def test_a_warn_with_escape_sequences_reaches_scontrol_and_logger_clean(
        tmp_path):
    evidence = tmp_path / 'evidence'
    got = slurm_wrapper(tmp_path, dict(evil_replay(tmp_path),
                                       CCL_HEALTH_EVIDENCE_DIR=str(evidence)))
    drains = [c for c in got if c[:2] == ['scontrol', 'update']]
    logs = [c for c in got if c[0] == 'logger']
    assert len(drains) == 1 and len(logs) == 1, got
    reason = [a for a in drains[0] if a.startswith('reason=')][0]
    reason = reason[len('reason='):]
    # "ccl-health: " + the hook's line after "UNHEALTHY: "
    assert_clean(reason, REASON_MAX + 1)
    assert reason.startswith('ccl-health: ') and 'crash' in reason
    assert 'owned' not in reason            # the OSC's title is gone
    line = logs[0][-1]
    assert_clean(line)
    assert line.startswith('UNHEALTHY: ')
    # 7. the log the reason names is there after the hook ended
    named = re.search(r' in (/\S+?):? ', reason).group(1)
    assert named.startswith(str(evidence) + os.sep), reason
    assert os.path.isfile(named), named
    assert EVIL_WARN.split('NCCL WARN ')[1][:20] in open(named).read()
    kept = os.path.relpath(named, evidence).split(os.sep)[0]
    assert kept.startswith(keep.PREFIX)
    assert list((evidence / kept).glob('*/output.txt'))


def test_a_5kb_reason_with_escapes_reaches_logger_capped(tmp_path):
    launcher = '/nonexistent/\x1b[31mlaunch' + 'A' * 5000
    got = slurm_wrapper(tmp_path, {'CCL_HEALTH_CHECK_LAUNCHER': launcher})
    assert not [c for c in got if c[:2] == ['scontrol', 'update']], got   # not a fault
    line = [c for c in got if c[0] == 'logger'][0][-1]
    assert line.startswith('COULD-NOT-CHECK: ') and 'AAAA' in line, line
    assert_clean(line)
    assert line.endswith('...')


def test_the_fleets_drain_reason_is_clean_and_capped(tmp_path, monkeypatch):
    b, calls = standin_bin(tmp_path)
    monkeypatch.setenv('PATH', f'{b}{os.pathsep}{os.environ["PATH"]}')
    why = ('n01: crash: ' + EVIL_WARN + '\x00\x9b2J' + 'B' * 5000)
    drained, errors = slurm.drain(['n01'], {'n01': why})
    assert drained == ['n01'] and not errors
    argv = calls_of(calls)[0]
    reason = argv[-1][len('reason='):]
    assert argv[:4] == ['scontrol', 'update', 'nodename=n01', 'state=drain']
    assert reason.startswith('ccl-health: n01: crash: ')
    assert_clean(reason)
    assert len(reason) == REASON_MAX and reason.endswith('...')


@pytest.mark.parametrize('text,want', [
    ('a\x1b[1;31mred\x1b[0m b', 'ared b'),
    ('x\x1b]0;title\x07y', 'xy'),
    ('x\x1b]8;;http://e\x1b\\link\x1b]8;;\x1b\\y', 'xlinky'),
    ('one\r\ntwo\tthree\x0bfour', 'one two three four'),
    ('nul\x00bel\x07del\x7fc1\x85\x9b2Jz', 'nulbeldelc1z'),
    ('  spaced   out  ', 'spaced out'),
    ('µs ≥ 1 GB/s', 'µs ≥ 1 GB/s'),
])
def test_clean_strips_control_characters(text, want):
    assert clean(text) == want


def test_clean_caps_the_length():
    assert clean('x' * 300) == 'x' * (REASON_MAX - 3) + '...'
    assert clean('y' * REASON_MAX) == 'y' * REASON_MAX
    assert clean('z' * 5000, None) == 'z' * 5000


# -- 7. evidence kept, bounded, oldest removed first --------------------------

def old_evidence(root, n, size=0, first=1000):
    """``n`` kept checks of earlier runs, oldest first."""
    paths = []
    for i in range(n):
        d = root / f'{keep.PREFIX}2020010{i}T000000-old{i}'
        (d / 'probe-x').mkdir(parents=True)
        (d / 'probe-x' / 'output.txt').write_bytes(b'x' * size)
        os.utime(d, (first + i, first + i))
        paths.append(d)
    return paths


def test_old_evidence_is_pruned_past_the_count_oldest_first(tmp_path):
    evidence = tmp_path / 'evidence'
    old = old_evidence(evidence, 6)
    foreign = evidence / f'{keep.PREFIX}20200101T000000-theirs'
    foreign.mkdir()
    os.utime(foreign, (1, 1))
    if os.getuid() == 0:
        os.chown(foreign, other_user().pw_uid, -1)
    env = environ(tmp_path, dict(evil_replay(tmp_path),
                                 CCL_HEALTH_EVIDENCE_DIR=str(evidence),
                                 CCL_HEALTH_EVIDENCE_KEEP='3'))
    p = subprocess.run(HOOK + STD + ['--no-record', '--json',
                                     str(tmp_path / 'd.json')],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, (p.stdout, p.stderr)
    doc = json.loads((tmp_path / 'd.json').read_text())
    new = doc['evidence']
    assert os.path.isdir(new) and new in p.stdout
    mine = sorted(d for d in os.listdir(evidence)
                  if d.startswith(keep.PREFIX) and 'theirs' not in d)
    assert len(mine) == 3
    # the two newest of the old ones stay, with the new one
    assert set(mine) == {old[4].name, old[5].name, os.path.basename(new)}
    # another user's folder is never ours to remove
    assert foreign.is_dir() or os.getuid() != 0


def test_old_evidence_is_pruned_past_the_size(tmp_path):
    root = tmp_path / 'evidence'
    old = old_evidence(root, 5, size=1 << 20)
    newest = old[-1]
    removed = keep.prune(str(root), keep=20, max_bytes=(5 << 20) // 2,
                         spare=str(old[0]))
    # the oldest went first, but the one spared (just kept) stays
    assert removed == [str(p) for p in old[1:4]]
    assert sorted(os.listdir(root)) == [old[0].name, newest.name]


def test_a_healthy_check_keeps_nothing(tmp_path):
    evidence = tmp_path / 'evidence'
    env = environ(tmp_path, {'CCL_HEALTH_EVIDENCE_DIR': str(evidence)})
    p = subprocess.run(HOOK + STD + ['--no-record'], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert os.listdir(evidence) == []


@pytest.mark.parametrize('bad', ['another-users', 'open-777', 'link'])
def test_without_a_safe_evidence_folder_the_line_names_no_path(
        tmp_path, shared, bad):
    evidence = os.path.join(shared, 'evidence')
    if bad == 'another-users':
        as_other('mkdir', '-m', '755', evidence)
    elif bad == 'open-777':
        os.mkdir(evidence)
        os.chmod(evidence, 0o777)
    else:
        os.mkdir(os.path.join(shared, 'elsewhere'))
        os.symlink(os.path.join(shared, 'elsewhere'), evidence)
    tmp = tmp_path / 'tmp'
    tmp.mkdir()
    env = environ(tmp_path, dict(evil_replay(tmp_path), TMPDIR=str(tmp),
                                 CCL_HEALTH_EVIDENCE_DIR=evidence))
    p = subprocess.run(HOOK + STD + ['--no-record', '--json',
                                     str(tmp_path / 'd.json')],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, (p.stdout, p.stderr)
    # the log by its file name only: no path of a folder that is gone
    assert re.search(r'in nccl-debug\.[^/\s]+\.log', p.stdout), p.stdout
    assert str(tmp) not in p.stdout and shared not in p.stdout
    doc = json.loads((tmp_path / 'd.json').read_text())
    assert doc['evidence'].startswith('not kept: ') and 'not used' in \
        doc['evidence'], doc['evidence']
    assert os.listdir(tmp) == []
    assert not [f for f in os.listdir(os.path.realpath(evidence))
                if f.startswith(keep.PREFIX)]


def test_the_wrappers_own_line_is_clean_and_capped(tmp_path):
    """scripts/ccl-health-check's own COULD-NOT-CHECK line (a hook that
    printed no verdict): the last stderr line, cleaned in the shell."""
    here = tmp_path / 'suite'
    (here / 'scripts').mkdir(parents=True)
    shutil.copy(os.path.join(REPO, 'scripts', 'ccl-health-check'),
                here / 'scripts')
    py = here / '.venv' / 'bin' / 'python'
    py.parent.mkdir(parents=True)
    py.write_text('#!/bin/sh\nprintf "\\033[2J\\033[31mboom\\rX\\001 %s\\n" '
                  '"$(head -c 4000 /dev/zero | tr "\\0" C)" >&2\nexit 3\n')
    py.chmod(0o755)
    p = subprocess.run([str(here / 'scripts' / 'ccl-health-check')],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    line = p.stdout.rstrip('\n')
    assert '\n' not in line and line.startswith('COULD-NOT-CHECK: ')
    assert_clean(line)
    assert 'boom' in line and 'CCC' in line


def test_a_mail_line_keeps_its_indent():
    assert clean('  CRASH \x1b[31mx\x1b[0m:  a\tb\r', None, squeeze=False) \
        == '  CRASH x:  a b'
