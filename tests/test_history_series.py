"""Issue 33: a history series is one kind of measurement of one thing.

- a fleet run's steps never join the nightly's sweep series (they have no
  history: the fleet compares the nodes of its own run);
- each node's health probes are that node's own series (the node in the
  key), judged against its own baseline;
- the machine-wide view of the health probes is a distribution over the
  nodes per day, computed in the database (SQLite and PostgreSQL);
- old rows read into the same series (the keys apply on read).

Every row is written by the project's own recorders: the sweep's
(:func:`recorder.sizes_from_sweep` of a real capture), the hook's
(:func:`ccl_health.hook.record.record`) and the fleet's
(:func:`ccl_health.fleet.fleetreport.cases` of a simulated fleet run)."""

import dataclasses
import datetime
import math
import random
import statistics

import pytest

from ccl_health import findings
from ccl_health.db import recorder, store
from ccl_health.db.health_days import GROUP, health_days
from ccl_health.evidence import nccltests
from ccl_health.fleet import fleetreport as fleet_report
from ccl_health.sitedata.fleetconfig import FleetConfig
from ccl_health.fleet.faults import FaultPlan
from ccl_health.fleet.rounds import Fleet
from ccl_health.fleet.simulate import SimScheduler
from ccl_health.hook import record as hook_record
from ccl_health.hook.judging import HookResult
from ccl_health.hook.probe import Probe
from ccl_health.judge import history
from ccl_health.judge import finding
from ccl_health.judge import series
from conftest import CAPTURE, read
from helpers.stores import old_database

T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.timezone.utc)
GiB = 1 << 30


def at(days, seconds=0):
    return (T0 + datetime.timedelta(days=days, seconds=seconds)).isoformat()


# -- the nightly and the fleet ------------------------------------------------
def nightly_case(night, scale=1.0, rng=None):
    """The nightly's 2-node net-plugin sweep of night ``night`` (the real
    capture's sizes, busbw x ``scale`` and a little noise)."""
    res = nccltests.parse(read(CAPTURE, 'net-plugin', 'stdout.txt'),
                          read(CAPTURE, 'net-plugin', 'result.json'))
    sizes = recorder.sizes_from_sweep(res)
    rng = rng or random.Random(night)
    for s in sizes:
        s.busbw *= scale * rng.uniform(0.995, 1.005)
    return store.CaseRecord(
        f'night-{night:02d}', 'AllReducePluginSweep %transport=net-plugin',
        recorder.case_verdict('pass', sizes), time=at(night), system='local',
        partition='gpu', nodes=2, ranks=2, collective='all_reduce',
        transport='net-plugin', proven='net-plugin', nodelist='a1,a2',
        sizes=sizes)


def fleet_cases(when, busbw, nodes=64):
    """The records of a simulated fleet acceptance of ``nodes`` nodes whose
    pair steps measure ``busbw`` at 1 GiB (net-plugin, one rank a node:
    the nightly's key), all at ``when``."""
    names = [f'f{i:03d}' for i in range(nodes)]
    cfg = FleetConfig(groups=[4, 8], round_limit=60)
    s = Fleet(names, SimScheduler(FaultPlan(busbw=busbw)), cfg,
              log=lambda _: None).run()
    s.update(run_id='accept-1', system='local', partition='gpu')
    return [dataclasses.replace(c, time=when)
            for c in fleet_report.cases(s, cfg)]


def _findings(db, run_id):
    found, new, prev = findings.run_findings(db, run_id)
    ids = lambda fs: sorted((f.kind, f.key, f.size, round(f.value, 6))
                            for f in fs)
    return ids(found), ids(new), prev


