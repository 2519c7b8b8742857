"""The transport registry (ccl_health/sitedata/transports.py): every module reads
the same records (schemas, site files, the ReFrame parameters, the ideal
bandwidth, the one-node switches), and ``net-ib``, NCCL's builtin
InfiniBand / RoCE network, is proven from lines built from NCCL's own
format strings and from a published real log."""

import dataclasses
import os

import pytest

from ccl_health import CclHealthError
from ccl_health.sitedata.transports import NAMES as TRANSPORTS
from ccl_health.evidence import collectives as C
from ccl_health.sitedata import schemas
from ccl_health.sitedata import site
from ccl_health.evidence import debuglog as transport
from ccl_health.evidence.proof import prove
from ccl_health.sitedata import transports
from conftest import REPO

SITE_DIR = os.path.join(REPO, 'site')
SHIPPED = sorted(f[:-5] for f in os.listdir(SITE_DIR) if f.endswith('.yaml'))


# -- one registry, read everywhere --------------------------------------------

def test_transports_are_the_registry_names_in_report_order():
    assert TRANSPORTS == tuple(t.name for t in transports.REGISTRY)
    assert TRANSPORTS == ('intra', 'net-socket', 'net-ib', 'net-ib-gdr',
                          'net-plugin', 'net-plugin-gdr')
    assert len(set(TRANSPORTS)) == len(TRANSPORTS)
    assert [transports.order(t) for t in TRANSPORTS] == list(
        range(len(TRANSPORTS)))
    assert transports.order('net-foo') == len(TRANSPORTS)


def test_records_are_frozen_and_looked_up_by_name():
    t = transports.get('net-ib')
    assert transports.get(t) is t and str(t) == 'net-ib'
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.name = 'x'
    assert t.name == 'net-ib' and transports.get('net-ib') is t
    with pytest.raises(CclHealthError, match="unknown transport 'ib'"):
        transports.get('ib')
    assert transports.find('ib') is None


def transports_in(name):
    """The transport names schema ``name`` knows (kept equal to
    :data:`ccl_health.sitedata.transports.NAMES` by the test below)."""
    doc = schemas.schema(name)
    if name == 'site':
        return tuple(doc['properties']['transports']['propertyNames']['enum'])
    return tuple(doc['$defs']['entry']['properties']['transport']['enum'])


def test_schema_enums_are_the_registry():
    for name in ('site', 'reference'):
        assert transports_in(name) == TRANSPORTS


@pytest.mark.parametrize('name', SHIPPED)
def test_site_files_name_registry_transports_and_the_rest_is_unavailable(
        name):
    s = site.load(SITE_DIR, name)
    assert set(s.transports) <= set(TRANSPORTS)
    for t in transports.REGISTRY:
        assert (t.name in s.transports) == (s.unavailable(t.name) is None)


def test_plugin_and_builtin_transports_split_the_registry():
    plugin = transports.plugin_names()
    builtin = transports.builtin_names()
    assert plugin == ['net-plugin', 'net-plugin-gdr']
    assert builtin == ['intra', 'net-socket', 'net-ib', 'net-ib-gdr']
    assert sorted(plugin + builtin) == sorted(TRANSPORTS)
    # only the plugin transports take the plugin build's placeholders
    for t in transports.REGISTRY:
        text = ('system: x\ntransports:\n  %s:\n    env:\n'
                '      NCCL_NET_PLUGIN: "{plugin_library}"\n' % t.name)
        if t.uses_plugin:
            assert site.parse(text).transports[t.name].env
        else:
            with pytest.raises(CclHealthError,
                               match='unknown placeholder {plugin_library}'):
                site.parse(text)


