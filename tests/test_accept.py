"""Issue 21, 4 (second half): ``scripts/report accept`` restarts a key's
history baseline at a run after a legitimate change, keeps who, why and
when in the database, shows it on the report page, and can be undone;
detection after it judges against the new level."""

import datetime
import os
import random
import sqlite3
import subprocess

import pytest

from ccl_health import cli
from ccl_health.db import store
from ccl_health.db import schema
from ccl_health.db import windowfindings
from ccl_health.judge import history
from conftest import REPO
from helpers.stores import old_database

T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.timezone.utc)
SIZE = 256 << 20
KEY_TEXT = 'local/gpu/intra all_reduce 1n/2r'


def night(s, n, busbw):
    s.add_case(store.CaseRecord(
        f'night-{n:02d}', 'AllReduceSweep %transport=intra', 'pass',
        time=(T0 + datetime.timedelta(days=n)).isoformat(),
        system='local', partition='gpu', nodes=1, ranks=2,
        collective='all_reduce', transport='intra', proven='intra',
        nodelist='vm', sizes=[store.SizeRecord(SIZE, busbw=busbw,
                                               tolerance=0.2)]))


@pytest.fixture
def db(tmp_path):
    """15 nights at 100 GB/s (0.5 % noise), then a lasting -6 % (a new
    NCCL version, say) from night 15 on: a drift."""
    rng = random.Random(3)
    path = str(tmp_path / 'h.db')
    with store.open_store(path) as s:
        for n in range(15):
            night(s, n, 100 * rng.uniform(0.995, 1.005))
        for n in range(15, 19):
            night(s, n, 94 * rng.uniform(0.995, 1.005))
    return path


def report(db, *args):
    return cli.main(['--prog', 'scripts/report', 'db', '--db', db, *args])


def flagged(db, run):
    with store.open_store(db, readonly=True) as s:
        return [f for f in windowfindings.detect_in(s, run_id=run)
                if f.kind != 'recovery']


def test_accept_restarts_the_baseline_and_undo_brings_it_back(
        db, capsys, monkeypatch, judged_at_read):
    rng = random.Random(5)
    assert flagged(db, 'night-18'), 'the drift is flagged before accept'
    assert report(db, 'detect', '--run', 'night-18') == 1
    monkeypatch.setenv('USER', 'alice')
    assert report(db, 'accept', 'night-18', '--reason',
                  'NCCL 2.28.4: new normal') == 0
    out = capsys.readouterr().out
    assert 'accepted #1: local/gpu/intra all_reduce 1n/2r from run ' \
        'night-18' in out
    # its key judged again with it (ccl_health.db.keystate.relevel): read by
    # its kept findings, none at read
    assert not flagged(db, 'night-18') and judged_at_read == []
    # the next nights at the new level: not flagged, judged against it
    with store.open_store(db) as s:
        for n in range(19, 27):
            night(s, n, 94 * rng.uniform(0.995, 1.005))
    for n in range(19, 27):
        assert not flagged(db, f'night-{n:02d}'), n
    assert report(db, 'detect', '--run', 'night-26') == 0
    # a drop below the new level is still a drop, against ~94
    with store.open_store(db) as s:
        night(s, 27, 70.0)
    [f] = flagged(db, 'night-27')
    assert f.kind == 'drop' and 93 < f.baseline.median < 95
    # who, why, when kept in the database
    conn = sqlite3.connect(db)
    row = conn.execute('SELECT who, reason, created, run_id, undone_at '
                       'FROM acceptances').fetchone()
    conn.close()
    assert row[:2] == ('alice', 'NCCL 2.28.4: new normal')
    assert row[2].startswith('20') and row[3] == 'night-18' and \
        row[4] is None
    # undone: the nights after are drifts against the old level again
    monkeypatch.setenv('USER', 'bob')
    assert report(db, 'accept', '--undo', '1') == 0
    assert flagged(db, 'night-26')
    assert judged_at_read == []
    assert report(db, 'detect', '--run', 'night-26') == 1
    capsys.readouterr()
    assert report(db, 'accept', '--list') == 0
    assert 'undone by bob' in capsys.readouterr().out
    assert report(db, 'accept', '--undo', '1') == 2


def test_accept_a_key_at_its_newest_run(db, capsys):
    assert report(db, 'accept', KEY_TEXT, '--reason', 'new firmware') == 0
    assert 'from run night-18' in capsys.readouterr().out
    with store.open_store(db, readonly=True) as s:
        [a] = s.acceptances()
    assert a['transport'] == 'intra' and a['run_id'] == 'night-18'


@pytest.mark.parametrize('args', [
    ['night-18'],                                    # no reason
    ['night-18', '--reason', '  '],
    ['no-such-run', '--reason', 'x'],
    ['night-18', '--reason', 'x', '--transport', 'net-ib'],
    [],
])
def test_accept_refuses_what_it_cannot_do(db, capsys, args):
    assert report(db, 'accept', *args) == 2
    assert 'Traceback' not in capsys.readouterr().err
    with store.open_store(db, readonly=True) as s:
        assert s.acceptances() == []


def test_the_report_page_shows_acceptances(db, tmp_path, monkeypatch):
    pytest.importorskip('jinja2')
    pytest.importorskip('matplotlib')
    monkeypatch.setenv('USER', 'carol')
    assert report(db, 'accept', 'night-18', '--reason',
                  'firmware 1.2 & <new> level') == 0
    assert report(db, 'report', '--out', str(tmp_path / 'page')) == 0
    html = (tmp_path / 'page' / 'index.html').read_text()
    assert 'Accepted levels' in html
    assert 'carol' in html and 'firmware 1.2 &amp; &lt;new&gt; level' in html


def test_an_old_database_reads_without_acceptances_and_migrates(tmp_path):
    path = str(tmp_path / 'old.db')
    old_database(path, 2).close()
    before = open(path, 'rb').read()
    with store.open_store(path, readonly=True) as s:
        assert s.acceptances() == []
    assert open(path, 'rb').read() == before
    with store.open_store(path) as s:
        assert s.schema_version() == schema.SCHEMA_VERSION and \
            s.acceptances() == []
