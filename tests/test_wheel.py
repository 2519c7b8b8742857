"""The installed package, as a site engineer gets it: the wheel built from
this checkout, installed into fresh virtual environments (one with the
``reframe`` and ``report`` extras, one without any), its console scripts run
from a folder outside the checkout.  It must find its configuration, checks,
build recipes, site data and references; install nothing under a top-level
name of its own; honour ``CCL_HEALTH_SITE_DIR`` / ``CCL_HEALTH_REFERENCE_DIR``;
and say in one line which extra a missing part needs.

pip installs the dependencies from its cache or the index; with
``CCL_HEALTH_WHEELS`` set, only from that folder of wheels (offline).
About a minute with a warm pip cache."""

import glob
import os
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

from conftest import REPO

FIXTURES = os.path.join(REPO, 'tests', 'fixtures', 'device')
HEALTH_DB = os.path.join(FIXTURES, 'history-health', 'keep', 'hist.db')
SUITE_DB = os.path.join(FIXTURES, 'real-failures-rerun', 'a.db')
#: what the wheel is built from (a copy: the build leaves build/ behind)
SOURCES = ['pyproject.toml', 'README.md', 'MANIFEST.in', 'scripts',
           'ccl_health', 'config', 'checks',
           'builders', 'site', 'reference']
SCRIPTS = ['ccl-health', 'ccl-health-run', 'ccl-health-report',
           'ccl-health-calibrate', 'ccl-health-check', 'ccl-health-explain',
           'ccl-health-fleet']
TIMES = {}


def _sh(cmd, **kw):
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    key = ' '.join([os.path.basename(str(cmd[0]))] +
                   [str(c) for c in cmd[1:3] if not os.path.isabs(str(c))])
    TIMES[key] = round(TIMES.get(key, 0) + time.monotonic() - t0, 1)
    return p


@pytest.fixture(scope='module', autouse=True)
def _times():
    """What the steps took, told after the module's tests (pytest -s shows
    it): a report, not a test."""
    yield
    print('\nwheel test steps (s):', TIMES)


def _pip_opts():
    opts = ['-q', '--disable-pip-version-check']
    if os.environ.get('CCL_HEALTH_WHEELS'):
        opts += ['--no-index', '--find-links',
                 os.environ['CCL_HEALTH_WHEELS']]
    return opts


@pytest.fixture(scope='module')
def wheel(tmp_path_factory):
    src = tmp_path_factory.mktemp('src')
    for name in SOURCES:
        s = os.path.join(REPO, name)
        if os.path.isdir(s):
            shutil.copytree(s, src / name, ignore=shutil.ignore_patterns(
                '__pycache__', '*.pyc', '*.egg-info'))
        else:
            shutil.copy2(s, src / name)
    out = tmp_path_factory.mktemp('dist')
    # pip's isolated build: setuptools and wheel from its cache or the index
    p = _sh([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '-w',
             str(out), str(src)] + _pip_opts())
    assert p.returncode == 0, p.stdout + p.stderr
    found = glob.glob(str(out / 'ccl_health-*.whl'))
    assert len(found) == 1, found
    return found[0]


def _venv(tmp_path_factory, wheel, extras):
    env_dir = tmp_path_factory.mktemp('venv')
    p = _sh([sys.executable, '-m', 'venv', str(env_dir)])
    assert p.returncode == 0, p.stderr
    py = str(env_dir / 'bin' / 'python')
    p = _sh([py, '-m', 'pip', 'install', wheel + extras] + _pip_opts())
    assert p.returncode == 0, p.stdout + p.stderr
    return env_dir / 'bin'


@pytest.fixture(scope='module')
def venv(tmp_path_factory, wheel):
    return _venv(tmp_path_factory, wheel, '[reframe,report]')


@pytest.fixture(scope='module')
def bare_venv(tmp_path_factory, wheel):
    return _venv(tmp_path_factory, wheel, '')


