"""Issue 21, 1: a value read from a site file is never evaluated by a shell
outside the job script, where it is literal text; names that reach a shell
(library and module names) have strict schema patterns; every generated
shell line quotes through ccl_health.shell."""

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ccl_health import buildcache, shell
from ccl_health import CclHealthError
from ccl_health.sitedata import site
from conftest import REPO

PY = sys.executable

#: one value of every metacharacter class, each of which would create
#: MARK/<n> if any shell evaluated it
def hostile(mark):
    m = str(mark)
    return {
        'S_SUBST': f'$(touch {m}/subst)',
        'S_BACKQ': f'`touch {m}/backq`',
        'S_SEMI': f'x; touch {m}/semi',
        'S_PIPE': f'x | touch {m}/pipe',
        'S_AMP': f'x & touch {m}/amp',
        'S_REDIR': f'x > {m}/redir',
        'S_NEWLINE': f'x\ntouch {m}/newline',
        'S_IFS': f'x;touch${{IFS}}{m}/ifs',
        'S_QUOTES': f'x\'; touch {m}/sq; \'"; touch {m}/dq; "',
    }


def expected(value):
    """``${NAME}`` is the one form the job's shell expands (to a value, in
    the same word: ``${IFS}`` splits nothing); all else is literal."""
    return value.replace('${IFS}', ' \t\n')


def bash_value(word, env=None):
    """What bash makes of ``export K=<word>``."""
    p = subprocess.run(['bash', '-c', f'export K={word}\nprintf %s "$K"'],
                       capture_output=True, text=True,
                       env=dict(env or {}, PATH=os.environ['PATH']))
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize('inert', [False, True])
def test_every_class_is_one_literal_word(tmp_path, inert):
    for name, value in hostile(tmp_path).items():
        word = shell.word(value, inert=inert)
        assert bash_value(word) == expected(value), name
        if inert:        # ReFrame's expandvars finds nothing to run
            assert '$(' not in word and '`' not in word, (name, word)
    assert os.listdir(tmp_path) == []


def test_reframe_loadenv_runs_nothing(tmp_path):
    """ReFrame's loadenv (which runs ``$(...)`` and backquotes with a shell,
    even inside single quotes) on a site value as the job's env_vars."""
    pytest.importorskip('reframe')
    from reframe.utility import osext
    for name, value in hostile(tmp_path).items():
        osext.expandvars(site.shell_value(value))
    osext.expandvars(site.shell_value(f'a`touch {tmp_path}/x`b$(touch '
                                      f'{tmp_path}/y)'))
    assert os.listdir(tmp_path) == []


def _site_dir(tmp_path, mark):
    doc = yaml.safe_load(open(os.path.join(REPO, 'site', 'frontier.yaml')))
    values = hostile(mark)
    doc['env'].update(values)
    doc['transports']['net-socket']['env'].update(
        {f'T_{k}': v for k, v in values.items()})
    doc['transports']['net-socket']['ld_library_path'] = [
        f'/p/$(touch {mark}/ldsubst)', f'/q/`touch {mark}/ldbackq`']
    d = tmp_path / 'site'
    d.mkdir()
    (d / 'frontier.yaml').write_text(yaml.safe_dump(doc))
    return d, values


