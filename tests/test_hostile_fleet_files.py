"""No file is written where another user can point it, and nothing read
back can be swapped (issue 41, class 5, files): the fleet's per-step
files, its node documents, its resume state (``fleet/nodes.json``), and
``scripts/report report --out``.  The second local user is ``nobody``
through ``runuser`` (tests/test_hostile_paths.py): a run folder, a state
file or its folder owned by another user is refused with one line (exit
2); a link planted at a file's name is never written through; a step's
output is read back through the descriptor it was written to."""

import json
import os
import stat
import subprocess
import sys

import pytest

from ccl_health import CclHealthError, safefile
from ccl_health.fleet import resumestate
from ccl_health.fleet.rounds import Step
from ccl_health.fleet.slurmsteps import SlurmScheduler
from conftest import REPO
from helpers.node import hook
from helpers.otheruser import as_other, other_user, plant, shared  # noqa: F401,E501

#: an srun stand-in: drops its options, runs the step's program
SRUN = '#!/bin/sh\nwhile [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"\n'


@pytest.fixture
def srun_path(tmp_path, monkeypatch):
    b = tmp_path / 'srunbin'
    b.mkdir()
    (b / 'srun').write_text(SRUN)
    (b / 'srun').chmod(0o755)
    monkeypatch.setenv('PATH', f'{b}{os.pathsep}{os.environ["PATH"]}')
    return b


def _scheduler(workdir, program, json_path=None):
    json_path = json_path or os.path.join(str(workdir), 'n01.json')
    return SlurmScheduler(str(workdir), 1, lambda node: (program, json_path),
                          lambda nodes: program, {}, poll=0.05)


def _victim(tmp_path):
    victim = tmp_path / 'victim'
    victim.write_text('precious\n')
    os.chmod(victim, 0o644)
    return victim


def test_a_run_folder_of_another_user_is_refused(tmp_path, shared,  # noqa: F811,E501
                                                 srun_path):
    other = other_user()
    victim = _victim(tmp_path)
    run = os.path.join(shared, 'run')
    as_other('mkdir', '-p', os.path.join(run, 'steps'))
    as_other('chmod', '-R', '777', run)
    plant(os.path.join(run, 'steps', '000001-node.out'), victim)
    sched = _scheduler(run, ['echo', 'HEALTHY: forged?'])
    with pytest.raises(CclHealthError, match=f'{run}: not used as the fleet '
                       f'run folder: it is owned by uid {other.pw_uid}'):
        sched.run([Step('node', ('n01',), 10)])
    assert victim.read_text() == 'precious\n'
    assert sorted(os.listdir(os.path.join(run, 'steps'))) == \
        ['000001-node.out']


def test_a_link_at_a_step_file_is_not_written_through(tmp_path, srun_path):
    victim = _victim(tmp_path)
    steps = tmp_path / 'run' / 'steps'
    steps.mkdir(parents=True)
    for ext in ('cmd', 'out', 'err'):
        os.symlink(victim, steps / f'000001-node.{ext}')
    [raw] = _scheduler(tmp_path / 'run', ['echo', 'the output']).run(
        [Step('node', ('n01',), 10)])
    assert raw.stdout == 'the output\n'
    assert victim.read_text() == 'precious\n'
    for ext in ('cmd', 'out', 'err'):
        st = os.lstat(steps / f'000001-node.{ext}')
        assert stat.S_ISREG(st.st_mode), ext


def test_a_step_output_swapped_before_it_is_read_back_is_not_read(
        tmp_path, srun_path):
    # the step writes its output, then a forged file is renamed over the
    # output's name (what the owner of a shared folder could do)
    forged = tmp_path / 'run' / 'forged'
    out = tmp_path / 'run' / 'steps' / '000001-node.out'
    script = (f'echo "UNHEALTHY: isolate: crash"; '
              f'echo "HEALTHY: forged" > {forged}; mv {forged} {out}')
    [raw] = _scheduler(tmp_path / 'run', ['sh', '-c', script]).run(
        [Step('node', ('n01',), 10)])
    assert raw.stdout == 'UNHEALTHY: isolate: crash\n', raw.stdout


def test_a_node_document_of_another_user_is_not_trusted(tmp_path,
                                                        srun_path):
    other = other_user()
    doc = tmp_path / 'run' / 'nodes' / 'n01.json'
    doc.parent.mkdir(parents=True)
    forged = json.dumps({'code': 0, 'verdict': 'pass', 'line': 'HEALTHY: x'})
    script = (f"printf '%s' '{forged}' > {doc}; "
              f"chown {other.pw_uid} {doc}; exit 1")
    [raw] = _scheduler(tmp_path / 'run', ['sh', '-c', script],
                       str(doc)).run([Step('node', ('n01',), 10)])
    assert raw.doc is None and raw.code == 1, raw
    # the same document of this user is read
    [raw] = _scheduler(tmp_path / 'run', ['sh', '-c', script.replace(
        f'chown {other.pw_uid} {doc}; ', '')], str(doc)).run(
        [Step('node', ('n01',), 10)])
    assert raw.doc == json.loads(forged)


# -- the resume state ----------------------------------------------------------

