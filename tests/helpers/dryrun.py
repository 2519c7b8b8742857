"""ReFrame's dry run of every check of a site's system: the job and
build scripts it renders, with Lmod (installed where missing, as root with
apt-get) and the stand-ins of the Cray PE modules
(tests/fixtures/modulefiles), PrgEnv-cray loaded as on a login node."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

LMOD = '/usr/share/lmod/lmod/libexec/lmod'
MODULES = os.path.join(REPO, 'tests', 'fixtures', 'modulefiles')


def ensure_lmod():
    if not os.path.exists(LMOD) and shutil.which('apt-get') and \
            os.geteuid() == 0:
        cmd = ['apt-get', 'install', '-y', '-q', 'lmod']
        if subprocess.run(cmd, capture_output=True).returncode:
            subprocess.run(['apt-get', 'update', '-q'], capture_output=True)
            subprocess.run(cmd, capture_output=True)
    if not os.path.exists(LMOD):
        pytest.skip('Lmod is not installed and cannot be installed here')


def dry_run(tmp_path, system, *args, env=None):
    """Render every job script of ``system``; return {display name:
    (job script, build script or None, testcase)}."""
    ensure_lmod()
    out = tmp_path / system
    env = dict(os.environ, LMOD_CMD=LMOD, MODULEPATH=MODULES,
               CCL_HEALTH_OUTPUT=str(out),
               CCL_HEALTH_CACHE='/cache', **(env or {}))
    env.pop('CCL_HEALTH_MODULES_SYSTEM', None)
    # a login node starts with the default PrgEnv-cray loaded
    load = subprocess.run([LMOD, 'python', 'load', 'PrgEnv-cray'], env=env,
                          capture_output=True, text=True)
    class _Os:                 # Lmod's python output sets os.environ[...]
        environ = env
    exec(load.stdout.replace('import os', ''), {'os': _Os})
    assert env.get('LOADEDMODULES') == 'PrgEnv-cray', load.stderr
    report = out / 'report.json'
    p = subprocess.run([os.path.join(os.path.dirname(sys.executable),
                                     'reframe'), '-C', 'config/settings.py',
                        '-c', 'checks', '--system', system, '--dry-run',
                        '--report-file', str(report)] + list(args),
                       env=env, cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    cases = {}
    for tc in json.loads(report.read_text())['runs'][-1]['testcases']:
        stage = out / 'stage' / system / tc['partition'] / tc['environ'] / \
            tc['short_name']
        job = stage / 'rfm_job.sh'
        build = stage / 'ccl-build.sh'
        cases[tc['display_name'].split(' ~')[0]] = (
            job.read_text() if job.exists() else None,
            build.read_text() if build.exists() else None, tc)
    return cases