def test_one_node_switches_come_from_the_record():
    text = '\n'.join(['system: x', 'transports:'] +
                     [f'  {t}:\n    env: {{}}' for t in TRANSPORTS])
    s = site.parse(text)
    for t in transports.REGISTRY:
        env = s.render_env(t.name, {}, single_node=True)
        forced = {'NCCL_P2P_DISABLE': '1', 'NCCL_SHM_DISABLE': '1'}
        assert (forced.items() <= env.items()) == t.uses_network
        assert t.one_node_env() == (forced if t.uses_network else {})
        # on several nodes NCCL finds the network itself
        assert 'NCCL_P2P_DISABLE' not in s.render_env(t.name, {}, False)


def test_ideal_bandwidth_source_comes_from_the_record():
    for t in transports.REGISTRY:
        nv = C.ideal_busbw(t.name, nvlink_gen=4, nvlink_links=18)
        nic = C.ideal_busbw(t.name, nic_gbps=400)
        if t.ideal_from == transports.IDEAL_NVLINK:
            assert (nv, nic) == (450.0, None)
        else:
            assert (nv, nic) == (None, 50.0)
    assert C.ideal_busbw('net-ib', nic_gbps=400) == 50.0
    with pytest.raises(CclHealthError, match='unknown transport'):
        C.ideal_busbw('net-foo', nic_gbps=400)


def test_a_transport_the_site_does_not_list_is_unavailable_not_an_error():
    s = site.load(SITE_DIR, 'local')
    why = s.unavailable('net-ib')
    assert why and 'net-ib' in why and 'not configured for local' in why
    assert s.unavailable('net-socket') is None
    # every transport, the plugin's and net-socket's too (an InfiniBand
    # site without the plugin, issue 38.3): unavailable with the reason,
    # naming what the file lists; only asking for its settings is an error
    ib = site.parse('system: x\ntransports:\n  intra:\n    env: {}\n'
                    '  net-ib:\n    env: {}\n', 'x.yaml')
    for name in ('net-socket', 'net-ib-gdr', 'net-plugin', 'net-plugin-gdr'):
        why = ib.unavailable(name)
        assert why.startswith(f'{name} (') and 'not configured for x' in why
        assert 'x.yaml lists intra, net-ib under transports:' in why
    assert ib.unavailable('net-ib') is None
    with pytest.raises(CclHealthError, match="'net-plugin' is not config"):
        ib.transport('net-plugin')


def test_path_rules():
    ib, sock = transports.get('net-ib'), transports.get('net-socket')
    plug, gdr = transports.get('net-plugin'), transports.get('net-plugin-gdr')
    intra, ibgdr = transports.get('intra'), transports.get('net-ib-gdr')
    assert ib.accepts_path('NET/IB') and ib.accepts_path('NET/IB/GDRDMA')
    assert ibgdr.accepts_path('NET/IB/GDRDMA')
    assert not ibgdr.accepts_path('NET/IB')
    assert not ibgdr.accepts_path('NET/Libfabric/GDRDMA')
    assert not ib.accepts_path('NET/IBext_v8')       # NCCL's external plugin
    assert plug.accepts_path('NET/IBext_v8') and not plug.accepts_path(
        'NET/IB')
    assert gdr.accepts_path('NET/Libfabric/GDRDMA')
    assert not gdr.accepts_path('NET/Libfabric')
    assert sock.accepts_path('NET/Socket') and not sock.accepts_path('P2P/IPC')
    assert intra.accepts_path('P2P/CUMEM') and intra.accepts_path('SHM/direct')
    assert not intra.accepts_path('NET/IB')


# -- net-ib: lines from NCCL's format strings ---------------------------------

def cfmt(fmt, *args):
    """C printf as NCCL uses it here (%lld is Python's %d)."""
    return fmt.replace('%lld', '%d') % args


# NVIDIA/nccl v2.28.3-1 src/debug.cc (prefix), src/transport/net.cc:313
# (send), :359 (receive), net_ib.cc:780 / :789 / :793, src/init.cc:390,
# src/transport/net_socket.cc:76, src/misc/param.cc:88
PREFIX = '%s:%d:%d [%d] NCCL INFO '
NET_SEND = 'Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s'
NET_RECV = ('Channel %02d/%d : %d[%d] -> %d[%d] [receive] via '
            'NET/%s/%d%s%s%s')
