"""The fleet acceptance through real Slurm: a 16-node cluster on this host
(tests/helpers/slurm_cluster.py: one network namespace and one slurmd per
node on a bridge the test makes, a real slurmctld and munged, Debian's packages),
``scripts/fleet --partition batch --drain`` taking one allocation and
running every round as srun job steps, and the stand-in probe
(tests/replay/fleet/probe) on every node in place of the hook and of
nccl-tests, driven by a fault plan.

A fault-free run names nothing and drains nothing; a run with one crashing
node, one hanging node, one slow link between two healthy nodes and one
straggler at 0.85 names exactly those (bad = the crashing and the hanging
node, the link, the straggler), drains exactly the bad nodes (sinfo shows
them drained with the ``ccl-health:`` reason) and never a node whose check
could not run (the hook's exit 2), and ends within its bound:
the hang is cut by the client-side bound, never waited for.  The faulty
run is made with the node check as one srun over every node (the default)
and as one srun per node.  Nothing the
test started is left running.  Skipped, with the reason, only where Slurm
cannot be installed (no root, no apt-get) or network namespaces cannot be
made (no root); deselect with ``-m "not slurm"``."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import slurm_cluster
from helpers.procs import running
from ccl_health import fleetcli as cli
from ccl_health.sitedata.fleetconfig import FleetConfig
from ccl_health.fleet.faults import FaultPlan

pytestmark = pytest.mark.slurm

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(REPO, 'tests', 'replay', 'fleet', 'probe')
NODES = 16
FLEET = {'transport': 'net-socket', 'round_limit': 15, 'node_limit': 10,
         'grace': 2, 'groups': [4, 8]}
#: the fault plan of the faulty run: every kind of culprit once, the link
#: between two healthy nodes that neither pairing puts together (pairing 1:
#: neighbours, 2: i <-> i + n/2 of the 13 healthy nodes)
FAULTS = {'busbw': 40.0,
          'bad_nodes': {'n03': 'crash', 'n11': 'hang'},
          'bad_links': [['n06', 'n14']],
          'stragglers': {'n09': 0.85}}
#: a node whose check cannot run (the hook's exit 2): named, never drained
UNCHECKED = 'n05'


def site_text(**fleet):
    py, probe = json.dumps(sys.executable), json.dumps(PROBE)
    lines = ['system: fleettest',
             'transports:',
             '  net-socket:',
             '    env:',
             '      NCCL_NET_PLUGIN: none',
             '      NCCL_IB_DISABLE: "1"',
             'fleet:']
    lines += [f'  {k}: {json.dumps(v)}'
              for k, v in dict(FLEET, **fleet).items()]
    lines += [f'  node_probe: [{py}, {probe}, node, --json, "{{json}}"]',
              f'  step_probe: [{py}, {probe}, step, -b, "{{size}}", -e, '
              f'"{{size}}", -g, "1", -T, "{{timeout}}"]']
    return '\n'.join(lines) + '\n'


@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
    c = slurm_cluster.started(tmp_path_factory.mktemp('fleet-slurm'),
                              nodes=NODES)
    try:
        yield c
    finally:
        c.stop()


def fleet_command(cluster, tmp_path, plan, unchecked=(),
                  options=('--drain',), env_extra=None, **fleet):
    """(argv, env) of ``scripts/fleet`` over the cluster with ``plan``."""
    plan_path = tmp_path / 'plan.json'
    FaultPlan.from_dict(plan).save(str(plan_path))
    site = tmp_path / 'site.yaml'
    site.write_text(site_text(**fleet))
    env = cluster.env()
    env['CCL_HEALTH_FAULT_PLAN'] = str(plan_path)
    env['CCL_HEALTH_FAULT_UNCHECKED'] = ','.join(unchecked)
    env.update(env_extra or {})
    if (tmp_path / 'summary.json').exists():
        (tmp_path / 'summary.json').unlink()
    return ([os.path.join(REPO, 'scripts', 'fleet'), '--partition', 'batch',
             '--site', str(site), *options, '--output', str(tmp_path / 'out'),
             '--json', str(tmp_path / 'summary.json')], env)


def fleet_run(cluster, tmp_path, plan, unchecked=(), options=('--drain',),
              env_extra=None, **fleet):
    argv, env = fleet_command(cluster, tmp_path, plan, unchecked, options,
                              env_extra, **fleet)
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, text=True,
                       timeout=240, cwd=tmp_path)
    seconds = time.monotonic() - t0
    summary = None
    if (tmp_path / 'summary.json').exists():
        summary = json.loads((tmp_path / 'summary.json').read_text())
    return p, summary, seconds


def bound():
    """The run's own bound (its salloc --time): every round at its limit."""
    return cli.bound_seconds(FleetConfig.from_dict(FLEET), NODES)


