"""scripts/fleet end to end without a cluster (--simulate), and the Slurm
scheduler's own mechanics (srun command lines, the client-side bound, the
hook's JSON, sinfo, drain) against a stand-in srun/scontrol on PATH."""

import json
import os
import subprocess
import textwrap
import time

import pytest

from ccl_health import CclHealthError
from ccl_health.sitedata import site as site_data
from ccl_health.fleet import slurmsteps as slurm
from ccl_health import fleetcli as cli
from ccl_health.fleet.hostlist import expand_hostlist
from ccl_health.judge import series
from ccl_health.sitedata.fleetconfig import FleetConfig
from ccl_health.fleet.rounds import Fleet, Step, exit_code

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fleet(*args, cwd, env=None):
    e = dict(os.environ)
    e.pop('SLURM_JOB_ID', None)
    e.update(env or {})
    return subprocess.run([os.path.join(REPO, 'scripts', 'fleet')] +
                          list(args), cwd=cwd, env=e, capture_output=True,
                          text=True, timeout=120)


def _simulate(tmp_path, *extra, env=None):
    plan = tmp_path / 'plan.json'
    plan.write_text(json.dumps({'bad_nodes': {'n3': 'crash'},
                                'bad_links': [['n5', 'n9']],
                                'stragglers': {'n7': 0.85}}))
    p = fleet('--simulate', str(plan), '--nodelist', 'n[1-16]', '--groups',
              '4', '--output', str(tmp_path / 'out'), '--json',
              str(tmp_path / 's.json'), *extra, cwd=tmp_path, env=env)
    assert p.returncode == 1, p.stderr
    return p, json.loads((tmp_path / 's.json').read_text())


def test_simulated_run_writes_summary_and_page_saying_simulated(tmp_path):
    # the site's database (CCL_HEALTH_DB) exists: a simulation without
    # --db leaves it as it was, and creates none in the output folder
    site_db = tmp_path / 'site.db'
    from ccl_health.db import store
    with store.open_store(str(site_db)):
        pass
    before = site_db.read_bytes()
    p, s = _simulate(tmp_path, env={'CCL_HEALTH_DB': str(site_db)})
    assert set(s['bad']) == {'n3'}
    assert [l[:2] for l in s['suspect_links']] == [['n5', 'n9']]
    assert list(s['stragglers']) == ['n7'] and s['drained'] == []
    run_dir = tmp_path / 'out' / 'fleet' / s['run_id']
    page = (run_dir / 'fleet.html').read_text()
    assert '<svg' in page and 'n5 - n9' in page and 'straggler' in page
    assert '<title>SIMULATED ccl-health fleet' in page
    assert '<h1>SIMULATED Fleet acceptance' in page
    doc = json.loads((run_dir / 'fleet.json').read_text())
    assert doc['bad'] == s['bad'] and doc['simulated'] is True
    assert 'records only with --db' in doc['recorded']
    assert p.stdout.startswith('fleet: SIMULATED (scripts/fleet --simulate')
    assert 'BAD n3' in p.stdout and 'fleet: round 1 nodes' in p.stderr
    assert site_db.read_bytes() == before
    assert not os.path.exists(str(site_db) + '-wal') or \
        os.path.getsize(str(site_db) + '-wal') == 0
    assert not (tmp_path / 'out' / 'ccl-health.db').exists()


