"""The pages a new site follows, in the order it follows them (issue 38):
docs/sites.md from ``scripts/init-site`` on, then docs/nightly.md, then
docs/hook.md.  Every command of their ```bash blocks runs here, in page
order, in one home whose profile holds the three exports ``init-site``
printed (the environment of every later command, as the page says), and
the site's own system made as the page says before the commands that name
it.  Each command runs as far as this host without GPUs or Slurm allows
(its dry-run form: tests/test_readme_commands.py's ``as_run_here``); a
command that needs GPUs or a real Slurm is skipped with the reason in
:data:`NEEDS`, never silently."""

import pytest
import os
import re
import shlex
import shutil
import subprocess

from helpers import doccommands, ibsite
from conftest import REPO

#: the system tier (tests/conftest.py): the docs' commands in order from a fresh clone: ReFrame runs, nightlies
pytestmark = pytest.mark.system

PAGES = ('sites.md', 'nightly.md', 'hook.md')

#: commands that need GPUs or a real Slurm, and why (matched by regex)
NEEDS = {
    r'^([\d*][\d*,/-]*\s+){5}': 'a crontab line of a Slurm system: the '
    'night submits its jobs there (tests/test_nightly.py runs the line '
    'through a real Slurm)',
}


def sequence():
    return [(page, cmd) for page in PAGES
            for cmd in doccommands.page_commands(page)]


def _work(tmp_path):
    """A folder as a user's (what test_readme_commands' commands read: the
    database and run report captured on GPUs, a bare run's outputs)."""
    out = tmp_path / 'ccl-health-output'
    (out / 'reports').mkdir(parents=True)
    shutil.copy(os.path.join(doccommands.HIST, 'hist.db'),
                out / 'ccl-health.db')
    shutil.copy(doccommands.REPORT, out / 'reports')
    for f in os.listdir(doccommands.CAP):
        shutil.copy(os.path.join(doccommands.CAP, f), tmp_path / f)
    (tmp_path / 'home').mkdir()
    return tmp_path


def _run(argv, env, cwd):
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=600)
    return p.returncode, p.stdout + p.stderr


def _init_site(cmd, home, first):
    """``scripts/init-site ~/mysite ...`` as written: the first makes the
    site (its exports go into the profile); a later one into the same
    folder overwrites nothing and says so (docs/sites.md: "nothing is
    overwritten without --force")."""
    words = cmd.replace('~/', f'{home}/').split()
    words[0] = os.path.join(REPO, words[0])
    env = dict(os.environ, HOME=str(home))
    code, out = _run(words, env, home)
    if first:
        assert code == 0, out
        exports = dict(re.findall(r'^  export (CCL_HEALTH_\w+)=(\S+)$', out,
                                  re.M))
        assert sorted(exports) == ['CCL_HEALTH_CONFIG_DIR',
                                   'CCL_HEALTH_REFERENCE_DIR',
                                   'CCL_HEALTH_SITE_DIR'], out
        return exports
    assert code == 2 and '--force' in out and 'Traceback' not in out, out
    return None


def test_every_command_of_the_pages_is_run_or_needs_gpus_or_slurm():
    cmds = sequence()
    assert cmds[0] == ('sites.md', 'scripts/init-site ~/mysite')
    for page, cmd in cmds:
        ok = cmd.startswith(('scripts/', 'env -i scripts/', 'reframe ',
                             'CCL_HEALTH_',
                             'source .venv/bin/activate')) or \
            any(re.match(k, cmd) for k in NEEDS)
        assert ok, f'{page}: a command this test does not know: {cmd}'
    pages = [p for p, _ in cmds]
    assert pages == sorted(pages, key=PAGES.index)
    for want in ('scripts/run', 'scripts/validate', 'scripts/nightly '
                 '--rehearse', 'scripts/ccl-health-check', 'scripts/fleet'):
        assert any(want in c for _, c in cmds), want


