"""The health hook's link check: where ``ccl-health-links`` is installed
beside nccl-tests, the NCCL pair rounds give way to one all-GPU all_reduce
plus the copy matrix, judged per direction against the partition's
``peer_copy`` reference.  The matrices of two GPUs are replayed by
tests/replay/links/ccl-health-links from tests/fixtures/links/ (written in
the program's own format: no machine of several GPUs was lent); the
one-GPU output is the device capture of tests/fixtures/device/links/."""

import json
import os
import shutil

import pytest

from ccl_health.evidence import copymatrix as links
from ccl_health.judge import reference
from ccl_health.db import store
from ccl_health.judge.linkjudge import judge_links
from ccl_health.judge.verdicts import Verdict
from conftest import REPO
from helpers.linkmatrix import matrix_text
from helpers.nranks import intra_capture
from helpers.node import timed_hook

REPLAY = os.path.join(REPO, 'tests', 'replay')
STAND_IN = os.path.join(REPLAY, 'links', 'ccl-health-links')
CAPTURES = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap')
DEVICE = os.path.join(REPO, 'tests', 'fixtures', 'device', 'links')


def prefix_with_links(tmp_path, links_program=STAND_IN):
    """An install prefix as the builders leave it: all_reduce_perf (the
    replayed one) and bin/ccl-health-links."""
    prefix = tmp_path / 'prefix'
    (prefix / 'bin').mkdir(parents=True)
    os.symlink(os.path.join(REPLAY, 'bin', 'all_reduce_perf'),
               prefix / 'bin' / 'all_reduce_perf')
    if links_program:
        os.symlink(links_program, prefix / 'bin' / links.PROGRAM)
    return str(prefix)


def links_hook(tmp_path, *args, matrix='2gpu-healthy.txt', env=None,
               prefix=None):
    e = {'CCL_HEALTH_REPLAY_DIR': CAPTURES,
         'CCL_HEALTH_REPLAY_LINKS': matrix,
         'CCL_HEALTH_REPLAY_LINKS_ARGS': str(tmp_path / 'links-args')}
    e.update(env or {})
    return timed_hook(tmp_path, '--tests-prefix', prefix or prefix_with_links(
        tmp_path), *args, env=e)


def detail(tmp_path):
    return json.loads((tmp_path / 'detail.json').read_text())


def shipped_peer_copy():
    return reference.load_for_system(os.path.join(REPO, 'reference'),
                                     'local').peer_copy('gpu')


def test_healthy_node_checks_the_links_with_the_copy_matrix(tmp_path):
    rc, line, _ = links_hook(tmp_path)
    pc = shipped_peer_copy()
    assert rc == 0, line
    assert line.startswith('HEALTHY: all_reduce 1GiB on 2 GPUs 330.4 GB/s '
                           '(reference ')
    assert (f', ccl-health-links 256MiB: 2 GPU->GPU 385.9-386.1 GB/s '
            f'(reference {pc.gbps["gpu_to_gpu"]:.1f}), ') in line, line
    # the reference's size, the default repeats; every GPU made visible
    assert (tmp_path / 'links-args').read_text() == (
        f'-b {pc.size} -n 5 -w 1 | CUDA_VISIBLE_DEVICES=0,1\n')
    d = detail(tmp_path)
    assert [p.get('tool', 'nccl') for p in d['probes']] == [
        'nccl', 'ccl-health-links']
    assert [(ln['name'], ln['gbps'], ln['ok']) for ln in
            d['probes'][1]['links']] == [('GPU 0->1', 386.12, True),
                                         ('GPU 1->0', 385.87, True)]
    with store.open_store(str(tmp_path / 'db.sqlite')) as db:
        [case] = db.cases()
        assert case['verdict'] == 'pass' and case['proven'] == 'intra'


