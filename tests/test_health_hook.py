"""The node health hook end to end without a GPU: a stand-in nvidia-smi and
launcher (tests/replay/fake-node) and the replayed nccl-tests outputs of
2x H200 (healthy, one NVLink channel), a hang past the limit, a hidden GPU,
a GPU the driver does not list, a missing binary.  The host name is fixed
(CCL_HEALTH_HOSTNAME), so the system is `local` whatever machine runs the
tests.  tests/test_health_trust.py has the error classes of issue 11."""

import json
import os
import subprocess

import pytest

from ccl_health.hook import probes
from ccl_health.db import store
from conftest import REPO
from helpers.node import FAKE, timed_hook

#: PCI bus stand-ins (CCL_HEALTH_SYSFS): with two GPUs, with none
SYSFS_GPU = os.path.join(REPO, 'tests', 'fixtures', 'sysfs', 'gpu-node')
SYSFS_CPU = os.path.join(REPO, 'tests', 'fixtures', 'sysfs', 'cpu-node')


def ref_1g():
    from ccl_health.judge import reference
    e = reference.load_for_system(os.path.join(REPO, 'reference'),
                                  'local').lookup('gpu', 'intra',
                                                  'all_reduce', 1, 2)
    return e.busbw[1 << 30], e.busbw[1 << 30] * (1 - e.tolerance_at(1 << 30))


def test_healthy_node(tmp_path):
    rc, line, _ = timed_hook(tmp_path)
    assert rc == 0
    ref, _ = ref_1g()
    assert line.startswith(f'HEALTHY: all_reduce 1GiB on 2 GPUs 330.4 GB/s '
                           f'(reference {ref:.1f})')
    with store.open_store(str(tmp_path / 'db.sqlite')) as db:
        [case] = db.cases()
        assert case['verdict'] == 'pass' and case['case_name'] == \
            'node-health' and case['proven'] == 'intra'
        assert case['nccl_version'] == '2.28.3+cuda13.0'


def test_degraded_link_is_named_with_numbers(tmp_path):
    rc, line, _ = timed_hook(tmp_path, env={
        'CCL_HEALTH_REPLAY_INTRA': 'intra-1channel'})
    assert rc == 1
    ref, low = ref_1g()
    # the judge's reason, both tries short: the last one speaks
    assert line.startswith(f'UNHEALTHY: isolate: GPUs 0<->1: attempt 2 of 2: '
                           f'below-reference: 1GiB 20.98 vs {ref:.2f} GB/s '
                           f'(allowed -'), line
    detail = json.loads((tmp_path / 'detail.json').read_text())
    assert detail['code'] == 1 and detail['attempts'] == 2   # retried once
    assert detail['action'] == 'isolate' and detail['probes'][0][
        'expected'] == pytest.approx(low)
    with store.open_store(str(tmp_path / 'db.sqlite')) as db:
        [case] = db.cases()
        assert case['verdict'] == 'below-reference'
        assert json.loads(case['detail_json'])['action'] == 'isolate'


def test_retry_avoids_a_false_drain(tmp_path):
    # first try degraded, second healthy: healthy (one of two passes)
    flag = tmp_path / 'once'
    rc, line, _ = timed_hook(tmp_path, env={
        'CCL_HEALTH_REPLAY_INTRA': 'intra-1channel',
        'CCL_HEALTH_REPLAY_ONCE': str(flag)})
    assert rc == 0 and line.startswith('HEALTHY'), line


def test_hang_ends_within_the_limit(tmp_path):
    # started (its header printed), then no progress: a hang
    rc, line, wall = timed_hook(tmp_path, '--limit', '4', env={
        'CCL_HEALTH_REPLAY_STALL': '60'})
    assert rc == 1 and line.startswith('UNHEALTHY: isolate: '
                                       'hang: all_reduce on GPUs '
                                       '0<->1 did not finish'), line
    assert wall < 8
    with store.open_store(str(tmp_path / 'db.sqlite')) as db:
        assert db.cases()[0]['verdict'] == 'hang'


