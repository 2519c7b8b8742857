"""scripts/explain (ccl_health.explain.explain) on real logs published by
others (tests/fixtures/published/SOURCES.md says where each comes from):
the conclusion a person would draw from each, checked: the transport, the
verdict class, and what was not judged."""

import os

import pytest

from ccl_health import explain as X
from ccl_health.evidence import debuglog, nccltests
from conftest import REPO

PUB = os.path.join(REPO, 'tests', 'fixtures', 'published')


def pub(name):
    return os.path.join(PUB, name)


def doc_of(*names, **kw):
    return X.explain([pub(n) for n in names], **kw)


#: a debug log alone: (file, proven, ok, words in the reason); the verdict
#: is always could-not-check (bandwidth not judged)
LOGS_ALONE = [
    # the plugin failed to start on one rank; two ranks used sockets, one
    # is seen only through its NET/OFI lines: mixed, a fallback
    ('nccl-debug_ofi-init-failed_mixed-socket_aws-ofi-nccl-issue-715.log',
     'net-socket', False, ('different networks', 'NET/Socket on 2 of 3',
                           'initialization failed')),
    ('nccl-debug_ofi-init-failed_socket_aws-ofi-nccl-issue-889.log',
     'net-socket', False, ('fell back to NET/Socket',
                           'aws-ofi-nccl initialization failed')),
    # prefix-less lines, numbered by the author: IB with GPUDirect RDMA
    ('nccl-debug_no-prefix_ring-ib-gdrdma_2node_nccl-issue-385.log',
     'net-ib', True, ('GPUDirect RDMA on every path', 'NET/IB/GDRDMA x2')),
    # two log lines merged into one by concurrent writers
    ('nccl-debug_merged-lines_ring-p2p_1node_nccl-issue-147.log',
     'intra', True, ('P2P/IPC x',)),
    ('nccl-debug_socket-no-ib_2node-one-host-shown_nccl-issue-952.log',
     'net-socket', True, ('NET/Socket x2',)),
    # the default "No plugin found": nobody asked; no connection: unproven
    ('nccl-debug_default-no-plugin_no-channels_nccl-tests-issue-188.log',
     None, False, ('no channel lines',)),
    ('nccl-debug_efa-plugin_no-channels_aws-ofi-nccl-issue-161.log',
     None, False, ('no channel lines', 'AWS Libfabric')),
    ('nccl-debug_socket_1rank-no-connections_nccl-issue-1267.log',
     None, False, ('no channel lines', 'Socket')),
    # published before this issue: the logs of others' real runs
    ('rccl-debug_socket_mi250x-2node_rccl-issue-1026.log',
     'net-socket', True, ('NET/Socket x16',)),
    ('rccl-debug_rdma-plugin-ucx_gdrdma_2node_rccl-issue-1261.log',
     'net-plugin-gdr', True, ('NCCL RDMA Plugin',)),
    # the plugin was named by the environment (Plugin name set by env),
    # loaded, and NCCL's builtin IB carried every channel: a fallback
    ('nccl-debug_builtin-ib-roce_gdrdma_ofi-plugin-unused_8rank-node.log',
     'net-ib', False, ('instead of the plugin', 'libnccl-net.so')),
    # the same plugin named on a one-node run that kept P2P/SHM on: intra
    ('nccl-debug_shm-intra_plugin-loaded_g6e-1node-4proc.log',
     'intra', True, ('SHM/direct x28', 'no network was needed')),
    ('nccl-debug_libfabric-v10_efa-no-gdr_g6e-4pod-rank0.log',
     'net-plugin', True, ('plugin Libfabric',)),
]


@pytest.mark.parametrize('name,proven,ok,words', LOGS_ALONE,
                         ids=[c[0].split('_')[1] + '-' + c[0][-12:-4]
                              for c in LOGS_ALONE])