def drained(cluster):
    """{node: reason} of the nodes sinfo lists drained or draining."""
    return {n: r for n, (state, r) in cluster.node_reasons().items()
            if state.startswith(('drain', 'drng'))}


def assert_nothing_left_running(cluster):
    """No job in the queue and, on the nodes, nothing but their slurmd:
    no step, no probe (the hanging one included)."""
    slurmd = {cluster.procs[n].pid for n in cluster.nodes}
    deadline = time.monotonic() + 15
    while True:
        queue = cluster.run('squeue', '-h', '-o', '%i %T').stdout.split()
        extra = {pid: comm for pid, (comm, _) in slurm_cluster.
                 namespaced_pids(cluster.ns_inodes).items()
                 if pid not in slurmd and running(pid)}
        if not queue and not extra:
            return
        if time.monotonic() > deadline:
            pytest.fail(f'left running after the run: queue {queue}, on the '
                        f'nodes {extra}')
        time.sleep(0.3)


def test_cluster_has_16_nodes_and_starts_in_seconds(cluster):
    states = cluster.node_states()
    assert sorted(states) == [f'n{i:02d}' for i in range(1, NODES + 1)]
    assert set(states.values()) == {'idle'}
    print(f'16-node cluster started in {cluster.start_seconds:.1f} s')
    assert cluster.start_seconds < 30
    # each node is a host of its own: its own address, reached over the bridge
    p = cluster.run('srun', f'-N{NODES}', f'-n{NODES}', 'sh', '-c',
                    'echo $SLURMD_NODENAME $(hostname -I)', timeout=60)
    assert p.returncode == 0, p.stderr
    addrs = dict(line.split()[:2] for line in p.stdout.splitlines())
    assert addrs == {n: cluster.addr[n] for n in cluster.nodes}


def test_fault_free_run_names_nothing_and_drains_nothing(cluster, tmp_path):
    p, s, seconds = fleet_run(cluster, tmp_path, {'busbw': 40.0})
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert sorted(s['healthy']) == cluster.nodes
    assert s['nodes_checked'] == NODES
    assert (s['bad'], s['suspect_links'], s['stragglers'],
            s['could_not_check'], s['drained']) == ({}, [], {}, {}, [])
    assert drained(cluster) == {}
    assert set(cluster.node_states().values()) == {'idle'}
    assert seconds < bound(), seconds
    # Slurm ran it: one allocation, pairs and groups as job steps
    kinds = [r['kind'] for r in s['rounds']]
    assert kinds[0] == 'node' and 'pair' in kinds and 'group' in kinds
    assert 'salloc: Granted job allocation' in p.stderr
    assert_nothing_left_running(cluster)


@pytest.mark.parametrize('node_check', ['one-step', 'per-node'])
def test_faults_named_exactly_and_only_bad_nodes_drained(cluster, tmp_path,
                                                         node_check):
    try:
        p, s, seconds = fleet_run(cluster, tmp_path, FAULTS, [UNCHECKED],
                                  node_check=node_check)
        assert p.returncode == 1, p.stdout + p.stderr[-3000:]
        # every node idle at the start (drained ones resumed): all checked
        assert s['nodes_checked'] == NODES and not s.get('not_checked')
        assert sorted(s['bad']) == ['n03', 'n11'], s['bad']
        assert 'crash' in s['bad']['n03'] and 'hang' in s['bad']['n11']
        assert [sorted(link[:2]) for link in s['suspect_links']] == \
            [['n06', 'n14']], s['suspect_links']
        # n06-n14 is in neither pairing of the 13 healthy nodes: the link is
        # found through a failing group, bisected with halves side by side
        kinds = [r['kind'] for r in s['rounds']]
        assert s['named_round']['n06-n14'] > kinds.index('group') + 1
        assert max(r['steps'] for r in s['rounds'][kinds.index('group'):]
                   if r['kind'] == 'group') >= 2
        assert sorted(s['stragglers']) == ['n09'], s['stragglers']
        assert list(s['could_not_check']) == [UNCHECKED]
        assert s.get('suspect_groups') in (None, [])
        assert sorted(s['healthy']) == sorted(
            set(cluster.nodes) - {'n03', 'n11', UNCHECKED})
        # zero false drains: exactly the bad nodes, with the reason; never
        # the node that could not be checked
        assert sorted(s['drained']) == ['n03', 'n11']
        reasons = drained(cluster)
        assert sorted(reasons) == ['n03', 'n11'], reasons
        # the drain reason says the action; monitor findings (the link,
        # the straggler) drain nothing
        assert all(r.startswith('ccl-health: isolate: ')
                   for r in reasons.values()), reasons
        assert s['actions'] == {'n03': 'isolate', 'n11': 'isolate',
                                'n06-n14': 'monitor', 'n09': 'monitor'}
        assert s['systemic'] == [] and not s.get('drain_held')
        assert {n: cluster.node_states()[n] for n in reasons} == \
            {'n03': 'drain', 'n11': 'drain'}
        # the hang was cut at its bound, not waited for
        node_round = s['rounds'][0]
        assert node_round['kind'] == 'node'
        # one srun for every node, or one per node
        assert node_round['steps'] == {'one-step': 1,
                                       'per-node': NODES}[node_check]
        assert node_round['seconds'] <= FLEET['node_limit'] + \
            FLEET['grace'] + 5 + 3
        assert seconds < bound(), seconds
        print(f'faulty run ({node_check}): {seconds:.1f} s, '
              f'{len(s["rounds"])} rounds (bound {bound():.0f} s)')
        assert_nothing_left_running(cluster)
    finally:
        cluster.resume(['n03', 'n11'])


