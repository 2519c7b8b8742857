"""Issue 28's soak: the nightly's news over many nights, each change told
exactly once, on the night it first shows (or, for a night that never
mailed, the first night after), and nothing told twice.

Two parts, each run on SQLite and on the tests' real PostgreSQL
(tests/test_store_postgres.py's server):

* the recorded nights (:func:`test_a_soak_of_recorded_nights`): 62 nights
  of the nightly's news logic in-process (:func:`ccl_health.news.night`
  then :func:`ccl_health.news.tell`, as the nightly calls them), each
  night's cases recorded with the project's recorder from the recorded
  device series (tests/fixtures/device/drift-graded: the net-socket key,
  healthy and ``NCCL_BUFFSIZE`` steps; tests/fixtures/device/drift: its
  healthy runs replayed as a second key, the one a lost GPU skips), scaled
  with the rehearsal's own row writer for a collapse.  A calibration
  (``scripts/calibrate --db``) after night 2, a drift right after it, a
  collapse, a worsening, a crash, a hang, recoveries, a night whose mail
  was never printed, skipped nights, nothing recorded, a second drift, an
  accept (``scripts/report accept``) and the refusal of a crash run;
* the nights end to end (:func:`test_nights_end_to_end`): real
  ``scripts/nightly --rehearse`` processes on the same database kind:
  healthy, drift, collapse, crash, a night killed with ``kill -9`` while
  its job runs, the night after it, a GPU lost
  (``CCL_HEALTH_ASSUME_GPUS=1:sm_90``), a full disk on publish (a small
  tmpfs filled up) and the night after it, and (SQLite) a hang.

Each night's mail is read back into (kind, key, size) items and compared
with the expected news of the night (the script); ``not measured`` lines
are per night (they are said each night a case is missing), every other
item is a change and appears in exactly one night of the script."""

import os
import re
import signal
import subprocess
import time

import pytest

from conftest import REPO
from ccl_health import cli, news
from ccl_health.db import ledger, store
from helpers.drift import DRIFT, GRADED
from helpers.nights import A, B, SIZES, TOL, WHERE, Series, rid, told

#: the system tier (tests/conftest.py): nights end to end: ReFrame runs and the nightly's mail
pytestmark = pytest.mark.system

BUFF = {'NCCL_BUFFSIZE': '4063232'}
LOST = 'intra needs at least 2 GPUs; this partition has 1 per node x 1'
NIGHTLY = os.path.join(REPO, 'scripts', 'nightly')


# -- reading a mail back ------------------------------------------------------

def check_script(script, mails):
    """Every night's mail told what the script says; every change (all
    but ``not measured``) appears once in the whole script."""
    for n, lines in mails.items():
        assert told(lines) == script.get(n, set()), (n, lines)
    # a change told again on a later night is a change again (it went
    # away in between: recovered, or told as another kind)
    nights = sorted(mails)
    for i, n in enumerate(nights):
        for item in told(mails[n]):
            if item[0] != 'not measured':
                assert not any(item in told(mails[m])
                               for m in nights[i + 1:i + 4]), (item, n)


def drift(key, *sizes):
    return {('drift', WHERE[key], s) for s in sizes or SIZES}


def recovered_finding(kind, key, *sizes):
    return {('recovered', kind, WHERE[key], s) for s in sizes or SIZES}


# -- the recorded nights -----------------------------------------------------




