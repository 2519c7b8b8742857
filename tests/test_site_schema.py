"""Site files against their declared schema (ccl_health/schemas), and the
shell quoting of site values in the job script."""

import json
import os
import subprocess

import pytest
import yaml

from ccl_health import CclHealthError
from ccl_health.sitedata.transports import NAMES as TRANSPORTS
from ccl_health.sitedata import schemas
from ccl_health.sitedata import site
from conftest import REPO

SITE_DIR = os.path.join(REPO, 'site')
SHIPPED = sorted(f[:-5] for f in os.listdir(SITE_DIR) if f.endswith('.yaml'))
FRONTIER = open(os.path.join(SITE_DIR, 'frontier.yaml')).read()
CROSS_NIC = FRONTIER.splitlines().index('  NCCL_CROSS_NIC: "1"') + 1


def test_schemas_are_valid():
    for name in ('site', 'reference'):
        schemas.schema(name)        # checked against the 2020-12 meta-schema


def test_schemas_ship_with_the_package():
    toml = open(os.path.join(REPO, 'pyproject.toml')).read()
    assert '"ccl_health.sitedata.schemas"' in toml and '*.schema.json' in toml
    for name in ('site', 'reference'):
        with open(os.path.join(REPO, 'ccl_health', 'sitedata', 'schemas',
                               f'{name}.schema.json')) as fp:
            assert json.load(fp)['$schema'].endswith('2020-12/schema')


@pytest.mark.parametrize('name', SHIPPED)
def test_shipped_site_files_are_valid(name):
    s = site.load(SITE_DIR, name)
    assert s.system == name
    # what a shipped site lists runs; the rest is skipped with the reason
    assert {'intra', 'net-socket'} <= set(s.transports) <= set(TRANSPORTS)
    for t in s.transports.values():
        assert all(isinstance(v, str) for v in t.env.values())
        assert all(isinstance(p, str) and len(p) > 1
                   for p in t.ld_library_path)


@pytest.mark.parametrize('name', SHIPPED)
def test_shipped_health_blocks_name_a_gpu_partition(name):
    """Each site file's health block names a partition of its system's
    ReFrame configuration that has GPUs (the hook's node count and its
    reference key come from there)."""
    from ccl_health.hook import where
    from ccl_health.evidence import nodefacts as node
    from ccl_health.sitedata import sysconfig
    s = site.load(SITE_DIR, name)
    assert s.health is not None and s.health.launcher
    gpus = node.Gpus('nvidia', 2, 'x', 'sm_90')
    conf = where.load_config_system(os.path.join(REPO, 'config'), name,
                                     gpus)
    parts = {p['name']: p for p in conf['partitions']}
    assert s.health.partition in parts
    count = sysconfig.partition_gpus(parts[s.health.partition])[0]
    assert count >= 1
    assert s.health.gpus_per_node in (None, count)


def test_health_block_is_read():
    s = site.parse(_frontier(lambda d: d['health'].update(
        launcher="srun --overlap --ntasks", gpus_per_node=8, size='2G',
        limit=25)), 'site/frontier.yaml')
    assert s.health == site.HealthSite('batch', ['srun', '--overlap',
                                                 '--ntasks'], 8, '2G', 25.0)
    assert site.parse(_frontier(lambda d: d.pop('health')), 'x').health \
        is None


def _frontier(edit):
    doc = yaml.safe_load(FRONTIER)
    edit(doc)
    return yaml.safe_dump(doc)


def _plugin(doc):
    return doc['transports']['net-plugin']


