"""The framework's view: collectives through ``torch.distributed`` (NCCL
backend; RCCL on ROCm builds of PyTorch), one process per GPU.

Four modes, each started once per rank (``mpirun -np N``, ``srun``,
``torchrun``) or alone (world size 1)::

    python -m ccl_health.torch_bench bandwidth --sizes 1M:1G \\
        --collectives all_reduce,all_gather,reduce_scatter,broadcast --json out.json
    python -m ccl_health.torch_bench first-call --loops 5 [--backend mpi4py] --json out.json
    python -m ccl_health.torch_bench replay --pattern job.csv --json out.json
    python -m ccl_health.torch_bench train --model comm --steps 20 \\
        --warmup 5 --json out.json

``bandwidth`` prints the columns of nccl-tests (size, count, type, redop,
root, time, algbw, busbw; the same size and busbw conventions, see
:mod:`ccl_health.evidence.collectives`) plus the ideal busbw of the links the job
uses and the efficiency busbw / ideal.  ``first-call`` times
``init_process_group`` + the first all_reduce of a 1024x1024 float tensor
against the second, each loop in a fresh process group (or, with
``--backend mpi4py``, MPI_Init / a fresh communicator + the first
Allreduce of a numpy array against the second); the max over ranks is
reported.  ``replay`` replays the calls of a communication-pattern CSV
(:mod:`ccl_health.patterns`).  ``train`` runs a small DDP training loop
(``DistributedDataParallel``, synthetic data) of a communication-bound
(``--model comm``: a wide MLP, small batch) or compute-bound (``--model
compute``: a deep stack of convolutions, large batch) model and reports
samples/s, the median step time and the share of the step spent in NCCL
kernels (``torch.profiler``, a few steps after the timed ones).

Ranks come from Open MPI (``OMPI_COMM_WORLD_RANK``/``_SIZE``/
``_LOCAL_RANK``), Slurm (``SLURM_PROCID``/``NTASKS``/``LOCALID``) or
torchrun (``RANK``/``WORLD_SIZE``/``LOCAL_RANK``); the rendezvous is
``MASTER_ADDR`` (default 127.0.0.1) : ``MASTER_PORT`` (default 29500).

torch is imported inside the functions that need it: the parsing,
formatting and JSON parts are used (and tested) without it.

One module per concern: :mod:`.cli` (the command line), :mod:`.ranks`
(ranks, the asked transport, the process group), :mod:`.ops` (the
collectives' layout, calls, checks and timing), :mod:`.links` (the link
facts of the node), :mod:`.output` (rows, tables, the JSON document) and
one per benchmark: :mod:`.bandwidth`, :mod:`.first_call`, :mod:`.replay`,
:mod:`.train`.  The names below are the package's public interface.
"""


from ccl_health.torch_bench.bandwidth import DEFAULT_COLLECTIVES, parse_collectives, parse_sizes
from ccl_health.torch_bench.benchcli import build_parser, main
from ccl_health.torch_bench.first_call import (FIRST_CALL_NUMEL, format_first_call,
                         summarize_first_call)
from ccl_health.torch_bench.linkfacts import link_facts, nic_line_rate
from ccl_health.torch_bench.ops import CPU_TIMING, TIMING, TORCH_COLLECTIVES, layout
from ccl_health.torch_bench.output import (TOOL, TYPE_NAMES, as_sweep, format_row, format_table,
                     header_lines, make_row, write_json)
from ccl_health.torch_bench.ranks import dist_env
from ccl_health.torch_bench.replay import write_replay_csv
from ccl_health.torch_bench.train import (TRAIN_MODELS, check_train_args, format_train,
                    model_spec, profile_share, short_kernel_name,
                    summarize_train, trace_kernels, train_fields,
                    train_results)

__all__ = [
    'CPU_TIMING', 'DEFAULT_COLLECTIVES', 'FIRST_CALL_NUMEL', 'TIMING',
    'TOOL', 'TORCH_COLLECTIVES', 'TRAIN_MODELS', 'TYPE_NAMES', 'as_sweep',
    'build_parser', 'check_train_args', 'dist_env',
    'format_first_call', 'format_row', 'format_table', 'format_train',
    'header_lines', 'layout', 'link_facts', 'main', 'make_row',
    'model_spec', 'nic_line_rate', 'parse_collectives', 'parse_sizes',
    'profile_share', 'short_kernel_name', 'summarize_first_call',
    'summarize_train', 'trace_kernels', 'train_fields', 'train_results',
    'write_json', 'write_replay_csv']
