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


def test_a_node_trend_reads_its_own_series_not_the_window(tmp_path):
    """A node's trend (issue 45): its probes read by the series index
    (``cases_by_series``), never every node's probes of the window through
    the time index (9 of the page's 17 s at a month of Frontier: 12 nodes
    x 30 days of 9,408 nodes); the same rows as every probe of the node
    picked from all the cases."""
    import os
    import sys
    from conftest import REPO
    from ccl_health.db import keyhistory
    from ccl_health.judge.series import kind_of
    from ccl_health.report import health
    sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
    import db_gen
    end = T0 + datetime.timedelta(days=3)
    db = str(tmp_path / 'h.db')
    with store.open_store(db) as s:
        db_gen.write_checks(s, 'perlmutter', 6, 3, 4, end, fail=0.3)
        s.add_case(_probe('nid00002', 30, 'pass', 330.0))   # another series
    since = T0 + datetime.timedelta(days=1)
    with store.open_store(db, readonly=True) as s:
        sizes = {}
        for m in s.query('SELECT case_id, size, busbw FROM measurements'):
            sizes.setdefault(m['case_id'], []).append(m)
        for node in ('nid00002', 'nid00005'):
            want = []
            for c in s.cases():
                if c["nodelist"] != node or kind_of(c) != "health probe" \
                        or c["time"] < keyhistory.sql_time(since):
                    continue
                m = max(sizes.get(c['id'], []), key=lambda m: m['size'],
                        default={'size': 0, 'busbw': None})
                want.append((c['time'], c['transport'] or '-',
                             m['size'], m['busbw'], c['verdict']))
            plans = []
            s.conn.set_trace_callback(plans.append)
            try:
                got = health.node_trend_rows(s, node, since)
            finally:
                s.conn.set_trace_callback(None)
            assert got == sorted(want) and len(got) > 8
            assert any(r[1] == 'intra' for r in got)
            reads = [sql for sql in plans if 'FROM cases' in sql]
            assert reads
            for sql in reads:
                plan = ' '.join(r[3] for r in s.conn.execute(
                    'EXPLAIN QUERY PLAN ' + sql.replace('?', 'NULL')))
                assert 'cases_by_series' in plan and 'cases_time' not in \
                    plan, plan
