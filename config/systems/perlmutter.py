"""NERSC Perlmutter: 4x A100 per GPU node, 4 Cassini NICs, Slingshot 11,
CUDA + NCCL + aws-ofi-nccl.  One rank per GPU."""

import os

# the Slurm account (-A) every allocation there needs; without it sbatch
# takes SBATCH_ACCOUNT
_account = os.environ.get('CCL_HEALTH_ACCOUNT')

system = {
    'name': 'perlmutter',
    'descr': 'NERSC Perlmutter (A100, Slingshot 11)',
    # login nodes login01..login40.perlmutter.nersc.gov; GPU nodes
    # nid001000..nid008xxx, six digits: LUMI's compute nodes are named so
    # too, so on the shipped configuration the hook says COULD-NOT-CHECK
    # there (ambiguous) unless the system is named or the site's own copy
    # (scripts/init-site --from perlmutter) holds only this system
    'hostnames': [r'login\d+\.perlmutter', r'perlmutter', r'nid\d{6}$'],
    # CCL_HEALTH_MODULES_SYSTEM=nomod renders job scripts where Lmod is
    # missing (a laptop, CI: docs/sites.md "Sites from a laptop"); on the system
    # itself Lmod is used.
    'modules_system': os.environ.get('CCL_HEALTH_MODULES_SYSTEM', 'lmod'),
    'partitions': [{
        'name': 'gpu',
        'descr': 'GPU nodes: 4x A100 per node',
        'scheduler': 'slurm',
        'launcher': 'srun',
        'access': (['-C gpu', '-q regular', '--gpus-per-node=4'] +
                   ([f'-A {_account}'] if _account else [])),
        'environs': ['PrgEnv-gnu-cuda'],
        'max_jobs': 8,
        'features': ['gpu', 'nvidia'],
        'devices': [{'type': 'gpu', 'arch': 'sm_80', 'num_devices': 4}],
        'extras': {'sweep_nodes': 2, 'mpi_home': '$MPICH_DIR',
                   'cuda_home': '$CUDA_HOME'},
    }],
}

environments = [{
    'name': 'PrgEnv-gnu-cuda', 'target_systems': ['perlmutter'],
    'modules': ['PrgEnv-gnu', 'cudatoolkit', 'craype-accel-nvidia80',
                'cray-mpich'],
    'cc': 'cc', 'cxx': 'CC', 'ftn': 'ftn',
    'features': ['ccl'],
    'extras': {'launcher_options': ['--gpus-per-task=1']},
}]
