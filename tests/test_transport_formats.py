"""The transport proof on lines built from the upstream format strings:
NVIDIA/nccl (2.3-2.30), ROCm/rccl (ROCm 5.x-6.x, and the current
ROCm/rocm-systems projects/rccl), aws-ofi-nccl 1.21.1, aws-ofi-rccl
(17d41cb, 1.4.0).  Each format string is copied from the file and version
named beside it; the values filled in are the test's."""

import re

import pytest
from hypothesis import given, settings, strategies as st

from ccl_health import CclHealthError
from ccl_health.evidence import debuglog as transport
from ccl_health.evidence.proof import prove
from ccl_health.sitedata import transports

# -- helpers ------------------------------------------------------------------


def cfmt(fmt, *args):
    """C printf as NCCL uses it: %lx / %x (bus ids), %p (comm pointers)."""
    return re.sub(r'%l?x', '%x', fmt).replace('%p', '%s') % args


# NVIDIA/nccl v2.12.12-1 src/debug.cc:151, v2.28.3-1 src/debug.cc:344+358,
# ROCm/rccl develop src/debug.cc:183
PREFIX = '%s:%d:%d [%d] NCCL INFO '


def info(text, host='nid001', pid=4242, tid=4250, dev=0):
    return cfmt(PREFIX, host, pid, tid, dev) + text


def ev_of(*lines):
    return transport.evidence_from_text('\n'.join(lines))


# -- channel lines: every format string, the key it gives ---------------------

NET_28_SEND = 'Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s'
NET_28_PXN = ('Channel %02d/%d : %d[%d] -> %d[%d] [send] via '
              'NET/%s/%d(%d)%s%s%s')
NET_28_RECV = ('Channel %02d/%d : %d[%d] -> %d[%d] [receive] via '
               'NET/%s/%d%s%s%s')
RCCL_NET_571 = ('Channel %02d/%d : %d[%lx] -> %d[%lx] [send] via '
                'NET/%s/%d%s%s comm %p nRanks %02d')

