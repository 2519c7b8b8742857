"""The `local` system: any host.  Its GPUs (count, architecture) are
detected when the configuration is loaded; ranks are started with `srun`
inside a Slurm allocation and with `mpirun` otherwise.

Jobs run on this host directly (ReFrame's `local` scheduler) unless
``CCL_HEALTH_SCHEDULER=slurm``: then they are submitted with sbatch
(ReFrame's `slurm` scheduler; it polls jobs with sacct, so where Slurm keeps
no accounting use ``squeue``, ReFrame's backend that polls with squeue) and
started with `srun`, and ``CCL_HEALTH_SLURM_ACCESS`` (e.g. ``-p gpu -q
debug``) holds the sbatch options, split on spaces (a value stays with its
option).  ``CCL_HEALTH_LAUNCHER`` overrides the launcher in either case."""

import os

from ccl_health.evidence import nodefacts as node

_gpus = node.detect_gpus()
_scheduler = os.environ.get('CCL_HEALTH_SCHEDULER') or 'local'
_slurm = _scheduler in ('slurm', 'squeue')


def _access(text):
    """'-p gpu --exclusive' -> ['-p gpu', '--exclusive']: split on spaces,
    a word that is no option goes with the option before it (ReFrame
    writes one ``#SBATCH`` line per entry)."""
    opts = []
    for word in text.split():
        if opts and not word.startswith('-'):
            opts[-1] += ' ' + word
        else:
            opts.append(word)
    return opts


system = {
    'name': 'local',
    'descr': f'this host ({_gpus.count} x {_gpus.model or "no GPU"})',
    'hostnames': ['.*'],
    'modules_system': 'nomod',
    'partitions': [{
        'name': 'gpu',
        'descr': 'the GPUs of this host, one MPI rank per GPU',
        'scheduler': _scheduler,
        'access': _access(os.environ.get('CCL_HEALTH_SLURM_ACCESS', '')
                          if _slurm else ''),
        # CCL_HEALTH_LAUNCHER overrides (e.g. `local` where there is no MPI)
        'launcher': os.environ.get('CCL_HEALTH_LAUNCHER') or (
            'srun' if _slurm or node.in_slurm_allocation() else 'mpirun'),
        'environs': ['builtin'],
        'max_jobs': 1,
        'features': (['gpu', _gpus.vendor] if _gpus.count else []),
        'devices': ([{'type': 'gpu', 'arch': _gpus.arch,
                      'model': _gpus.model, 'num_devices': _gpus.count}]
                    if _gpus.count else []),
        # the GPUs are the `devices` above (ccl_health.sitedata.sysconfig)
        'extras': {
            'max_nodes': 1,
            'driver': _gpus.driver,
            'no_gpu_reason': _gpus.why_none,
            'mpi_home': node.mpi_home() or '',
            'cuda_home': node.cuda_home() or '',
        },
    }],
}

environments = [{
    'name': 'builtin', 'target_systems': ['local'],
    'cc': 'gcc', 'cxx': 'g++', 'ftn': '',
    'features': ['ccl'],
}]