def test_slow_link_is_named_with_its_numbers(tmp_path):
    rc, line, _ = links_hook(tmp_path, matrix='2gpu-slow-0to1.txt')
    ref = shipped_peer_copy().gbps['gpu_to_gpu']
    assert rc == 1
    assert line == ('UNHEALTHY: isolate: '
                    f'GPU 0->1 copy 72.1 GB/s < {ref * 0.8:.1f} '
                    f'(reference {ref:.1f})')
    assert detail(tmp_path)['attempts'] == 2          # retried once
    with store.open_store(str(tmp_path / 'db.sqlite')) as db:
        assert db.cases()[0]['verdict'] == 'below-reference'


def test_pair_that_cannot_peer_is_named(tmp_path):
    rc, line, _ = links_hook(tmp_path, matrix='2gpu-no-peer.txt')
    assert rc == 1
    assert line == ('UNHEALTHY: isolate: '
                    'GPU 0->1 cannot peer (no peer access: its '
                    'copies would go through the host); GPU 1->0 cannot '
                    'peer (no peer access: its copies would go through the '
                    'host)')
    assert detail(tmp_path)['verdict'] == 'fallback'


def without_peer_copy(tmp_path):
    refdir = tmp_path / 'ref'
    refdir.mkdir()
    text = open(os.path.join(REPO, 'reference', 'local.yaml')).read()
    start = text.index('    # the GPU links')
    end = text.index('    entries:')
    (refdir / 'local.yaml').write_text(text[:start] + text[end:])
    return {'CCL_HEALTH_REFERENCE_DIR': str(refdir)}


@pytest.mark.parametrize('matrix, says', [
    ('2gpu-slow-0to1.txt', '2 GPU->GPU 72.1-385.9 GB/s (not judged: no '
     'peer_copy reference for local:gpu)'),
    ('2gpu-no-peer.txt', 'ccl-health-links 256MiB: ; GPU 0->1 cannot peer, '
     'GPU 1->0 cannot peer (not judged: no peer_copy reference for '
     'local:gpu)')])
def test_without_a_reference_the_links_ran_clean_not_judged(tmp_path, matrix,
                                                            says):
    # as the NCCL pair rounds without a 2-GPU reference: the all_reduce is
    # judged, the links are named and not judged
    rc, line, _ = links_hook(tmp_path, matrix=matrix,
                             env=without_peer_copy(tmp_path))
    assert rc == 0, line
    assert says in line, line


@pytest.mark.parametrize('matrix, rc_program, code, starts', [
    ('2gpu-cuda-error.txt', 1, 1,
     'UNHEALTHY: isolate: '
     'ccl-health-links: error: cudaEventSynchronize(g.stop) '
     'failed on GPU 0: an illegal memory access was encountered'),
    ('2gpu-wrong-data.txt', 1, 1,
     'UNHEALTHY: isolate: '
     'ccl-health-links: error: wrong data after the copy GPU 0 '
     '-> GPU 1: byte 268431360 is 0x00, expected 0x5b'),
    ('2gpu-cut.txt', 0, 1, 'UNHEALTHY: isolate: '
                           'ccl-health-links stopped before its '
     'closing line (1 directions measured)'),
    ('2gpu-healthy.txt', 139, 1, 'UNHEALTHY: isolate: '
                                 'ccl-health-links exited with '
     'status 139'),
    (os.path.join(DEVICE, 'links-usage-error.txt'), 2, 2,
     'COULD-NOT-CHECK: ccl-health-links: usage error: bad size: 1x'),
    (os.path.join(DEVICE, 'links-no-device.txt'), 1, 1,
     'UNHEALTHY: isolate: '
     'ccl-health-links: error: cudaGetDeviceCount(&n) failed: no '
     'CUDA-capable device is detected'),
    (os.path.join(DEVICE, 'links-1gpu-256M-run1.txt'), 0, 1,
     'UNHEALTHY: isolate: '
     'missing GPU: ccl-health-links sees 1 of the 2 GPUs made '
     'visible to it'),
    ('/dev/null', 127, 2, 'COULD-NOT-CHECK: '),
])
def test_program_faults(tmp_path, matrix, rc_program, code, starts):
    rc, line, _ = links_hook(tmp_path, matrix=matrix, env={
        'CCL_HEALTH_REPLAY_LINKS_RC': str(rc_program)})
    assert (rc, line[:len(starts)]) == (code, starts), line


