"""History detection, attribution, queries and the report, on a store
filled with the real 2x H200 sweeps (healthy: cap/intra; a real degradation:
cap/intra-1channel, NCCL_MAX_NCHANNELS=1), with run-to-run noise added."""

import datetime
import os
import random

import pytest

from ccl_health.judge import attribution, history
from ccl_health.judge import baselines
from ccl_health.judge import finding
from ccl_health.evidence import nccltests
from ccl_health.db import answers
from ccl_health.db import recorder
from ccl_health.judge import reference
from ccl_health.db import store
from ccl_health.db import schema
from conftest import CAPTURE, REPO, read

T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.timezone.utc)


def sweep(case):
    return nccltests.parse(read(CAPTURE, case, 'stdout.txt'),
                           read(CAPTURE, case, 'result.json'))


@pytest.fixture
def db(tmp_path):
    """21 nights of intra sweeps; night 15 ran with one NVLink channel and a
    new NCCL; night 18 the plugin hung."""
    rng = random.Random(7)
    ref = reference.load_for_system(os.path.join(REPO, 'reference'), 'local')
    entry = ref.lookup('gpu', 'intra', 'all_reduce', 1, 2)
    good, bad = sweep('intra'), sweep('intra-1channel')
    s = store.open_store(str(tmp_path / 'h.db'))
    for night in range(21):
        sizes = recorder.sizes_from_sweep(bad if night == 15 else good, entry)
        for x in sizes:
            x.busbw *= rng.uniform(0.985, 1.01)
        s.add_case(store.CaseRecord(
            f'night-{night:02d}', 'AllReduceSweep %transport=intra',
            recorder.case_verdict('pass', sizes),
            time=(T0 + datetime.timedelta(days=night)).isoformat(),
            system='local', partition='gpu', nodes=1, ranks=2,
            collective='all_reduce', transport='intra', proven='intra',
            nodelist='vm' if night != 15 else 'vm2',
            versions={'nccl_version': '2.28.3' if night < 15 else '2.28.4'},
            env={'NCCL_MAX_NCHANNELS': '1'} if night == 15 else {},
            sizes=sizes))
    s.add_case(store.CaseRecord(
        'night-18', 'AllReducePluginSweep %transport=net-plugin', 'hang',
        time=(T0 + datetime.timedelta(days=18)).isoformat(), system='local',
        partition='gpu', nodes=1, ranks=2, collective='all_reduce',
        transport='net-plugin', reason='hang: the job exceeded its time '
        'limit'))
    yield s
    s.close()


def test_baseline_is_robust():
    b = baselines.baseline([10, 10.1, 9.9, 10, 50])
    assert b.median == 10 and b.noise == pytest.approx(1.4826 * 0.1)


def test_allowed_drop_is_the_larger_of_tolerance_and_k_noise():
    b = baselines.baseline([100, 101, 99, 100, 104, 96, 100])
    # MAD 1 -> noise 1.4826; 3 x noise = 4.45 % of 100
    assert b.noise_fraction(3) == pytest.approx(3 * 1.4826 / 100)
    assert b.allowed_drop(0.10, 3) == 0.10
    assert b.allowed_drop(0.01, 3) == pytest.approx(0.044478)
    # a reference file holds whole percents, rounded up
    assert b.allowed_drop(0.01, 3, whole_percent=True) == 0.05
    assert b.threshold(0.01, 3) == pytest.approx(100 * (1 - 0.044478))
    flat = baselines.baseline([5.0] * 6)
    assert flat.allowed_drop(0.1, 4) == 0.1 and flat.threshold(0.1, 4) == \
        pytest.approx(4.5)


def _mixed_records(values, tol):
    return [{'system': 's', 'partition': 'p', 'transport': 'intra',
             'collective': 'all_reduce', 'nodes': 1, 'ranks': 2,
             'algo': 'default', 'size': 1 << 20, 'busbw': v,
             'case_verdict': 'pass', 'run_id': f'r{i}',
             'time': f'2026-11-{i + 1:02d}', 'tolerance': tol}
            for i, v in enumerate(values)]


