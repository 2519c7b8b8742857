"""Framework-level checks: collectives through torch.distributed (busbw per
size with the ideal of the links and the efficiency), the time to the first
collective (torch+NCCL and plain MPI), the replay of a real job's
communication pattern, and a small DDP training step (samples/s and the
share of NCCL kernels in the step).  One rank per GPU, as the collective
sweep; the NCCL runs are proven from NCCL's debug log like the sweep's."""

import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, run_after, run_before,
                                   variable)

from ccl_health.collectives import TORCH_DEFAULT
from ccl_health.rfm.base import PLUGIN_TRANSPORTS, PluginBuildMixin
from ccl_health.rfm.framework import (REPO, FirstCallMixin, FrameworkBase,
                                      NcclFrameworkBase, TorchBandwidthBase)


@rfm.simple_test
class TorchBandwidth(TorchBandwidthBase):
    """all_reduce, all_gather, reduce_scatter, broadcast through
    torch.distributed over every transport."""
    torch_collective = parameter(list(TORCH_DEFAULT))

    def torch_collective_name(self):
        return self.torch_collective


@rfm.simple_test
class TorchFirstCall(FirstCallMixin, NcclFrameworkBase):
    """init_process_group + the first all_reduce of a 1024x1024 float
    tensor vs the second, 5 loops, each in a fresh process group; the max
    over ranks."""
    bench_mode = 'first-call'

    @run_after('init')
    def describe(self):
        self.collective = 'torch_first_call'
        self.descr = f'time to the first all_reduce (torch) over {self.transport}'

    def bench_args(self):
        return super().bench_args() + ['--loops', str(self.loops)]


@rfm.simple_test
class MpiFirstCall(FirstCallMixin, FrameworkBase):
    """The same with plain MPI (mpi4py, Allreduce of a numpy array):
    MPI_Init or a fresh communicator + the first Allreduce vs the second.
    No NCCL: no transport."""
    bench_mode = 'first-call'
    transport = variable(str, value='')

    @run_after('init')
    def describe(self):
        self.collective = 'mpi_first_call'
        self.descr = 'time to the first Allreduce (mpi4py)'

    def single_node_only(self):
        return True

    def bench_args(self):
        return ['--backend', 'mpi4py', '--loops', str(self.loops)]


@rfm.simple_test
class TorchPatternReplay(NcclFrameworkBase):
    """Replays a communication-pattern CSV (default: the shipped example,
    hand-written: tests/fixtures/patterns/README.md) and records per line
    the measured time, algbw, busbw, ideal busbw and efficiency."""
    bench_mode = 'replay'
    pattern = variable(str, value=os.path.join(
        REPO, 'tests', 'fixtures', 'patterns', 'example.csv'))
    iters = variable(int, value=20)
    warmup_iters = variable(int, value=5)
    replay_notes = variable(list, value=[])

    @run_after('init')
    def describe(self):
        self.collective = 'torch_replay'
        self.descr = (f'replay of {os.path.basename(self.pattern)} over '
                      f'{self.transport}')

    def bench_args(self):
        return super().bench_args() + [
            '--pattern', self.pattern, '--iters', str(self.iters),
            '--warmup', str(self.warmup_iters), '--csv', 'replay.csv']

    @run_before('run')
    def keep_csv(self):
        self.keep_files = self.keep_files + ['replay.csv']

    def _judge_results(self):
        doc = self._doc()
        self.replay_notes = list(doc.get('notes') or [])
        bad = [r for r in doc.get('rows') or [] if r.get('error')]
        if bad:
            return 'crash', (f'crash: line {bad[0]["line"]} of the pattern: '
                             f'{bad[0]["error"]}')
        if not doc.get('rows'):
            return 'crash', 'crash: nothing was replayed'
        return None

    @run_before('performance')
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        perf = {}
        for row in self._doc().get('rows') or []:
            key = f'line{row["line"]}_{row["collective"]}'
            perf[f'{key}_busbw'] = sn.make_performance_function(
                sn.defer(float(row.get('busbw_GBps') or 0.0)), 'GB/s')
            perf[f'{key}_time'] = sn.make_performance_function(
                sn.defer(float(row.get('measured_time_us') or 0.0)), 'us')
        self.perf_variables = perf


