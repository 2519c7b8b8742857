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


# -- train mode: the parts without torch -----------------------------------

def test_train_arguments_and_defaults():
    args = tb.build_parser().parse_args(['train'])
    assert (args.model, args.steps, args.warmup, args.profile_steps) == \
        ('comm', 20, 5, 5)
    assert args.batch is None and args.device == 'cuda'
    args = tb.build_parser().parse_args(
        ['train', '--model', 'compute', '--steps', '3', '--warmup', '0',
         '--profile-steps', '0', '--batch', '8', '--width', '16',
         '--depth', '2', '--device', 'cpu', '--json', 'x.json'])
    spec = tb.check_train_args(args)
    assert (spec['batch'], spec['width'], spec['depth']) == (8, 16, 2)
    with pytest.raises(SystemExit):
        tb.build_parser().parse_args(['train', '--model', 'gpt'])


@pytest.mark.parametrize('argv, words', [
    (['--steps', '0'], '--steps 0: must be >= 1'),
    (['--warmup', '-1'], '--warmup -1: must be >= 0'),
    (['--profile-steps', '-2'], '--profile-steps -2: must be >= 0'),
    (['--batch', '0'], '--batch 0: must be >= 1'),
])
def test_train_argument_errors(argv, words):
    args = tb.build_parser().parse_args(['train'] + argv)
    with pytest.raises(CclHealthError, match=words):
        tb.check_train_args(args)