@pytest.mark.parametrize('text,message', [
    # a string where a list belongs: once '/:o:p:t...'
    (FRONTIER.replace(
        'ld_library_path: ["{plugin_prefix}/lib", "{libfabric_prefix}/lib64"]',
        'ld_library_path: /opt/x', 1),
     r"^site/frontier.yaml: transports.net-plugin.ld_library_path: '/opt/x' "
     r"is not of type 'array'$"),
    # once a list of letters
    (_frontier(lambda d: _plugin(d).update(modules='x')),
     r"transports.net-plugin.modules: 'x' is not of type 'array'"),
    # an empty value: once the word None in the job's environment
    (FRONTIER.replace('NCCL_CROSS_NIC: "1"', 'NCCL_CROSS_NIC:'),
     r'^site/frontier.yaml: env.NCCL_CROSS_NIC: None is not a string'),
    (FRONTIER.replace('NCCL_CROSS_NIC: "1"', 'NCCL_CROSS_NIC: off'),
     r'env.NCCL_CROSS_NIC: False is not a string'),
    (FRONTIER.replace('NCCL_CROSS_NIC: "1"', 'NCCL_CROSS_NIC: 010'),
     r'env.NCCL_CROSS_NIC: 8 is not a string'),
    (_frontier(lambda d: _plugin(d)['env'].update({'BAD NAME': 'x'})),
     r"transports.net-plugin.env: 'BAD NAME' does not match"),
    (_frontier(lambda d: _plugin(d).update(ld_library_path=[None])),
     r'transports.net-plugin.ld_library_path\[0\]: None is not of type'),
    (_frontier(lambda d: d['transports'].update(nvlink={})),
     r"transports: 'nvlink' is not one of \['intra'"),
    (_frontier(lambda d: _plugin(d).update(envv={})),
     r"transports.net-plugin: Additional properties are not allowed "
     r"\('envv' was unexpected\) \(known: ceiling, env, ld_library_path"),
    # launcher options are the ReFrame environment's extras, not site data
    (_frontier(lambda d: d.update(launcher_options=['--gpus-per-task=1'])),
     r"top level: Additional properties are not allowed "
     r"\('launcher_options' was unexpected\)"),
    # the health hook's block
    (_frontier(lambda d: d['health'].pop('launcher')),
     r"^site/frontier.yaml: health: missing key 'launcher'"),
    (_frontier(lambda d: d['health'].update(gpus_per_node='8')),
     r"^site/frontier.yaml: health.gpus_per_node: '8' is not a whole "
     r"number of GPUs, at least 1"),
    (_frontier(lambda d: d['health'].update(gpus_per_node=0)),
     r"^site/frontier.yaml: health.gpus_per_node: 0 is not a whole number "
     r"of GPUs, at least 1"),
    (_frontier(lambda d: d['health'].update(limit=0)),
     r"^site/frontier.yaml: health.limit: 0 is not a positive number of "
     r"seconds"),
    (_frontier(lambda d: d['health'].update(limit='20s')),
     r"^site/frontier.yaml: health.limit: '20s' is not a positive number "
     r"of seconds"),
    (_frontier(lambda d: d['health'].update(partition='my batch')),
     r"^site/frontier.yaml: health.partition: 'my batch' is not a "
     r"partition name of config/systems/<system>.py"),
    (_frontier(lambda d: d['health'].update(launcher='')),
     r"^site/frontier.yaml: health.launcher: '' is not a command line the "
     r"hook appends the rank count"),
    (_frontier(lambda d: d['health'].update(launcher="srun 'x")),
     r"^site/frontier.yaml: health.launcher: \"srun 'x\": No closing "
     r"quotation"),
    (_frontier(lambda d: d['health'].update(launcher=' ')),
     r"^site/frontier.yaml: health.launcher: empty command"),
    (_frontier(lambda d: d['health'].update(size='1 GB-ish')),
     r"^site/frontier.yaml: health.size: not a message size: '1 GB-ish'"),
    (_frontier(lambda d: d['health'].update(size=0)),
     r"^site/frontier.yaml: health.size: must be positive"),
    (_frontier(lambda d: d['health'].update(gpus=8)),
     r"^site/frontier.yaml: health: Additional properties are not allowed "
     r"\('gpus' was unexpected\)"),
    (_frontier(lambda d: d.update(health='batch')),
     r"^site/frontier.yaml: health: 'batch' is not a mapping"),
    (_frontier(lambda d: d['build']['plugin'].update(configure='--x')),
     r"build.plugin.configure: '--x' is not of type 'array'"),
    (_frontier(lambda d: d['build'].update(nccl_test={})),
     r"build: Additional properties .*'nccl_test' was unexpected"),
    (_frontier(lambda d: d.pop('transports')),
     r"^site/frontier.yaml: top level: missing key 'transports'$"),
    (_frontier(lambda d: d['transports'].update(intra=None)),
     r'transports.intra: None is not of type'),
    # what a schema cannot say, said explicitly with file and key
    (_frontier(lambda d: _plugin(d).update(max_size='1 GB-ish')),
     r"^site/frontier.yaml: transports.net-plugin.max_size: not a message "
     r"size: '1 GB-ish'"),
    (_frontier(lambda d: d['transports']['intra']['env'].update(
        X='{plugin_prefix}/lib')),
     r'transports.intra.env.X: unknown placeholder \{plugin_prefix\}'),
    (_frontier(lambda d: _plugin(d)['env'].update(X='{plugin_prefx}')),
     r'transports.net-plugin.env.X: unknown placeholder \{plugin_prefx\}'),
    (FRONTIER.replace('NCCL_CROSS_NIC: "1"',
                      'NCCL_CROSS_NIC: "1"\n  NCCL_CROSS_NIC: "0"'),
     r"^site/frontier.yaml: not valid YAML: key 'NCCL_CROSS_NIC' given twice "
     rf"\(lines {CROSS_NIC} and {CROSS_NIC + 1}\)$"),
    ('transports: [1,', r'^site/frontier.yaml: not valid YAML'),
    ('', r'^site/frontier.yaml: empty site file'),
])
def test_wrong_types_are_errors_naming_file_and_key(text, message):
    with pytest.raises(CclHealthError, match=message):
        site.parse(text, 'site/frontier.yaml')