def test_a_fleet_run_between_two_nights_leaves_the_nightly_findings(tmp_path):
    """Twelve steady nights, a fleet acceptance after maintenance (every
    pair step at the level the next night drops to), then that night: its
    drop at every size, 1 GiB included, is found as without the fleet; the
    fleet's steps are neither judged against the nightly's history nor part
    of it, and the night before is still the run compared with."""
    level = nightly_case(0).sizes[-1].busbw
    assert nightly_case(0).sizes[-1].size == GiB
    fleet = fleet_cases(at(12, -3600), busbw=round(0.7 * level, 2))
    pairs = [c for c in fleet if c.case_name.startswith('fleet-pair')]
    # more pair values at the nightly's key and size than the nightly's
    # window of 30: mixed in, they would be its whole baseline
    assert len(pairs) > 30
    assert {(c.transport, c.nodes, c.ranks, c.sizes[0].size)
            for c in pairs} == {('net-plugin', 2, 2, GiB)}
    results = []
    for with_fleet in (False, True):
        path = str(tmp_path / f'db-{with_fleet}.db')
        with store.open_store(path) as db:
            for night in range(12):
                db.add_case(nightly_case(night))
            if with_fleet:
                for c in fleet:
                    db.add_case(c)
            db.add_case(nightly_case(12, scale=0.7))
            results.append(_findings(db, 'night-12'))
            everything = history.detect(db.records())
    alone, mixed = results
    assert mixed == alone
    # the fleet's own steps: of their own kind, never judged here
    assert not [f for f in everything if f.run_id == 'fleet-accept-1']
    with store.open_store(path, readonly=True) as db:
        kinds = {series.kind_of(c) for c in db.cases()
                 if c['run_id'] == 'fleet-accept-1'}
        keys = {series.series_key(r) for r in db.records()
                if r['run_id'] == 'fleet-accept-1'}
    assert kinds == {'fleet'}
    assert not any(series.has_history(k) for k in keys)
    found, new, prev = alone
    assert prev == 'night-11'
    drops = {size for kind, key, size, _ in found if kind == 'drop'}
    assert GiB in drops and len(drops) >= 20
    assert {key for _, key, _, _ in found} == {
        ('local', 'gpu', 'net-plugin', 'all_reduce', 2, 2, 'default',
         'sweep', None)}


# -- the node's own health probes ---------------------------------------------
NODES = [f'n{i:03d}' for i in range(100)]
DROPPED, SLOW, NEW = 'n042', 'n007', 'n100'
CHECKS = 8


def hook_case(path, node, when, busbw, monkeypatch):
    """One check of the health hook on ``node`` at ``when``, recorded by
    the hook's own recorder (its run id and time come from the clock)."""
    probe = Probe(gpus=tuple(range(8)), size=GiB, busbw=busbw, ref=300.0,
                  proven='intra', ok=True, verdict='pass',
                  versions={'nccl_version': '2.28.3'})
    res = HookResult(0, f'HEALTHY: {busbw:.1f}', [probe], 1.0,
                     verdict='pass', system='big', partition='gpu')
    monkeypatch.setattr(store, 'now', lambda: when)
    args = type('Args', (), {'db': path, 'hostname': node})()
    hook_record.record(args, res, environ={'NCCL_DEBUG': 'WARN'})


@pytest.fixture(scope='module')
def machine(tmp_path_factory):
    """100 nodes checked once a day for 8 days, each at its own level
    (spread +-10 % over the nodes, 0.3 % noise); n007 steadily a third below
    the others; n042 10 % below its own level at its last check; n100 new
    on day 4 at 70 % of the others' level, 14 % lower at its sixth
    check."""
    path = str(tmp_path_factory.mktemp('machine') / 'health.db')
    rng = random.Random(33)
    level = {n: 300.0 * rng.uniform(0.9, 1.1) for n in NODES}
    level[SLOW] = 200.0
    level[NEW] = 210.0
    values = {}
    with pytest.MonkeyPatch.context() as mp:
        for day in range(CHECKS):
            for i, node in enumerate(NODES):
                v = level[node] * rng.uniform(0.997, 1.003)
                if node == DROPPED and day == CHECKS - 1:
                    v *= 0.9
                values.setdefault(node, []).append(v)
                hook_case(path, node, at(day, 60 * i), v, mp)
        for j in range(6):
            v = level[NEW] * rng.uniform(0.997, 1.003) * (
                0.86 if j == 5 else 1.0)
            values.setdefault(NEW, []).append(v)
            hook_case(path, NEW, at(4 + j, 7000), v, mp)
    with store.open_store(path, readonly=True) as db:
        records = db.records()
    return path, records, history.detect([dict(r) for r in records]), values