def test_hang_ends_within_the_limit(tmp_path):
    rc, line, wall = links_hook(tmp_path, '--limit', '5', env={
        'CCL_HEALTH_REPLAY_LINKS_STALL': '60'})
    assert rc == 1 and line.startswith(
        'UNHEALTHY: isolate: '
        'hang: ccl-health-links (the copy matrix of the GPU '
        'links) did not finish'), line
    assert wall < 10


def test_without_the_program_the_nccl_pair_rounds_stay(tmp_path):
    # 4 GPUs and no ccl-health-links in the prefix: today's rounds of NCCL
    # pairs (6 pairs), never a silent skip of the links
    # (the node's all_reduce a capture of 4 ranks, helpers/nranks)
    rc, line, _ = links_hook(tmp_path, prefix=prefix_with_links(
        tmp_path, links_program=None), env={
            'CCL_HEALTH_FAKE_GPUS': '4', 'CCL_HEALTH_REPLAY_INTRA_NP4':
            intra_capture(tmp_path / 'cap4', 4)})
    assert rc == 0, line
    assert ', 6 GPU pairs ran clean' in line or ', 6 GPU pairs ok' in line, \
        line
    assert not (tmp_path / 'links-args').exists()


def test_no_pairs_skips_the_copy_matrix(tmp_path):
    rc, line, _ = links_hook(tmp_path, '--no-pairs')
    assert rc == 0 and 'ccl-health-links' not in line, line
    assert not (tmp_path / 'links-args').exists()


def site_with(tmp_path, **health):
    sitedir = tmp_path / 'site'
    sitedir.mkdir()
    text = open(os.path.join(REPO, 'site', 'local.yaml')).read()
    extra = ''.join(f'  {k}: {v}\n' for k, v in health.items())
    text = text.replace('  launcher: mpirun --bind-to none -np\n',
                        '  launcher: mpirun --bind-to none -np\n' + extra)
    (sitedir / 'local.yaml').write_text(text)
    return {'CCL_HEALTH_SITE_DIR': str(sitedir)}


def test_site_links_path(tmp_path):
    # a prebuilt ccl-health-links named by the site file wins over the
    # prefix's (which has none here)
    prog = tmp_path / 'site-links'
    os.symlink(STAND_IN, prog)
    rc, line, _ = links_hook(tmp_path, prefix=prefix_with_links(
        tmp_path, links_program=None), env=site_with(tmp_path, links=prog))
    assert rc == 0 and 'ccl-health-links 256MiB: 2 GPU->GPU' in line, line


def test_site_links_path_missing_is_could_not_check(tmp_path):
    rc, line, _ = links_hook(tmp_path, env=site_with(
        tmp_path, links=tmp_path / 'nope'))
    assert rc == 2 and line.endswith(
        f'health.links: {tmp_path}/nope is missing or not executable'), line


def test_one_gpu_node_judged_by_its_copies_alone(tmp_path):
    """One GPU: no NCCL path (busbw 0), the device capture's in-GPU and
    host<->GPU copies judged against the reference the device run wrote
    (tests/fixtures/device/links/ref-ok-local.yaml)."""
    refdir = tmp_path / 'ref'
    refdir.mkdir()
    shutil.copy(os.path.join(DEVICE, 'ref-ok-local.yaml'),
                refdir / 'local.yaml')
    env = {'CCL_HEALTH_FAKE_GPUS': '1', 'CCL_HEALTH_REFERENCE_DIR':
           str(refdir)}
    prefix = prefix_with_links(tmp_path)
    rc, line, _ = links_hook(tmp_path, matrix=os.path.join(
        DEVICE, 'links-1gpu-256M-run1.txt'), env=env, prefix=prefix)
    assert rc == 0, line
    assert line.startswith(
        'HEALTHY: ccl-health-links 256MiB: 1 in-GPU 1492.1 GB/s (reference '
        '1492.0), 1 GPU->host 55.2 GB/s (reference 54.7), 1 host->GPU 55.2 '
        'GB/s (reference 54.8) on local:gpu (1 GPU: no all_reduce)'), line
    # run3's host->GPU 52.92 is within 20 % of 54.79
    rc, line, _ = links_hook(tmp_path, matrix=os.path.join(
        DEVICE, 'links-1gpu-256M-run3.txt'), env=env, prefix=prefix)
    assert rc == 0, line


