"""One level (issue 37): any calibration (``scripts/calibrate --report``
from run reports, ``--db`` from the performance database) is the level
that drops and drifts are judged from, from the first night after it; the
reference file keeps each size's noise beside its value and is the level
where the database holds no newer one.

The nights are recorded as the suite records them (the recorder's sizes
judged against the key's reference, :class:`test_nightly_news.Series`:
the recorded net-socket series of tests/fixtures/device/drift-graded,
night-to-night noise about 0.3 % at 64..256 MiB), told by the nightly's
news (:func:`ccl_health.news.night` then :func:`~ccl_health.news.tell`);
the step is the same recorded values 4 % lower (the rehearsal's row
writer, :func:`ccl_health.rehearsal.scenarios.scaled`).  The run reports
calibrated from are ReFrame run reports of the recorded nights (their
``perfvalues``, as ReFrame writes them)."""

import datetime
import json
import statistics

import pytest

from ccl_health import cli, news
from ccl_health.db import levels, store
from ccl_health.judge import history, reference
from ccl_health.judge import series
from ccl_health.units import format_size
from helpers.drift import GRADED
from helpers.nights import A, SIZES, T0, TOL, WHERE, Series, rid, told

#: the step after the calibration: recorded values 4 % lower
STEP = 0.96


def run_report(path, case, n):
    """A ReFrame run report of the night ``n`` holding ``case`` (a
    :class:`ccl_health.db.store.CaseRecord`): its busbw per size as
    ``perfvalues`` (value, reference, lower bound, upper, unit, result),
    the session ending a minute after the case."""
    end = T0 + datetime.timedelta(days=n, minutes=1)
    perf = {f'{case.system}:{case.partition}:busbw_{format_size(s.size)}':
            [s.busbw, s.ref or 0, -s.tolerance if s.tolerance else None,
             None, 'GB/s', 'pass'] for s in case.sizes}
    tc = {'display_name': case.case_name, 'name': 'AllReduceSweep',
          'fixture': False, 'system': case.system,
          'partition': case.partition, 'transport': case.transport,
          'collective': case.collective, 'num_nodes': case.nodes,
          'num_tasks_per_node': case.ranks // case.nodes,
          'num_tasks': case.ranks, 'algo': 'default', 'result': 'pass',
          'verdict': case.verdict, 'perfvalues': perf,
          'job_completion_time': case.time}
    report = {'session_info': {'uuid': f'session-{n}',
                               'time_end_unix': end.timestamp()},
              'runs': [{'testcases': [tc]}]}
    path.write_text(json.dumps(report))
    return str(path)


class Nights:
    """Nights of the key A in one SQLite database, each told as the
    nightly tells it."""

    def __init__(self, db):
        self.db, self.a, self.used = db, Series(A, 'net-socket', GRADED), 0

    def healthy(self, n):
        self.used += 1
        return self.a.case(rid(n), n, i=self.used - 1)

    def step(self, n):
        self.used += 1
        return self.a.case(rid(n), n, i=self.used - 1, factor=STEP)

    def night(self, n, case, refs=()):
        """Record ``case``; with ``refs`` (reference files), the levels of
        those the database takes after the run (``scripts/run``'s
        :func:`ccl_health.db.levels.take_file_levels`); then the news."""
        with store.open_store(self.db) as s:
            s.add_case(case)
            if refs:
                levels.take_file_levels(s, refs)
            m = news.night(s, rid(n), 'local', 'gpu', f'night {n}')
            news.tell(s, m, rid(n))
        print('\n'.join(m.lines))
        return m


def calibrate(how, tmp_path, db, reports):
    args = ['calibrate', '--reference-dir', str(tmp_path / 'ref'),
            '--tolerance', str(TOL), '--min-size', '64M']
    if how == 'report':
        args += [a for r in reports for a in ('--report', r)]
    else:
        args += ['--db', db, '--system', 'local', '--partition', 'gpu']
    assert cli.main(args) == 0


