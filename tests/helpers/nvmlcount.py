"""A stand-in NVML (pynvml) of two healthy H200s that writes each
``nvmlInit`` / ``nvmlShutdown`` it is called with to the file
``$FAKE_NVML_LOG``, and where NVML itself would start and stop: its
reference count (nvml.h: NVML starts when the count goes from 0 to 1 and
shuts down when it is back at 0) going from 0 to 1 (``start``) and back
(``stop``): the oracle of how often a hook run starts NVML (issue 42)."""

from helpers.hostile import NVML_BASE

#: the stand-in's text (a pynvml.py put first on PYTHONPATH)
COUNTING_NVML = NVML_BASE.replace('''def nvmlInit(): pass
def nvmlShutdown(): pass
''', '''import threading
_lock = threading.Lock()
_count = 0


def _log(*words):
    with open(os.environ['FAKE_NVML_LOG'], 'a') as fp:
        fp.write(' '.join(words) + '\\n')


def nvmlInit():
    global _count
    with _lock:
        _log('init')
        if _count == 0:
            _log('start')
        _count += 1


def nvmlShutdown():
    global _count
    with _lock:
        _log('shutdown')
        _count -= 1
        if _count == 0:
            _log('stop')
''') + '''
def nvmlDeviceGetMemoryInfo(h):
    return {'total': 141 << 30, 'used': 0}


def nvmlDeviceGetComputeRunningProcesses(h):
    return []
'''
assert 'def nvmlInit():\n    global' in COUNTING_NVML


def events(path):
    """The stand-in's log: its words in order."""
    try:
        with open(path) as fp:
            return fp.read().split()
    except FileNotFoundError:
        return []