# -- the verdict on a matrix, more GPUs --------------------------------------

def test_eight_gpus_every_failing_link_named_by_node_index():
    res = links.parse_links(matrix_text(8, {(3, 5): 150.0, (5, 3): 151.0},
                                        no_peer=[(6, 7)]))
    assert len(res.links) == 54 and res.complete
    pc = reference.PeerCopy(256 << 20, 0.2, 't', {'gpu_to_gpu': 386.0},
                            pairs={(12, 14): 100.0})
    # the program's GPU i is the node's GPU i + 10 here
    v, why, judged = judge_links(res, 0, pc, label=lambda i: i + 10,
                                 expect_gpus=8)
    assert v is Verdict.FALLBACK
    assert why == (
        'GPU 16->17 cannot peer (no peer access: its copies would go '
        'through the host); GPU 17->16 cannot peer (no peer access: its '
        'copies would go through the host); GPU 13->15 copy 150.0 GB/s < '
        '308.8 (reference 386.0); GPU 15->13 copy 151.0 GB/s < 308.8 '
        '(reference 386.0)')
    # a pair's own reference (GPUs behind a PCIe switch: 12->14)
    assert [(ln.src, ln.dst, ref) for ln, ref, _, _ in judged
            if ref != 386.0] == [('2', '4', 100.0)]


def test_missing_direction_is_incomplete():
    text = matrix_text(3, {}).replace(
        '1 2 268435456 0.000695 386.00\n', '')
    text = text.replace('# done 6', '# done 5')
    v, why, _ = judge_links(links.parse_links(text), 0, None)
    assert (v, why) == (Verdict.INCOMPLETE,
                        'ccl-health-links did not measure GPU 1->2')


def test_nan_and_zero_are_wrong_results():
    text = matrix_text(2, {}).replace('0 1 268435456 0.000695 386.00',
                                      '0 1 268435456 0.000000 nan')
    v, why, _ = judge_links(links.parse_links(text), 0, None)
    assert v is Verdict.WRONG_RESULTS and 'GPU 0->1 (nan)' in why


def test_reference_of_another_size_is_not_used():
    res = links.parse_links(matrix_text(2, {(0, 1): 10.0}))
    pc = reference.PeerCopy(1 << 30, 0.2, 't', {'gpu_to_gpu': 386.0})
    v, _, judged = judge_links(res, 0, pc)
    assert v is Verdict.PASS and all(ref is None for _, ref, _, _ in judged)


def test_device_capture_parses():
    for name in ('links-1gpu-256M-run1.txt', 'links-1gpu-1G.txt',
                 'links-1gpu-64M-n20.txt'):
        res = links.parse_links(open(os.path.join(DEVICE, name)).read())
        assert res.complete and not res.errors and not res.unknown
        assert res.gpus == {0: '0000:00:06.0 NVIDIA H100 80GB HBM3'}
        kinds = {ln.kind: ln for ln in res.links}
        assert set(kinds) == {'in_gpu', 'gpu_to_host', 'host_to_gpu'}
        for ln in res.links:     # GB/s = bytes / seconds, as printed
            # (seconds printed to the microsecond, GB/s to 0.01)
            lo, hi = (ln.bytes / (ln.seconds + d) / 1e9 for d in (5e-7,
                                                               -5e-7))
            assert lo - 0.005 <= ln.gbps <= hi + 0.005
        assert 1300 < kinds['in_gpu'].gbps < 1600
        assert 45 < kinds['host_to_gpu'].gbps < 60
        assert res.init_s < 0.5 and res.total_s < 1.2
        assert judge_links(res, 0, expect_gpus=1)[0] is Verdict.PASS
    res = links.parse_links(open(os.path.join(
        DEVICE, 'links-usage-error.txt')).read())
    assert res.errors == ['usage error: bad size: 1x (usage: ccl-health-links '
                          '[-b BYTES] [-n REPEATS] [-w WARMUP])']


