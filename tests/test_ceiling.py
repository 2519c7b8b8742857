"""The bound of an impossible busbw (ccl_health/judge/ceiling.py), issue 27
item 1: it catches garbage (1e308, inf, a time <= 0) in every door and
never fails a fast healthy run.  Healthy runs are real outputs published
by others (tests/fixtures/published/SOURCES.md): 8 x H200 on one node
(NVLS) and 2 x 8 H200 at 476-486 GB/s, and one GB200 NVL72 rack at
846.82 GB/s, all above the 400 GB/s the transport registry used to cap
every network transport at."""

import os
import random

import pytest

from helpers import mutations
from conftest import REPO

from ccl_health.sitedata.transports import NAMES as TRANSPORTS
from ccl_health import explain as X
from ccl_health.evidence import nccltests
from ccl_health.evidence.nodestate.nodedata import GpuState, Link, NodeState
from ccl_health.hook import judging as hook_judging
from ccl_health.judge import ceiling as bounds
from ccl_health.judge.casejudge import judge
from ccl_health.sitedata import transports

PUB = os.path.join(REPO, 'tests', 'fixtures', 'published')

#: healthy published outputs: file -> (nodes, GPUs per node)
HEALTHY = {
    'nccl-tests_all_reduce_h200-8gpu-1node_476gbps_azure-h200-debian-doc'
    '.txt': (1, 8),
    'nccl-tests_all_reduce_h200-2node-16rank_485gbps_spectrum-x-roce-doc'
    '.txt': (2, 8),
    'nccl-tests_all_reduce_gb200-nvl72-1rack-72rank_excerpt_coreweave-'
    'nccl-tests.txt': (None, None),
}
H200_1 = sorted(HEALTHY)[2]
H200_2 = sorted(HEALTHY)[1]
GB200 = sorted(HEALTHY)[0]
ASKED = [None] + list(TRANSPORTS)


def text_of(name):
    with open(os.path.join(PUB, name)) as fp:
        return fp.read()


def peak(name):
    """The largest busbw of a published output (either group)."""
    res = nccltests.parse_text(text_of(name))
    return max(max(m.busbw for m in (r.out_of_place, r.in_place) if m)
               for r in res.rows)


def test_the_published_runs_are_faster_than_the_old_fixed_ceilings():
    # what made them fail before: 400 GB/s for every network transport
    assert peak(H200_1) == pytest.approx(476.98)
    assert peak(H200_2) == pytest.approx(485.66)
    assert peak(GB200) == pytest.approx(846.82)
    assert not any(hasattr(t, 'ceiling_gbps') for t in transports.REGISTRY)


@pytest.mark.parametrize('asked', ASKED, ids=str)
@pytest.mark.parametrize('name', sorted(HEALTHY), ids=lambda n: n[18:40])
def test_a_fast_healthy_run_is_never_wrong_results_in_explain(name, asked):
    nodes, gpn = HEALTHY[name]
    doc = X.explain([os.path.join(PUB, name)], transport_asked=asked,
                    nodes=nodes, gpus_per_node=gpn, exit_status=0)
    assert doc['verdict'] != 'wrong-results', doc['reason']
    assert 'impossible' not in doc['reason'], doc['reason']


@pytest.mark.parametrize('asked', ASKED, ids=str)
@pytest.mark.parametrize('damage', ['1e308', 'inf', 'negative-time',
                                    'zero-time'])
def test_garbage_in_a_published_run_is_wrong_results(asked, damage, tmp_path):
    text = text_of(H200_2)
    if damage == '1e308':
        text = mutations.set_value(text, -1, 0, 2, f'{1e308:.2f}')
    elif damage == 'inf':
        text = mutations.set_value(text, -1, -1, 2, 'inf')
    else:
        text = mutations.set_value(text, 3, 0, 0, '-12.50' if damage ==
                                   'negative-time' else '0.00')
    out = tmp_path / 'all_reduce.out'
    out.write_text(text)
    doc = X.explain([str(out)], transport_asked=asked, exit_status=0)
    assert doc['verdict'] == 'wrong-results', doc['reason']
    if damage == '1e308':
        # the reason says how the bound was derived: nothing is known of a
        # pasted output's links, so the generous bound
        assert 'above 7200 GB/s, the most this case can reach' in \
            doc['reason']
        assert '4 x NVLink 5 per GPU (18 links x 50 GB/s x 2 directions' \
            in doc['reason'], doc['reason']


