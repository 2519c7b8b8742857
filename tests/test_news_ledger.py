"""The nightly's news ledger (ccl_health.news) on recorded runs: each change
told exactly once (a new failure, a worse band, a new failing size, a
failure of another kind, a history finding, a recovery), a killed night's
news told by the next night, a failed publish that still prints its news
and is not told twice, nothing measured never an all-clear.  SQLite; one
pass on the real PostgreSQL of the tests (tests/test_store_postgres.py)."""

import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ccl_health import news, nightly
from ccl_health.db import ledger, store
from ccl_health.db import schema
from ccl_health.judge import casejudge as judge
from helpers.stores import old_database

CASE = 'AllReduceSweep %transport=net-socket'
OTHER = 'AllReduceSweep %transport=intra'
REF = 2.0
TOL = 0.15
M64, M128 = 64 << 20, 128 << 20
T0 = datetime.datetime(2026, 11, 1, 2, 30, tzinfo=datetime.timezone.utc)


def _at(n):
    return (T0 + datetime.timedelta(days=n)).isoformat(timespec='seconds')


def record(db, run_id, n, verdict='pass', busbw=None, name=CASE,
           reason='', env=None):
    """A case of run ``run_id`` on day ``n``: busbw per size (default: the
    reference at both sizes; a crash: none), judged against REF."""
    values = {} if verdict not in ('pass', 'below-reference') else \
        (busbw or {M64: REF, M128: REF})
    sizes = [store.SizeRecord(s, busbw=v, ref=REF, tolerance=TOL,
                              verdict=judge.size_verdict(v, REF, TOL))
             for s, v in sorted(values.items())]
    transport = name.split('=')[1]
    db.add_case(store.CaseRecord(
        run_id, name, verdict, time=_at(n), system='local',
        partition='gpu', nodes=1, ranks=2, collective='all_reduce',
        transport=transport, sizes=sizes,
        reason=reason or (f'{verdict}: recorded by the test'
                          if verdict != 'pass' else ''), env=env or {}))


def mail(db, n, tell=True):
    """The news of nightly run n (recorded already), told unless not."""
    rid = f'nightly-{n:03d}'
    told = news.night(db, rid, 'local', 'gpu', f'night {n}')
    if tell:
        news.tell(db, told, rid)
    return told


@pytest.fixture
def db(tmp_path):
    with store.open_store(str(tmp_path / 'perf.db')) as s:
        yield s


def _count(nights, text):
    return sum(ln.count(text) for m in nights for ln in m.lines)


# -- the bands --------------------------------------------------------------

def test_bands_of_a_shortfall():
    assert [news.band(v, 2.0) for v in (1.9, 1.8, 1.2, 0.5, 0.09)] == \
        [0, 1, 2, 3, 4]
    assert news.band(float('nan'), 2.0) == len(news.BAND_NAMES) - 1
    assert news.band_text(2) == '25-50 % below'


# -- each change told once ---------------------------------------------------

def test_a_new_failure_is_told_once_then_still_failing(db):
    record(db, 'nightly-001', 1)
    m1 = mail(db, 1)
    assert m1.code == 0 and 'all clear, nothing new' in m1.lines[0]
    assert 'nothing told before' in m1.lines[0]
    record(db, 'nightly-002', 2, 'crash')
    m2 = mail(db, 2)
    assert m2.code == 1 and m2.status == 'new'
    assert 'NEW: 1 new failure(s), 0 new finding(s)' in m2.lines[0]
    assert 'vs run nightly-001' in m2.lines[0]
    assert m2.lines[1].startswith('CRASH ' + CASE) and len(m2.lines) == 2
    record(db, 'nightly-003', 3, 'crash')
    m3 = mail(db, 3)
    assert m3.code == 0 and m3.lines == [
        'night 3: nothing new, still failing from earlier nights: 1 '
        'failure(s), 0 finding(s) (1 case: 1 crash; vs run nightly-002)']
    assert _count([m1, m2, m3], 'CRASH ') == 1


