"""The fleet test's stand-in probe (tests/replay/fleet/probe), without Slurm:
node mode writes what the hook writes and exits as the hook does; step mode
prints an nccl-tests 2.x table that the suite's own parser reads and its
own judge passes or fails as the fault plan says."""

import json
import os
import subprocess
import sys

import pytest

from ccl_health import hookcli as hook_cli
from ccl_health.hook.probe import Probe
from ccl_health.evidence import nccltests
from ccl_health.fleet.faults import SLOW_FACTOR, FaultPlan
from ccl_health.judge.casejudge import judge_output
from ccl_health.judge.verdicts import Verdict

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'replay',
                     'fleet', 'probe')
GiB = 1 << 30
PLAN = {'busbw': 40.0, 'bad_nodes': {'n03': 'crash', 'n04': 'slow',
                                     'n05': 'wrong', 'n06': 'hang'},
        'bad_links': [['n09', 'n10']], 'stragglers': {'n07': 0.85}}


@pytest.fixture
def plan_env(tmp_path):
    path = tmp_path / 'plan.json'
    FaultPlan.from_dict(PLAN).save(str(path))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('SLURM', 'CCL_HEALTH_FAULT'))}
    env['CCL_HEALTH_FAULT_PLAN'] = str(path)
    return env


def run(env, *args, timeout=30, **extra):
    return subprocess.run([sys.executable, PROBE] + list(args),
                          env=dict(env, **extra), capture_output=True,
                          text=True, timeout=timeout)


def hook_keys(tmp_path):
    """The keys of the real hook's --json document."""
    path = str(tmp_path / 'hook.json')
    hook_cli.main(['--json', path, '--system', 'no-such-system',
                   '--no-record'])
    with open(path) as fp:
        return set(json.load(fp))


# -- node mode -------------------------------------------------------------

def node(env, tmp_path, name):
    path = str(tmp_path / f'{name}.json')
    p = run(env, 'node', '--json', path, SLURMD_NODENAME=name)
    with open(path) as fp:
        return p, json.load(fp)


def test_node_mode_healthy_writes_the_hooks_json(plan_env, tmp_path):
    p, doc = node(plan_env, tmp_path, 'n01')
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith('HEALTHY: ')
    assert set(doc) == hook_keys(tmp_path)
    assert doc['code'] == 0 and doc['verdict'] == 'pass'
    assert doc['line'] == lines[0]
    probe = doc['probes'][0]
    assert set(probe) == set(Probe.__dataclass_fields__)
    # the plan's busbw within the probe's +-0.5 % jitter, and above its ref
    assert 40.0 * 0.995 <= probe['busbw'] <= 40.0 * 1.005
    assert probe['busbw'] >= probe['expected'] and probe['size'] == GiB
    # the same node gives the same value every time
    assert node(plan_env, tmp_path, 'n01')[1]['probes'][0]['busbw'] == \
        probe['busbw']


def test_node_mode_straggler_passes_its_reference_but_is_lower(
        plan_env, tmp_path):
    p, doc = node(plan_env, tmp_path, 'n07')
    assert p.returncode == 0 and p.stdout.startswith('HEALTHY: ')
    busbw = doc['probes'][0]['busbw']
    assert 34.0 * 0.995 <= busbw <= 34.0 * 1.005
    assert busbw >= doc['probes'][0]['expected']


@pytest.mark.parametrize('name,verdict', [('n03', 'crash'),
                                          ('n04', 'below-reference'),
                                          ('n05', 'wrong-results')])
def test_node_mode_bad_node_is_unhealthy_exit_1(plan_env, tmp_path, name,
                                                verdict):
    p, doc = node(plan_env, tmp_path, name)
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.startswith('UNHEALTHY: ') and \
        len(p.stdout.splitlines()) == 1
    assert doc['code'] == 1 and doc['verdict'] == verdict
    assert Verdict(doc['verdict']).failed
    assert f'node {name}' in doc['line'] and doc['line'] == p.stdout.strip()


def test_node_mode_unchecked_node_is_could_not_check_exit_2(plan_env,
                                                           tmp_path):
    env = dict(plan_env, CCL_HEALTH_FAULT_UNCHECKED='n02,n03')
    for name in ('n02', 'n03'):    # n03 is also bad: not judged at all
        p, doc = node(env, tmp_path, name)
        assert p.returncode == 2 and doc['code'] == 2
        assert doc['verdict'] == 'could-not-check' and doc['probes'] == []
        assert p.stdout.startswith('COULD-NOT-CHECK: ')
    p, doc = node(env, tmp_path, 'n01')
    assert p.returncode == 0 and doc['code'] == 0