# -- every door -------------------------------------------------------------

def _door_verdicts(tmp_path, damaged):
    from helpers.doors import capture, through_every_door
    text, logs = capture('intra')
    return through_every_door(tmp_path, 'intra', damaged(text), logs)


@pytest.mark.parametrize('damage', ['1e308', 'inf', 'negative-time'])
def test_garbage_is_wrong_results_in_every_door(tmp_path, damage):
    pytest.importorskip('reframe')
    rnd = random.Random(27)
    damaged = {
        '1e308': lambda t: mutations.impossible_busbw(t, rnd),
        'inf': lambda t: mutations.set_value(t, -1, 0, 2, 'inf'),
        'negative-time': lambda t: mutations.set_value(t, 5, -1, 0,
                                                       '-3.10'),
    }[damage]
    got = _door_verdicts(tmp_path, damaged)
    assert set(got) == {'assembler', 'explain', 'sweep', 'ingest', 'fleet',
                        'hook'}
    assert set(got.values()) == {'wrong-results'}, got


def _node(active_links, gpus=2, unsupported=False):
    gs = []
    for i in range(gpus):
        g = GpuState(i, model='NVIDIA H100 80GB HBM3')
        if unsupported:
            g.unsupported.append('nvlink')
        else:
            g.nvlinks = [Link(k, k < active_links) for k in range(18)]
        gs.append(g)
    return NodeState(vendor='nvidia', gpus=gs)


def test_the_hook_derives_its_bound_from_the_nvml_links(tmp_path):
    from helpers.doors import capture
    text, logs = capture('intra')
    att = hook_judging.output_attempt(text, logs, 0)
    ev = hook_judging.probe_evidence([att], 1 << 30, (0, 1), None,
                                     node=_node(18))
    assert ev.ceiling_gbps == 1800.0
    assert ev.ceiling_source == (
        'bound 1800 GB/s: 18 NVLink links (NVML) x 50 GB/s (NVLink 5, the '
        'generation unknown) x NVLS factor 2 (the switch reduces)')
    bad = mutations.set_value(text, -1, 0, 2, '2000.00')
    att = hook_judging.output_attempt(bad, logs, 0)
    j = judge(hook_judging.probe_evidence([att], 1 << 30, (0, 1), None,
                                          node=_node(18)))
    assert str(j.verdict) == 'wrong-results'
    assert '18 NVLink links (NVML)' in j.reason
    # no node state: the generous bound, said so
    ev = hook_judging.probe_evidence([att], 1 << 30, (0, 1), None)
    assert ev.ceiling_gbps == bounds.UNKNOWN_GBPS
    assert 'no NVLink facts' in ev.ceiling_source


# -- derived bounds ----------------------------------------------------------

H100 = bounds.Links(nvlinks=18, link_gbps=25.0, source='nvidia-smi topo -m')


def test_h100_links_with_nvls_bound_the_h200_runs_and_not_garbage():
    b = bounds.bound('intra', links=H100)
    assert b.gbps == 900.0
    assert b.reason == ('bound 900 GB/s: 18 NVLink links (nvidia-smi topo '
                        '-m) x 25 GB/s x NVLS factor 2 (the switch '
                        'reduces)')
    assert peak(H200_1) < b.gbps < 1e308
    # with the generation unknown, the fastest link known (NVLink 5)
    assert peak(GB200) < bounds.bound(
        'intra', links=bounds.Links(nvlinks=18)).gbps < 1e308


