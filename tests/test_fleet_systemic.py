"""A fault shared by the whole machine never drains the machine (issue 20,
class 5), on the simulated scheduler: every node check crashing the same
way, a leaf switch with its uplinks down, a mostly broken fabric; the
drain ceiling; the actions of each finding and the drain reasons; the
transport variables of the caller's environment dropped from the steps."""

import pytest

from ccl_health import CclHealthError
from ccl_health.fleet import systemic
from ccl_health.fleet import slurmsteps as slurm
from ccl_health import fleetcli as cli
from ccl_health.sitedata.fleetconfig import FleetConfig
from ccl_health.fleet.faults import FaultPlan
from ccl_health.fleet.rounds import Fleet, exit_code, summary_text
from ccl_health.fleet.simulate import SimScheduler
from ccl_health.judge import actions
from ccl_health.sitedata import nodeactions
from ccl_health.sitedata import site as site_data

NODES = [f'n{i}' for i in range(1, 17)]
SWITCHES = {f's{k + 1}': NODES[4 * k:4 * k + 4] for k in range(4)}


def accept(plan, force=False, **kw):
    sched = SimScheduler(plan)
    cfg = FleetConfig(groups=[4, 8], round_limit=60, **kw)
    s = Fleet(NODES, sched, cfg, log=lambda _: None).run()
    cli.decide_drains(s, cfg, sched, force)
    return s, sched


def test_every_node_check_crashing_the_same_way_is_systemic():
    s, sched = accept(FaultPlan(all_nodes='crash'))
    assert len(s['bad']) == 16
    assert [f['scope'] for f in s['systemic']] == ['share']
    assert s['systemic'][0]['nodes'] == sorted(NODES)
    assert s['systemic'][0]['reason'].startswith(
        '16 of 16 nodes failed the same way: crash:')
    assert exit_code(s) == 1
    assert sched.drained == [] and s['drained'] == []
    assert s['drain_held'].startswith('systemic: 16 of 16 nodes')
    assert 'SYSTEMIC: 16 of 16' in summary_text(s)
    # --force drains what the operator asked for
    s, sched = accept(FaultPlan(all_nodes='crash'), force=True,
                      max_drain=16)
    assert sorted(sched.drained) == sorted(NODES)
    assert s['forced'].startswith('systemic:')


def test_a_leaf_switch_with_uplinks_down_is_systemic_not_4_bad_nodes():
    plan = FaultPlan(switches=SWITCHES, down_switches=['s2'])
    s, sched = accept(plan, topology=SWITCHES, max_drain=8)
    # the fleet alone names the nodes behind the switch bad ...
    assert sorted(s['bad']) == ['n5', 'n6', 'n7', 'n8']
    # ... the topology says they share one switch: nothing drained
    assert [f['scope'] for f in s['systemic']] == ['switch s2']
    assert s['systemic'][0]['nodes'] == ['n5', 'n6', 'n7', 'n8']
    assert sched.drained == [] and 'switch s2' in s['drain_held']
    # the same from Slurm's topology.conf
    conf = ('# leaf switches\nSwitchName=s1 Nodes=n[1-4]\n'
            'SwitchName=s2 Nodes=n[5-8]  LinkSpeed=100\n'
            'SwitchName=s3 Nodes=n[9-12]\nSwitchName=s4 Nodes=n[13-16]\n'
            'SwitchName=top Switches=s[1-4]\n')
    assert systemic.parse_topology_conf(conf) == {
        's1': ['n[1-4]'], 's2': ['n[5-8]'], 's3': ['n[9-12]'],
        's4': ['n[13-16]']}


def test_topology_conf_file_is_read(tmp_path):
    path = tmp_path / 'topology.conf'
    path.write_text('SwitchName=s2 Nodes=n[5-8]\nswitchname=s9 nodes=x1,x2\n')
    cfg = FleetConfig(topology_conf=str(path), topology={'s1': ['n1', 'n2']})
    assert systemic.switches(cfg) == {'s1': ['n1', 'n2'],
                                      's2': ['n5', 'n6', 'n7', 'n8'],
                                      's9': ['x1', 'x2']}
    with pytest.raises(CclHealthError, match='topology_conf'):
        systemic.switches(FleetConfig(topology_conf=str(tmp_path / 'no')))