def test_a_soak_of_recorded_nights(db_url, tmp_path, capsys):
    a = Series(A, 'net-socket', GRADED)
    b = Series(B, 'intra', DRIFT)
    script, mails, codes, want = {}, {}, {}, {}
    state = {'hA': 0, 'hB': 0}

    def healthy(key, n):
        series, k = (a, 'hA') if key is a else (b, 'hB')
        state[k] += 1
        return series.case(rid(n), n, i=state[k] - 1)

    def night(n, cases, expect=(), code=0, text='', tell=True, labels=None,
              cause=''):
        with store.open_store(db_url) as s:
            for c in cases:
                s.add_case(c)
            m = news.night(s, rid(n), 'local', 'gpu', f'night {n}',
                           cause=cause, labels=labels)
            if tell:
                news.tell(s, m, rid(n))
        script[n] = set(expect)
        print('\n'.join(m.lines))
        if tell:
            mails[n] = m.lines
            codes[n], want[n] = m.code, code
            assert m.code == code, (n, m.lines)
            assert text in m.lines[0], (n, m.lines)
        return m

    def db(*args):
        return cli.main(['--prog', 'scripts/report', 'db', '--db', db_url,
                         *args])

    # nights 1-2, then the calibration of both keys from them
    night(1, [healthy(a, 1), healthy(b, 1)],
          text='all clear, nothing new (2 cases: 2 pass; nothing told')
    night(2, [healthy(a, 2), healthy(b, 2)], text='all clear, nothing new')
    (tmp_path / 'ref').mkdir()
    assert cli.main(['calibrate', '--db', db_url, '--system', 'local',
                     '--partition', 'gpu', '--reference-dir',
                     str(tmp_path / 'ref'), '--tolerance', str(TOL),
                     '--min-size', '64M']) == 0
    assert 'recorded the baseline of 2 configuration(s)' in \
        capsys.readouterr().out
    for n in range(3, 8):
        night(n, [healthy(a, n), healthy(b, n)], text='all clear, nothing')
    # a few-percent step right after calibration (NCCL_BUFFSIZE: -11 % at
    # 64 MiB, -6 % above): a pass against the reference, a drift told on
    # its third night with what changed, not before, not again
    for i, n in enumerate(range(8, 12)):
        expect = drift(A) if n == 10 else set()
        m = night(n, [a.case(rid(n), n, label='buff3875k', i=i, env=BUFF),
                      healthy(b, n)], expect, code=1 if n == 10 else 0,
                  text='NEW: 0 new failure(s), 3 new finding(s)' if n == 10
                  else 'nothing new, still failing from earlier nights: 0 '
                  'failure(s), 3 finding(s)' if n == 11 else 'all clear')
        if n == 10:
            assert '    changed: NCCL_BUFFSIZE: (unset) -> 4063232' in \
                m.lines
    # back at the level: the drift recovered, told once
    night(12, [healthy(a, 12), healthy(b, 12)],
          recovered_finding('drift', A), text='all clear, 3 recovered')
    for n in range(13, 17):
        night(n, [healthy(a, n), healthy(b, n)], text='all clear, nothing')
    # a collapse to -40 %: below the reference and a drop; the next night
    # the same: not told again
    m = night(17, [a.case(rid(17), 17, i=17, factor=0.6), healthy(b, 17)],
              {('failing', 'below-reference', A),
               ('drop', WHERE[A], '64MiB..256MiB')}, code=1,
              text='NEW: 1 new failure(s), 3 new finding(s)')
    night(18, [a.case(rid(18), 18, i=18, factor=0.6), healthy(b, 18)],
          text='nothing new, still failing from earlier nights: 1 '
          'failure(s), 3 finding(s)')
    # worse: -95 % moves every size to a worse band: told once
    night(19, [a.case(rid(19), 19, i=19, factor=0.05), healthy(b, 19)],
          {('worse', A, s) for s in SIZES}, code=1, text=', 1 worse')
    night(20, [a.case(rid(20), 20, i=20, factor=0.05), healthy(b, 20)],
          text='nothing new, still failing')
    # a failure of another kind, then the recovery of all of it
    night(21, [a.case(rid(21), 21, 'crash'), healthy(b, 21)],
          {('failing', 'crash', A)}, code=1, text='NEW: 1 new failure(s)')
    night(22, [healthy(a, 22), healthy(b, 22)],
          {('recovered', A)} | recovered_finding('drop', A),
          text='all clear, 4 recovered')
    for n in range(23, 27):
        night(n, [healthy(a, n), healthy(b, n)], text='all clear, nothing')
    night(27, [a.case(rid(27), 27, 'hang'), healthy(b, 27)],
          {('failing', 'hang', A)}, code=1)
    # night 28's nightly died before its mail (killed): night 29 tells
    # its news first, then its own
    night(28, [a.case(rid(28), 28, 'hang'), b.case(rid(28), 28, 'crash')],
          tell=False)
    night(29, [healthy(a, 29), healthy(b, 29)],
          {('failing', 'crash', B), ('recovered', A), ('recovered', B)},
          code=1, labels={rid(28): 'night 28 killed'})
    assert mails[29][1] == f'never told, from run {rid(28)} (night 28 ' \
        f'killed):'
    script[29] |= script.pop(28)
    # a GPU lost: the intra key skipped: exit 2, never all clear
    for n in (30, 31, 32):
        m = night(n, [healthy(a, n), b.case(rid(n), n, 'skipped',
                                            reason=LOST)],
                  {('not measured', B)}, code=2,
                  text=f'NOT ALL MEASURED: 1 case(s) of run {rid(29)} not '
                  f'measured; nothing new among the 1 measured')
        assert m.lines[1] == f'not measured (skipped: {LOST}): {B}'
    night(33, [a.case(rid(33), 33, 'skipped', reason=LOST),
               b.case(rid(33), 33, 'skipped', reason=LOST)],
          {('not measured', A), ('not measured', B)}, code=2,
          text='NOTHING MEASURED: every case skipped')
    night(34, [], {('not measured', A), ('not measured', B)}, code=2,
          cause='no GPUs found (no GPU on this machine)',
          text='NOTHING MEASURED: no GPUs found (no GPU on this machine)')
    night(35, [healthy(a, 35)], {('not measured', B)}, code=2,
          text='NOT ALL MEASURED')
    assert mails[35][1] == f'not measured (not selected): {B}'
    for n in range(36, 39):
        night(n, [healthy(a, n), healthy(b, n)], text='all clear, nothing')
    # a second step, on a key with a long history: told on its third night
    step = {'NCCL_BUFFSIZE': '3840000'}
    for i, n in enumerate(range(39, 43)):
        night(n, [a.case(rid(n), n, label='buff3750k', i=i, env=step),
                  healthy(b, n)], drift(A) if n == 41 else set(),
              code=1 if n == 41 else 0)
    # accepted: the level it measured is the baseline at once; the next
    # night at that level is all clear (the drift told as recovered)
    assert db('accept', rid(42), '--reason', 'soak: new buffer size') == 0
    night(43, [a.case(rid(43), 43, label='buff3750k', i=4, env=step),
               healthy(b, 43)], recovered_finding('drift', A),
          text='all clear, 3 recovered')
    night(44, [a.case(rid(44), 44, label='buff3750k', i=5, env=step),
               healthy(b, 44)], text='all clear, nothing new')
    # a crash run is not accepted
    night(45, [a.case(rid(45), 45, 'crash', env=step), healthy(b, 45)],
          {('failing', 'crash', A)}, code=1)
    assert db('accept', rid(45), '--reason', 'soak: not healthy') == 2
    assert 'is not healthy' in capsys.readouterr().err
    with store.open_store(db_url, readonly=True) as s:
        assert {x['run_id'] for x in s.acceptances()} == {rid(42)}
    for i, n in enumerate(range(46, 51)):
        night(n, [a.case(rid(n), n, label='buff3750k', i=i, env=step),
                  healthy(b, n)], {('recovered', A)} if n == 46 else set(),
              text='all clear')
    # -75 % of the accepted level: below the reference, and a drop against
    # the accepted values (no blind window after the accept)
    night(51, [a.case(rid(51), 51, label='buff3750k', i=0, factor=0.25,
                      env=step), healthy(b, 51)],
          {('failing', 'below-reference', A),
           ('drop', WHERE[A], '64MiB..256MiB')}, code=1)
    night(52, [a.case(rid(52), 52, label='buff3750k', i=1, env=step),
               healthy(b, 52)],
          {('recovered', A)} | recovered_finding('drop', A),
          text='all clear, 4 recovered')
    for i, n in enumerate(range(53, 57)):
        night(n, [a.case(rid(n), n, label='buff3750k', i=i + 2, env=step),
                  healthy(b, n)], text='all clear, nothing new')
    # the other key: a collapse, worse, recovered
    night(57, [a.case(rid(57), 57, label='buff3750k', i=0, env=step),
               b.case(rid(57), 57, i=57, factor=0.4)],
          {('failing', 'below-reference', B),
           ('drop', WHERE[B], '64MiB..256MiB')}, code=1)
    night(58, [a.case(rid(58), 58, label='buff3750k', i=1, env=step),
               b.case(rid(58), 58, i=58, factor=0.05)],
          {('worse', B, s) for s in SIZES}, code=1)
    # back: the case and the drop recovered, but at 128 MiB the recorded
    # value (-3.8 %, a slow run of that series) still makes the two
    # collapse nights a drift "sustained over 3 runs" tonight: that size's
    # recovery is told the night after (the first night it is clear)
    night(59, [a.case(rid(59), 59, label='buff3750k', i=2, env=step),
               healthy(b, 59)],
          {('recovered', B)} | recovered_finding('drop', B, '64MiB',
                                                 '256MiB'),
          text='nothing new, still failing from earlier nights: 0 '
          'failure(s), 1 finding(s); 3 recovered')
    night(60, [a.case(rid(60), 60, label='buff3750k', i=3, env=step),
               healthy(b, 60)], recovered_finding('drop', B, '128MiB'),
          text='all clear, 1 recovered')
    for n in range(61, 63):
        night(n, [a.case(rid(n), n, label='buff3750k', i=n % 6, env=step),
                  healthy(b, n)], text='all clear, nothing new')
    check_script(script, mails)
    assert len(mails) >= 60
    with store.open_store(db_url, readonly=True) as s:
        statuses = [x['status'] for x in ledger.told_nights(s, 'local', 'gpu')]
    assert len(statuses) == 62 and statuses.count('late') == 1
    assert statuses.count('partial') == 4 and statuses.count('nothing') == 2


