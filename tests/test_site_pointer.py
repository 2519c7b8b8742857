"""The site is found the same way by every entry point, with an empty
environment too (issue 38, items 2, 4, 5): ``scripts/init-site DIR`` writes
the site pointer (``<checkout>/site.conf``), which the commands, the
nightly, the hook and both wrappers read; the hook never judges a node with
another site's or another system's references (no single host-pattern match
is COULD-NOT-CHECK, exit 2); the wrappers init-site copies find the hook
where they are copied to, and say so in one line, exit 2, when they cannot;
the rehearsal works with init-site's exports in the environment.

The empty environment is ``env -i`` with only the tests' stand-ins for the
hardware (a fake ``nvidia-smi`` on PATH, a PCI bus with two GPUs, the host
name): nothing of the suite is named there."""

import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import REPO
from helpers.node import FAKE, REPLAY, SYSFS_GPU
from helpers.checkout import BASE_PATH, init_site, make_checkout
from helpers.nhc import nhc  # noqa: F401  (the real NHC, built)
from helpers.slurmrecords import record


@pytest.fixture
def checkout(tmp_path):
    """A checkout of its own (its parts linked from this one, its .venv
    this one's), so that init-site writes ITS site.conf, never this
    checkout's.  Its commands are started from it (``python -m`` imports
    the package of the folder it starts in; the hook's wrapper puts its
    own checkout first)."""
    return make_checkout(tmp_path)


def empty_env(host='gpu001', **extra):
    """``env -i`` plus the stand-ins of a node with two GPUs."""
    env = {'PATH': f'{FAKE}:{BASE_PATH}', 'CCL_HEALTH_SYSFS': SYSFS_GPU,
           'CCL_HEALTH_HOSTNAME': host}
    env.update(extra)
    return env


def a_site(checkout, tmp_path, hostnames, *args, prefix=True):
    """A site made by init-site outside the checkout, from `local`: its
    system's host patterns ``hostnames``, its site file naming the
    launcher and (``prefix``) the nccl-tests to run (the replay
    stand-in)."""
    site = tmp_path / 'mysite'
    p = init_site(checkout, site, '--from', 'local', *args)
    conf = site / 'config' / 'systems' / 'local.py'
    text = conf.read_text()
    assert "'hostnames': ['.*']," in text
    conf.write_text(text.replace("'hostnames': ['.*'],",
                                 f"'hostnames': {hostnames!r},"))
    yml = site / 'site' / 'local.yaml'
    text = yml.read_text()
    text = text.replace('  launcher: mpirun --bind-to none -np\n',
                        f'  launcher: {FAKE}/launch\n', 1)
    if prefix:
        text = text.replace('build:\n', f'build:\n  nccl_tests:\n    '
                            f'prefix: {REPLAY}\n', 1)
    yml.write_text(text)
    return site, p


def hook(checkout, env, *args):
    p = subprocess.run([str(checkout / 'scripts' / 'ccl-health-check'),
                        *args], env=env, capture_output=True, text=True,
                       timeout=120, cwd='/')
    lines = p.stdout.splitlines()
    assert len(lines) == 1, (p.returncode, p.stdout, p.stderr)
    return p.returncode, lines[0]


def test_init_site_writes_the_pointer_of_its_checkout(checkout, tmp_path):
    site, p = a_site(checkout, tmp_path, [r'gpu\d+'])
    pointer = checkout / 'site.conf'
    assert re.search(rf'^dir = {re.escape(str(site))}$',
                     pointer.read_text(), re.M)
    assert re.search(r'^cache = /\S+$', pointer.read_text(), re.M)
    assert f'{pointer} names {site}' in p.stdout
    # this checkout's own pointer is untouched
    assert not os.path.exists(os.path.join(REPO, 'site.conf')) or \
        str(site) not in open(os.path.join(REPO, 'site.conf')).read()
    # a second site needs --force to take the pointer over
    q = subprocess.run([str(checkout / 'scripts' / 'init-site'),
                        str(tmp_path / 'other')], env={'PATH': BASE_PATH},
                       capture_output=True, text=True, timeout=120,
                       cwd=str(checkout))
    assert q.returncode == 2 and 'Traceback' not in q.stderr
    assert f'names the site directory {site} already' in q.stderr