def test_switch_without_topology_is_held_by_the_drain_ceiling():
    plan = FaultPlan(switches=SWITCHES, down_switches=['s2'])
    s, sched = accept(plan)          # default ceiling: 10 % of 16 -> 2
    assert s['systemic'] == [] and len(s['bad']) == 4
    assert sched.drained == []
    assert 'above the ceiling of 2' in s['drain_held']


def test_a_mostly_broken_fabric_drains_nothing():
    s, sched = accept(FaultPlan(broken_fabric=0.8), max_drain=16)
    assert s['systemic'] and s['systemic'][0]['scope'] == 'share'
    assert 'network: crash' in s['systemic'][0]['reason']
    assert sched.drained == [] and exit_code(s) == 1


def test_independent_faults_are_not_systemic_and_are_drained():
    plan = FaultPlan(bad_nodes={'n3': 'crash', 'n12': 'hang'},
                     bad_links=[['n5', 'n9']], stragglers={'n7': 0.85})
    s, sched = accept(plan)
    assert s['systemic'] == []
    assert sorted(sched.drained) == ['n12', 'n3']
    assert s['actions'] == {'n12': 'isolate', 'n3': 'isolate',
                            'n5-n9': 'monitor', 'n7': 'monitor'}
    assert s['drain_reasons']['n3'].startswith('ccl-health: isolate: ')
    # two nodes crashing the same way among 16 are not a shared cause
    s, _ = accept(FaultPlan(bad_nodes={'n3': 'crash', 'n12': 'crash'}))
    assert s['systemic'] == []


def test_the_share_is_a_site_setting():
    plan = FaultPlan(bad_nodes={n: 'crash' for n in NODES[:3]})
    s, _ = accept(plan)                      # 3 of 16 <= 0.25
    assert s['systemic'] == []
    s, _ = accept(plan, systemic_share=0.1)   # 3 of 16 > 0.1
    assert s['systemic'][0]['nodes'] == ['n1', 'n2', 'n3']


def test_shape_blanks_node_names_and_numbers():
    a = systemic.shape('crash: GPU 0 of n03 exited 1 after 2.5 s', ['n03'])
    b = systemic.shape('crash: GPU 3 of n11 exited 1 after 7.1 s', ['n11'])
    assert a == b == 'crash: GPU # of <node> exited # after # s'
    assert systemic.shape('wrong-results: n1', ['n1']) != a


def test_max_drain_forms():
    assert FleetConfig(max_drain='10%').drain_ceiling(16) == 2
    assert FleetConfig(max_drain='10%').drain_ceiling(4) == 1
    assert FleetConfig(max_drain=5).drain_ceiling(100) == 5
    for bad in ('ten', '0%', '-3'):
        with pytest.raises(CclHealthError, match='max_drain'):
            FleetConfig.from_dict({'max_drain': bad})
    with pytest.raises(CclHealthError, match='systemic_share'):
        FleetConfig.from_dict({'systemic_share': 0})


# -- actions -------------------------------------------------------------------

@pytest.mark.parametrize('verdict, cause, want', [
    ('missing-gpu', None, 'isolate'),
    ('wrong-results', None, 'isolate'),
    ('node-fault', 'xid', 'isolate'),
    ('node-fault', 'ecc', 'isolate'),
    ('node-fault', 'row-remap', 'isolate'),
    ('node-fault', 'link-down', 'isolate'),
    ('bad-node', None, 'isolate'),
    ('node-fault', 'driver-not-answering', 'reset'),
    ('contended', 'leftover-process', 'reset'),
    ('node-fault', 'gpu-off-bus', 'reset'),
    ('contended', None, 'monitor'),
    ('straggler', None, 'monitor'),
    ('suspect-link', None, 'monitor'),
    ('suspect-group', None, 'monitor'),
    ('drift', None, 'monitor'),
    ('pass', None, None),
    ('could-not-check', None, None),
    ('no-reference', None, None),
])
def test_default_actions(verdict, cause, want):
    assert actions.action_for(verdict, cause) == want


def test_causes_read_from_a_reason():
    assert actions.cause_of('GPU 2 has fallen off the bus (XID 79)') == \
        'gpu-off-bus'
    assert actions.cause_of('a leftover process holding the GPUs: pid 7') \
        == 'leftover-process'
    assert actions.cause_of('uncorrectable ECC errors on GPU 1') == 'ecc'
    assert actions.cause_of('NVLink 3 of GPU 0: link down') == 'link-down'
    assert actions.cause_of('wrong-results: GPU 3 #wrong 1024') is None