CHANNEL_CASES = [
    # NVIDIA/nccl v2.28.3-1 src/transport/net.cc:313 (same text 2.18-2.30)
    (cfmt(NET_28_SEND, 0, 0, 0, 0, 8, 0, 'AWS Libfabric', 1, '/GDRDMA', '',
          ''), 'NET/AWS Libfabric/GDRDMA'),
    (cfmt(NET_28_SEND, 3, 1, 0, 0, 8, 0, 'IB', 0, '/GDRDMA', '(PCI)',
          '/Shared'), 'NET/IB/GDRDMA'),
    (cfmt(NET_28_SEND, 1, 0, 0, 0, 1, 1, 'Socket', 0, '', '', ''),
     'NET/Socket'),
    # v2.28.3-1 src/transport/net.cc:317 (PXN: the proxy rank in brackets)
    (cfmt(NET_28_PXN, 2, 0, 3, 3, 11, 3, 'Libfabric', 2, 7, '/GDRDMA', '',
          ''), 'NET/Libfabric/GDRDMA'),
    # v2.28.3-1 src/transport/net.cc:359
    (cfmt(NET_28_RECV, 0, 0, 8, 0, 0, 0, 'OFI', 0, '', '', ''), 'NET/OFI'),
    (cfmt(NET_28_RECV, 0, 0, 8, 0, 0, 0, 'IBext_v8', 0, '/GDRDMA', '', ''),
     'NET/IBext_v8/GDRDMA'),
    # v2.12.12-1 src/transport/net.cc:184 (bus ids in hex)
    (cfmt('Channel %02d/%d : %d[%lx] -> %d[%lx] [send] via NET/%s/%d%s%s',
          0, 0, 1, 0x101d0, 8, 0x101c0, 'AWS Libfabric', 0, '/GDRDMA', ''),
     'NET/AWS Libfabric/GDRDMA'),
    # v2.9.9-1 src/transport/net.cc:120 (no connection index)
    (cfmt('Channel %02d : %d[%lx] -> %d[%lx] [send] via NET/%s/%d%s%s',
          0, 1, 0x1000, 8, 0x1000, 'NCCL RDMA Plugin', 0, '', '/Shared'),
     'NET/NCCL RDMA Plugin'),
    # v2.5.6-1 src/transport/net.cc:110 and v2.4.8-1 net.cc:306 ("Ring")
    (cfmt('Ring %02d : %d[%lx] -> %d[%lx] [send] via NET/%s/%d%s',
          0, 1, 0x1000, 2, 0x1000, 'IB', 0, '/GDRDMA'), 'NET/IB/GDRDMA'),
    (cfmt('Ring %02d : %d -> %d [send] via NET/%s/%d%s', 1, 0, 4, 'Socket', 0,
          ''), 'NET/Socket'),
    # v2.3.7-1 src/transport/net.cu:258 (/GDRDMA then /GDCopy)
    (cfmt('Ring %02d : %d -> %d via NET/%s/%d%s%s', 0, 4, 0, 'IB', 1,
          '/GDRDMA', '/GDCopy'), 'NET/IB/GDRDMA'),
    # ROCm/rccl rocm-5.7.1 src/transport/net.cc:205 (comm %p nRanks %02d)
    (cfmt(RCCL_NET_571, 0, 0, 0, 0xd6000, 3, 0xc6000, 'AWS Libfabric', 2,
          '/GDRDMA', '', '0x9bbf3b0', 4096), 'NET/AWS Libfabric/GDRDMA'),
    (cfmt(RCCL_NET_571, 1, 0, 5, 0xc6000, 0, 0xc1000, 'Socket', 1, '', '',
          '0x95cdeb0', 8), 'NET/Socket'),
    # ROCm/rocm-systems projects/rccl/src/transport/net.cc @03a89144
    (cfmt('Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d%s%s%s '
          'comm %p nRanks %02d', 0, 0, 7, 7, 0, 0, 'IB', 3, '/GDRDMA', '', '',
          '0x55d0c0ffee00', 16), 'NET/IB/GDRDMA'),
    # v2.28.3-1 src/transport/p2p.cc:386 / :393 / :398 / :406
    (cfmt('Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/direct pointer%s',
          0, 0, 0, 0, 1, 1, '/read'), 'P2P/direct pointer'),
    (cfmt('Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s',
          5, 0, 0, 0, 1, 1, 'CUMEM', '/read', ''), 'P2P/CUMEM'),
    (cfmt('Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s',
          5, 0, 0, 0, 1, 1, 'MNNVL', '', '/CE'), 'P2P/MNNVL'),
    (cfmt('Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/IPC%s%s',
          0, 1, 2, 2, 3, 3, '/read', '/CE'), 'P2P/IPC'),
    (cfmt('Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/indirect/%d[%d]%s',
          0, 0, 0, 0, 3, 3, 1, 1, '/read'), 'P2P/indirect'),
    # v2.7.8-1 src/transport/p2p.cc:136 (P2P/common device)
    (cfmt('Channel %02d : %d[%d] -> %d[%d] via P2P/common device%s',
          0, 0, 0, 1, 0, ''), 'P2P/common device'),
    # v2.3.7-1 src/transport/p2p.cu:480
    (cfmt('Ring %02d : %d[%d] -> %d[%d] via P2P/IPC', 0, 0, 0, 1, 1),
     'P2P/IPC'),
    # ROCm/rccl rocm-5.7.1 src/transport/p2p.cc:275, rocm-5.4.3 p2p.cc:265
    (cfmt('Channel %02d/%01d : %d[%lx] -> %d[%lx] via P2P/IPC%s%s comm %p '
          'nRanks %02d', 0, 0, 2, 0xc9000, 3, 0xce000, '', '', '0x10a5a9f0',
          8), 'P2P/IPC'),
    (cfmt('Channel %02d : %d[%lx] -> %d[%lx] via P2P/IPC%s%s comm %p '
          'nRanks %02d', 1, 0, 0xe3000, 1, 0xc3000, '/read', '',
          '0x7f53bc000e50', 4), 'P2P/IPC'),
    # ROCm/rocm-systems projects/rccl/src/transport/p2p.cc @03a89144: the
    # MNNVL string follows "CUMEM" in the format, so it prints CUMEMCUMEM
    (cfmt('Channel %02d/%01d : %d[%x] -> %d[%x] via P2P/CUMEM%s%s%s comm %p '
          'nRanks %02d', 0, 0, 0, 0, 1, 1, 'CUMEM', '/read', '', '0x1', 8),
     'P2P/CUMEMCUMEM'),
    # v2.28.3-1 src/transport/shm.cc:128, rocm-5.7.1 shm.cc:95
    (cfmt('Channel %02d : %d[%d] -> %d[%d] via SHM/%s/%s', 0, 0, 0, 1, 1,
          'direct', 'direct'), 'SHM/direct'),
    (cfmt('Channel %02d : %d[%lx] -> %d[%lx] via SHM/%s/%s comm %p nRanks '
          '%02d', 1, 0, 0x1000, 1, 0x2000, 'CE', 'direct', '0xabc', 2),
     'SHM/CE'),
    # v2.9.9-1 src/transport/shm.cc:77, v2.3.7-1 shm.cu:174
    (cfmt('Channel %02d : %d[%lx] -> %d[%lx] via direct shared memory',
          0, 2, 0x89000, 3, 0xb2000), 'SHM/direct'),
    (cfmt('Ring %02d : %d[%d] -> %d[%d] via direct shared memory',
          0, 0, 0, 1, 1), 'SHM/direct'),
    # v2.28.3-1 src/transport/coll_net.cc:182, v2.7.8-1 coll_net.cc:91,
    # rocm-5.7.1 coll_net.cc:166
    (cfmt('CollNet %02d/%1d : %d [send] via COLLNET/%s/%d%s%s', 0, 0, 3,
          'SHARP', 0, '/GDRDMA', ''), 'COLLNET/SHARP/GDRDMA'),
    (cfmt('Coll %02d : %d [send] via COLLNET/%s/%d%s', 0, 3, 'SHARP', 1, ''),
     'COLLNET/SHARP'),
    (cfmt('CollNet %02d/%1d : %d [receive] via COLLNET/%s/%d%s comm %p '
          'nRanks %02d', 0, 0, 3, 'SHARP', 0, '', '0x1', 16), 'COLLNET/SHARP'),
]


