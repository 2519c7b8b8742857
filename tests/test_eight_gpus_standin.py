"""What the CPU can prove of the hook on an 8-GPU node (issue 46), through
its real door (``python -m ccl_health.hook``) on the stand-in node of 8
GPUs (tests/replay/fake-node's nvidia-smi and launcher): the copy matrix of
8 GPUs in the program's own format (helpers/linkmatrix), the all_reduce an
8-rank capture built from the 2x H200 one with NCCL's and nccl-tests'
format strings (helpers/nranks), NCCL's RAS a stand-in built from its
protocol (helpers/ras).  The reference of 1 node x 8 GPUs is the one
benchmarks/device/eight_gpus.sh gives the hook on the device (the shipped
file has 2 and 4 GPUs)."""

import os
import subprocess
import sys

from conftest import REPO
from helpers.linkmatrix import matrix_text
from helpers.node import timed_hook
from helpers.nranks import PID0, intra_capture
from helpers.probe import probe_hook
from helpers.ras import Standin

CHECK = os.path.join(REPO, 'benchmarks', 'device', '_eight_gpus_check.py')


def eight(tmp_path, gbps=None, ranks=8):
    (tmp_path / 'm8.txt').write_text(matrix_text(8, gbps or {}))
    subprocess.run([sys.executable, CHECK, 'reference',
                    os.path.join(REPO, 'reference', 'local.yaml'),
                    str(tmp_path / 'ref' / 'local.yaml')], check=True,
                   capture_output=True)
    env = {'CCL_HEALTH_FAKE_GPUS': '8',
           'CCL_HEALTH_REPLAY_LINKS': str(tmp_path / 'm8.txt'),
           'CCL_HEALTH_REFERENCE_DIR': str(tmp_path / 'ref')}
    if ranks:
        env['CCL_HEALTH_REPLAY_PROBE'] = intra_capture(
            tmp_path / f'cap{ranks}', ranks)
    return env


def links_of(doc):
    """The copy matrix's links of the hook's last try (a failing check
    is tried again)."""
    return [p for p in doc['probes']
            if p.get('tool') == 'ccl-health-links'][-1]['links']


def test_a_healthy_8_gpu_node_every_pair_and_a_short_line(tmp_path):
    rc, line, doc, _ = probe_hook(tmp_path, True, env=eight(tmp_path))
    assert rc == 0, line
    assert line.startswith(
        'HEALTHY: all_reduce 1GiB on 8 GPUs 330.4 GB/s (reference 177.7) on '
        'local:gpu, ccl-health-links 256MiB: 56 GPU->GPU 386.0 GB/s '
        '(reference 386.0), '), line
    assert len(line) < 160
    names = {ln['name'] for ln in links_of(doc)}
    assert names == {f'GPU {a}->{b}' for a in range(8) for b in range(8)
                     if a != b}
    [nccl] = [p for p in doc['probes'] if p.get('tool', 'nccl') == 'nccl']
    assert nccl['proven'] == 'intra' and 'P2P/CUMEM x192' in nccl['why']


def test_one_slow_pair_of_56_is_named(tmp_path):
    rc, line, doc, _ = probe_hook(tmp_path, True, env=eight(
        tmp_path, {(3, 6): 150.0}))
    assert rc == 1, line
    assert line == ('UNHEALTHY: isolate: GPU 3->6 copy 150.0 GB/s < 308.8 '
                    '(reference 386.0)'), line
    assert [ln['name'] for ln in links_of(doc) if not ln['ok']] == [
        'GPU 3->6']
    assert len(links_of(doc)) == 56


def test_an_8_gpu_node_is_not_passed_by_an_all_reduce_of_2_ranks(tmp_path):
    # the 2x H200 capture itself: said HEALTHY "on 8 GPUs" before
    rc, line, doc, _ = probe_hook(tmp_path, True, env=eight(tmp_path,
                                                             ranks=None))
    assert rc == 2, line
    assert line.startswith(
        'COULD-NOT-CHECK: the output of all_reduce on GPUs 0,1,2,3,4,5,6,7 '
        'is of 2 ranks, the case asked 8: 1 node x 8 GPUs'), line
    assert len(links_of(doc)) == 56 and all(ln['ok'] for ln in
                                            links_of(doc))


def test_a_stopped_rank_of_8_is_named_by_rank_gpu_and_pid(tmp_path):
    """One rank per GPU (mpirun -np 8, as eight_gpus.sh's hang phase runs
    the hook), rank 5 stopped: RAS names it before the run is killed."""
    env = eight(tmp_path, ranks=None)
    env['CCL_HEALTH_REPLAY_INTRA_NP8'] = intra_capture(tmp_path / 'cap8', 8)
    pids = tuple(PID0 + r for r in range(8))
    with Standin('incomplete', pids=pids, stopped=5) as s:
        env.update({'CCL_HEALTH_REPLAY_STALL': '60', 'NCCL_RAS_ADDR': s.addr})
        rc, line, wall = timed_hook(tmp_path, '--no-pairs', '--limit', '6',
                                    env=env)
        assert s.connections >= 1
    assert rc == 1 and line.startswith(
        'UNHEALTHY: isolate: hang: all_reduce on GPUs 0,1,2,3,4,5,6,7 did '
        'not finish within the '), line
    assert line.endswith(f': rank 5 (node1 GPU 5, pid {PID0 + 5}) '
                         f'unresponsive (NCCL RAS at {s.addr})'), line
    assert wall < 15