def test_a_node_drop_is_found_against_its_own_baseline(machine):
    path, records, found, values = machine
    assert len({series.series_key(r) for r in records}) == len(NODES) + 1
    drops = [f for f in found if f.kind == 'drop']
    mine = [f for f in drops if f.key[8] == DROPPED]
    assert len(mine) == 1
    [f] = mine
    assert f.key == ('big', 'gpu', 'intra', 'all_reduce', 1, 8, 'default',
                     'health probe', DROPPED)
    own = values[DROPPED][:-1]
    assert f.baseline.n == CHECKS - 1
    assert f.baseline.median == pytest.approx(statistics.median(own))
    assert f.value == pytest.approx(values[DROPPED][-1])
    assert f.line().startswith(
        f'DROP big/gpu/intra all_reduce 1n/8r [health probe] on {DROPPED} '
        f'1GiB: ')
    # no other node is named: not the steady slow one, not the other 98
    # (the new node's own drop is the next test's)
    assert sorted((f.kind, f.key[8]) for f in found) == [
        ('drop', DROPPED), ('drop', NEW)]
    # the old key (every node's probes one series) missed this drop inside
    # the spread of the machine, and called the steady slow node a drop
    blend = sorted(records, key=lambda r: (r['time'], r['run_id']))
    last = max((r for r in blend if r['nodelist'] == DROPPED),
               key=lambda r: r['time'])
    assert finding.judge(blend[:blend.index(last)], last) is None
    slow = max((r for r in blend if r['nodelist'] == SLOW),
               key=lambda r: r['time'])
    assert finding.judge(blend[:blend.index(slow)], slow).kind == 'drop'


def test_a_new_node_has_no_baseline_until_its_own_runs_make_one(machine):
    path, records, found, values = machine
    own = sorted((r for r in records if r['nodelist'] == NEW),
                 key=lambda r: r['time'])
    assert len(own) == 6
    mine = [f for f in found if f.key[8] == NEW]
    # its first five checks: below every other node, but nothing to judge
    # them against (the other nodes' probes are not its history)
    for i in range(5):
        assert finding.judge(own[:i], own[i]) is None
    assert [(f.kind, f.run_id) for f in mine] == [('drop', own[5]['run_id'])]
    assert mine[0].baseline.n == 5
    assert mine[0].baseline.median == pytest.approx(
        statistics.median(values[NEW][:5]))


def test_old_rows_read_into_the_same_series(machine, tmp_path):
    """The same rows as a schema-1 database holds them (no detail, no
    acceptances; what kind and node come from was recorded from the
    start: the case name, source and node list), read as they are: the
    same series, the same findings, the same view over the nodes."""
    src, records, found, _ = machine
    night = str(tmp_path / 'night.db')
    with store.open_store(night) as db:
        for n in range(6):
            db.add_case(nightly_case(n))
        for c in fleet_cases(at(6), busbw=1.0, nodes=8):
            db.add_case(c)
    old = str(tmp_path / 'old.db')
    conn = old_database(old, 1)
    cols = ', '.join(c for c in store.CASE_COLUMNS if c != 'detail_json')
    for i, path in enumerate((src, night)):
        conn.execute(f"ATTACH DATABASE '{path}' AS new")
        base = conn.execute('SELECT coalesce(max(id), 0) FROM cases') \
            .fetchone()[0]
        conn.execute(f'INSERT INTO cases (id, {cols}) SELECT id + {base}, '
                     f'{cols} FROM new.cases')
        conn.execute(f'INSERT INTO measurements SELECT case_id + {base}, '
                     f'{", ".join(store.SIZE_COLUMNS)} FROM '
                     f'new.measurements')
        conn.commit()
        conn.execute('DETACH DATABASE new')
    conn.close()
    with store.open_store(old, readonly=True) as db:
        assert db.schema_version() == 1
        old_records = db.records()
        old_days = health_days(db)
        old_cases = db.cases()
    with store.open_store(src, readonly=True) as db:
        new_days = health_days(db)
    with store.open_store(night, readonly=True) as db:
        night_records = db.records()
    key = series.series_key
    assert {key(r) for r in old_records} == \
        {key(r) for r in records} | {key(r) for r in night_records}
    assert {series.kind_of(c) for c in old_cases} == {
        'health probe', 'sweep', 'fleet'}
    ids = lambda fs: sorted((f.kind, f.run_id, f.key, f.size) for f in fs)
    assert ids(history.detect(old_records)) == ids(found)
    assert old_days == new_days


