"""OLCF Frontier: HPE Cray EX, 4x MI250X (8 GCDs) per node, Slingshot 11,
ROCm + RCCL + aws-ofi-rccl.  One rank per GCD, bound to its closest GCD."""

import os

system = {
    'name': 'frontier',
    'descr': 'OLCF Frontier (MI250X, Slingshot 11)',
    'hostnames': [r'login\d+\.frontier', r'frontier\d+'],
    # CCL_HEALTH_MODULES_SYSTEM=nomod renders job scripts where Lmod is
    # missing (CI); on the system itself Lmod is used.
    'modules_system': os.environ.get('CCL_HEALTH_MODULES_SYSTEM', 'lmod'),
    'partitions': [{
        'name': 'batch',
        'descr': 'GPU nodes: 8 GCDs per node',
        'scheduler': 'slurm',
        'launcher': 'srun',
        'access': ['-q normal'],
        'environs': ['PrgEnv-gnu-rocm'],
        'max_jobs': 8,
        'features': ['gpu', 'amd'],
        'devices': [{'type': 'gpu', 'arch': 'gfx90a', 'num_devices': 8}],
        'resources': [{'name': 'gpu_binding',
                       'options': ['--gpus-per-task=1',
                                   '--gpu-bind=closest']}],
        'extras': {'gpus_per_node': 8, 'gpu_vendor': 'amd',
                   'gpu_arch': 'gfx90a', 'rocm_home': '/opt/rocm-6.2.4',
                   'mpi_home': '$MPICH_DIR'},
    }],
}

environments = [{
    'name': 'PrgEnv-gnu-rocm', 'target_systems': ['frontier'],
    'modules': ['PrgEnv-gnu', 'rocm/6.2.4', 'craype-accel-amd-gfx90a',
                'gcc-native', 'cray-mpich', 'libtool'],
    'cc': 'cc', 'cxx': 'CC', 'ftn': 'ftn',
    'features': ['ccl'],
}]