def test_calibrate_and_history_share_one_noise_rule(monkeypatch):
    """calibrate's per-size tolerance and the history's drop threshold come
    from the one function, Baseline.allowed_drop: a value the calibrated
    tolerance allows is not a drop for the history with the same k, one
    below it is."""
    from ccl_health.db import calibrate
    calls = []
    real = baselines.Baseline.allowed_drop

    def spy(self, tolerance, k, whole_percent=False):
        calls.append((k, whole_percent))
        return real(self, tolerance, k, whole_percent)
    monkeypatch.setattr(baselines.Baseline, 'allowed_drop', spy)
    noisy = [60.0, 70.0, 72.0, 68.0, 75.0, 71.0, 66.0]
    sweeps = [calibrate.sweep_from_busbw({1 << 20: v, 1 << 30: 330.0})
              for v in noisy]
    e = calibrate.entry_from_sweeps(sweeps, transport='intra',
                                    collective='all_reduce', nodes=1,
                                    gpus_per_node=2, tolerance=0.1,
                                    source='t', noise_k=4.0)
    assert (4.0, True) in calls
    b = baselines.baseline(noisy)
    tol = e.size_tolerance[1 << 20]
    assert tol == b.allowed_drop(0.1, 4.0, whole_percent=True) > 0.1
    assert 1 << 30 not in e.size_tolerance        # steady: no own tolerance
    # the history's threshold: the same rule, not rounded to a percent
    calls.clear()
    med, raw = e.busbw[1 << 20], b.allowed_drop(0.1, 4.0)
    assert med * (1 - tol) < med * (1 - raw) and tol - raw < 0.01
    ok = history.detect(_mixed_records(noisy + [med * (1 - raw) + 0.01],
                                       0.1), k=4.0)
    assert not [f for f in ok if f.kind == 'drop'] and (4.0, False) in calls
    low = history.detect(_mixed_records(noisy + [med * (1 - tol) - 0.01],
                                        0.1), k=4.0)
    assert [f.run_id for f in low if f.kind == 'drop'] == ['r7']


def test_drop_flagged_at_every_affected_size_and_only_there(db):
    found = history.detect(db.records())
    drops = [f for f in found if f.kind == 'drop']
    assert {f.run_id for f in drops} == {'night-15'}
    # 1-channel capture sizes: 1M..1G x4; all collapse by > 80 %
    assert sorted(f.size for f in drops) == [1 << 20, 4 << 20, 16 << 20,
                                             64 << 20, 256 << 20, 1 << 30]
    rec = [f for f in found if f.kind == 'recovery']
    assert {f.run_id for f in rec} == {'night-16'}


def test_no_judgement_without_history(db):
    recs = [r for r in db.records() if r['run_id'] <= 'night-03']
    assert history.detect(recs) == []


def test_leave_one_out_no_false_alarm(db):
    recs = [r for r in db.records() if r['run_id'] != 'night-15'
            and r['size'] is not None and r['busbw'] is not None]
    for r in recs:
        others = [o for o in recs if o['run_id'] != r['run_id'] and
                  o['size'] == r['size'] and o['transport'] == r['transport']]
        assert finding.judge(others, r) is None, r


def test_intermittent_collapses():
    recs = []
    for i in range(30):
        v = 5.0 if i in (12, 20, 27) else 100.0 + (i % 3)
        recs.append({'run_id': f'r{i:02d}', 'time': f'2026-11-{i + 1:02d}',
                     'size': 1 << 30, 'busbw': v, 'case_verdict': 'pass',
                     'tolerance': 0.1, 'system': 's', 'partition': 'p',
                     'transport': 'net-plugin', 'collective': 'all_reduce',
                     'nodes': 64, 'ranks': 512, 'algo': 'default'})
    found = history.detect(recs)
    assert [f.run_id for f in found if f.kind == 'drop'] == ['r12', 'r20',
                                                              'r27']
    assert any(f.kind == 'intermittent' for f in found)


