"""Bus-bandwidth factors and ideal busbw (ccl_health.evidence.collectives), checked
against the nccl-tests outputs captured on 2x H200."""

import json
import os

import pytest

from conftest import CAPTURE
from ccl_health import CclHealthError
from ccl_health.evidence import collectives as C


def captured(case):
    with open(os.path.join(CAPTURE, case, 'result.json')) as fp:
        return json.load(fp)


CASES = {'all_reduce': 'intra', 'all_gather': 'coll-all_gather',
         'reduce_scatter': 'coll-reduce_scatter',
         'broadcast': 'coll-broadcast', 'reduce': 'coll-reduce',
         'alltoall': 'coll-alltoall', 'sendrecv': 'coll-sendrecv'}


@pytest.mark.parametrize('collective', sorted(CASES))
def test_factor_matches_the_captured_outputs(collective):
    doc = captured(CASES[collective])
    assert doc['args'][0].endswith(f'/{collective}_perf')
    nranks = len(doc['config']['devices'])
    assert nranks == 2
    want = C.busbw_factor(collective, nranks)
    checked = 0
    for row in doc['results']:
        for m in (row['out_of_place'], row['in_place']):
            if m['alg_bw'] > 1.0:          # 6 decimals: ratio exact to 1e-5
                assert m['bus_bw'] / m['alg_bw'] == pytest.approx(
                    want, rel=1e-5), (collective, row['size'])
                assert C.busbw(m['alg_bw'], collective, nranks) == \
                    pytest.approx(m['bus_bw'], rel=1e-5)
                checked += 1
    assert checked >= 6


def test_captures_cover_every_collective_of_the_sweep():
    assert set(CASES) == set(C.SWEPT)


@pytest.mark.parametrize('n, all_reduce, nm1_over_n', [
    (2, 1.0, 0.5), (4, 1.5, 0.75), (8, 1.75, 0.875), (16, 1.875, 0.9375)])
def test_factor_formulas_beyond_two_ranks(n, all_reduce, nm1_over_n):
    # at n=2 a wrong factor (e.g. (n-1)/n for all_reduce vs 2(n-1)/n ...
    # or 1 for all_gather) can hide; n=4 and n=8 tell them apart
    assert C.busbw_factor('all_reduce', n) == pytest.approx(all_reduce)
    assert C.busbw_factor('all_reduce', n) == pytest.approx(2 * (n - 1) / n)
    for coll in ('all_gather', 'reduce_scatter', 'alltoall', 'gather',
                 'scatter'):
        assert C.busbw_factor(coll, n) == pytest.approx(nm1_over_n), coll
        assert C.busbw_factor(coll, n) == pytest.approx((n - 1) / n)
    for coll in ('broadcast', 'reduce', 'sendrecv'):
        assert C.busbw_factor(coll, n) == 1.0


def test_explicit_values_at_4_and_8_ranks():
    assert C.busbw(100.0, 'all_reduce', 4) == pytest.approx(150.0)
    assert C.busbw(100.0, 'all_reduce', 8) == pytest.approx(175.0)
    assert C.busbw(100.0, 'all_gather', 4) == pytest.approx(75.0)
    assert C.busbw(100.0, 'reduce_scatter', 8) == pytest.approx(87.5)
    assert C.busbw(100.0, 'alltoall', 8) == pytest.approx(87.5)
    assert C.busbw(100.0, 'broadcast', 8) == pytest.approx(100.0)
    assert C.busbw(100.0, 'reduce', 4) == pytest.approx(100.0)
    assert C.busbw(100.0, 'sendrecv', 8) == pytest.approx(100.0)
    # one rank: nothing crosses a link
    assert C.busbw(100.0, 'all_reduce', 1) == 0.0


@pytest.mark.parametrize('name', ['all_reduce', 'all_reduce_perf',
                                  'torch_all_reduce', 'AllReduce',
                                  'allreduce', '/x/build/all_reduce_perf'])
def test_names(name):
    assert C.canonical(name) == 'all_reduce'


def test_unknown_collective_and_bad_ranks_are_errors():
    with pytest.raises(CclHealthError, match="unknown collective 'allsum'"):
        C.busbw_factor('allsum', 2)
    with pytest.raises(CclHealthError, match='positive integer'):
        C.busbw_factor('all_reduce', 0)


def test_algbw_is_bytes_over_seconds_in_gb():
    # the captured 1 GiB all_reduce: 3255.29 us -> 329.85 GB/s
    assert C.algbw(1073741824, 3255.29e-6) == pytest.approx(329.85, abs=0.01)
    with pytest.raises(CclHealthError):
        C.algbw(1, 0)


def test_ideal_busbw_from_link_facts():
    # H100 / H200: NVLink 4, 18 links
    assert C.ideal_busbw('intra', nvlink_gen=4, nvlink_links=18) == 450.0
    # A100: NVLink 3, 12 links
    assert C.ideal_busbw('intra', nvlink_gen=3, nvlink_links=12) == 300.0
    assert C.nvlink_generation('sm_90') == 4
    assert C.nvlink_generation('sm_80') == 3
    assert C.nvlink_generation('9.0') == 4
    assert C.nvlink_generation((10, 0)) == 5
    assert C.nvlink_generation('gfx90a') is None
    # 200 Gb/s Slingshot / HDR: 25 GB/s; 4 NICs shared by 4 GPUs: one each
    assert C.ideal_busbw('net-plugin', nic_gbps=200) == 25.0
    assert C.ideal_busbw('net-socket', nic_gbps=400, nics_per_gpu=0.5) == 25.0
    # unknown facts: no ideal, no efficiency
    assert C.ideal_busbw('intra') is None
    assert C.ideal_busbw('net-socket') is None
    assert C.efficiency_pct(300.0, None) is None
    assert C.efficiency_pct(337.5, 450.0) == pytest.approx(75.0)
    with pytest.raises(CclHealthError):
        C.ideal_busbw('intra', nvlink_gen=9, nvlink_links=18)


TOPO = """\
\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tNV18\t0-31\t0\t\tN/A
GPU1\tNV18\t X \tNV18\t0-31\t0\t\tN/A
GPU2\tNV4\tNV18\t X \t0-31\t0\t\tN/A

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def test_links_from_nvidia_smi_topo():
    topo = C.parse_topo_nvlinks(TOPO)
    assert topo[(0, 1)] == 18 and topo[(2, 0)] == 4
    assert C.nvlinks_per_gpu(topo, [0, 1]) == 18
    assert C.nvlinks_per_gpu(topo, [0, 2]) == 4
    assert C.nvlinks_per_gpu(C.parse_topo_nvlinks(
        'GPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n'), [0, 1]) == 0


def test_topology_of_the_real_h200_node():
    # nvidia-smi topo -m as captured on 2x H200 (with its terminal escapes)
    from conftest import read
    text = read(CAPTURE, 'node.txt')
    assert '\x1b[4m' in text
    topo = C.parse_topo_nvlinks(text)
    assert topo == {(0, 1): 18, (1, 0): 18}
    assert C.nvlinks_per_gpu(topo, [0, 1]) == 18
