"""A node to look at has a trend plot of its own health checks (issue 40):
its probes over time, the bad one marked; drawn from the node's probes
alone."""

import datetime

from ccl_health import report
from ccl_health.db import store

T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.timezone.utc)


def _probe(node, hour, verdict, bw):
    return store.CaseRecord(
        f'hook-{node}-{hour}', 'node-health', verdict,
        time=(T0 + datetime.timedelta(hours=hour)).isoformat(),
        system='local', partition='gpu', nodes=1, ranks=8,
        collective='all_reduce', transport='intra', source='health',
        nodelist=node, reason='' if verdict == 'pass' else
        'below-reference: 1GiB 120.00 vs 330.00 GB/s',
        sizes=[store.SizeRecord(1 << 30, bw, verdict=verdict)])


def test_a_node_to_look_at_has_its_own_trend(tmp_path):
    db = str(tmp_path / 'h.db')
    with store.open_store(db) as s:
        for h in range(12):
            s.add_case(_probe('n7', h, 'pass' if h != 9 else
                              'below-reference', 331.0 if h != 9 else 120.0))
            s.add_case(_probe('n8', h, 'pass', 332.0))
    out = tmp_path / 'page'
    with store.open_store(db, readonly=True) as s:
        page, _ = report.build(s, str(out), inline=False)
    text = open(page).read()
    assert 'id="node-n7"' in text and 'node_n7.png' in text
    assert 'n7: its health probes over time' in text
    assert (out / 'node_n7.png').read_bytes()[:4] == b'\x89PNG'
    assert 'node_n8.png' not in text        # nothing to look at on n8
    from ccl_health.report import health
    with store.open_store(db, readonly=True) as s:
        rows = health.node_trend_rows(s, 'n7', T0)
    assert len(rows) == 12 and [r[4] for r in rows].count('pass') == 11
    assert rows[9][3] == 120.0