def test_dry_run_runs_no_site_value_and_writes_it_literally(tmp_path):
    pytest.importorskip('reframe')
    mark = tmp_path / 'mark'
    mark.mkdir()
    site_dir, values = _site_dir(tmp_path, mark)
    env = dict(os.environ, CCL_HEALTH_MODULES_SYSTEM='nomod',
               CCL_HEALTH_SITE_DIR=str(site_dir),
               CCL_HEALTH_ASSUME_GPUS='2:sm_90')
    env.pop('CCL_HEALTH_DB', None)
    p = subprocess.run([os.path.join(REPO, 'scripts', 'run'), '--output',
                        str(tmp_path / 'out'), '--dry-run', '--',
                        '--system', 'frontier', '-n',
                        'AllReduceSweep%transport=net-socket'],
                       cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert os.listdir(mark) == []
    scripts = list((tmp_path / 'out' / 'stage').rglob('rfm_job.sh'))
    assert scripts
    text = scripts[0].read_text()
    # the job's bash reads every value literally (the exports alone, run)
    lines, keep = [], False
    for ln in text.splitlines():
        if ln.startswith('export '):
            lines.append(ln)
            keep = ln.count("'") % 2 == 1
        elif keep:
            lines.append(ln)
            keep = ln.count("'") % 2 == 0
    dump = '\n'.join(lines) + '\n' + ''.join(
        f'printf "%s\\0" "${k}"; ' for k in values) + ''.join(
        f'printf "%s\\0" "$T_{k}"; ' for k in values) + \
        'printf "%s\\0" "$LD_LIBRARY_PATH"'
    r = subprocess.run(['bash', '-c', dump], capture_output=True, text=True,
                       env={'PATH': os.environ['PATH'],
                            'LD_LIBRARY_PATH': '/old'})
    assert r.returncode == 0, r.stderr
    got = r.stdout.split('\0')
    want = [expected(v) for v in values.values()]
    assert got[:len(values)] == want
    assert got[len(values):2 * len(values)] == want
    assert got[2 * len(values)] == \
        f'/p/$(touch {mark}/ldsubst):/q/`touch {mark}/ldbackq`:/old'
    assert os.listdir(mark) == []


@pytest.mark.parametrize('library', [
    'libx.so;touch${IFS}pwned;$(id)', 'libx.so`id`', 'lib x.so', 'a|b.so',
    'a&b.so', 'a>b.so', 'a\nb.so', "a'b.so", 'a"b.so', '../libx.so'])
def test_schema_refuses_library_names_that_reach_a_shell(library):
    doc = yaml.safe_load(open(os.path.join(REPO, 'site', 'local.yaml')))
    doc['build']['plugin']['library'] = library
    with pytest.raises(CclHealthError, match='library'):
        site.parse(yaml.safe_dump(doc), 'x.yaml', 'local')


@pytest.mark.parametrize('module', [
    'rocm/5.2.3;id', 'a$(id)', 'a`id`', 'a b', 'a|b', 'a&b', 'a>b', 'a\nb'])
def test_schema_refuses_module_names_that_reach_a_shell(module):
    doc = yaml.safe_load(open(os.path.join(REPO, 'site', 'frontier.yaml')))
    doc['transports']['net-socket']['modules'] = [module]
    with pytest.raises(CclHealthError, match='modules'):
        site.parse(yaml.safe_dump(doc), 'x.yaml', 'frontier')


def test_schema_takes_real_names():
    doc = yaml.safe_load(open(os.path.join(REPO, 'site', 'frontier.yaml')))
    doc['transports']['net-socket']['modules'] = [
        'LUMI/23.09', 'craype-accel-amd-gfx90a', 'rocm/5.2.3', 'gcc@12.2']
    doc['build']['plugin'] = {'library': 'librccl-net-ofi.so.1.2+x_y'}
    site.parse(yaml.safe_dump(doc), 'x.yaml', 'frontier')


def test_build_script_quotes_every_site_value(tmp_path):
    """A product name and a mirror path in the build script's messages are
    words of ccl_health.shell, not text inside double quotes."""
    mark = tmp_path / 'mark'
    mark.mkdir()

    class Recipe:
        class source:
            name, version, sha256 = 'x', '1', '0' * 64
            tarball, topdir, url = 'x-1.tar.gz', 'x-1', 'https://e/x.tgz'
        steps = [('build', 'true')]
        toolchain, deps = {}, {}
        products = [f'lib/$(touch {mark}/p)`touch {mark}/q`"; touch '
                    f'{mark}/r; "']

        def key(self):
            return 'k'

        def prefix(self, cache):
            return os.path.join(cache, 'x-1-k')

    script = buildcache.build_script(Recipe(), str(tmp_path / 'cache'),
                                     mirror=str(tmp_path / '$(touch m)'))
    # the whole script parses, and its message lines run nothing: run
    # only the product check, with fail() printing its words
    line = next(ln for ln in script.splitlines() if 'left no' in ln and
                'lib/' in ln)
    r = subprocess.run(['bash', '-c', 'fail() { printf "%s" "$*"; }\n'
                        'INSTALL_PREFIX=/nonexistent\n' + line],
                       capture_output=True, text=True)
    assert os.listdir(mark) == []
    assert Recipe.products[0] in r.stdout
    subprocess.run(['bash', '-n', '-c', script], check=True)


def test_hook_launcher_is_argv_words_never_a_shell_line(tmp_path):
    """The hook's launcher (site health.launcher) is split into argv words
    (shlex) and started without a shell: each metacharacter stays text."""
    doc = yaml.safe_load(open(os.path.join(REPO, 'site', 'local.yaml')))
    doc['health']['launcher'] = (f"srun '$(touch {tmp_path}/a)' "
                                 f"'`touch {tmp_path}/b`' ';' '|' '&' '>' "
                                 f"'x${{IFS}}y' '\"q\"'")
    s = site.parse(yaml.safe_dump(doc), 'x.yaml', 'local')
    assert s.health.launcher == ['srun', f'$(touch {tmp_path}/a)',
                                 f'`touch {tmp_path}/b`', ';', '|', '&', '>',
                                 'x${IFS}y', '"q"']
    assert os.listdir(tmp_path) == []


def test_fleet_node_step_line_keeps_every_word_literal(tmp_path):
    """The fleet's one-step node check is a ``sh -c`` line: every word of
    the site's node_probe is one literal word there."""
    from ccl_health import fleetcli as fleet_cli
    from ccl_health.sitedata.fleetconfig import FleetConfig
    mark = tmp_path / 'mark'
    mark.mkdir()
    values = [v for k, v in hostile(mark).items() if k != 'S_IFS']
    cfg = FleetConfig.from_dict({'node_probe': ['printf', '%s\\0'] + values},
                                'x.yaml')
    argv, _ = fleet_cli.Programs(cfg, str(tmp_path / 'run')).nodes(['n1'])
    assert argv[:2] == ['sh', '-c']
    r = subprocess.run(argv, capture_output=True, text=True,
                       env={'PATH': os.environ['PATH']})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split('\0')[:-1] == values
    assert os.listdir(mark) == []


def test_fleet_step_env_is_literal(tmp_path):
    """Site and fleet env values reach srun steps as an environment (no
    shell): ``${NAME}`` filled from this environment, all else literal."""
    from ccl_health import fleetcli as fleet_cli
    from ccl_health.sitedata.fleetconfig import FleetConfig
    values = {k: v for k, v in hostile(tmp_path).items() if k != 'S_IFS'}
    doc = yaml.safe_load(open(os.path.join(REPO, 'site', 'local.yaml')))
    doc['env'].update(values)
    s = site.parse(yaml.safe_dump(doc), 'x.yaml', 'local')
    cfg = FleetConfig.from_dict({'transport': 'net-socket', 'env': values},
                                'x.yaml')
    env = fleet_cli.step_env(s, cfg)
    for k, v in values.items():
        assert env[k] == v
    assert os.listdir(tmp_path) == []


def test_one_quoting_function():
    """Every shell word the product writes comes from ccl_health/shell.py:
    no other quoting (shlex.quote / shlex.join) in the product."""
    found = []
    for top in ('ccl_health', 'builders', 'checks', 'config'):
        for d, _, files in os.walk(os.path.join(REPO, top)):
            for f in files:
                path = os.path.join(d, f)
                if not f.endswith('.py') or path.endswith(
                        os.path.join('ccl_health', 'shell.py')):
                    continue
                for n, line in enumerate(open(path), 1):
                    if re.search(r'shlex\.(quote|join)\(', line):
                        found.append(f'{path}:{n}')
    assert not found, found


def test_quote_is_literal(tmp_path):
    for name, value in hostile(tmp_path).items():
        assert bash_value(shell.quote(value)) == value, name
    assert shell.join(['a b', '$(x)']) == "'a b' '$(x)'"
