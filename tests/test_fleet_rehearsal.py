"""The fleet can be rehearsed from its own help (issue 32.4): the fault
names are in ``--help``, the example fault plan that ships
(``site/fleet-faults.example.json``) runs, and ``--resume`` is rehearsed
with ``--simulate``: its simulated Slurm keeps its state between runs, so a
repaired node comes back after its passing checks while a bad node stays
drained, and nothing of the real state or database is touched."""

import json
import os
import re
import subprocess

from ccl_health.fleet.faults import NODE_FAULTS, FaultPlan
from conftest import REPO

FLEET = os.path.join(REPO, 'scripts', 'fleet')
PLAN = os.path.join(REPO, 'site', 'fleet-faults.example.json')


def fleet(cwd, *args):
    env = dict(os.environ)
    env.pop('CCL_HEALTH_OUTPUT', None)
    env.pop('CCL_HEALTH_DB', None)
    return subprocess.run([FLEET, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_fault_names_and_the_example_plan_are_in_the_help(tmp_path):
    p = fleet(tmp_path, '--help')
    assert p.returncode == 0, p.stderr
    text = ' '.join(p.stdout.split())
    assert '|'.join(NODE_FAULTS) in text
    assert 'site/fleet-faults.example.json' in text
    # the example is a plan the loader takes, with every kind of fault
    plan = FaultPlan.load(PLAN)
    assert plan.bad_nodes and plan.bad_links and plan.stragglers
    assert set(plan.bad_nodes.values()) <= set(NODE_FAULTS)
    assert plan.drained and not set(plan.drained) & set(plan.bad_nodes)


def test_the_example_plan_is_found_and_never_reads_passed_then_failed(
        tmp_path):
    p = fleet(tmp_path, '--simulate', PLAN, '--nodelist', 'n[1-16]',
              '--groups', '4')
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    plan = FaultPlan.load(PLAN)
    for node in plan.bad_nodes:
        assert re.search(rf'^  BAD {node}: ', p.stdout, re.M), out
    (a, b), = [sorted(link) for link in plan.bad_links]
    assert f'SUSPECT LINK {a} - {b}' in p.stdout
    for node in plan.stragglers:
        assert f'STRAGGLER {node}' in p.stdout
    # a line never says a step passed and then that it failed
    assert not [ln for ln in out.splitlines()
                if re.search(r'\bpassed\b.*\bfailed\b', ln)
                and 'judged slow' in ln], out
    assert 'slower than the baseline of the run: judged slow' in p.stderr
    assert p.stdout.rstrip().splitlines()[-1].startswith('  next: ')


def test_resume_is_rehearsed_and_goes_on_where_it_stopped(tmp_path):
    plan = FaultPlan.load(PLAN)
    repaired, = plan.drained
    runs = [fleet(tmp_path, '--resume', '--simulate', PLAN, '--nodelist',
                  'n[1-16]') for _ in range(2)]
    first, second = (r.stdout for r in runs)
    assert all(r.returncode == 1 for r in runs), runs[0].stderr
    assert first.startswith('fleet --resume (SIMULATED: no Slurm asked or '
                            'touched): 3 node(s) drained by ccl-health')
    assert re.search(rf'^  KEPT {repaired}: .*\(passed 1 of 2 checks\)$',
                     first, re.M), first
    assert re.search(rf'^  RESUMED {repaired}$', second, re.M), second
    for node in plan.bad_nodes:
        assert re.search(rf'^  KEPT {node}: .*\(failed again, 2 of 2 '
                         rf'checks\)$', second, re.M), second
    assert 'the same command again runs the next check' in second
    out = tmp_path / 'ccl-health-output'
    # the rehearsal's state is its own: the real one is never written,
    # and without --db nothing is recorded
    assert not (out / 'fleet' / 'nodes.json').exists()
    assert not (out / 'ccl-health.db').exists()
    slurm = json.loads((out / 'simulated' / 'slurm.json').read_text())
    assert slurm[repaired] == ['idle', 'none']
    assert all(slurm[n][0] == 'drain' for n in plan.bad_nodes)
    page = next((out / 'simulated' / 'fleet').glob('resume-*/fleet.html'))
    assert '<h1>SIMULATED Back to service' in page.read_text()


def test_resume_rehearsal_needs_its_nodes(tmp_path):
    p = fleet(tmp_path, '--resume', '--simulate', PLAN)
    assert p.returncode == 2
    assert p.stderr.strip() == ('fleet: error: --simulate needs --nodelist '
                                '(the nodes)')