def test_a_new_failure_says_what_changed_since_its_last_pass(db):
    """Issue 40: a crash's mail says what differs from the last passing
    run of its configuration (the environment, the versions), as a drift's
    does; nothing more when nothing did (the failure stays one line)."""
    base = {'NCCL_DEBUG': 'WARN'}
    record(db, 'nightly-001', 1, env=base)
    record(db, 'nightly-002', 2, 'crash', env=dict(base, NCCL_NET='bogus'))
    record(db, 'nightly-003', 3, env=base)
    record(db, 'nightly-004', 4, 'crash', env=base)
    m = [mail(db, n) for n in range(1, 5)]
    assert m[1].code == 1 and m[1].lines[1:] == [
        f'CRASH {CASE}: crash: recorded by the test',
        '    changed: NCCL_NET: (unset) -> bogus']
    # the recovery, then a crash with nothing changed since night 3
    assert m[3].code == 1 and m[3].lines[1:] == [
        f'CRASH {CASE}: crash: recorded by the test']


def test_a_worse_band_is_news_a_better_one_is_not(db):
    """-40 % then -95 % (1.2 then 0.09 GB/s against 2.0): told as worse;
    back to -40 % and down to -95 % again: not told again."""
    for n, v in ((1, 1.2), (2, 0.09), (3, 0.09), (4, 1.2), (5, 0.09)):
        record(db, f'nightly-{n:03d}', n, 'below-reference',
               {M64: v, M128: REF})
    m = [mail(db, n) for n in range(1, 6)]
    assert m[0].code == 1 and m[0].lines[1].startswith('BELOW-REFERENCE ')
    assert m[1].code == 1 and ', 1 worse' in m[1].lines[0]
    assert m[1].lines[1] == (
        f'WORSE BELOW-REFERENCE {CASE}: 64MiB -96 % (0.09 vs reference 2.00 '
        f'GB/s; told 25-50 % below in run nightly-001)')
    for later in m[2:]:
        assert later.code == 0 and len(later.lines) == 1 and \
            'still failing from earlier nights: 1 failure(s)' in \
            later.lines[0], later.lines
    assert _count(m, 'WORSE ') == 1 and _count(m, 'BELOW-REFERENCE ') == 2


def test_a_new_failing_size_is_news(db):
    record(db, 'nightly-001', 1, 'below-reference', {M64: 1.2, M128: REF})
    record(db, 'nightly-002', 2, 'below-reference', {M64: 1.2, M128: 1.2})
    record(db, 'nightly-003', 3, 'below-reference', {M64: 1.2, M128: 1.2})
    m = [mail(db, n) for n in (1, 2, 3)]
    assert m[1].code == 1 and m[1].lines[1] == (
        f'WORSE BELOW-REFERENCE {CASE}: 128MiB -40 % (1.20 vs reference '
        f'2.00 GB/s; newly below)')
    assert m[2].code == 0 and len(m[2].lines) == 1
    assert _count(m, '128MiB') == 1


def test_a_failure_of_another_kind_is_news(db):
    record(db, 'nightly-001', 1, 'below-reference', {M64: 1.2, M128: REF})
    record(db, 'nightly-002', 2, 'crash')
    record(db, 'nightly-003', 3, 'crash')
    record(db, 'nightly-004', 4, 'below-reference', {M64: 1.2, M128: REF})
    m = [mail(db, n) for n in (1, 2, 3, 4)]
    assert m[1].code == 1 and m[1].lines[1].startswith(
        f'CRASH {CASE}: ') and m[1].lines[1].endswith(
        '(told as below-reference in run nightly-001)')
    assert m[2].code == 0 and len(m[2].lines) == 1
    # back to below-reference: another kind again, told with its sizes
    assert m[3].code == 1 and m[3].lines[1].startswith('BELOW-REFERENCE ')
    assert _count(m, 'CRASH ') == 1


def test_a_recovery_is_told_once(db):
    record(db, 'nightly-001', 1, 'crash')
    record(db, 'nightly-002', 2)
    record(db, 'nightly-003', 3)
    m = [mail(db, n) for n in (1, 2, 3)]
    assert m[1].code == 0 and m[1].status == 'clear'
    assert 'all clear, 1 recovered' in m[1].lines[0]
    assert m[1].lines[1] == (f'recovered: {CASE}: pass in run nightly-002 '
                             f'(told crash in run nightly-001)')
    assert m[2].lines == [m[2].lines[0]] and \
        'all clear, nothing new' in m[2].lines[0]
    assert _count(m, 'recovered: ') == 1


