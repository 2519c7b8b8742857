"""The parts of ccl_health.torch_bench that need no torch: ranks from the
launcher's variables, sizes, layouts and busbw as nccl-tests computes them,
the table, the JSON and its reading back as a sweep."""

import argparse
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO
from ccl_health import CclHealthError
from ccl_health import torch_bench as tb


def test_module_imports_without_torch():
    p = subprocess.run([sys.executable, '-c',
                        'import sys, ccl_health.torch_bench; '
                        'print("torch" in sys.modules)'],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == 'False', p.stderr


@pytest.mark.parametrize('env, want', [
    ({}, (0, 1, 0, 1, 'none')),
    ({'OMPI_COMM_WORLD_RANK': '3', 'OMPI_COMM_WORLD_SIZE': '8',
      'OMPI_COMM_WORLD_LOCAL_RANK': '3', 'OMPI_COMM_WORLD_LOCAL_SIZE': '4'},
     (3, 8, 3, 4, 'mpirun')),
    ({'SLURM_PROCID': '5', 'SLURM_NTASKS': '16', 'SLURM_LOCALID': '1',
      'SLURM_NTASKS_PER_NODE': '8'}, (5, 16, 1, 8, 'srun')),
    ({'RANK': '1', 'WORLD_SIZE': '2', 'LOCAL_RANK': '1',
      'LOCAL_WORLD_SIZE': '2'}, (1, 2, 1, 2, 'torchrun')),
    # Open MPI wins over a stray torchrun variable
    ({'OMPI_COMM_WORLD_RANK': '0', 'OMPI_COMM_WORLD_SIZE': '2',
      'OMPI_COMM_WORLD_LOCAL_RANK': '0', 'RANK': '7', 'WORLD_SIZE': '9'},
     (0, 2, 0, 2, 'mpirun')),
])
def test_ranks_from_the_launcher(env, want):
    assert tb.dist_env(env) == want


def test_bad_rank_variables():
    with pytest.raises(CclHealthError, match='not below'):
        tb.dist_env({'RANK': '2', 'WORLD_SIZE': '2'})
    with pytest.raises(CclHealthError, match='not integers'):
        tb.dist_env({'RANK': 'x', 'WORLD_SIZE': '2'})


def test_transport_from_the_environment():
    assert tb.asked_transport({}) == 'intra'
    assert tb.asked_transport({'NCCL_P2P_DISABLE': '1'}) == 'net-socket'
    assert tb.asked_transport({'NCCL_P2P_DISABLE': '1',
                               'NCCL_NET_PLUGIN': '/x/libnccl-net-ofi.so',
                               'NCCL_NET_GDR_LEVEL': 'LOC'}) == 'net-plugin'
    assert tb.asked_transport({'NCCL_P2P_DISABLE': '1',
                               'NCCL_NET_PLUGIN': '/x/lib.so',
                               'NCCL_NET_GDR_LEVEL': 'PHB'}) == \
        'net-plugin-gdr'


def test_sizes():
    assert tb.parse_sizes('1M:8M') == [1 << 20, 2 << 20, 4 << 20, 8 << 20]
    assert tb.parse_sizes('1M:1G:4') == [1 << 20, 4 << 20, 16 << 20,
                                         64 << 20, 256 << 20, 1 << 30]
    assert tb.parse_sizes('1M:1G', factor=32) == [1 << 20, 32 << 20,
                                                  1 << 30]
    assert tb.parse_sizes('8,1K,1MiB') == [8, 1024, 1 << 20]
    for bad in ('1M:', '1M:1G:x', 'big', '1G:1M', '1:2:3:4'):
        with pytest.raises(CclHealthError):
            tb.parse_sizes(bad)


def test_collectives_argument():
    assert tb.parse_collectives('all_reduce,AllGather,reduce_scatter,'
                                'broadcast,all_reduce') == [
        'all_reduce', 'all_gather', 'reduce_scatter', 'broadcast']
    with pytest.raises(CclHealthError, match="'gather' is not run"):
        tb.parse_collectives('gather')
    with pytest.raises(CclHealthError, match='unknown collective'):
        tb.parse_collectives('allsum')


def test_layout_is_the_one_of_nccl_tests():
    # the captured all_gather: size 1024 B, count 128 (per rank) on 2 ranks
    assert tb.layout('all_gather', 1024, 2, 4) == (128, 1024, 128, 256)
    assert tb.layout('reduce_scatter', 1024, 2, 4) == (128, 1024, 256, 128)
    assert tb.layout('alltoall', 1024, 2, 4) == (128, 1024, 256, 256)
    assert tb.layout('all_reduce', 1024, 2, 4) == (256, 1024, 256, 256)
    assert tb.layout('broadcast', 1024, 8, 2) == (512, 1024, 512, 512)
    # not a multiple of ranks x type: rounded down, as nccl-tests does
    assert tb.layout('all_gather', 1000, 3, 4) == (83, 996, 83, 249)
    assert tb.layout('all_gather', 4, 2, 4)[0] == 0


def test_rows_use_the_busbw_factor():
    # the captured 1 GiB all_reduce on 2 ranks: 3255.29 us, 329.85 GB/s
    row = tb.make_row('all_reduce', 1 << 30, 1 << 28, 'float32', 3255.29, 2,
                      450.0)
    assert row['algbw'] == pytest.approx(329.85, abs=0.01)
    assert row['busbw'] == pytest.approx(329.85, abs=0.01)
    assert row['efficiency_pct'] == pytest.approx(73.3, abs=0.05)
    assert (row['type'], row['redop'], row['root']) == ('float', 'sum', -1)
    row8 = tb.make_row('all_reduce', 1 << 30, 1 << 28, 'float32', 3255.29, 8,
                       None)
    assert row8['busbw'] == pytest.approx(329.85 * 1.75, abs=0.02)
    assert row8['ideal_busbw'] is None and row8['efficiency_pct'] is None
    ag = tb.make_row('all_gather', 1 << 30, 1 << 27, 'bfloat16', 1000.0, 4,
                     300.0)
    assert ag['busbw'] == pytest.approx(ag['algbw'] * 0.75, rel=1e-3)
    assert (ag['type'], ag['redop']) == ('bfloat16', 'none')
    bc = tb.make_row('broadcast', 1 << 20, 1 << 18, 'float32', 10.0, 4, None)
    assert bc['busbw'] == bc['algbw'] and bc['root'] == 0


def sample_doc():
    return {
        'tool': tb.TOOL, 'mode': 'bandwidth', 'format': 1, 'world_size': 2,
        'hosts': ['vm'], 'devices': ['vm device 0 NVIDIA H200 (sm_90)',
                                     'vm device 1 NVIDIA H200 (sm_90)'],
        'transport': 'intra', 'ideal_busbw': 450.0,
        'ideal_source': 'NVLink 4 x 18 links x 25 GB/s per direction '
                        '(nvidia-smi topo -m)',
        'torch_version': '2.5.1', 'nccl_version': '2.21.5',
        'library': 'NCCL', 'notes': [],
        'timing': tb.TIMING.format(iters=20, warmup=5),
        'collectives': {'all_reduce': {
            'rows': [tb.make_row('all_reduce', 1 << 20, 1 << 18, 'float32',
                                 14.83, 2, 450.0),
                     tb.make_row('all_reduce', 1 << 30, 1 << 28, 'float32',
                                 3255.29, 2, 450.0)],
            'errors': [], 'check': {'size': 1 << 20, 'wrong': 0}}},
        'complete': True}


def test_table_has_the_columns_of_nccl_tests_plus_ideal_and_efficiency():
    doc = sample_doc()
    head = tb.header_lines(doc)
    assert head[0].startswith('# ccl_health.torch_bench bandwidth: torch '
                              '2.5.1, NCCL 2.21.5, 2 rank(s) on 1 host(s), '
                              'transport intra')
    assert '# ideal busbw: 450.0 GB/s (NVLink 4 x 18 links' in '\n'.join(head)
    table = tb.format_table('all_reduce', doc['collectives']['all_reduce']
                            ['rows']).splitlines()
    assert table[0] == '# Collective test starting: torch_all_reduce'
    assert table[1].split() == ['#', 'size', 'count', 'type', 'redop', 'root',
                                'time', 'algbw', 'busbw', 'ideal', 'eff']
    assert table[3].split() == ['1048576', '262144', 'float', 'sum', '-1',
                                '14.83', '70.71', '70.71', '450.00', '15.7']
    assert table[4].split()[-3:] == ['329.85', '450.00', '73.3']
    none = tb.format_row(tb.make_row('all_reduce', 8, 2, 'float32', 9.0, 2,
                                     None))
    assert none.split()[-2:] == ['N/A', 'N/A']


def test_json_round_trip_to_a_sweep(tmp_path):
    path = tmp_path / 'sub' / 'out.json'
    tb.write_json(str(path), sample_doc())
    doc = json.loads(path.read_text())
    res = tb.as_sweep(doc, 'all_reduce')
    assert res.complete and res.nranks == 2 and not res.errors
    assert [r.size for r in res.rows] == [1 << 20, 1 << 30]
    assert res.rows[1].busbw == pytest.approx(329.85, abs=0.01)
    assert res.wrong_total == 0
    missing = tb.as_sweep(doc, 'broadcast')
    assert not missing.rows and 'no results for broadcast' in \
        missing.errors[0]
    doc['complete'] = False
    assert not tb.as_sweep(doc, 'all_reduce').complete
    doc['collectives']['all_reduce']['check']['wrong'] = 3
    assert tb.as_sweep(doc, 'all_reduce').wrong_total == 3


def test_first_call_summary_and_table():
    loops = [{'loop': i, 'init_s': 0.01, 'first_collective_s': f - 0.01,
              'first_call_s': f, 'second_call_s': s}
             for i, (f, s) in enumerate([(3.2, 0.0002), (0.9, 0.0001),
                                         (0.8, 0.0001), (0.85, 0.0003),
                                         (0.95, 0.0001)])]
    s = tb.summarize_first_call(loops)
    assert s['first_call_s'] == 0.9 and s['first_call_max_s'] == 3.2
    assert s['first_call_loop0_s'] == 3.2
    assert s['second_call_s'] == 0.0001
    assert s['ratio_first_to_second'] == pytest.approx(9000)
    text = tb.format_first_call({'backend': 'nccl', 'world_size': 2,
                                 'what': 'x', 'loops': loops, 'summary': s})
    assert 'median 0.900000 s, max 3.200000 s' in text
    assert len(text.splitlines()) == 2 + 5 + 1


def test_nic_line_rate_from_sysfs(tmp_path):
    for name, speed in (('lo', '-1'), ('eth0', '25000'), ('ib0', '200000'),
                        ('docker0', '-1')):
        (tmp_path / name).mkdir()
        (tmp_path / name / 'speed').write_text(speed + '\n')
    assert tb.nic_line_rate({}, str(tmp_path)) == (200.0, 'ib0')
    assert tb.nic_line_rate({'NCCL_SOCKET_IFNAME': 'eth'}, str(tmp_path)) == \
        (25.0, 'eth0')
    assert tb.nic_line_rate({}, str(tmp_path / 'none'))[0] is None


def test_link_facts_given_on_the_command_line():
    args = argparse.Namespace(ideal_busbw=None, nvlink_gen=None,
                              nvlink_links=18, nic_gbps=None)
    ideal, source = tb.link_facts('intra', 'sm_90', 2, args)
    assert ideal == 450.0 and 'NVLink 4 x 18 links' in source
    args.nvlink_links, args.nvlink_gen = 12, 3
    assert tb.link_facts('intra', 'sm_90', 2, args)[0] == 300.0
    args.nic_gbps = 200
    assert tb.link_facts('net-plugin', 'sm_90', 2, args) == (
        25.0, 'NIC line rate 200 Gb/s / 8 (--nic-gbps)')
    args.ideal_busbw = 123.0
    assert tb.link_facts('intra', 'sm_90', 2, args)[0] == 123.0


def test_argument_errors_need_no_torch():
    p = subprocess.run([sys.executable, '-m', 'ccl_health.torch_bench',
                        'bandwidth', '--sizes', '1G:1M'], cwd=REPO,
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert 'error: bad size sweep' in p.stderr
    p = subprocess.run([sys.executable, '-m', 'ccl_health.torch_bench',
                        'replay', '--pattern', os.path.join(
                            REPO, 'tests', 'fixtures', 'patterns',
                            'bad-routine.csv')], cwd=REPO,
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert "bad-routine.csv: line 4: unknown routine 'allsum'" in p.stderr
    p = subprocess.run([sys.executable, '-m', 'ccl_health.torch_bench',
                        'first-call', '--loops', '0'], cwd=REPO,
                       capture_output=True, text=True)
    assert p.returncode == 2 and '--loops must be >= 1' in p.stderr