def test_several_errors_in_one_line():
    text = _frontier(lambda d: (_plugin(d).update(modules='x'),
                                d['env'].update(A=None)))
    with pytest.raises(CclHealthError) as err:
        site.parse(text, 'site/frontier.yaml')
    msg = str(err.value)
    assert '\n' not in msg and msg.count('site/frontier.yaml') == 1
    assert 'env.A: None' in msg and 'net-plugin.modules' in msg


def test_system_in_the_file_must_match_its_name(tmp_path):
    (tmp_path / 'perlmutter.yaml').write_text(FRONTIER)
    with pytest.raises(CclHealthError, match=r"perlmutter.yaml: system: "
                       r"'frontier', but the file is for system "
                       r"'perlmutter'"):
        site.load(str(tmp_path), 'perlmutter')


def test_load_names_the_missing_file(tmp_path):
    with pytest.raises(CclHealthError, match=r"mars.yaml: no site file for "
                       r"system 'mars'"):
        site.load(str(tmp_path), 'mars')


def test_site_value_with_shell_reference_survives_filling():
    text = _frontier(lambda d: _plugin(d)['env'].update(
        X='{plugin_prefix}/share:${HOME}/x'))
    s = site.parse(text, 'site/frontier.yaml')
    env = s.render_env('net-plugin', {'plugin_prefix': '/p',
                                      'plugin_library': '/p/lib/l.so',
                                      'libfabric_prefix': '/lf'}, True)
    assert env['X'] == '/p/share:${HOME}/x'
    assert env['LD_LIBRARY_PATH'] == '/p/lib:/lf/lib64:${LD_LIBRARY_PATH}'


# -- shell quoting --------------------------------------------------------