def test_systemic_failure_drains_nothing_and_caller_env_is_dropped(
        cluster, tmp_path):
    """Every node check crashing the same way (a shared cause): one
    finding 'systemic', exit 1, nothing drained without --force; the
    caller's NCCL_P2P_DISABLE=1 never reaches a step (named in
    fleet.json)."""
    p, s, seconds = fleet_run(cluster, tmp_path, {'all_nodes': 'crash'},
                              env_extra={'NCCL_P2P_DISABLE': '1',
                                         'FI_PROVIDER': 'tcp'})
    assert p.returncode == 1, p.stdout + p.stderr[-3000:]
    assert len(s['bad']) == NODES
    assert [f['scope'] for f in s['systemic']] == ['share']
    assert s['systemic'][0]['reason'].startswith(
        f'{NODES} of {NODES} nodes failed the same way')
    assert s['drained'] == [] and drained(cluster) == {}
    assert s['drain_held'].startswith('systemic: ')
    assert 'SYSTEMIC: ' in p.stdout and 'not drained: systemic' in p.stdout
    assert s['env_dropped'] == ['FI_PROVIDER', 'NCCL_P2P_DISABLE']
    steps = (tmp_path / 'out' / 'fleet').glob('*/nodes/*.json')
    assert len(list(steps)) == NODES
    assert seconds < 60, seconds
    assert_nothing_left_running(cluster)