def test_a_state_file_in_another_users_folder_is_refused(shared):  # noqa: F811,E501
    other = other_user()
    out = os.path.join(shared, 'out')
    as_other('mkdir', '-p', os.path.join(out, 'fleet'))
    as_other('sh', '-c', f'echo \'{{"n11": {{"passes": 1}}}}\' > '
             f'{os.path.join(out, "fleet", "nodes.json")}')
    with pytest.raises(CclHealthError, match=f'{out}/fleet: not used as the '
                       f'fleet state folder: it is owned by uid '
                       f'{other.pw_uid}'):
        resumestate.load_state(out)
    with pytest.raises(CclHealthError, match='owned by uid'):
        resumestate.note_drains(out, {'n12': 'ccl-health: x'})


def test_a_state_file_of_another_user_in_our_folder_is_refused(tmp_path):
    other = other_user()
    (tmp_path / 'fleet').mkdir()
    state = tmp_path / 'fleet' / 'nodes.json'
    state.write_text('{"n11": {"passes": 1}}\n')
    os.chown(state, other.pw_uid, other.pw_gid)
    with pytest.raises(CclHealthError, match=f'{state}: not read as the '
                       f'fleet state: it is owned by uid {other.pw_uid}'):
        resumestate.load_state(str(tmp_path))
    os.chown(state, os.getuid(), os.getgid())
    assert resumestate.load_state(str(tmp_path)) == {'n11': {'passes': 1}}
    state.unlink()
    os.symlink(tmp_path / 'elsewhere.json', state)
    (tmp_path / 'elsewhere.json').write_text('{"n11": {"passes": 1}}\n')
    with pytest.raises(CclHealthError, match='symbolic link'):
        resumestate.load_state(str(tmp_path))


def test_fleet_cli_refuses_a_state_of_another_user_with_one_line(tmp_path,
                                                                 shared):  # noqa: F811,E501
    other = other_user()
    out = os.path.join(shared, 'out')
    os.makedirs(out)
    os.chmod(out, 0o777)
    as_other('mkdir', os.path.join(out, 'fleet'))
    p = subprocess.run(
        [sys.executable, '-m', 'ccl_health.fleet', '--simulate',
         os.path.join(REPO, 'site', 'fleet-faults.example.json'),
         '--nodelist', 'n[1-4]', '--output', out],
        env=dict(os.environ, PYTHONPATH=REPO), capture_output=True,
        text=True, timeout=300, cwd=str(tmp_path))
    assert p.returncode == 2, (p.stdout, p.stderr)
    [line] = p.stderr.splitlines()
    assert line.startswith(f'fleet: error: {out}/fleet: not used as the '
                           f'fleet run folder: it is owned by uid '
                           f'{other.pw_uid}'), line


# -- the report page -------------------------------------------------------------

def test_report_out_is_not_written_through_a_planted_link(tmp_path, shared):  # noqa: F811,E501
    victim = _victim(tmp_path)
    out = os.path.join(shared, 'rep')
    os.makedirs(out)
    os.chmod(out, 0o1777)
    plant(os.path.join(out, 'index.html'), victim)
    db = os.path.join(REPO, 'tests', 'fixtures', 'device', 'demo.db')
    if not os.path.exists(db):
        import glob
        db = sorted(p for p in glob.glob(os.path.join(
            REPO, 'tests', 'fixtures', '**', '*.db'), recursive=True)
            if os.path.basename(p) != 'results.db')[0]
    p = subprocess.run(['bash', os.path.join(REPO, 'scripts', 'report'),
                        '--db', db, 'report', '--out', out],
                       capture_output=True, text=True, timeout=300,
                       cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert victim.read_text() == 'precious\n'
    page = os.path.join(out, 'index.html')
    assert stat.S_ISREG(os.lstat(page).st_mode)
    assert '<html' in open(page).read().lower()


def test_own_dir_checks_every_folder_below_the_base(tmp_path):
    base = tmp_path / 'out'
    deep = base / 'fleet' / 'run' / 'nodes'
    assert safefile.own_dir(str(deep), below=str(base)) == str(deep)
    other = other_user()
    os.chown(base / 'fleet', other.pw_uid, other.pw_gid)
    with pytest.raises(CclHealthError, match='fleet: not used'):
        safefile.own_dir(str(deep), 'fleet run folder', below=str(base))
    # the base itself is not this check's
    os.chown(base / 'fleet', os.getuid(), os.getgid())
    os.chown(base, other.pw_uid, other.pw_gid)
    safefile.own_dir(str(deep), below=str(base))


# -- the hook's --json ------------------------------------------------------------

def test_hook_json_at_a_planted_link_never_makes_its_target(tmp_path,
                                                            shared):  # noqa: F811,E501
    target = tmp_path / 'nologin'              # a file whose being there
    link = os.path.join(shared, 'detail.json')  # matters (/etc/nologin)
    plant(link, target)
    rc, line, err = hook(tmp_path, '--json', link)
    assert rc == 0 and line.startswith('HEALTHY: '), (line, err)
    assert not os.path.lexists(target)
    assert stat.S_ISREG(os.lstat(link).st_mode)
    assert json.load(open(link))['verdict'] == 'pass'