def test_a_drop_against_history_is_told_once_and_its_recovery(db):
    """Six healthy nights, then -50 % twice (below the reference and a
    history drop at both sizes), then healthy: the drop and the failure
    are told on the first low night, not the second; the recovery once."""
    for n in range(1, 7):
        record(db, f'nightly-{n:03d}', n, busbw={M64: REF + 0.01 * (n % 3),
                                                 M128: REF})
    for n in (7, 8):
        record(db, f'nightly-{n:03d}', n, 'below-reference',
               {M64: 1.0, M128: 1.0})
    record(db, 'nightly-009', 9)
    m = [mail(db, n) for n in range(1, 10)]
    assert all(x.code == 0 and len(x.lines) == 1 for x in m[:6])
    assert m[6].code == 1 and \
        'NEW: 1 new failure(s), 2 new finding(s)' in m[6].lines[0]
    assert any(ln.startswith('DROP local/gpu/net-socket all_reduce 1n/2r')
               for ln in m[6].lines)
    assert m[7].code == 0 and len(m[7].lines) == 1 and \
        'still failing from earlier nights: 1 failure(s), 2 finding(s)' \
        in m[7].lines[0]
    rec = [ln for ln in m[8].lines if ln.startswith('recovered: ')]
    assert len(rec) == 3 and m[8].code == 0, m[8].lines
    assert any(ln.startswith('recovered: DROP local/gpu/net-socket '
                             'all_reduce 1n/2r 64MiB: 2.00 GB/s')
               for ln in rec)
    assert _count(m, 'DROP ') == 1 + 2      # the drop line, 2 recovered
    assert _count(m, 'recovered: ') == 3


def test_a_killed_night_is_told_by_the_next_once(db):
    """Night 2 recorded a crash and died before its mail (never told);
    night 3, healthy, tells the crash (never told, from run 2) and its
    recovery; night 4 tells nothing."""
    record(db, 'nightly-001', 1)
    record(db, 'nightly-002', 2, 'crash')
    record(db, 'nightly-003', 3)
    record(db, 'nightly-004', 4)
    m1 = mail(db, 1)
    m3 = news.night(db, 'nightly-003', 'local', 'gpu', 'night 3',
                    labels={'nightly-002': 'night 2 killed'})
    news.tell(db, m3, 'nightly-003')
    m4 = mail(db, 4)
    assert m3.code == 1 and m3.lines[1:] == [
        'never told, from run nightly-002 (night 2 killed):',
        f'  CRASH {CASE}: crash: recorded by the test',
        f'recovered: {CASE}: pass in run nightly-003 (told crash in run '
        f'nightly-002)']
    assert m4.code == 0 and m4.lines == [m4.lines[0]]
    assert _count([m1, m3, m4], 'CRASH ') == 1
    assert [n['status'] for n in ledger.told_nights(db, 'local', 'gpu')] == \
        ['complete', 'late', 'complete', 'complete']


def test_a_killed_night_that_measured_nothing_is_told_once(db):
    """Night 2 killed with ``kill -9`` while its job ran (its case recorded
    aborted as its main command died with it), night 3 killed before
    anything was recorded, night 4 aborted by maintenance (it mailed its
    own ABORTED line): night 5 says the two killed nights measured
    nothing, not the aborted one; night 6 says nothing of them."""
    record(db, 'nightly-001', 1)
    mail(db, 1)
    record(db, 'nightly-002', 2, 'aborted', reason='aborted: stopped by '
           'SIGTERM after 0 of 3 size(s); nothing was judged')
    record(db, 'nightly-004', 4, 'aborted', reason='aborted: scancel')
    record(db, 'nightly-005', 5)
    m5 = news.night(db, 'nightly-005', 'local', 'gpu', 'night 5', labels={
        'nightly-002': 'night 2 killed', 'nightly-003': 'night 3 killed'})
    news.tell(db, m5, 'nightly-005')
    assert m5.code == 0 and m5.lines[1:] == [
        'never told, from run nightly-002 (night 2 killed): nothing '
        'measured (1 aborted: stopped by SIGTERM after 0 of 3 size(s); '
        'nothing was judged)',
        'never told, from run nightly-003 (night 3 killed): nothing '
        'recorded']
    record(db, 'nightly-006', 6)
    assert mail(db, 6).lines[1:] == []


