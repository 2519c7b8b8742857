"""Issue 44: a hung fleet step whose NCCL RAS answer (or, without one, its
outputs) names one of its nodes lets the bisection skip what that makes
needless (ccl_health/fleet/rounds.py, ccl_health/judge/stalled.py).

The fleet's simulation (ccl_health/fleet/simulate.py) with a stand-in RAS:
the report NCCL's RAS writes when a rank stopped (tests/helpers/ras.py,
from NCCL's format strings) on the node whose fault hung the step, read by
the suite's own parser.  The steps run are counted with and without RAS;
a RAS that does not answer, or answers in part or garbled, names no node
and the bisection runs as before (never a false drain)."""

import dataclasses
import os
import time

import pytest

from helpers.ras import report
from ccl_health.evidence import ras
from ccl_health.fleet import fleetreport
from ccl_health.fleet.faults import FaultPlan
from ccl_health.fleet.rounds import Fleet, Raw, Step, exit_code, \
    step_judgement, summary_text
from ccl_health.fleet.simulate import SimScheduler
from ccl_health.sitedata.fleetconfig import FleetConfig

ADDR = 'localhost:28028'


def names(n):
    return [f'n{i}' for i in range(1, n + 1)]


def standin(mode='incomplete', host=None, edit=None):
    """The stand-in RAS of a hung step: RAS's report naming the stopped
    rank on the node whose fault hung it (``host``: on that node instead),
    parsed as the client parses it; ``edit(answer)`` spoils it."""
    asked = []

    def answer(step, outcome):
        asked.append(step.nodes)
        if mode == 'silent':
            return ras.Answer(ADDR, why=f'RAS at {ADDR} did not answer '
                              f'within 20 s')
        got = ras.parse(report(mode, host=host or outcome.node),
                        ras.Answer(ADDR, answered=True))
        return edit(got) if edit else got
    answer.asked = asked
    return answer


def search(culprit='n37', n=64, answer=None):
    """A whole-set group of ``n`` nodes over a hanging ``culprit`` (it
    slipped past the node check and the pairs), searched: the fleet, its
    scheduler."""
    sched = SimScheduler(FaultPlan(bad_nodes={culprit: 'hang'}), ras=answer)
    f = Fleet(names(n), sched, FleetConfig(groups=[], round_limit=60),
              log=lambda _: None)
    nodes = names(n)
    f._groups(nodes, [x for x in nodes if x != culprit])
    return f, sched


def bisect_steps(f):
    return sum(len(r['results']) for r in f.rounds
               if r['name'].startswith('bisect-'))


def test_a_named_node_is_blamed_by_its_source_and_not_re_tested():
    before, sched0 = search()
    after, sched1 = search(answer=standin())
    # as before: halvings 64 -> 32 -> 16 -> 8 -> 4 -> 2 (2 steps each),
    # then the leaf's 2 pairs with healthy partners
    assert bisect_steps(before) == 12 and sched0.steps_run == 13
    assert set(before.bad) == {'n37'} and 'healthy partner' in \
        before.bad['n37']
    # RAS named n37: blamed at once, the other 63 re-tested as one step
    assert set(after.bad) == {'n37'}
    assert sched1.steps_run == 2 and bisect_steps(after) == 1
    [rest] = after.rounds[-1]['results']
    assert rest['nodes'] == [n for n in names(64) if n != 'n37'] and \
        rest['verdict'] == 'pass'
    assert after.bad['n37'].startswith('hung in a step of 64 nodes (hang: ')
    assert after.bad['n37'].endswith(
        f'unresponsive (NCCL RAS at {ADDR})); named by NCCL RAS at {ADDR}: '
        f'the bisection did not re-test it')
    assert not after.links and not after.suspect_groups
    # the plan's records say which step named whom, and what was not run
    [hung] = after.rounds[0]['results']
    assert hung['named'] == {'node': 'n37', 'by': f'NCCL RAS at {ADDR}'}
    [skip] = after.skipped
    assert (skip['node'], skip['by'], skip['nodes']) == \
        ('n37', f'NCCL RAS at {ADDR}', names(64))
    assert 'the other 63 re-tested as one step' in skip['reason']


