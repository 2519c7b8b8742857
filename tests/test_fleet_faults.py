import json

import pytest

from ccl_health.fleet.faults import FaultPlan, SLOW_FACTOR


def plan():
    return FaultPlan(busbw=40.0, bad_nodes={'n3': 'crash', 'n4': 'hang'},
                     bad_links=[['n5', 'n9']], stragglers={'n7': 0.85})


def test_single_node_steps():
    p = plan()
    assert p.outcome(['n1']).kind == 'ok'
    assert p.outcome(['n1']).busbw == 40.0
    assert p.outcome(['n3']).kind == 'crash'
    assert p.outcome(['n4']).kind == 'hang'
    # a bad link is invisible to a node alone
    assert p.outcome(['n5']).kind == 'ok'
    assert p.outcome(['n7']).busbw == pytest.approx(34.0)


def test_steps_over_several_nodes():
    p = plan()
    assert p.outcome(['n5', 'n9']).kind == 'slow'
    assert p.outcome(['n5', 'n9']).busbw == pytest.approx(40 * SLOW_FACTOR)
    assert p.outcome(['n5', 'n6']).kind == 'ok'
    # the worst fault wins: a hang hides a crash
    assert p.outcome(['n3', 'n4', 'n1']).kind == 'hang'
    assert p.outcome(['n1', 'n3', 'n5', 'n9']).kind == 'crash'
    # a group runs at its slowest member
    assert p.outcome(['n1', 'n7', 'n8']).busbw == pytest.approx(34.0)


def test_round_trip(tmp_path):
    path = tmp_path / 'plan.json'
    plan().save(path)
    again = FaultPlan.load(path)
    assert again.to_dict() == plan().to_dict()
    assert sorted(again.bad_nodes) == ['n3', 'n4']
    assert [sorted(link) for link in again.bad_links] == [['n5', 'n9']]
    assert sorted(again.stragglers) == ['n7']


@pytest.mark.parametrize('data,word', [
    ({'bad_nodes': {'n1': 'melted'}}, 'bad_nodes.n1'),
    ({'bad_links': [['n1']]}, 'bad_links'),
    ({'stragglers': {'n2': 1.5}}, 'stragglers.n2'),
    ({'bad_node': {}}, 'unknown keys'),
])
def test_bad_plans_name_the_key(tmp_path, data, word):
    path = tmp_path / 'plan.json'
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as err:
        FaultPlan.load(path)
    assert word in str(err.value) and str(path) in str(err.value)