def test_news_not_recorded_as_told_is_told_again(db):
    """A mail never printed (the nightly crashed before): nothing recorded
    as told, the next night tells it."""
    record(db, 'nightly-001', 1)
    mail(db, 1)
    record(db, 'nightly-002', 2, 'crash')
    assert mail(db, 2, tell=False).code == 1
    record(db, 'nightly-003', 3, 'crash')
    m3 = mail(db, 3)
    assert m3.code == 1 and m3.lines[1:] == [
        'never told, from run nightly-002 (ended before its mail):',
        f'  CRASH {CASE}: crash: recorded by the test']
    assert 'still failing from earlier nights' not in m3.lines[0]


def test_fewer_cases_than_the_last_complete_night_is_exit_2(db):
    record(db, 'nightly-001', 1)
    record(db, 'nightly-001', 1, name=OTHER)
    mail(db, 1)
    record(db, 'nightly-002', 2)
    record(db, 'nightly-002', 2, 'skipped', name=OTHER,
           reason='intra needs at least 2 GPUs; this partition has 1 per '
           'node x 1')
    m2 = mail(db, 2)
    assert m2.code == 2 and m2.status == 'not-measured'
    assert 'NOT ALL MEASURED: 1 case(s) of run nightly-001 not measured' \
        in m2.lines[0] and 'all clear' not in m2.lines[0]
    assert m2.lines[1:] == [
        f'not measured (skipped: intra needs at least 2 GPUs; this partition '
        f'has 1 per node x 1): {OTHER}']
    record(db, 'nightly-003', 3)          # the other one not even selected
    m3 = mail(db, 3)
    assert m3.code == 2 and m3.lines[1:] == [
        f'not measured (not selected): {OTHER}']
    record(db, 'nightly-004', 4)
    record(db, 'nightly-004', 4, name=OTHER)
    assert mail(db, 4).code == 0


def test_nothing_measured_is_exit_2_with_the_reasons(db):
    record(db, 'nightly-001', 1, 'skipped', reason='needs at least 2 GPUs')
    record(db, 'nightly-001', 1, 'skipped', name=OTHER,
           reason='needs at least 2 GPUs')
    m = mail(db, 1)
    assert m.code == 2 and 'NOTHING MEASURED: every case skipped' in \
        m.lines[0] and '2 cases: 2 skipped' in m.lines[0]
    assert m.lines[1:] == [
        f'not measured (skipped: needs at least 2 GPUs): {CASE}, {OTHER}']
    m = news.night(db, 'nightly-002', 'local', 'gpu', 'night 2',
                   cause='no GPUs found (no GPU on this machine)')
    assert m.code == 2 and m.lines == [
        'night 2: NOTHING MEASURED: no GPUs found (no GPU on this machine) '
        '(0 cases; vs run nightly-001)']
    # news still wins: a failure told the night something went unmeasured
    record(db, 'nightly-003', 3, 'crash')
    m = mail(db, 3)
    assert m.code == 1 and m.lines[1].startswith('CRASH ')


def test_an_old_database_gets_the_ledger_on_open(tmp_path):
    path = str(tmp_path / 'old.db')
    old_database(path, 3).close()
    with store.open_store(path) as s:
        record(s, 'nightly-001', 1, 'crash')
    before = open(path, 'rb').read()
    with store.open_store(path, readonly=True) as s:
        assert ledger.told(s, 'local') == [] and ledger.told_nights(s, 'local', 'gpu') == []
    assert open(path, 'rb').read() == before
    with store.open_store(path) as s:
        assert s.schema_version() == schema.SCHEMA_VERSION
        m = mail(s, 1)
        assert m.code == 1 and len(ledger.told(s, 'local')) == 1
        assert s.cases()[0]['verdict'] == 'crash'      # old rows kept