def test_attribution_names_what_changed(db):
    f = next(f for f in history.detect(db.records()) if f.kind == 'drop')
    changed = attribution.attribute(db.cases(), f)
    # one short line per recorded fact that changed, and only those
    assert changed == ['nccl: 2.28.3 -> 2.28.4', 'nodes: vm -> vm2',
                       'NCCL_MAX_NCHANNELS: (unset) -> 1']


def test_queries(db):
    now = T0 + datetime.timedelta(days=18, hours=3)
    lines = answers.failed(db, 24, now=now)
    assert any('net-plugin: HANG: hang' in ln for ln in lines)
    assert answers.since_when(db, 'net-plugin')[1] == 'night-18'
    assert answers.since_when(db, 'intra', '1G') is None   # healthy again
    hist = answers.history(db, 'intra', '1G')
    assert len(hist) == 21 and hist[15]['busbw'] < 30
    rows = answers.compare(db, 'night-14', 'night-15')
    [big] = [r for r in rows if r[1] == '1GiB']
    assert big[4] < 0.1


def test_report_page(db, tmp_path):
    from ccl_health import report
    page, text = report.build(db, str(tmp_path / 'rep'))
    html = open(page).read()
    assert html.count('<img') >= 3 and 'data:image/png;base64,' in html
    files = os.listdir(tmp_path / 'rep')
    assert 'busbw_local_gpu_sweep_all_reduce_intra_1n_x_2r.png' in files
    assert 'trend_local_gpu_sweep_all_reduce_intra_1n_x_2r_1GiB.png' in files
    assert 'DROP local/gpu/intra' in text
    table = report.summary_table(db, now=T0 + datetime.timedelta(days=21))
    plug = next(r for r in table if r['transport'] == 'net-plugin')
    assert plug['last verdict'] == 'hang' and plug['days since failure'] == 3
    intra = next(r for r in table if r['transport'] == 'intra')
    assert intra['failures'] == 1 and intra['last verdict'] == 'pass'