def test_the_hook_finds_the_site_with_an_empty_environment(checkout,
                                                           tmp_path):
    """slurmd / NHC start the hook with nothing of the profile: the site
    made by init-site outside the checkout is found through the pointer
    and its system judges the node; without the pointer the same node is
    the shipped `local` system's, named as such."""
    site, _ = a_site(checkout, tmp_path, [r'gpu\d+'])
    rc, line = hook(checkout, empty_env())
    assert rc == 0 and line.startswith('HEALTHY: '), line
    assert 'on local:gpu' in line, line
    # a host its patterns do not match: never the catch-all, never a
    # verdict on the node
    rc, line = hook(checkout, empty_env(host='login07'))
    assert rc == 2, line
    assert line.startswith("COULD-NOT-CHECK: host name 'login07' matches "
                           f"no system of {site}/config"), line


def test_the_hook_runs_the_build_of_the_sites_cache(checkout, tmp_path):
    """The build cache is the site's (``init-site --cache``, on a shared
    filesystem), not the home of whoever runs the hook (NHC's root): it
    said COULD-NOT-CHECK: no nccl-tests build in /root/.cache/..."""
    from ccl_health.buildcache import STAMP
    shared = tmp_path / 'shared' / 'builds'
    a_site(checkout, tmp_path, [r'gpu\d+'], '--cache', str(shared),
           prefix=False)
    assert f'cache = {shared}\n' in (checkout / 'site.conf').read_text()
    build = shared / 'nccl-tests-2.19.6-0123456789ab'
    build.mkdir(parents=True)
    for sub in ('bin', 'captures'):            # the replay stand-in's
        os.symlink(os.path.join(REPLAY, sub), build / sub)
    (build / STAMP).write_text('')
    rc, line = hook(checkout, empty_env())
    assert rc == 0 and line.startswith('HEALTHY: '), line


def test_local_never_matches_a_node_of_a_configured_site(checkout,
                                                         tmp_path):
    """The site's copy still holds `local` with its ``.*``: on a
    configured site it is no host-name match (the shipped H200 figures
    would drain every A100 node); named, it is used."""
    a_site(checkout, tmp_path, ['.*'])
    rc, line = hook(checkout, empty_env())
    assert rc == 2 and line.startswith(
        "COULD-NOT-CHECK: host name 'gpu001' matches no system of "), line
    assert "local matches any host and is no match on a site's own " \
        "configuration" in line, line
    rc, line = hook(checkout, empty_env(CCL_HEALTH_SYSTEM='local'))
    assert rc == 0 and line.startswith('HEALTHY: '), line


def test_no_site_and_several_matching_systems_could_not_check(checkout):
    """No site configured, a LUMI-G node (nid005273, two GPUs answering):
    Perlmutter's and LUMI's compute nodes have the same names, so neither
    system's references judge it (it said UNHEALTHY: missing GPU ... of
    perlmutter:gpu)."""
    assert not (checkout / 'site.conf').exists()
    rc, line = hook(checkout, empty_env(host='nid005273'))
    assert rc == 2, line
    assert line.startswith("COULD-NOT-CHECK: ambiguous: host name "
                           "'nid005273' matches lumi ("), line
    assert 'perlmutter (' in line and 'CCL_HEALTH_SYSTEM' in line, line


def test_a_broken_pointer_could_not_check(checkout, tmp_path):
    (checkout / 'site.conf').write_text(f'dir = {tmp_path}/gone\n')
    rc, line = hook(checkout, empty_env())
    assert rc == 2 and line == (
        f'COULD-NOT-CHECK: {checkout}/site.conf: dir = {tmp_path}/gone: no '
        f'such folder (the site directory scripts/init-site made)'), line


# -- the wrappers init-site copies --------------------------------------------

def _slurm_tools(tmp_path):
    """Stand-in scontrol and logger recording their calls (``scontrol
    update`` and ``logger``; ``scontrol -o show node`` answers with Slurm
    22.05's record of an idle node with two GPUs in its GRES)."""
    b = tmp_path / 'slurmbin'
    b.mkdir(exist_ok=True)
    calls = tmp_path / 'calls'
    (tmp_path / 'node.txt').write_text(record('gpu001', 'IDLE', 'gpu:2',
                                              'gpu'))
    (b / 'scontrol').write_text(
        f'#!/bin/sh\ncase "$*" in "-o show node"*) cat {tmp_path}/node.txt;'
        f' exit 0 ;; esac\necho "scontrol $*" >> {calls}\n')
    (b / 'logger').write_text(f'#!/bin/sh\necho "logger $*" >> {calls}\n')
    for tool in ('scontrol', 'logger'):
        (b / tool).chmod(0o755)
    return b, calls