IB_USING = 'NET/IB : Using%s %s; OOB %s:%s'
IB_DEV = ' [%d]%s:%d/%s'
IB_NONE = 'NET/IB : No device found.'
SOCKET_USING = 'NET/Socket : Using%s'
USING_NETWORK = 'Using network %s'
PARAM = '%s set by environment to %lld.'


def info(text, host, pid, dev=0):
    return cfmt(PREFIX, host, pid, pid + 5, dev) + text


def ib_run(nets=('IB', 'IB'), gdr=('/GDRDMA', '/GDRDMA'), hcas=2,
           link='IB', pre=()):
    """Two ranks on two nodes over NCCL's builtin network ``nets[i]``."""
    lines = []
    for i, (host, pid) in enumerate((('gpu01', 100), ('gpu02', 200))):
        lines += [info(t, host, pid) for t in pre]
        if nets[i] == 'IB':
            devs = ''.join(cfmt(IB_DEV, d, f'mlx5_{d}', 1, link)
                           for d in range(hcas))
            lines.append(info(cfmt(IB_USING, devs, '', 'ib0',
                                   f'10.0.0.{i + 1}<0>'), host, pid))
        else:
            lines.append(info(IB_NONE, host, pid))
            lines.append(info(cfmt(SOCKET_USING, f' [0]eth0:10.0.0.{i + 1}'
                                   '<0>'), host, pid))
        lines.append(info(cfmt(USING_NETWORK, nets[i]), host, pid))
        for ch in range(2):
            lines.append(info(cfmt(NET_SEND, ch, 0, i, 0, 1 - i, 0, nets[i],
                                   ch % hcas, gdr[i], '', ''), host, pid))
            lines.append(info(cfmt(NET_RECV, ch, 0, 1 - i, 0, i, 0, nets[i],
                                   ch % hcas, gdr[i], '', ''), host, pid))
    return transport.evidence_from_text('\n'.join(lines))


@pytest.mark.parametrize('gdr', ['/GDRDMA', ''])
@pytest.mark.parametrize('link', ['IB', 'RoCE'])
def test_builtin_ib_on_every_rank_is_net_ib(gdr, link):
    ev = ib_run(gdr=(gdr, gdr), link=link)
    shown = 'net-ib-gdr' if gdr else 'net-ib'
    assert ev.proven() == shown and ev.plugin_name is None
    proof = prove('net-ib', ev, nodes=2)
    assert proof.ok and proof.proven == shown
    assert proof.reason.startswith("NCCL's builtin NET/IB")
    assert ('GPUDirect RDMA on every path' in proof.reason) == bool(gdr)
    # net-ib-gdr only with /GDRDMA on every channel
    assert prove('net-ib-gdr', ev, nodes=2).ok == bool(gdr)
    # and it is nothing else
    for asked in ('intra', 'net-socket', 'net-plugin', 'net-plugin-gdr'):
        assert not prove(asked, ev, nodes=2).ok, asked


# NVIDIA/nccl src/graph/topo.cc (2.18-2.29): what NCCL says of an HCA whose
# GPUDirect RDMA support it did not find (src/transport/net_ib: no
# nvidia_peermem / nv_peer_mem module, no DMA-BUF)
TOPO_GDR = "NET/%s : GPU Direct RDMA %s for HCA %d '%s'"


def ib_gdr_lost_run():
    """Two nodes over NCCL's builtin IB; gpu02 without nvidia_peermem: its
    HCA says GPU Direct RDMA Disabled and its channels have no /GDRDMA."""
    lines = []
    for i, (host, pid) in enumerate((('gpu01', 100), ('gpu02', 200))):
        on = i == 0
        lines.append(info(cfmt(TOPO_GDR, 'IB', 'Enabled' if on else
                               'Disabled', 0, 'mlx5_0'), host, pid))
        lines.append(info(cfmt(USING_NETWORK, 'IB'), host, pid))
        for ch in range(2):
            flag = '/GDRDMA' if on else ''
            lines.append(info(cfmt(NET_SEND, ch, 0, i, 0, 1 - i, 0, 'IB', 0,
                                   flag, '', ''), host, pid))
            lines.append(info(cfmt(NET_RECV, ch, 0, 1 - i, 0, i, 0, 'IB', 0,
                                   flag, '', ''), host, pid))
    return transport.evidence_from_text('\n'.join(lines))


