"""What the tests of the hook in a hostile environment share (issue 20): the
Slurm HealthCheckProgram wrapper, a stand-in NVML with a foreign process,
a site copy naming the replayed nccl-tests."""

import os
import shutil

from conftest import REPO
from helpers.node import REPLAY


SLURM_WRAPPER = os.path.join(REPO, 'site', 'slurm', 'healthcheck.sh')


#: what every stand-in NVML (pynvml) of two H200s answers alike; a stand-in
#: adds its memory and its processes (``nvmlDeviceGetMemoryInfo``,
#: ``nvmlDeviceGetComputeRunningProcesses``)
NVML_BASE = '''
import os


class NVMLError(Exception):
    def __init__(self, value=3):
        self.value = value


def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return 2
def nvmlSystemGetNVMLVersion(): return '13.580'
def nvmlSystemGetDriverVersion(): return '580.1'
def nvmlDeviceGetHandleByIndex(i): return ('h', i)
def nvmlDeviceGetUUID(h):
    return 'GPU-%dc2f6d13-c7f6-4b78-6145-e06e786e4c2b' % h[1]
def nvmlDeviceGetName(h): return 'NVIDIA H200'
'''

#: a stand-in NVML with a foreign process on GPU 1
FOREIGN_NVML = NVML_BASE + '''
def nvmlDeviceGetMemoryInfo(h):
    return {'total': 80 << 30, 'used': (13 << 30) if h[1] == 1 else 0}


class _P:
    def __init__(self, pid):
        self.pid, self.usedGpuMemory = pid, 12 << 30


def nvmlDeviceGetComputeRunningProcesses(h):
    return [_P(int(os.environ['FAKE_FOREIGN_PID']))] if h[1] == 1 else []
'''


def site_naming_replay(dst, env):
    """The hook finds the replayed nccl-tests through the site file's
    build prefix (NHC gives it no option): a site copy naming it."""
    src = env['CCL_HEALTH_SITE_DIR']
    if not os.path.exists(os.path.join(str(dst), 'local.yaml')):
        shutil.copytree(src, dst)
    text = (dst / 'local.yaml').read_text()
    text = text.replace('build:\n', f'build:\n  nccl_tests:\n    prefix: '
                        f'{REPLAY}\n', 1)
    (dst / 'local.yaml').write_text(text)
    env['CCL_HEALTH_SITE_DIR'] = str(dst)
