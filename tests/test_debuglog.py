"""ccl_health.evidence.debuglog and its proof: the transport asked read from
the log, every rank needing channel evidence, a fallback without channel
lines, lines without the logger prefix, wrapped channel lines, per-rank
versions.  Lines are built from NCCL's own format strings (src/debug.cc:
"%s:%d:%d [%d] NCCL INFO "; src/transport/net.cc: "Channel %02d/%d :
%d[%d] -> %d[%d] [send] via NET/%s/%d%s%s"; src/init.cc: "comm %p rank %d
nranks %d ... - Init COMPLETE"; src/misc/param.cc: "%s set by environment
to %s.") and aws-ofi-nccl's ("NET/OFI aws-ofi-nccl initialization
failed")."""

import re

import pytest

from ccl_health import CclHealthError
from ccl_health import explain as X
from ccl_health.evidence import debuglog as D
from ccl_health.evidence.proof import asked_from_log, prove


def info(host, pid, dev, text, kind='INFO'):
    return f'{host}:{pid}:{pid + 7} [{dev}] NCCL {kind} {text}'


def net_line(rank, peer, net='IB', dev=0, gdr=True, recv=False):
    side = 'receive' if recv else 'send'
    a, b = (peer, rank) if recv else (rank, peer)
    return (f'Channel 00/0 : {a}[{a}] -> {b}[{b}] [{side}] via NET/{net}/'
            f'{dev}{"/GDRDMA" if gdr else ""}')


def two_node_ib(skip_rank=None, wrap=None):
    """A 2-node, 2-rank IB run, rank 1's lines left out when asked."""
    lines = []
    for rank, host in ((0, 'n0'), (1, 'n1')):
        if rank == skip_rank:
            continue
        pid = 100 + rank
        lines += [info(host, pid, 0, 'NCCL version 2.21.5+cuda12.4'),
                  info(host, pid, 0, 'Using network IB'),
                  info(host, pid, 0, net_line(rank, 1 - rank)),
                  info(host, pid, 0, net_line(rank, 1 - rank, recv=True)),
                  info(host, pid, 0, f'comm 0x55 rank {rank} nranks 2 '
                       f'cudaDev 0 busId 1000 - Init COMPLETE')]
    return lines


def ev_of(lines):
    return D.evidence_from_text('\n'.join(lines))


# -- what was asked, read from the log -------------------------------------

@pytest.mark.parametrize('lines,asked', [
    (['NCCL_NET_PLUGIN set by environment to ofi'], 'net-plugin'),
    (['NET/Plugin: Plugin name set by env to libnccl-net.so'], 'net-plugin'),
    (['NET/Plugin : No plugin found (libnccl-net-ofi.so), using internal '
      'implementation'], 'net-plugin'),
    (['NET/Plugin: Could not find: /opt/x/libnccl-net-ofi.so'], 'net-plugin'),
    (['NET/OFI aws-ofi-nccl initialization failed'], 'net-plugin'),
    (['NCCL_NET set by environment to Socket'], 'net-socket'),
    (['NCCL_NET set by environment to IB'], 'net-ib'),
    (['NCCL_NET set by environment to AWS Libfabric',
      'NCCL_NET_GDR_LEVEL set by environment to PHB'], 'net-plugin-gdr'),
    (['NCCL_IB_DISABLE set by environment to 1.',
      'NCCL_P2P_DISABLE set by environment to 1.',
      'NCCL_SHM_DISABLE set by environment to 1.'], 'net-socket'),
    # what every NCCL without a plugin prints: not an ask
    (['NET/Plugin : No plugin found (libnccl-net.so), using internal '
      'implementation'], None),
    (['NET/Plugin: Could not find: libnccl-net.so'], None),
    # 2.28 says this of its builtin IB when there is no IB device
    (['Failed to initialize NET plugin IB'], None),
    (['NCCL_NET_GDR_LEVEL set by environment to PHB'], None),
])
def test_asked_from_log(lines, asked):
    ev = ev_of([info('n0', 10, 0, t) for t in lines])
    assert asked_from_log(ev) == asked


def test_a_plugin_asked_and_not_used_is_a_fallback_without_asked():
    lines = [info('n0', 10, 0, 'NCCL_NET_PLUGIN set by environment to '
                  '/x/libnccl-net-ofi.so'),
             info('n0', 10, 0, 'NET/Plugin: Could not find: '
                  '/x/libnccl-net-ofi.so'),
             info('n0', 10, 0, 'Using network Socket'),
             info('n0', 10, 0, net_line(0, 1, net='Socket', gdr=False))]
    proof = prove(None, ev_of(lines))
    assert proof.asked == 'net-plugin' and proof.proven == 'net-socket'
    assert not proof.ok and 'asked net-plugin' in proof.reason
    # nothing asked in the log: judged as what it proves
    proof = prove(None, ev_of(lines[2:]))
    assert proof.ok and proof.proven == 'net-socket'