HOSTILE = [
    ('tcp;ofi_rxm', 'tcp;ofi_rxm'),
    ('a b', 'a b'),
    ('${LD_LIBRARY_PATH}', '/lib/a:/lib b'),
    ('/opt/p/lib:${LD_LIBRARY_PATH}', '/opt/p/lib:/lib/a:/lib b'),
    ('${HOME_DIR}x${LD_LIBRARY_PATH}', '/h xx/lib/a:/lib b'),
    ('$(touch MARK)', '$(touch MARK)'),
    ('`touch MARK`', '`touch MARK`'),
    ('\\"; touch MARK; \\"', '\\"; touch MARK; \\"'),
    ('"; touch MARK; "', '"; touch MARK; "'),
    ("'; touch MARK; '", "'; touch MARK; '"),
    ("'", "'"),
    ('it\'s "quoted"', 'it\'s "quoted"'),
    ('line1\nline2\n', 'line1\nline2\n'),
    ('x\n$(touch MARK)\n`touch MARK`', 'x\n$(touch MARK)\n`touch MARK`'),
    ('$HOME_DIR and $1 and ${HOME_DIR:-d} and $', '$HOME_DIR and $1 and '
     '${HOME_DIR:-d} and $'),
    ('${BAD NAME}', '${BAD NAME}'),
    ('${UNSET_ONE}', ''),
    ('{plugin_prefix}', '{plugin_prefix}'),
    ('*', '*'),
    ('~', '~'),
    ('a\\b', 'a\\b'),
    ('', ''),
    ('$(touch MARK)${HOME_DIR}`touch MARK`', '$(touch MARK)/h x`touch MARK`'),
]


@pytest.mark.parametrize('value,expected', HOSTILE)
def test_export_line_gives_the_value_and_runs_nothing(tmp_path, value,
                                                       expected):
    """The rendered ``export K=<value>`` line, run by bash, gives exactly
    the intended value; no command in the value runs (a marker file would
    appear)."""
    line = f'export K={site.shell_value(value)}'
    script = f'{line}\nprintf %s "$K" > out\n'
    env = {'PATH': os.environ['PATH'], 'LD_LIBRARY_PATH': '/lib/a:/lib b',
           'HOME_DIR': '/h x'}
    p = subprocess.run(['bash', '-c', script], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / 'MARK').exists(), line
    assert (tmp_path / 'out').read_text() == expected, line


def test_shell_value_of_plain_words_is_unchanged():
    assert site.shell_value('userfaultfd') == 'userfaultfd'
    assert site.shell_value('131072') == '131072'
    assert site.shell_value('tcp;ofi_rxm') == "'tcp;ofi_rxm'"
    assert site.shell_value('/p/lib:${LD_LIBRARY_PATH}') == \
        '/p/lib:"${LD_LIBRARY_PATH}"'


def test_rendered_site_environment_runs_nothing(tmp_path):
    """Through the site file: a hostile value in site YAML reaches the job
    script's export lines as text."""
    text = _frontier(lambda d: _plugin(d)['env'].update(
        EVIL='"; touch MARK; "$(touch MARK)`touch MARK`',
        GOOD='{plugin_prefix}/x'))
    s = site.parse(text, 'site/frontier.yaml')
    env = s.render_env('net-plugin', {'plugin_prefix': '/p p',
                                      'plugin_library': 'l.so',
                                      'libfabric_prefix': '/lf'}, True)
    script = ''.join(f'export {k}={site.shell_value(v)}\n'
                     for k, v in env.items())
    script += 'printf "%s|%s|%s" "$EVIL" "$GOOD" "$LD_LIBRARY_PATH" > out\n'
    p = subprocess.run(['bash', '-c', script], cwd=tmp_path, timeout=30,
                       env={'PATH': os.environ['PATH'],
                            'LD_LIBRARY_PATH': '/old'},
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / 'MARK').exists()
    assert (tmp_path / 'out').read_text() == (
        '"; touch MARK; "$(touch MARK)`touch MARK`|/p p/x|'
        '/p p/lib:/lf/lib64:/old')
