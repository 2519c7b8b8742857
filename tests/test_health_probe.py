"""The hook through ONE probe process (issue 42): where the builders left
``bin/ccl-health-probe`` in the tests' prefix, the copy matrix and the
all_reduce of every GPU run in one process (CUDA and NCCL start once), its
output is split into the two programs' outputs and judged by the same
judges.  The oracle: the hook's other path, ``all_reduce_perf`` and
``ccl-health-links`` run apart, on the same captures
(tests/replay/captures/, tests/fixtures/links/) gives the same verdict and
line.  The stand-in of the program (tests/replay/probe/ccl-health-probe)
prints those captures as the program prints them: the copy matrix, the
line "# ccl-health-probe all_reduce", nccl-tests' table, the ranks' NCCL
debug logs in the one file of one process."""

import os
import re

import pytest

from ccl_health.evidence import copymatrix as links
from ccl_health.evidence import nccltests
from helpers.probe import CAPTURES, PROBE, prefix, probe_hook

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def same(tmp_path, *args, env=None, case='intra'):
    """Both paths; their lines without the seconds at the end."""
    one = probe_hook(tmp_path, True, *args, env=env, case=case)
    apart = probe_hook(tmp_path, False, *args, env=env, case=case)
    cut = re.compile(r', \d+\.\d s$')
    assert (one[0], cut.sub('', one[1])) == (apart[0], cut.sub('', apart[1]))
    assert one[2]['verdict'] == apart[2]['verdict']
    return one, apart


def test_healthy_node_in_one_process(tmp_path):
    one, apart = same(tmp_path)
    rc, line, doc, run = one
    assert rc == 0 and line.startswith(
        'HEALTHY: all_reduce 1GiB on 2 GPUs 330.4 GB/s (reference '), line
    assert 'ccl-health-links 256MiB: 2 GPU->GPU 385.9-386.1 GB/s' in line
    # one process: the copy matrix and the all_reduce asked of it, every
    # GPU visible; neither program of the other path started
    assert (run / 'probe-args').read_text() == (
        '-b 268435456 -n 5 -w 1 -a 1073741824 -i 10 -W 2 | '
        'CUDA_VISIBLE_DEVICES=0,1\n')
    assert not (run / 'links-args').exists()
    assert doc['probe_path'] == 'one process: ' + str(
        run / 'prefix' / 'bin' / 'ccl-health-probe')
    assert apart[2]['probe_path'] == (
        f'apart: ccl-health-probe is not built in {apart[3]}/prefix: '
        f'all_reduce_perf and the copy matrix run apart')
    main = doc['probes'][0]
    assert (main['proven'], main['verdict']) == ('intra', 'pass')
    assert [p.get('tool', 'nccl') for p in doc['probes']] == [
        'nccl', 'ccl-health-links']


@pytest.mark.parametrize('matrix', ['2gpu-slow-0to1.txt', '2gpu-no-peer.txt',
                                    '2gpu-wrong-data.txt',
                                    '2gpu-cuda-error.txt'])
def test_link_faults_as_apart(tmp_path, matrix):
    (rc, line, doc, run), _ = same(tmp_path,
                                   env={'CCL_HEALTH_REPLAY_LINKS': matrix})
    assert rc == 1, line
    if '# done' not in open(os.path.join(REPO, 'tests', 'fixtures', 'links',
                                         matrix)).read():
        # the copy matrix stopped: the all_reduce never ran, nothing of it
        # is judged or named
        assert [p.get('tool', 'nccl') for p in doc['probes']] == [
            'ccl-health-links']


def wrong(text):
    """The capture with 5 wrong elements in place (nccl-tests' #wrong
    column and its out-of-bounds summary, as it prints them)."""
    row = [ln for ln in text.splitlines() if ln.strip().startswith(
        '1073741824')][0]
    bad = row[:row.rstrip().rindex(' ')] + '       5'
    return text.replace(row, bad).replace(
        'Out of bounds values : 0 OK', 'Out of bounds values : 5 FAILED')


def test_wrong_results_as_apart(tmp_path):
    (rc, line, doc, _), _ = same(tmp_path, case=('intra', wrong))
    assert rc == 1 and 'wrong' in line, line
    assert doc['verdict'] == 'wrong-results'


def test_hang_in_the_all_reduce_ends_within_the_limit(tmp_path):
    rc, line, doc, _ = probe_hook(tmp_path, True, '--limit', '6', env={
        'CCL_HEALTH_REPLAY_PROBE_STALL': '60'})
    assert rc == 1 and doc['verdict'] == 'hang', line
    assert 'all_reduce on GPUs 0<->1' in line, line
    # the copy matrix completed before it: judged, and passed
    assert doc['probes'][1]['verdict'] == 'pass'


