"""Framework-level checks: collectives through torch.distributed (busbw per
size with the ideal of the links and the efficiency), the time to the first
collective (torch+NCCL and plain MPI), the replay of a real job's
communication pattern, and a small DDP training step (samples/s and the
share of NCCL kernels in the step).  One rank per GPU, as the collective
sweep; the NCCL runs are proven from NCCL's debug log like the sweep's."""

import reframe as rfm
from reframe.core.builtins import parameter

from ccl_health.evidence.collectives import TORCH_DEFAULT
from ccl_health.rfm.base import PLUGIN_TRANSPORTS, plugin_mixin
from ccl_health.rfm.framework import (MpiFirstCallBase, PatternReplayBase,
                                      TorchBandwidthBase, TorchFirstCallBase,
                                      TrainingStepBase)


@rfm.simple_test
class TorchBandwidth(TorchBandwidthBase):
    """all_reduce, all_gather, reduce_scatter, broadcast through
    torch.distributed over every transport."""
    torch_collective = parameter(list(TORCH_DEFAULT))

    def torch_collective_name(self):
        return self.torch_collective


@rfm.simple_test
class TorchFirstCall(TorchFirstCallBase):
    """init_process_group + the first all_reduce of a 1024x1024 float
    tensor vs the second, 5 loops, each in a fresh process group; the max
    over ranks."""


@rfm.simple_test
class MpiFirstCall(MpiFirstCallBase):
    """The same with plain MPI (mpi4py, Allreduce of a numpy array):
    MPI_Init or a fresh communicator + the first Allreduce vs the second.
    No NCCL: no transport."""


@rfm.simple_test
class TorchPatternReplay(PatternReplayBase):
    """Replays a communication-pattern CSV (``-S pattern=job.csv``; default:
    the example the suite ships, ccl_health/data/patterns/README.md) and
    records per line the measured time, algbw, busbw, ideal busbw and
    efficiency."""


@rfm.simple_test
class TorchTrainingStep(TrainingStepBase):
    """A small DDP training loop on synthetic data (``torch_bench train``):
    ``model=comm`` is communication-bound (a wide MLP, ~71M parameters,
    small batch), ``model=compute`` compute-bound (deep 3x3 convolutions,
    ~0.6M parameters, large batch).  samples/s (global), the median step
    time and the share of the step spent in NCCL kernels (torch.profiler);
    run over the ``transport`` parameter, the same model with and without
    the network plugin (``model``: every model of the tool)."""


# The same checks over the network plugin: only these depend on its build
# (none where the site file lists no plugin transport: skipped, with why).
PluginMixin = plugin_mixin()


@rfm.simple_test
class TorchBandwidthPlugin(PluginMixin, TorchBandwidth):
    transport = parameter(PLUGIN_TRANSPORTS)


@rfm.simple_test
class TorchFirstCallPlugin(PluginMixin, TorchFirstCall):
    transport = parameter(PLUGIN_TRANSPORTS)


@rfm.simple_test
class TorchPatternReplayPlugin(PluginMixin, TorchPatternReplay):
    transport = parameter(PLUGIN_TRANSPORTS)


@rfm.simple_test
class TorchTrainingStepPlugin(PluginMixin, TorchTrainingStep):
    transport = parameter(PLUGIN_TRANSPORTS)