def test_a_new_site_follows_the_pages_in_order(tmp_path, monkeypatch):
    work = _work(tmp_path)
    home = work / 'home'
    monkeypatch.setenv('HOME', str(home))
    # init-site writes the site pointer of the checkout it runs from: this
    # one's goes beside the test's site, never into the repository's
    # (every later test would read it: tests/test_site_pointer.py tests
    # the checkout's own place)
    monkeypatch.setenv('CCL_HEALTH_SITE_CONF', str(work / 'site.conf'))
    for k in ('CCL_HEALTH_DB', 'CCL_HEALTH_SYSTEM', 'CCL_HEALTH_PUBLISH'):
        monkeypatch.delenv(k, raising=False)
    made, done, skipped = False, [], []
    for page, cmd in sequence():
        where = f'docs/{page}: {cmd}'
        need = next((why for k, why in NEEDS.items() if re.match(k, cmd)),
                    None)
        if need:
            skipped.append((where, need))
            continue
        if cmd.startswith('scripts/init-site '):
            exports = _init_site(cmd, home, first=not made)
            if exports:
                # the profile: every later command runs with them
                for k, v in exports.items():
                    monkeypatch.setenv(k, v)
                made = True
            done.append(where)
            continue
        assert made, f'{where}: before scripts/init-site made the site'
        if ibsite.SYSTEM in cmd and not (home / 'mysite' / 'site' /
                                         f'{ibsite.SYSTEM}.yaml').exists():
            # the page's prose: the closest system's files renamed, the
            # transports its yaml block lists
            ibsite.make_ib_system(home / 'mysite')
        for one in doccommands.expand_optional(
                doccommands.placeholders(cmd)):
            code, out, rcs, expect = _as_here(one, work)
            assert code in rcs, f'{where}: exit {code}\n{out[-3000:]}'
            assert re.search(expect, out, re.M), f'{where}:\n{out[-3000:]}'
            assert 'Traceback' not in out, f'{where}:\n{out[-3000:]}'
        done.append(where)
    assert len(done) > 15 and skipped, (done, skipped)
    print('\n'.join([f'ran: {w}' for w in done] +
                    [f'skipped: {w}: {why}' for w, why in skipped]))


def _as_here(cmd, work):
    """(exit, output, expected exits, what the output must show) of one
    command of the pages, run here with this environment (the profile's
    exports in it)."""
    if ibsite.SYSTEM in cmd:
        return _ib_command(cmd, work)
    argv, env, rcs, expect = doccommands.as_run_here(cmd, work)
    env['HOME'] = os.environ['HOME']
    if argv[0].endswith('ccl-health-check'):
        # no GPU here: never a reason to drain
        rcs = {0, 2}
    cwd = work if not argv[0].endswith('reframe') and \
        'scripts/run' not in argv[0] else REPO
    code, out = _run(argv, env, cwd)
    return code, out, rcs, expect


def _ib_command(cmd, work):
    """The commands of docs/sites.md's InfiniBand section, on the system
    made in the site's copy."""
    words = re.sub(r'(?<![\w/])~/', os.environ['HOME'] + '/', cmd)
    env = dict(os.environ, RFM_COLORIZE='n')
    env.pop('CCL_HEALTH_ASSUME_GPUS', None)
    words = shlex.split(words)
    while re.match(r'^[A-Z_]+=', words[0]):
        k, v = words.pop(0).split('=', 1)
        env[k] = v
    words[0] = os.path.join(REPO, words[0])
    name = os.path.basename(words[0])
    if name == 'run':
        at = words.index('--') if '--' in words else len(words)
        words[at:at] = ['--output', str(work / 'ib-run')]
        code, out = _run(words, env, REPO)
        return code, out, {0}, (
            r"(?s)dry run rendered [1-9]\d* job scripts.*PASSED above.*"
            r"\nccl-health: skipped \d+ case\(s\) \(AllReducePluginSweep.*"
            r"\): net-plugin \(the net plugin\) is not configured for "
            + ibsite.SYSTEM)
    if name == 'fleet':
        at = words.index('--simulate') + 1
        words[at] = os.path.join(env['CCL_HEALTH_SITE_DIR'],
                                 os.path.basename(words[at]))
        code, out = _run(words + ['--output', str(work / 'ib-fleet')], env,
                         work)
        return code, out, {0}, r'fleet: 16 nodes, transport net-ib,'
    code, out = _run(words, env, work)
    return code, out, {0}, rf'^OK: 1 system\(s\) \({ibsite.SYSTEM}'