def test_net_ib_gdr_lost_on_a_node_is_a_fallback_not_a_pass():
    """GPUDirect RDMA lost on one node (nvidia_peermem not loaded): net-ib
    still passes (it does not require it, and says so), net-ib-gdr is a
    fallback naming the channels, NCCL's line and what to look at."""
    from ccl_health.judge.caseevidence import Attempt, CaseEvidence
    from ccl_health.judge.casejudge import judge
    from ccl_health.judge.verdicts import Verdict
    from ccl_health.evidence import nccltests
    ev = ib_gdr_lost_run()
    assert ev.proven() == 'net-ib'
    ok = prove('net-ib', ev, nodes=2)
    assert ok.ok and 'GPUDirect RDMA on 4 of 8 network channel lines' in \
        ok.reason
    lost = prove('net-ib-gdr', ev, nodes=2)
    assert not lost.ok and (lost.asked, lost.proven) == ('net-ib-gdr',
                                                         'net-ib')
    assert lost.reason.startswith(
        "NCCL's builtin NET/IB ran without GPUDirect RDMA on 4 of 8 network "
        "channels (NET/IB x4, NET/IB/GDRDMA x4): NET/IB : GPU Direct RDMA "
        "Disabled for HCA 0 'mlx5_0'"), lost.reason
    assert 'nvidia_peermem' in lost.reason
    table = ('#       size         count      type   redop    root     time  '
             ' algbw   busbw #wrong     time   algbw   busbw #wrong\n'
             '  1073741824     268435456     float     sum      -1  44739.2  '
             '  24.00    24.00      0  44739.2    24.00    24.00      0\n'
             '# Out of bounds values : 0 OK\n'
             '# Avg bus bandwidth    : 24.00\n')
    j = judge(CaseEvidence(
        what='all_reduce_perf', transport='net-ib-gdr',
        collective='all_reduce', nodes=2, gpus_per_node=1,
        attempts=[Attempt(nccltests.parse_text(table), 0, None, lost, ev,
                          [])]))
    assert j.verdict is Verdict.FALLBACK, j.reason
    assert 'without GPUDirect RDMA' in j.reason
    # every channel with /GDRDMA: net-ib-gdr passes
    full = ib_run()
    assert full.proven() == 'net-ib-gdr'
    assert prove('net-ib-gdr', full, nodes=2).ok


def test_net_ib_gdr_without_channel_lines_is_not_called_a_fallback():
    """Ranks that said ``Using network IB`` but connected no channel: the
    network asked for, GPUDirect RDMA unknown: not proven, no fallback."""
    lines = [info(cfmt(USING_NETWORK, 'IB'), h, pid)
             for h, pid in (('gpu01', 100), ('gpu02', 200))]
    ev = transport.evidence_from_text('\n'.join(lines))
    proof = prove('net-ib-gdr', ev, nodes=2)
    assert not proof.ok and proof.proven is None


def test_net_ib_that_fell_back_to_sockets_says_why():
    ev = ib_run(nets=('Socket', 'Socket'), gdr=('', ''),
                pre=[cfmt(PARAM, 'NCCL_IB_DISABLE', 0)])
    assert ev.proven() == 'net-socket'
    proof = prove('net-ib', ev, nodes=2)
    assert not proof.ok and proof.proven == 'net-socket'
    assert proof.reason.startswith("fell back to NET/Socket instead of "
                                   "NCCL's builtin NET/IB")
    assert proof.reason.endswith(': NET/IB : No device found')