# -- the nightly itself (scripts/run stood in by recording the cases) -------

class _Clock:
    """``nightly.datetime`` with a clock a day further at each call of
    now(): each night its own run id and time."""
    def __init__(self):
        self.n = 0
        clock = self

        class _DT(datetime.datetime):
            @classmethod
            def now(cls, tz=None):
                clock.n += 1
                return cls.fromisoformat(_at(clock.n)[:19])
        self.datetime = _DT
        self.timedelta = datetime.timedelta
        self.timezone = datetime.timezone


@pytest.fixture
def world(tmp_path, monkeypatch):
    """nightly.main with its child standing in: the child records the
    cases the test lines up for the night; the page a small file."""
    clock = _Clock()
    monkeypatch.setattr(nightly, 'datetime', clock)
    plan = []

    def child(cmd, env, log_path):
        rid = env['CCL_HEALTH_RUN_ID']
        cases = plan.pop(0)
        if not cases:           # recorded nothing: no database made
            return 0, None
        with store.open_store(env['CCL_HEALTH_DB']) as s:
            for verdict, name in cases:
                record(s, rid, clock.n, verdict, name=name,
                       reason='needs at least 2 GPUs'
                       if verdict == 'skipped' else '')
        with open(log_path, 'a') as fp:
            fp.write('ran\n')
        return 0, None

    def page(db_url, folder, title, publish=None, run_id=None):
        path = os.path.join(folder, 'index.html')
        with open(path, 'w') as fp:
            fp.write(title)
        return path
    monkeypatch.setattr(nightly, '_run_child', child)
    monkeypatch.setattr(nightly, '_page', page)
    www = tmp_path / 'www'

    def run(night, cases, db=None, *extra):
        plan.append(cases)
        argv = ['--system', 'local', '--partition', 'gpu', '--publish',
                str(www), '--db', db or str(tmp_path / 'perf.db'),
                '--output', str(tmp_path / 'out'), '--night', night,
                *extra]
        return nightly.main(argv)
    run.www = www
    run.clock = clock
    return run


def _out(capsys):
    return [ln for ln in capsys.readouterr().out.splitlines() if ln]


def test_a_failed_publish_prints_the_news_and_never_tells_it_twice(
        world, capsys, monkeypatch):
    import errno
    assert world('n1', [('pass', CASE)]) == 0
    assert 'all clear' in _out(capsys)[0]

    def full(*a):
        raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(nightly, '_page', full)
    monkeypatch.setattr(nightly, 'write_index', full)
    assert world('n2', [('crash', CASE)]) == 1
    out = _out(capsys)
    assert 'NEW: 1 new failure(s)' in out[0] and \
        out[1].startswith('CRASH ' + CASE)
    assert out[2] == ('could not publish: [Errno 28] No space left on '
                      'device; [Errno 28] No space left on device')
    assert not any(ln.startswith('page: ') for ln in out)
    # a quiet night that cannot publish is not quiet: exit 2
    assert world('n3', [('crash', CASE)]) == 2
    out = _out(capsys)
    assert 'nothing new, still failing' in out[0] and \
        not any(ln.startswith('CRASH') for ln in out)
    assert out[-1].startswith('could not publish: ')


def test_a_night_left_running_is_marked_killed_and_its_news_told(
        world, capsys, tmp_path):
    assert world('n1', [('pass', CASE)]) == 0
    _out(capsys)
    # night 2: its nightly killed after its run recorded a crash
    rid = f'nightly-{_at(world.clock.n + 1)[:10].replace("-", "")}-dead'
    with store.open_store(str(tmp_path / 'perf.db')) as s:
        record(s, rid, world.clock.n + 1, 'crash')
    world.clock.n += 1
    dead = subprocess.Popen([sys.executable, '-c', 'pass'])
    dead.wait()
    folder = world.www / 'nights' / 'n2'
    folder.mkdir(parents=True)
    (folder / 'night.json').write_text(json.dumps({
        'run_id': rid, 'started': _at(world.clock.n)[:19], 'status':
        'running', 'lines': [], 'pid': dead.pid,
        'host': socket.gethostname()}))
    assert world('n3', [('pass', CASE)]) == 1
    out = _out(capsys)
    night3 = json.loads((world.www / 'nights' / 'n3' / 'night.json')
                        .read_text())['run_id']
    assert out[1:4] == [f'never told, from run {rid} (night n2 killed):',
                        f'  CRASH {CASE}: crash: recorded by the test',
                        f'recovered: {CASE}: pass in run {night3} (told '
                        f'crash in run {rid})']
    night2 = json.loads((folder / 'night.json').read_text())
    assert night2['status'] == 'killed' and \
        night2['lines'][-1].startswith('KILLED: the nightly (pid ')
    assert world('n4', [('pass', CASE)]) == 0
    out = _out(capsys)
    assert 'all clear, nothing new' in out[0] and len(out) == 2


