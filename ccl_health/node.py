"""Facts about the node the suite runs on: GPUs, CUDA, MPI.  Used by the
``local`` system configuration and by the main command to decide what can
run here."""

import dataclasses
import os
import shutil
import subprocess
from typing import Optional


@dataclasses.dataclass
class Gpus:
    vendor: Optional[str] = None       # 'nvidia' | 'amd' | None
    count: int = 0
    model: str = ''
    arch: str = ''                     # 'sm_90', 'gfx90a'
    driver: str = ''
    why_none: str = ''                 # one line when count == 0


def _run(cmd, timeout=20):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, str(err)
    return (p.stdout if p.returncode == 0 else None), p.stderr.strip()


def detect_gpus(env=None):
    """Ask nvidia-smi, then rocm-smi.  Never raises.

    ``CCL_HEALTH_ASSUME_GPUS=<count>:<arch>`` (e.g. ``2:sm_90``) pretends,
    for dry runs on machines without GPUs (CI): nothing can run then."""
    env = os.environ if env is None else env
    assumed = env.get('CCL_HEALTH_ASSUME_GPUS')
    if assumed:
        count, _, arch = assumed.partition(':')
        arch = arch or 'sm_90'
        return Gpus('amd' if arch.startswith('gfx') else 'nvidia',
                    int(count), f'assumed ({assumed})', arch)
    if shutil.which('nvidia-smi'):
        out, err = _run(['nvidia-smi', '--query-gpu=name,compute_cap,'
                         'driver_version', '--format=csv,noheader'])
        if out:
            rows = [[c.strip() for c in line.split(',')]
                    for line in out.strip().splitlines() if line.strip()]
            if rows:
                name, cap, drv = (rows[0] + ['', '', ''])[:3]
                arch = 'sm_' + cap.replace('.', '') if cap else ''
                return Gpus('nvidia', len(rows), name, arch, drv)
        why = f'nvidia-smi found no GPU ({(err or "no output")[:120]})'
    elif shutil.which('rocm-smi') or shutil.which('rocminfo'):
        out, err = _run(['rocminfo'])
        archs = [line.split(':', 1)[1].strip() for line in (out or '').
                 splitlines() if line.strip().startswith('Name:') and
                 'gfx' in line]
        if archs:
            return Gpus('amd', len(archs), archs[0], archs[0])
        why = f'rocminfo found no GPU ({(err or "no output")[:120]})'
    else:
        why = 'no GPU on this machine (neither nvidia-smi nor rocm-smi/rocminfo is installed)'
    return Gpus(why_none=why)


def mpi_home():
    """The MPI prefix nccl-tests' Makefile wants (``$MPI_HOME/include/mpi.h``)."""
    if os.environ.get('MPI_HOME'):
        return os.environ['MPI_HOME']
    if not shutil.which('mpicc'):
        return None
    out, _ = _run(['mpicc', '--showme:incdirs'])
    for inc in (out or '').split():
        if os.path.exists(os.path.join(inc, 'mpi.h')):
            return os.path.dirname(inc.rstrip('/'))
    mpicc = os.path.realpath(shutil.which('mpicc'))
    return os.path.dirname(os.path.dirname(mpicc))


def cuda_home():
    for cand in (os.environ.get('CUDA_HOME'), os.environ.get('CUDA_PATH'),
                 '/usr/local/cuda'):
        if cand and os.path.exists(os.path.join(cand, 'bin', 'nvcc')):
            return cand
    nvcc = shutil.which('nvcc')
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) \
        if nvcc else None


def in_slurm_allocation(env=None):
    env = os.environ if env is None else env
    return bool(env.get('SLURM_JOB_ID'))
