"""The orchestration (ccl_health/fleet/rounds.py) on the simulated scheduler:
the injected culprits are named, nobody else, nothing healthy drained, and
every hang is bounded by the round limit (a small scenario set: fast)."""

import math

import pytest

from ccl_health.sitedata.fleetconfig import FleetConfig
from ccl_health.fleet.faults import FaultPlan
from ccl_health.fleet.rounds import Fleet, Raw, exit_code, judge_node, \
    judge_step, Step
from ccl_health.fleet.simulate import SimScheduler, startup_seconds
from ccl_health.judge.verdicts import Verdict


def names(n):
    return [f'n{i}' for i in range(1, n + 1)]


def accept(n, plan, hidden=None, groups=(4, 8), **kw):
    sched = SimScheduler(plan, hidden=hidden or {})
    cfg = FleetConfig(groups=list(groups), round_limit=60, **kw)
    s = Fleet(names(n), sched, cfg, log=lambda _: None).run()
    return s, sched


def named(s):
    return {'bad': set(s['bad']),
            'links': {tuple(l[:2]) for l in s['suspect_links']},
            'stragglers': set(s['stragglers']),
            'groups': [g['nodes'] for g in s['suspect_groups']],
            'cnc': set(s['could_not_check'])}


def test_fault_free_run_is_all_healthy_exit_0():
    s, _ = accept(16, FaultPlan())
    assert named(s) == {'bad': set(), 'links': set(), 'stragglers': set(),
                        'groups': [], 'cnc': set()}
    assert len(s['healthy']) == 16 and exit_code(s) == 0
    assert [r['name'] for r in s['rounds']] == [
        'nodes', 'pairs-1', 'pairs-2', 'groups-4', 'groups-8', 'groups-all']


SCENARIOS = [
    # the CI test's faults: a bad node, a bad link between two healthy
    # nodes (paired and not paired), a hanging node, a 15 % straggler
    dict(bad_nodes={'n3': 'crash'}),
    dict(bad_nodes={'n3': 'wrong', 'n10': 'slow'}),
    dict(bad_nodes={'n12': 'hang'}),
    dict(bad_links=[['n5', 'n6']]),          # neighbours: pairs-1
    dict(bad_links=[['n5', 'n9']]),          # never paired: groups + search
    dict(stragglers={'n7': 0.85}),
    dict(bad_nodes={'n3': 'crash', 'n12': 'hang'}, bad_links=[['n5', 'n9']],
         stragglers={'n7': 0.85}),
]


@pytest.mark.parametrize('faults', SCENARIOS)
def test_exactly_the_injected_culprits_are_named(faults):
    plan = FaultPlan(**faults)
    s, sched = accept(16, plan)
    got = named(s)
    # what a correct search names: the bad nodes (hanging ones too), the
    # bad links, the stragglers
    assert got['bad'] == set(plan.bad_nodes)
    assert got['links'] == {tuple(sorted(link)) for link in plan.bad_links}
    assert got['stragglers'] == set(plan.stragglers)
    assert got['groups'] == [] and got['cnc'] == set()
    faulty = plan.bad_nodes or plan.bad_links or plan.stragglers
    assert exit_code(s) == (1 if faulty else 0)
    # every hang ended at its bound, never later
    for r in s['rounds']:
        for res in r['results']:
            assert res['seconds'] <= 60 + sched.grace + sched.srun_seconds


def test_network_only_bad_node_is_found_by_the_pairs():
    plan = FaultPlan(bad_nodes={'n6': 'crash'})
    s, _ = accept(16, plan, hidden={'n6': 'network'})
    assert set(s['bad']) == {'n6'}
    assert 'healthy partners' in s['bad']['n6']
    assert s['named_round']['n6'] <= math.ceil(math.log2(16)) + 2


def test_many_bad_nodes_no_false_drain():
    bad = {f'n{i}': 'crash' for i in (2, 3, 4, 9, 17, 18)}
    plan = FaultPlan(bad_nodes=bad)
    s, _ = accept(24, plan, hidden={n: 'network' for n in bad})
    assert set(s['bad']) == set(bad)
    assert not s['could_not_check'] and not s['suspect_links']


def test_odd_count_leftover_gets_a_second_partner():
    s, _ = accept(7, FaultPlan(), groups=())
    assert [r['name'] for r in s['rounds']][:4] == [
        'nodes', 'pairs-1', 'pairs-2', 'retest-1']
    partners = {}
    for r in s['rounds']:
        for res in r['results']:
            if len(res['nodes']) == 2:
                a, b = res['nodes']
                partners.setdefault(a, set()).add(b)
                partners.setdefault(b, set()).add(a)
    assert all(len(p) >= 2 for p in partners.values())
    assert exit_code(s) == 0