# -- the view over the nodes per day, in the database -------------------------
def expected_days(records):
    """The distribution per group and day, computed here from the rows:
    each node's median of the day, then over the nodes."""
    per = {}
    for r in records:
        g = tuple(r[k] for k in GROUP) + (r['time'][:10],)
        per.setdefault(g, {}).setdefault(r['nodelist'], []).append(
            r['busbw'])
    out = {}
    for g, nodes in per.items():
        vals = sorted(statistics.median(v) for v in nodes.values())
        out[g] = {'nodes': len(vals), 'median': statistics.median(vals),
                  'p10': vals[math.ceil(len(vals) / 10) - 1],
                  'min': vals[0]}
    return out


def _fill_small(url, monkeypatch):
    """12 nodes over 3 days, two checks a day each (one node checked
    three times on day 1, one failing check without a value)."""
    rng = random.Random(5)
    for day in range(3):
        for i in range(12):
            node = f'm{i:02d}'
            for k in range(3 if (i == 3 and day == 1) else 2):
                hook_case(url, node, at(day, 3600 * k + i),
                          round(250 + 60 * rng.random(), 2), monkeypatch)
    res = HookResult(1, 'UNHEALTHY: crash', [], 1.0, verdict='crash',
                     system='big', partition='gpu')
    monkeypatch.setattr(store, 'now', lambda: at(2, 9999))
    hook_record.record(type('Args', (), {'db': url, 'hostname': 'm05'})(),
                       res, environ={})


def _check_days(url):
    with store.open_store(url, readonly=True) as db:
        rows = health_days(db)
        records = [r for r in db.records() if r['busbw'] is not None]
        assert [r['day'] for r in health_days(db, since=at(1)[:10])] == \
            [at(1)[:10], at(2)[:10]]
    want = expected_days(records)
    assert len(rows) == len(want) == 3
    for r in rows:
        w = want[tuple(r[k] for k in GROUP) + (r['day'],)]
        assert int(r['nodes']) == w['nodes'] == 12
        for k in ('median', 'p10', 'min'):
            assert float(r[k]) == pytest.approx(w[k]), k
    checks = {r['day']: (r['checks'], r['not_good']) for r in rows}
    assert checks == {at(0)[:10]: (24, 0), at(1)[:10]: (25, 0),
                      at(2)[:10]: (25, 1)}
    return rows


def test_health_days_in_sqlite(tmp_path, monkeypatch):
    url = str(tmp_path / 'small.db')
    _fill_small(url, monkeypatch)
    _check_days(url)


def test_health_days_in_postgresql(pg_server, tmp_path, monkeypatch):
    _fill_small(pg_server, monkeypatch)
    lite = str(tmp_path / 'small.db')
    _fill_small(lite, monkeypatch)
    rows = _check_days(pg_server)
    with store.open_store(lite, readonly=True) as db:
        lite_rows = health_days(db)
    # the same answer as SQLite (PostgreSQL's REAL is single precision)
    assert [(r['day'], int(r['nodes']), int(r['checks']),
             int(r['not_good'])) for r in rows] == \
        [(r['day'], r['nodes'], r['checks'], r['not_good'])
         for r in lite_rows]
    for p, q in zip(rows, lite_rows):
        for k in ('median', 'p10', 'min'):
            assert float(p[k]) == pytest.approx(q[k], rel=1e-6)