def test_site_actions_override_and_are_checked(tmp_path):
    text = ('system: x\ntransports: {}\nactions:\n  contended: reset\n'
            '  wrong-results: monitor\n')
    site = site_data.parse(text, 'x.yaml')
    assert site.actions == {'contended': 'reset', 'wrong-results': 'monitor'}
    assert actions.action_for('contended', site=site) == 'reset'
    assert actions.action_for('wrong-results', site=site) == 'monitor'
    assert actions.action_for('missing-gpu', site=site) == 'isolate'
    with pytest.raises(CclHealthError):
        site_data.parse(text.replace('reset', 'reboot'), 'x.yaml')
    with pytest.raises(CclHealthError, match='actions.bogus'):
        nodeactions.check_site_actions({'bogus': 'isolate'})


def test_every_failing_verdict_has_a_default_action():
    """A site may name any failing verdict in its ``actions:`` block: the
    table of defaults (site data) covers every one the judge gives."""
    from ccl_health.judge.verdicts import FAILING
    assert set(FAILING) <= set(nodeactions.DEFAULTS)
    for name in FAILING:
        assert nodeactions.check_site_actions({name: 'monitor'}) == \
            {name: 'monitor'}


def test_a_monitor_action_never_drains():
    plan = FaultPlan(bad_nodes={'n3': 'wrong'})
    sched = SimScheduler(plan)
    cfg = FleetConfig(groups=[4, 8], round_limit=60)
    s = Fleet(NODES, sched, cfg, log=lambda _: None,
              actions={'wrong-results': 'monitor'}).run()
    cli.decide_drains(s, cfg, sched)
    assert s['bad'] and s['actions']['n3'] == 'monitor'
    assert sched.drained == [] and exit_code(s) == 1


def test_drain_reasons_say_the_action():
    assert actions.drain_reason('isolate', 'wrong-results GPU 3  x') == \
        'ccl-health: isolate: wrong-results GPU 3 x'
    r = actions.drain_reason('reset', 'a leftover process holding the GPUs')
    assert r.startswith('ccl-health: reset (a reboot is expected to clear '
                        'it): a leftover')
    assert len(actions.drain_reason('isolate', 'x' * 500)) == 200


def test_transport_variables_of_the_caller_are_dropped(monkeypatch):
    env = {'PATH': '/bin', 'NCCL_P2P_DISABLE': '1', 'FI_PROVIDER': 'tcp',
           'RCCL_X': '1', 'HSA_Y': '1', 'UCX_TLS': 'tcp', 'HOME': '/root',
           'CCL_HEALTH_FAULT_PLAN': 'p.json'}
    clean, dropped = slurm.clean_environ(env)
    assert clean == {'PATH': '/bin', 'HOME': '/root',
                     'CCL_HEALTH_FAULT_PLAN': 'p.json'}
    assert dropped == ['FI_PROVIDER', 'HSA_Y', 'NCCL_P2P_DISABLE', 'RCCL_X',
                       'UCX_TLS']
    monkeypatch.setenv('NCCL_ALGO', 'Ring')
    sched = slurm.SlurmScheduler('/tmp', 1, None, None,
                                 {'NCCL_IB_DISABLE': '1'})
    assert 'NCCL_ALGO' in sched.env_dropped
    assert 'NCCL_ALGO' not in sched.base_env


def test_page_and_records_show_actions_systemic_and_timeline():
    from ccl_health.fleet import fleetreport as report
    s, _ = accept(FaultPlan(bad_nodes={'n3': 'wrong'},
                            stragglers={'n7': 0.85}))
    s['timeline'] = {'n3': [{'time': '2026-01-01T00:00:00Z',
                             'event': 'drain',
                             'reason': 'ccl-health: isolate: wrong'}]}
    page = report.render(s)
    assert '<th>action</th>' in page
    assert '<td>n3</td><td>isolate</td>' in page
    assert '<td>n7</td><td>monitor</td>' in page
    assert 'Drain / resume timeline' in page and 'Systemic' not in page
    cfg = FleetConfig(groups=[4, 8], round_limit=60)
    recs = {c.case_name: c for c in report.cases(s, cfg)}
    assert recs['fleet-node nodes n3'].reason.startswith('isolate: ')
    assert not recs['fleet-node nodes n4'].reason.startswith('isolate')
    s, _ = accept(FaultPlan(all_nodes='crash'))
    page = report.render(s)
    assert 'Systemic' in page and 'systemic: 16 of 16 nodes' in page
    assert 'not drained' in page
