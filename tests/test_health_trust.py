"""The health hook drains only for a measured fault of the node (issue 11):
every error of its own is exactly one line ``COULD-NOT-CHECK: ...`` with
exit 2, HEALTHY needs complete positive evidence, and output faults of
nccl-tests on the node are UNHEALTHY naming them.  Through the real CLI
(``python -m ccl_health.hook`` and ``scripts/ccl-health-check``) with the
stand-ins of tests/replay (fake nvidia-smi, launcher, replayed nccl-tests);
damaged outputs are the real capture tests/fixtures/device/cap/intra with
one mutation each."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO
from helpers.node import (FAKE, REPLAY, ROW_1G, WRAPPER, environ, hook,
                          wrong_1g)
from helpers.nranks import intra_capture
from helpers.procs import cmdline, processes_with, wait_until
from helpers.trust import mutated, recorded

UUID0 = 'GPU-0c2f6d13-c7f6-4b78-6145-e06e786e4c2b'   # the fake nvidia-smi's
UUID1 = 'GPU-1c2f6d13-c7f6-4b78-6145-e06e786e4c2b'


def could_not_check(tmp_path, *args, env=None, cmd=None):
    rc, line, err = hook(tmp_path, *args, env=env, cmd=cmd)
    assert rc == 2 and line.startswith('COULD-NOT-CHECK: '), (rc, line, err)
    return line


# -- every error of its own: exit 2, one line --------------------------------

@pytest.mark.parametrize('args, env, says', [
    (['--limit', 'abc'], {}, "--limit 'abc': not a number of seconds"),
    (['--limit', '-5'], {}, "--limit '-5': the limit must be a positive"),
    (['--limit', 'nan'], {}, "--limit 'nan': the limit must be a positive"),
    ([], {'CCL_HEALTH_CHECK_LIMIT': 'abc'},
     "CCL_HEALTH_CHECK_LIMIT 'abc': not a number of seconds"),
    ([], {'CCL_HEALTH_CHECK_LIMIT': '0'},
     "CCL_HEALTH_CHECK_LIMIT '0': the limit must be a positive"),
    (['--repeats', '0'], {}, '--repeats 0: must be at least 1'),
    (['--iters', 'x'], {}, "argument --iters: invalid int value: 'x'"),
    (['--expect-gpus', '-1'], {}, '--expect-gpus -1: must not be negative'),
    (['--size', '12Q'], {}, "--size '12Q'"),
    (['--no-such-option'], {}, 'unrecognized arguments: --no-such-option'),
    (['--launcher', "mpirun '"], {}, 'launcher "mpirun \'"'),
])
def test_bad_option_or_environment_value(tmp_path, args, env, says):
    line = could_not_check(tmp_path, *args, env=env)
    assert says in line, line


def test_unwritable_json_path_is_found_before_measuring(tmp_path):
    line = could_not_check(tmp_path, '--json', '/etc/passwd/detail.json')
    assert line.startswith('COULD-NOT-CHECK: --json /etc/passwd/detail.json: '
                           'cannot write'), line


def test_missing_python_module(tmp_path):
    # yaml (site and reference files) not importable
    fake = tmp_path / 'nomod' / 'yaml'
    fake.mkdir(parents=True)
    (fake / '__init__.py').write_text(
        "raise ModuleNotFoundError(\"No module named 'yaml'\", name='yaml')\n")
    line = could_not_check(tmp_path, '--no-record', env={
        'PYTHONPATH': f'{tmp_path / "nomod"}{os.pathsep}{REPO}'})
    assert 'a Python module is missing' in line and "'yaml'" in line, line


@pytest.mark.parametrize('what, text, says', [
    ('site', 'system: local\ntransports: [\n', 'not valid YAML'),
    ('site', 'system: local\n', 'transports'),
    ('reference', 'system: local\npartitions: {gpu: {entries: [{transport: '
     'intra}]}}\n', "missing key"),
    ('reference', ': : :\n', 'not valid YAML'),
])
def test_invalid_site_or_reference_file(tmp_path, what, text, says):
    d = tmp_path / what
    shutil.copytree(os.path.join(REPO, what), d)
    (d / 'local.yaml').write_text(text)
    env = {'CCL_HEALTH_SITE_DIR' if what == 'site' else
           'CCL_HEALTH_REFERENCE_DIR': str(d)}
    line = could_not_check(tmp_path, env=env)
    assert str(d / 'local.yaml') in line and says in line, line


def test_unreadable_reference_folder(tmp_path):
    line = could_not_check(tmp_path, env={
        'CCL_HEALTH_REFERENCE_DIR': str(tmp_path / 'none')})
    # said before anything is measured, naming the variable and the folder
    assert line.endswith(f"CCL_HEALTH_REFERENCE_DIR {tmp_path / 'none'}: no "
                         f"such folder"), line


def test_any_exception_is_could_not_check(tmp_path):
    # a config file that raises: the exception, named, in one line
    cfg = tmp_path / 'config'
    shutil.copytree(os.path.join(REPO, 'config'), cfg)
    (cfg / 'systems' / 'frontier.py').write_text(
        'raise RuntimeError("boom")\n')
    line = could_not_check(tmp_path, '--config-dir', str(cfg))
    assert 'frontier.py: cannot load the system configuration: ' \
        'RuntimeError: boom' in line, line


# -- the launcher and the program: could not start vs node fault -------------

@pytest.mark.parametrize('launcher, says', [
    ('/nonexistent/mpirun -np', "cannot start the launcher "
     "'/nonexistent/mpirun'"),
    # a shell wrapper whose mpirun is not there: exit 127
    ("sh -c 'echo \"mpirun: command not found\" >&2; exit 127' x",
     'exit 127): mpirun: command not found'),
    # Open MPI refusing to start: nothing of nccl-tests' own printed
    ("sh -c 'echo \"There are not enough slots available in the system\"; "
     "exit 1' x", 'exit 1): There are not enough slots available'),
])
def test_launcher_that_cannot_start(tmp_path, launcher, says):
    line = could_not_check(tmp_path, '--launcher', launcher)
    assert says in line, line


def test_missing_binary(tmp_path):
    (tmp_path / 'empty' / 'bin').mkdir(parents=True)
    line = could_not_check(tmp_path, '--tests-prefix', str(tmp_path / 'empty'))
    assert 'all_reduce_perf is missing or not executable' in line


def test_limit_too_short_to_start_is_not_a_hang(tmp_path):
    line = could_not_check(tmp_path, '--limit', '0.5')
    assert 'the limit left no time for all_reduce on GPUs 0<->1' in line


# -- output faults of nccl-tests on the node: UNHEALTHY naming them ----------

def upto_1g(text):
    """The capture cut right after the complete 1 GiB row."""
    return text[:ROW_1G.search(text).end() + 1]


def nan_1g(text):
    row = ROW_1G.search(text).group(0)
    toks = row.split()
    toks[7] = toks[11] = 'nan'          # busbw out-of-place and in-place
    return text.replace(row, '  '.join(toks))


def cuda_failure(text):
    # nccl-tests' CUDACHECK: printf("%s: Test CUDA failure %s:%d '%s'\n")
    # then main's " .. %s pid %d: Test failure %s:%d\n"
    return upto_1g(text) + (
        "vm: Test CUDA failure common.cu:1094 'an illegal memory access was "
        "encountered'\n .. vm pid 25480: Test failure common.cu:1192\n")


@pytest.mark.parametrize('stdout, rc, says, verdict', [
    (None, 1, 'crash: all_reduce on GPUs 0<->1 exited with status 1',
     'crash'),
    (None, 139, 'exited with status 139', 'crash'),
    (upto_1g, 0, 'incomplete: the output of all_reduce on GPUs 0<->1 ends '
     'after 28 size(s), without its closing summary', 'incomplete'),
    (lambda t: t.split('#       size')[0], 0,
     'incomplete: the output of all_reduce on GPUs 0<->1 holds no result '
     'rows', 'incomplete'),
    (nan_1g, 0, 'wrong-results: non-finite', 'wrong-results'),
    (wrong_1g, 0, 'wrong-results: 3 wrong elements', 'wrong-results'),
    (cuda_failure, 1, "Test CUDA failure common.cu:1094 'an illegal memory "
     "access was encountered'", 'crash'),
])
def test_output_fault_is_unhealthy_naming_it(tmp_path, stdout, rc, says,
                                             verdict):
    rc_, line, err = hook(tmp_path, env=mutated(tmp_path, stdout, rc))
    assert rc_ == 1 and line.startswith('UNHEALTHY: '), (line, err)
    assert says in line, line
    [case] = recorded(tmp_path)
    assert case['verdict'] == verdict, case['reason']


def test_no_debug_log_is_could_not_check(tmp_path):
    # a clean table but nothing to prove the transport from
    line = could_not_check(tmp_path, env=mutated(tmp_path, logs=False))
    assert 'cannot prove the transport' in line, line


# -- references: the exact key, never "measured only" ------------------------

def test_partition_typo(tmp_path):
    line = could_not_check(tmp_path, '--partition', 'gpuu')
    assert "no partition 'gpuu' in system 'local'" in line, line


def test_no_reference_for_the_gpu_count(tmp_path):
    line = could_not_check(tmp_path, env={'CCL_HEALTH_FAKE_GPUS': '3'})
    assert line.startswith('COULD-NOT-CHECK: no reference for local:gpu intra '
                           'all_reduce 1 node x 3 GPUs in '), line


def test_reference_without_the_probe_size(tmp_path):
    line = could_not_check(tmp_path, '--size', '3M')
    assert line.startswith('COULD-NOT-CHECK: no reference for local:gpu intra '
                           'all_reduce 1 node x 2 GPUs at 3MiB'), line


def test_system_typo(tmp_path):
    line = could_not_check(tmp_path, env={'CCL_HEALTH_SYSTEM': 'frontierr'})
    assert "system 'frontierr' is not in" in line, line
    line = could_not_check(tmp_path, '--partition', 'batch',
                           env={'CCL_HEALTH_SYSTEM': 'frontierr'})
    assert 'frontierr' in line, line


# -- which system: as the ReFrame configuration finds it ----------------------

def test_frontier_host_name_picks_frontier(tmp_path):
    line = could_not_check(tmp_path, '--size', '3M', env={
        'CCL_HEALTH_HOSTNAME': 'frontier01234', 'CCL_HEALTH_FAKE_GPUS': '8'})
    assert 'no reference for frontier:batch intra all_reduce 1 node x 8 GPUs' \
        in line, line


def test_frontier_node_healthy_with_pairs_not_judged(tmp_path):
    # the node's all_reduce replays a capture of 8 ranks (helpers/nranks),
    # its 28 pairs the captured 2 ranks
    rc, line, err = hook(tmp_path, env={
        'CCL_HEALTH_HOSTNAME': 'frontier01234', 'CCL_HEALTH_FAKE_GPUS': '8',
        'CCL_HEALTH_REPLAY_INTRA_NP8': intra_capture(tmp_path / 'cap8', 8)})
    assert rc == 0, (line, err)
    assert re.match(r'HEALTHY: all_reduce 1GiB on 8 GPUs 330\.4 GB/s '
                    r'\(reference [\d.]+\) on frontier:batch, 28 GPU pairs ran '
                    r'clean \(bandwidth not judged: no reference for 1 node x '
                    r'2 GPUs at 1GiB\)', line), line


def test_frontier_node_of_8_gpus_is_not_checked_by_a_2_rank_output(tmp_path):
    # the all_reduce of 2x H200 (2 ranks) replayed on this 8-GPU node: its
    # busbw is not that of 1 node x 8 GPUs (said HEALTHY "on 8 GPUs"
    # before: a pass from another communicator)
    rc, line, err = hook(tmp_path, env={
        'CCL_HEALTH_HOSTNAME': 'frontier01234', 'CCL_HEALTH_FAKE_GPUS': '8'})
    assert rc == 2, (line, err)
    assert line.startswith(
        'COULD-NOT-CHECK: the output of all_reduce on GPUs 0,1,2,3,4,5,6,7 '
        'is of 2 ranks, the case asked 8: 1 node x 8 GPUs'), line


def test_perlmutter_without_an_intra_reference(tmp_path):
    # the example: on Perlmutter the hook said HEALTHY with no
    # reference at all
    line = could_not_check(tmp_path, env={
        'CCL_HEALTH_HOSTNAME': 'nid001234', 'CCL_HEALTH_FAKE_GPUS': '4',
        # nid<N> is LUMI's too (tests/test_site_pointer.py)
        'CCL_HEALTH_SYSTEM': 'perlmutter'})
    assert line.startswith('COULD-NOT-CHECK: no reference for perlmutter:gpu '
                           'intra all_reduce 1 node x 4 GPUs'), line


def test_gpu_the_driver_does_not_list_is_a_node_fault(tmp_path):
    rc, line, _ = hook(tmp_path, env={'CCL_HEALTH_HOSTNAME': 'nid001234',
                                      'CCL_HEALTH_FAKE_GPUS': '3',
                                      'CCL_HEALTH_SYSTEM': 'perlmutter'})
    assert rc == 1
    assert line == ('UNHEALTHY: isolate: '
                    'missing GPU: nvidia-smi lists 3 of the 4 GPUs '
                    'of perlmutter:gpu')


def _config(tmp_path, systems, system_name=None):
    """A configuration folder with these system files:
    ``{file name: (hostnames, {partition: gpus})}``; the systems are named
    as their files, or all ``system_name``."""
    cfg = tmp_path / 'config'
    (cfg / 'systems').mkdir(parents=True)
    for name, (hosts, parts) in systems.items():
        (cfg / 'systems' / f'{name}.py').write_text('system = %r\n' % {
            'name': system_name or name, 'hostnames': hosts, 'partitions': [
                {'name': p, 'scheduler': 'local', 'launcher': 'local',
                 'devices': [{'type': 'gpu', 'num_devices': n}]
                 if n else []} for p, n in parts.items()]})
    return str(cfg)


def test_host_name_matching_no_system(tmp_path):
    cfg = _config(tmp_path, {'local': (['login\\d+'], {'gpu': 2})})
    line = could_not_check(tmp_path, '--config-dir', cfg)
    assert "host name 'ci-test-host' matches no system" in line, line


def test_one_matching_system_else_could_not_check(tmp_path):
    # never another system's references: two systems matching the host
    # is ambiguous, whatever their order (issue 38: it took the first)
    cfg = _config(tmp_path, {'a_any': (['.*'], {'gpu2': 2}),
                             'b_match': (['ci-test'], {'gpu': 2}),
                             'c_match': (['ci-'], {'gpu2': 2})}, 'local')
    line = could_not_check(tmp_path, '--config-dir', cfg)
    assert line.startswith("COULD-NOT-CHECK: ambiguous: host name "
                           "'ci-test-host' matches local ('ci-test'), "
                           "local ('ci-') of "), line
    # one match: that one, never the system matching any host
    cfg = _config(tmp_path / 'b', {'a_any': (['.*'], {'gpu2': 2}),
                                   'b_match': (['ci-test'], {'gpu': 2})},
                  'local')
    rc, line, _ = hook(tmp_path, '--config-dir', cfg)
    assert rc == 0 and 'on local:gpu,' in line, line
    # a site's own configuration: the system matching any host is no
    # match of its nodes (issue 38: `local` judged an A100 node with H200
    # figures)
    cfg = _config(tmp_path / 'c', {'a_any': (['.*'], {'gpu': 2}),
                                   'z': (['nomatch'], {'gpu2': 2})}, 'local')
    line = could_not_check(tmp_path, '--config-dir', cfg)
    assert "matches no system of " in line and "local matches any host " \
        "and is no match on a site's own configuration" in line, line
    rc, line, _ = hook(tmp_path, '--config-dir', cfg, '--system', 'local')
    assert rc == 0 and 'on local:gpu,' in line, line


# -- the site file's health block: partition, launcher, GPUs, size, limit ---

def _site_health(tmp_path, **health):
    """A copy of site/ whose local.yaml has this health block; its
    environment for the hook."""
    import yaml
    d = tmp_path / 'site'
    shutil.copytree(os.path.join(REPO, 'site'), d)
    doc = yaml.safe_load((d / 'local.yaml').read_text())
    doc['health'] = health
    (d / 'local.yaml').write_text(yaml.safe_dump(doc))
    return {'CCL_HEALTH_SITE_DIR': str(d)}


def _bare_hook(tmp_path, *args, env=None):
    """The hook without the --launcher / --tests-prefix of hook()."""
    p = subprocess.run([sys.executable, '-m', 'ccl_health.hook',
                        '--tests-prefix', REPLAY, *args],
                       env=environ(tmp_path, env), capture_output=True,
                       text=True, timeout=120)
    lines = p.stdout.splitlines()
    assert len(lines) == 1, (p.returncode, p.stdout, p.stderr)
    return p.returncode, lines[0]


def test_launcher_and_partition_from_the_site_file(tmp_path):
    env = _site_health(tmp_path, partition='gpu',
                       launcher=os.path.join(FAKE, 'launch'))
    rc, line = _bare_hook(tmp_path, env=env)
    assert rc == 0 and line.startswith('HEALTHY: all_reduce 1GiB on 2 GPUs'), \
        line
    # the options and environment variables still override it
    rc, line = _bare_hook(tmp_path, env=dict(
        env, CCL_HEALTH_CHECK_LAUNCHER='/nonexistent/srun --ntasks'))
    assert rc == 2 and "cannot start the launcher '/nonexistent/srun'" in \
        line, line


def test_size_and_limit_from_the_site_file(tmp_path):
    launch = os.path.join(FAKE, 'launch')
    rc, line = _bare_hook(tmp_path, env=_site_health(
        tmp_path / 'a', partition='gpu', launcher=launch, size='3M'))
    assert rc == 2 and 'no reference for local:gpu intra all_reduce 1 node ' \
        'x 2 GPUs at 3MiB' in line, line
    rc, line = _bare_hook(tmp_path, env=_site_health(
        tmp_path / 'b', partition='gpu', launcher=launch, limit=0.5))
    assert rc == 2 and 'the limit left no time' in line, line
    # --limit wins over the site file
    rc, line = _bare_hook(tmp_path, '--limit', '60', env=_site_health(
        tmp_path / 'c', partition='gpu', launcher=launch, limit=0.5))
    assert rc == 0, line


def test_site_health_partition_must_exist(tmp_path):
    env = _site_health(tmp_path, partition='gpux',
                       launcher=os.path.join(FAKE, 'launch'))
    line = could_not_check(tmp_path, env=env)
    assert f"{tmp_path / 'site' / 'local.yaml'}: health.partition: no " \
        "partition 'gpux' in system 'local'" in line, line


def test_site_health_gpu_count_against_the_devices(tmp_path):
    # the fake node has 2 GPUs, the `local` partition's devices count the
    # GPUs that answer (config/systems/local.py): a site file saying 3 is
    # the count the node must have, one GPU is lost (issue 20, class 6)
    env = _site_health(tmp_path, partition='gpu', gpus_per_node=3,
                       launcher=os.path.join(FAKE, 'launch'))
    rc, line, _ = hook(tmp_path, env=env)
    assert rc == 1 and line == ('UNHEALTHY: isolate: '
                                'missing GPU: nvidia-smi lists 2 '
                                'of the 3 GPUs of local:gpu'), line
    # a site file saying 1 while 2 answer: the site file is wrong, could
    # not check, never a drain
    env = _site_health(tmp_path / 'y', partition='gpu', gpus_per_node=1,
                       launcher=os.path.join(FAKE, 'launch'))
    line = could_not_check(tmp_path, env=env)
    assert f"{tmp_path / 'y' / 'site' / 'local.yaml'}: health.gpus_per_node: " \
        "1, but partition 'gpu' of " in line and 'has 2 GPUs (devices)' in line
    # a system the ReFrame configuration does not know: the site file's
    # count is the node's
    env = _site_health(tmp_path / 'x', partition='gpu', gpus_per_node=4,
                       launcher=os.path.join(FAKE, 'launch'))
    shutil.copy(os.path.join(tmp_path, 'x', 'site', 'local.yaml'),
                os.path.join(tmp_path, 'x', 'site', 'mars.yaml'))
    ref = tmp_path / 'ref'
    shutil.copytree(os.path.join(REPO, 'reference'), ref)
    for name in ('mars.yaml',):
        (tmp_path / 'x' / 'site' / name).write_text(
            (tmp_path / 'x' / 'site' / name).read_text().replace(
                'system: local', 'system: mars'))
    (ref / 'mars.yaml').write_text((ref / 'local.yaml').read_text().replace(
        'system: local', 'system: mars'))
    rc, line, _ = hook(tmp_path, env=dict(env, CCL_HEALTH_SYSTEM='mars',
                                          CCL_HEALTH_REFERENCE_DIR=str(ref)))
    assert rc == 1 and line == ('UNHEALTHY: isolate: '
                                'missing GPU: nvidia-smi lists 2 '
                                'of the 4 GPUs of mars:gpu'), line


def test_no_system_files(tmp_path):
    (tmp_path / 'config').mkdir()
    line = could_not_check(tmp_path, '--config-dir', str(tmp_path / 'config'))
    assert f'{tmp_path / "config" / "systems"}: no system files' in line, line


def test_several_gpu_partitions_are_ambiguous(tmp_path):
    import yaml
    cfg = _config(tmp_path, {'local': (['ci-'], {'gpu': 2, 'gpu2': 2,
                                                 'cpu': 0})})
    # a site file without a health block names no partition
    sdir = tmp_path / 'site'
    shutil.copytree(os.path.join(REPO, 'site'), sdir)
    doc = yaml.safe_load((sdir / 'local.yaml').read_text())
    del doc['health']
    (sdir / 'local.yaml').write_text(yaml.safe_dump(doc))
    bare = {'CCL_HEALTH_SITE_DIR': str(sdir)}
    line = could_not_check(tmp_path, '--config-dir', cfg, env=bare)
    assert "ambiguous: system 'local' (matched by host name 'ci-test-host') " \
        'has several partitions with GPUs' in line, line
    rc, line, _ = hook(tmp_path, '--config-dir', cfg, '--partition', 'gpu',
                       env=bare)
    assert rc == 0, line
    # the shipped site file's health.partition settles it
    rc, line, _ = hook(tmp_path, '--config-dir', cfg)
    assert rc == 0 and 'on local:gpu,' in line, line


def test_config_loads_without_reframe(tmp_path):
    # the hook reads config/ with ReFrame not importable
    fake = tmp_path / 'norfm' / 'reframe'
    fake.mkdir(parents=True)
    (fake / '__init__.py').write_text("raise ImportError('no reframe')\n")
    rc, line, _ = hook(tmp_path, '--size', '3M', env={
        'PYTHONPATH': f'{tmp_path / "norfm"}{os.pathsep}{REPO}',
        'CCL_HEALTH_HOSTNAME': 'login03.frontier.olcf.ornl.gov',
        'CCL_HEALTH_FAKE_GPUS': '8'})
    assert rc == 2 and 'frontier:batch' in line, line


# -- GPU visibility -----------------------------------------------------------

@pytest.mark.parametrize('cvd, tokens', [
    (f'{UUID0},{UUID1}', [UUID0, UUID1]),
    ('GPU-0c2f,GPU-1c2f', ['GPU-0c2f', 'GPU-1c2f']),       # unique prefixes
    (f'MIG-{UUID0}/1/0,MIG-{UUID1}/2/0', [f'MIG-{UUID0}/1/0',
                                          f'MIG-{UUID1}/2/0']),
    ('MIG-0a7e0b55-3f1d-5c2e-9a41-7d0c8e6f2b19,MIG-1a7e0b55',
     ['MIG-0a7e0b55-3f1d-5c2e-9a41-7d0c8e6f2b19', 'MIG-1a7e0b55']),
    ('1,0', ['1', '0']),
    (f' {UUID1} ,0', [UUID1, '0']),                        # mixed
    ('0,1,-1', ['0', '1']),               # CUDA stops at a negative index
])
def test_visible_devices_forms_on_a_healthy_node(tmp_path, cvd, tokens):
    import json
    rc, line, err = hook(tmp_path, env={'CUDA_VISIBLE_DEVICES': cvd,
                                        'CCL_HEALTH_FAKE_MIG': '1'})
    assert rc == 0 and line.startswith('HEALTHY: all_reduce 1GiB on 2 GPUs'), \
        (line, err)
    detail = json.load(open(tmp_path / 'detail.json'))
    # the probe sees its GPUs by the names it was given
    assert detail['probes'][0]['tokens'] == tokens
    assert sorted(detail['probes'][0]['gpus']) == [0, 1]


@pytest.mark.parametrize('cvd, says', [
    ('abc', "'abc' is neither a GPU index, a GPU UUID (GPU-...) nor a MIG id"),
    ('0,,1', 'an empty entry'),
    ('0,0', "'0' names a GPU twice"),
    ('GPU-ffff', "names GPU(s) GPU-ffff that are not on this node"),
    ('0,1,7', 'names GPU(s) 7 that are not on this node'),
    ('', 'leaves 0 of the 2 GPUs of local:gpu visible'),
    ('NoDevFiles', 'leaves 0 of the 2 GPUs of local:gpu visible'),
    ('-1', 'leaves 0 of the 2 GPUs of local:gpu visible'),
])
def test_visible_devices_the_hook_cannot_use(tmp_path, cvd, says):
    line = could_not_check(tmp_path, env={'CUDA_VISIBLE_DEVICES': cvd})
    assert says in line, line


# -- the bash wrapper keeps the contract when Python cannot ------------------

def test_wrapper_passes_verdicts_through(tmp_path):
    rc, line, _ = hook(tmp_path, cmd=[WRAPPER])
    assert rc == 0 and line.startswith('HEALTHY: '), line
    rc, line, _ = hook(tmp_path, cmd=[WRAPPER], env=mutated(tmp_path, rc=1))
    assert rc == 1 and line.startswith('UNHEALTHY: isolate: crash: '), line
    line = could_not_check(tmp_path, '--limit', 'abc', cmd=[WRAPPER])
    assert "--limit 'abc'" in line


def _tree(tmp_path):
    """A copy of the wrapper in a tree of its own (no .venv)."""
    tree = tmp_path / 'ccl'
    (tree / 'scripts').mkdir(parents=True)
    shutil.copy(WRAPPER, tree / 'scripts')
    return tree


def _run_with_venv(tree):
    """The wrapper of ``tree`` run with a ``.venv`` whose python is this
    one: (that .venv's bin folder, the finished process)."""
    venv = tree / '.venv' / 'bin'
    venv.mkdir(parents=True)
    os.symlink(sys.executable, venv / 'python')
    return venv, subprocess.run([str(tree / 'scripts' / 'ccl-health-check')],
                                env=dict(os.environ, PYTHONPATH=''),
                                capture_output=True, text=True, timeout=60)


def test_wrapper_without_python(tmp_path):
    tree = _tree(tmp_path)
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    for tool in ('dirname', 'mktemp', 'cat', 'wc', 'head', 'grep', 'tail',
                 'cut', 'rm'):
        os.symlink(shutil.which(tool), bindir / tool)
    p = subprocess.run(['/bin/bash', str(tree / 'scripts' /
                                         'ccl-health-check')],
                       env={'PATH': str(bindir)}, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2
    assert p.stdout == (f'COULD-NOT-CHECK: no Python: neither {tree}/.venv/bin/'
                        f'python nor python3 on PATH\n')


def test_wrapper_when_the_package_does_not_import(tmp_path):
    tree = _tree(tmp_path)
    (tree / 'ccl_health').mkdir()
    (tree / 'ccl_health' / '__init__.py').write_text('def (:\n')
    (tree / 'ccl_health' / 'hook').mkdir()
    (tree / 'ccl_health' / 'hook' / '__init__.py').write_text('')
    (tree / 'ccl_health' / 'hook' / 'check.py').write_text('')
    venv, p = _run_with_venv(tree)
    # python exits 1 with a traceback: never a drain
    assert p.returncode == 2, (p.stdout, p.stderr)
    [line] = p.stdout.splitlines()
    assert line.startswith(f'COULD-NOT-CHECK: {venv}/python '
                           f'(ccl_health.hook.check) ended with exit 1 and no '
                           f'verdict line: SyntaxError'), line
    assert 'Traceback' in p.stderr          # kept on stderr for a person


def test_wrapper_when_the_hook_prints_no_verdict(tmp_path):
    # exit 0 without a HEALTHY line is no all-clear
    tree = _tree(tmp_path)
    (tree / 'ccl_health').mkdir()
    (tree / 'ccl_health' / '__init__.py').write_text('')
    (tree / 'ccl_health' / 'hookcli.py').write_text(
        'def install_early():\n    pass\n\n\n'
        'def main(argv):\n    print("all good")\n    return 0\n')
    _, p = _run_with_venv(tree)
    assert p.returncode == 2
    assert p.stdout.startswith('COULD-NOT-CHECK: ') and \
        p.stdout.rstrip().endswith('ended with exit 0 and no verdict line: '
                                   'all good'), p.stdout


def test_sigterm_stops_the_probes_and_is_could_not_check(tmp_path):
    import signal
    e = environ(tmp_path, {'CCL_HEALTH_REPLAY_SLEEP': '60'})
    p = subprocess.Popen([WRAPPER, '--tests-prefix', REPLAY, '--launcher',
                          os.path.join(FAKE, 'launch'), '--limit', '50'],
                         env=e, stdout=subprocess.PIPE, text=True,
                         stderr=subprocess.PIPE, start_new_session=True)

    def probing():
        return [pid for pid in processes_with(str(tmp_path))
                if any(w.endswith('all_reduce_perf') for w in cmdline(pid))]
    # the probe runs (the replayed all_reduce_perf sleeps 60 s) before the
    # signal comes: what it started is there to be stopped
    assert wait_until(probing, 40), 'the probe never started'
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 2, (out, err)
    assert out == ('COULD-NOT-CHECK: stopped by SIGTERM before the check '
                   'finished\n'), (out, err)
    # nothing it started is left
    assert wait_until(lambda: not processes_with(str(tmp_path)), 10), \
        [cmdline(pid) for pid in processes_with(str(tmp_path))]


# -- the node's GPUs as its tools list them -----------------------------------

def test_nvidia_smi_query_as_the_real_one_prints_it():
    from ccl_health.evidence import nodefacts as node
    # captured on an H100 (nvidia-smi 580.159.04)
    out = ('0, GPU-63536d13-c7f6-4b78-6145-e06e786e4c2b, NVIDIA H100 80GB '
           'HBM3, 9.0, 580.159.04\n')
    assert node.parse_nvidia_smi_csv(out) == [[
        '0', 'GPU-63536d13-c7f6-4b78-6145-e06e786e4c2b',
        'NVIDIA H100 80GB HBM3', '9.0', '580.159.04']]
    # the stand-in answers the same query in the same form
    fake = subprocess.run([os.path.join(FAKE, 'nvidia-smi'),
                           '--query-gpu=index,uuid,name,compute_cap,'
                           'driver_version', '--format=csv,noheader'],
                          capture_output=True, text=True).stdout
    assert [r[1] for r in node.parse_nvidia_smi_csv(fake)] == [UUID0, UUID1]


# rocminfo's agent blocks (ROCm 6), as in the outputs users post: a CPU
# agent, a discrete GPU with its unique id, an APU with the placeholder
# GPU-XX, and ISA names that are no agents
ROCMINFO = """\
==========
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD EPYC 7A53 64-Core Processor
  Uuid:                    CPU-XX
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx90a
  Uuid:                    GPU-4e7c6e8b3a0f1c2d
  Marketing Name:          AMD Instinct MI250X
  Device Type:             GPU
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-
*******
Agent 3
*******
  Name:                    gfx90a
  Uuid:                    GPU-9b1d00c2f3a4e5d6
  Marketing Name:          AMD Instinct MI250X
  Device Type:             GPU
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-
*******
Agent 4
*******
  Name:                    gfx1036
  Uuid:                    GPU-XX
  Device Type:             GPU
"""


def test_rocminfo_agents():
    from ccl_health.evidence import nodefacts as node
    assert node.parse_rocminfo(ROCMINFO) == [
        ('gfx90a', 'GPU-4e7c6e8b3a0f1c2d'), ('gfx90a', 'GPU-9b1d00c2f3a4e5d6'),
        ('gfx1036', '')]


def test_amd_visible_devices_layers():
    from ccl_health.evidence import nodefacts as node
    gpus = node.Gpus('amd', 4, 'gfx90a', 'gfx90a', uuids=[
        'GPU-4e7c6e8b3a0f1c2d', 'GPU-9b1d00c2f3a4e5d6', 'GPU-aa', 'GPU-bb'])
    # ROCR first (node indices or UUIDs), then HIP indices within it
    vis = node.visible_gpus(gpus, {'ROCR_VISIBLE_DEVICES':
                                   'GPU-9b1d00c2f3a4e5d6,3,0',
                                   'HIP_VISIBLE_DEVICES': '2,0'})
    assert vis.indices == [0, 1] and vis.variable == 'HIP_VISIBLE_DEVICES'
    # HIP reads CUDA_VISIBLE_DEVICES too
    assert node.visible_gpus(gpus, {'CUDA_VISIBLE_DEVICES': '3'}).indices \
        == [3]
    with pytest.raises(node.VisibilityError):
        node.visible_gpus(gpus, {'ROCR_VISIBLE_DEVICES': 'MIG-x/1/2'})


def test_probe_environment_names_the_probe_gpus():
    from ccl_health.hook import probe
    from ccl_health.hook import probes
    from ccl_health.evidence import nodefacts as node
    nv = node.Gpus('nvidia', 2, uuids=[UUID0, UUID1])
    vis = node.visible_gpus(nv, {'CUDA_VISIBLE_DEVICES': f'{UUID1},{UUID0}'})
    p = probe.Probe((0,), 1, tokens=(UUID0,))
    assert probes.probe_env({}, nv, vis, p) == {'CUDA_VISIBLE_DEVICES': UUID0}
    # indices the hook chose are nvidia-smi's: PCI bus order
    vis = node.visible_gpus(nv, {})
    p = probe.Probe((1, 0), 1, tokens=('1', '0'))
    assert probes.probe_env({}, nv, vis, p) == {
        'CUDA_VISIBLE_DEVICES': '1,0', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'}
    amd = node.Gpus('amd', 4, uuids=['GPU-aa', 'GPU-bb', 'GPU-cc', 'GPU-dd'])
    env = {'ROCR_VISIBLE_DEVICES': '3,1', 'CUDA_VISIBLE_DEVICES': '0'}
    vis = node.visible_gpus(amd, env)
    p = probe.Probe((3,), 1, tokens=('0',))
    assert probes.probe_env(env, amd, vis, p) == {
        'ROCR_VISIBLE_DEVICES': '3,1', 'HIP_VISIBLE_DEVICES': '0'}


def test_unreadable_site_file_whatever_raises(tmp_path):
    # local.yaml a folder: open() raises IsADirectoryError, whichever layer
    # catches it the hook says COULD-NOT-CHECK naming the file
    d = tmp_path / 'site'
    shutil.copytree(os.path.join(REPO, 'site'), d)
    os.remove(d / 'local.yaml')
    (d / 'local.yaml').mkdir()
    line = could_not_check(tmp_path, env={'CCL_HEALTH_SITE_DIR': str(d)})
    assert 'local.yaml' in line, line


def test_recording_failure_never_changes_the_verdict(tmp_path):
    rc, line, err = hook(tmp_path, '--db', '/etc/passwd/db.sqlite')
    assert rc == 0 and line.startswith('HEALTHY: '), line
    assert 'not recorded in the performance database' in err
    rc, line, err = hook(tmp_path, '--db', '/etc/passwd/db.sqlite',
                         env=mutated(tmp_path, rc=1))
    assert rc == 1 and line.startswith('UNHEALTHY: isolate: crash: '), line


def test_amd_node_counts_every_gpu_whatever_rocr_hides(tmp_path):
    # a rocminfo that, like ROCr, lists only what ROCR_VISIBLE_DEVICES shows
    bindir = tmp_path / 'amdbin'
    bindir.mkdir()
    blocks = ROCMINFO.split('*******\nAgent 4')[0]
    (tmp_path / 'all.txt').write_text(blocks)
    (tmp_path / 'one.txt').write_text(blocks.split('*******\nAgent 3')[0])
    (bindir / 'rocminfo').write_text(
        '#!/bin/sh\nif [ -n "${ROCR_VISIBLE_DEVICES+x}" ]; then '
        f'cat {tmp_path}/one.txt; else cat {tmp_path}/all.txt; fi\n')
    (bindir / 'rocminfo').chmod(0o755)
    path = f'{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin'
    line = could_not_check(tmp_path, env={'PATH': path,
                                          'ROCR_VISIBLE_DEVICES': '0'})
    assert line == ("COULD-NOT-CHECK: ROCR_VISIBLE_DEVICES='0' leaves 1 of "
                    "the 2 GPUs of local:gpu visible (2 listed by the "
                    "driver): unset it to check the whole node"), line
    # both GPUs visible, by UUID and by index: the replayed node is healthy
    rc, line, _ = hook(tmp_path, env={
        'PATH': path, 'ROCR_VISIBLE_DEVICES': 'GPU-9b1d00c2f3a4e5d6,0'})
    assert rc == 0 and line.startswith('HEALTHY: all_reduce 1GiB on 2 GPUs'), \
        line
