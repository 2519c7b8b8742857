"""The site's path is the tested path: docs/sites.md, docs/nightly.md and
docs/hook.md followed the way a site follows them, not the way the other
tests set things up.  A fresh clone in a folder whose path has a space;
its ``.venv`` made in the set-up shell, whose ``python3`` is a virtual
environment (a site's ``module load python``); ``scripts/init-site
~/mysite`` into a folder outside the checkout; then every later command of
the pages' ```bash blocks, read from the pages now and in their order, as
cron, NHC and slurmd start them: an empty environment (``PATH=/usr/bin:/bin``
and ``HOME``; the variables the line itself sets), none of init-site's
exports, the site found through the pointer alone.  The crontab lines run
as cron runs them (``/bin/sh -c``, from ``HOME``, cron's PATH with Slurm's
folder added as the page says: here a stand-in ``sbatch`` that keeps the job
script and refuses it), from a login node without GPUs.  The hook runs on
the stand-in node (tests/replay/fake-node), through the Slurm wrapper and
the real NHC copies init-site made.

Stand-ins only where this host lacks the thing: ``CCL_HEALTH_MODULES_SYSTEM
=nomod`` for Lmod (as the pages say for a laptop), the site's own
rccl-tests (``build.rccl_tests.prefix``: the replay stand-in) where a
night would build, ReFrame's ``reframe`` script in ``.venv`` (what pip
writes: the clone's ``.venv`` borrows the tests' packages, nothing is
downloaded).  A command of the pages this test does not know fails it."""

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from conftest import REPO
from helpers import doccommands, ibsite
from helpers.checkout import BASE_PATH
from helpers.nhc import nhc  # noqa: F401  (the real NHC, built)
from helpers.node import FAKE, REPLAY, SYSFS_GPU

#: the system tier (tests/conftest.py): a clone, ReFrame runs, nightlies
pytestmark = pytest.mark.system

PAGES = ('sites.md', 'nightly.md', 'hook.md', 'fleet.md')


