"""Transport proof on real NCCL_DEBUG=INFO logs captured on 2x H200
(NCCL 2.28.3, aws-ofi-nccl 1.21.1 over libfabric 1.22 tcp;ofi_rxm)."""

import glob
import os

import pytest

from ccl_health import CclHealthError
from ccl_health.evidence import debuglog as transport
from ccl_health.evidence.proof import prove
from conftest import CAPTURE


def evidence(case):
    files = sorted(glob.glob(os.path.join(CAPTURE, case, 'nccl-debug.*.log')))
    assert len(files) == 2, case      # one log per rank
    return transport.read_evidence(files)


@pytest.mark.parametrize('case,proven', [
    ('intra', 'intra'), ('net-socket', 'net-socket'),
    ('net-plugin', 'net-plugin'),
    # GDR asked for, but the tcp provider cannot do it: plain plugin
    ('net-plugin-gdr', 'net-plugin'),
    ('plugin-missing-fallback', 'net-socket'),
    ('intra-1channel', 'intra'),
])
def test_proven_transport(case, proven):
    assert evidence(case).proven() == proven


def test_each_transport_passes_on_its_own_log():
    for t in ('intra', 'net-socket', 'net-plugin'):
        proof = prove(t, evidence(t))
        assert proof.ok, proof.reason


def test_intra_log_says_using_network_socket_but_is_intra():
    # NCCL names a network even when every channel is P2P: the proof must
    # read the channel lines, not "Using network".
    ev = evidence('intra')
    assert ev.using_network == 'Socket'
    assert set(ev.via) == {'P2P/CUMEM'}
    assert not prove('net-socket', ev).ok


def test_plugin_that_did_not_load_is_a_fallback():
    proof = prove('net-plugin', evidence('plugin-missing-fallback'))
    assert not proof.ok and proof.proven == 'net-socket'
    assert proof.reason.startswith('fell back to NET/Socket')
    assert 'Could not find: /nonexistent/libnccl-net-ofi.so' in proof.reason


def test_gdr_not_supported_is_named():
    proof = prove('net-plugin-gdr', evidence('net-plugin-gdr'))
    assert not proof.ok
    assert 'without GPUDirect RDMA' in proof.reason
    assert 'GDR not supported' in proof.reason


def test_socket_run_is_not_a_plugin_run():
    proof = prove('net-plugin', evidence('net-socket'))
    assert not proof.ok and 'no "Loaded net plugin"' in proof.reason


def test_network_run_is_not_intra():
    proof = prove('intra', evidence('net-plugin'))
    assert not proof.ok and 'went over the network' in proof.reason


def test_versions_are_read_from_the_log():
    v = evidence('net-plugin').versions
    assert v['nccl_version'] == '2.28.3+cuda13.0'
    assert v['plugin_version'] == '1.21.1'
    assert v['libfabric_version'] == '1.22'
    assert v['provider'] == 'tcp;ofi_rxm'
    assert v['cuda_driver'] == '13000'
    assert evidence('plugin-tcp-hang').versions['provider'] == 'tcp'


def test_gdrdma_channel_lines_prove_gdr():
    log = '\n'.join(
        f'nid1:1:2 [0] NCCL INFO Channel 0{i}/0 : 0[0] -> 8[0] [send] via '
        f'NET/AWS Libfabric/0/GDRDMA' for i in range(4))
    log += '\nnid1:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v8)'
    ev = transport.evidence_from_text(log)
    assert ev.proven() == 'net-plugin-gdr'
    assert prove('net-plugin-gdr', ev).ok
    assert prove('net-plugin', ev).ok     # the plugin ran


def test_no_log_and_no_channels():
    assert not prove('intra', transport.Evidence()).ok
    ev = transport.evidence_from_text(
        'vm:1:1 [0] NCCL INFO NCCL version 2.28.3+cuda13.0')
    proof = prove('net-plugin', ev)
    assert not proof.ok and 'no channel was connected' in proof.reason


def test_unknown_transport_is_an_error():
    with pytest.raises(CclHealthError, match='unknown transport'):
        prove('nvlink', transport.Evidence())


def test_published_efa_log_proves_plugin_with_gdr():
    from conftest import REPO, read
    text = read(os.path.join(REPO, 'tests', 'fixtures', 'published',
                             'nccl-debug_aws-libfabric_gdrdma_efa-p4d-2node.log'))
    ev = transport.evidence_from_text(text)
    assert ev.proven() == 'net-plugin-gdr'
    assert ev.versions['provider'] == 'efa'
    assert ev.versions['nccl_version'] == '2.9.9+cuda11.2'
    assert ev.using_network == 'AWS Libfabric'
    # NCCL 2.9 printed no "Loaded net plugin" line: "Using network" names
    # the plugin instead
    assert ev.plugin_loaded is None and ev.plugin_name == 'AWS Libfabric'
    assert ev.via['NET/AWS Libfabric/GDRDMA'] == 64
    assert ev.via['P2P/IPC'] > 0             # intra-node hops of 2 nodes
    proof = prove('net-plugin-gdr', ev)
    assert proof.ok and 'AWS Libfabric with GPUDirect RDMA' in proof.reason
    assert not prove('net-socket', ev).ok


# -- published logs (tests/fixtures/published/SOURCES.md) -------------------

def published(name):
    from conftest import REPO, read
    return transport.evidence_from_text(
        read(os.path.join(REPO, 'tests', 'fixtures', 'published', name)))