def test_the_slurm_wrapper_copy_works_where_it_is(checkout, tmp_path):
    """HealthCheckProgram=<site>/site/slurm/healthcheck.sh, started as
    slurmd starts it (its environment: SLURMD_NODENAME, nothing of the
    profile): the copy finds this install's hook, which finds the site."""
    site, _ = a_site(checkout, tmp_path, [r'gpu\d+'])
    b, calls = _slurm_tools(tmp_path)
    wrapper = site / 'site' / 'slurm' / 'healthcheck.sh'
    env = empty_env(PATH=f'{b}:{FAKE}:{BASE_PATH}', SLURMD_NODENAME='gpu001')
    p = subprocess.run([str(wrapper)], env=env, capture_output=True,
                       text=True, timeout=120, cwd='/')
    assert p.returncode == 0, p.stdout + p.stderr
    got = calls.read_text()
    assert got.startswith('logger -t ccl-health HEALTHY: ') and \
        'on local:gpu' in got, got
    assert 'scontrol update' not in got


def test_a_wrapper_that_cannot_find_the_hook_says_so(tmp_path):
    """The shipped wrapper copied anywhere without this install named
    (what init-site copied before): one line, exit 2, to syslog too."""
    where = tmp_path / 'x' / 'site' / 'slurm'
    where.mkdir(parents=True)
    shutil.copy(os.path.join(REPO, 'site', 'slurm', 'healthcheck.sh'), where)
    b, calls = _slurm_tools(tmp_path)
    p = subprocess.run([str(where / 'healthcheck.sh')],
                       env={'PATH': f'{b}:{BASE_PATH}'},
                       capture_output=True, text=True, timeout=60, cwd='/')
    assert p.returncode == 2
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        'COULD-NOT-CHECK: no ccl-health hook: none in (no home= in '), lines
    assert calls.read_text() == f'logger -t ccl-health {lines[0]}\n'


def test_the_nhc_check_copy_works_with_nhcs_environment(checkout, tmp_path,
                                                        nhc):
    """The real NHC 1.4.3 with the copy init-site made, its line
    ``* || check_gpu_ccl`` naming nothing: NHC's own environment (no
    CCL_HEALTH_*), the site found through the pointer."""
    site, _ = a_site(checkout, tmp_path, [r'gpu\d+'])
    conf = tmp_path / 'nhc-conf'
    shutil.copytree(nhc / 'etc' / 'nhc' / 'scripts', conf / 'scripts')
    shutil.copy(site / 'site' / 'nhc' / 'ccl_health.nhc', conf / 'scripts')
    (conf / 'nhc.conf').write_text('* || check_gpu_ccl\n')
    env = empty_env()
    cmd = [str(nhc / 'sbin' / 'nhc'), '-c', str(conf / 'nhc.conf'),
           '-l', str(tmp_path / 'nhc.log'), '-t', '30',
           f'CONFDIR={conf}', f'INCDIR={conf}/scripts',
           f'HELPERDIR={nhc}/libexec/nhc', 'NHC_RM=none', 'MARK_OFFLINE=0',
           f'RESULTFILE={tmp_path}/nhc.status', 'DEBUG=1',
           f'PATH={env["PATH"]}']
    p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       timeout=120, cwd='/')
    log = (tmp_path / 'nhc.log').read_text()
    assert p.returncode == 0, p.stdout + p.stderr + log
    assert re.search(r'check_gpu_ccl: HEALTHY: .*on local:gpu', log), log
    # the same NHC on a host of no single system: logged, the node passes
    (checkout / 'site.conf').unlink()
    p = subprocess.run(cmd, env=empty_env(host='nid005273'),
                       capture_output=True, text=True, timeout=120, cwd='/')
    log = (tmp_path / 'nhc.log').read_text()
    assert p.returncode == 0, p.stdout + p.stderr + log
    assert "could not check (exit 2): ambiguous: host name 'nid005273'" \
        in log, log
    assert 'UNHEALTHY' not in log


# -- the rehearsal with init-site's exports -----------------------------------

