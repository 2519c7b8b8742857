"""The `local` system: any host.  Its GPUs (count, architecture) are
detected when the configuration is loaded; ranks are started with `srun`
inside a Slurm allocation and with `mpirun` otherwise."""

import os

from ccl_health import node

_gpus = node.detect_gpus()

system = {
    'name': 'local',
    'descr': f'this host ({_gpus.count} x {_gpus.model or "no GPU"})',
    'hostnames': ['.*'],
    'modules_system': 'nomod',
    'partitions': [{
        'name': 'gpu',
        'descr': 'the GPUs of this host, one MPI rank per GPU',
        'scheduler': 'local',
        # CCL_HEALTH_LAUNCHER overrides (e.g. `local` where there is no MPI)
        'launcher': os.environ.get('CCL_HEALTH_LAUNCHER') or (
            'srun' if node.in_slurm_allocation() else 'mpirun'),
        'environs': ['builtin'],
        'max_jobs': 1,
        'features': (['gpu', _gpus.vendor] if _gpus.count else []),
        'devices': ([{'type': 'gpu', 'arch': _gpus.arch,
                      'model': _gpus.model, 'num_devices': _gpus.count}]
                    if _gpus.count else []),
        'extras': {
            'gpus_per_node': _gpus.count,
            'gpu_vendor': _gpus.vendor or '',
            'gpu_arch': _gpus.arch,
            'gpu_model': _gpus.model,
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