@pytest.mark.parametrize('line,key', CHANNEL_CASES)
def test_channel_line_formats(line, key):
    ev = ev_of(info(line))
    assert ev.via == {key: 1}, line
    assert not ev.unparsed
    rank, = ev.ranks.values()
    assert rank.key == 'nid001:4242' and rank.via == {key: 1}


@pytest.mark.parametrize('prefix', [
    '', '[1,3]<stdout>:', '3: ', '[2026-04-28 14:14:47] ',
    '(RayWorkerWrapper pid=660) '])
def test_launcher_and_timestamp_prefixes(prefix):
    line = prefix + info(cfmt(RCCL_NET_571, 0, 0, 0, 0xd6000, 3, 0xc6000,
                              'AWS Libfabric', 2, '/GDRDMA', '', '0x1', 8),
                         host='frontier00061', pid=695135)
    ev = ev_of(line)
    assert ev.via == {'NET/AWS Libfabric/GDRDMA': 1}
    assert list(ev.ranks) == ['frontier00061:695135']
    assert ev.hosts == ['frontier00061']


def test_rccl_log_was_judged_without_channels_before():
    # The reason for issue 11 item 1: the old pattern anchored the path at
    # the end of the line, so RCCL's " comm 0x... nRanks NN" hid every
    # channel.  Every RCCL line must now give its channel.
    lines = [info(cfmt(RCCL_NET_571, c, 0, 1, 0xc6000, 4, 0xc1000, 'Socket',
                       1, '', '', '0x9e4d8d0', 8), host=f'g10{c % 2}')
             for c in range(4)]
    ev = ev_of(*lines)
    assert ev.via == {'NET/Socket': 4}
    assert prove('net-socket', ev, nodes=2).ok


def test_ring_listing_is_not_a_channel_connection():
    # v2.28.3-1 src/init.cc "Channel %02d/%02d : " + ring ranks: no "via"
    ev = ev_of(info('Channel 00/02 :    0   1   2   3'),
               info('Channel 01/24 :    0   1'))
    assert ev.via == {} and not ev.unparsed
    assert 'no channel was connected' in prove('intra', ev).reason


@pytest.mark.parametrize('line', [
    # NVIDIA/nccl v2.28.3-1 src/graph/paths.cc:449, src/ras/rasnet.cc:586,
    # src/transport/nvls.cc:200 and :214, src/transport/generic.cc:37
    'GPU 0 / HCA 1 connected via C2C link',
    "RAS connected with 10.0.0.2<28028> via a socket that's no longer "
    'current!',
    'NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 16)',
    'Connected NVLS tree',
    'Connected all rings, use ring PXN 0 GDR 1',
])
def test_other_lines_with_via_or_nvls_are_not_channels(line):
    ev = ev_of(info(line), info('Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM'))
    assert ev.via == {'P2P/CUMEM': 1} and not ev.unparsed
    assert prove('intra', ev).ok


@pytest.mark.parametrize('path', [
    'NET/Libfabric',            # no device number
    'NVLS/whatever/0',          # a transport this proof does not know
    'NET/AWS Libfabric/x/GDRDMA',
])
def test_channel_line_not_understood_is_never_a_pass(path):
    ok_line = info('Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM')
    bad = info(f'Channel 01/0 : 0[0] -> 1[1] [send] via {path}')
    ev = ev_of(ok_line, bad)
    assert ev.unparsed == [bad]
    for asked in ('intra', 'net-socket', 'net-plugin', 'net-plugin-gdr'):
        proof = prove(asked, ev)
        assert not proof.ok
        assert 'not understood' in proof.reason and path in proof.reason


# -- channel lines, property based --------------------------------------------

NAMES = st.sampled_from(['AWS Libfabric', 'Libfabric', 'OFI', 'UCX',
                         'NCCL RDMA Plugin', 'IBext', 'IBext_v8', 'gIB',
                         'Socket', 'IB', 'My Net 2'])
FLAGS = st.tuples(st.sampled_from(['', '/GDRDMA']),
                  st.sampled_from(['', '(PCI)']),
                  st.sampled_from(['', '/Shared']))


