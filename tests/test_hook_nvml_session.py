"""NVML started once per hook run (issue 42): the reading before the
probes, the sampler's readings while they run (every 0.25 s) and the one
after share one :class:`ccl_health.evidence.nodestate.nvml.Session`; each
reading's own ``nvmlInit`` / ``nvmlShutdown`` is then only NVML's
reference count, and NVML is stopped when the hook ends, a signal's end
included.  The oracle: a stand-in pynvml that logs every call and where
its reference count goes 0 -> 1 (``start``) and back (``stop``)."""

import os
import signal
import subprocess
import sys

from conftest import REPO
from helpers.node import environ
from helpers.nvmlcount import COUNTING_NVML, events
from helpers.probe import CAPTURES, prefix, probe_hook
from helpers.procs import wait_until


def _stand_in(tmp_path):
    nv = tmp_path / 'nvml'
    nv.mkdir()
    (nv / 'pynvml.py').write_text(COUNTING_NVML)
    log = tmp_path / 'nvml.log'
    return {'PYTHONPATH': f'{nv}{os.pathsep}{REPO}',
            'FAKE_NVML_LOG': str(log)}, str(log)


def test_one_nvml_start_per_hook_run_of_many_readings(tmp_path):
    env, log = _stand_in(tmp_path)
    rc, line, doc, run = probe_hook(tmp_path, True, env=env)
    assert rc == 0, line
    said = events(log)
    # the session's own, then the readings: before, the sampler's (its
    # first as the probes start), after
    assert said.count('init') >= 4, said
    assert said.count('start') == 1 and said.count('stop') == 1, said
    assert said[0] == 'init' and said[1] == 'start' and said[-1] == 'stop'
    assert said.count('shutdown') == said.count('init')
    # every reading saw the GPUs (NVML answered through the session)
    assert [g['index'] for g in doc['node_state']['before']['gpus']] == \
        [0, 1], doc['node_state']['before']


def test_a_signal_during_the_probes_stops_nvml_once(tmp_path):
    """SIGALRM while the one probe process hangs: one start, one stop, no
    reading after it (the sampler is stopped with the probes)."""
    env, log = _stand_in(tmp_path)
    args = tmp_path / 'probe-args'
    env.update({'CCL_HEALTH_REPLAY_PROBE': os.path.join(CAPTURES, 'intra'),
                'CCL_HEALTH_REPLAY_PROBE_STALL': '60',
                'CCL_HEALTH_REPLAY_PROBE_ARGS': str(args)})
    p = subprocess.Popen([sys.executable, '-m', 'ccl_health.hook',
                          '--tests-prefix', prefix(tmp_path, 'prefix'),
                          '--limit', '50'], env=environ(tmp_path, env),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    assert wait_until(args.exists, 30), 'the probe never started'
    # the sampler has read a few times
    assert wait_until(lambda: events(log).count('init') >= 4, 10), \
        events(log)
    p.send_signal(signal.SIGALRM)
    out, err = p.communicate(timeout=30)
    assert (p.returncode, out) == (
        2, 'COULD-NOT-CHECK: stopped by SIGALRM before the check finished\n'), \
        (out, err)
    said = events(log)
    assert said.count('start') == 1 and said[-1] == 'stop', said
    assert said.count('shutdown') == said.count('init')