def test_a_second_fault_in_the_rest_is_still_searched():
    """The rest re-tested fails again (a node that crashes among the
    others, hidden by the hang before): the bisection goes on over it, as
    before."""
    sched = SimScheduler(FaultPlan(bad_nodes={'n3': 'hang',
                                              'n12': 'crash'}),
                         ras=standin())
    f = Fleet(names(16), sched, FleetConfig(groups=[], round_limit=60),
              log=lambda _: None)
    nodes = names(16)
    f._groups(nodes, [x for x in nodes if x not in ('n3', 'n12')])
    assert set(f.bad) == {'n3', 'n12'}
    assert 'named by NCCL RAS' in f.bad['n3']
    assert 'healthy partner' in f.bad['n12']
    assert f.rounds[1]['results'][0]['nodes'] == [
        n for n in names(16) if n != 'n3']
    assert not f.links and not f.suspect_groups


@pytest.mark.parametrize('answer,why', [
    (None, 'RAS not asked'),
    (standin('silent'), 'did not answer'),
    # a partial answer (cut at the client's size cap) naming a healthy
    # node of the step
    (standin(host='n5', edit=lambda a: dataclasses.replace(
        a, truncated=True)), 'rank 2 (n5 GPU 2, pid 1746) unresponsive'),
    # garbled: names a host that is none of the step's nodes
    (standin(host='elsewhere'), 'elsewhere'),
    # two nodes named: RAS does not say which one stopped the step
    (standin(edit=lambda a: dataclasses.replace(a, notes=a.notes + [
        dataclasses.replace(a.notes[0], rank=5, host='n40', pid=99)])),
     'n40'),
    # a rank of a healthy node in error, not stopped
    (standin(host='n5', edit=lambda a: dataclasses.replace(a, notes=[
        dataclasses.replace(a.notes[0], state='error')])), 'in error'),
])
def test_no_node_named_no_skip_the_bisection_as_before(answer, why):
    before, sched0 = search()
    got, sched = search(answer=answer)
    assert why in got.rounds[0]['results'][0]['reason']
    assert 'named' not in got.rounds[0]['results'][0]
    assert not got.skipped
    assert sched.steps_run == sched0.steps_run == 13
    assert [r['name'] for r in got.rounds] == \
        [r['name'] for r in before.rounds]
    # the culprit found by the search; never a node the answer named
    assert set(got.bad) == set(before.bad) == {'n37'}


def test_a_qualified_host_name_is_the_node():
    got, sched = search(answer=standin(host='n37.cluster.example'))
    assert set(got.bad) == {'n37'} and sched.steps_run == 2


def test_the_outputs_name_the_node_where_ras_does_not(tmp_path):
    """No RAS answer: the step's debug log that stopped clearly first
    names its host (``nccl-debug.<host>.<pid>.log``), by the outputs."""
    now = time.time()
    logs = []
    for host, pid, age in (('n1', 11, 2), ('n2', 12, 40), ('n3', 13, 1)):
        p = tmp_path / f'nccl-debug.{host}.{pid}.log'
        p.write_text(f'{host}:{pid}:1 [0] NCCL INFO init\n')
        os.utime(p, (now - age, now - age))
        logs.append(str(p))
    step = Step('group', ('n1', 'n2', 'n3'), 30.0)
    silent = ras.Answer(ADDR, why=f'RAS not listening at {ADDR}')
    v, why, _, named = step_judgement(
        Raw(step, None, killed=True, ras=silent, debug_logs=logs), 1 << 20,
        30.0)
    assert str(v) == 'hang' and named == (
        'n2', 'the outputs (the debug logs (nccl-debug.n2.12.log stopped '
        '38 s before the others))'), (why, named)
    # written together: nothing stands out, nothing named
    os.utime(logs[1], (now - 3, now - 3))
    assert step_judgement(Raw(step, None, killed=True, ras=silent,
                              debug_logs=logs), 1 << 20, 30.0)[3] is None