@st.composite
def net_lines(draw):
    """One NET channel line of any version's format, with its key."""
    name = draw(NAMES)
    gdr, pci, shared = draw(FLAGS)
    ch, conn, dev = (draw(st.integers(0, 63)), draw(st.integers(0, 3)),
                     draw(st.integers(0, 15)))
    r1, r2 = draw(st.integers(0, 9999)), draw(st.integers(0, 9999))
    d1, d2 = draw(st.integers(0, 0xfffff)), draw(st.integers(0, 0xfffff))
    way = draw(st.sampled_from(['send', 'receive']))
    form = draw(st.integers(0, 5))
    if form == 0:       # NCCL 2.19-2.30 net.cc
        line = cfmt(f'Channel %02d/%d : %d[%d] -> %d[%d] [{way}] via '
                    f'NET/%s/%d%s%s%s', ch, conn, r1, d1, r2, d2, name, dev,
                    gdr, pci, shared)
    elif form == 1:     # NCCL PXN send
        line = cfmt(NET_28_PXN, ch, conn, r1, d1, r2, d2, name, dev,
                    draw(st.integers(0, 9999)), gdr, pci, shared)
    elif form == 2:     # RCCL rocm-5.x/6.x
        line = cfmt(f'Channel %02d/%d : %d[%lx] -> %d[%lx] [{way}] via '
                    f'NET/%s/%d%s%s comm %p nRanks %02d', ch, conn, r1, d1,
                    r2, d2, name, dev, gdr, shared,
                    hex(draw(st.integers(1, 2**47))),
                    draw(st.integers(1, 9999)))
    elif form == 3:     # NCCL 2.8-2.11
        line = cfmt(f'Channel %02d : %d[%lx] -> %d[%lx] [{way}] via '
                    f'NET/%s/%d%s%s', ch, r1, d1, r2, d2, name, dev, gdr,
                    shared)
    elif form == 4:     # NCCL 2.4
        line = cfmt(f'Ring %02d : %d -> %d [{way}] via NET/%s/%d%s', ch, r1,
                    r2, name, dev, gdr)
    else:               # current RCCL develop
        line = cfmt(f'Channel %02d/%d : %d[%d] -> %d[%d] [{way}] via '
                    f'NET/%s/%d%s%s%s comm %p nRanks %02d', ch, conn, r1, d1,
                    r2, d2, name, dev, gdr, pci, shared, '0x1f',
                    draw(st.integers(1, 9999)))
    return line, f'NET/{name}' + ('/GDRDMA' if gdr else '')


@settings(max_examples=300, deadline=None)
@given(net_lines(), st.sampled_from(['nid001', 'x1000c0s0b0n0', 'node-7']),
       st.integers(1, 4_000_000))
def test_any_net_channel_line_gives_its_network(case, host, pid):
    line, key = case
    ev = ev_of(info(line, host=host, pid=pid))
    assert ev.via == {key: 1} and not ev.unparsed
    assert list(ev.ranks) == [f'{host}:{pid}']


# -- plugin loading -----------------------------------------------------------

def plugin_run(name, load_lines, nets=None, gdr='/GDRDMA'):
    """Two ranks on two nodes, each with ``load_lines`` and NET channels."""
    lines = []
    for host, pid, peer in (('n1', 11, 1), ('n2', 22, 0)):
        lines += [info(t, host=host, pid=pid) for t in load_lines]
        lines.append(info(f'Using network {nets or name}', host=host,
                          pid=pid))
        lines.append(info(cfmt(NET_28_SEND, 0, 0, 1 - peer, 0, peer, 0,
                               nets or name, 0, gdr, '', ''),
                          host=host, pid=pid))
    return ev_of(*lines)


PROBE_THEN_LOAD = [
    # NVIDIA/nccl v2.18.3-1 src/net.cc:186 + :206 (RCCL rocm-5.7.1 net.cc:193
    # + :213 the same)
    ['NET/Plugin: Failed to find ncclNetPlugin_v6 symbol.',
     'NET/Plugin: Loaded net plugin %s (v5)'],
    # v2.21.5-1 src/net.cc:428 + :460
    ['NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.',
     'NET/Plugin: Loaded net plugin %s (v7)'],
    # v2.26.2-1 src/plugin/net/net_v10.cc:20, net_v9.cc:87, net_v8.cc:159
    ['NET/Plugin: Failed to find ncclNetPlugin_v10 symbol.',
     'NET/Plugin: Failed to find ncclNetPlugin_v9 symbol.',
     'NET/Plugin: Loaded net plugin %s (v8)'],
    # v2.28.3-1 net_v11.cc:18, plugin/net.cc:167 and :201; the CollNet half
    # (net_v11.cc:27, v2.26.2-1 net_v10.cc:30) is optional
    ['NET/Plugin: Loaded net plugin %s (v11)',
     'NET/Plugin: Failed to find ncclCollNetPlugin_v10 symbol.',
     'NET/Plugin: Failed to find ncclCollNetPlugin symbol (>= v5). '
     'ncclCollNetPlugin symbols v4 and lower are not supported.',
     'Initialized NET plugin %s', 'Assigned NET plugin %s to comm'],
    # v2.19.3-1 src/net.cc:239: a v7 plugin loads silently (the probe line
    # :241 comes only when v7 is missing); only "Using network" names it
    ['NET/Plugin: Failed to find ncclCollNetPlugin_v7 symbol.'],
]