# -- every rank --------------------------------------------------------------

def test_every_rank_must_show_channels():
    ev = ev_of(two_node_ib())
    assert prove('net-ib', ev, nodes=2, expected_ranks=2).ok
    assert prove('net-ib', ev, nodes=2, expected_ranks=[0, 1]).ok
    ev = ev_of(two_node_ib(skip_rank=1))
    proof = prove('net-ib', ev, nodes=1, expected_ranks=2)
    assert not proof.ok and proof.proven is None       # could-not-check
    assert '1 of 2 ranks' in proof.reason and 'rank 1' in proof.reason
    # a rank whose log holds lines but no channel line
    lines = two_node_ib(skip_rank=1) + [info('n1', 101, 0,
                                             'NCCL version 2.21.5+cuda12.4')]
    proof = prove('net-ib', ev_of(lines), nodes=2, expected_ranks=2)
    assert not proof.ok and proof.proven is None


def test_a_missing_rank_that_shows_a_fallback_is_the_fallback():
    lines = two_node_ib(skip_rank=1) + [
        info('n1', 101, 0, 'NET/OFI aws-ofi-nccl initialization failed',
             kind='WARN'),
        info('n1', 101, 0, 'Using network Socket')]
    ev = ev_of(lines)
    proof = prove('net-ib', ev, nodes=2, expected_ranks=2)
    assert not proof.ok and proof.proven is not None   # a fallback


def test_fallback_without_channel_lines_per_rank():
    lines = [info('h', 1, 0, 'NET/OFI aws-ofi-nccl initialization failed',
                  kind='WARN'),
             info('h', 1, 0, 'Using network Socket'),
             info('h', 2, 1, 'NET/OFI Selected Provider is efa')]
    ev = ev_of(lines)
    assert ev.ranks['h:1'].networks == {'Socket'}
    assert ev.ranks['h:2'].networks == {'OFI plugin'}
    proof = prove('net-plugin', ev)
    assert proof.proven == 'net-socket' and not proof.ok
    assert 'different networks' in proof.reason
    # every rank fell back: a plain fallback
    proof = prove('net-plugin', ev_of(lines[:2]))
    assert proof.proven == 'net-socket' and 'fell back' in proof.reason
    # IB found and named as the communicator's network: the fallback is
    # to IB
    lines = [info('h', 1, 0, 'NET/OFI aws-ofi-nccl initialization failed'),
             info('h', 1, 0, 'NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:1<0>'),
             info('h', 1, 0, 'Using network IB')]
    assert prove('net-plugin', ev_of(lines)).proven == 'net-ib'
    # the plugin failed and no line says what NCCL used then: unknown,
    # never a network named by default (issue 31.3)
    for cut in (1, 2):
        ev = ev_of(lines[:cut])
        assert ev.ranks['h:1'].networks == set()
        proof = prove('net-plugin', ev)
        assert proof.proven is None and not proof.ok, proof
        assert 'Socket' not in proof.reason and 'IB' not in proof.reason


def test_a_plugin_failure_on_one_of_two_ranks_names_no_socket_for_it():
    # rank 0's plugin failed to start and its log stops there; rank 1
    # connected over the plugin: no socket is named for rank 0
    lines = [info('h', 1, 0, 'NET/OFI aws-ofi-nccl initialization failed',
                  kind='WARN'),
             info('h', 2, 1, 'NET/Plugin: Loaded net plugin Libfabric (v10)'),
             info('h', 2, 1, 'Channel 00/0 : 0[0] -> 1[1] [receive] via '
                             'NET/Libfabric/0/GDRDMA')]
    ev = ev_of(lines)
    proof = prove('net-plugin-gdr', ev, nodes=2, expected_ranks=2)
    assert 'Socket' not in proof.reason and proof.proven is None, proof


def test_a_one_rank_run_names_no_fallback_unless_its_plugin_is_missing():
    # "rank 0 nranks 1" and "Using network Socket": one rank connects
    # nothing, its network alone is no fallback (issue 31) ...
    init = info('h', 1, 0, 'comm 0x1 rank 0 nranks 1 cudaDev 0 nvmlDev 0 '
                           'busId 1000 commId 0x2 - Init COMPLETE')
    using = info('h', 1, 0, 'Using network Socket')
    proof = prove(None, ev_of([using, init]))
    assert proof.proven is None and 'fell back' not in proof.reason
    # ... but a plugin named by the environment and not found is (issue 43,
    # class A: RCCL on LUMI): the network in use is the one NCCL named
    missing = info('h', 1, 0, 'NET/Plugin: No plugin found '
                              '(libnccl-net-ofi.so)')
    proof = prove(None, ev_of([missing, using, init]))
    assert proof.asked == 'net-plugin' and proof.proven == 'net-socket'
    assert not proof.ok and 'No plugin found (libnccl-net-ofi.so)' in \
        proof.reason and '"Using network Socket"' in proof.reason
    # asked for the node's own links, one rank needs no network at all
    proof = prove('intra', ev_of([missing, using, init]))
    assert proof.proven is None and 'fell back' not in proof.reason