def test_a_debug_log_alone_proves_the_transport_and_judges_no_bandwidth(
        name, proven, ok, words):
    doc = doc_of(name)
    assert doc['files'] == [{'path': pub(name), 'kind': 'log'}]
    assert doc['verdict'] == 'could-not-check' and doc['exit_code'] == 2
    assert 'debug log only' in doc['reason']
    assert 'bandwidth not judged' in doc['reason'] and not doc['rows']
    t = doc['transport']
    assert (t['proven'], t['ok']) == (proven, ok), t
    for w in words:
        assert w in t['reason'], (w, t['reason'])
    text = X.render(doc)
    assert 'debug log only' in text and 'COULD-NOT-CHECK' in text


def test_the_mixed_node_names_each_rank_group():
    ev = debuglog.read_evidence([pub(LOGS_ALONE[0][0])])
    nets = {k: r.networks for k, r in ev.ranks.items()}
    assert nets == {'algo-1:17774': {'Socket'}, 'algo-1:17780': {'Socket'},
                    'algo-1:17773': {'OFI plugin'}}
    assert debuglog.asked_from_log(ev) == 'net-plugin'


def test_the_transport_asked_is_read_from_the_log_in_every_door():
    # explain without --transport, and prove() without asked: the same
    name = 'nccl-debug_builtin-ib-roce_gdrdma_ofi-plugin-unused_8rank-node.log'
    ev = debuglog.read_evidence([pub(name)])
    proof = debuglog.prove(None, ev)
    assert proof.asked == 'net-plugin-gdr' and proof.proven == 'net-ib'
    assert not proof.ok
    # asked for IB (--transport), the same log is proven IB
    assert debuglog.prove('net-ib', ev).ok


def test_the_oldest_hashless_table_with_an_error_column_is_wrong_results():
    name = 'nccl-tests_hashless-table_error-column_wrong_nccl-tests-issue-37.txt'
    doc = doc_of(name, exit_status=0)
    assert doc['files'][0]['kind'] == 'output'
    assert doc['format'] == 'nccl-tests-2.0' and doc['complete']
    assert doc['out_of_bounds'] == 2 and doc['verdict'] == 'wrong-results'
    assert [r['size'] for r in doc['rows']] == [4294967296]
    assert doc['rows'][0]['wrong']


def test_interleaved_tables_show_their_repeated_sizes():
    name = 'nccl-tests_interleaved-duplicate-sizes_nccl-tests-issue-182.txt'
    res = nccltests.parse_text(open(pub(name)).read())
    assert res.duplicate_sizes == [8, 16]
    doc = doc_of(name, exit_status=0)
    assert doc['verdict'] == 'incomplete'


def test_an_output_with_its_own_debug_lines_is_one_output():
    name = 'nccl-tests_with-log_socket-lo_nccl-2.4.8_nccl-issue-352.txt'
    doc = doc_of(name, exit_status=0)
    assert [f['kind'] for f in doc['files']] == ['output']
    assert doc['nranks'] == 2 and doc['hosts'] == ['ds-ml-01-0']
    assert doc['versions']['nccl_version'] == '2.4.8+cuda10.1'
    assert doc['verdict'] == 'incomplete'
    res = nccltests.parse_text(open(pub(name)).read())
    assert res.min_bytes == 8 and res.max_bytes == 1073741824
    assert res.step_factor == 2 and res.ranks_per_host == {'ds-ml-01-0': 2}


def test_the_old_efa_output_with_its_log_is_the_plugin_with_gdr():
    # nccl-tests < 2.10 with NCCL 2.9.9 INFO lines, 2 x p4d over EFA
    doc = doc_of('nccl-debug_aws-libfabric_gdrdma_efa-p4d-2node.log',
                 exit_status=0)
    assert doc['files'][0]['kind'] == 'output'
    t = doc['transport']
    assert t['proven'] == 'net-plugin-gdr' and t['ok'], t
    assert doc['nranks'] == 16 and len(doc['hosts']) == 2
    # no reference given: never a pass
    assert doc['verdict'] == 'no-reference'