@rfm.simple_test
class TorchTrainingStep(NcclFrameworkBase):
    """A small DDP training loop on synthetic data (``torch_bench train``):
    ``model=comm`` is communication-bound (a wide MLP, ~71M parameters,
    small batch), ``model=compute`` compute-bound (deep 3x3 convolutions,
    ~0.6M parameters, large batch).  samples/s (global), the median step
    time and the share of the step spent in NCCL kernels (torch.profiler);
    run over the ``transport`` parameter, the same model with and without
    the network plugin."""
    bench_mode = 'train'
    model = parameter(['comm', 'compute'])
    steps = variable(int, value=20)
    warmup_steps = variable(int, value=5)
    profile_steps = variable(int, value=5)
    #: samples per rank and step; 0: the model's default
    batch = variable(int, value=0)
    #: a lower bound for samples_per_s (global), samples/s; 0: none
    min_samples_per_s = variable(float, value=0.0)
    #: the tool's summary (samples/s, step times, NCCL share, parameters)
    train_summary = variable(dict, value={})

    @run_after('init')
    def describe(self):
        self.collective = f'torch_train_{self.model}'
        self.descr = (f'DDP training step ({self.model}-bound model) over '
                      f'{self.transport}')

    def bench_args(self):
        args = super().bench_args() + [
            '--model', self.model, '--steps', str(self.steps),
            '--warmup', str(self.warmup_steps),
            '--profile-steps', str(self.profile_steps)]
        if self.batch > 0:
            args += ['--batch', str(self.batch)]
        return args

    @run_after('setup')
    def set_lower_bound(self):
        if self.min_samples_per_s > 0:
            self.reference = {self.current_partition.fullname: {
                'samples_per_s': (self.min_samples_per_s, 0.0, None,
                                  'samples/s')}}

    def _judge_results(self):
        doc = self._doc()
        s = doc.get('summary') or {}
        self.train_summary = dict(s)
        if not s.get('samples_per_s'):
            return 'crash', 'crash: no training step was timed'
        if self.profile_steps > 0:
            if doc.get('profile_error'):
                return 'could-not-check', (f'could not check the NCCL share: '
                                           f'torch.profiler failed on '
                                           f'{doc["profile_error"]}')
            if s.get('nccl_fraction') is None:
                return 'could-not-check', (
                    'could not check the NCCL share: the profiler recorded '
                    'no CUDA kernel')
            nccl = sum(p.get('nccl_kernels') or 0
                       for p in doc.get('profile') or [])
            if nccl == 0 and (doc.get('world_size') or 0) > 1:
                return 'could-not-check', (
                    'could not check the NCCL share: the profiler recorded '
                    'kernels but none of NCCL\'s (DDP all_reduces every '
                    'step)')
        return None

    @run_before('performance')
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        s = self._doc().get('summary') or {}
        self.perf_variables = {
            name: sn.make_performance_function(
                sn.defer(float(s.get(name) or 0.0)), unit)
            for name, unit in (('samples_per_s', 'samples/s'),
                               ('step_ms', 'ms'), ('nccl_fraction', '%'))}


# The same checks over the network plugin: only these depend on its build.

@rfm.simple_test
class TorchBandwidthPlugin(PluginBuildMixin, TorchBandwidth):
    transport = parameter(PLUGIN_TRANSPORTS)


@rfm.simple_test
class TorchFirstCallPlugin(PluginBuildMixin, TorchFirstCall):
    transport = parameter(PLUGIN_TRANSPORTS)


@rfm.simple_test
class TorchPatternReplayPlugin(PluginBuildMixin, TorchPatternReplay):
    transport = parameter(PLUGIN_TRANSPORTS)


@rfm.simple_test
class TorchTrainingStepPlugin(PluginBuildMixin, TorchTrainingStep):
    transport = parameter(PLUGIN_TRANSPORTS)
