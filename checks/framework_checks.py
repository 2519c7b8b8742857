"""Framework-level checks: collectives through torch.distributed (busbw per
size with the ideal of the links and the efficiency), the time to the first
collective (torch+NCCL and plain MPI), and the replay of a real job's
communication pattern.  One rank per GPU, as the collective sweep; the
NCCL runs are proven from NCCL's debug log like the sweep's."""

import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, run_after, run_before,
                                   variable)

from ccl_health.rfm.framework import (REPO, FirstCallMixin, FrameworkBase,
                                      NcclFrameworkBase, TorchBandwidthBase)


@rfm.simple_test
class TorchBandwidth(TorchBandwidthBase):
    """all_reduce, all_gather, reduce_scatter, broadcast through
    torch.distributed over every transport."""
    torch_collective = parameter(['all_reduce', 'all_gather',
                                  'reduce_scatter', 'broadcast'])

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