def test_a_network_bound_is_never_below_the_intra_node_bound():
    nics = bounds.Links(nvlinks=18, link_gbps=25.0, nics=8, nic_gbit=400)
    for name in transports.NAMES:
        if not transports.get(name).uses_network:
            continue
        for nodes in (1, 2, 16):
            b = bounds.bound(name, nodes=nodes, links=nics)
            assert b.gbps >= bounds.bound('intra', links=nics).gbps
            assert b.gbps > peak(H200_2)
    # 8 x 400 Gb/s = 400 GB/s per node, x 2: below the NVLink part
    b = bounds.bound('net-plugin-gdr', nodes=2, links=nics)
    assert b.gbps == 900.0
    assert 'the intra-node part bounds net-plugin-gdr too' in b.reason
    assert '8 NICs x 400 Gb/s = 400 GB/s per node x 2' in b.reason
    # NICs faster than the links: the network part
    fast = bounds.Links(nvlinks=4, link_gbps=25.0, nics=8, nic_gbit=800)
    b = bounds.bound('net-ib', nodes=2, links=fast)
    assert b.gbps == 1600.0 and 'counts the intra-node part on 2 nodes' in \
        b.reason


def test_a_sites_ceiling_replaces_its_part_only():
    class Site:
        ceiling = {'links': 4, 'link_gbps': 50.0}
    assert bounds.bound('intra', site_transport=Site()).gbps == 200.0
    # a network transport's site ceiling below the intra-node part: the
    # intra-node part (unknown here: the generous bound) still bounds it
    b = bounds.bound('net-plugin', nodes=2, site_transport=Site())
    assert b.gbps == bounds.UNKNOWN_GBPS
    assert 'site network ceiling: 4 links x 50 GB/s' in b.reason
    b = bounds.bound('net-plugin', nodes=2, site_transport=Site(),
                     links=H100)
    assert b.gbps == 900.0
    # the site's intra ceiling bounds the intra-node part of a network one
    b = bounds.bound('net-plugin', nodes=2, site_transport=Site(),
                     site_intra=Site())
    assert b.gbps == 200.0


def test_unknown_facts_give_the_generous_bound_well_above_any_fabric():
    for asked in (None, 'no-such-transport', 'intra', 'net-ib'):
        b = bounds.bound(asked)
        assert b.gbps == 7200.0 == 4 * 1800
        assert b.reason.startswith('bound 7200 GB/s: 4 x NVLink 5 per GPU')
        assert peak(GB200) * 8 < b.gbps < 1e308


def test_links_of_a_node_state():
    assert bounds.links_of_node(_node(18)) == bounds.Links(
        nvlinks=18, source='NVML')
    # the slowest GPU of the probe bounds it
    n = _node(18, gpus=3)
    n.gpus[2].nvlinks = [Link(k, k < 12) for k in range(18)]
    assert bounds.links_of_node(n, (0, 1)).nvlinks == 18
    assert bounds.links_of_node(n).nvlinks == 12
    # no NVLink (NVML: not supported): no active link, generous, said so
    links = bounds.links_of_node(_node(0, unsupported=True))
    assert links.nvlinks == 0
    assert 'no active NVLink' in bounds.bound('intra', links=links).reason
    # not read, or GPUs the reading lacks: unknown
    assert bounds.links_of_node(NodeState()) is None
    assert bounds.links_of_node(_node(18), (0, 5)) is None
    assert bounds.links_of_node(NodeState(gpus=[GpuState(0)])) is None


def test_a_case_without_a_bound_gets_the_generous_one():
    # a door that gives no bound (a log-only case, a new door) still
    # catches garbage: the judge falls back to the unknown-facts bound
    from ccl_health.judge.caseevidence import Attempt, CaseEvidence
    text = mutations.set_value(text_of(H200_1), 0, 0, 2, f'{1e308:.2f}')
    j = judge(CaseEvidence(attempts=[Attempt(nccltests.parse_text(text),
                                             0)]))
    assert str(j.verdict) == 'wrong-results'
    assert 'above 7200 GB/s' in j.reason and 'transport unknown' in j.reason
    j = judge(CaseEvidence(attempts=[Attempt(nccltests.parse_text(
        text_of(H200_1)), 0)]))
    assert str(j.verdict) != 'wrong-results', j.reason
