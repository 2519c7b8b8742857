"""Issue 21, 5: pyproject.toml is the single source of the dependencies
(scripts/_venv.sh installs what scripts/_deps.py reads from it), the test
extra runs the suite, the version is written once, every command is a
console script, and NVML is an extra that is imported only when read."""

import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, 'scripts'))
import _deps  # noqa: E402

PYPROJECT = os.path.join(REPO, 'pyproject.toml')


def test_no_second_list_of_requirements():
    assert not [f for f in os.listdir(REPO)
                if re.match(r'requirements.*\.txt$', f)]
    for script in ('run', 'test', 'report', 'calibrate', 'explain',
                   'fleet'):
        text = open(os.path.join(REPO, 'scripts', script)).read()
        assert 'requirements' not in text, script


def test_the_lists_read_without_tomllib_as_with_it():
    tomllib = pytest.importorskip('tomllib')
    text = open(PYPROJECT).read()
    doc = tomllib.loads(text)['project']
    assert _deps._lists(text) == (doc['dependencies'],
                                  doc['optional-dependencies'])


def _names(reqs):
    return {re.split(r'[\[<>=!~; ]', r, 1)[0].lower() for r in reqs}


def test_extras():
    base = _names(_deps.requirements([]))
    assert base == {'pyyaml', 'jsonschema', 'ruamel.yaml'}
    assert 'nvidia-ml-py' in _names(_deps.requirements(['nvidia']))
    test = _names(_deps.requirements(['test']))
    # the suite's own imports: ReFrame, the report, PostgreSQL, hypothesis
    assert {'pytest', 'hypothesis', 'psycopg', 'reframe-hpc', 'pandas',
            'matplotlib', 'jinja2', 'tabulate'} <= test
    with pytest.raises(SystemExit):
        _deps.requirements(['no-such-extra'])


def test_every_test_import_is_installed_by_the_test_extra():
    """What the tests import from outside the standard library and this
    project is a requirement of the test extra."""
    test = _names(_deps.requirements(['test']))
    dist = {'yaml': 'pyyaml', 'ruamel': 'ruamel.yaml', 'reframe':
            'reframe-hpc', 'pynvml': 'nvidia-ml-py',
            'PIL': 'matplotlib'}          # Pillow comes with matplotlib
    local = {'ccl_health', 'conftest', 'builders', '_deps',
             'test_reframe_replay', 'db_gen',
             'test_site_dryrun', 'test_health_hook', 'test_fleet_cli',
             'test_history', 'test_calibrate', 'torch', 'numpy',
             'helpers'}
    # the tests' own helper modules and the benchmarks' they import
    local |= {f[:-3] for d in ('tests', 'benchmarks')
              for f in os.listdir(os.path.join(REPO, d)) if f.endswith('.py')}
    # and the builders of fixtures (tests/fixtures/*/*.py), run by tests
    local |= {f[:-3] for d, _, fs in os.walk(os.path.join(REPO, 'tests',
                                                         'fixtures'))
              for f in fs if f.endswith('.py')}
    found = set()
    for f in os.listdir(os.path.join(REPO, 'tests')) + [
            os.path.join('helpers', h) for h in os.listdir(
                os.path.join(REPO, 'tests', 'helpers'))]:
        if f.endswith('.py'):
            text = open(os.path.join(REPO, 'tests', f)).read()
            for a, b in re.findall(r'^\s*from ([A-Za-z_]\w*)[\w.]* import '
                                   r'|^\s*import ([A-Za-z_]\w*)', text,
                                   re.M):
                found.add(a or b)
            found |= set(re.findall(r"importorskip\('([A-Za-z_]\w*)",
                                    text))
    std = set(sys.stdlib_module_names)
    missing = {dist.get(m, m) for m in found - std - local
               if not m.startswith('test_')} - test
    assert not missing, missing


def test_the_version_is_written_once():
    import ccl_health
    text = open(PYPROJECT).read()
    assert not re.search(r'^version\s*=\s*"', text, re.M)
    assert 'dynamic = ["version"]' in text
    assert 'version = {attr = "ccl_health.__version__"}' in text
    assert re.match(r'^\d+\.\d+\.\d+', ccl_health.__version__)


