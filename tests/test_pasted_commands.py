"""A command the suite prints for a person to paste (the next step after
a first run, the rehearsal a missing Slurm points at, the database a
rehearsal keeps, the pending checks meant for another database) pastes as
printed where its path holds a space: a checkout, a home or an output
folder such as ``/home/me/my checkout``.  The oracle is the shell's own
splitting (:func:`shlex.split`, POSIX words): each path comes back whole."""

import datetime
import io
import os
import re
import shlex
import subprocess

from conftest import REPO
from ccl_health import fleetcli, resources, summary
from ccl_health.db import store
from ccl_health.hook import pending


def _words(text, start):
    """The shell words of the command that begins with ``start`` in
    ``text`` (up to the parenthesis or the line that closes it)."""
    cmd = re.search(re.escape(start) + r"[^()\n]*", text).group(0)
    return shlex.split(cmd)


def test_the_next_step_after_a_first_run(tmp_path):
    db = str(tmp_path / 'my checkout' / 'ccl-health-output' /
             'ccl-health.db')
    cv = summary.CaseVerdict('AllReduceSweep %transport=intra', 'local',
                             'gpu', 'intra', 'no-reference',
                             'no-reference: no reference for ...')
    text = summary.render([cv], db=db)
    words = _words(text, 'scripts/calibrate --db ')
    assert words == ['scripts/calibrate', '--db', db, '--system', 'local',
                     '--partition', 'gpu'], text


def test_the_rehearsal_a_missing_slurm_points_at(tmp_path, monkeypatch,
                                                  capsys):
    site = tmp_path / 'my checkout' / 'site'
    monkeypatch.setattr(resources, 'shipped_site_dir', lambda: str(site))
    bin_ = tmp_path / 'bin'
    bin_.mkdir()
    (bin_ / 'sinfo').write_text(
        '#!/bin/sh\necho "sinfo: fatal: Could not establish a '
        'configuration source" >&2\nexit 1\n')
    (bin_ / 'sinfo').chmod(0o755)
    monkeypatch.setenv('PATH', f'{bin_}:/usr/bin:/bin')
    assert fleetcli.main(['--partition', 'batch']) == 2
    err = capsys.readouterr().err
    words = _words(err, 'scripts/fleet --simulate ')
    assert words == ['scripts/fleet', '--simulate',
                     str(site / 'fleet-faults.example.json'), '--nodelist',
                     'n[1-16]'], err


def test_the_database_a_rehearsal_keeps(tmp_path):
    out = tmp_path / 'my checkout' / 'ccl-health-output'
    rehearsed = out / 'rehearsal' / 'ccl-health.db'
    rehearsed.parent.mkdir(parents=True)
    with store.open_store(str(rehearsed)):
        pass
    env = dict(os.environ, CCL_HEALTH_OUTPUT=str(out))
    env.pop('CCL_HEALTH_DB', None)
    p = subprocess.run(['bash', os.path.join(REPO, 'scripts', 'report'),
                        'failed'], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr
    assert _words(err, 'scripts/report failed --db ') == [
        'scripts/report', 'failed', '--db', str(rehearsed)], err


def test_the_pending_checks_meant_for_another_database(tmp_path):
    other = str(tmp_path / 'my checkout' / 'ccl-health.db')
    folder = str(tmp_path / 'pending')
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec='seconds')
    case = store.CaseRecord('health-1', 'node-health', 'pass', time=when,
                            system='local', partition='gpu', nodes=1,
                            ranks=2, collective='all_reduce',
                            transport='intra', nodelist='gpu001')
    pending.keep(case, folder, 10, 1 << 20, other)
    err = io.StringIO()
    with store.open_store(str(tmp_path / 'here.db')) as db:
        assert pending.ingest(db, folder, err=err) == (0, [])
    assert _words(err.getvalue(), 'scripts/report --db ') == [
        'scripts/report', '--db', os.path.realpath(other), 'ingest',
        '--pending', 'records', 'them'], err.getvalue()