def _two_nights_calibrated(how, folder, db):
    """Two healthy nights recorded in ``db``, then a calibration from them
    (``how``: report or db) into ``folder/ref``; the nights."""
    (folder / 'ref').mkdir(parents=True, exist_ok=True)
    nights = Nights(db)
    reports = []
    for n in (1, 2):
        case = nights.healthy(n)
        nights.night(n, case)
        reports.append(run_report(folder / f'run-{n}.json', case, n))
    calibrate(how, folder, db, reports)
    return nights


@pytest.mark.parametrize('how', ['report', 'db'])
def test_a_step_after_a_calibration_is_told_by_its_third_night(
        how, db_url, tmp_path, monkeypatch, capsys):
    """Two nights, a calibration from them (``--report``: the database
    at hand is the one the nights were recorded in, ``$CCL_HEALTH_DB``;
    ``--db``: named), three healthy nights, then a 4 % step: all clear
    until the step's third night, which tells a drift at every size and
    needs a person (exit 1).  Before issue 37, ``--report`` recorded no
    level: the key was "judged on its history (8 healthy runs; a drift
    from 15)" and the step's three nights were all clear.  SQLite and
    PostgreSQL."""
    db = db_url
    monkeypatch.setenv('CCL_HEALTH_DB', db)
    nights = _two_nights_calibrated(how, tmp_path, db)
    out = capsys.readouterr().out
    assert f'{db}: recorded the baseline of 1 configuration(s) (3 sizes)' \
        in out, out
    # the reference file is the same level: each size's noise beside its
    # value, the calibration's newest run and its time
    e = reference.load(str(tmp_path / 'ref' / 'local.yaml')).lookup(
        'gpu', 'net-socket', 'all_reduce', 1, 2)
    assert set(e.noise) == set(e.busbw) == {64 << 20, 128 << 20, 256 << 20}
    assert e.calibrated['runs'] == 2
    with store.open_store(db, readonly=True) as s:
        rows = s.baselines()
    assert {r['size']: (round(r['median'], 2), round(r['noise'], 4))
            for r in rows} \
        == {s: (e.busbw[s], e.noise[s]) for s in e.busbw}
    for n in (3, 4, 5):
        m = nights.night(n, nights.healthy(n))
        assert 'all clear, nothing new' in m.lines[0] and m.code == 0
    for n in (6, 7):
        m = nights.night(n, nights.step(n))
        assert 'all clear, nothing new' in m.lines[0] and m.code == 0, \
            m.lines
    m = nights.night(8, nights.step(8))
    assert m.code == 1 and 'NEW: 0 new failure(s), 3 new finding(s)' in \
        m.lines[0], m.lines
    assert told(m.lines) == {('drift', WHERE[A], s) for s in SIZES}
    # and the report says what it is judged against
    assert cli.main(['--prog', 'scripts/report', 'db', '--db', db,
                     'detect']) in (0, 1)
    out = capsys.readouterr().out
    assert f'{WHERE[A]}: judged against the calibration of ' in out, out


def test_report_and_db_record_the_same_level(tmp_path, monkeypatch,
                                              capsys):
    """The same two nights calibrated through ``--report`` and through
    ``--db``: the same level (median, noise, runs per size) in the
    database and the same values and noise in the reference file; one
    starts after the run reports' session, the other after the newest
    run in the database, both before the next night."""
    got = {}
    for how in ('report', 'db'):
        folder = tmp_path / how
        db = str(folder / 'site.db')
        monkeypatch.setenv('CCL_HEALTH_DB', db)
        _two_nights_calibrated(how, folder, db)
        with store.open_store(db, readonly=True) as s:
            rows = s.baselines()
            recorded = s.records()
        e = reference.load(str(folder / 'ref' / 'local.yaml')).lookup(
            'gpu', 'net-socket', 'all_reduce', 1, 2)
        got[how] = (rows, e)
        # the level is the median of the two nights' recorded values
        for r in rows:
            assert r['n'] == 2 and r['median'] == statistics.median(
                x['busbw'] for x in recorded if x['size'] == r['size'])
    capsys.readouterr()
    (rep_rows, rep_e), (db_rows, db_e) = got['report'], got['db']

    def level(rows):
        return sorted((tuple(r[c] for c in series.KEY + ('kind',)),
                       r['size'], r['median'], r['noise'], r['n'])
                      for r in rows)
    assert level(rep_rows) and level(rep_rows) == level(db_rows)
    assert rep_e.busbw == db_e.busbw and rep_e.noise == db_e.noise
    night_2, night_3 = (T0 + datetime.timedelta(days=d) for d in (2, 3))
    for rows in (rep_rows, db_rows):
        for r in rows:
            assert night_2 <= datetime.datetime.fromisoformat(
                r['run_time']) < night_3