def test_hidden_gpu_is_the_environment_not_the_node(tmp_path):
    # nvidia-smi lists both GPUs: CUDA_VISIBLE_DEVICES hiding one is the
    # hook's environment, never a reason to drain
    rc, line, _ = timed_hook(tmp_path, env={'CUDA_VISIBLE_DEVICES': '0'})
    assert rc == 2
    assert line == ("COULD-NOT-CHECK: CUDA_VISIBLE_DEVICES='0' leaves 1 of "
                    "the 2 GPUs of local:gpu visible (2 listed by the "
                    "driver): unset it to check the whole node")


def test_missing_gpu(tmp_path):
    # the node's driver lists fewer GPUs than the node must have
    rc, line, _ = timed_hook(tmp_path, '--expect-gpus', '2',
                       env={'CCL_HEALTH_FAKE_GPUS': '1'})
    assert rc == 1
    assert line == ('UNHEALTHY: isolate: '
                    'missing GPU: nvidia-smi lists 1 of the 2 '
                    'GPUs of local:gpu')
    with store.open_store(str(tmp_path / 'db.sqlite')) as db:
        [case] = db.cases()
        assert case['verdict'] == 'missing-gpu' and case['system'] == 'local'


def test_missing_binary_could_not_check(tmp_path):
    empty = tmp_path / 'empty'
    (empty / 'bin').mkdir(parents=True)
    rc, line, _ = timed_hook(tmp_path, '--tests-prefix', str(empty))
    assert rc == 2 and line.startswith('COULD-NOT-CHECK: ')
    assert 'all_reduce_perf is missing' in line


def test_no_driver_could_not_check(tmp_path):
    # a PATH without nvidia-smi, rocm-smi and rocminfo (a machine with
    # Debian's HIP packages has /usr/bin/rocminfo: tests/test_amd_builds.py)
    nodriver = tmp_path / 'no-driver-bin'
    nodriver.mkdir()
    # a GPU on the PCI bus: the driver, not the node, is missing
    rc, line, _ = timed_hook(tmp_path, path_fake=False,
                       env={'PATH': str(nodriver),
                            'CCL_HEALTH_SYSFS': SYSFS_GPU})
    assert rc == 2 and line.startswith(
        'COULD-NOT-CHECK: no GPU found (nvidia-smi: not installed; '
        'rocminfo: not installed)'), line
    # none on the bus either: not a GPU node (tests/test_hook_node_role.py)
    rc, line, _ = timed_hook(tmp_path, path_fake=False,
                       env={'PATH': str(nodriver),
                            'CCL_HEALTH_SYSFS': SYSFS_CPU})
    assert rc == 0 and line.startswith('SKIPPED: not a GPU node'), line


def test_pair_rounds_cover_every_pair_once():
    for n in (2, 4, 8):
        rounds = probes.pair_rounds(list(range(n)))
        pairs = [p for r in rounds for p in r]
        assert sorted(pairs) == [(i, j) for i in range(n)
                                 for j in range(i + 1, n)]
        for r in rounds:                      # disjoint inside a round
            flat = [g for p in r for g in p]
            assert len(flat) == len(set(flat))
    assert len(probes.pair_rounds(list(range(8)))) == 7


def test_nhc_check_file_follows_nhc_conventions():
    text = open(os.path.join(REPO, 'site', 'nhc', 'ccl_health.nhc')).read()
    assert 'function check_gpu_ccl()' in text
    assert 'die 1 "ccl-health: ${out#UNHEALTHY: }"' in text
    assert text.count('die ') == 1        # one place drains: UNHEALTHY