def test_a_node_count_above_one_without_net_channels_is_not_intra():
    # prefix-stripped lines (no host:pid), rank 0's init line says 4 nodes
    # and only its intra-node channel lines are kept (issue 31.3)
    lines = ['[0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 4 localRanks 4 '
             'localRank 0 MNNVL 0',
             '[0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read',
             '[0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read']
    ev = ev_of(lines)
    assert ev.nnodes_seen == 4 and ev.nranks_seen == 16
    for asked in ('net-plugin-gdr', 'net-socket', None):
        proof = prove(asked, ev)
        assert proof.proven is None and not proof.ok, (asked, proof)
    assert 'not proven' in prove('net-plugin-gdr', ev).reason


# -- the forms users paste ---------------------------------------------------

def test_lines_without_the_logger_prefix():
    text = ['[0] NCCL INFO ' + net_line(0, 1, gdr=False),
            '[1] NCCL INFO ' + net_line(1, 0, gdr=False),
            'NCCL INFO Using network IB']
    ev = ev_of(text)
    assert ev.nccl_lines == 3 and ev.proven() == 'net-ib'
    assert ev.channel_rank_ids == {0, 1}


@pytest.mark.parametrize('cut', [-3, -6, -10])
@pytest.mark.parametrize('sep', ['', ' '])
def test_a_wrapped_channel_line_is_joined(cut, sep):
    line = info('n0', 10, 0, net_line(0, 1))           # .../IB/0/GDRDMA
    head, tail = line[:cut], line[cut:]
    if sep:                 # wrapped at a space: the space is lost
        i = line.rindex(' ')
        head, tail = line[:i], line[i + 1:]
    ev = ev_of([head, tail, info('n0', 10, 0, 'Connected all rings')])
    assert ev.via == {'NET/IB/GDRDMA': 1}, ev.via


def test_a_channel_line_wrapped_over_three_lines():
    line = info('n0', 10, 0, net_line(0, 1))
    i = line.index(' via ')
    ev = ev_of([line[:i - 8], line[i - 8:i], line[i + 1:]])
    assert ev.via == {'NET/IB/GDRDMA': 1}, ev.via


def test_a_table_row_after_a_channel_line_is_not_joined():
    line = info('n0', 10, 0, net_line(0, 1, gdr=False))
    row = '     1024   256  float  sum  -1  10.1  0.10  0.10  0  9.9  0.10  0.10  0'
    ev = ev_of([line, row])
    assert ev.via == {'NET/IB': 1}


def test_text_that_merely_names_nccl_is_not_a_log(tmp_path):
    ev = ev_of(['RCCL Test Data', 'Test NCCL failure common.cu:123'])
    assert ev.nccl_lines == 0
    p = tmp_path / 'notes.txt'
    p.write_text('RCCL Test Data\nsome numbers 1 2 3\n')
    with pytest.raises(CclHealthError, match=re.escape(
            f'{p}: not an nccl-tests / rccl-tests output nor an NCCL/RCCL '
            'debug log')):
        X.classify(p.read_text(), str(p))


def test_a_cuda_failure_warn_does_not_make_a_log_an_output():
    text = '\n'.join(two_node_ib() + [
        info('n0', 100, 0, "Cuda failure 'out of memory'", kind='WARN')])
    assert X.classify(text, 'x.log') == 'log'
    assert X.classify('\n'.join(l.split(' ', 1)[1] for l in
                                two_node_ib()), 'y.log') == 'log'


def test_versions_by_rank():
    lines = two_node_ib()
    lines[0] = info('n0', 100, 0, 'NCCL version 2.21.5+cuda12.4')
    lines[5] = info('n1', 101, 0, 'NCCL version 2.19.3+cuda12.3')
    ev = ev_of(lines)
    assert {k: v['nccl_version'] for k, v in ev.versions_by_rank.items()} \
        == {'n0:100': '2.21.5+cuda12.4', 'n1:101': '2.19.3+cuda12.3'}


def test_a_rank_seen_only_through_ofi_lines_does_not_contradict_channels():
    lines = [info('h', 1, 0, 'NET/Plugin: Loaded net plugin AWS Libfabric'),
             info('h', 1, 0, 'Using network AWS Libfabric'),
             info('h', 1, 0, net_line(0, 1, net='AWS Libfabric')),
             info('h', 2, 1, 'NET/OFI Selected Provider is efa')]
    proof = prove('net-plugin-gdr', ev_of(lines))
    assert proof.ok, proof.reason
