"""The pure logic of a fleet acceptance (ccl_health/fleet/plan.py):
pairings, isolation, bisection sizes, the robust baseline."""

import itertools

import pytest

from ccl_health.fleet import plan
from ccl_health.fleet.plan import PairObs


def names(n):
    return [f'n{i}' for i in range(1, n + 1)]


@pytest.mark.parametrize('n', list(range(3, 40)) + [100, 101, 1792])
def test_two_pairings_give_every_node_distinct_partners(n):
    nodes = names(n)
    first, second = plan.pairings(nodes)
    for p in (first, second):
        flat = [x for pair in p for x in pair]
        assert len(flat) == len(set(flat))          # a node once per round
        assert len(p) == n // 2
    partner = [dict(p + [(b, a) for a, b in p]) for p in (first, second)]
    for node in nodes:
        a, b = partner[0].get(node), partner[1].get(node)
        assert a is None or b is None or a != b
    if n % 2:
        left = [set(nodes) - set(partner[i]) for i in range(2)]
        assert left[0] != left[1]                  # not the same leftover


def test_natural_order_and_small_counts():
    assert plan.sort_nodes(['n10', 'n2', 'n1']) == ['n1', 'n2', 'n10']
    assert plan.pairings(['a']) == []
    assert plan.pairings(['a', 'b']) == [[('a', 'b')]]
    first, second = plan.pairings(names(4))
    assert first == [('n1', 'n2'), ('n3', 'n4')]
    assert second == [('n1', 'n3'), ('n2', 'n4')]


def obs_for(pairs, bad=(), links=()):
    links = [frozenset(l) for l in links]
    out = []
    for a, b in pairs:
        ok = a not in bad and b not in bad and frozenset((a, b)) not in links
        out.append(PairObs(a, b, ok, '' if ok else 'crash'))
    return out


def run_isolation(nodes, bad=(), links=()):
    """Pairings, then re-test rounds as the orchestration plans them."""
    obs = []
    for p in plan.pairings(nodes):
        obs += obs_for(p, bad, links)
    for _ in range(5):
        iso = plan.isolate(nodes, obs)
        if not iso.retest:
            break
        pairs = plan.retest_pairs(iso.retest, iso.proven - set(iso.bad) -
                                  iso.retest, obs)
        if not pairs:
            break
        obs += obs_for(pairs, bad, links)
    return plan.isolate(nodes, obs, final=True)


@pytest.mark.parametrize('n', [4, 5, 8, 9, 16, 33])
def test_every_single_bad_node_is_named_and_nobody_else(n):
    nodes = names(n)
    for culprit in nodes:
        iso = run_isolation(nodes, bad={culprit})
        assert set(iso.bad) == {culprit}, culprit
        assert not iso.links and not iso.undecided


def test_two_bad_neighbours_do_not_take_a_healthy_node_with_them():
    # n2 meets n1 in the first pairing and n3 in the second (4 nodes:
    # n1-n2, n3-n4 / n1-n3, n2-n4): a healthy node between two bad ones
    nodes = names(8)
    for bad in itertools.combinations(nodes, 2):
        iso = run_isolation(nodes, bad=set(bad))
        assert set(iso.bad) == set(bad), bad
        assert not iso.links
        assert not set(iso.undecided) - set(bad)


def test_a_bad_link_between_partners_is_a_suspect_link_not_a_drain():
    nodes = names(8)
    iso = run_isolation(nodes, links=[('n3', 'n4')])    # paired in round 1
    assert iso.bad == {}
    assert list(iso.links) == [('n3', 'n4')]
    iso = run_isolation(nodes, links=[('n1', 'n5')])    # round 2: i, i+n/2
    assert iso.bad == {} and list(iso.links) == [('n1', 'n5')]


def test_a_node_failing_once_is_retested_with_a_third_partner():
    nodes = names(8)
    obs = obs_for(plan.pairings(nodes)[0], links=[('n1', 'n2')])
    obs += obs_for(plan.pairings(nodes)[1])
    iso = plan.isolate(nodes, obs)
    assert iso.retest == {'n1', 'n2'}
    assert not iso.links                       # not before the re-test
    pairs = plan.retest_pairs(iso.retest, iso.proven - iso.retest, obs)
    met = {'n1': {'n2', 'n5'}, 'n2': {'n1', 'n6'}}
    assert sorted(a for a, _ in pairs) == ['n1', 'n2']
    for a, b in pairs:
        assert b not in met[a] and b not in ('n1', 'n2')


def test_no_healthy_partner_is_could_not_check_never_bad():
    iso = run_isolation(['a', 'b'], bad={'a'})
    assert iso.bad == {}
    assert set(iso.undecided) == {'a', 'b'}
    iso = run_isolation(names(3), bad={'n1', 'n2', 'n3'})
    assert iso.bad == {} and set(iso.undecided) == set(names(3))


def test_groups_and_halves():
    g = plan.groups(names(37), 16)
    assert [len(x) for x in g] == [16, 21]       # 5 left over joins the last
    assert [len(x) for x in plan.groups(names(40), 16)] == [16, 16, 8]
    assert plan.group_sizes([16, 64, 256], 100) == [16, 64, 100]
    assert plan.group_sizes([16], 10) == [10]
    assert plan.group_sizes([16], 2) == []
    h1, h2 = plan.halves(names(5))
    assert h1 == ['n1', 'n2', 'n3'] and h2 == ['n4', 'n5']
    assert plan.max_bisect_rounds(9408) <= 14


def test_baseline_flags_a_15_percent_straggler_not_wiggles():
    bw = {f'n{i}': 40.0 * (1 + 0.001 * (i % 3)) for i in range(100)}
    assert plan.stragglers(bw) == {}                 # 0.1 % wiggles
    bw['n5'] = 40.0 * 0.85
    s = plan.stragglers(bw)
    assert list(s) == ['n5'] and '15 %' in s['n5']
    noisy = {f'n{i}': 40.0 + (i % 7) for i in range(100)}   # 15 % spread
    noisy['slow'] = 30.0
    assert list(plan.stragglers(noisy)) == ['slow']
    assert plan.baseline([1.0, 2.0]) is None            # no robust baseline


def test_slow_pair_is_forgiven_only_as_far_as_a_straggler_explains():
    bw = {(f'a{i}', f'b{i}'): 40.0 for i in range(10)}
    bw[('s', 'x')] = 34.0            # s is an 85 % straggler
    bw[('y', 'z')] = 12.0            # a bad link
    slow = plan.slow_pairs(bw, {'s': 0.85})
    assert list(slow) == [('y', 'z')]
    assert list(plan.slow_pairs(bw, {})) == [('s', 'x'), ('y', 'z')]