def test_concurrent_writers_do_not_corrupt(tmp_path):
    import multiprocessing as mp
    path = str(tmp_path / 'c.db')
    store.open_store(path).close()
    procs = [mp.Process(target=_writer, args=(path, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with store.open_store(path) as s:
        assert len(s.cases()) == 4 * 25
        assert len(s.records()) == 4 * 25 * 3


def _writer(path, w):
    with store.open_store(path) as s:
        for i in range(25):
            s.add_case(store.CaseRecord(
                f'run-{w}-{i}', 'case', 'pass',
                sizes=[store.SizeRecord(1 << k, 1.0) for k in range(3)]))


def test_schema_version_is_recorded_and_newer_refused(tmp_path):
    path = str(tmp_path / 'v.db')
    with store.open_store(path) as s:
        assert s.query("SELECT value FROM meta WHERE key='schema_version'"
                       )[0]['value'] == str(schema.SCHEMA_VERSION)
        s.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    from ccl_health import CclHealthError
    with pytest.raises(CclHealthError, match='schema version 99 is newer'):
        store.open_store(path)


# -- the real record: 2x H200, 20 healthy sweeps + 2 real degradations -------
DEVICE_DB = os.path.join(REPO, 'tests', 'fixtures', 'device',
                         'history-health', 'keep', 'hist.db')


@pytest.fixture
def device_records(tmp_path):
    import shutil
    path = tmp_path / 'hist.db'          # a copy: tests never touch the record
    shutil.copy(DEVICE_DB, path)
    with store.open_store(str(path)) as s:
        yield [r for r in s.records() if r['size'] is not None]


def test_device_record_leave_one_out(device_records):
    """No healthy run is flagged against the others; each degradation is
    flagged at the sizes it affects."""
    degraded = {'degraded-nchannels4', 'degraded-proto-ll'}
    healthy = [r for r in device_records if r['run_id'] not in degraded]
    runs = {r['run_id'] for r in healthy}
    assert len(runs) == 21
    for r in healthy:
        others = [o for o in healthy if o['run_id'] != r['run_id'] and
                  o['size'] == r['size']]
        assert finding.judge(others, dict(r, case_verdict='pass')) is None
    flagged = {}
    for r in device_records:
        if r['run_id'] in degraded:
            hist = [o for o in healthy if o['size'] == r['size']]
            if finding.judge(hist, dict(r, case_verdict='pass')):
                flagged.setdefault(r['run_id'], set()).add(r['size'])
    sizes = {r['size'] for r in healthy}
    assert flagged['degraded-nchannels4'] == sizes            # 11 of 11
    # NCCL_PROTO=LL only hurts from 4 MiB on (LL is fast for small ones)
    assert flagged['degraded-proto-ll'] == {s for s in sizes if s >= 4 << 20}


def test_device_record_attribution(device_records, tmp_path):
    with store.open_store(os.path.join(tmp_path, 'hist.db')) as s:
        cases = s.cases()
        found = [f for f in history.detect(s.records())
                 if f.kind == 'drop' and f.run_id == 'degraded-nchannels4']
    assert found
    assert attribution.attribute(cases, found[0]) == [
        'NCCL_MAX_NCHANNELS: (unset) -> 4']


def test_calibrate_from_the_store_widens_noisy_sizes(tmp_path):
    import shutil
    from ccl_health.db import calibrate
    path = tmp_path / 'hist.db'
    shutil.copy(DEVICE_DB, path)
    with store.open_store(str(path)) as s:
        groups = {key: [calibrate.sweep_from_busbw(r['busbw'])
                        for r in runs] for key, runs in
                  calibrate.runs_from_store(s, 'local', 'gpu', 20).items()}
    [(key, sweeps)] = groups.items()
    assert key == ('intra', 'all_reduce', 1, 2, 'default')
    assert len(sweeps) == 20
    e = calibrate.entry_from_sweeps(sweeps, transport='intra',
                                    collective='all_reduce', nodes=1,
                                    gpus_per_node=2, tolerance=0.1,
                                    source='t')
    # 1 MiB is latency-bound: its run-to-run noise needs more than 10 %
    assert set(e.size_tolerance) == {1 << 20}
    assert 0.15 < e.size_tolerance[1 << 20] < 0.4
    assert e.tolerance_at(1 << 30) == 0.1
    assert e.busbw[1 << 30] == pytest.approx(330.5, abs=1.0)


def test_ingest_a_finished_report_made_elsewhere(tmp_path):
    """`db ingest`: the main job's run report from the GPU device, after the
    fact, into an empty database."""
    import glob
    import subprocess
    import sys
    report = glob.glob(os.path.join(REPO, 'tests', 'fixtures', 'device',
                                    'suite-run', 'keep', 'o-main', 'reports',
                                    'run-*.json'))[0]
    db = tmp_path / 'x.db'
    p = subprocess.run([sys.executable, '-m', 'ccl_health.cli', 'db',
                        '--db', str(db), 'ingest', report],
                       capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0 and '4 test case(s) recorded' in p.stdout
    with store.open_store(str(db)) as s:
        cases = {c['transport']: c for c in s.cases()}
        assert {t: c['verdict'] for t, c in cases.items()} == {
            'intra': 'pass', 'net-socket': 'pass', 'net-plugin': 'pass',
            'net-plugin-gdr': 'skipped'}
        plug = cases['net-plugin']
        assert (plug['nccl_version'], plug['plugin_version'],
                plug['libfabric_version'], plug['provider']) == (
            '2.28.3+cuda13.0', '1.21.1', '1.22', 'tcp;ofi_rxm')
        assert plug['nodelist'] == 'vm' and plug['ranks'] == 2
        big = s.records("WHERE transport = 'intra' AND size = ?",
                        (8 << 30,))[0]
        assert big['busbw'] == pytest.approx(348.56, abs=0.01)
    # ingesting again changes nothing
    subprocess.run([sys.executable, '-m', 'ccl_health.cli', 'db', '--db',
                    str(db), 'ingest', report], cwd=REPO, check=True,
                   capture_output=True)
    with store.open_store(str(db)) as s:
        assert len(s.cases()) == 4