@pytest.fixture
def elsewhere(tmp_path):
    """A folder outside the checkout, and an environment without the
    test's own settings (nothing of the checkout on PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('CCL_HEALTH_') and k not in (
               'PYTHONPATH', 'VIRTUAL_ENV', 'PYTHONHOME')}
    env['NO_COLOR'] = '1'
    return tmp_path, env


def no_gpus(where, env):
    """A GPU node without its GPU tools, whatever this machine has: no GPU
    tool on PATH (the console scripts start their Python by its full
    path), two GPUs on its PCI bus (tests/fixtures/sysfs/gpu-node: with
    none there it is not a GPU node, SKIPPED)."""
    empty = where / 'no-gpu-tools'
    empty.mkdir(exist_ok=True)
    return dict(env, PATH=str(empty), CCL_HEALTH_SYSFS=os.path.join(
        REPO, 'tests', 'fixtures', 'sysfs', 'gpu-node'))


def run(bindir, script, *args, cwd, env, extra_env=None):
    e = dict(env, **(extra_env or {}))
    return _sh([str(bindir / script), *map(str, args)], cwd=cwd, env=e,
               timeout=300)


def test_the_wheel_carries_the_suite_under_its_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split('/')[0] for n in names}
    assert tops == {'ccl_health', os.path.basename(wheel).split('-py3')[0]
                    + '.dist-info'}, tops        # no top-level builders
    for f in ['config/settings.py', 'config/common.py',
              'config/systems/local.py', 'config/systems/frontier.py',
              'checks/collective_sweep.py', 'checks/node_health.py',
              'builders/sources.yaml', 'builders/nccl_tests.py',
              'builders/src/ccl_health_links.cu', 'builders/src/gpu_compat.h',
              'site/local.yaml', 'site/nhc/ccl_health.nhc',
              'site/slurm/healthcheck.sh', 'reference/local.yaml',
              'reference/frontier.yaml']:
        assert 'ccl_health/_data/' + f in names, f
    assert 'ccl_health/sitedata/schemas/site.schema.json' in names
    assert 'ccl_health/evidence/warn_table.tsv' in names
    assert 'ccl_health/evidence/nodestate/nvml.py' in names        # a sub-package
    assert 'ccl_health/data/patterns/example.csv' in names
    # the nightly's rehearsal: its stand-in and the captures it replays
    for f in ['standin.py', 'scenarios.py', 'captures/healthy-01.out',
              'captures/nccl-debug.vm.1326.log', 'captures/node.json']:
        assert 'ccl_health/rehearsal/' + f in names, f
    entry = zipfile.ZipFile(wheel).read(
        [n for n in names if n.endswith('entry_points.txt')][0]).decode()
    for s in SCRIPTS:
        assert f'\n{s} = ' in entry, s


def test_installed_commands_outside_the_checkout(venv, elsewhere):
    where, env = elsewhere
    site_packages = glob.glob(str(venv.parent / 'lib' / 'python*' /
                                  'site-packages'))[0]
    assert not os.path.exists(os.path.join(site_packages, 'builders'))
    for s in SCRIPTS:
        assert (venv / s).exists(), s

    # a dry run: the shipped configuration, checks and recipes are found
    p = run(venv, 'ccl-health-run', '--dry-run', cwd=where, env=env,
            extra_env={'CCL_HEALTH_ASSUME_GPUS': '2:sm_90'})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert 'dry run rendered' in p.stdout
    jobs = glob.glob(str(where / 'ccl-health-output' / 'stage' / '**' /
                         'rfm_job.sh'), recursive=True)
    assert jobs
    log = (where / 'ccl-health-output' / 'reframe.log').read_text()
    assert os.path.join(site_packages, 'ccl_health', '_data', 'config',
                        'settings.py') in log
    assert REPO not in log                # nothing of the checkout

    # the report on a fixture database
    p = run(venv, 'ccl-health-report', '--db', SUITE_DB, '--out',
            where / 'rep', cwd=where, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert (where / 'rep' / 'index.html').exists()
    p = run(venv, 'ccl-health-report', '--db', HEALTH_DB, 'runs',
            cwd=where, env=env)
    assert p.returncode == 0 and p.stdout.strip(), p.stderr

    # the hook on a machine without GPUs: one line, exit 2
    p = run(venv, 'ccl-health-check', cwd=where, env=no_gpus(where, env))
    assert p.returncode == 2, p.stdout + p.stderr
    assert len(p.stdout.splitlines()) == 1
    assert p.stdout.startswith('COULD-NOT-CHECK: ')

    # calibrate and explain answer
    for s in ('ccl-health-calibrate', 'ccl-health-explain'):
        p = run(venv, s, '--help', cwd=where, env=env)
        assert p.returncode == 0 and p.stdout.startswith('usage: '), s
    assert 'usage: ccl-health-explain ' in p.stdout


def test_a_rehearsal_night_from_the_installed_package(venv, elsewhere):
    """The nightly's rehearsal from the wheel, outside the checkout, on
    a machine without GPUs: the stand-in and the captures are the
    package's own."""
    where, env = elsewhere
    p = _sh([str(venv / 'python'), '-m', 'ccl_health.nightly', '--rehearse',
             'crash'], cwd=where, env=no_gpus(where, env), timeout=300)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.startswith('ccl-health nightly local:gpu (rehearsal: '
                               'crash) ')
    assert '\nCRASH AllReduceSweep' in p.stdout
    log = open(glob.glob(str(where / 'ccl-health-output' / 'rehearsal' /
                             'www' / 'nights' / '*' / 'run.log'))[0]).read()
    assert REPO not in log                # nothing of the checkout