@pytest.mark.parametrize('name', ['AWS Libfabric', 'Libfabric', 'OFI',
                                  'NCCL RDMA Plugin', 'UCX', 'IBext'])
@pytest.mark.parametrize('load', PROBE_THEN_LOAD)
def test_probing_plugin_versions_then_loading_is_a_load(name, load):
    ev = plugin_run(name, [t.replace('%s', name) for t in load])
    assert ev.plugin_name == name
    assert ev.plugin_failure is None
    for asked in ('net-plugin', 'net-plugin-gdr'):
        proof = prove(asked, ev, nodes=2)
        assert proof.ok, proof.reason
        assert f'plugin {name}' in proof.reason


FAILED_LOADS = [
    # (lines, the reason's text)  NVIDIA/nccl v2.18.3-1 src/net.cc:179-180
    (['NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: '
      'cannot open shared object file: No such file or directory',
      'NET/Plugin : No plugin found, using internal implementation'],
     'Plugin load (libnccl-net.so) returned 2'),
    # v2.19.3-1 src/net.cc:231
    (['NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: '
      'No such file or directory No plugin found (libnccl-net.so), using '
      'internal implementation'], 'dlerror=libnccl-net.so'),
    # v2.21.5-1 src/net.cc:349 / :351; ROCm/rccl develop src/net.cc:350
    (['NET/Plugin: No plugin found (librccl-net.so)'],
     'No plugin found (librccl-net.so)'),
    (['NET/Plugin: Plugin load returned 2 : libfabric.so.1: cannot open '
      'shared object file when loading libnccl-net-ofi.so'],
     'Plugin load returned 2'),
    # v2.23.4-1 src/net.cc:439 and v2.28.3-1 src/plugin/plugin_open.cc:107
    (['NET/Plugin: Could not find: libnccl-net.so. Using internal network '
      'plugin.'], 'Could not find: libnccl-net.so'),
    (['NET/Plugin: Could not find: libnccl-net-ofi.so libnccl-net-ofi.so'],
     'Could not find: libnccl-net-ofi.so'),
    # v2.28.3-1 src/plugin/plugin_open.cc:84: found but not loadable
    (['NET/Plugin: libnccl-net-ofi.so: libfabric.so.1: cannot open shared '
      'object file: No such file or directory'], 'libfabric.so.1'),
    # v2.18.3-1 src/net.cc:186 + :192: probed every version, none there
    (['NET/Plugin: Failed to find ncclNetPlugin_v6 symbol.',
      'NET/Plugin: Failed to find ncclNetPlugin symbol (v4 or v5).'],
     'Failed to find ncclNetPlugin symbol (v4 or v5)'),
    # v2.28.3-1 src/plugin/net.cc:181: loaded, then failed to initialize
    (['NET/Plugin: Loaded net plugin Libfabric (v11)',
      'Failed to initialize NET plugin Libfabric'],
     'Failed to initialize NET plugin Libfabric'),
]


@pytest.mark.parametrize('lines,why', FAILED_LOADS)
def test_plugin_that_did_not_load_is_a_fallback_with_its_reason(lines, why):
    ev = plugin_run('Socket', lines, gdr='')
    assert ev.proven() == 'net-socket'
    for asked in ('net-plugin', 'net-plugin-gdr'):
        proof = prove(asked, ev, nodes=2)
        assert not proof.ok and proof.proven == 'net-socket'
        assert proof.reason.startswith('fell back to NET/Socket')
        assert why in proof.reason, proof.reason
    assert prove('net-socket', ev, nodes=2).ok


def test_plugin_loaded_but_not_used_is_a_fallback():
    # e.g. NCCL_NET=Socket: the plugin loads, the channels go over sockets
    ev = plugin_run('Socket', ['NET/Plugin: Loaded net plugin Libfabric (v11)',
                               'Initialized NET plugin Libfabric'], gdr='')
    proof = prove('net-plugin', ev, nodes=2)
    assert not proof.ok and proof.proven == 'net-socket'
    assert 'plugin Libfabric loaded but NCCL did not use it' in proof.reason


@settings(max_examples=200, deadline=None)
@given(st.integers(5, 11), st.data())
def test_probe_down_to_any_version(top, data):
    # every NCCL version probes from its newest plugin API downwards
    # (v2.18.3-1 src/net.cc:183-206 ... v2.26.2-1 src/plugin/net/net_v*.cc)
    found = data.draw(st.one_of(st.none(), st.integers(4, top)))
    name = data.draw(NAMES.filter(lambda n: n not in transports.BUILTIN_NETS))
    stop = found if found is not None else 4
    lines = [f'NET/Plugin: Failed to find ncclNetPlugin_v{v} symbol.'
             for v in range(top, stop, -1)]
    if found is None:
        lines.append('NET/Plugin: Failed to find ncclNetPlugin symbol '
                     '(>= v5). ncclNetPlugin symbols v4 and lower are not '
                     'supported.')
        ev = plugin_run('Socket', lines, gdr='')
        proof = prove('net-plugin', ev, nodes=2)
        assert not proof.ok
        assert 'Failed to find ncclNetPlugin symbol (>= v5)' in proof.reason
    else:
        lines.append(f'NET/Plugin: Loaded net plugin {name} (v{found})')
        ev = plugin_run(name, lines)
        assert ev.plugin_loaded == name and ev.plugin_failure is None
        assert prove('net-plugin-gdr', ev, nodes=2).ok