def test_nothing_measured_names_why_and_links_no_page(world, capsys,
                                                       monkeypatch):
    """Every case skipped: exit 2 with the skip reason; nothing recorded
    at all and no GPU: the cause, no page line, no latest link."""
    assert world('n1', [('skipped', CASE), ('skipped', OTHER)]) == 2
    out = _out(capsys)
    assert 'NOTHING MEASURED: every case skipped' in out[0]
    assert out[1] == (f'not measured (skipped: needs at least 2 GPUs): '
                      f'{CASE}, {OTHER}')
    monkeypatch.delenv('CCL_HEALTH_ASSUME_GPUS', raising=False)
    monkeypatch.setenv('PATH', '/nonexistent')
    assert world('n2', [], str(world.www.parent / 'never.db')) == 2
    out = _out(capsys)
    assert out == [
        'ccl-health nightly local:gpu n2: NOTHING MEASURED: no GPU found '
        '(nvidia-smi: not installed; rocminfo: not installed): scripts/run '
        'made a dry run (job scripts rendered, '
        f'nothing run); see {world.www}/nights/n2/run.log (0 cases; '
        'nothing told before)']
    assert not (world.www.parent / 'never.db').exists()
    assert not (world.www / 'nights' / 'n2' / 'index.html').exists()
    assert os.readlink(world.www / 'latest') == 'nights/n1'


# -- the main command dies with the nightly -----------------------------------

def test_the_main_command_gets_sigterm_when_the_nightly_is_killed(tmp_path):
    """``kill -9`` to a process running the nightly's child: the child gets
    its parent-death signal (SIGTERM) and ends."""
    pidfile = tmp_path / 'child.pid'
    child = (f'import os, signal, time\n'
             f'signal.signal(signal.SIGTERM, lambda *a: '
             f'(open({str(tmp_path / "got")!r}, "w").write("TERM"), '
             f'os._exit(143)))\n'
             f'open({str(pidfile)!r}, "w").write(str(os.getpid()))\n'
             f'time.sleep(600)\n')
    parent = (f'from ccl_health import nightly\n'
              f'nightly._run_child([{sys.executable!r}, "-c", {child!r}], '
              f'None, {str(tmp_path / "log")!r})\n')
    p = subprocess.Popen([sys.executable, '-c', parent])
    try:
        for _ in range(600):
            if pidfile.exists() and pidfile.read_text():
                break
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        p.send_signal(signal.SIGKILL)
        p.wait()
        got = tmp_path / 'got'
        for _ in range(600):
            # open() creates the file before write() fills it: wait for it
            # to be filled, not only to exist
            if got.exists() and got.read_text():
                break
            time.sleep(0.05)
        assert got.read_text() == 'TERM'
    finally:
        if p.poll() is None:
            p.kill()
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail('the child outlived the killed nightly')


# -- PostgreSQL ---------------------------------------------------------------