# -- the nights end to end -------------------------------------------------

def _procs(*markers):
    """Pids of the processes whose command line holds every one of
    ``markers`` (this test's folders: nothing of another test)."""
    out = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as fp:
                cmdline = fp.read()
        except OSError:         # gone meanwhile
            continue
        if all(m.encode() in cmdline for m in markers):
            out.append(int(pid))
    return out


def _wait(cond, what, timeout=120):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f'waited {timeout} s for {what}'
        time.sleep(0.05)


class SmallDisk:
    """The published folder on a small tmpfs of its own (``fill`` makes
    it full, ``free`` frees it); where this host cannot mount one, a
    folder made read-only (not as root: root writes anyway)."""

    def __init__(self, path):
        self.path = path
        path.mkdir()
        r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=32m',
                            'tmpfs', str(path)], capture_output=True)
        self.tmpfs = r.returncode == 0
        if not self.tmpfs and os.geteuid() == 0:
            pytest.skip(f'no tmpfs mounted here ({r.stderr.decode()!r}) and '
                        f'root writes into a read-only folder')

    def fill(self):
        if not self.tmpfs:
            for d, _, _ in os.walk(self.path):
                os.chmod(d, 0o555)
            return 'Permission denied'
        with open(self.path / 'filler', 'wb', buffering=0) as fp:
            for chunk in (1 << 20, 4096, 1):
                try:
                    while True:
                        fp.write(b'\0' * chunk)
                except OSError:
                    pass
        return 'No space left on device'

    def free(self):
        if not self.tmpfs:
            for d, _, _ in os.walk(self.path):
                os.chmod(d, 0o755)
        elif (self.path / 'filler').exists():
            (self.path / 'filler').unlink()

    def close(self):
        self.free()
        if self.tmpfs:
            subprocess.run(['umount', '-l', str(self.path)],
                           capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    disk = SmallDisk(tmp_path / 'www')
    yield disk
    disk.close()


def test_nights_end_to_end(db_url, tmp_path, small_disk):
    """Real ``scripts/nightly --rehearse`` nights on one database and one
    published folder (a small tmpfs): each change told once; the killed
    night told by the next; the full disk: news printed, exit 1, not
    told again; the lost GPU: exit 2 with why."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('CCL_HEALTH_')}
    env.update(CCL_HEALTH_OUTPUT=str(tmp_path / 'out'))
    root = tmp_path / 'out' / 'rehearsal'
    www = small_disk.path
    script, mails, walls = {}, {}, {}
    postgres = db_url.startswith('postgresql://')

    def night(n, scenario, expect=(), code=0, text='', kill=False,
              **extra):
        cmd = [NIGHTLY, '--rehearse', scenario, '--db', db_url, '--publish',
               str(www), '--night', f'n{n:02d}']
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=dict(env, **extra), cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        if kill:
            # kill -9 to the nightly while its job runs (the stand-in
            # playing the night's capture)
            _wait(lambda: _procs(str(root / 'world'), 'all_reduce_perf'),
                  'the night\'s job')
            p.send_signal(signal.SIGKILL)
        out, err = p.communicate(timeout=300)
        # its main command dies with it and records its case aborted
        _wait(lambda: not _procs(str(root)), 'the night\'s processes')
        walls[n] = f'{scenario} {time.monotonic() - t0:.1f} s'
        lines = [ln for ln in out.splitlines() if ln.strip()]
        print(f'night {n} ({scenario}): exit {p.returncode}\n' +
              '\n'.join(lines))
        assert 'Traceback' not in out + err, out + err
        if kill:
            assert p.returncode == -signal.SIGKILL and lines == []
            return lines
        assert p.returncode == code, out + err
        assert re.match(rf'ccl-health nightly local:gpu \(rehearsal: '
                        rf'{scenario}\) n{n:02d}: ', lines[0]), lines
        assert text in lines[0], lines
        script[n], mails[n] = set(expect), lines
        return lines

    night(1, 'healthy', text='all clear, nothing new (1 case: 1 pass; '
          'nothing told before)')
    # -5 % once: inside the reference's tolerance, not yet a change
    night(2, 'drift', text='all clear, nothing new')
    night(3, 'collapse', {('failing', 'below-reference', A)}, code=1,
          text='NEW: 1 new failure(s), 0 new finding(s)')
    night(4, 'crash', {('failing', 'crash', A)}, code=1,
          text='NEW: 1 new failure(s)')
    # night 5: killed with kill -9 while its job runs: no mail at all;
    # night 6 tells it (nothing measured: its case aborted), once
    night(5, 'hang', kill=True)
    lines = night(6, 'healthy', {('lost night', 'night n05 killed'),
                                 ('recovered', A)},
                  text='all clear, 1 recovered')
    assert re.match(r'never told, from run nightly-\S+ \(night n05 killed\): '
                    r'nothing measured \(1 aborted: stopped by SIGTERM ',
                    lines[1]), lines
    with open(www / 'nights' / 'n05' / 'night.json') as fp:
        assert '"status": "killed"' in fp.read()
    # a GPU lost: every case skipped, exit 2 with why, never all clear
    lines = night(7, 'healthy', {('not measured', A)}, code=2,
                  text='NOTHING MEASURED: every case skipped',
                  CCL_HEALTH_ASSUME_GPUS='1:sm_90')
    assert lines[1].startswith('not measured (skipped: ') and \
        lines[1].endswith(f'): {A}'), lines
    # the disk of the published folder full: the news printed all the
    # same, exit 1, one line says what could not be published; the next
    # night (the disk freed) does not tell it again
    why = small_disk.fill()
    lines = night(8, 'collapse', {('failing', 'below-reference', A)},
                  code=1, text='NEW: 1 new failure(s)')
    small_disk.free()
    assert lines[-1].startswith('could not publish: ') and \
        why in lines[-1], lines
    assert not any(ln.startswith('page: ') for ln in lines)
    # the next night: the collapse is not told again; what is new is new:
    # the history has its 5 runs now (no calibration here): the drop
    # first shows tonight; and the rehearsal's -90 % sits on the edge of
    # the worst band: tonight's capture crosses it at 128 MiB (-89.7 %
    # then -90.3 %), told once as worse
    lines = night(9, 'collapse', {('worse', A, '128MiB'),
                                  ('drop', WHERE[A], '64MiB..256MiB')},
                  code=1, text='NEW: 0 new failure(s), 3 new finding(s), '
                  '1 worse')
    assert not any(ln.startswith('BELOW-REFERENCE') for ln in lines)
    if not postgres:          # the job's time limit ends it (~20 s)
        night(10, 'hang', {('failing', 'hang', A)}, code=1,
              text='NEW: 1 new failure(s)')
    check_script(script, mails)
    print('end-to-end nights:', walls)
