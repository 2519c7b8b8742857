"""``scripts/init-site DIR [--from SYSTEM]`` gives a working copy of the
three folders a site keeps (site/, reference/, config/systems/) and says
the three variables that point the suite at it; with them, what is edited
in the copy reaches the job scripts (issue 32.2)."""

import os
import re
import subprocess

from conftest import REPO

INIT = os.path.join(REPO, 'scripts', 'init-site')


def init(*args, pointer=None):
    """``scripts/init-site ARGS``; its site pointer in ``pointer`` (a
    folder of the test: the checkout's own ``site.conf`` is never
    written by the tests), default beside the first argument."""
    pointer = pointer or os.path.join(os.path.dirname(str(args[0])),
                                      'site.conf')
    return subprocess.run([INIT, *map(str, args)], capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, CCL_HEALTH_SITE_CONF=pointer))


def _exports(text):
    return dict(re.findall(r'^  export (CCL_HEALTH_\w+)=(\S+)$', text, re.M))


def test_a_copy_of_all_three_and_the_variables_that_point_at_it(tmp_path):
    mine = tmp_path / 'mysite'
    p = init(mine)
    assert p.returncode == 0, p.stderr
    assert _exports(p.stdout) == {
        'CCL_HEALTH_SITE_DIR': f'{mine}/site',
        'CCL_HEALTH_REFERENCE_DIR': f'{mine}/reference',
        'CCL_HEALTH_CONFIG_DIR': f'{mine}/config'}
    for system in ('local', 'frontier', 'perlmutter', 'lumi'):
        for f in (f'site/{system}.yaml', f'reference/{system}.yaml',
                  f'config/systems/{system}.py'):
            assert (mine / f).is_file(), f
    assert (mine / 'site' / 'nhc' / 'ccl_health.nhc').is_file()
    assert (mine / 'site' / 'fleet-faults.example.json').is_file()
    assert p.stdout.rstrip().splitlines()[-1] == (
        'Then see what a night would run: scripts/run --dry-run -- '
        '--system local')
    # twice: nothing overwritten unless asked
    p = init(mine)
    assert p.returncode == 2 and '--force' in p.stderr
    assert 'Traceback' not in p.stderr
    assert init(mine, '--force').returncode == 0


def test_from_one_system(tmp_path):
    mine = tmp_path / 'f'
    p = init(mine, '--from', 'frontier')
    assert p.returncode == 0, p.stderr
    got = sorted(str(f.relative_to(mine)) for f in mine.rglob('*.yaml')) + \
        sorted(str(f.relative_to(mine)) for f in mine.rglob('*.py'))
    assert got == ['reference/frontier.yaml', 'site/frontier.yaml',
                   'config/systems/frontier.py']
    assert (mine / 'reference' / 'anchors').is_dir()
    assert '--system frontier' in p.stdout
    p = init(tmp_path / 'g', '--from', 'nosuch')
    assert p.returncode == 2
    assert p.stderr.strip() == ('ccl-health: error: --from nosuch: no such '
                                'system (shipped: frontier, local, lumi, '
                                'perlmutter)')


def test_the_suite_reads_the_copy(tmp_path):
    """An environment variable set in the copy's ReFrame system and one in
    its site file both reach every rendered job script."""
    mine = tmp_path / 'mysite'
    p = init(mine, '--from', 'local')
    assert p.returncode == 0, p.stderr
    conf = mine / 'config' / 'systems' / 'local.py'
    text = conf.read_text()
    assert "    'features': ['ccl'],\n" in text
    conf.write_text(text.replace(
        "    'features': ['ccl'],\n", "    'features': ['ccl'],\n"
        "    'env_vars': [['FROM_MY_CONFIG', 'yes']],\n"))
    site = mine / 'site' / 'local.yaml'
    site.write_text(site.read_text().replace(
        'env:\n', 'env:\n  FROM_MY_SITE: "yes"\n', 1))
    env = dict(os.environ, CCL_HEALTH_ASSUME_GPUS='2:sm_90', RFM_COLORIZE='n',
               **_exports(p.stdout))
    p = subprocess.run([os.path.join(REPO, 'scripts', 'run'), '--dry-run',
                        '--output', str(tmp_path / 'o')], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    jobs = list((tmp_path / 'o').rglob('rfm_job.sh'))
    assert jobs
    for job in jobs:
        text = job.read_text()
        assert 'FROM_MY_CONFIG' in text and 'FROM_MY_SITE' in text, job
    # a variable naming a folder without systems/: one line, exit 2
    env['CCL_HEALTH_CONFIG_DIR'] = str(tmp_path / 'nowhere')
    p = subprocess.run([os.path.join(REPO, 'scripts', 'run'), '--dry-run',
                        '--output', str(tmp_path / 'o2')], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and 'Traceback' not in p.stderr
    assert p.stderr.startswith(f'ccl-health: error: CCL_HEALTH_CONFIG_DIR='
                               f'{tmp_path}/nowhere: no system file in ')