def test_socket_and_ib_lines_are_not_plugin_loads():
    # v2.28.3-1 src/plugin/net.cc:167/:181/:201 also name the built-in nets
    ev = plugin_run('Socket', ['Failed to initialize NET plugin IB',
                               'Initialized NET plugin Socket',
                               'Assigned NET plugin Socket to comm'], gdr='')
    assert ev.plugin_loaded is None and ev.plugin_name is None
    assert ev.plugin_failure is None
    proof = prove('net-plugin', ev, nodes=2)
    assert not proof.ok and 'no "Loaded net plugin" line' in proof.reason


def test_collnet_plugin_lines_are_neither_load_nor_failure():
    ev = plugin_run('Socket', [
        'NET/Plugin: Loaded collnet plugin SHARP (v11)',
        'NET/Plugin: Loaded coll plugin SHARP (v5)',
        'NET/Plugin: Failed to find ncclCollNetPlugin_v6 symbol.'], gdr='')
    assert ev.plugin_loaded is None and ev.plugin_failure is None


# -- builtin IB: net-ib, and a fallback from the plugin -----------------------

@pytest.mark.parametrize('gdr', ['', '/GDRDMA'])
def test_builtin_ib_is_a_fallback_from_the_plugin(gdr):
    ev = plugin_run('IB', ['NET/Plugin: Could not find: libnccl-net.so. Using '
                           'internal network plugin.'], gdr=gdr)
    shown = 'net-ib-gdr' if gdr else 'net-ib'
    assert ev.proven() == shown
    for asked in ('net-plugin', 'net-plugin-gdr'):
        proof = prove(asked, ev, nodes=2)
        assert not proof.ok and proof.proven == shown
        assert "fell back to NCCL's builtin NET/IB" in proof.reason
        assert 'Could not find: libnccl-net.so' in proof.reason
    assert not prove('net-socket', ev, nodes=2).ok
    assert not prove('intra', ev).ok
    assert prove('net-ib', ev, nodes=2).ok
    assert prove('net-ib-gdr', ev, nodes=2).ok == bool(gdr)


# -- mixed ranks --------------------------------------------------------------

def rank_log(host, pid, net, loaded=True, gdr=''):
    lines = []
    if loaded:
        lines.append(info('NET/Plugin: Loaded net plugin Libfabric (v10)',
                          host=host, pid=pid))
    else:
        lines.append(info('NET/Plugin: Could not find: libnccl-net.so. Using '
                          'internal network plugin.', host=host, pid=pid))
    lines.append(info(f'Using network {net}', host=host, pid=pid))
    for ch in range(2):
        lines.append(info(cfmt(NET_28_SEND, ch, 0, 0, 0, 1, 1, net, 0, gdr,
                               '', ''), host=host, pid=pid))
    return lines


def test_mixed_ranks_in_files_are_a_fallback(tmp_path):
    files = []
    for i, (net, loaded) in enumerate([('Libfabric', True),
                                       ('Libfabric', True),
                                       ('Libfabric', True),
                                       ('Socket', False)]):
        host = f'nid{i // 2}'
        f = tmp_path / f'nccl-debug.{host}.{100 + i}.log'
        f.write_text('\n'.join(rank_log(host, 100 + i, net, loaded)) + '\n')
        files.append(str(f))
    ev = transport.read_evidence(files)
    assert len(ev.ranks) == 4
    assert ev.proven() == 'net-socket'          # the weakest rank
    for asked in ('net-plugin', 'net-plugin-gdr', 'net-socket'):
        proof = prove(asked, ev, nodes=2)
        assert not proof.ok, asked
        assert proof.reason.startswith('ranks used different networks')
        assert 'NET/Libfabric on 3 of 4 ranks' in proof.reason
        assert ('NET/Socket on 1 of 4 ranks (nccl-debug.nid1.103.log)'
                in proof.reason)
        assert ('the plugin did not load on nccl-debug.nid1.103.log: Could '
                'not find: libnccl-net.so' in proof.reason)


def test_mixed_ranks_in_one_text_are_told_apart_by_host_pid():
    lines = rank_log('a', 1, 'Libfabric') + rank_log('b', 2, 'Socket', False)
    ev = ev_of(*lines)
    assert set(ev.ranks) == {'a:1', 'b:2'}
    proof = prove('net-plugin', ev, nodes=2)
    assert not proof.ok
    assert 'NET/Libfabric on 1 of 2 ranks (a:1)' in proof.reason
    assert 'NET/Socket on 1 of 2 ranks (b:2)' in proof.reason