def test_net_ib_disabled_by_the_environment_is_named():
    ev = ib_run(nets=('Socket', 'Socket'), gdr=('', ''),
                pre=[cfmt(PARAM, 'NCCL_IB_DISABLE', 1)])
    proof = prove('net-ib', ev, nodes=2)
    assert not proof.ok
    assert 'NCCL_IB_DISABLE set by environment to 1' in proof.reason


def test_sockets_asked_but_ib_used_is_not_a_fallback():
    proof = prove('net-socket', ib_run(), nodes=2)
    assert not proof.ok and proof.proven == 'net-ib-gdr'
    assert proof.reason.startswith("asked for NET/Socket but NCCL used "
                                   "NCCL's builtin NET/IB")
    assert 'fell back' not in proof.reason


def test_net_ib_on_some_ranks_only_is_mixed():
    ev = ib_run(nets=('IB', 'Socket'), gdr=('/GDRDMA', ''))
    assert ev.proven() == 'net-socket'
    proof = prove('net-ib', ev, nodes=2)
    assert not proof.ok
    assert proof.reason.startswith('ranks used different networks')
    assert 'NET/IB on 1 of 2 ranks (gpu01:100)' in proof.reason


def test_net_ib_over_a_plugin_is_not_net_ib():
    # NCCL's external IB plugin (nccl-rdma-sharp-plugins) names itself
    # IBext_v8: a plugin, not the builtin network
    ev = ib_run(nets=('IBext_v8', 'IBext_v8'),
                pre=['NET/Plugin: Loaded net plugin IBext_v8 (v8)'])
    assert ev.proven() == 'net-plugin-gdr'
    proof = prove('net-ib', ev, nodes=2)
    assert not proof.ok
    assert proof.reason.startswith("asked for NCCL's builtin NET/IB but NCCL "
                                   "used the plugin IBext_v8")
    assert prove('net-plugin-gdr', ev, nodes=2).ok


def test_net_ib_on_one_node_needs_the_network_forced():
    lines = [info('Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read', 'g', 1)]
    proof = prove('net-ib', transport.evidence_from_text(
        '\n'.join(lines)))
    assert not proof.ok and 'P2P/SHM were not disabled' in proof.reason


# -- net-ib: a published real log ---------------------------------------------

PUBLISHED = os.path.join(
    REPO, 'tests', 'fixtures', 'published',
    'nccl-debug_builtin-ib-roce_gdrdma_ofi-plugin-unused_8rank-node.log')


def test_published_roce_log_is_net_ib_and_a_plugin_fallback():
    ev = transport.read_evidence([PUBLISHED])
    assert ev.versions['nccl_version'] == '2.27.5+cuda12.9'
    assert ev.versions['plugin_version'] == '1.6.0'
    assert len(ev.ranks) == 8 and ev.hosts == ['tpgds-aihub0008']
    assert ev.net_paths == {'NET/IB/GDRDMA': 64}
    assert all(r.using_network == 'IB' for r in ev.ranks.values())
    assert ev.proven() == 'net-ib-gdr'
    # the ranks of this node: NCCL's builtin IB with GPUDirect RDMA
    for asked in ('net-ib', 'net-ib-gdr'):
        proof = prove(asked, ev, nodes=1)
        assert proof.ok, proof.reason
        assert 'GPUDirect RDMA on every path' in proof.reason
    # the job had two nodes: one node's logs do not prove the other's
    two = prove('net-ib', ev, nodes=2)
    assert not two.ok and 'debug logs from only 1 host' in two.reason
    # aws-ofi-nccl loaded, then NCCL used its own IB: a fallback
    for asked in ('net-plugin', 'net-plugin-gdr'):
        p = prove(asked, ev, nodes=1)
        assert not p.ok and p.proven == 'net-ib-gdr'
        assert p.reason.startswith("fell back to NCCL's builtin NET/IB "
                                   "with GPUDirect RDMA instead of the "
                                   "plugin")
        assert 'plugin AWS Libfabric loaded but NCCL did not use it' in \
            p.reason
    assert not prove('net-socket', ev, nodes=1).ok