def test_no_pairs_runs_no_copy_matrix(tmp_path):
    (rc, line, doc, run), _ = same(tmp_path, '--no-pairs')
    assert rc == 0 and 'ccl-health-links' not in line, line
    assert (run / 'probe-args').read_text().startswith('-b 0 -a 1073741824')


def test_split_and_the_table_read():
    """The program's output split at its all_reduce line; nccl-tests'
    reader reads the probe's banner (its version, NCCL's)."""
    matrix = open(os.path.join(REPO, 'tests', 'fixtures', 'links',
                               '2gpu-healthy.txt')).read()
    table = open(os.path.join(CAPTURES, 'intra', 'stdout.txt')).read() \
        .replace('# nccl-tests version 2.19.6 nccl-headers=22803 '
                 'nccl-library=22803',
                 '# ccl-health-probe version 1 nccl-headers=22803 '
                 'nccl-library=22803')
    a, b = links.split_probe_output(matrix + links.PROBE_ALL_REDUCE + '\n'
                                    + table)
    assert a == matrix and b.startswith(links.PROBE_ALL_REDUCE)
    assert links.parse_links(a).complete
    res = nccltests.parse(b)
    assert (res.tests_version, res.nccl_version) == ('ccl-health-probe 1',
                                                     22803)
    assert res.complete and (1 << 30) in [r.size for r in res.rows]
    assert links.split_probe_output(matrix) == (matrix, None)