def test_the_rehearsal_with_the_documented_exports(tmp_path):
    """init-site for a site without `local` (``--from perlmutter``), its
    three exports in the environment: the rehearsal still replays a
    night on the shipped `local` system (it said NOTHING MEASURED, exit 2:
    no configuration entry for the requested system 'local')."""
    site = tmp_path / 'mysite'
    # this checkout's nightly (its .venv is made for it), init-site's
    # pointer in the test's folder
    p = init_site(pathlib.Path(REPO), site, '--from', 'perlmutter', env={
        'PATH': BASE_PATH, 'HOME': str(tmp_path),
        'CCL_HEALTH_SITE_CONF': str(tmp_path / 'site.conf')})
    exports = dict(re.findall(r'^  export (CCL_HEALTH_\w+)=(\S+)$',
                              p.stdout, re.M))
    assert set(exports) == {'CCL_HEALTH_SITE_DIR', 'CCL_HEALTH_REFERENCE_DIR',
                            'CCL_HEALTH_CONFIG_DIR'}
    env = {'PATH': BASE_PATH, 'HOME': str(tmp_path), **exports}
    q = subprocess.run([os.path.join(REPO, 'scripts', 'nightly'), '--rehearse',
                        'healthy', '--output', str(tmp_path / 'out')],
                       env=env, capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path))
    assert q.returncode == 0, q.stdout[-3000:] + q.stderr[-3000:]
    assert 'all clear' in q.stdout, q.stdout


# -- submitting from where sites submit (item 1) ----------------------------

def test_where_the_jobs_go_from_a_host_without_gpus(monkeypatch):
    """The decision: a system whose partitions are batch-scheduled is
    submitted to where its sbatch is (a login node); one whose jobs run on
    this host (`local`, its local scheduler), or where there is no sbatch
    (a laptop rendering a site's scripts), is a dry run."""
    from ccl_health import resources
    from ccl_health.evidence.nodefacts import Gpus
    from ccl_health.evidence.nodefacts import submitted_to
    none = Gpus(count=0, why_none='no GPU found (stand-in)')
    cfg = resources.path('config')
    login = {'sbatch': '/usr/bin/sbatch'}.get
    monkeypatch.delenv('CCL_HEALTH_SCHEDULER', raising=False)

    def where(asked, host, which=login):
        return submitted_to(cfg, asked, host, none, which)
    assert where('perlmutter', 'login31') == (['perlmutter:gpu'], '')
    assert where('frontier:batch', 'x') == (['frontier:batch'], '')
    # by host name, as ReFrame picks the system
    assert where('', 'frontier01234') == (['frontier:batch'], '')
    assert where('', 'login01.perlmutter.nersc.gov') == \
        (['perlmutter:gpu'], '')
    assert where('local', 'x') == ([], '')
    assert where('', 'my-laptop') == ([], '')
    assert where('nosuch', 'x') == ([], '')
    assert where('frontier', 'my-laptop', lambda cmd: None) == (
        [], 'frontier:batch submits with sbatch, which is not on PATH here')
    monkeypatch.setenv('CCL_HEALTH_SCHEDULER', 'squeue')
    assert where('local:gpu', 'x') == (['local:gpu'], '')


