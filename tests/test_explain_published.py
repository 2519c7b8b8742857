"""scripts/explain (ccl_health.explain.explain) on real logs published by
others (tests/fixtures/published/SOURCES.md says where each comes from):
the conclusion a person would draw from each, checked: the transport, the
verdict class, and what was not judged."""

import os

import pytest

from ccl_health import explain as X
from ccl_health.evidence import debuglog, nccltests
from ccl_health.evidence.proof import asked_from_log, prove
from conftest import REPO

PUB = os.path.join(REPO, 'tests', 'fixtures', 'published')


def pub(name):
    return os.path.join(PUB, name)


def doc_of(*names, **kw):
    return X.explain([pub(n) for n in names], **kw)


#: a debug log alone: (file, proven, ok, words in the reason); the verdict
#: is always could-not-check (bandwidth not judged)
LOGS_ALONE = [
    # prefix-less lines, numbered by the author: IB with GPUDirect RDMA
    ('nccl-debug_no-prefix_ring-ib-gdrdma_2node_nccl-issue-385.log',
     'net-ib-gdr', True, ('GPUDirect RDMA on every path', 'NET/IB/GDRDMA x2')),
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
    # the same plugin named on a one-node run that kept P2P/SHM on: intra
    ('nccl-debug_shm-intra_plugin-loaded_g6e-1node-4proc.log',
     'intra', True, ('SHM/direct x28', 'no network was needed')),
    ('nccl-debug_libfabric-v10_efa-no-gdr_g6e-4pod-rank0.log',
     'net-plugin', True, ('plugin Libfabric',)),
    # 2 nodes (SH-IDC1-10-142-5-42 and -123): IB with GPUDirect RDMA
    # between them, P2P/IPC/read inside each
    ('nccl-debug_ib-gdrdma_p2p-ipc-read_2node_nccl-issue-834.log',
     'net-ib-gdr', True, ('GPUDirect RDMA on every path', 'NET/IB/GDRDMA x2',
                      'P2P/IPC x11')),
    # NCCL 2.2x "comm ... busId ... commId ... - Init COMPLETE" and NVLS
    # tree lines, but no channel line: nothing proven
    ('nccl-debug_init-complete-busid-commid_nvls-tree_64rank_nccl-issue-'
     '1814.log', None, False, ('no channel lines',)),
    # one p4d node, 4 processes, NCCL 2.27 with aws-ofi-nccl's tuner and
    # net plugin loaded: every channel P2P/CUMEM/read (NVLink)
    ('nccl-debug_p2p-cumem_plugin-loaded_p4d-1node-4proc.log',
     'intra', True, ('intra-node only', 'P2P/CUMEM x192')),
    # an AKS MPIJob of 2 x 8 H100: 8 IB devices (NET/IB/9..15 seen), every
    # network channel without GPUDirect RDMA, P2P/CUMEM/read inside
    ('nccl-debug_ib-nogdr-16dev_p2p-cumem_2node-aks_aks-rdma-issue-30.log',
     'net-ib', True, ('without GPUDirect RDMA on any path', 'NET/IB x13',
                      'P2P/CUMEM x2')),
    # HPC-X's nccl-rdma-sharp plugin ("Plugin Path", "P2P plugin IBext_v8",
    # NET/IB .../IB/SHARP devices, "Using network IBext_v8"), 2 ranks on 2
    # nodes, cut before any connection: nothing proven
    ('nccl-debug_ibext-sharp-plugin_no-channels_nccl-issue-1737.log',
     None, False, ('no channel lines', 'IBext_v8', 'show no connection')),
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
    ev = debuglog.read_evidence([pub(LOGS_THAT_FAILED[0][0])])
    nets = {k: r.networks for k, r in ev.ranks.items()}
    assert nets == {'algo-1:17774': {'Socket'}, 'algo-1:17780': {'Socket'},
                    'algo-1:17773': {'OFI plugin'}}
    assert asked_from_log(ev) == 'net-plugin'


def test_the_transport_asked_is_read_from_the_log_in_every_door():
    # explain without --transport, and prove() without asked: the same
    name = 'nccl-debug_builtin-ib-roce_gdrdma_ofi-plugin-unused_8rank-node.log'
    ev = debuglog.read_evidence([pub(name)])
    proof = prove(None, ev)
    assert proof.asked == 'net-plugin-gdr' and proof.proven == 'net-ib-gdr'
    assert not proof.ok
    # asked for IB (--transport), the same log is proven IB, with
    # GPUDirect RDMA on every channel
    assert prove('net-ib', ev).ok
    assert prove('net-ib-gdr', ev).ok


def test_the_oldest_hashless_table_with_an_error_column_is_wrong_results():
    name = 'nccl-tests_hashless-table_error-column_wrong_nccl-tests-issue-37.txt'
    doc = doc_of(name, exit_status=0)
    assert doc['files'][0]['kind'] == 'output'
    assert doc['format'] == 'nccl-tests-2.0' and doc['complete']
    assert doc['out_of_bounds'] == 2 and doc['verdict'] == 'wrong-results'
    assert [r['size'] for r in doc['rows']] == [4294967296]
    assert doc['rows'][0]['wrong']


def test_interleaved_tables_are_incomplete():
    name = 'nccl-tests_interleaved-duplicate-sizes_nccl-tests-issue-182.txt'
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


#: a debug log alone that says an operation failed: the judge fails it
#: (file, verdict, proven, ok, words in the transport reason, in the verdict)
LOGS_THAT_FAILED = [
    # the plugin failed to start on one rank; two ranks used sockets, one
    # is seen only through its NET/OFI lines: mixed, a fallback
    ('nccl-debug_ofi-init-failed_mixed-socket_aws-ofi-nccl-issue-715.log',
     'fallback', 'net-socket', False,
     ('different networks', 'NET/Socket on 2 of 3', 'initialization failed'),
     ('plugin-init', 'aws-ofi-nccl initialization failed')),
    ('nccl-debug_ofi-init-failed_socket_aws-ofi-nccl-issue-889.log',
     'fallback', 'net-socket', False,
     ('fell back to NET/Socket', 'aws-ofi-nccl initialization failed'),
     ('plugin-init', 'Creating new endpoint')),
    # NCCL 2.7.8 over one RoCE HCA (no GPUDirect RDMA): both channels
    # connected, then the completion queue could not be created
    ('nccl-debug_ib-roce-nogdr_ibv-create-cq-failed_nccl-issue-380.log',
     'crash', 'net-ib', True, ("NCCL's builtin NET/IB, without GPUDirect "
                               "RDMA on any path (NET/IB x2)",),
     ('class internal', 'Call to ibv_create_cq failed')),
    # the plugin was named by the environment (Plugin name set by env),
    # loaded, and NCCL's builtin IB carried every channel: a fallback the
    # log alone proves, failed whatever the bandwidth (issue 31.2)
    ('nccl-debug_builtin-ib-roce_gdrdma_ofi-plugin-unused_8rank-node.log',
     'fallback', 'net-ib-gdr', False, ('instead of the plugin',
                                       'libnccl-net.so'),
     ('fallback: fell back to', 'no output of the run')),
    # HPC-X's IB plugin (ib_plugin.c): RDMA completions with status=12
    # (retry exceeded, vendor err 129) from one peer; no channel line kept
    ('nccl-debug_ib-plugin_completion-status-12_nccl-issue-1405.log',
     'crash', None, False, ('no channel lines',),
     ('class connection', 'with status=12', 'vendor err 129',
      '(+2 more fatal)')),
]


@pytest.mark.parametrize('name,verdict,proven,ok,twords,vwords',
                         LOGS_THAT_FAILED,
                         ids=[c[0][-12:-4] for c in LOGS_THAT_FAILED])
def test_a_debug_log_alone_with_a_fatal_warn_fails(name, verdict, proven, ok,
                                                   twords, vwords):
    doc = doc_of(name)
    assert doc['files'] == [{'path': pub(name), 'kind': 'log'}]
    assert doc['verdict'] == verdict and doc['exit_code'] == 1
    assert 'bandwidth not judged' in doc['reason'] and not doc['rows']
    t = doc['transport']
    assert (t['proven'], t['ok']) == (proven, ok), t
    for w in twords:
        assert w in t['reason'], (w, t['reason'])
    for w in vwords:
        assert w in doc['reason'], (w, doc['reason'])
    assert verdict.upper() in X.render(doc)


def test_the_ib_log_with_a_failed_verb_names_its_version_and_no_gdr():
    doc = doc_of('nccl-debug_ib-roce-nogdr_ibv-create-cq-failed_nccl-issue-'
                 '380.log')
    assert doc['versions']['nccl_version'] == '2.7.8+cuda11.0'
    assert doc['hosts'] == ['spark01']
    assert 'GDRDMA' not in doc['transport']['reason']


def test_the_two_nodes_of_the_gdrdma_log_are_both_named():
    doc = doc_of('nccl-debug_ib-gdrdma_p2p-ipc-read_2node_nccl-issue-834.log')
    assert sorted(doc['hosts']) == ['SH-IDC1-10-142-5-123',
                                    'SH-IDC1-10-142-5-42']


def test_the_init_complete_lines_give_the_communicator_size():
    doc = doc_of('nccl-debug_init-complete-busid-commid_nvls-tree_64rank_'
                 'nccl-issue-1814.log')
    assert doc['nranks'] == 64 and doc['hosts'] == ['hostname-test']


def test_a_tuner_plugin_named_by_the_env_is_not_a_net_plugin_asked():
    # "TUNER/Plugin: Plugin name set by env to libnccl-net.so" (NCCL 2.27
    # src/plugin/plugin_open.cc prints it for each plugin kind): the tuner
    # was looked for in aws-ofi-nccl's library; no net plugin was asked
    name = 'nccl-debug_p2p-cumem_plugin-loaded_p4d-1node-4proc.log'
    ev = debuglog.read_evidence([pub(name)])
    assert ev.plugin_asked is None
    doc = doc_of(name)
    assert doc['transport']['asked'] == 'intra'
    assert 'libnccl-net.so' not in doc['transport']['reason']
    assert doc['nranks'] == 4 and doc['hosts'] == ['llama-3-8b-node-0-0']
    # the same line built for the net plugin still names the ask
    for kind, asked in (('NET', 'libnccl-net.so'), ('TUNER', None),
                        ('PROFILER', None)):
        ev = debuglog.Evidence()
        debuglog.feed_lines(ev, [f'h:1:1 [0] NCCL INFO {kind}/Plugin: Plugin '
                                 f'name set by env to libnccl-net.so'])
        assert ev.plugin_asked == asked, kind


def test_a_training_log_that_lost_its_peer_over_efa_is_a_crash():
    # rank 0 of a 4-pod job: Libfabric with GPUDirect RDMA connected, then
    # "NET/OFI Request ... completed with error" and PyTorch's "remote
    # process exited or there was a network error"
    name = ('nccl-debug_ofi-gdrdma_request-completed-with-error_remote-'
            'exited_efa-rank0.log')
    doc = doc_of(name)
    # a training job's log, not a test output: PyTorch's "NCCL error in:"
    # is the job's error, judged as what the run reported
    assert doc['files'] == [{'path': pub(name), 'kind': 'log'}]
    assert doc['format'] is None and 'debug log only' in doc['reason']
    assert doc['verdict'] == 'crash' and doc['exit_code'] == 1
    assert len(doc['errors']) == 1 and 'DistBackendError' in doc['errors'][0]
    assert 'remote process exited or there was a network error' in \
        doc['reason']
    assert 'fatal: connection' in doc['reason']
    # the channels went over the plugin with GPUDirect RDMA; the lines
    # that loaded it are not in this part of the log, the channel lines
    # name it (issue 31.5): proven, and no fallback said
    t = doc['transport']
    assert (t['proven'], t['ok']) == ('net-plugin-gdr', True), t
    assert 'NET/Libfabric/GDRDMA x4' in t['reason']
    assert 'named by its channel lines' in t['reason']
    assert 'fallback' not in doc['reason'] + t['reason']
    assert doc['versions']['nccl_version'] == '2.27.3'


def test_a_two_node_output_without_a_log_names_its_ranks_and_no_pass():
    name = 'nccl-tests_all_reduce_h100-a3mega_2node-16rank.txt'
    res = nccltests.parse_text(open(pub(name)).read())
    assert res.ranks_per_host == {'ztan-mig-235z': 8, 'ztan-mig-gq73': 8}
    assert res.min_bytes == 8 and res.max_bytes == 8589934592
    doc = doc_of(name, exit_status=0)
    assert doc['complete'] and doc['nranks'] == 16 and len(doc['rows']) == 31
    assert doc['out_of_bounds'] == 0 and doc['avg_busbw'] == 70.742
    assert not any(r['wrong'] for r in doc['rows'])
    # no debug log, no reference: never a pass
    assert doc['verdict'] == 'could-not-check' and doc['exit_code'] == 2
    assert doc['transport']['proven'] is None
    assert 'no reference given' in doc['reference']['reason']
    # the exit status not given: could not check either
    assert doc_of(name)['verdict'] == 'could-not-check'


def test_a_one_rank_alltoall_has_its_in_place_check_not_run():
    name = 'nccl-tests_alltoall_na-inplace-wrong_1gpu_nccl-tests-issue-287.txt'
    res = nccltests.parse_text(open(pub(name)).read())
    [row] = res.rows
    assert row.size == 33554432 and row.out_of_place.wrong == 0
    assert row.in_place.wrong is None          # N/A
    doc = doc_of(name, exit_status=0)
    assert doc['complete'] and doc['nranks'] == 1
    assert doc['verdict'] == 'could-not-check' and doc['exit_code'] == 2


def test_an_output_with_validation_off_is_not_checked():
    # dstack's A3 Mega example: all_gather_perf -c 0 on 2 nodes, printed
    # without its '#' lines; every #wrong is N/A
    name = 'nccl-tests_all_gather_c0-na_hashless_a3mega-tcpxo_dstack.txt'
    res = nccltests.parse_text(open(pub(name)).read())
    assert len(res.rows) == 11 and all(r.wrong is None for r in res.rows)
    assert res.min_bytes == 8388608 and res.max_bytes == 8589934592
    for status in (0, None):
        doc = doc_of(name, exit_status=status)
        assert doc['complete'] and doc['avg_busbw'] == 146.948
        assert doc['verdict'] == 'could-not-check', doc['reason']
        assert 'did not check its results' in doc['reason']


@pytest.mark.parametrize('name,ranks,words', [
    # nccl-tests of 2021 (no Group field), 4 GPUs in one process (-g 4):
    # NCCL failed before the table
    ('nccl-tests_g4-1proc_test-nccl-failure_nccl-issue-473.txt', 4,
     ("Test NCCL failure common.cu:777 'unhandled system error'",)),
    # the log lines before "Test NCCL failure": a shared memory segment
    # could not be created (a fatal WARN, named so)
    ('nccl-tests_shm-segment-warn_test-nccl-failure_nccl-tests-issue-166.log',
     None, ('Test NCCL failure common.cu:958', 'Error while creating shared '
            'memory segment', 'fatal: internal')),
])
def test_an_output_ending_in_a_test_failure_is_a_crash(name, ranks, words):
    doc = doc_of(name)
    assert doc['files'][0]['kind'] == 'output'
    assert doc['verdict'] == 'crash' and doc['exit_code'] == 1
    assert not doc['complete'] and not doc['rows']
    assert doc['nranks'] == ranks
    for w in words:
        assert w in doc['reason'], (w, doc['reason'])


def test_the_sharp_plugin_log_names_its_version_and_ranks():
    doc = doc_of('nccl-debug_ibext-sharp-plugin_no-channels_nccl-issue-'
                 '1737.log')
    assert doc['versions']['nccl_version'] == '2.21.5+cuda12.4'
    assert doc['nranks'] == 2 and doc['hosts'] == ['gh-3714u06']


def test_two_processes_that_are_each_rank_0_are_separate_runs():
    # nccl-tests built without MPI, launched by mpirun on two hosts: each
    # process ran alone, printed its own header and "Rank  0": not a 2-rank
    # communicator (the table was cut by the issue text: no rows)
    name = 'nccl-tests_two-rank0-no-mpi_2node_nccl-tests-issue-107.txt'
    res = nccltests.parse_text(open(pub(name)).read())
    assert res.rank_ids == [0, 0] and res.repeated_ranks == [0]
    assert res.nranks == 1
    assert res.hosts == ['ip-172-31-20-228', 'ip-172-31-22-230']
    doc = doc_of(name, exit_status=0)
    assert doc['verdict'] == 'incomplete' and doc['exit_code'] == 1
    assert 'rank 0 is printed by 2 processes' in doc['reason']
    assert 'separate runs, not one communicator' in doc['reason']


def test_a_cut_broadcast_table_with_its_ibverbs_advice_is_incomplete():
    # nccl-tests 2.x broadcast_perf -c 0 on 2 hosts (NCCL 2.9.6): an error
    # column of N/A, and each rank's "Failed to open libibverbs.so[.1]"
    # (NCCL goes on with sockets: not fatal); the issue text shows one row
    name = ('nccl-tests_broadcast_c0-error-na_2node_ibverbs-warn_nccl-tests-'
            'issue-82.txt')
    res = nccltests.parse_text(open(pub(name)).read())
    assert res.check_column == 'error' and res.nranks == 2
    [row] = res.rows
    assert row.size == 8 and row.root == 0 and row.wrong is None
    doc = doc_of(name, exit_status=0)
    assert doc['hosts'] == ['v100-gpu-1', 'v100-gpu-5']
    assert doc['versions']['nccl_version'] == '2.9.6+cuda11.2'
    assert doc['verdict'] == 'incomplete' and doc['exit_code'] == 1
    assert 'Failed to open libibverbs.so[.1] (not fatal)' in doc['reason']


def test_an_applications_nccl_error_in_a_debug_log_keeps_it_a_log(tmp_path):
    # lines built from NCCL's logger format and PyTorch's ProcessGroupNCCL
    # message: the file is a debug log (no table, no header, no error of the
    # test program), and the job's error still fails it
    log = tmp_path / 'train.log'
    log.write_text(
        'h:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via '
        'NET/Socket/0\n'
        'h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via '
        'NET/Socket/0\n'
        '[rank0]: torch.distributed.DistBackendError: NCCL error in: '
        'ProcessGroupNCCL.cpp:3699, remote process exited or there was a '
        'network error, NCCL version 2.27.3\n')
    doc = X.explain([str(log)])
    assert doc['files'][0]['kind'] == 'log'
    assert doc['verdict'] == 'crash' and doc['exit_code'] == 1
    assert 'remote process exited' in doc['reason']
    # without the error line: a log alone, not judged
    log.write_text(''.join(log.read_text().splitlines(True)[:2]))
    assert X.explain([str(log)])['verdict'] == 'could-not-check'
    # the test program's own error line keeps a text an output
    out = tmp_path / 'stdout.txt'
    out.write_text("h:1:2 [0] NCCL INFO Using network Socket\n"
                   "h: Test NCCL failure common.cu:1119 'unhandled system "
                   "error (run with NCCL_DEBUG=INFO for details) / '\n")
    assert X.explain([str(out)])['files'][0]['kind'] == 'output'


def test_ib_with_gpudirect_rdma_on_some_paths_only_says_how_many():
    # lines built from NCCL's "Channel %02d/%d : %d[%d] -> %d[%d] [%s] via
    # NET/%s/%d%s" (transport/net.cc): one path with GDRDMA, one without
    lines = ['h1:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via '
             'NET/IB/0/GDRDMA',
             'h1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via '
             'NET/IB/0']
    ev = debuglog.Evidence()
    debuglog.feed_lines(ev, lines)
    proof = prove('net-ib', ev)
    assert proof.ok and 'GPUDirect RDMA on 1 of 2 network channel lines' \
        in proof.reason


# -- issue 31: the world's logs, read as a person would ----------------------

SIRIUS = ('nccl-debug_aws-libfabric-cxi_gdrdma-no-loaded-line_watchdog-'
          'timeout_sirius-2node.log')
POLARIS_LOG = 'nccl-debug_aws-libfabric-cxi_gdrdma_plugin-loaded_polaris-2node.log'
POLARIS_SOCKET = 'nccl-debug_socket_default-no-plugin_polaris-2node.log'


@pytest.mark.parametrize('name,hosts,words', [
    # Perlmutter (Slingshot 11): AWS Libfabric with GPUDirect RDMA and the
    # shared connections of alltoall on every network channel, no "Loaded
    # net plugin" line in the excerpt (issue 31.5)
    ('nccl-debug_aws-libfabric-cxi_gdrdma-shared-no-loaded-line_perlmutter_'
     'nccl-tests-issue-139.log', 5, ('NET/AWS Libfabric/GDRDMA x9',)),
    # srun's "[0] " before NCCL's own prefix: HPC-X's IBext_v8 with GDR
    ('nccl-debug_srun-label-bracket_ibext-v8-gdrdma_h100_nccl-issue-1453.log',
     1, ('plugin IBext_v8', 'NET/IBext_v8/GDRDMA x12')),
    # a plugin whose name has spaces, "(0)" proxy ranks and /Shared
    ('nccl-debug_rdma-plugin-v6_gdrdma-shared-no-loaded-line_2host_nccl-'
     'tests-issue-321.log', 2, ('plugin NCCL RDMA Plugin v6',)),
])
def test_plugin_gdr_named_by_its_channels_is_proven_not_a_fallback(
        name, hosts, words):
    doc = doc_of(name)
    t = doc['transport']
    assert (t['asked'], t['proven'], t['ok']) == (
        'net-plugin-gdr', 'net-plugin-gdr', True), t
    assert 'named by its channel lines' in t['reason']
    for w in words:
        assert w in t['reason'], (w, t['reason'])
    assert 'fallback' not in doc['reason'] and 'fell back' not in \
        doc['reason']
    assert len(doc['hosts']) == hosts and doc['verdict'] == 'could-not-check'
    # only some ranks' lines: the rank count is unknown, not one rank
    assert doc['nranks'] is None


def test_the_polaris_cxi_logs_prove_the_plugin_with_gdr_and_sockets():
    # Polaris (HPE Slingshot 11, cxi), 2 nodes x 4 A100: aws-ofi-nccl 1.6.0
    # loaded, GDRDMA on every network channel; lines of two writers merged
    # into one make no host of their own
    doc = doc_of(POLARIS_LOG)
    t = doc['transport']
    assert (t['proven'], t['ok']) == ('net-plugin-gdr', True), t
    assert doc['hosts'] == ['x3006c0s19b1n0', 'x3006c0s1b0n0']
    assert doc['nranks'] == 8 and doc['verdict'] == 'could-not-check'
    assert doc['versions']['provider'] == 'cxi'
    assert doc['versions']['plugin_version'] == '1.6.0'
    # the same job without the plugin: NCCL's sockets, proven as such
    doc = doc_of(POLARIS_SOCKET)
    assert (doc['transport']['proven'], doc['transport']['ok']) == (
        'net-socket', True)
    assert doc['verdict'] == 'could-not-check' and doc['nranks'] == 8
    # asked for the plugin, the log alone proves the fallback: failed
    doc = doc_of(POLARIS_SOCKET, transport_asked='net-plugin-gdr')
    assert doc['verdict'] == 'fallback' and doc['exit_code'] == 1
    assert doc['transport']['proven'] == 'net-socket'


def test_a_watchdog_timeout_after_a_proven_transport_is_a_hang():
    # ALCF Sirius (Slingshot, cxi), aws-ofi-nccl 1.9.1-aws with NCCL 2.20.5
    # (no "Loaded net plugin" line), GDRDMA on every network channel; then
    # PyTorch's watchdog: a collective that never completed
    doc = doc_of(SIRIUS)
    assert doc['verdict'] == 'hang' and doc['exit_code'] == 1
    assert 'Watchdog caught collective operation timeout' in doc['reason']
    t = doc['transport']
    assert (t['proven'], t['ok']) == ('net-plugin-gdr', True), t
    assert 'fallback' not in doc['reason']
    assert doc['nranks'] == 8 and len(doc['hosts']) == 2
    assert doc['versions']['plugin_version'] == '1.9.1-aws'


@pytest.mark.parametrize('asked', [None, 'net-plugin-gdr', 'net-socket'])
def test_a_window_of_one_rank_of_a_two_node_run_is_not_intra_node(asked):
    # rank 6's lines of the Sirius job: "nRanks 8 nNodes 2" and its
    # intra-node channels only: the network transport is not proven, never
    # intra-node, never a fallback (issue 31.3)
    name = 'nccl-debug_one-rank-window_nnodes2-p2p-only_sirius.log'
    doc = doc_of(name, transport_asked=asked)
    t = doc['transport']
    assert t['proven'] is None and not t['ok'], t
    assert '2-node run but no network channel understood' in t['reason']
    assert doc['verdict'] == 'could-not-check' and doc['exit_code'] == 2


@pytest.mark.parametrize('asked', [None, 'net-plugin-gdr'])
def test_prefix_less_cxi_lines_of_two_nodes_before_any_channel(asked):
    # "[0] NCCL INFO" lines of aws-ofi-nccl 1.6.0 over cxi, "nRanks 2 nNodes
    # 2", no channel line: not proven, no socket named, no fallback
    name = ('nccl-debug_prefix-less_cxi-aws-ofi-nccl_nnodes2-no-channels_aws-'
            'ofi-nccl-issue-801.log')
    doc = doc_of(name, transport_asked=asked)
    assert doc['verdict'] == 'could-not-check'
    assert doc['transport']['proven'] is None
    assert 'Socket' not in doc['transport']['reason']
    assert doc['nranks'] == 2 and doc['hosts'] == []
    assert doc['versions']['provider'] == 'cxi'


def test_an_indented_kubernetes_mpijob_log_over_sockets():
    name = 'nccl-debug_k8s-indent-tag-output_socket_2pod_aws-k8s-tester-pr-464.log'
    doc = doc_of(name)
    assert (doc['transport']['proven'], doc['transport']['ok']) == (
        'net-socket', True)
    assert doc['hosts'] == ['multi-node-nccl-test-worker-0',
                            'multi-node-nccl-test-worker-1']
    assert doc['nranks'] == 2


def test_indented_tag_output_rows_without_a_header_are_read():
    name = 'nccl-tests_k8s-indent-tag-output_rows-only_p5_aws-k8s-tester-pr-585.txt'
    doc = doc_of(name, exit_status=0)
    assert doc['files'][0]['kind'] == 'output'
    assert [r['size'] for r in doc['rows']] == [8, 16, 32, 64, 128]
    assert doc['verdict'] == 'incomplete' and doc['nranks'] is None


POLARIS = 'nccl-tests_all_reduce_polaris-8node-32rank_nccl-net-aws-libfabric-cxi.txt'
POLARIS_DEFAULT = 'nccl-tests_all_reduce_polaris-8node-32rank_default-env.txt'


def test_the_polaris_tables_read_whole():
    for name, ranks, hosts in ((POLARIS, 32, 8), (POLARIS_DEFAULT, 32, 8), (
            'nccl-tests_all_reduce_polaris-128node-512rank.txt', 512, 128)):
        doc = doc_of(name, exit_status=0)
        assert doc['complete'] and doc['nranks'] == ranks, name
        assert len(doc['hosts']) == hosts and len(doc['rows']) == 29
        assert doc['out_of_bounds'] == 0
        # no debug log: never a pass
        assert doc['verdict'] == 'could-not-check'


def test_a_run_far_below_its_reference_fails_without_a_proof(tmp_path):
    # the reference of the key: Polaris' 8 x 4 A100 all_reduce with the
    # plugin (its own run); the default environment's run (sockets on
    # Slingshot, 4x slower at 1 GiB) given as that key: a measured
    # shortfall, whatever the (missing) proof says (issue 31.1)
    import yaml
    res = nccltests.parse_text(open(pub(POLARIS)).read())
    ref = {'system': 'polaris', 'partitions': {'gpu': {'entries': [{
        'transport': 'net-plugin-gdr', 'collective': 'all_reduce',
        'nodes': 8, 'gpus_per_node': 4, 'tolerance': 0.2,
        'source': 'test: the NCCL_NET="AWS Libfabric" run',
        'busbw': {r.size: r.busbw for r in res.rows
                  if r.size >= 1 << 24}}]}}}
    path = tmp_path / 'polaris.yaml'
    path.write_text(yaml.safe_dump(ref))
    doc = doc_of(POLARIS_DEFAULT, reference_file=str(path),
                 transport_asked='net-plugin-gdr', exit_status=0,
                 collective='all_reduce')
    assert doc['verdict'] == 'below-reference' and doc['exit_code'] == 1
    assert 'transport not proven: ' in doc['reason']
    assert 'fallback' not in doc['reason']
    # the plugin run itself against its own numbers: no failure, no pass
    doc = doc_of(POLARIS, reference_file=str(path),
                 transport_asked='net-plugin-gdr', exit_status=0,
                 collective='all_reduce')
    assert doc['verdict'] == 'could-not-check'


def test_a_two_node_a100_run_that_failed_before_its_table_is_a_crash():
    # ALCF Sophia (DGX A100), 2 nodes x 8 under Open MPI's prterun: the
    # rank lines, then "Test NCCL failure ... unhandled system error"
    doc = doc_of('nccl-tests_all_reduce_sophia-dgx-a100-2node-16rank.txt')
    assert doc['verdict'] == 'crash' and doc['exit_code'] == 1
    assert doc['nranks'] == 16 and doc['hosts'] == ['sophia-gpu-04',
                                                    'sophia-gpu-09']
    assert "Test NCCL failure common.cu:1012" in doc['reason']


def test_the_gb200_excerpt_counts_its_ranks_by_the_factor():
    # only "Rank 71" is printed: not one rank; the all_reduce factor
    # 2(n-1)/n of its busbw / algbw says 72 (issue 31.4)
    name = ('nccl-tests_all_reduce_gb200-nvl72-1rack-72rank_excerpt_coreweave-'
            'nccl-tests.txt')
    assert nccltests.parse_text(open(pub(name)).read()).nranks is None
    assert doc_of(name, exit_status=0)['nranks'] is None
    assert doc_of(name, exit_status=0, collective='all_reduce')[
        'nranks'] == 72


# -- issue 31, the remaining proof: B200, MI300X, MI250X, Alps ----------------

B200 = 'nccl-tests_all_gather_b200-2pod-16rank_gib-roce_dranet-gke.txt'
B200_CUT = ('nccl-tests_all_gather_b200-4pod-16rank_rows-truncated-by-author_'
            'dranet-gke.txt')
H200_GIB = 'nccl-tests_all_gather_h200-2pod-2rank_gib-roce_dranet-demo.txt'
MI300X_VF = ('rccl-tests_all_reduce_mi300x-vf-8gpu-1proc-ngpus8_azure_rccl-'
             'issue-1562.txt')
MI250X_AG = ('rccl-tests_all_gather_mi250x-4node-32rank_srun-label_no-header_'
             'rccl-issue-1490.txt')
MI250X_AR = ('rccl-tests_all_reduce_mi250x-4node-32rank_srun-label_no-header_'
             'rccl-issue-1490.txt')
ALPS_NOT_FOUND = ('nccl-debug_net-plugin-ofi-not-found_network-aws-libfabric-'
                  'not-found_alps-cscs-docs.log')


@pytest.mark.parametrize('name,ranks,hosts,rows,gpus', [
    # GKE A4: 2 pods x 8 B200 over RoCE (gIB), all_gather 1 KiB .. 8 GiB
    (B200, 16, ['nccl-gib-test-0', 'nccl-gib-test-1'], 24, 'NVIDIA B200'),
    # the same cluster's A3 Ultra demo: 2 pods x 1 H200
    (H200_GIB, 2, ['nccl-gib-test-0', 'nccl-gib-test-1'], 24, 'NVIDIA H200'),
    # Azure MI300X VF: one process driving 8 GPUs (-g 8, "nGpus 8")
    (MI300X_VF, 8, ['c42f4555f685'], 25, 'AMD Instinct MI300X VF'),
])
def test_healthy_tables_without_a_log_are_read_whole_and_never_pass(
        name, ranks, hosts, rows, gpus):
    res = nccltests.parse_text(open(pub(name)).read())
    assert all(d.endswith(gpus) for d in res.devices)
    doc = doc_of(name, exit_status=0)
    assert doc['complete'] and doc['nranks'] == ranks
    assert doc['hosts'] == hosts and len(doc['rows']) == rows
    assert doc['out_of_bounds'] == 0
    assert not any(r['wrong'] for r in doc['rows'])
    # no debug log: the transport is not proven, never a pass
    assert doc['verdict'] == 'could-not-check' and doc['exit_code'] == 2
    assert doc['transport']['proven'] is None


def test_a_table_whose_rows_the_author_cut_is_never_a_pass():
    # "# ... (truncated NCCL output for brevity) ..." between the rank lines
    # and the summary: 16 ranks on 4 pods, no row to judge
    # and the summary: 16 ranks on 4 pods, no row to judge; the run's own
    # summary is there: it reached its end, so what the rows said could not
    # be checked, never a failure (issue 43, class E)
    doc = doc_of(B200_CUT, exit_status=0)
    assert doc['nranks'] == 16 and len(doc['hosts']) == 4
    assert not doc['rows'] and doc['verdict'] == 'could-not-check'
    assert doc['exit_code'] == 2
    assert 'result rows' in doc['reason'] and 'not in the text' in \
        doc['reason'] and 'Out of bounds values : 0' in doc['reason']


def test_one_process_driving_eight_gpus_is_eight_ranks():
    # "# nThread 1 nGpus 8" and 8 rank lines of one Pid (older rccl-tests:
    # "#   Rank  0 Pid  56417 on ... [0002:00:00.0]"): 8 ranks, one host
    res = nccltests.parse_text(open(pub(MI300X_VF)).read())
    assert (res.threads, res.gpus_per_process) == (1, 8)
    assert set(res.rank_pids) == {56417} and res.nranks == 8
    assert res.ranks_per_host == {'c42f4555f685': 8}


@pytest.mark.parametrize('name,coll', [(MI250X_AG, 'all_gather'),
                                       (MI250X_AR, 'all_reduce')])
def test_srun_labelled_rows_without_a_header_count_ranks_by_the_factor(
        name, coll):
    # ROCm/rccl#1490: 4 nodes x 4 MI250X (32 GCDs) over Slingshot with
    # aws-ofi-rccl, srun --label: only the table of rank 0 (" 0: "), no
    # header, no rank line. The collective is not printed: the rank count
    # is unknown; named, the busbw / algbw factor gives 32
    doc = doc_of(name, exit_status=0)
    assert doc['complete'] and len(doc['rows']) == 17
    assert doc['nranks'] is None and doc['hosts'] == []
    assert doc['verdict'] == 'could-not-check'
    doc = doc_of(name, exit_status=0, collective=coll)
    assert doc['nranks'] == 32 and doc['verdict'] == 'could-not-check'


@pytest.mark.parametrize('asked', [None, 'net-plugin-gdr'])
def test_network_not_found_at_alps_is_a_failed_plugin_init(asked):
    # CSCS docs (Alps): NCCL_NET_PLUGIN="ofi" and NCCL_NET="AWS Libfabric":
    # "NET/Plugin: Could not find: ofi libnccl-net-ofi.so", then
    # "net.cc:626 NCCL WARN Error: network AWS Libfabric not found."
    # (ncclInvalidUsage: the communicator is not created): failed, no
    # socket named, nothing proven
    doc = doc_of(ALPS_NOT_FOUND, transport_asked=asked)
    assert doc['verdict'] == 'fallback' and doc['exit_code'] == 1
    assert 'plugin-init' in doc['reason']
    assert 'network AWS Libfabric not found' in doc['reason']
    t = doc['transport']
    assert t['proven'] is None and not t['ok']
    assert 'Socket' not in t['reason']
    assert doc['hosts'] == ['nid006365']