def test_health_mode_through_reframe(tmp_path):
    """The same hook as a ReFrame check (the `health` mode, one job per
    node with --distribute on a real partition)."""
    pytest.importorskip('reframe')
    from helpers.replay import run_suite
    p, report, _ = run_suite(
        tmp_path, '-S', f'hook_launcher={os.path.join(FAKE, "launch")}',
        env={'PATH': FAKE + os.pathsep + os.environ['PATH'],
             'CCL_HEALTH_DB': str(tmp_path / 'db.sqlite')},
        checks=os.path.join(REPO, 'checks', 'node_health.py'))
    [tc] = [t for t in report['runs'][-1]['testcases'] if not t['fixture']]
    assert tc['result'] == 'pass', tc.get('fail_reason')
    assert tc['perfvalues']['local:gpu:busbw'][0] == pytest.approx(330.4)
    with store.open_store(str(tmp_path / 'db.sqlite')) as db:
        # the hook's own record, and the ReFrame test case from the report
        names = {c['case_name']: c['verdict'] for c in db.cases()}
        assert names == {'node-health': 'pass', 'NodeHealthCheck': 'pass'}


def _stand_in_hook(tmp_path, body):
    """A stand-in ``<tmp_path>/ccl/scripts/ccl-health-check`` running the
    shell ``body``, for the NHC check; the check's file returned."""
    hook = tmp_path / 'ccl' / 'scripts' / 'ccl-health-check'
    hook.parent.mkdir(parents=True)
    hook.write_text('#!/bin/sh\n' + body)
    hook.chmod(0o755)
    return os.path.join(REPO, 'site', 'nhc', 'ccl_health.nhc')


@pytest.mark.parametrize('rc, line, expect, status', [
    (0, 'HEALTHY: all_reduce 1GiB on 2 GPUs 330.4 GB/s', '', 0),
    (1, 'UNHEALTHY: missing GPU: 1 of 2 GPUs visible to CUDA',
     'DIE 1 ccl-health: missing GPU: 1 of 2 GPUs visible to CUDA', 1),
    (2, 'COULD-NOT-CHECK: no nccl-tests build',
     'LOG check_gpu_ccl: ccl-health could not check (exit 2): no nccl-tests '
     'build', 0),
    # exit 1 without an UNHEALTHY line (a traceback): never drains
    (1, 'Traceback (most recent call last):',
     'LOG check_gpu_ccl: ccl-health could not check (exit 1): Traceback '
     '(most recent call last):', 0),
    (127, 'ccl-health-check: not found',
     'LOG check_gpu_ccl: ccl-health could not check (exit 127): '
     'ccl-health-check: not found', 0)])
def test_nhc_check_function(tmp_path, rc, line, expect, status):
    """The NHC check sourced into bash with NHC's die/log (as NHC defines
    them: die records the message and returns non-zero), around a stand-in
    hook that answers ``line`` with exit code ``rc``."""
    nhc = _stand_in_hook(tmp_path, f'echo "$@" > {tmp_path}/args\n'
                               f'echo "{line}"\nexit {rc}\n')
    script = (f'die() {{ echo "DIE $1 $2"; return 1; }}\n'
              f'log() {{ echo "LOG $*"; }}\n'
              f'source {nhc}\n'
              f'check_gpu_ccl {tmp_path}/ccl 12\n'
              f'echo "status=$?"\n')
    p = subprocess.run(['bash', '-c', script], capture_output=True,
                       text=True)
    out = p.stdout.strip().splitlines()
    assert out[-1] == f'status={status}'
    assert out[:-1] == ([expect] if expect else [])
    assert (tmp_path / 'args').read_text().split() == ['--limit', '12']


def test_nhc_check_without_a_limit_leaves_it_to_the_site_file(tmp_path):
    nhc = _stand_in_hook(tmp_path, f'echo "$#:$@" > {tmp_path}/args\n'
                               f'echo "HEALTHY: ok"\n')
    p = subprocess.run(['bash', '-c', f'source {nhc}\n'
                        f'check_gpu_ccl {tmp_path}/ccl\necho "status=$?"'],
                       capture_output=True, text=True)
    assert p.stdout.strip() == 'status=0', p.stderr
    assert (tmp_path / 'args').read_text() == '0:\n'