def test_the_ledger_on_postgresql(pg_server):
    """The same ledger on the real PostgreSQL of the tests: a new
    failure, a worse band, a killed night, a recovery: each told once."""
    from helpers import postgres
    with store.open_store(postgres.fresh(pg_server, 'ledger')) as s:
        record(s, 'nightly-001', 1)
        record(s, 'nightly-002', 2, 'below-reference', {M64: 1.2, M128: REF})
        record(s, 'nightly-003', 3, 'below-reference', {M64: 0.09,
                                                        M128: REF})
        record(s, 'nightly-004', 4)
        record(s, 'nightly-005', 5)
        m = [mail(s, 1), mail(s, 2), mail(s, 3, tell=False), mail(s, 4),
             mail(s, 5)]
        told = m[:2] + m[3:]
        assert [x.code for x in told] == [0, 1, 1, 0]
        assert told[2].lines[1] == \
            'never told, from run nightly-003 (ended before its mail):'
        assert told[2].lines[2].startswith(f'  WORSE BELOW-REFERENCE {CASE}')
        assert told[2].lines[3].startswith(f'recovered: {CASE}: pass')
        assert _count(told, 'WORSE ') == 1 and \
            _count(told, 'recovered: ') == 1
        assert len(ledger.told_nights(s, 'local', 'gpu')) == 5


# -- issue 41, class 4: one teller per database and system:partition ------

def test_two_nightlies_of_one_database_tell_a_new_failure_once(tmp_path):
    """Two nightlies of one database (each its own --publish folder) read
    the same new crash; the second waits for the first's ledger and reads
    its news again: the crash is told once."""
    import threading
    path = str(tmp_path / 'shared.db')
    with store.open_store(path) as db:
        record(db, 'nightly-001', 1)
        mail(db, 1)
        record(db, 'nightly-002', 2, verdict='crash', reason='crash: rank 1')
        record(db, 'nightly-003', 2, verdict='crash', reason='crash: rank 1')
    shown, inside, go = {}, threading.Event(), threading.Event()

    def nightly_of(rid, first):
        with store.open_store(path, timeout=60) as db:
            mark = ledger.mark(db)
            told = news.night(db, rid, 'local', 'gpu', rid)
            if not first:
                inside.wait(30)         # the first holds the ledger now
                go.set()

            def show(n):
                shown[rid] = list(n.lines)
                if first:
                    inside.set()
                    go.wait(30)         # the second reads, then waits
                    time.sleep(0.3)
            news.tell(db, told, rid, scope=('local', 'gpu'), show=show,
                      mark=mark, read_again=lambda: news.night(
                          db, rid, 'local', 'gpu', rid))
    a = threading.Thread(target=nightly_of, args=('nightly-002', True))
    b = threading.Thread(target=nightly_of, args=('nightly-003', False))
    a.start()
    b.start()
    a.join(60)
    b.join(60)
    told_crash = [rid for rid, lines in shown.items()
                  if any(ln.startswith('NEW') or 'CRASH' in ln and
                         'told as' not in ln for ln in lines)]
    assert sorted(shown) == ['nightly-002', 'nightly-003'], shown
    assert told_crash == ['nightly-002'], shown
    with store.open_store(path, readonly=True) as db:
        crash_rows = [r for r in ledger.told(db, 'local')
                      if r['state'] == 'failing']
    assert len(crash_rows) == 1, crash_rows


def test_a_nightly_killed_before_its_mail_tells_it_next_night(tmp_path):
    """The mail is appended, printed and committed in one transaction: a
    nightly that dies before it printed (here: an error raised where it
    prints) recorded nothing, and the next night tells the crash."""
    path = str(tmp_path / 'perf.db')
    with store.open_store(path) as db:
        record(db, 'nightly-001', 1)
        mail(db, 1)
        record(db, 'nightly-002', 2, verdict='crash', reason='crash: rank 1')
        told = news.night(db, 'nightly-002', 'local', 'gpu', 'n2')

        def dies(_):
            raise KeyboardInterrupt     # the kill, before anything printed
        with pytest.raises(KeyboardInterrupt):
            news.tell(db, told, 'nightly-002', scope=('local', 'gpu'),
                      show=dies, mark=ledger.mark(db))
        assert [r for r in ledger.told(db, 'local') if r['state'] == 'failing'] == []
        record(db, 'nightly-003', 3, verdict='crash', reason='crash: rank 1')
        m3 = news.night(db, 'nightly-003', 'local', 'gpu', 'n3')
    assert sum('CRASH' in ln for ln in m3.lines) >= 1, m3.lines