def test_init_site_and_the_installed_commands_honour_it(venv, elsewhere):
    where, env = elsewhere
    mine = where / 'mysite'
    p = run(venv, 'ccl-health', 'init-site', mine, cwd=where, env=env)
    assert p.returncode == 0, p.stderr
    assert f'export CCL_HEALTH_SITE_DIR={mine}/site' in p.stdout
    assert f'export CCL_HEALTH_REFERENCE_DIR={mine}/reference' in p.stdout
    for f in ['site/local.yaml', 'site/frontier.yaml',
              'site/nhc/ccl_health.nhc', 'site/slurm/healthcheck.sh',
              'reference/local.yaml', 'reference/lumi.yaml']:
        assert (mine / f).is_file(), f
    # twice: nothing overwritten unless asked
    p = run(venv, 'ccl-health', 'init-site', mine, cwd=where, env=env)
    assert p.returncode == 2 and '--force' in p.stderr
    assert 'Traceback' not in p.stderr

    # a value of the site folder reaches the rendered job scripts
    local = mine / 'site' / 'local.yaml'
    local.write_text(local.read_text().replace(
        'env:\n', 'env:\n  CCL_HEALTH_FROM_MY_SITE: "yes"\n', 1))
    dirs = {'CCL_HEALTH_SITE_DIR': str(mine / 'site'),
            'CCL_HEALTH_REFERENCE_DIR': str(mine / 'reference'),
            'CCL_HEALTH_ASSUME_GPUS': '2:sm_90'}
    p = run(venv, 'ccl-health-run', '--dry-run', '--output', where / 'o',
            cwd=where, env=env, extra_env=dirs)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    jobs = glob.glob(str(where / 'o' / 'stage' / '**' / 'rfm_job.sh'),
                     recursive=True)
    assert jobs and all('CCL_HEALTH_FROM_MY_SITE' in open(j).read()
                        for j in jobs)

    # an emptied reference folder: explain has nothing to judge against
    case = os.path.join(FIXTURES, 'suite-run', 'keep', 'o-main', 'stage',
                        'local', 'gpu', 'builtin', 'AllReduceSweep_a9fd2800')
    args = (os.path.join(case, 'rfm_job.out'),
            os.path.join(case, 'result.json'),
            *sorted(glob.glob(os.path.join(case, 'nccl-debug.*.log'))),
            '--system', 'local', '--partition', 'gpu', '--transport', 'intra',
            '--exit-status', '0')
    p = run(venv, 'ccl-health-explain', *args, cwd=where, env=env,
            extra_env=dirs)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip().splitlines()[-1].startswith('PASS: ')
    os.remove(mine / 'reference' / 'local.yaml')
    p = run(venv, 'ccl-health-explain', *args, cwd=where, env=env,
            extra_env=dirs)
    assert p.returncode == 2, p.stdout + p.stderr
    assert str(mine / 'reference') in p.stdout


@pytest.mark.parametrize('argv, extra', [
    (['ccl-health', 'db', '--db', SUITE_DB, 'report'], 'report'),
    (['ccl-health-report', '--db', SUITE_DB], 'report'),
    (['ccl-health-run', '--dry-run'], 'reframe'),
    (['ccl-health', 'db', '--db', 'postgresql://nobody@localhost/x', 'runs'],
     'postgres'),
])
def test_a_missing_extra_is_one_line(bare_venv, elsewhere, argv, extra):
    where, env = elsewhere
    p = run(bare_venv, *argv, cwd=where, env=env,
            extra_env={'CCL_HEALTH_ASSUME_GPUS': '2:sm_90'})
    assert p.returncode == 2, p.stdout + p.stderr
    assert 'Traceback' not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert f"'{extra}' extra" in lines[0]
    assert f'pip install "ccl-health[{extra}]"' in lines[0]


def test_the_hook_without_its_extras_still_answers(bare_venv, elsewhere):
    where, env = elsewhere
    p = run(bare_venv, 'ccl-health-check', cwd=where,
            env=no_gpus(where, env))
    assert p.returncode == 2 and p.stdout.startswith('COULD-NOT-CHECK: ')
    assert len(p.stdout.splitlines()) == 1