def test_the_nightly_from_cron_on_a_login_node_submits(checkout, tmp_path):
    """cron on a login node: no GPU, nothing of the profile (cron's PATH
    with Slurm's commands; CCL_HEALTH_MODULES_SYSTEM=nomod only because
    this test host has no Lmod), the site found through the pointer: the
    sweep's job goes to sbatch (a stand-in that keeps the script and
    refuses it) and the night says so; it said NOTHING MEASURED: no GPU
    found ... scripts/run made a dry run."""
    import yaml
    site = tmp_path / 'mysite'
    init_site(checkout, site, '--from', 'perlmutter')
    doc = yaml.safe_load((site / 'site' / 'perlmutter.yaml').read_text())
    doc['build']['nccl_tests'] = {'prefix': REPLAY}
    (site / 'site' / 'perlmutter.yaml').write_text(yaml.safe_dump(doc))
    b = tmp_path / 'slurmbin'
    b.mkdir()
    (b / 'sbatch').write_text(
        f'#!/bin/sh\necho "sbatch $*" >> {tmp_path}/sbatch.log\n'
        f'cat rfm_job.sh >> {tmp_path}/sbatch.log\n'
        f'echo "sbatch: error: stand-in: not submitted" >&2\nexit 1\n')
    (b / 'sbatch').chmod(0o755)
    env = {'PATH': f'{b}:{BASE_PATH}', 'HOME': str(tmp_path),
           'CCL_HEALTH_MODULES_SYSTEM': 'nomod'}
    p = subprocess.run(
        [str(checkout / '.venv' / 'bin' / 'python'), '-m',
         'ccl_health.nightly', '--system', 'perlmutter', '--partition', 'gpu',
         '--publish', str(tmp_path / 'www'), '--output', str(tmp_path / 'out'),
         '--night', 'n1', '--', '-n', 'AllReduceSweep%transport=intra'],
        env=env, cwd=str(checkout), capture_output=True, text=True,
        timeout=300)
    log = (tmp_path / 'www' / 'nights' / 'n1' / 'run.log').read_text()
    assert re.search(r'^ccl-health: this host has no GPU \(.*\); submitting '
                     r'to perlmutter:gpu ', log, re.M), log[-3000:]
    assert 'made a dry run' not in p.stdout, p.stdout
    job = (tmp_path / 'sbatch.log').read_text()
    assert job.startswith('sbatch rfm_job.sh\n'), job
    assert '#SBATCH -C gpu' in job and 'all_reduce_perf' in job, job
    # the night is recorded and published: the refused job is its news
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.startswith('ccl-health nightly perlmutter:gpu n1: NEW: '
                               '1 new failure'), p.stdout
    assert (tmp_path / 'www' / 'latest').resolve() == \
        tmp_path / 'www' / 'nights' / 'n1'


# -- the shipped systems' host names ------------------------------------------

#: real node names of each shipped machine: login nodes and compute nodes
#: (Frontier: login01-11.frontier.olcf.ornl.gov, frontier00001-10240;
#: Perlmutter: login01-40.perlmutter.nersc.gov, nid001000-nid008xxx;
#: LUMI: uan01-04, ln01-nmn, LUMI-G nid005000-nid007xxx)
REAL_NAMES = {
    'frontier': ['login01.frontier.olcf.ornl.gov',
                 'login11.frontier.olcf.ornl.gov', 'frontier00001',
                 'frontier09408'],
    'perlmutter': ['login01.perlmutter.nersc.gov',
                   'login40.perlmutter.nersc.gov', 'nid001234', 'nid008180'],
    'lumi': ['uan01', 'uan04', 'ln01-nmn', 'nid005273', 'nid007955'],
}
#: the only names two shipped machines share: their compute nodes'
SAME_NAMES = {'perlmutter', 'lumi'}


def _find(config_dir, host, site_configured=False):
    import types
    from ccl_health.evidence.nodefacts import Gpus
    from ccl_health.hook import where
    from ccl_health.hook.settings import CouldNotCheck
    settings = types.SimpleNamespace(config_dir=str(config_dir),
                                     system=None, hostname=host,
                                     site_configured=site_configured)
    try:
        return where.find_system(settings, Gpus())[0]
    except CouldNotCheck as err:
        return str(err)


def test_each_shipped_system_and_the_names_of_its_nodes(tmp_path):
    from ccl_health import resources
    from ccl_health.sitedata.sysconfig import system_files
    shipped = resources.path('config')
    assert {n for n, _ in system_files(shipped)} == set(REAL_NAMES) | \
        {'local'}
    for system, names in REAL_NAMES.items():
        # a site's own copy of this system alone: every node is its own
        alone = tmp_path / system / 'systems'
        alone.mkdir(parents=True)
        shutil.copy(os.path.join(shipped, 'systems', f'{system}.py'), alone)
        for host in names:
            assert _find(alone.parent, host, True) == system, host
        # the shipped configuration: this system's, or where the machines
        # name their nodes alike, ambiguous (never the other's, never
        # `local`'s)
        for host in names:
            got = _find(shipped, host)
            if re.fullmatch(r'nid\d{6}', host):
                assert got.startswith(f'ambiguous: host name {host!r} '
                                      f'matches '), got
                assert {s for s in REAL_NAMES if f'{s} (' in got} == \
                    SAME_NAMES, got
            else:
                assert got == system, (host, got)
    # no shipped machine's name: `local` where no site is configured,
    # nothing on a site's own configuration
    assert _find(shipped, 'my-workstation') == 'local'
    assert _find(shipped, 'gpu001', True).startswith(
        "host name 'gpu001' matches no system of ")