def test_resume_brings_back_only_what_ccl_health_drained(cluster, tmp_path):
    """The closed loop: n03 drained by ccl-health for a fault that is gone
    (intermittent) is resumed after 2 passing checks; n07, drained by
    ccl-health and still crashing, stays drained with the count; n12,
    drained by an administrator, is never touched.  The partner is a node
    that passed a fleet run's check (n13 of n13-n16).  Each resume returns
    only once the jobs of its steps have left the queue: the failing node
    reads ``drain`` after it, never ``drng`` (which the next resume would
    leave alone)."""
    intermittent, failing, admin = 'n03', 'n07', 'n12'
    why = {intermittent: 'ccl-health: isolate: UNHEALTHY: crash: GPU 0',
           failing: 'ccl-health: isolate: UNHEALTHY: crash: GPU 1',
           admin: 'admin: replacing a fan (ticket 42)'}
    try:
        p, s, _ = fleet_run(cluster, tmp_path, {'busbw': 40.0},
                            options=('--nodelist', 'n[13-16]'), groups=[4])
        assert p.returncode == 0, p.stdout + p.stderr[-3000:]
        for n, r in why.items():
            cluster.run('scontrol', 'update', f'nodename={n}', 'state=drain',
                        f'reason={r}', timeout=20)
        plan = {'busbw': 40.0, 'bad_nodes': {failing: 'crash'}}
        t0 = time.monotonic()
        resume = ('--resume', '--db', str(tmp_path / 'fleet.db'))
        p, s, _ = fleet_run(cluster, tmp_path, plan, options=resume)
        assert p.returncode == 1, p.stdout + p.stderr[-3000:]
        assert sorted(s['candidates']) == [intermittent, failing]
        assert list(s['left_alone']) == [admin]
        assert s['resumed'] == []
        assert s['kept'] == {
            intermittent: why[intermittent] + ' (passed 1 of 2 checks)',
            failing: why[failing] + ' (failed again, 1 of 1 checks)'}
        reasons = drained(cluster)
        assert reasons == {**s['kept'], admin: why[admin]}
        assert cluster.node_states()[failing] == 'drain'
        assert 'partner n13' in p.stderr
        p, s, _ = fleet_run(cluster, tmp_path, plan, options=resume)
        seconds = time.monotonic() - t0
        assert p.returncode == 1, p.stdout + p.stderr[-3000:]
        assert s['resumed'] == [intermittent]
        assert s['kept'] == {
            failing: why[failing] + ' (failed again, 2 of 2 checks)'}
        assert drained(cluster) == {failing: s['kept'][failing],
                                    admin: why[admin]}
        deadline = time.monotonic() + 10
        while cluster.node_states().get(intermittent) != 'idle' and \
                time.monotonic() < deadline:
            time.sleep(0.3)
        assert cluster.node_states()[intermittent] == 'idle'
        # the timeline: the drain, two passes, the resume
        steps = [e['event'] for e in s['timeline'][intermittent]]
        assert steps == ['drain', 'pass', 'pass', 'resume']
        assert [e['event'] for e in s['timeline'][failing]] == \
            ['drain', 'fail', 'fail']
        assert admin not in s['timeline']
        page = open(s['page']).read()
        assert 'Drain / resume timeline' in page and 'resumed' in page
        assert why[admin] in page.replace('&#39;', "'")
        # the database: every check and its outcome
        import sqlite3
        db = sqlite3.connect(str(tmp_path / 'fleet.db'))
        rows = db.execute("select case_name, verdict, reason from cases "
                          "where case_name like 'fleet-resume %'").fetchall()
        assert (f'fleet-resume {intermittent}', 'pass',
                'resumed: 2 of 2 consecutive checks passed') in rows
        assert any(r[0] == f'fleet-resume {failing}' and r[1] == 'crash' and
                   '(failed again, 2 of 2 checks)' in r[2] for r in rows)
        assert not any(admin in r[0] for r in rows)
        assert 'No reservations' in cluster.run(
            'scontrol', 'show', 'reservation', timeout=20).stdout
        print(f'two --resume runs: {seconds:.1f} s')
        assert seconds < 60
        assert_nothing_left_running(cluster)
    finally:
        cluster.resume(list(why))


def test_resume_stopped_by_sigterm_drains_its_nodes_again(cluster,
                                                         tmp_path):
    """SIGTERM (Slurm's time limit, scancel) during the node checks: exit
    143, both nodes under check drained again with their reason and the
    stop, the reservation deleted, no step left, the state file whole."""
    nodes = {'n04': 'ccl-health: isolate: UNHEALTHY: crash: GPU 2',
             'n08': 'ccl-health: isolate: UNHEALTHY: crash: GPU 3'}
    try:
        p, s, _ = fleet_run(cluster, tmp_path, {'busbw': 40.0},
                            options=('--nodelist', 'n[13-16]'), groups=[4])
        assert p.returncode == 0, p.stdout + p.stderr[-3000:]
        for n, r in nodes.items():
            cluster.run('scontrol', 'update', f'nodename={n}', 'state=drain',
                        f'reason={r}', timeout=20)
        # n08's node check hangs: the stop comes while it runs
        plan = {'busbw': 40.0, 'bad_nodes': {'n08': 'hang'}}
        argv, env = fleet_command(cluster, tmp_path, plan,
                                  options=('--resume',))
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                cwd=tmp_path)
        try:
            deadline = time.monotonic() + 60
            while 'n08' not in cluster.run(
                    'squeue', '-h', '-t', 'R', '-n', 'ccl-health-node', '-o',
                    '%N', timeout=20).stdout.split():
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, 'no node check seen'
                time.sleep(0.2)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
            seconds = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 128 + signal.SIGTERM, out + err[-3000:]
        assert 'STOPPED by SIGTERM' in out
        note = '(resume stopped by SIGTERM before its checks passed)'
        assert drained(cluster) == {n: f'{r} {note}' for n, r in
                                    nodes.items()}
        assert 'No reservations' in cluster.run(
            'scontrol', 'show', 'reservation', timeout=20).stdout
        assert_nothing_left_running(cluster)
        from ccl_health.fleet import resumestate
        state = resumestate.load_state(str(tmp_path / 'out'))
        for n in nodes:
            assert state[n]['events'][-1]['event'] == 'could-not-check'
            assert state[n]['events'][-1]['reason'] == note[1:-1]
        print(f'SIGTERM to exit: {seconds:.1f} s')
    finally:
        cluster.resume(list(nodes))


def test_zz_cluster_stops_and_leaves_nothing(cluster):
    left = cluster.stop()
    assert left == {}, left
    assert cluster.node_states() == {}      # slurmctld is gone
