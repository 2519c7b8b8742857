"""The stand-in GPU node of the hook's tests (tests/replay/fake-node: its
nvidia-smi, launcher and NVML; tests/replay: nccl-tests replaying what 2x
H200 printed), the hook run on it, and a capture made wrong."""

import os
import re
import subprocess
import sys
import time

from conftest import REPO

FAKE = os.path.join(REPO, 'tests', 'replay', 'fake-node')
REPLAY = os.path.join(REPO, 'tests', 'replay')
CAP = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap')
WRAPPER = os.path.join(REPO, 'scripts', 'ccl-health-check')
CLEAN = ('CUDA_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES', 'ROCR_VISIBLE_DEVICES',
         'CCL_HEALTH_SYSTEM', 'CCL_HEALTH_PARTITION', 'CCL_HEALTH_CHECK_LIMIT',
         'CCL_HEALTH_CHECK_LAUNCHER', 'CCL_HEALTH_FAKE_GPUS',
         'CCL_HEALTH_FAKE_MIG', 'CCL_HEALTH_SITE_DIR',
         'CCL_HEALTH_REFERENCE_DIR', 'CCL_HEALTH_CONFIG_DIR',
         'CCL_HEALTH_REPLAY_DIR', 'CCL_HEALTH_REPLAY_INTRA',
         # what says Slurm runs the node (tests/test_hook_node_role.py)
         'SLURMD_NODENAME', 'NHC_RM', 'SLURM_JOB_ID', 'SLURM_SCONTROL')
#: a PCI bus with two GPUs (CCL_HEALTH_SYSFS): the stand-in node is a GPU node
SYSFS_GPU = os.path.join(REPO, 'tests', 'fixtures', 'sysfs', 'gpu-node')


def environ(tmp_path, env=None):
    e = dict(os.environ, CCL_HEALTH_DB=str(tmp_path / 'db.sqlite'),
             PYTHONPATH=REPO, CCL_HEALTH_HOSTNAME='ci-test-host')
    for var in CLEAN:
        e.pop(var, None)
    e['PATH'] = FAKE + os.pathsep + e['PATH']
    e['CCL_HEALTH_SYSFS'] = SYSFS_GPU
    e.update(env or {})
    return e


def hook(tmp_path, *args, env=None, cmd=None):
    """(exit code, the one line, stderr) of the hook; asserts ONE line."""
    cmd = cmd or [sys.executable, '-m', 'ccl_health.hook']
    p = subprocess.run(cmd + ['--tests-prefix', REPLAY, '--launcher',
                              os.path.join(FAKE, 'launch'),
                              '--json', str(tmp_path / 'detail.json')]
                       + list(args), env=environ(tmp_path, env),
                       capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    assert len(lines) == 1, (p.returncode, p.stdout, p.stderr)
    assert 'Traceback' not in p.stdout
    return p.returncode, lines[0], p.stderr


ROW_1G = re.compile(r'^\s*1073741824\s.*$', re.M)


def wrong_1g(text):
    row = ROW_1G.search(text).group(0)
    toks = row.split()
    toks[8] = '3'                        # #wrong out-of-place
    return text.replace(row, '  '.join(toks))


def timed_hook(tmp_path, *args, env=None, path_fake=True):
    """(exit, the one line, seconds) of the hook on the stand-in node, in
    the caller's environment less its GPU and site settings (``path_fake``:
    the stand-in's tools first on PATH, else only /usr/bin:/bin)."""
    e = dict(os.environ, CCL_HEALTH_DB=str(tmp_path / 'db.sqlite'),
             PYTHONPATH=REPO)
    for var in ('CUDA_VISIBLE_DEVICES', 'CCL_HEALTH_SYSTEM',
                'CCL_HEALTH_PARTITION', 'CCL_HEALTH_CHECK_LIMIT',
                'CCL_HEALTH_FAKE_GPUS', 'CCL_HEALTH_FAKE_MIG'):
        e.pop(var, None)
    e['CCL_HEALTH_HOSTNAME'] = 'ci-test-host'
    if path_fake:
        e['PATH'] = FAKE + os.pathsep + e['PATH']
    else:
        e['PATH'] = '/usr/bin:/bin'
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, '-m', 'ccl_health.hook',
                        '--tests-prefix', REPLAY, '--launcher',
                        os.path.join(FAKE, 'launch'),
                        '--json', str(tmp_path / 'detail.json')] + list(args),
                       env=e, capture_output=True, text=True, timeout=120)
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1, p.stdout + p.stderr      # one line for NHC
    return p.returncode, lines[0], time.monotonic() - t0
