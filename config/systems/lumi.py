"""LUMI (CSC, Kajaani): HPE Cray EX, LUMI-G nodes with 4x MI250X = 8 GCDs,
Slingshot 11, ROCm + RCCL + aws-ofi-rccl.  One rank per GCD.

As LUMI's own ReFrame configuration has it (Lumi-supercomputer/
lumi-reframe-tests, config/lumi.py at a6d79840: system `lumi`, partition
`gpu` on Slurm's `standard-g`, the software stack's `partition/G`); the
launcher's CPU mask is that of LUMI's RCCL test
(checks/microbenchmarks/gpu/rccl_test.py): each rank on the CCD closest to
its GCD.  The Slurm account is ``-A $CCL_HEALTH_ACCOUNT`` (LUMI's
``project_46...``; without it sbatch takes ``SBATCH_ACCOUNT``).

Compute nodes are named ``nid<N>`` (six digits) like Perlmutter's: on the
shipped configuration, where both systems are, the health hook says
COULD-NOT-CHECK there (ambiguous) unless the system is named
(``CCL_HEALTH_SYSTEM=lumi``); a site's own copy made by
``scripts/init-site DIR --from lumi`` holds only this system."""

import os

_GPUS = 8                     # GCDs per LUMI-G node
_account = os.environ.get('CCL_HEALTH_ACCOUNT')

system = {
    'name': 'lumi',
    'descr': 'LUMI-G (MI250X, Slingshot 11)',
    # login nodes uan01..uan04 (ln01-nmn on the management network);
    # LUMI-G nodes nid005000..nid007xxx, named like Perlmutter's (see
    # above)
    'hostnames': [r'uan\d+$', r'ln\d+-nmn$', r'nid\d{6}$'],
    # CCL_HEALTH_MODULES_SYSTEM=nomod renders job scripts where Lmod is
    # missing (CI); on the system itself Lmod is used.
    'modules_system': os.environ.get('CCL_HEALTH_MODULES_SYSTEM', 'lmod'),
    'partitions': [{
        'name': 'gpu',
        'descr': 'LUMI-G nodes (standard-g): 8 GCDs per node',
        'scheduler': 'slurm',
        'launcher': 'srun',
        'access': (['--partition=standard-g', f'--gpus-per-node={_GPUS}'] +
                   ([f'-A {_account}'] if _account else [])),
        'environs': ['PrgEnv-cray-rocm'],
        'max_jobs': 8,
        'features': ['gpu', 'amd'],
        'devices': [{'type': 'gpu', 'arch': 'gfx90a', 'num_devices': _GPUS}],
        'extras': {'sweep_nodes': 2, 'rocm_home': '/opt/rocm-5.2.3',
                   # ROCm >= 5.2 keeps RCCL under <rocm>/lib, include/rccl
                   'rccl_home': '/opt/rocm-5.2.3',
                   'mpi_home': '$MPICH_DIR'},
    }],
}

environments = [{
    'name': 'PrgEnv-cray-rocm', 'target_systems': ['lumi'],
    # the LUMI/23.09 stack for LUMI-G: Cray PE 23.09 (cray-mpich 8.1.27),
    # the system ROCm 5.2.3; buildtools for autotools
    'modules': ['LUMI/23.09', 'partition/G', 'PrgEnv-cray',
                'craype-accel-amd-gfx90a', 'rocm/5.2.3', 'cray-mpich/8.1.27',
                'buildtools/23.09'],
    'cc': 'cc', 'cxx': 'CC', 'ftn': 'ftn',
    'features': ['ccl'],
    'extras': {'launcher_options': [
        '--cpu-bind=mask_cpu:0xfe000000000000,0xfe00000000000000,0xfe0000,'
        '0xfe000000,0xfe,0xfe00,0xfe00000000,0xfe0000000000']},
}]