def test_simulated_run_records_only_into_its_db_marked(tmp_path):
    site_db, db = tmp_path / 'site.db', tmp_path / 'rehearsal.db'
    p, s = _simulate(tmp_path, '--db', str(db),
                     env={'CCL_HEALTH_DB': str(site_db)})
    assert not site_db.exists()
    assert json.loads((tmp_path / 'out' / 'fleet' / s['run_id'] /
                       'fleet.json').read_text())['recorded'] == str(db)
    from ccl_health.db import store
    with store.open_store(str(db), readonly=True) as st:
        rows = st.cases()
    names = {r['case_name']: r['verdict'] for r in rows}
    assert names['fleet-node nodes n3'] == 'crash'
    assert names['fleet-pair pairs-1 n1-n2'] == 'pass'
    assert all(r['source'] == 'fleet' for r in rows)
    assert {r['run_id'] for r in rows} == {
        f'simulated-fleet-{s["run_id"]}'}
    assert all(series.simulated(r) for r in rows)
    # scripts/report failed: a rehearsal is no failure (nor an all-clear)
    r = subprocess.run([os.path.join(REPO, 'scripts', 'report'), '--db',
                        str(db), 'failed'], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert 'CRASH' not in r.stdout + r.stderr
    assert 'nothing recorded in the last 24 h but' in r.stderr and \
        f'simulated-fleet-{s["run_id"]}' in r.stderr, r.stderr


def test_simulated_drain_names_only_bad_nodes(tmp_path):
    plan = tmp_path / 'plan.json'
    plan.write_text(json.dumps({'bad_nodes': {'n2': 'hang', 'n4': 'wrong'}}))
    p = fleet('--simulate', str(plan), '--nodelist', 'n[1-8]', '--drain',
              '--round-limit', '5', '--output', str(tmp_path), cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    # 2 of 8 is above the default ceiling (10 %, rounded up: 1): held
    assert '  drained: ' not in p.stdout
    assert 'not drained: 2 nodes to drain, above the ceiling of 1' in p.stdout
    p = fleet('--simulate', str(plan), '--nodelist', 'n[1-8]', '--drain',
              '--force', '--round-limit', '5', '--output', str(tmp_path),
              cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert 'drained: n2, n4' in p.stdout


def test_errors_are_one_line_exit_2(tmp_path):
    for args, text in [(['--bogus'], 'unrecognized arguments'),
                       (['--simulate', str(tmp_path / 'none.json'),
                         '--nodelist', 'n1'], 'none.json'),
                       (['--site', str(tmp_path / 'x.yaml')], 'x.yaml'),
                       (['--groups', 'a,b'], '--groups')]:
        p = fleet(*args, cwd=tmp_path)
        assert p.returncode == 2, args
        assert len(p.stderr.strip().splitlines()) == 1 and text in p.stderr


def test_the_fleet_transport_is_one_the_site_lists():
    """Without fleet.transport the fleet takes the strongest network the
    site file lists that does not require GPUDirect RDMA: an InfiniBand
    site without the plugin gets net-ib, never the unlisted net-plugin
    (issue 38.3); a transport the file does not list is an error naming
    the file and the key."""
    def site(names, fleet=''):
        text = 'transports:\n' + ''.join(f'  {n}:\n    env: {{}}\n'
                                         for n in names)
        return site_data.parse(text + fleet, 'x.yaml')
    for names, want in [
            (['intra', 'net-socket', 'net-ib', 'net-ib-gdr'], 'net-ib'),
            (['intra', 'net-ib-gdr', 'net-socket'], 'net-socket'),
            (['intra', 'net-socket', 'net-ib', 'net-plugin',
              'net-plugin-gdr'], 'net-plugin'),
            (['net-socket'], 'net-socket')]:
        s = site(names)
        cfg = FleetConfig.from_dict(s.fleet, s.path, s.transports)
        assert cfg.transport == want, names
    # named in the block, and listed: taken as named
    s = site(['intra', 'net-ib', 'net-ib-gdr'],
             'fleet:\n  transport: net-ib-gdr\n')
    assert FleetConfig.from_dict(s.fleet, s.path, s.transports).transport \
        == 'net-ib-gdr'
    with pytest.raises(CclHealthError) as e:
        site(['intra', 'net-ib'], 'fleet:\n  transport: net-plugin\n')
    assert str(e.value) == ('x.yaml: fleet.transport: net-plugin is not '
                            'listed under transports: (it lists intra, '
                            'net-ib)')
    s = site(['intra'])
    with pytest.raises(CclHealthError, match=r'x.yaml: fleet.transport: '
                       r'the site file lists no network transport'):
        FleetConfig.from_dict(s.fleet, s.path, s.transports)
    with pytest.raises(CclHealthError, match='lists no network'):
        site(['intra'], 'fleet:\n  size: 1G\n')


def test_site_fleet_block_is_checked_naming_file_and_key(tmp_path):
    base = 'transports:\n  net-socket:\n    env: {}\n'
    s = site_data.parse(base + 'fleet:\n  transport: net-socket\n  '
                        'round_limit: 30\n  groups: [4]\n', 'x.yaml')
    cfg = FleetConfig.from_dict(s.fleet)
    assert (cfg.transport, cfg.round_limit, cfg.groups) == (
        'net-socket', 30, [4])
    for bad, key in [('  size: lots\n', 'fleet.size'),
                     ('  round_limit: 0\n', 'fleet.round_limit'),
                     ('  transport: intra\n', 'fleet.transport'),
                     ('  node_probe: []\n', 'fleet.node_probe'),
                     ('  colour: red\n', 'fleet')]:
        with pytest.raises(CclHealthError) as e:
            site_data.parse(base + 'fleet:\n' + bad, 'x.yaml')
        assert 'x.yaml' in str(e.value) and key in str(e.value)


def test_hostlist_expansion():
    assert expand_hostlist('n[1-3,7],m[08-10]') == [
        'n1', 'n2', 'n3', 'n7', 'm08', 'm09', 'm10']
    assert expand_hostlist('a,b') == ['a', 'b']


def test_sinfo_states():
    usable, other = slurm.parse_sinfo(
        'n1 idle\nn2 mix\nn3 drain\nn4 down*\nn5 alloc\nn5 alloc\nn6 idle~\n')
    assert usable == ['n1', 'n2', 'n5']
    assert set(other) == {'n3', 'n4', 'n6'} and 'drain' in other['n3']


def test_srun_line():
    argv = slurm.srun_argv(Step('pair', ('a', 'b'), 90), 4,
                           ['--exact', '--overlap'], ['prog', '-x'])
    assert argv[:6] == ['srun', '--nodes=2', '--ntasks=8',
                        '--ntasks-per-node=4', '--nodelist=a,b', '--time=2']
    assert '--kill-on-bad-exit=1' in argv and argv[-2:] == ['prog', '-x']
    assert '--ntasks=1' in slurm.srun_argv(Step('node', ('a',), 60), 4, [],
                                            ['p'])


FAKE_SRUN = r'''#!/usr/bin/env python3
# a stand-in srun: runs the program once per node of --nodelist with
# SLURMD_NODENAME / SLURM_PROCID set (the real one in the Slurm test)
import os, subprocess, sys
args = sys.argv[1:]
nodes = []
while args and args[0].startswith('--'):
    a = args.pop(0)
    if a.startswith('--nodelist='):
        nodes = a.split('=', 1)[1].split(',')
procs = []
for rank, node in enumerate(nodes):      # the tasks run side by side
    env = dict(os.environ, SLURMD_NODENAME=node, SLURM_PROCID=str(rank),
               SLURM_STEP_NODELIST=','.join(nodes))
    procs.append(subprocess.Popen(args, env=env))
sys.exit(max(p.wait() for p in procs))
'''

PROBE = r'''#!/usr/bin/env python3
# node mode: --json PATH; step mode: prints a table; FAULTS: node=kind
import json, os, sys, time
sys.path.insert(0, os.environ['REPO'])
from ccl_health.fleet.simulate import table
faults = dict(f.split('=') for f in os.environ.get('FAULTS', '').split()
              if f)
node = os.environ['SLURMD_NODENAME']
nodes = os.environ['SLURM_STEP_NODELIST'].split(',')
if sys.argv[1] == 'node':
    f = faults.get(node)
    if f == 'hang':
        time.sleep(3600)
    code = 1 if f == 'crash' else 0
    line = 'UNHEALTHY: crash' if code else 'HEALTHY: ok'
    json.dump({'code': code, 'verdict': 'crash' if code else 'pass',
               'line': line, 'probes': [{'busbw': 300.0}]},
              open(sys.argv[3], 'w'))
    print(line)
    sys.exit(code)
if any(faults.get(n) == 'hang' for n in nodes):
    time.sleep(3600)
if any(faults.get(n) == 'crash' for n in nodes):
    print('NCCL error'); sys.exit(1)
if faults.get(node) == 'warn':
    # a WARN of a fatal class, printed by this node's rank at teardown
    print(f'{node}:{os.getpid()}:1 [0] NCCL WARN socketProgress: Connection '
          f'closed by remote peer {node}<41234>', flush=True)
if os.environ['SLURM_PROCID'] == '0':
    sys.stdout.write(table(1 << 20, 40.0, len(nodes)))
'''


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    bin_ = tmp_path / 'bin'
    bin_.mkdir()
    for name, text in (('srun', FAKE_SRUN), ('probe', PROBE)):
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    (bin_ / 'scontrol').write_text(
        '#!/bin/sh\necho "$@" >> "%s/scontrol.log"\n' % tmp_path)
    (bin_ / 'scontrol').chmod(0o755)
    monkeypatch.setenv('PATH', f'{bin_}:{os.environ["PATH"]}')
    monkeypatch.setenv('REPO', REPO)
    return tmp_path


@pytest.mark.parametrize('mode', ['one-step', 'per-node'])
def test_slurm_scheduler_bounds_a_hang_and_judges_the_hook_json(fake_slurm,
                                                                mode):
    tmp = fake_slurm
    os.environ['FAULTS'] = 'n2=crash n5=hang'
    try:
        cfg = FleetConfig(size='1M', node_limit=2, round_limit=2, grace=1,
                          groups=[], transport='net-socket', node_check=mode)
        progs = cli.Programs(cfg, str(tmp / 'run'))
        cfg.node_probe = ['probe', 'node', '--json', '{json}']
        cfg.step_probe = ['probe', 'step', '-b', '{size}', '-T',
                          '{timeout}']
        os.makedirs(tmp / 'run' / 'nodes')
        sched = slurm.SlurmScheduler(str(tmp / 'run'), 1, progs.node,
                                     progs.step, {}, [], poll=0.05,
                                     nodes_program=progs.nodes)
        t0 = time.monotonic()
        s = Fleet([f'n{i}' for i in range(1, 7)], sched, cfg,
                  log=lambda _: None).run()
        took = time.monotonic() - t0
    finally:
        del os.environ['FAULTS']
    assert set(s['bad']) == {'n2', 'n5'}
    assert s['bad']['n5'].startswith('hang:')
    assert s['bad']['n2'] == 'UNHEALTHY: crash'
    assert len(s['healthy']) == 4 and exit_code(s) == 1
    # the hang cost its bound (2 s + 1 s grace), never the probe's 3600 s
    assert s['rounds'][0]['seconds'] < 3 + slurm.TERM_WAIT + 7
    assert took < 120
    node_cmds = sorted((tmp / 'run' / 'steps').glob('*-node.cmd'))
    assert len(node_cmds) == (1 if mode == 'one-step' else 6)
    if mode == 'one-step':
        line = node_cmds[0].read_text()
        assert '--nodes=6' in line and '--kill-on-bad-exit=0' in line
        assert '"${SLURMD_NODENAME}"' in line
    cmd = open(sorted((tmp / 'run' / 'steps').glob('*-pair.cmd'))[0]).read()
    assert cmd.startswith('srun --nodes=2 --ntasks=2 --ntasks-per-node=1 '
                          '--nodelist=') and 'probe step -b 1M -T 2' in cmd
    drained, errors = sched.drain(['n2', 'n5'], s['bad'])
    assert drained == ['n2', 'n5'] and not errors
    log = (tmp / 'scontrol.log').read_text().splitlines()
    assert log[0].startswith('update nodename=n2 state=drain reason=ccl-'
                             'health: UNHEALTHY: crash')


FAKE_SALLOC = r'''#!/usr/bin/env python3
# a stand-in salloc: the nodes of --nodefile become the allocation
import os, sys
args = sys.argv[1:]
env = dict(os.environ, SLURM_JOB_ID='42')
while args and args[0].startswith('--'):
    a = args.pop(0)
    if a.startswith('--nodefile='):
        env['SLURM_JOB_NODELIST'] = ','.join(
            open(a.split('=', 1)[1]).read().split())
    open(os.environ['LOG'], 'a').write('salloc ' + a + '\n')
os.execvpe(args[0], args, env)
'''


def _salloc_world(tmp, states='n1 idle\\nn2 idle\\nn3 idle\\nn4 idle\\n'
                               'n5 idle'):
    """The stand-in salloc, sinfo (``states``: what it prints, printf's
    escapes) and a logging scontrol."""
    bin_ = tmp / 'bin'
    (bin_ / 'salloc').write_text(FAKE_SALLOC)
    (bin_ / 'sinfo').write_text('#!/bin/sh\necho "$@" >> "$LOG"\nprintf '
                                f'"{states}\\\\n"\n')
    (bin_ / 'scontrol').write_text(
        '#!/bin/sh\necho "$@" >> "$LOG"\n'
        'if [ "$1" = show ]; then echo "$3" | tr , "\\n"; fi\n')
    for f in ('salloc', 'sinfo', 'scontrol'):
        (bin_ / f).chmod(0o755)


#: a site whose fleet runs the stand-in probe
MINI_SITE = textwrap.dedent('''\
    system: mini
    transports:
      net-socket:
        env: {NCCL_NET_PLUGIN: none}
    fleet:
      transport: net-socket
      size: 1M
      node_limit: 3
      round_limit: 3
      grace: 1
      groups: [3]
      node_probe: [probe, node, --json, '{json}']
      step_probe: [probe, step, -b, '{size}', -T, '{timeout}']
    ''')


def test_outside_an_allocation_one_salloc_then_steps_inside(fake_slurm):
    tmp = fake_slurm
    _salloc_world(tmp, 'n1 idle\\nn2 mix\\nn3 idle\\nn4 idle\\nn5 idle\\n'
                       'n6 drain')
    site = tmp / 'mini.yaml'
    site.write_text(MINI_SITE)
    p = fleet('--partition', 'batch', '--site', str(site), '--drain',
              '--output', str(tmp / 'out'), '--json', str(tmp / 's.json'),
              cwd=tmp, env={'LOG': str(tmp / 'log'), 'FAULTS': 'n3=crash',
                            'PATH': os.environ['PATH']})
    assert p.returncode == 1, p.stdout + p.stderr
    s = json.loads((tmp / 's.json').read_text())
    assert set(s['bad']) == {'n3'} and s['drained'] == ['n3']
    assert set(s['not_checked']) == {'n6'}
    assert s['healthy'] == ['n1', 'n2', 'n4', 'n5']
    log = (tmp / 'log').read_text()
    assert 'salloc --nodes=5' in log and 'salloc --partition=batch' in log
    assert '-p batch' in log                                 # sinfo
    assert 'update nodename=n3 state=drain' in log
    steps = os.listdir(tmp / 'out' / 'fleet' / s['run_id'] / 'steps')
    assert any(f.endswith('-group.cmd') for f in steps)


@pytest.mark.parametrize('declared', [True, False])
def test_a_warn_the_site_declares_benign_drains_no_node(fake_slurm,
                                                        declared):
    """Issue 37: a WARN the site's ``benign_warns`` declares harmless (the
    hook and the sweep pass it) in the pair and group steps of n3: every
    node healthy, nothing drained.  Without the site's word the same WARN
    fails n3's steps, and ``--drain`` drains n3 alone."""
    tmp = fake_slurm
    _salloc_world(tmp)
    site = tmp / 'mini.yaml'
    site.write_text(MINI_SITE + (textwrap.dedent('''\
        benign_warns:
        - pattern: "^socketProgress: Connection closed by remote peer n\\\\d+<"
          overrides: connection
          why: the launcher ends the ranks unevenly at teardown
        ''') if declared else ''))
    p = fleet('--partition', 'batch', '--site', str(site), '--drain',
              '--output', str(tmp / 'out'), '--json', str(tmp / 's.json'),
              cwd=tmp, env={'LOG': str(tmp / 'log'), 'FAULTS': 'n3=warn',
                            'PATH': os.environ['PATH']})
    s = json.loads((tmp / 's.json').read_text())
    log = (tmp / 'log').read_text()
    if declared:
        assert p.returncode == 0, p.stdout + p.stderr
        assert s['bad'] == {} and s['drained'] == [], s
        assert s['healthy'] == ['n1', 'n2', 'n3', 'n4', 'n5']
        assert 'state=drain' not in log
    else:
        assert p.returncode == 1, p.stdout + p.stderr
        assert set(s['bad']) == {'n3'} and s['drained'] == ['n3'], s
        assert 'update nodename=n3 state=drain' in log


def test_report_failed_and_history_leave_simulated_rows_out(tmp_path):
    from ccl_health.db import answers, store
    from ccl_health.judge import series
    from ccl_health.judge import history
    db = str(tmp_path / 'mixed.db')
    with store.open_store(db) as st:
        st.add_case(store.CaseRecord(
            run_id='night-1', case_name='AllReduce intra', verdict='crash',
            system='local', partition='gpu', reason='a real crash'))
        # a simulated series of busbw values ending in a collapse (of a
        # kind that has a history: fleet steps have none, issue 33), and a
        # simulated crash
        for i in range(8):
            st.add_case(store.CaseRecord(
                run_id=f'{series.SIMULATED}fleet-{i}', case_name='AllReduceSweep'
                ' %transport=net-socket', verdict='pass', system='local',
                partition='gpu', nodes=2, ranks=2, collective='all_reduce',
                transport='net-socket', time=f'2026-01-0{i + 1}T00:00:00',
                sizes=[store.SizeRecord(1 << 30, 20.0 if i < 7 else 1.0)]))
        st.add_case(store.CaseRecord(
            run_id=f'{series.SIMULATED}fleet-7', case_name='fleet-node nodes '
            'n3', verdict='crash', reason='crash (simulated)'))
        lines = [line for _, line in answers.failures(
            st, now=store.datetime.datetime(2026, 1, 8, 12, tzinfo=store
                                            .datetime.timezone.utc))]
        assert len(lines) == 1 and 'a real crash' in lines[0], lines
        assert sum(answers.simulated_runs(st, 24 * 365 * 10).values()) == 9
        assert history.detect(st.records()) == []
        # the same rows as measured runs: the collapse is a drop
        real = [dict(r, run_id=r['run_id'][len(series.SIMULATED):])
                for r in st.records()]
        assert [f.kind for f in history.detect(real)] == ['drop']
    p = subprocess.run([os.path.join(REPO, 'scripts', 'report'), '--db', db,
                        'failed'], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert 'CRASH: a real crash' in p.stdout
    assert '(left out: 1 case(s) of 1 simulated run(s), simulated-fleet-7: ' \
        in p.stdout
    assert 'pairs-1' not in p.stdout