def test_every_command_is_a_console_script():
    text = open(PYPROJECT).read()
    for name in ('ccl-health', 'ccl-health-run', 'ccl-health-report',
                 'ccl-health-calibrate', 'ccl-health-check',
                 'ccl-health-explain', 'ccl-health-fleet'):
        assert re.search(rf'^{name} = "ccl_health\.[\w.]+:\w+"$', text,
                         re.M), name
    p = subprocess.run([sys.executable, '-c', 'from ccl_health import '
                        'console; raise SystemExit(console.fleet(["--help"]))'],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0 and 'usage: ccl-health-fleet' in p.stdout


def test_nvml_is_imported_only_when_read():
    code = ('import sys; import ccl_health.hook.check, '
            'ccl_health.evidence.nodestate, ccl_health.cli, '
            'ccl_health.fleetcli; print("pynvml" in sys.modules)')
    p = subprocess.run([sys.executable, '-c', code], cwd=REPO,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == 'False'


def test_venv_script_installs_from_pyproject(tmp_path):
    """scripts/_venv.sh hands pip the list scripts/_deps.py reads (a pip
    stand-in records it); a second call with the same extras does nothing."""
    venv = tmp_path / 'venv'
    (venv / 'bin').mkdir(parents=True)
    log = tmp_path / 'pip.log'
    (venv / 'bin' / 'python').write_text(
        '#!/bin/bash\n'
        'if [ "$1" = -m ] && [ "$2" = pip ]; then\n'
        f'  for a in "$@"; do case $a in *.txt) cat "$a" >> {log};; esac; '
        'done; exit 0; fi\n'
        f'if [ "$1" = -c ]; then echo {tmp_path}/sp; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n')
    (venv / 'bin' / 'python').chmod(0o755)
    (tmp_path / 'sp').mkdir()
    env = dict(os.environ, CCL_HEALTH_VENV=str(venv))
    cmd = f'source {REPO}/scripts/_venv.sh && ccl_venv test'
    for _ in range(2):
        p = subprocess.run(['bash', '-c', cmd], env=env, capture_output=True,
                           text=True)
        assert p.returncode == 0, p.stderr
    assert log.read_text().split() == _deps.requirements(['test'])


@pytest.mark.system
def test_the_venvs_parent_packages_survive_crons_python(tmp_path):
    """.venv made from a python3 that is itself a virtual environment (a
    site's `module load python`, its PyTorch env) sees that environment's
    packages; a later call from cron, NHC or slurmd, whose PATH finds
    another python3 (the system's, no virtual environment), keeps them.
    It wrote the parent list again on every call, from whichever python3
    came first on PATH: under cron it was emptied, and the nightly found
    no ReFrame in a .venv that had worked at set-up."""
    import site
    parent = sys.executable                    # this venv's Python
    system = os.path.join(sys.base_prefix, 'bin', 'python3')
    if sys.prefix == sys.base_prefix or not os.path.exists(system):
        pytest.skip('the tests do not run in a virtual environment')
    venv = tmp_path / 'my checkout' / '.venv'
    env = dict(os.environ, CCL_HEALTH_VENV=str(venv),
               CCL_HEALTH_PYTHON=parent, PIP_NO_INDEX='1')
    cmd = f'source {shlex.quote(REPO)}/scripts/_venv.sh && ccl_venv reframe'
    check = [str(venv / 'bin' / 'python'), '-c', 'import reframe']
    for python in (parent, system):            # set-up, then cron's call
        p = subprocess.run(['bash', '-c', cmd], env=dict(
            env, CCL_HEALTH_PYTHON=python), capture_output=True, text=True,
            timeout=300)
        assert p.returncode == 0, p.stderr
        [pth] = venv.glob('lib/python*/site-packages/'
                          'zz-ccl-health-parent.pth')
        assert pth.read_text().splitlines() == site.getsitepackages()
        q = subprocess.run(check, capture_output=True, text=True, timeout=60)
        assert q.returncode == 0, (python, q.stderr)