def test_rank_without_network_channels_but_another_network_is_mixed():
    # a rank whose only channels are P2P still says which network it chose
    lines = rank_log('a', 1, 'Libfabric', gdr='/GDRDMA') + [
        info('Using network Socket', host='b', pid=2),
        info('Channel 00/0 : 2[2] -> 3[3] via P2P/CUMEM', host='b', pid=2)]
    proof = prove('net-plugin', ev_of(*lines), nodes=2)
    assert not proof.ok and 'NET/Socket on 1 of 2 ranks (b:2)' in proof.reason


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(['Libfabric', 'Socket', 'IB']),
                          st.booleans()), min_size=1, max_size=8),
       st.randoms(use_true_random=False))
def test_plugin_passes_only_if_every_rank_used_it(ranks, rnd):
    lines = []
    for i, (net, gdr) in enumerate(ranks):
        lines += rank_log(f'h{i % 2}', i, net, loaded=net == 'Libfabric',
                          gdr='/GDRDMA' if gdr else '')
    rnd.shuffle(lines)                  # the order of lines does not matter
    ev = ev_of(*lines)
    nodes = 2 if len({i % 2 for i in range(len(ranks))}) == 2 else 1
    every = all(net == 'Libfabric' for net, _ in ranks)
    assert prove('net-plugin', ev, nodes=nodes).ok == every
    assert prove('net-plugin-gdr', ev, nodes=nodes).ok == (
        every and all(gdr for _, gdr in ranks))
    assert prove('net-socket', ev, nodes=nodes).ok == all(
        net == 'Socket' for net, _ in ranks)
    assert not prove('intra', ev, nodes=nodes).ok


# -- multi-node ---------------------------------------------------------------

def intra_only(hosts=('n1', 'n2')):
    return ev_of(*[info(cfmt('Channel %02d/%01d : %d[%d] -> %d[%d] via '
                             'P2P/IPC%s%s', c, 0, 0, 0, 1, 1, '', ''),
                        host=h, pid=7) for h in hosts for c in range(2)])


@pytest.mark.parametrize('asked', ['intra', 'net-socket', 'net-plugin',
                                   'net-plugin-gdr'])
def test_multi_node_run_without_network_lines_is_never_ok(asked):
    ev = intra_only()
    assert ev.proven() == 'intra'
    assert prove('intra', ev).ok          # as one node: fine
    proof = prove(asked, ev, nodes=2)
    assert not proof.ok
    if asked == 'intra':
        assert 'intra-node transport asked for a 2-node run' in proof.reason
    else:
        assert proof.proven is None
        assert ('2-node run but no network channel understood'
                in proof.reason)


def test_multi_node_with_unknown_network_lines_is_not_intra():
    ev = ev_of(info('Channel 00/0 : 0[0] -> 1[1] via P2P/IPC', host='n1'),
               info('Channel 00/0 : 1[1] -> 8[0] [send] via NET/Fancy Net',
                    host='n2'))
    proof = prove('intra', ev, nodes=1)
    assert not proof.ok and 'not understood' in proof.reason
    assert not prove('net-plugin', ev, nodes=2).ok


def test_multi_node_logs_of_fewer_hosts_prove_nothing_for_the_others():
    ev = ev_of(*rank_log('n1', 1, 'Libfabric', gdr='/GDRDMA'))
    assert prove('net-plugin', ev, nodes=1).ok
    proof = prove('net-plugin', ev, nodes=2)
    assert not proof.ok and 'only 1 host(s) (n1)' in proof.reason


@pytest.mark.parametrize('nodes', [0, -1, 1.5, '2', True])
def test_bad_node_count_is_an_error(nodes):
    with pytest.raises(CclHealthError, match='nodes'):
        prove('intra', intra_only(), nodes=nodes)


# -- GPUDirect RDMA -----------------------------------------------------------

GDR_OFF = [
    # aws-ofi-nccl 1.21.1 src/nccl_ofi_net.cpp:965 (log_reason "GDR", :406)
    ('NET/OFI Need to force simple protocol: GDR not supported',
     'GDR not supported'),
    # aws-ofi-nccl 1.21.1 src/nccl_ofi_ofiutils.cpp:362
    ('NET/OFI Could not disable CUDA API usage for HMEM, disabling GDR',
     'disabling GDR'),
    # NVIDIA/nccl v2.28.3-1 src/graph/paths.cc:454 and topo.cc:1343
    ('GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 7 > 4)',
     'distance 7 > 4'),
    ("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
     "GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"),
]


@pytest.mark.parametrize('line,why', GDR_OFF)
def test_gdr_off_reason_is_named(line, why):
    lines = rank_log('a', 1, 'Libfabric') + [info(line, host='a', pid=1)]
    proof = prove('net-plugin-gdr', ev_of(*lines))
    assert not proof.ok and proof.proven == 'net-plugin'
    assert 'without GPUDirect RDMA on 2 of 2 network channels' in proof.reason
    assert why in proof.reason