def _file_level(tmp_path, monkeypatch):
    """A calibration through ``--report`` with no database at hand: the
    level is the reference file's alone.  Returns the reference and the
    database the nights are recorded in."""
    monkeypatch.setenv('CCL_HEALTH_DB', str(tmp_path / 'nowhere.db'))
    (tmp_path / 'ref').mkdir()
    db = str(tmp_path / 'site.db')
    nights = Nights(db)
    reports = []
    for n in (1, 2):
        case = nights.healthy(n)
        nights.night(n, case)
        reports.append(run_report(tmp_path / f'run-{n}.json', case, n))
    calibrate('report', tmp_path, db, reports)
    assert not (tmp_path / 'nowhere.db').exists()
    with store.open_store(db, readonly=True) as s:
        assert s.baselines() == []
    return reference.load(str(tmp_path / 'ref' / 'local.yaml')), nights


def test_the_reference_file_is_the_level_where_the_db_has_none(
        tmp_path, monkeypatch, capsys):
    """With no database at hand the calibration is the reference file's
    (its noise and stamp); the database that records the next night takes
    it (what ``scripts/run`` does after each run), judged from the first
    night after the calibration, and only once; a newer level of the
    database (an acceptance) is never overridden by the older file."""
    ref, nights = _file_level(tmp_path, monkeypatch)
    out = capsys.readouterr().out
    assert 'no performance database beside the run report(s)' in out and \
        'the level of 1 configuration(s) is in the reference file' in out
    rows = levels.file_rows(ref)
    assert {r['size'] for r in rows} == {64 << 20, 128 << 20, 256 << 20}
    assert all(r['kind'] == 'sweep' and r['ranks'] == 2 for r in rows)
    # what scripts/run does after a run on local:gpu, with the reference
    # files it ran against
    ran = {'runs': [{'testcases': [{'system': 'local',
                                    'partition': 'gpu'}]}]}
    with store.open_store(nights.db) as s:
        cli._take_file_levels(s, ran, {'CCL_HEALTH_REFERENCE_DIR':
                                       str(tmp_path / 'ref')})
        assert len(s.baselines()) == 3
        assert levels.take_file_levels(s, [ref]) == []      # once
        lv = history.levels(series.series_key(dict(
            nights.healthy(3).__dict__, case_name=A)),
            64 << 20, *s.levels())
    assert f'the calibration in {ref.path} is the level of 1 ' \
        f'configuration(s)' in capsys.readouterr().out
    assert [x.median for x in lv] == [ref.lookup(
        'gpu', 'net-socket', 'all_reduce', 1, 2).busbw[64 << 20]]
    # an acceptance newer than the file's calibration: the file is older
    db2 = str(tmp_path / 'accepted.db')
    later = Nights(db2)
    for n in (1, 2, 3):
        later.night(n, later.healthy(n))
    assert cli.main(['--prog', 'scripts/report', 'db', '--db', db2,
                     'accept', rid(3), '--reason', 'test']) == 0
    with store.open_store(db2) as s:
        assert levels.take_file_levels(s, [ref]) == []


def test_a_file_level_judges_a_step_from_the_first_night_after_it(
        tmp_path, monkeypatch, capsys):
    """The file's level taken by the database (as ``scripts/run`` takes
    it after its next night): the 4 % step three nights later is a drift
    by its third night, as with a level recorded by the calibration."""
    ref, nights = _file_level(tmp_path, monkeypatch)
    codes = {}
    for n in range(3, 9):
        case = nights.healthy(n) if n < 6 else nights.step(n)
        m = nights.night(n, case, [ref])
        codes[n] = (m.code, told(m.lines))
    assert codes[8] == (1, {('drift', WHERE[A], s) for s in SIZES}), codes
    assert all(codes[n] == (0, set()) for n in range(3, 8)), codes