def test_the_nccl_tests_recipe_builds_the_links_program(tmp_path):
    """The build fixture's steps end with ``links`` (nvcc, or hipcc for
    rccl-tests), its product is checked before the stamp, and the
    source's checksum is in the command: a changed source is a new recipe
    key, a new prefix."""
    pytest.importorskip('reframe')
    import types
    from builders import nccl_tests
    from ccl_health import buildcache
    stub = types.SimpleNamespace(package='nccl-tests', gpu_arch='sm_90',
                                 extra=lambda k, d=None: {
                                     'cuda_home': '/opt/cuda 13'}.get(k, d),
                                 gpu=lambda: (2, 'sm_90', 'nvidia'))
    steps = dict(nccl_tests.CollectiveTestsBuild.steps(stub))
    assert list(steps)[-3:] == ['install', 'links', 'probe']
    src = nccl_tests.LINKS_SOURCE
    assert steps['links'].startswith(
        f"'/opt/cuda 13'/bin/nvcc -O2 -o \"$PREFIX\"/bin/ccl-health-links "
        f"{buildcache.shell_value(src)} # ccl_health_links.cu sha256 ")
    # the one probe process: the same source with NCCL, for this GPU only
    assert steps['probe'].startswith(
        "'/opt/cuda 13'/bin/nvcc -gencode=arch=compute_90,code=sm_90 -O2 "
        "-DCCL_HEALTH_PROBE -o \"$PREFIX\"/bin/ccl-health-probe "
        f"{buildcache.shell_value(src)} -lnccl # ccl_health_links.cu + "
        "gpu_compat.h sha256 "), steps['probe']
    products = nccl_tests.CollectiveTestsBuild.products.fget(
        types.SimpleNamespace(program=types.SimpleNamespace(
            products=['bin/all_reduce_perf'])))
    assert os.path.join('bin', 'ccl-health-links') in products
    assert os.path.join('bin', 'ccl-health-probe') in products
    copy = tmp_path / 'ccl_health_links.cu'
    copy.write_text(open(src).read() + '\n/* changed */\n')
    old, old_probe = steps['links'], steps['probe']
    nccl_tests.LINKS_SOURCE = str(copy)
    try:
        new = nccl_tests.links_step('nccl-tests', 'sm_90', stub.extra)
        new_probe = nccl_tests.probe_step('nccl-tests', 'sm_90', stub.extra)
    finally:
        nccl_tests.LINKS_SOURCE = src
    assert new.split(' sha256 ')[1] != old.split(' sha256 ')[1]
    assert new_probe.split(' sha256 ')[1] != old_probe.split(' sha256 ')[1]


def test_site_nvbandwidth(tmp_path):
    """A site without ccl-health-links that names NVIDIA's nvbandwidth:
    its write-CE matrix (text built from nvbandwidth's format strings,
    tests/test_links.py) judged the same way, each slow direction named."""
    from helpers.nvbandwidth import WRITE, WRITE_DESC, nvb_output
    out = tmp_path / 'nvb.txt'
    out.write_text(nvb_output(WRITE, WRITE_DESC, [[None, 386.1],
                                                  [90.5, None]]))
    prog = tmp_path / 'nvbandwidth'
    os.symlink(STAND_IN, prog)
    prefix = prefix_with_links(tmp_path, links_program=None)
    rc, line, _ = links_hook(tmp_path, matrix=str(out), prefix=prefix,
                             env=site_with(tmp_path, nvbandwidth=prog))
    ref = shipped_peer_copy().gbps['gpu_to_gpu']
    assert rc == 1
    assert line == ('UNHEALTHY: isolate: '
                    f'GPU 1->0 copy 90.5 GB/s < {ref * 0.8:.1f} '
                    f'(reference {ref:.1f})')
    assert (tmp_path / 'links-args').read_text().splitlines()[0] == (
        f'-t {WRITE} -b 256 | CUDA_VISIBLE_DEVICES=0,1')