def test_train_argument_errors_need_no_torch():
    p = subprocess.run([sys.executable, '-m', 'ccl_health.torch_bench',
                        'train', '--model', 'compute', '--steps', '0'],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 2
    assert 'ccl_health.torch_bench: error: --steps 0: must be >= 1' in \
        p.stderr


def test_models_and_their_parameters():
    comm = tb.model_spec('comm')
    # 4 x Linear(4096, 4096) + Linear(4096, 1000), weights and biases
    assert comm['params'] == 4 * (4096 * 4096 + 4096) + 4096 * 1000 + 1000
    assert comm['params'] == 71222248 and comm['batch'] == 32
    assert comm['describe'].startswith('MLP: 4 x (Linear(4096, 4096) + ReLU)')
    compute = tb.model_spec('compute')
    # Conv2d(3, 64) + 16 x Conv2d(64, 64), 3x3, + Linear(64, 10)
    assert compute['params'] == (3 * 9 * 64 + 64) + 16 * (64 * 64 * 9 + 64) \
        + 64 * 10 + 10 == 593290
    assert compute['batch'] == 256
    assert 'input 3x64x64' in compute['describe']
    # communication- vs compute-bound: parameters per sample of the batch
    assert comm['params'] / comm['batch'] > \
        500 * compute['params'] / compute['batch']
    small = tb.model_spec('comm', batch=4, width=8, depth=1)
    assert small['params'] == 8 * 8 + 8 + 8 * 1000 + 1000
    assert tb.TRAIN_MODELS['comm']['width'] == 4096      # not changed
    with pytest.raises(CclHealthError, match="'gpt': not one of comm, "
                                             "compute"):
        tb.model_spec('gpt')


def kernel_trace():
    """A torch.profiler (Kineto) Chrome trace as it looks on a GPU: CPU ops
    and annotations named after NCCL that are not kernels, NCCL's kernels
    and a GEMM."""
    nccl = ('ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgs'
            'Storage<4096ul>)')
    return {'schemaVersion': 1, 'traceEvents': [
        {'ph': 'X', 'cat': 'cpu_op', 'name': 'nccl:all_reduce', 'ts': 0,
         'dur': 900.0},
        {'ph': 'X', 'cat': 'gpu_user_annotation', 'name': 'nccl:all_reduce',
         'ts': 10, 'dur': 800.0},
        {'ph': 'X', 'cat': 'cuda_runtime', 'name': 'cudaLaunchKernelExC',
         'ts': 5, 'dur': 4.0},
        {'ph': 'X', 'cat': 'kernel', 'name': nccl, 'ts': 10, 'dur': 600.0},
        {'ph': 'X', 'cat': 'kernel', 'name': nccl, 'ts': 1010, 'dur': 400.0},
        {'ph': 'X', 'cat': 'Kernel', 'name': 'ncclKernel_AllGather_RING_LL_'
         'Sum_int8_t(ncclWorkElem)', 'ts': 2000, 'dur': 50.0},
        {'ph': 'X', 'cat': 'kernel', 'name': 'sm90_xmma_gemm_f32f32_tf32f32',
         'ts': 0, 'dur': 700.0},
        {'ph': 'X', 'cat': 'gpu_memcpy', 'name': 'Memcpy DtoD (Device -> '
         'Device)', 'ts': 0, 'dur': 30.0},
        {'ph': 'i', 'cat': 'kernel', 'name': 'ncclInstant', 'ts': 1},
        {'ph': 'X', 'cat': 'kernel', 'name': 'ncclBroken', 'dur': 'x'},
        {'ph': 'M', 'name': 'process_name', 'args': {'name': 'python'}},
        'not an event']}


def test_kernels_of_a_profiler_trace():
    kernels = tb.trace_kernels(kernel_trace())
    assert [d for _, d in kernels] == [600.0, 400.0, 50.0, 700.0]
    assert tb.trace_kernels(kernel_trace()['traceEvents']) == kernels
    assert tb.trace_kernels({}) == [] and tb.trace_kernels([]) == []


def test_nccl_share_of_the_profiled_steps():
    kernels = tb.trace_kernels(kernel_trace())
    # 2 steps of 1.25 ms wall: NCCL kernels 600 + 400 + 50 us = 1.05 ms
    share = tb.profile_share(kernels, 2.5e-3, 2)
    assert share['nccl_fraction'] == 42.0
    assert (share['kernels'], share['nccl_kernels']) == (4, 3)
    assert share['nccl_ms'] == 1.05 and share['kernel_ms'] == 1.75
    assert share['wall_ms'] == 2.5 and share['steps'] == 2
    assert share['top_nccl_kernels'] == [
        {'name': 'ncclDevKernel_AllReduce_Sum_f32_RING_LL', 'count': 2,
         'ms': 1.0},
        {'name': 'ncclKernel_AllGather_RING_LL_Sum_int8_t', 'count': 1,
         'ms': 0.05}]
    none = tb.profile_share([], 1.0, 5)
    assert none['nccl_fraction'] is None and none['kernels'] == 0
    assert tb.profile_share([('gemm', 10.0)], 1e-3, 1)['nccl_fraction'] == 0
    assert tb.short_kernel_name('void at::native::f<float>(int)') == \
        'void at::native::f'


def test_training_summary():
    steps = [0.010, 0.012, 0.011, 0.030, 0.011]        # one slow step
    shares = [dict(tb.profile_share([('ncclDevKernel_X', 6000.0)], 0.010, 1),
                   rank=0),
              dict(tb.profile_share([('ncclDevKernel_X', 4000.0)], 0.010, 1),
                   rank=1)]
    s = tb.summarize_train(steps, 64, 1234, shares)
    assert s['step_ms'] == 11.0                          # the median
    assert s['samples_per_s'] == pytest.approx(64 / 0.011, abs=1e-3)
    assert (s['step_ms_min'], s['step_ms_max']) == (10.0, 30.0)
    assert s['step_ms_mean'] == pytest.approx(14.8)
    assert s['nccl_fraction'] == 50.0                    # mean over ranks
    assert (s['nccl_fraction_min'], s['nccl_fraction_max']) == (40.0, 60.0)
    assert s['nccl_ms_per_step'] == 5.0
    assert (s['params'], s['global_batch'], s['steps']) == (1234, 64, 5)
    # a rank without a profile: no share at all, not a mean of the others
    part = tb.summarize_train(steps, 64, 1, shares[:1] +
                              [{'rank': 1, 'steps': 1, 'error': 'boom'}])
    assert part['nccl_fraction'] is None and part['samples_per_s']
    assert tb.summarize_train(steps, 64, 1)['nccl_fraction'] is None
    with pytest.raises(CclHealthError, match='no training step'):
        tb.summarize_train([], 64, 1)


def test_training_json_and_report():
    args = tb.build_parser().parse_args(['train', '--steps', '3',
                                         '--warmup', '1'])
    spec = tb.model_spec('comm')
    fields = tb.train_fields(spec, args, spec['params'], 2, 'nccl')
    assert fields['global_batch'] == 64 and fields['batch_per_rank'] == 32
    assert fields['notes'] == [] and fields['units']['nccl_fraction'] == '%'
    assert (fields['steps'], fields['warmup'], fields['profile_steps']) == \
        (3, 1, 5)
    assert 'torch.nn.parallel.DistributedDataParallel' in \
        fields['ddp']['class']
    assert tb.train_fields(spec, args, 5, 2, 'gloo')['notes'] == [
        f'the model has 5 parameters, {spec["params"]} were expected',
        'gloo: no NCCL kernels, the NCCL share is not measured']
    shares = [dict(tb.profile_share(tb.trace_kernels(kernel_trace()),
                                    2.5e-3, 5), rank=r) for r in (0, 1)]
    res = tb.train_results([0.002, 0.0025, 0.003], shares, 64,
                           spec['params'])
    assert res['complete'] and 'profile_error' not in res
    assert res['step_ms'] == [2.0, 2.5, 3.0]
    assert res['summary']['samples_per_s'] == 25600.0
    assert res['summary']['nccl_fraction'] == 42.0
    bad = tb.train_results([0.002], [shares[0], {'rank': 1, 'steps': 5,
                                                 'error': 'RuntimeError: x'}],
                           64, 1)
    assert bad['profile_error'] == 'rank 1: RuntimeError: x'
    assert bad['summary']['nccl_fraction'] is None
    doc = {'tool': tb.TOOL, 'mode': 'train', 'world_size': 2,
           'transport': 'intra', 'torch_version': '2.11.0',
           'nccl_version': '2.28.9', 'hosts': ['vm'], 'devices': [],
           'ideal_busbw': 450.0, 'ideal_source': 'x', 'notes': []}
    doc.update(fields)
    doc.update(res)
    text = tb.format_train(doc).splitlines()
    assert text[0].startswith('# model comm: MLP: 4 x (Linear(4096, 4096)')
    assert '71,222,248 parameters (285 MB of fp32 gradients per step), ' \
        'batch 32 per rank (64 global)' in text[0]
    assert text[2].split() == ['0', '2.000']
    assert text[5].startswith("# rank 0: 3 of 4 kernels are NCCL's, 1.050 "
                              "of 2.500 ms over 5 steps "
                              "(ncclDevKernel_AllReduce_Sum_f32_RING_LL x2")
    assert text[-1] == ('# 25600.0 samples/s (global), step 2.500 ms '
                        '(median of 3), NCCL kernels 42.0 % of the step '
                        'time')
    assert tb.header_lines(doc)[0].startswith(
        '# ccl_health.torch_bench train: torch 2.11.0, NCCL 2.28.9')


def test_training_on_two_cpu_ranks(tmp_path):
    """The whole train mode with gloo on 2 CPU processes, where torch is
    installed (not in CI): DDP, the timed steps, the profiler."""
    pytest.importorskip('torch')
    env = dict(os.environ, MASTER_ADDR='127.0.0.1',
               MASTER_PORT=str(29400 + os.getpid() % 500), WORLD_SIZE='2',
               LOCAL_WORLD_SIZE='2', PYTHONPATH=REPO)
    procs = [subprocess.Popen(
        [sys.executable, '-m', 'ccl_health.torch_bench', 'train', '--device',
         'cpu', '--width', '32', '--depth', '2', '--batch', '4', '--steps',
         '3', '--warmup', '1', '--profile-steps', '2', '--json',
         str(tmp_path / 'out.json')], cwd=REPO,
        env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in (0, 1)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    # torch 2.15's CPU wheels on a machine without a GPU: now and then (~1
    # in 60 runs) a rank aborts at interpreter exit, after the work, with
    # this line; anything else fails
    assert [p.returncode == 0 or (p.returncode == -6 and 'terminate called '
            'without an active exception' in o) for p, o in
            zip(procs, outs)] == [True, True], outs
    doc = json.loads((tmp_path / 'out.json').read_text())
    assert doc['mode'] == 'train' and doc['complete']
    assert doc['world_size'] == 2 and doc['library'] == 'gloo'
    assert doc['params'] == tb.model_spec('comm', 4, 32, 2)['params']
    assert len(doc['step_ms']) == 3 and doc['summary']['samples_per_s'] > 0
    assert [p['rank'] for p in doc['profile']] == [0, 1]
    assert all(p['kernels'] == 0 and not p.get('error')
               for p in doc['profile'])
    assert doc['summary']['nccl_fraction'] is None
    assert '# model comm: MLP: 2 x (Linear(32, 32) + ReLU)' in outs[0]