def test_gdr_on_some_paths_only_is_not_gdr():
    lines = rank_log('a', 1, 'Libfabric', gdr='/GDRDMA') + \
        rank_log('b', 2, 'Libfabric', gdr='')
    ev = ev_of(*lines)
    proof = prove('net-plugin-gdr', ev, nodes=2)
    assert not proof.ok and 'on 2 of 4 network channels' in proof.reason
    assert prove('net-plugin', ev, nodes=2).ok


def test_other_simple_protocol_reasons_are_not_gdr_reasons():
    # aws-ofi-nccl 1.21.1 src/platform-aws.cpp:926
    lines = rank_log('a', 1, 'Libfabric', gdr='/GDRDMA') + [info(
        'NET/OFI Need to force simple protocol: byte delivery ordering not '
        'supported', host='a', pid=1)]
    ev = ev_of(*lines)
    assert ev.gdr_off_reason is None
    assert prove('net-plugin-gdr', ev).ok


# -- versions -----------------------------------------------------------------

def test_versions_of_nccl_and_aws_ofi_nccl():
    ev = ev_of(
        # NVIDIA/nccl v2.28.3-1 src/init.cc:583 (VERSION_STRING), cudawrap
        info('NCCL version 2.28.3+cuda12.9'), info('cudaDriverVersion 12080'),
        # aws-ofi-nccl 1.21.1 src/nccl_ofi_net.cpp:188, :194, :644
        info('NET/OFI Initializing aws-ofi-nccl 1.21.1'),
        info('NET/OFI Using Libfabric version 1.22'),
        info('NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)'))
    assert ev.versions == {
        'nccl_version': '2.28.3+cuda12.9', 'cuda_driver': '12080',
        'plugin_version': '1.21.1', 'plugin_package': 'aws-ofi-nccl',
        'libfabric_version': '1.22', 'provider': 'cxi'}


def test_versions_of_rccl_and_aws_ofi_rccl():
    # ROCm/rccl develop src/init.cc:719-750: one INFO with two newlines, so
    # the HIP and ROCm lines come without the logger prefix
    text = '\n'.join([
        info('RCCL version : 2.20.5-HEAD:f3b6a3b'),
        'HIP version  : 6.2.41133-dd7f95766',
        'ROCm version : 6.2.0.0-66-ccc6ea3', '',
        # aws-ofi-rccl 17d41cb (1.4.0) src/nccl_ofi_net.c:1120 and :1199
        info('NET/OFI Using aws-ofi-rccl 1.4.0'),
        info('NET/OFI Selected Provider is cxi'),
        # aws-ofi-nccl 1.21.1 src/nccl_ofi_rocm.cpp:44
        info('NET/OFI Using HIP driver version 60342134 with runtime '
             '60342134'),
    ])
    v = transport.evidence_from_text(text).versions
    assert v == {'rccl_version': '2.20.5-HEAD:f3b6a3b',
                 'hip_version': '6.2.41133-dd7f95766',
                 'rocm_version': '6.2.0.0-66-ccc6ea3',
                 'plugin_version': '1.4.0', 'plugin_package': 'aws-ofi-rccl',
                 'provider': 'cxi', 'hip_driver': '60342134'}


def test_older_rccl_version_line():
    # ROCm/rccl rocm-5.4.3 src/init.cc:610 VERSION_STRING + " %s" githash
    v = ev_of(info('RCCL version 2.13.4+hip5.4 HEAD:a6f4e5a')).versions
    assert v == {'rccl_version': '2.13.4+hip5.4'}


# -- real logs, damaged -------------------------------------------------------

def _published_lines(name):
    from conftest import REPO, read
    import os
    return read(os.path.join(REPO, 'tests', 'fixtures', 'published',
                             name)).splitlines()


SOCKET_LOG = _published_lines(
    'rccl-debug_socket_mi250x-2node_rccl-issue-1026.log')
GDR_LOG = _published_lines('nccl-debug_aws-libfabric_gdrdma_efa-p4d-2node.log')


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_lines_dropped_or_reordered_never_change_the_transport(data):
    for lines, passes, never in (
            (SOCKET_LOG, 'net-socket',
             ('intra', 'net-plugin', 'net-plugin-gdr')),
            (GDR_LOG, 'net-plugin-gdr', ('intra', 'net-socket'))):
        keep = data.draw(st.lists(st.booleans(), min_size=len(lines),
                                  max_size=len(lines)))
        part = [ln for ln, k in zip(lines, keep) if k]
        part = data.draw(st.permutations(part))
        ev = transport.evidence_from_text('\n'.join(part))
        for asked in never:
            assert not prove(asked, ev, nodes=2).ok, asked
        proof = prove(passes, ev, nodes=2)
        if proof.ok:        # only with the evidence that proves it
            assert ev.net_paths and ev.proven() == passes
