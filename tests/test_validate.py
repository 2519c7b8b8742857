"""scripts/validate (ccl_health/judge/validate.py): one line per error
naming the file and the key, never a traceback; the shipped files pass;
scripts/run, the health hook and the nightly stop on the same lines
before anything runs (issue 29, item 8).

Each case copies the shipped config/, site/ and reference/ and breaks one
thing, as a site would."""

import os
import shutil
import subprocess
import sys

import pytest

from ccl_health.judge import validate
from conftest import REPO
from helpers.builds import MIRROR

PY = sys.executable


@pytest.fixture
def tree(tmp_path):
    """A copy of the shipped configuration, site data and references."""
    for d in ('config', 'site', 'reference'):
        shutil.copytree(os.path.join(REPO, d), tmp_path / d,
                        ignore=shutil.ignore_patterns('__pycache__'))
    return tmp_path


def edit(path, old, new, count=1):
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, count))


def run_validate(tree, *args):
    p = subprocess.run(
        [PY, '-m', 'ccl_health.judge.validate', '--config-dir',
         str(tree / 'config'), '--site-dir', str(tree / 'site'),
         '--reference-dir', str(tree / 'reference'), *args],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert 'Traceback' not in p.stdout + p.stderr, p.stderr
    return p


def one_error(tree, file, key, *args):
    """The one line scripts/validate prints: it names ``file`` (under
    ``tree``) and ``key``; exit 1."""
    p = run_validate(tree, *args)
    lines = p.stdout.splitlines()
    assert p.returncode == 1, p.stdout + p.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith(f'{tree / file}: {key}'), lines[0]
    return lines[0]


# -- one case per class of error ----------------------------------------------

def test_schema_error_in_a_site_file(tree):
    edit(tree / 'site' / 'local.yaml', 'max_size: 1G  ', 'max_size: [1G]')
    line = one_error(tree, 'site/local.yaml',
                     'transports.net-socket.max_size:')
    assert "['1G'] is not of type" in line


def test_schema_error_in_a_reference_file(tree):
    edit(tree / 'reference' / 'local.yaml', 'gpus_per_node: 2',
         'gpus_per_node: two')
    line = one_error(tree, 'reference/local.yaml',
                     'partitions.gpu.entries[0].gpus_per_node:')
    assert "'two'" in line


def test_unknown_key_in_a_system_dict(tree):
    edit(tree / 'config' / 'systems' / 'perlmutter.py', "'modules_system':",
         "'module_system':")
    line = one_error(tree, 'config/systems/perlmutter.py', 'module_system:',
                     '--system', 'perlmutter')
    assert 'unknown key of a ReFrame system' in line
    assert "did you mean 'modules_system'" in line


def test_unknown_key_in_a_partition_dict(tree):
    edit(tree / 'config' / 'systems' / 'local.py', "'max_jobs': 1,",
         "'max_job': 1,")
    line = one_error(tree, 'config/systems/local.py',
                     'partitions[gpu].max_job:', '--system', 'local')
    assert 'unknown key of a ReFrame partition' in line


def test_num_device_typo_in_devices(tree):
    """ReFrame's own schema lets it pass (its device dict is open) and the
    jobs become 1 GPU per node: here it is an error."""
    edit(tree / 'config' / 'systems' / 'perlmutter.py', "'num_devices': 4",
         "'num_device': 4")
    line = one_error(tree, 'config/systems/perlmutter.py',
                     'partitions[gpu].devices[0].num_device:')
    assert "did you mean 'num_devices'" in line


def test_num_device_typo_in_a_system_that_counts_the_gpus(tree):
    """`local` writes its devices only where it finds GPUs: checked with
    GPUs assumed, also on a machine without any."""
    edit(tree / 'config' / 'systems' / 'local.py',
         "'num_devices': _gpus.count", "'num_device': _gpus.count")
    one_error(tree, 'config/systems/local.py',
              'partitions[gpu].devices[0].num_device:', '--system', 'local')


def test_site_partition_not_in_the_config(tree):
    edit(tree / 'site' / 'local.yaml', '  partition: gpu\n',
         '  partition: gpus\n')
    line = one_error(tree, 'site/local.yaml', 'health.partition:')
    assert "no partition 'gpus' in system 'local' of" in line
    assert 'config/systems/local.py' in line


def test_reference_partition_not_in_the_config(tree):
    edit(tree / 'reference' / 'lumi.yaml', '\n  gpu:',
         '\n  gpus:')
    one_error(tree, 'reference/lumi.yaml', 'partitions.gpus:')


def test_reference_with_an_unknown_transport(tree):
    edit(tree / 'reference' / 'local.yaml', 'transport: intra',
         'transport: nvlink')
    line = one_error(tree, 'reference/local.yaml',
                     'partitions.gpu.entries[0].transport:')
    assert "'nvlink'" in line and 'net-socket' in line


def test_ceiling_below_a_reference(tree):
    edit(tree / 'site' / 'local.yaml', '  intra:\n    env: {}\n',
         '  intra:\n    env: {}\n    ceiling: {links: 1, link_gbps: 50}\n')
    line = one_error(tree, 'site/local.yaml', 'transports.intra.ceiling:')
    assert f'{tree}/reference/local.yaml: partitions.gpu.entries' in line


def test_a_system_file_that_does_not_load(tree):
    edit(tree / 'config' / 'systems' / 'lumi.py', "system = {",
         "system = {{")
    line = one_error(tree, 'config/systems/lumi.py', 'cannot load:')
    assert 'SyntaxError' in line


def test_every_error_is_a_line_of_its_own(tree):
    edit(tree / 'config' / 'systems' / 'perlmutter.py', "'num_devices': 4",
         "'num_device': 4")
    edit(tree / 'site' / 'frontier.yaml', 'partition: batch',
         'partition: btach')
    p = run_validate(tree)
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert len(lines) == 2, lines
    assert any('perlmutter.py: partitions[gpu].devices[0].num_device' in x
               for x in lines)
    assert any('frontier.yaml: health.partition' in x for x in lines)


# -- what is shipped ---------------------------------------------------------

def test_the_shipped_files_validate():
    p = subprocess.run([PY, '-m', 'ccl_health.judge.validate'], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith('OK: 4 system(s)'), lines
    found = validate.check(
        None, os.path.join(REPO, 'config'), os.path.join(REPO, 'site'),
        os.path.join(REPO, 'reference'))
    assert found.errors == []
    assert sorted(found.configs) == sorted(found.sites) == \
        sorted(found.references) == ['frontier', 'local', 'lumi',
                                     'perlmutter']


def reframe_validates(tree):
    """Whether ReFrame's own loader accepts the configuration of ``tree``
    (``config/settings.py``, every system file): ``(ok, its error)``."""
    code = ('import sys; from reframe.core.config import load_config\n'
            'c = load_config(sys.argv[1])\n'
            'try:\n    c.validate()\n'
            'except Exception as e:\n    print(e); sys.exit(1)')
    p = subprocess.run([PY, '-c', code,
                        str(tree / 'config' / 'settings.py')], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    return p.returncode == 0, p.stdout + p.stderr


def test_the_schema_is_reframes_own(tree):
    """The shipped configuration passes ReFrame's own validation; a
    partition key ReFrame refuses is one validate refuses; ``num_device``,
    which ReFrame lets pass, validate refuses too."""
    path, _ = validate.reframe_schema()
    assert path.endswith(os.path.join('reframe', 'schemas', 'config.json'))
    assert reframe_validates(tree) == (True, '')
    part = tree / 'config' / 'systems' / 'perlmutter.py'
    edit(part, "'max_jobs': 8,", "'max_job': 8,")
    ok, why = reframe_validates(tree)
    assert not ok and 'could not validate' in why
    one_error(tree, 'config/systems/perlmutter.py',
              'partitions[gpu].max_job:')
    edit(part, "'max_job': 8,", "'max_jobs': 8,")
    edit(part, "'num_devices': 4", "'num_device': 4")
    assert reframe_validates(tree) == (True, '')
    one_error(tree, 'config/systems/perlmutter.py',
              'partitions[gpu].devices[0].num_device:')


# -- the doors run it first --------------------------------------------------

def broken_site(tree):
    edit(tree / 'site' / 'local.yaml', 'max_size: 1G  ', 'max_size: [1G]')
    return f'{tree}/site/local.yaml: transports.net-socket.max_size:'


def test_scripts_run_stops_before_reframe(tree):
    want = broken_site(tree)
    out = tree / 'out'
    env = dict(os.environ, CCL_HEALTH_SITE_DIR=str(tree / 'site'),
               CCL_HEALTH_ASSUME_GPUS='2:sm_90')
    p = subprocess.run([PY, '-m', 'ccl_health.cli', '--prog', 'scripts/run',
                        'run', '--output', str(out), '--', '--system',
                        'local'], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=120)
    text = p.stdout + p.stderr
    assert p.returncode == 2, text
    lines = text.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(want)
    assert lines[1].startswith('ccl-health: error: 1 error(s) in the '
                               'configuration above')
    assert 'Traceback' not in text and 'FAILURE' not in text
    # ReFrame never started: no output folder, no report, no log
    assert not out.exists()


def test_the_hook_says_the_line(tree):
    want = broken_site(tree)
    env = dict(os.environ, CCL_HEALTH_ASSUME_GPUS='2:sm_90')
    p = subprocess.run([PY, '-m', 'ccl_health.hook', '--system', 'local',
                        '--site-dir', str(tree / 'site'), '--no-record'],
                       cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stdout.splitlines() == [p.stdout.strip()]
    assert p.stdout.startswith(f'COULD-NOT-CHECK: {want}'), p.stdout


def test_the_nightly_says_the_lines(tree):
    want = broken_site(tree)
    env = dict(os.environ, CCL_HEALTH_SITE_DIR=str(tree / 'site'))
    p = subprocess.run([PY, '-m', 'ccl_health.nightly', '--system', 'local',
                        '--publish', str(tree / 'www'), '--output',
                        str(tree / 'out')], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.splitlines()
    assert lines[0].startswith(want), lines
    assert lines[1].startswith('ccl-health nightly: COULD NOT RUN: 1 '
                               'error(s)'), lines
    assert len(lines) == 2 and not p.stdout
    assert not (tree / 'out').exists()


# -- issue 41, class 3: nested aliases ("billion laughs") ------------------

def _alias_bomb(levels=9, width=9):
    """YAML of ~0.5 KB whose aliases expand to ``width ** levels`` nodes."""
    lines = ['x_a0: &a0 [' + ', '.join(['"lol"'] * width) + ']']
    for i in range(1, levels + 1):
        lines.append(f'x_a{i}: &a{i} [' + ', '.join([f'*a{i - 1}'] * width)
                     + ']')
    return '\n'.join(lines) + '\n'


def test_nested_aliases_are_one_line_at_once(tree):
    site = tree / 'site' / 'local.yaml'
    site.write_text(site.read_text() + _alias_bomb())
    p = run_validate(tree)           # bounded by run_validate's timeout
    assert p.returncode == 1, p.stdout + p.stderr
    [line] = [ln for ln in p.stdout.splitlines() if 'aliases' in ln]
    assert line.startswith(f'{site}: ') and 'expand to more than' in line


def test_the_hook_keeps_its_limit_with_nested_aliases(tree):
    import time
    site = tree / 'site' / 'local.yaml'
    site.write_text(site.read_text() + _alias_bomb())
    env = dict(os.environ, CCL_HEALTH_ASSUME_GPUS='2:sm_90')
    t0 = time.monotonic()
    p = subprocess.run([PY, '-m', 'ccl_health.hook', '--system', 'local',
                        '--site-dir', str(tree / 'site'), '--no-record',
                        '--limit', '20'],
                       cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert time.monotonic() - t0 < 20, p.stdout
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stdout.startswith('COULD-NOT-CHECK: ') and 'aliases' in \
        p.stdout, p.stdout


def test_a_few_aliases_are_still_read():
    from ccl_health.sitedata import schemas
    doc = schemas.load_yaml('a: &x {b: 1}\nc: *x\nd: [*x, *x]\n', 'f.yaml')
    assert doc == {'a': {'b': 1}, 'c': {'b': 1}, 'd': [{'b': 1}, {'b': 1}]}
    # the bound is on the expanded size, exactly
    small = _alias_bomb(levels=3, width=9)       # 9**4 + ... nodes: < bound
    assert schemas.load_yaml(small, 'f.yaml')['x_a3'][0][0][0] == ['lol'] * 9


# -- issue 40: what breaks a night, each with the file, the key and the fix --

def test_a_reference_size_the_sweep_never_runs(tree):
    """3 GiB is no size of the sweep (8 B to 8 GiB by x2): its value was
    silently never compared."""
    edit(tree / 'reference' / 'local.yaml', '2GiB: 339.05', '3GiB: 339.05')
    line = one_error(tree, 'reference/local.yaml',
                     'partitions.gpu.entries[1].busbw.3GiB:')
    assert 'never measured' in line and "not one of the sweep's sizes" in line


def test_a_reference_size_above_the_sweep(tree):
    edit(tree / 'reference' / 'local.yaml', '8GiB: 348.56',
         '8GiB: 348.56\n        16GiB: 350.0')
    line = one_error(tree, 'reference/local.yaml',
                     'partitions.gpu.entries[1].busbw.16GiB:')
    assert 'above 8GiB' in line


def test_a_reference_size_above_the_sites_max_size(tree):
    edit(tree / 'site' / 'perlmutter.yaml', '      NCCL_NET_PLUGIN: none\n',
         '      NCCL_NET_PLUGIN: none\n    max_size: 128M\n')
    edit(tree / 'reference' / 'perlmutter.yaml', 'busbw: {32MiB: 9.5}',
         'busbw: {32MiB: 9.5, 8GiB: 9.5}')
    line = one_error(tree, 'reference/perlmutter.yaml',
                     'partitions.gpu.entries[0].busbw.8GiB:')
    assert 'above 128MiB' in line
    assert 'transports.net-socket.max_size: 128M' in line


def test_gpus_per_node_the_partition_does_not_have(tree):
    edit(tree / 'reference' / 'perlmutter.yaml', 'gpus_per_node: 4',
         'gpus_per_node: 8')
    line = one_error(tree, 'reference/perlmutter.yaml',
                     'partitions.gpu.entries[0].gpus_per_node:')
    assert 'has 4 GPU(s) per node' in line and 'write 4' in line
    # `local` counts the host's GPUs: its 4-GPU entry (from a 4-GPU host)
    # and an 8-GPU one stay valid on a host of 2
    edit(tree / 'reference' / 'perlmutter.yaml', 'gpus_per_node: 8',
         'gpus_per_node: 4')
    edit(tree / 'reference' / 'local.yaml', 'gpus_per_node: 2',
         'gpus_per_node: 8')
    p = run_validate(tree, '--system', 'local')
    assert p.returncode == 0, p.stdout


def test_a_collective_that_never_matches(tree):
    edit(tree / 'reference' / 'local.yaml', 'collective: all_reduce',
         'collective: allreduce')
    line = one_error(tree, 'reference/local.yaml',
                     'partitions.gpu.entries[1].collective:')
    assert "did you mean 'all_reduce'" in line


def test_a_reference_transport_the_site_does_not_list(tree):
    """Its checks are skipped (with that reason): the entry is never
    compared.  Said, not an error: a site without that network keeps the
    entries of the file it copied."""
    edit(tree / 'reference' / 'local.yaml', 'transport: net-plugin\n',
         'transport: net-ib\n')
    p = run_validate(tree, '--system', 'local')
    assert p.returncode == 0, p.stdout
    [line] = p.stdout.splitlines()
    assert line.startswith('OK: 1 system(s) (local)'), line
    assert (f'{tree}/reference/local.yaml: partitions.gpu.entries[9]: '
            f'net-ib is not listed in {tree}/site/local.yaml') in line


def test_an_environment_that_does_not_exist(tree):
    edit(tree / 'config' / 'systems' / 'perlmutter.py',
         "'environs': ['PrgEnv-gnu-cuda']", "'environs': ['gnu_cuda']")
    line = one_error(tree, 'config/systems/perlmutter.py',
                     'partitions[gpu].environs:')
    assert "no environment 'gnu_cuda'" in line
    assert 'PrgEnv-gnu-cuda' in line


def test_an_environment_for_another_system(tree):
    edit(tree / 'config' / 'systems' / 'local.py',
         "'target_systems': ['local']", "'target_systems': ['perlmutter']")
    line = one_error(tree, 'config/systems/local.py',
                     'environments[builtin].target_systems:')
    assert "write ['local']" in line


def copy_system(tree, new, name_too=True):
    """``new`` made from perlmutter's three files, as docs/sites.md says
    (copy one and change its name)."""
    for folder, suffix in (('config/systems', '.py'), ('site', '.yaml'),
                           ('reference', '.yaml')):
        text = (tree / folder / f'perlmutter{suffix}').read_text()
        text = text.replace("'target_systems': ['perlmutter']",
                            f"'target_systems': ['{new}']")
        text = text.replace('system: perlmutter', f'system: {new}')
        if name_too:
            text = text.replace("'name': 'perlmutter'", f"'name': '{new}'")
        (tree / folder / f'{new}{suffix}').write_text(text)


def test_a_system_file_named_for_another_system(tree):
    copy_system(tree, 'mycluster', name_too=False)
    line = one_error(tree, 'config/systems/mycluster.py', 'name:',
                     '--system', 'mycluster')
    assert "'perlmutter', but the file is that of system 'mycluster'" in line
    copy_system(tree, 'mycluster')
    assert run_validate(tree, '--system', 'mycluster').returncode == 0


def test_a_launcher_that_is_not_reframes(tree):
    edit(tree / 'config' / 'systems' / 'perlmutter.py',
         "'launcher': 'srun',", "'launcher': 'srun ',")
    line = one_error(tree, 'config/systems/perlmutter.py',
                     'partitions[gpu].launcher:')
    assert "'srun ' is not a ReFrame launcher (did you mean 'srun'?)" in line


def test_no_partition_with_the_features_the_checks_need(tree):
    edit(tree / 'config' / 'systems' / 'perlmutter.py',
         "'features': ['gpu', 'nvidia'],", "'features': [],")
    line = one_error(tree, 'config/systems/perlmutter.py', 'partitions:')
    assert 'no partition has the features gpu' in line


def test_no_environment_with_the_features_the_checks_need(tree):
    edit(tree / 'config' / 'systems' / 'perlmutter.py',
         "'features': ['ccl'],", "'features': [],")
    line = one_error(tree, 'config/systems/perlmutter.py',
                     'partitions[gpu].environs:')
    assert "'features': ['ccl']" in line


def test_the_features_are_those_the_checks_select_on():
    from ccl_health.sitedata import crosscheck
    want = set(), set()
    for path in ('checks/collective_sweep.py', 'checks/node_health.py',
                 'ccl_health/rfm/base.py', 'checks/fleet_acceptance.py'):
        text = open(os.path.join(REPO, path)).read()
        for key, into in (('valid_systems = ', want[0]),
                          ('valid_prog_environs = ', want[1])):
            for line in text.splitlines():
                if line.strip().startswith(key):
                    into.update(w.strip("'+[] ") for w in
                                line.split('=', 1)[1].split(',')
                                if "'+" in w)
    assert crosscheck.required_features() == (sorted(want[0]),
                                              sorted(want[1]))
    assert want == ({'gpu'}, {'ccl'})


def test_an_access_that_picks_no_nodes(tree):
    edit(tree / 'config' / 'systems' / 'lumi.py',
         "['--partition=standard-g', ", "[")
    line = one_error(tree, 'config/systems/lumi.py',
                     'partitions[gpu].access:')
    assert 'picks no nodes' in line and 'default partition' in line


def test_an_access_option_without_its_value(tree):
    edit(tree / 'config' / 'systems' / 'frontier.py', "'-p batch'", "'-p'")
    line = one_error(tree, 'config/systems/frontier.py',
                     'partitions[batch].access[0]:')
    assert 'has no value' in line


def test_a_misspelt_nccl_variable(tree):
    edit(tree / 'site' / 'perlmutter.yaml', 'NCCL_NET_GDR_LEVEL: LOC',
         'NCCL_NET_GDR_LEVLE: LOC')
    line = one_error(tree, 'site/perlmutter.yaml',
                     'transports.net-plugin.env.NCCL_NET_GDR_LEVLE:')
    assert 'did you mean NCCL_NET_GDR_LEVEL?' in line
    assert 'NVIDIA/nccl' in line


def test_a_misspelt_libfabric_variable(tree):
    edit(tree / 'site' / 'perlmutter.yaml', 'FI_MR_CACHE_MONITOR:',
         'FI_MR_CACHE_MONITER:')
    line = one_error(tree, 'site/perlmutter.yaml',
                     'env.FI_MR_CACHE_MONITER:')
    assert 'did you mean FI_MR_CACHE_MONITOR?' in line


def test_a_misspelt_key_of_the_site_file(tree):
    edit(tree / 'site' / 'local.yaml', '\nhealth:', '\nhelth:')
    line = one_error(tree, 'site/local.yaml', 'top level:')
    assert "did you mean 'health' for 'helth'?" in line
    edit(tree / 'site' / 'local.yaml', 'helth:', 'health:')
    edit(tree / 'site' / 'local.yaml', '  partition: gpu\n',
         '  partiton: gpu\n')
    p = run_validate(tree)
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert lines == [
        next(x for x in lines if "did you mean 'partition' for "
             "'partiton'?" in x),
        f"{tree}/site/local.yaml: health: missing key 'partition'"], lines
    assert lines[0].startswith(f'{tree}/site/local.yaml: health: ')


# -- the variables NCCL, RCCL, aws-ofi-nccl and libfabric read ---------------

TARBALLS = ('rccl-rocm-5.7.1', 'aws-ofi-nccl-1.21.1', 'libfabric-1.22.0',
            'nccl-tests-2.19.6')


def shipped_table():
    import csv
    from ccl_health.sitedata import envvars
    with open(envvars.TABLE, newline='') as fp:
        return list(csv.DictReader(fp, delimiter='\t'))


def test_the_variable_table_names_its_sources():
    rows = shipped_table()
    assert {r['source'] for r in rows} == {
        'NVIDIA/nccl', 'ROCm/rccl', 'aws/aws-ofi-nccl', 'ofiwg/libfabric',
        'NVIDIA/nccl-tests'}
    for r in rows:
        assert r['versions'] and r['where'].rsplit(':', 1)[1].isdigit(), r
    names = {r['name'] for r in rows}
    # every variable the shipped site files set, and those the docs name
    import yaml
    for f in sorted(os.listdir(os.path.join(REPO, 'site'))):
        if f.endswith('.yaml'):
            doc = yaml.safe_load(open(os.path.join(REPO, 'site', f)))
            envs = [doc.get('env') or {}] + [
                (t or {}).get(k) or {} for t in doc['transports'].values()
                for k in ('env', 'multi_node_env')]
            for env in envs:
                for key in env:
                    if key.startswith(('NCCL_', 'FI_', 'RCCL_')):
                        assert key in names, (f, key)
    assert 'NCCL_NET_GDR_LEVLE' not in names


@pytest.mark.skipif(not all(os.path.exists(os.path.join(
    MIRROR, f'{t}.tar.gz')) for t in TARBALLS),
    reason='no ../shared/mirror with rccl, aws-ofi-nccl, libfabric and '
    'nccl-tests')
def test_the_variable_table_is_read_from_the_upstream_sources(tmp_path):
    """The rows of RCCL, aws-ofi-nccl, libfabric and nccl-tests are what
    their pinned release tarballs read, as the table's builder reads
    them."""
    import tarfile
    sys.path.insert(0, os.path.join(REPO, 'tests', 'fixtures', 'envvars'))
    try:
        import read_sources
    finally:
        sys.path.pop(0)
    for t in TARBALLS:
        with tarfile.open(os.path.join(MIRROR, f'{t}.tar.gz')) as tf:
            tf.extractall(tmp_path, filter='data')
    rows = read_sources.table(None, *[str(tmp_path / t) for t in TARBALLS])
    read = list(read_sources.lines(rows))[1:]
    shipped = ['\t'.join(r.values()) for r in shipped_table()
               if r['source'] != 'NVIDIA/nccl']
    assert read == shipped
    assert any(x.startswith('FI_CXI_DISABLE_HOST_REGISTER\tofiwg/libfabric')
               for x in read)


# -- issue 40: the doors say what validate says ------------------------------

def test_the_nightly_names_a_partition_the_system_lacks(tree):
    """`--partition gpus`: validate's words (no partition 'gpus', has:
    gpu), never `NOTHING MEASURED: scripts/run exited 1`."""
    env = dict(os.environ, CCL_HEALTH_ASSUME_GPUS='2:sm_90')
    p = subprocess.run([PY, '-m', 'ccl_health.nightly', '--system', 'local',
                        '--partition', 'gpus', '--publish',
                        str(tree / 'www'), '--output', str(tree / 'out')],
                       cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.splitlines()
    assert lines[0] == (f'{REPO}/config/systems/local.py: partitions: no '
                        f"partition 'gpus' in system 'local' (has: gpu); "
                        f"did you mean 'gpu'? (asked: local:gpus)"), lines
    assert lines[1].startswith('ccl-health nightly: COULD NOT RUN: 1 '
                               'error(s)'), lines
    assert len(lines) == 2 and not p.stdout
    assert 'NOTHING MEASURED' not in p.stdout + p.stderr
    assert not (tree / 'out').exists()


def test_scripts_run_names_a_partition_the_system_lacks(tree):
    out = tree / 'out'
    p = subprocess.run([PY, '-m', 'ccl_health.cli', '--prog', 'scripts/run',
                        'run', '--output', str(out), '--', '--system',
                        'local:gpus'], cwd=REPO,
                       env=dict(os.environ, CCL_HEALTH_ASSUME_GPUS='2:sm_90'),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "no partition 'gpus' in system 'local' (has: gpu)" in p.stderr
    assert not out.exists()


def test_a_host_that_matches_no_system(tree):
    """Without `local` (a site's own folder), a host none of the systems'
    hostnames match is said plainly before ReFrame falls back to its
    `generic` system and says that nothing was selected."""
    (tree / 'config' / 'systems' / 'local.py').unlink()
    import re
    import socket
    if any(re.match(patt, socket.gethostname())
           for c in validate.check(None, str(tree / 'config'), str(
               tree / 'site'), str(tree / 'reference')).configs.values()
           for patt in c.get('hostnames') or []):
        pytest.skip('a shipped system matches this host')
    out = tree / 'out'
    env = dict(os.environ, CCL_HEALTH_CONFIG_DIR=str(tree / 'config'),
               CCL_HEALTH_SITE_DIR=str(tree / 'site'),
               CCL_HEALTH_REFERENCE_DIR=str(tree / 'reference'),
               CCL_HEALTH_ASSUME_GPUS='2:sm_90')
    p = subprocess.run([PY, '-m', 'ccl_health.cli', '--prog', 'scripts/run',
                        'run', '--output', str(out)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.splitlines()
    assert lines[0].startswith(
        f"{tree}/config/systems: no system matches this host "
        f"{socket.gethostname()!r} (hostnames of each: frontier: "), lines
    assert 'give --system SYSTEM' in lines[0]
    assert 'nothing was selected' not in p.stdout + p.stderr
    assert not out.exists()