def test_reframe_backends_read_without_importing_reframe():
    """The launcher and scheduler names the hook's validation checks
    against, read from ReFrame's source, are those ReFrame registers when
    imported (the oracle), and reading them imports no ReFrame (about a
    second of every hook run)."""
    pytest.importorskip('reframe')
    import subprocess
    import sys
    code = ('import sys\n'
            'from ccl_health.sitedata import crosscheck as c\n'
            'print(c.reframe_backends())\n'
            'print(sorted(m for m in sys.modules if m.startswith("reframe")))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                         text=True, cwd=REPO, timeout=60).stdout.splitlines()
    assert out[1] == '[]'
    import importlib
    from reframe.core import backends
    for mod in (backends._launcher_backend_modules +
                backends._scheduler_backend_modules):
        importlib.import_module(mod)
    assert out[0] == str((sorted(backends._launchers),
                          sorted(backends._schedulers)))


CHECK_TWICE = '''
import sys, yaml
from ccl_health.sitedata import schemas
doc = yaml.safe_load(open(sys.argv[1]))
first = schemas.errors(doc, 'site')
had = 'jsonschema' in sys.modules
print(first, had)
'''


def _check(tmp_path, state, path):
    import subprocess
    import sys
    p = subprocess.run([sys.executable, '-c', CHECK_TWICE, str(path)],
                       capture_output=True, text=True, cwd=REPO, timeout=60,
                       env=dict(os.environ, XDG_STATE_HOME=str(state),
                                PYTHONPATH=REPO))
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_a_site_file_that_passed_is_not_checked_again(tmp_path):
    """The hook checks the same site file on every run: once it passed its
    schema, the next process does not import jsonschema for it; a changed
    file is checked again and its error named as a first check names it
    (the oracle: the same file in an empty state folder); a state folder
    that others may write in is not trusted."""
    state = tmp_path / 'state'
    site = os.path.join(REPO, 'site', 'local.yaml')
    assert _check(tmp_path, state, site) == '[] True'
    assert _check(tmp_path, state, site) == '[] False'
    assert oct((state / 'ccl-health' / 'schema-passed').stat().st_mode &
               0o777) == '0o600'
    bad = tmp_path / 'bad.yaml'
    bad.write_text(open(site).read().replace('  partition: gpu',
                                             '  partition: 7'))
    fresh = _check(tmp_path, tmp_path / 'fresh', bad)
    assert 'partition' in fresh and fresh.endswith(' True')
    assert _check(tmp_path, state, bad) == fresh
    os.chmod(state / 'ccl-health', 0o777)
    assert _check(tmp_path, state, site) == '[] True'


def test_the_timing_benchmark_writes_the_references_it_needs(tmp_path):
    """benchmarks/device/hook_timing.sh's reference step on the stand-in's
    outputs: the shipped 2-GPU entry stays; one GPU gets the peer_copy
    kinds the copy matrix measured (half of them); a GPU count the file
    has no entry for gets one at 1 GiB (half of the all_reduce's busbw)."""
    import subprocess
    import sys
    import yaml
    two = tmp_path / 'probe-0,1.txt'
    one = tmp_path / 'probe-0.txt'
    three = tmp_path / 'probe-3.txt'
    base = dict(os.environ, CCL_HEALTH_REPLAY_PROBE=os.path.join(
        CAPTURES, 'intra'))
    for out, env, args in (
            (two, {}, []),
            (one, {'CCL_HEALTH_REPLAY_LINKS': os.path.join(
                REPO, 'tests', 'fixtures', 'device', 'links',
                'links-1gpu-256M-run1.txt')}, ['-a', '0'])):
        out.write_text(subprocess.run([PROBE] + args, env=dict(base, **env),
                                      capture_output=True, text=True,
                                      timeout=60).stdout)
    # three ranks (no entry in the shipped file): the 2-GPU table with
    # one more rank line
    text = two.read_text()
    rank = [ln for ln in text.splitlines() if '#  Rank  1 ' in ln][0]
    three.write_text(text.replace(rank, rank + '\n' + rank.replace(
        'Rank  1', 'Rank  2').replace('device  1', 'device  2')))
    ref = tmp_path / 'local.yaml'
    ref.write_text(open(os.path.join(REPO, 'reference', 'local.yaml')).read())
    doc0 = yaml.safe_load(ref.read_text())
    p = subprocess.run([sys.executable, os.path.join(
        REPO, 'benchmarks', 'device', '_hook_timing_ref.py'), str(ref),
        str(one), str(two), str(three)], capture_output=True, text=True,
        env=dict(os.environ, PYTHONPATH=REPO), timeout=60)
    assert p.returncode == 0, p.stderr
    part = yaml.safe_load(ref.read_text())['partitions']['gpu']
    assert part['peer_copy']['gbps'] == {'gpu_to_gpu': 386.0, 'in_gpu': 746.0,
                                         'gpu_to_host': 27.6,
                                         'host_to_gpu': 27.6}
    old = doc0['partitions']['gpu']['entries']
    new = part['entries'][len(old):]
    assert part['entries'][:len(old)] == old
    assert not any(e.get('gpus_per_node') == 3 for e in old)
    res = nccltests.parse(links.split_probe_output(three.read_text())[1])
    row = res.by_size()[1 << 30]
    assert [(e['gpus_per_node'], e['busbw']) for e in new] == [
        (3, {'1GiB': round(min(row.out_of_place.busbw,
                               row.in_place.busbw) / 2, 2)})]


def test_the_one_process_gets_the_clean_environment(tmp_path):
    """As the two programs apart (tests/test_hook_hostile.py): the caller's
    NCCL / libfabric / CUDA tuning is dropped and named in --json, the
    site file's env kept, NCCL's debug log asked into the probe's own
    folder for the transport proof."""
    seen = tmp_path / 'seen.env'
    rc, line, doc, run = probe_hook(tmp_path, True, env={
        'CCL_HEALTH_REPLAY_PROBE_ENV': str(seen), 'NCCL_ALGO': 'Tree',
        'NCCL_P2P_DISABLE': '1', 'FI_PROVIDER': 'efa',
        'CUDA_DEVICE_MAX_CONNECTIONS': '1'})
    assert rc == 0, line
    got = dict(ln.split('=', 1) for ln in seen.read_text().splitlines())
    for var in ('NCCL_ALGO', 'NCCL_P2P_DISABLE', 'FI_PROVIDER',
                'CUDA_DEVICE_MAX_CONNECTIONS'):
        assert var not in got and var in doc['dropped_env'], var
    assert got['NCCL_NVLS_ENABLE'] == '0'              # site/local.yaml's env
    assert (got['NCCL_DEBUG'], got['NCCL_DEBUG_SUBSYS']) == ('INFO',
                                                             'INIT,NET')
    assert os.path.basename(got['NCCL_DEBUG_FILE']) == 'nccl-debug.%h.%p.log'
    assert got['CUDA_VISIBLE_DEVICES'] == '0,1'


def test_sigalrm_in_the_one_process_is_one_line_and_leaves_nothing(tmp_path):
    """NHC's watchdog (SIGALRM) while the one process hangs in its
    all_reduce: one line, exit 2, the process stopped with the hook."""
    import signal
    import subprocess
    import sys
    import time
    from helpers.node import environ
    from helpers.procs import processes_with, wait_until
    args = tmp_path / 'probe-args'
    env = environ(tmp_path, {
        'CCL_HEALTH_REPLAY_PROBE': os.path.join(CAPTURES, 'intra'),
        'CCL_HEALTH_REPLAY_PROBE_STALL': '60',
        'CCL_HEALTH_REPLAY_PROBE_ARGS': str(args)})
    p = subprocess.Popen([sys.executable, '-m', 'ccl_health.hook',
                          '--tests-prefix', prefix(tmp_path, 'prefix'),
                          '--limit', '50'], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    assert wait_until(args.exists, 30), 'the probe never started'
    time.sleep(0.5)
    p.send_signal(signal.SIGALRM)
    out, err = p.communicate(timeout=30)
    assert (p.returncode, out) == (
        2, 'COULD-NOT-CHECK: stopped by SIGALRM before the check finished\n'), \
        (out, err)
    assert wait_until(lambda: not processes_with(str(tmp_path)), 5), \
        'the probe outlived the hook'