def test_hang_node_and_hang_step_never_exit(plan_env, tmp_path):
    for args, extra in ((['node', '--json', str(tmp_path / 'h.json')],
                         {'SLURMD_NODENAME': 'n06'}),
                        (['step', '-b', '1G'],
                         {'SLURM_STEP_NODELIST': 'n01,n06',
                          'SLURM_PROCID': '1'})):
        with pytest.raises(subprocess.TimeoutExpired):
            run(plan_env, *args, timeout=2, **extra)
    assert not (tmp_path / 'h.json').exists()


def test_without_slurm_names_it_says_so(plan_env, tmp_path):
    p = run(plan_env, 'node', '--json', str(tmp_path / 'x.json'))
    assert p.returncode not in (0, 1) and 'SLURMD_NODENAME' in p.stderr
    p = run(plan_env, 'step')
    assert p.returncode not in (0, 1) and 'SLURM_STEP_NODELIST' in p.stderr


# -- step mode -------------------------------------------------------------

def step(env, nodes, rank=0, *opts):
    return run(env, 'step', *(opts or ('-b', '1G', '-e', '1G', '-g', '1',
                                       '-T', '15')),
               SLURM_STEP_NODELIST=','.join(nodes), SLURM_PROCID=str(rank))


def judged(p, size=GiB):
    res = nccltests.parse_text(p.stdout)
    return res, judge_output(res, p.returncode, [size], 'the step')


def busbw_at(res, size=GiB):
    row = [r for r in res.rows if r.size == size][0]
    return row.out_of_place.busbw


def test_step_healthy_pair_and_group_pass_the_suites_judge(plan_env):
    for nodes in (['n01', 'n02'], ['n01', 'n02', 'n08', 'n11']):
        p = step(plan_env, nodes)
        res, verdict = judged(p)
        assert verdict is None, (verdict, p.stdout)
        assert 40.0 * 0.995 <= busbw_at(res) <= 40.0 * 1.005
        assert res.complete and len(res.rows) == 1
        # the rank lines name every node of the step
        assert all(f' on {n:>10s} device' in p.stdout for n in nodes)


def test_step_other_ranks_print_nothing(plan_env):
    p = step(plan_env, ['n01', 'n02'], rank=1)
    assert p.returncode == 0 and p.stdout == ''
    p = step(plan_env, ['n01', 'n03'], rank=1)
    assert p.returncode == 1 and p.stdout == ''


def test_step_size_follows_minbytes(plan_env):
    p = step(plan_env, ['n01', 'n02'], 0, '-b', '256M', '-e', '256M')
    res, verdict = judged(p, 256 << 20)
    assert verdict is None and [r.size for r in res.rows] == [256 << 20]


def test_step_faults_as_the_plan_says(plan_env):
    # a crashed node: nccl-tests' error line, exit 1
    res, verdict = judged(step(plan_env, ['n02', 'n03']))
    assert verdict[0] is Verdict.CRASH and 'n03: crash' in verdict[1]
    # wrong results: #wrong > 0
    res, verdict = judged(step(plan_env, ['n05', 'n08']))
    assert verdict[0] is Verdict.WRONG_RESULTS
    # a slow node and a bad link: a clean table at 0.3 x the busbw
    for nodes in (['n04', 'n08'], ['n09', 'n10'], ['n01', 'n09', 'n10']):
        p = step(plan_env, nodes)
        res, verdict = judged(p)
        assert verdict is None, verdict
        assert busbw_at(res) == pytest.approx(40.0 * SLOW_FACTOR, rel=0.006)
    # n09 and n10 with other partners: healthy
    for nodes in (['n09', 'n11'], ['n10', 'n12']):
        res, verdict = judged(step(plan_env, nodes))
        assert verdict is None and busbw_at(res) > 39
    # a straggler's steps run at its factor
    res, verdict = judged(step(plan_env, ['n07', 'n08']))
    assert verdict is None
    assert busbw_at(res) == pytest.approx(34.0, rel=0.006)


def test_no_plan_means_no_faults(plan_env, tmp_path):
    env = dict(plan_env)
    del env['CCL_HEALTH_FAULT_PLAN']
    p, doc = node(env, tmp_path, 'n03')
    assert p.returncode == 0 and doc['code'] == 0
    res, verdict = judged(step(env, ['n03', 'n06']))
    assert verdict is None