class Site:
    """The clone, the home, the site made by init-site, and what ran."""

    def __init__(self, root):
        self.root = root
        self.clone = root / 'my checkout' / 'ccl-health'
        self.home = root / 'home'
        self.mine = self.home / 'mysite'
        self.slurmbin = root / 'slurm bin'      # sbatch
        self.syslog = root / 'syslog bin'       # logger
        self.calls = root / 'calls.log'

    def empty_env(self, **extra):
        """``env -i``: cron's, NHC's, slurmd's: nothing of the profile."""
        return {'PATH': BASE_PATH, 'HOME': str(self.home), **extra}

    def run(self, argv, env, cwd=None, timeout=300):
        p = subprocess.run(argv, env=env, cwd=str(cwd or self.clone),
                           capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    """A fresh clone of this commit under a path with a space, and the
    stand-ins of Slurm's commands (they record how they were called)."""
    if not os.path.exists(os.path.join(REPO, '.git')):
        pytest.skip('not a git checkout: nothing to clone')
    s = Site(tmp_path_factory.mktemp('site path'))
    s.clone.parent.mkdir()
    for cmd in (['git', 'clone', '-q', '--no-checkout', REPO, str(s.clone)],
                ['git', '-C', str(s.clone), 'fetch', '-q', REPO, 'HEAD'],
                ['git', '-C', str(s.clone), 'checkout', '-q', 'FETCH_HEAD']):
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    s.home.mkdir()
    for where, tool, rc in ((s.slurmbin, 'sbatch', 1),
                            (s.syslog, 'logger', 0)):
        # sbatch keeps the job script it is given and refuses it
        keep = 'cat "$1" >> "$CALLS"\n' if tool == 'sbatch' else ''
        where.mkdir()
        (where / tool).write_text(
            f'#!/bin/sh\nCALLS={shlex.quote(str(s.calls))}\n'
            f'echo "{tool} $*" >> "$CALLS"\n{keep}'
            + (f'echo "{tool}: error: stand-in: not submitted" >&2\n'
               if rc else '') + f'exit {rc}\n')
        (where / tool).chmod(0o755)
    return s


def _words(site, cmd):
    """The line's own ``VAR=value`` words into the environment, the rest
    the command; ``~/`` the home, in one word as the shell expands it."""
    words = [re.sub(r'^~/', str(site.home) + '/', w)
             for w in shlex.split(cmd)]
    env = site.empty_env()
    if words[:2] == ['env', '-i']:
        words = words[2:]
    while re.match(r'^[A-Z_]+=', words[0]):
        k, v = words.pop(0).split('=', 1)
        env[k] = v
    return words, env


def _init_site(site, cmd, first):
    """The set-up shell: its python3 a virtual environment (this test's),
    which makes the clone's .venv; the pointer is written into the clone;
    a second init-site into the same folder overwrites nothing."""
    words, env = _words(site, cmd)
    env['PATH'] = f'{os.path.dirname(sys.executable)}:{BASE_PATH}'
    code, out = site.run(words, env)
    if not first:
        assert code == 2 and '--force' in out and 'Traceback' not in out, out
        return
    assert code == 0, out
    pointer = (site.clone / 'site.conf').read_text()
    assert f'dir = {site.mine}\n' in pointer, pointer
    assert f'{site.clone}/site.conf names {site.mine} ' in out, out
    # pip's entry point of ReFrame, as `pip install reframe-hpc` in the
    # clone's .venv writes it (with the space in its path: through sh)
    py = site.clone / '.venv' / 'bin' / 'python'
    (py.parent / 'reframe').write_text(
        f"#!/bin/sh\n'''exec' {shlex.quote(str(py))} \"$0\" \"$@\"\n' '''\n"
        'import sys\nfrom reframe.frontend.cli import main\n'
        'sys.exit(main())\n')
    (py.parent / 'reframe').chmod(0o755)


def _scripts_of(out):
    """The job script a dry run names (``e.g. PATH``)."""
    return re.search(r' e\.g\. (/\S+/rfm_job\.sh)\.', out).group(1)


def _sites_page(site, cmd):
    """(argv, env, cwd, exits, what the output must show, a check after)
    of a command of docs/sites.md."""
    if ibsite.SYSTEM in cmd and not (site.mine / 'site' /
                                     f'{ibsite.SYSTEM}.yaml').exists():
        # the page's prose: the closest system's files renamed, the
        # transports its yaml block lists
        ibsite.make_ib_system(site.mine)
    words, env = _words(site, doccommands.placeholders(cmd))
    name = words[0]
    if name == 'source':
        # the shell of the page: .venv active, no export of init-site's
        return (['bash', '-c', f'{cmd} && command -v reframe'],
                dict(env, PATH=f'{BASE_PATH}'), None, {0},
                re.escape(str(site.clone / '.venv' / 'bin' / 'reframe')),
                None)
    if name == 'reframe':
        # a dry run of what the line selects, the site's systems read
        # through the pointer by the clone's config/settings.py
        argv = ['bash', '-c', 'source .venv/bin/activate && exec "$@"', '-']
        argv += ['--dry-run' if w == '-r' else w for w in words]
        # on a GPU node (this host has none: `local` would select nothing)
        env['CCL_HEALTH_ASSUME_GPUS'] = '2:sm_90'
        if 'FleetAcceptance' in words:
            # its steps are srun steps: a Slurm partition, as at a site
            env['CCL_HEALTH_SCHEDULER'] = 'squeue'
        return argv, env, None, {0}, r'Ran [1-9]\d*/\d+ test case', None
    site_file = f'{site.mine}/site/'
    if name == 'scripts/run':
        system = words[-1]
        expect = r'dry run rendered [1-9]\d* job scripts'
        if system in ('frontier', 'perlmutter', ibsite.SYSTEM):
            # the transports the copy does not list, named with the copy
            expect = rf'(?s){expect}.*is not configured for {system}: ' + \
                re.escape(f'{site_file}{system}.yaml')
        account = env.get('CCL_HEALTH_ACCOUNT')

        def each_script(out):
            # "with `#SBATCH -A abc123` in each script"
            if account:
                assert f'#SBATCH -A {account}\n' in open(
                    _scripts_of(out)).read(), out[-2000:]
        return words, env, None, {0}, expect, each_script
    if name == 'scripts/validate':
        return words, env, None, {0}, r'^OK: \d+ system\(s\) \(.*' + (
            ibsite.SYSTEM if '--system' not in words else
            words[words.index('--system') + 1]), None
    if name == 'scripts/fleet':
        return words, env, None, {0}, \
            r'fleet: 16 nodes, transport net-ib,', None
    if name == 'scripts/calibrate':
        # a run's report and database where the page's line reads them
        out = site.clone / 'ccl-health-output'
        if not (out / 'ccl-health.db').exists():
            (out / 'reports').mkdir(parents=True, exist_ok=True)
            shutil.copy(doccommands.REPORT, out / 'reports')
            shutil.copy(os.path.join(doccommands.HIST, 'hist.db'),
                        out / 'ccl-health.db')
        mine = site.mine / 'reference' / 'local.yaml'
        before = mine.read_text()

        def written(out):
            # into the site's copy; the clone's own reference untouched
            assert mine.read_text() != before, out
            assert subprocess.run(['git', 'diff', '--quiet', 'reference'],
                                  cwd=str(site.clone)).returncode == 0
        return words, env, None, {0}, '^' + re.escape(
            f'{mine}: gpu intra all_reduce 1x2 default: updated '), written
    raise AssertionError(f'docs/sites.md: a command this test does not '
                         f'know: {cmd}')


def _nightly_page(site, cmd):
    """A command of docs/nightly.md: the rehearsals in the checkout as a
    person runs them; a crontab line as cron runs it."""
    if cmd.startswith('scripts/nightly --rehearse'):
        words, env = _words(site, cmd)
        scenario = words[-1]
        head = rf'^ccl-health nightly local:gpu \(rehearsal: {scenario}\) ' \
            r'\S+: '
        if scenario == 'healthy':
            return words, env, None, {0}, head + 'all clear', None
        # the crash the scenario makes: a rank's fatal WARN, never the
        # stand-in failing to start (exit 127)
        return words, env, None, {1}, head + r'NEW: 1 new failure.*\n' \
            r'CRASH AllReduceSweep .*NCCL WARN', None
    m = re.match(r'^(\S+\s+){5}', cmd)
    assert m and cmd[0].isdigit(), f'docs/nightly.md: a command this test ' \
        f'does not know: {cmd}'
    line = cmd[m.end():].replace('/opt/ccl-health', shlex.quote(
        str(site.clone)))
    n = len(list(site.root.glob('www-*')))
    www = site.root / f'www-{n}'
    line = line.replace('/srv/www/ccl-health', shlex.quote(str(www)))
    system = re.search(r'--system (\S+)', line).group(1)
    part = re.search(r'--partition (\S+)', line).group(1)
    account = re.search(r'--account (\S+)', line).group(1)
    _own_installation(site, system)
    # cron: sh -c, from HOME, PATH=/usr/bin:/bin with Slurm's folder added
    env = site.empty_env(PATH=f'{site.slurmbin}:{BASE_PATH}',
                         SHELL='/bin/sh', LOGNAME='ccl',
                         CCL_HEALTH_MODULES_SYSTEM='nomod')
    site.calls.write_text('')

    def submitted(out):
        log = next((www / 'nights').iterdir()) / 'run.log'
        assert re.search(rf'^ccl-health: this host has no GPU \(.*\); '
                         rf'submitting to {system}:{part} ', log.read_text(),
                         re.M), log.read_text()[-3000:]
        jobs = site.calls.read_text()
        assert jobs.startswith('sbatch rfm_job.sh\n'), jobs
        assert not _cut_at_the_space(site, jobs), jobs
        assert f'#SBATCH -A {account}\n' in jobs, jobs
        # the site's copy was read: its own installation runs
        assert f' {REPLAY}/bin/all_reduce_perf -g 1 ' in jobs, jobs
        # the jobs run the clone's Python, its path quoted
        assert shlex.quote(str(site.clone / '.venv' / 'bin' / 'python')) \
            in jobs, jobs
        # the database of the folder the line starts in (docs/nightly.md):
        # cron's home, or the checkout after `cd`
        start = site.clone if line.startswith('cd ') else site.home
        assert f'{start}/ccl-health-output/ccl-health.db (performance ' \
            f'database)' in log.read_text(), log.read_text()[-3000:]
    return ['/bin/sh', '-c', line], env, site.home, {1}, \
        rf'^ccl-health nightly {system}:{part} \S+: NEW: [1-9]\d* new ' \
        r'failure', submitted


def _own_installation(site, system):
    """What a site's file names where a night would build: its own
    rccl-tests / nccl-tests (the replay stand-in), its libfabric and no
    plugin (empty installations)."""
    import yaml
    path = site.mine / 'site' / f'{system}.yaml'
    doc = yaml.safe_load(path.read_text())
    tests = 'rccl_tests' if 'rccl' in str(doc['build']) else 'nccl_tests'
    doc['build'][tests] = {'prefix': REPLAY}
    for key in ('libfabric', 'plugin'):
        prefix = site.root / f'no-{key}'
        (prefix / 'lib').mkdir(parents=True, exist_ok=True)
        doc['build'][key] = {**doc['build'].get(key, {}),
                             'prefix': str(prefix)}
    path.write_text(yaml.safe_dump(doc))


def _hook_page(site, cmd):
    """A command of docs/hook.md on the stand-in node named ``login07``
    (a node no system of the site names): the hook reads the site through
    the pointer and says so, never a verdict on the node."""
    words, env = _words(site, cmd)
    env.update(PATH=f'{FAKE}:{BASE_PATH}', CCL_HEALTH_SYSFS=SYSFS_GPU,
               CCL_HEALTH_HOSTNAME='login07')
    assert words[0] == 'scripts/ccl-health-check', \
        f'docs/hook.md: a command this test does not know: {cmd}'
    return words, env, None, {2}, \
        r"\ACOULD-NOT-CHECK: host name 'login07' matches no system of " + \
        re.escape(f'{site.mine}/config') + r'.*\n\Z', None


def _fleet_page(site, cmd):
    """A command of docs/fleet.md in the checkout: the rehearsals; the
    real ones without a Slurm cluster (one line, exit 2, and the rehearsal
    it points at pastes as printed); ReFrame's FleetAcceptance rendered
    for a Slurm partition."""
    words, env = _words(site, cmd)
    if words[0] == 'reframe':
        return _sites_page(site, cmd)
    assert words[0] == 'scripts/fleet', \
        f'docs/fleet.md: a command this test does not know: {cmd}'
    if '--simulate' in words:
        if '--resume' in words:
            return words, env, None, {1}, r'^fleet --resume \(SIMULATED: ' \
                r'no Slurm asked or touched\)', None
        return words, env, None, {1}, r'(?s)fleet: 16 nodes checked.*BAD ' \
            r'n12:.*STRAGGLER n7', None

    def pastes(out):
        said = re.search(r'to rehearse without one: ([^()]*)\)', out)
        assert said, out
        assert shlex.split(said.group(1))[:3] == [
            'scripts/fleet', '--simulate',
            str(site.clone / 'site' / 'fleet-faults.example.json')], out
    return words, env, None, {2}, r'^fleet: error: (sinfo|salloc|scontrol)' \
        r'.*no Slurm cluster answered', pastes


def _run_pages(site, page, cmds):
    for cmd in cmds:
        if cmd.startswith('scripts/init-site '):
            _init_site(site, cmd, first=not (site.clone /
                                             'site.conf').exists())
            continue
        assert (site.clone / 'site.conf').exists(), \
            f'docs/{page}: {cmd}: before scripts/init-site made the site'
        for one in doccommands.expand_optional(cmd):
            argv, env, cwd, exits, expect, after = {
                'sites.md': _sites_page, 'nightly.md': _nightly_page,
                'hook.md': _hook_page, 'fleet.md': _fleet_page}[page](
                    site, one)
            if argv[0].startswith('scripts/'):
                argv[0] = str(site.clone / argv[0])
            t0 = time.time()
            code, out = site.run(argv, env, cwd)
            where = f'docs/{page}: {one}: exit {code}\n{out[-3000:]}'
            assert code in exits, where
            assert re.search(expect, out, re.M), where
            assert 'Traceback' not in out, where
            if after:
                after(out)
            for script in _scripts_since(site, out, t0):
                assert not _cut_at_the_space(site, script.read_text()), \
                    (where, str(script), script.read_text())


def _scripts_since(site, out, t0):
    """The job scripts the command rendered: under the clone's output
    (``reframe -C config/settings.py``) and the stage folder it names."""
    roots = [site.clone / 'ccl-health-output' / 'stage']
    m = re.search(r' e\.g\. (/\S+?/stage)/\S+/rfm_job\.sh\.', out)
    if m:
        roots.append(pathlib.Path(m.group(1)))
    return [f for root in roots for f in root.rglob('rfm_job.sh')
            if f.stat().st_mtime >= t0 - 1]


def _cut_at_the_space(site, text):
    """The words of a job script, as its shell splits them (POSIX
    words: :func:`shlex.split`), that hold a path under the test's folder
    cut at the space of its name."""
    root = str(site.root)
    head = root.split(' ')[0]
    cut = []
    for line in text.splitlines():
        if line.lstrip().startswith('#'):
            continue
        cut += [w for w in shlex.split(line) if head in w and root not in w]
    return cut


def test_the_pages_name_what_this_test_runs():
    """The pages' order, and the site's first command."""
    cmds = [c for p in PAGES for c in doccommands.page_commands(p)]
    assert cmds[0] == 'scripts/init-site ~/mysite', cmds
    assert any(re.match(r'^(\S+\s+){5}\S*/scripts/nightly ', c)
               for c in cmds), cmds
    assert 'env -i scripts/ccl-health-check' in cmds, cmds


def test_sites_page_from_init_site_on(site):
    """docs/sites.md: init-site into ~/mysite, then every command with an
    empty environment: the copy is read (its file named, its new system
    found, its reference calibrated), never the clone's own."""
    _run_pages(site, 'sites.md', doccommands.page_commands('sites.md'))


def test_nightly_page_as_cron_runs_it(site):
    """docs/nightly.md: the rehearsals in the checkout with a space in
    its path, then each crontab line as cron starts it on a login node
    without GPUs: the night's jobs go to sbatch."""
    _init_first(site)
    _run_pages(site, 'nightly.md', doccommands.page_commands('nightly.md'))


def test_fleet_page_in_the_checkout(site):
    """docs/fleet.md in the checkout with a space in its path: the
    rehearsals, the real commands where no Slurm answers, and ReFrame's
    FleetAcceptance job (its script's words whole)."""
    _init_first(site)
    _run_pages(site, 'fleet.md', doccommands.page_commands('fleet.md'))


def test_hook_page_with_an_empty_environment(site, nhc,  # noqa: F811
                                              tmp_path):
    """docs/hook.md: the hook's line in the checkout, with ``env -i``,
    then the copies init-site made: the Slurm wrapper as slurmd starts it
    (its line to logger, nothing drained) and the real NHC with the
    page's lines: ``* || check_gpu_ccl`` of the copy, its node range (the
    check runs on a node of the range only) and the line naming the
    checkout, its path quoted (logged, the node passes)."""
    _init_first(site)
    _run_pages(site, 'hook.md', doccommands.page_commands('hook.md'))
    code, line = site.run([str(site.clone / 'scripts' / 'ccl-health-check')],
                          _hook_page(site, 'env -i scripts/'
                                     'ccl-health-check')[1], '/')
    assert code == 2, line
    # slurmd's start: its PATH with logger (a stand-in that records); no
    # scontrol is called unless the line is UNHEALTHY
    node = _hook_page(site, 'scripts/ccl-health-check')[1]
    node['PATH'] = f'{site.syslog}:{node["PATH"]}'
    site.calls.write_text('')
    code, out = site.run([str(site.mine / 'site' / 'slurm' /
                              'healthcheck.sh')], node, '/')
    assert code == 0 and out == '', out
    assert site.calls.read_text() == f'logger -t ccl-health {line}', \
        site.calls.read_text()
    # NHC's own files where NHC keeps them (a folder without a space)
    conf = tmp_path / 'nhc-conf'
    shutil.copytree(nhc / 'etc' / 'nhc' / 'scripts', conf / 'scripts')
    shutil.copy(site.mine / 'site' / 'nhc' / 'ccl_health.nhc',
                conf / 'scripts')
    env = _hook_page(site, 'scripts/ccl-health-check')[1]
    logged = 'check_gpu_ccl: ccl-health could not check (exit 2): ' + \
        line[len('COULD-NOT-CHECK: '):].rstrip('\n')
    # the page's line for the copy, then its GPU nodes only (its node
    # range, as the page writes it) on one of them and on another node
    page = (pathlib.Path(REPO) / 'docs' / 'hook.md').read_text()
    ranged = re.search(r'`(\{[^}`]+\}) \|\| check_gpu_ccl ', page).group(1)
    # and the page's line naming the checkout (its path quoted, as the
    # page says of a path with a space)
    named = re.search(r'`(\* \|\| check_gpu_ccl /opt/ccl-health)`',
                      page).group(1).replace('/opt/ccl-health', shlex.quote(
                          str(site.clone)))
    for n, (line_, host, runs) in enumerate((
            ('* || check_gpu_ccl', 'login07', True),
            (f'{ranged} || check_gpu_ccl', 'gpu0042', True),
            (f'{ranged} || check_gpu_ccl', 'login07', False),
            (named, 'login07', True))):
        (conf / 'nhc.conf').write_text(f'{line_}\n')
        log = tmp_path / f'nhc-{n}.log'
        code, out = site.run([str(nhc / 'sbin' / 'nhc'), '-c',
                              str(conf / 'nhc.conf'), '-l', str(log),
                              '-t', '30', f'CONFDIR={conf}',
                              f'INCDIR={conf}/scripts',
                              f'HELPERDIR={nhc}/libexec/nhc', 'NHC_RM=none',
                              'MARK_OFFLINE=0', f'HOSTNAME={host}',
                              f'RESULTFILE={tmp_path}/nhc.status',
                              f'PATH={env["PATH"]}'], env, '/')
        assert code == 0, out + log.read_text()
        assert (logged in log.read_text()) == runs, (line_, host,
                                                     log.read_text())


def _init_first(site):
    """A page after sites.md run alone: the site made first, as
    sites.md's first command makes it."""
    if not (site.clone / 'site.conf').exists():
        _init_site(site, doccommands.page_commands('sites.md')[0],
                   first=True)