def test_judge_node_needs_the_hooks_json_for_a_verdict():
    step = Step('node', ('n1',), 10)
    ok = {'code': 0, 'probes': [{'busbw': 300.0}]}
    assert judge_node(Raw(step, 0, 'HEALTHY: x\n', doc=ok), 10)[0] is \
        Verdict.PASS
    # srun's own exit 1 (no JSON from the hook) is never a bad node
    v, why, _ = judge_node(Raw(step, 1, '', 'srun: error: Unable to create '
                               'step for job 5\n'), 10)
    assert v is Verdict.COULD_NOT_CHECK and 'Unable to create step' in why
    bad = {'code': 1, 'verdict': 'missing-gpu', 'line': 'UNHEALTHY: gpu'}
    assert judge_node(Raw(step, 1, 'UNHEALTHY: gpu\n', doc=bad), 10)[:2] == \
        (Verdict.MISSING_GPU, 'UNHEALTHY: gpu')
    assert judge_node(Raw(step, 2, 'COULD-NOT-CHECK: x\n'), 10)[0] is \
        Verdict.COULD_NOT_CHECK
    # issue 41: the hook's --json could not be written (a full shared
    # folder): its exit 1 and UNHEALTHY line still drain the node...
    v, why, _ = judge_node(Raw(step, 1, 'UNHEALTHY: isolate: missing GPU\n',
                               'note: --json x: No space left on device\n'),
                           10)
    assert v is Verdict.NODE_FAULT and v.failed and why.startswith(
        'UNHEALTHY: isolate: missing GPU')
    # ... but never srun's own failure, nor a healthy line without JSON
    assert judge_node(Raw(step, 1, 'UNHEALTHY: x\n', 'srun: error: Unable '
                          'to create step for job 5\n'), 10)[0] is \
        Verdict.COULD_NOT_CHECK
    assert judge_node(Raw(step, 0, 'HEALTHY: x\n'), 10)[0] is \
        Verdict.COULD_NOT_CHECK
    assert judge_node(Raw(step, None, killed=True), 10)[0] is Verdict.HANG


def test_judge_step_on_tables():
    from ccl_health.fleet.simulate import table
    step = Step('pair', ('a', 'b'), 10)
    size = 1 << 30
    assert judge_step(Raw(step, 0, table(size, 40.0, 2)), size, 10)[::2] == \
        (Verdict.PASS, 40.0)
    assert judge_step(Raw(step, 0, table(size, 40.0, 2, 7)), size, 10)[0] is \
        Verdict.WRONG_RESULTS
    assert judge_step(Raw(step, 0, table(1 << 20, 40.0, 2)), size, 10)[0] is \
        Verdict.INCOMPLETE
    cut = table(size, 40.0, 2).split('# Out of bounds')[0]
    assert judge_step(Raw(step, 1, cut), size, 10)[0] is Verdict.CRASH
    assert judge_step(Raw(step, None, killed=True), size, 10)[0] is \
        Verdict.HANG
    v = judge_step(Raw(step, 1, '', 'srun: error: Unable to create step for '
                       'job 7: Requested nodes are busy\n'), size, 10)
    assert v[0] is Verdict.COULD_NOT_CHECK


def test_startup_model_follows_its_anchor():
    assert startup_seconds(512 * 4) == pytest.approx(41.70092)
    assert startup_seconds(64 * 4) == pytest.approx(9.13785)
    assert 41.7 < startup_seconds(9408 * 8) < 400


@pytest.mark.parametrize('n,culprit', [(64, 'n37'), (100, 'n1'),
                                       (257, 'n200')])
def test_bisection_names_one_culprit_in_log2_rounds(n, culprit):
    """A failing whole-set group (the culprit slipped past node check and
    pairs) is bisected, halves in parallel, down to the culprit in at most
    ceil(log2 N) + 2 rounds after the group round, nobody else named."""
    plan = FaultPlan(bad_nodes={culprit: 'crash'})
    sched = SimScheduler(plan)
    f = Fleet(names(n), sched, FleetConfig(groups=[]), log=lambda _: None)
    nodes = names(n)
    f._groups(nodes, [x for x in nodes if x != culprit])
    assert set(f.bad) == {culprit}
    assert not f.links and not f.suspect_groups
    rounds = len(f.rounds) - 1            # after the group round
    assert f.named_round[culprit] - 1 <= math.ceil(math.log2(n)) + 2
    assert rounds <= math.ceil(math.log2(n)) + 2
    # halves ran side by side: every bisect round holds disjoint steps
    for r in f.rounds[1:]:
        seen = [x for res in r['results'] for x in res['nodes']]
        assert len(seen) == len(set(seen))
