"""OLCF Frontier: HPE Cray EX, 4x MI250X (8 GCDs) per node, Slingshot 11,
ROCm + RCCL + aws-ofi-rccl.  One rank per GCD, bound to its closest GCD."""

import os

# the Slurm account (-A) every allocation there needs; without it sbatch
# takes SBATCH_ACCOUNT
_account = os.environ.get('CCL_HEALTH_ACCOUNT')

system = {
    'name': 'frontier',
    'descr': 'OLCF Frontier (MI250X, Slingshot 11)',
    'hostnames': [r'login\d+\.frontier', r'frontier\d+'],
    # CCL_HEALTH_MODULES_SYSTEM=nomod renders job scripts where Lmod is
    # missing (a laptop, CI: docs/sites.md "Sites from a laptop"); on the system
    # itself Lmod is used.
    'modules_system': os.environ.get('CCL_HEALTH_MODULES_SYSTEM', 'lmod'),
    'partitions': [{
        'name': 'batch',
        'descr': 'GPU nodes: 8 GCDs per node',
        'scheduler': 'slurm',
        'launcher': 'srun',
        'access': ['-p batch', '-q normal'] + ([f'-A {_account}'] if _account else []),
        'environs': ['PrgEnv-gnu-rocm'],
        'max_jobs': 8,
        'features': ['gpu', 'amd'],
        'devices': [{'type': 'gpu', 'arch': 'gfx90a', 'num_devices': 8}],
        'extras': {'sweep_nodes': 2, 'rocm_home': '/opt/rocm-5.7.1',
                   # RCCL under <rocm>/rccl before ROCm 6.0, <rocm>/lib since
                   'rccl_home': '/opt/rocm-5.7.1/rccl',
                   'mpi_home': '$MPICH_DIR'},
    }],
}

environments = [{
    'name': 'PrgEnv-gnu-rocm', 'target_systems': ['frontier'],
    # as the published figures were built: PrgEnv-gnu (swapped for the
    # default PrgEnv-cray), ROCm 5.7.1, cray-mpich 8.1.27
    'modules': ['PrgEnv-gnu', 'rocm/5.7.1', 'craype-accel-amd-gfx90a', 'gcc',
                'cray-mpich/8.1.27', 'libtool'],
    'cc': 'cc', 'cxx': 'CC', 'ftn': 'ftn',
    'features': ['ccl'],
    # one rank per GCD, bound to its closest GCD
    'extras': {'launcher_options': ['--gpus-per-task=1',
                                    '--gpu-bind=closest']},
}]
