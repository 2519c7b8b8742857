"""``scripts/fleet --resume`` stopped, raced and waited for, against a
stand-in Slurm on PATH (tests/helpers/slurm_standin.py: sinfo, scontrol, srun,
squeue, scancel over one state file, with pauses at each phase; no
timing).  The real loop, and a SIGTERM during the node checks on the
16-node Slurm: tests/test_fleet_slurm.py.

The stop matrix: SIGTERM, SIGHUP and SIGINT after the reservation, after
``state=resume``, during the node checks and during the pair checks.
Afterwards no node is in service that did not pass (the stand-in's node
states), no reservation is left, no srun or task is running, the state
file is complete, and the exit is 128 + the signal.  A second signal
during the cleanup cuts nothing short; a SIGKILL leaves no step behind
(the sruns die with the resume).  A resume decides only after its steps'
jobs have left the queue; a second resume of the partition is skipped,
exit 3, one line."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ccl_health.fleet import resumestate
from helpers.procs import running

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STANDIN = os.path.join(REPO, 'tests', 'helpers', 'slurm_standin.py')

WHY = {'n02': 'ccl-health: isolate: UNHEALTHY: crash: GPU 0',
       'n03': 'ccl-health: reset (a reboot is expected to clear it): pid 7',
       'n04': 'admin: replacing a fan (ticket 42)'}
#: n01 runs a user's job; n09 idle and passed its last check (the only
#: partner there may be); n10 idle, never checked
NODES = {'n01': ('alloc', ''), 'n02': ('drain', WHY['n02']),
         'n03': ('drain', WHY['n03']), 'n04': ('drain', WHY['n04']),
         'n09': ('idle', ''), 'n10': ('idle', '')}

PROBE = r'''#!/usr/bin/env python3
# the node check (node --json PATH) and the pair step (step ...) of the
# stand-in; FAULTS: node=crash; PAUSE node / pair with PAUSE_NODE: that
# node's check writes at-node / at-pair and sleeps until it is stopped
import json, os, sys, time
sys.path.insert(0, os.environ['REPO'])
node = os.environ['SLURMD_NODENAME']
nodes = os.environ['SLURM_STEP_NODELIST'].split(',')
pause = os.environ.get('PAUSE', '').split(',')
here = os.environ['STANDIN']
faults = dict(f.split('=') for f in os.environ.get('FAULTS', '').split())
def hold(phase):
    open(os.path.join(here, 'at-' + phase), 'w').close()
    time.sleep(3600)
if sys.argv[1] == 'node':
    if 'node' in pause and node == os.environ.get('PAUSE_NODE'):
        hold('node')
    code = 1 if faults.get(node) == 'crash' else 0
    line = 'UNHEALTHY: crash' if code else 'HEALTHY: ok'
    json.dump({'code': code, 'verdict': 'crash' if code else 'pass',
               'line': line, 'probes': [{'busbw': 300.0}]},
              open(sys.argv[3], 'w'))
    print(line)
    sys.exit(code)
if 'pair' in pause and os.environ.get('PAUSE_NODE') in nodes:
    hold('pair')
if os.environ['SLURM_PROCID'] == '0':
    from ccl_health.fleet.simulate import table
    sys.stdout.write(table(1 << 20, 40.0, len(nodes)))
'''

SITE = textwrap.dedent('''\
    system: mini
    transports:
      net-socket:
        env: {NCCL_NET_PLUGIN: none}
    fleet:
      transport: net-socket
      size: 1M
      node_limit: 60
      round_limit: 60
      grace: 1
      resume_passes: 1
      node_probe: [probe, node, --json, '{json}']
      step_probe: [probe, step, -b, '{size}', -T, '{timeout}']
    ''')


class Standin:
    def __init__(self, tmp):
        self.tmp = tmp
        self.dir = tmp / 'slurm'
        self.dir.mkdir()
        bin_ = tmp / 'bin'
        bin_.mkdir()
        for name in ('sinfo', 'scontrol', 'srun', 'squeue', 'scancel'):
            os.symlink(STANDIN, bin_ / name)
        (bin_ / 'probe').write_text(PROBE)
        (bin_ / 'probe').chmod(0o755)
        (self.dir / 'slurm.json').write_text(json.dumps({
            'nodes': {n: {'state': s, 'reason': r}
                      for n, (s, r) in NODES.items()},
            'resv': {}, 'jobs': {}, 'next': 100}))
        self.site = tmp / 'site.yaml'
        self.site.write_text(SITE)
        self.out = tmp / 'out'
        resumestate.update_state(str(self.out), lambda st: resumestate.
                                 last_check(st, 'n09', 'pass', 'fleet run'))
        self.env = dict(os.environ, PATH=f'{bin_}:{os.environ["PATH"]}',
                        REPO=REPO, STANDIN=str(self.dir))
        self.env.pop('SLURM_JOB_ID', None)

    def start(self, json_name='s.json', **env):
        return subprocess.Popen(
            [os.path.join(REPO, 'scripts', 'fleet'), '--resume',
             '--partition', 'batch', '--site', str(self.site), '--output',
             str(self.out), '--json', str(self.tmp / json_name), '--db',
             str(self.tmp / 'fleet.db')],
            env=dict(self.env, **env), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=self.tmp)

    def wait_at(self, phase, proc):
        """Until the stand-in reached ``phase`` (the resume still runs)."""
        marker = self.dir / f'at-{phase}'
        deadline = time.monotonic() + 120
        while not marker.exists():
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f'the resume ended before {phase}: '
                            f'{proc.returncode}\n{out}\n{err}')
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f'the stand-in never reached {phase}')
            time.sleep(0.05)

    def go(self, phase):
        (self.dir / f'go-{phase}').touch()

    def slurm(self):
        return json.loads((self.dir / 'slurm.json').read_text())

    def log(self):
        return (self.dir / 'log').read_text().splitlines()

    def assert_nothingrunning(self):
        """No srun, no task of a step, no job in the queue."""
        pids = [int(p) for p in (self.dir / 'pids').read_text().split()] \
            if (self.dir / 'pids').exists() else []
        left = [p for p in pids if running(p)]
        assert not left, f'left running: {left}'
        jobs = [j for j, job in self.slurm()['jobs'].items()
                if job['pid'] > 0 and running(job['pid'])]
        assert not jobs, jobs


@pytest.fixture
def standin(tmp_path):
    h = Standin(tmp_path)
    yield h
    # a failed test leaves nothing behind either: its sruns and tasks
    pids = h.dir / 'pids'
    for pid in (pids.read_text().split() if pids.exists() else []):
        if running(int(pid)):
            os.kill(int(pid), signal.SIGKILL)


def _finish(proc, timeout=120):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f'the resume did not end: {out}\n{err}')
    return proc.returncode, out, err


PHASES = {
    # phase: (PAUSE, PAUSE_NODE, the stand-in phase to wait for)
    'after the reservation': ('reservation', '', 'reservation'),
    'after state=resume': ('resume', '', 'resume'),
    'during node checks': ('node', 'n03', 'node'),
    'during pair checks': ('pair', 'n03', 'pair'),
}


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGHUP,
                                 signal.SIGINT], ids=lambda s: s.name)
@pytest.mark.parametrize('phase', list(PHASES))
def test_a_stop_leaves_no_untested_node_in_service(standin, phase, sig):
    pause, pause_node, at = PHASES[phase]
    proc = standin.start(PAUSE=pause, PAUSE_NODE=pause_node)
    standin.wait_at(at, proc)
    proc.send_signal(sig)
    standin.go(at)
    code, out, err = _finish(proc)
    assert code == 128 + sig, out + err
    assert f'STOPPED by {sig.name}' in out
    nodes = standin.slurm()['nodes']
    # only n02 may be in service, and only once its pair check passed
    # (resume_passes 1): it comes before n03's
    passed = {'n02'} if phase == 'during pair checks' else set()
    in_service = {n for n, v in nodes.items() if v['state'] == 'idle'}
    assert in_service == {'n09', 'n10'} | passed
    note = f'(resume stopped by {sig.name} before its checks passed)'
    for n in ('n02', 'n03'):
        if n in passed:
            continue
        want = WHY[n] if phase == 'after the reservation' else \
            f'{WHY[n]} {note}'
        assert nodes[n] == {'state': 'drain', 'reason': want}
    assert nodes['n04'] == {'state': 'drain', 'reason': WHY['n04']}
    assert nodes['n01']['state'] == 'alloc'
    assert standin.slurm()['resv'] == {}
    standin.assert_nothingrunning()
    # the partner: n09, never the node running a user's job
    create = [ln for ln in standin.log() if 'create reservation' in ln]
    assert len(create) == 1 and 'Nodes=n02,n03,n09 ' in create[0]
    assert 'IGNORE_JOBS' not in create[0]
    # the drains came first (Slurm's SIGKILL may follow the SIGTERM), then
    # the steps were cancelled and the reservation deleted
    log = standin.log()
    delete = next(i for i, ln in enumerate(log) if 'scontrol delete' in ln)
    drains = [i for i, ln in enumerate(log) if 'state=drain' in ln]
    if phase != 'after the reservation':
        cancel = next(i for i, ln in enumerate(log) if ln.startswith(
            'scancel -R ccl-health-resume-'))
        assert drains and max(drains) < cancel < delete
    else:
        assert drains == []        # never resumed: drained as they were
    # the state file: whole, with this run's event for each node
    state = json.loads((standin.out / 'fleet' / 'nodes.json').read_text())
    for n in ('n02', 'n03'):
        last = state[n]['events'][-1]
        if n in passed:
            assert [e['event'] for e in state[n]['events']][-2:] == \
                ['pass', 'resume']
        else:
            assert last['event'] == 'could-not-check'
            assert last['reason'] == note[1:-1]
    assert 'n04' not in state and 'n01' not in state
    s = json.loads((standin.tmp / 's.json').read_text())
    assert s['stopped'] == sig.name
    assert sorted(s['resumed']) == sorted(passed)


def test_a_second_signal_does_not_cut_the_cleanup_short(standin):
    proc = standin.start(PAUSE='node,drain', PAUSE_NODE='n03')
    standin.wait_at('node', proc)
    proc.send_signal(signal.SIGTERM)
    standin.wait_at('drain', proc)          # the cleanup has begun
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGHUP)
    proc.send_signal(signal.SIGTERM)
    standin.go('drain')
    code, out, err = _finish(proc)
    assert code == 128 + signal.SIGTERM, out + err
    nodes = standin.slurm()['nodes']
    assert {n: v['state'] for n, v in nodes.items() if n in WHY} == \
        {'n02': 'drain', 'n03': 'drain', 'n04': 'drain'}
    assert standin.slurm()['resv'] == {}
    standin.assert_nothingrunning()
    assert 'could-not-check' == json.loads(
        (standin.out / 'fleet' / 'nodes.json').read_text())['n03'][
            'events'][-1]['event']


def _until_nothing_runs(standin, bound=30):
    """Until the stand-in's sruns and tasks are gone (they get SIGTERM
    when the resume dies), at most ``bound`` s."""
    deadline = time.monotonic() + bound
    while True:
        try:
            standin.assert_nothingrunning()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_sigkill_leaves_no_steprunning(standin):
    """SIGKILL cannot be handled (Slurm's after KillWait): the sruns get
    SIGTERM when the resume dies and stop their tasks."""
    proc = standin.start(PAUSE='node', PAUSE_NODE='n03')
    standin.wait_at('node', proc)
    proc.kill()
    _finish(proc)
    _until_nothing_runs(standin)


def test_the_decision_waits_for_the_steps_jobs_to_leave_the_queue(standin):
    """A step's job stays in the queue a while after its srun ended
    (Slurm's completing): the node is drained only after the queue is
    empty, so it reads ``drain``, never ``drng`` (which the next resume
    would leave alone)."""
    proc = standin.start(FAULTS='n03=crash', LINGER='3')
    code, out, err = _finish(proc)
    assert code == 1, out + err
    log = standin.log()
    drain = next(i for i, ln in enumerate(log)
                 if ln.startswith('scontrol update nodename=n03 state=drain'))
    answers = [(i, ln) for i, ln in enumerate(log) if ln.startswith('squeue')]
    assert any(ln.strip() != 'squeue ->' for _, ln in answers[:1]), answers
    before = [ln for i, ln in answers if i < drain]
    assert before and before[-1].strip() == 'squeue ->', before
    nodes = standin.slurm()['nodes']
    assert nodes['n03']['state'] == 'drain'
    assert nodes['n03']['reason'] == \
        f'{WHY["n03"]} (failed again, 1 of 1 checks)'
    assert nodes['n02']['state'] == 'idle'          # passed: resumed
    assert standin.slurm()['resv'] == {}
    standin.assert_nothingrunning()


def test_a_second_resume_of_the_partition_is_skipped(standin):
    first = standin.start(PAUSE='node', PAUSE_NODE='n03')
    standin.wait_at('node', first)
    before = (standin.out / 'fleet' / 'nodes.json').read_text()
    second = standin.start(json_name='s2.json')
    code, out, err = _finish(second)
    assert code == 3, out + err
    assert out.splitlines() == [
        f'fleet --resume: skipped: another --resume of batch holds '
        f'{standin.out}/fleet/resume-batch.lock'], out
    assert (standin.out / 'fleet' / 'nodes.json').read_text() == before
    assert json.loads((standin.tmp / 's2.json').read_text())['skipped']
    assert sum('create reservation' in ln for ln in standin.log()) == 1
    first.send_signal(signal.SIGTERM)
    code, out, err = _finish(first)
    assert code == 128 + signal.SIGTERM, out + err
    # the first run's events are all there
    state = json.loads((standin.out / 'fleet' / 'nodes.json').read_text())
    assert [state[n]['events'][-1]['event'] for n in ('n02', 'n03')] == \
        ['could-not-check'] * 2
    # the lock is free again: a third resume runs
    third = standin.start(json_name='s3.json')
    code, out, err = _finish(third)
    assert code == 0, out + err
    assert 'skipped' not in out and 'RESUMED n02' in out
    state = json.loads((standin.out / 'fleet' / 'nodes.json').read_text())
    assert [e['event'] for e in state['n03']['events']] == \
        ['drain', 'could-not-check', 'pass', 'resume']


# -- issue 41, class 2: a resume survives SIGKILL -------------------------

def _killed_after_state_resume(standin):
    """A resume SIGKILLed while it checks n03: n02 and n03 are back in
    service (state=resume, in its MAINT reservation), nothing decided."""
    proc = standin.start(PAUSE='node', PAUSE_NODE='n03')
    standin.wait_at('node', proc)
    proc.kill()
    _finish(proc)
    nodes = standin.slurm()['nodes']
    assert {nodes[n]['state'] for n in ('n02', 'n03')} <= {'idle', 'maint',
                                                           'alloc'}
    assert standin.slurm()['resv'], 'the killed resume left its reservation'
    (standin.dir / 'at-node').unlink()
    _until_nothing_runs(standin)        # its sruns die with it
    return nodes


def test_the_next_resume_finishes_a_killed_one(standin):
    _killed_after_state_resume(standin)
    # n03 really crashes: the next resume must find it, not skip it
    proc = standin.start(json_name='s2.json', FAULTS='n03=crash')
    code, out, err = _finish(proc)
    assert 'was killed before it finished' in err, err
    assert code == 1, out + err             # n03 failed again
    nodes = standin.slurm()['nodes']
    assert nodes['n03']['state'] == 'drain'
    assert nodes['n03']['reason'].startswith(WHY['n03'] + ' (failed again')
    assert nodes['n02']['state'] == 'idle'   # checked, passed: resumed
    assert nodes['n04'] == {'state': 'drain', 'reason': WHY['n04']}
    assert standin.slurm()['resv'] == {}     # both reservations gone
    assert not (standin.out / 'fleet' / 'resume-batch.intent.json').exists()
    state = json.loads((standin.out / 'fleet' / 'nodes.json').read_text())
    assert any(e['reason'] == 'resume killed before its checks passed'
               for e in state['n03']['events'])
    s = json.loads((standin.tmp / 's2.json').read_text())
    assert sorted(s['unfinished']['drained']) == ['n02', 'n03']


def test_any_fleet_run_finishes_a_killed_resume(standin):
    """Not only a resume: the next fleet run of the partition drains the
    unchecked nodes again and removes the reservation before it starts."""
    _killed_after_state_resume(standin)
    p = subprocess.run(
        [sys.executable, '-c', 'from ccl_health import fleetcli as cli; '
         'print(cli.finish_killed_resume("batch"))'],
        env=dict(standin.env, CCL_HEALTH_OUTPUT=str(standin.out)),
        capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    nodes = standin.slurm()['nodes']
    for n in ('n02', 'n03'):
        assert nodes[n] == {'state': 'drain', 'reason': f'{WHY[n]} (resume '
                            f'killed before its checks passed)'}
    assert standin.slurm()['resv'] == {}
    assert not (standin.out / 'fleet' / 'resume-batch.intent.json').exists()
    # the next resume sees them as ccl-health's drains, and checks them
    code, out, err = _finish(standin.start(json_name='s3.json'))
    assert code == 0, out + err
    assert sorted(json.loads((standin.tmp / 's3.json').read_text())[
        'resumed']) == ['n02', 'n03']


def test_a_resume_that_finishes_leaves_no_intent(standin):
    code, out, err = _finish(standin.start())
    assert code == 0, out + err
    assert not (standin.out / 'fleet' / 'resume-batch.intent.json').exists()