def test_published_efa_log_per_rank_and_two_nodes():
    ev = published('nccl-debug_aws-libfabric_gdrdma_efa-p4d-2node.log')
    assert len(ev.ranks) == 16                  # one per host:pid
    assert ev.hosts == ['nccl-tests-efa-16-worker-0',
                        'nccl-tests-efa-16-worker-1']
    # "Failed to find ncclCollNetPlugin_v4 symbol." on every rank: the
    # optional CollNet half, not a failure of the net plugin
    assert ev.plugin_failure is None
    assert prove('net-plugin-gdr', ev, nodes=2).ok
    proof = prove('intra', ev, nodes=2)
    assert not proof.ok and '2-node run' in proof.reason


def test_published_rccl_socket_log_mi250x_two_nodes():
    # RCCL 2.16.5: every channel line ends in " comm 0x... nRanks 08"
    ev = published('rccl-debug_socket_mi250x-2node_rccl-issue-1026.log')
    assert ev.via == {'P2P/IPC': 24, 'NET/Socket': 16}
    assert ev.versions == {'rccl_version': '2.16.5+hip5.6'}
    assert len(ev.ranks) == 8 and ev.hosts == ['g1064', 'g1072']
    assert ev.proven() == 'net-socket'
    assert prove('net-socket', ev, nodes=2).ok
    proof = prove('net-plugin', ev, nodes=2)
    assert not proof.ok and proof.proven == 'net-socket'
    assert proof.reason.startswith('fell back to NET/Socket')
    assert ('the plugin did not load: No plugin found (librccl-net.so), '
            'using internal implementation' in proof.reason)
    assert not prove('intra', ev, nodes=2).ok
    assert not prove('intra', ev).ok     # network seen on 1 too


def test_published_rccl_ucx_plugin_log_probe_then_load():
    ev = published(
        'rccl-debug_rdma-plugin-ucx_gdrdma_2node_rccl-issue-1261.log')
    # "Failed to find ncclNetPlugin_v6 symbol." then "Loaded net plugin
    # NCCL RDMA Plugin (v4)": a load
    assert ev.plugin_loaded == 'NCCL RDMA Plugin'
    assert ev.plugin_failure is None
    assert ev.using_network == 'UCX'
    assert ev.via == {'NET/UCX/GDRDMA': 16}
    assert ev.versions == {'rccl_version': '2.18.3+hip5.7'}
    proof = prove('net-plugin-gdr', ev, nodes=2)
    assert proof.ok, proof.reason
    assert 'NCCL RDMA Plugin with GPUDirect RDMA' in proof.reason
    assert not prove('net-socket', ev, nodes=2).ok
    assert not prove('intra', ev, nodes=2).ok


def test_published_rccl_ucx_log_half_gdr_without_plugin_line():
    ev = published('rccl-debug_ucx-plugin_mixed-gdr_2node_rccl-issue-502.log')
    assert ev.via == {'NET/UCX/GDRDMA': 4, 'NET/UCX': 4}
    assert ev.proven() == 'net-plugin'         # send side without GDR
    # no "Loaded net plugin" line in the excerpt: the channels name the
    # plugin's network (only a plugin prints a name NCCL does not build in)
    assert ev.plugin_loaded is None and ev.plugin_name == 'UCX'
    proof = prove('net-plugin', ev, nodes=2)
    assert proof.ok and proof.proven == 'net-plugin', proof
    assert 'named by its channel lines' in proof.reason
    assert 'fallback' not in proof.reason and 'fell back' not in proof.reason
    # GPUDirect RDMA on the receive side only: not the plugin with GDR
    proof = prove('net-plugin-gdr', ev, nodes=2)
    assert not proof.ok and proof.proven == 'net-plugin'
    assert 'without GPUDirect RDMA on 4 of 8' in proof.reason


def test_published_libfabric_v10_without_gdr():
    ev = published('nccl-debug_libfabric-v10_efa-no-gdr_g6e-4pod-rank0.log')
    assert ev.via == {'NET/Libfabric': 24}
    assert ev.plugin_loaded == 'Libfabric' and ev.plugin_failure is None
    assert ev.versions == {
        'cuda_driver': '13000', 'nccl_version': '2.27.3+cuda12.9',
        'plugin_package': 'aws-ofi-nccl', 'plugin_version': '1.16.2',
        'libfabric_version': '2.1', 'provider': 'efa'}
    assert prove('net-plugin', ev).ok
    proof = prove('net-plugin-gdr', ev)
    assert not proof.ok and proof.proven == 'net-plugin'
    assert proof.reason.endswith(
        'Could not disable CUDA API usage for HMEM, disabling GDR')
    # NCCL counted 4 nodes; the log is rank 0's pod only
    proof = prove('net-plugin', ev, nodes=4)
    assert not proof.ok and 'only 1 host(s)' in proof.reason


def test_published_intra_shm_log_with_a_loaded_plugin():
    ev = published('nccl-debug_shm-intra_plugin-loaded_g6e-1node-4proc.log')
    assert ev.via == {'SHM/direct': 28}
    assert len(ev.ranks) == 4
    assert ev.plugin_loaded == 'Libfabric'
    assert prove('intra', ev).ok
    for asked in ('net-socket', 'net-plugin', 'net-plugin-gdr'):
        proof = prove(asked, ev)
        assert not proof.ok and 'no channel used the network' in proof.reason