def test_the_whole_run_says_so_in_its_summary_page_and_records():
    """--simulate's procedure: a node whose hang shows only in a group (a
    fault at scale: the node check and the pairs pass) is named by RAS in
    the first group round; the summary, its text, the page and the
    records say by what, and what was not run."""
    plan = FaultPlan(bad_nodes={'n9': 'hang'})

    def run(answer):
        sched = SimScheduler(plan, hidden={'n9': 'group'}, ras=answer)
        cfg = FleetConfig(groups=[8], round_limit=60)
        s = Fleet(names(16), sched, cfg, log=lambda _: None).run()
        return s, sched, cfg

    before, sched0, _ = run(None)
    s, sched, cfg = run(standin())
    # without RAS the halves of 2 pass (the fault needs 3 nodes): the
    # search ends at a suspect group, nothing drained
    assert not before['bad'] and [g['nodes'] for g in
                                  before['suspect_groups']] == \
        [['n9', 'n10', 'n11', 'n12']]
    assert list(s['bad']) == ['n9'] and not s['suspect_groups']
    assert sched.steps_run < sched0.steps_run
    assert [r['name'] for r in s['rounds']] == [
        'nodes', 'pairs-1', 'pairs-2', 'groups-8', 'bisect-8-1',
        'groups-all']
    assert exit_code(s) == 1
    text = summary_text(s)
    assert f'  BAD n9: ' in text and f'named by NCCL RAS at {ADDR}' in text
    assert '  NOT RUN (bisect-8-1): n9 named by NCCL RAS at ' \
        f'{ADDR} in a hung step of 8 nodes' in text
    page = fleetreport.render(dict(s, run_id='r1'))
    assert '<h2>Steps not run</h2>' in page and \
        'the other 7 re-tested as one step' in page
    [hung] = [c for c in fleetreport.cases(dict(s, run_id='r1'), cfg)
              if c.verdict == 'hang']
    assert hung.case_name.startswith('fleet-group groups-8 ')
    assert hung.reason.endswith(f'; names n9 (by NCCL RAS at {ADDR})')


def test_ras_names_a_node_by_its_address_the_header_by_its_name():
    """On 4x H200 (NCCL 2.28.3, tests/fixtures/device/ras/fleet: the pair
    step with rank 3 stopped) RAS printed the stopped rank's node as an
    address (192.0.2.2); nccl-tests' header names pid 3383's host (vm):
    that is the node named.  Without the header the address is no node
    of the step, and nothing is named."""
    dev = os.path.join(os.path.dirname(__file__), 'fixtures', 'device',
                       'ras', 'fleet')
    with open(os.path.join(dev, 'stdout.txt'), errors='replace') as fp:
        out = fp.read()
    with open(os.path.join(dev, 'ras.txt'), errors='replace') as fp:
        answer = ras.parse(fp.read(), ras.Answer('localhost:35919',
                                                 answered=True))
    assert {n.host for n in answer.notes} == {'192.0.2.2'}
    step = Step('pair', ('n1', 'vm'), 120.0)
    v, why, _, named = step_judgement(
        Raw(step, None, out, killed=True, ras=answer), 1 << 20, 120.0)
    assert str(v) == 'hang' and 'rank 3 (192.0.2.2 GPU 3, pid 3383) ' \
        'unresponsive' in why
    assert named == ('vm', 'NCCL RAS at localhost:35919')
    assert step_judgement(Raw(step, None, '', killed=True, ras=answer),
                          1 << 20, 120.0)[3] is None
    # the header lists pid 3383 on two hosts: the rank RAS names picks
    # one; a rank the header does not list leaves two, and none is named
    twice = out.replace('#  Rank  2 Group  0 Pid   3382 on         vm',
                        '#  Rank  2 Group  0 Pid   3383 on         n1')
    assert step_judgement(Raw(step, None, twice, killed=True, ras=answer),
                          1 << 20, 120.0)[3] == \
        ('vm', 'NCCL RAS at localhost:35919')
    other = dataclasses.replace(answer, notes=[
        dataclasses.replace(n, rank=7) for n in answer.notes])
    assert step_judgement(Raw(step, None, twice, killed=True, ras=other),
                          1 << 20, 120.0)[3] is None
