"""The nightly validation end to end, with real components: the two-node
Slurm of tests/helpers/slurm_cluster.py (network namespaces,
``ScronParameters=enable``) where a real ``scrontab`` entry fires the README's line (the
client built from Debian's source where slurm-client lacks it,
tests/helpers/scrontab_build.py; sbatch, with a warning, where that fails), a
PostgreSQL server of the test on the cluster's bridge, the sweep of
``--mode nightly`` through sbatch / srun against the replay stand-in
(tests/replay) replaying the project's own H100 captures of a graded drift
(tests/fixtures/device/drift-graded: healthy runs, then
``NCCL_BUFFSIZE=3932160`` at -9..-11 %), the page published and read back
in headless Chromium, and the mail text; then an aborted night (SIGTERM
while its job runs), the night after it, the lock.  docs/nightly.md's
scrontab block, read at test time and changed only where this machine
differs (:func:`doc_scrontab`), fires as Slurm's cron job on its
``service`` partition and pipes the night into a stand-in ``mail``.

History before the nights is the same capture series, recorded as earlier
runs of the same case (copies of night 1's own record with the captured
busbw): 23 healthy runs before night 1, two degraded ones between night 1
and night 2, so night 2 is the third degraded run, where the drift detector
flags it (tests/test_drift.py).  Without Slurm (local scheduler, SQLite):
``scripts/run``'s closing history lines and exit code, a new failure and a
continuing one, a database out of reach."""

import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import warnings

import pytest
import yaml

from conftest import REPO
from helpers import doccommands
from helpers.ports import free_ports
from helpers.procs import wait_until
from ccl_health.db import recorder, store
from ccl_health.evidence import nccltests

pytest.importorskip('reframe')
psycopg = pytest.importorskip('psycopg')
from helpers.replay import make_site  # noqa: E402

DRIFT = os.path.join(REPO, 'tests', 'fixtures', 'device', 'drift-graded',
                     'raw')
CAP = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap')
BUFF = '3932160'          # NCCL_BUFFSIZE of the buff3750k runs
CASE = 'AllReduceSweep %transport=net-socket'
#: the test's reference of the net-socket sweep: the healthy medians of the
#: captures; the shipped tolerance of net-socket
REF = {64 << 20: 1.85, 128 << 20: 1.86, 256 << 20: 1.86}
TOLERANCE = 0.35


def _raw(n):
    [f] = [x for x in os.listdir(DRIFT) if x.startswith(f'{n:03d}-')]
    return os.path.join(DRIFT, f)


def make_world(tmp):
    """Site, references and replay captures of the test: the net-socket
    sweep replays drift-graded run N (``CCL_HEALTH_REPLAY_NET_SOCKET=rN``)
    with the NET/Socket debug logs of cap/net-socket."""
    site = make_site(tmp)
    caps = tmp / 'caps'
    for n in (24, 25, 34, 35):
        d = caps / f'r{n}'
        d.mkdir(parents=True)
        shutil.copy(_raw(n), d / 'stdout.txt')
        (d / 'rc.txt').write_text('rc=0 wall=7\n')
        for log in os.listdir(os.path.join(CAP, 'net-socket')):
            if log.startswith('nccl-debug'):
                shutil.copy(os.path.join(CAP, 'net-socket', log), d / log)
    refdir = tmp / 'reference'
    refdir.mkdir()
    ref = yaml.safe_load(open(os.path.join(REPO, 'reference', 'local.yaml')))
    for part in ref['partitions'].values():
        for e in part.get('entries', part if isinstance(part, list) else []):
            if isinstance(e, dict) and e.get('transport') == 'net-socket' \
                    and e.get('collective') == 'all_reduce':
                e['busbw'] = {'64MiB': 1.85, '128MiB': 1.86, '256MiB': 1.86}
                e['tolerance'] = TOLERANCE
                e.pop('tolerances', None)
    (refdir / 'local.yaml').write_text(yaml.safe_dump(ref))
    return site, str(refdir), str(caps)


def nightly_env(tmp, site, refdir, caps, db, extra=None):
    env = dict(os.environ, CCL_HEALTH_ASSUME_GPUS='2:sm_90',
               CCL_HEALTH_SITE_DIR=site, CCL_HEALTH_REFERENCE_DIR=refdir,
               CCL_HEALTH_REPLAY_DIR=caps, CCL_HEALTH_DB=db,
               CCL_HEALTH_CACHE=str(tmp / 'cache'),
               CCL_HEALTH_OUTPUT=str(tmp / 'out'),
               CCL_HEALTH_PUBLISH=str(tmp / 'www'))
    env.pop('NCCL_BUFFSIZE', None)
    env.update(extra or {})
    return env


#: the nightly's command line as the README gives it, less the sweep's
#: narrowing (one transport, the sizes of the captures) the test adds
LINE = [os.path.join(REPO, 'scripts', 'nightly'), '--system', 'local',
        '--partition', 'gpu', '--account', 'ccl']
NARROW = ['--', '-n', 'AllReduceSweep%transport=net-socket', '-S',
          'min_size=64M', '-S', 'max_size=256M']


def nightly(env, *extra, timeout=300):
    return subprocess.run(LINE + list(extra) + NARROW, env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def seed(db_url, template, runs):
    """Record ``runs`` [(run_id, time, raw run N, env)] as copies of the
    case row ``template`` with the captured busbw of drift-graded run N."""
    versions = json.loads(template['versions_json'] or '{}')
    with store.open_store(db_url) as db:
        for run_id, when, n, env in runs:
            res = nccltests.parse_text(open(_raw(n)).read())
            sizes = recorder.sizes_from_sweep(res)
            for s in sizes:     # judged as the sweep judges: its reference
                s.ref, s.tolerance = REF[s.size], TOLERANCE
                s.verdict = recorder.size_verdict(s.busbw, s.ref, TOLERANCE)
            base = json.loads(template['env_json'] or '{}')
            base.pop('NCCL_BUFFSIZE', None)
            base.update(env)
            db.add_case(store.CaseRecord(
                run_id, template['case_name'], 'pass', time=when,
                system=template['system'], partition=template['partition'],
                environ=template['environ'], nodelist=template['nodelist'],
                nodes=template['nodes'], ranks=template['ranks'],
                collective=template['collective'],
                transport=template['transport'], proven=template['proven'],
                algo=template['algo'], versions=versions, env=base,
                suite_revision=template['suite_revision'] or '',
                source='seed', sizes=sizes))


def _shift(iso, seconds):
    import datetime
    t = datetime.datetime.fromisoformat(iso) + \
        datetime.timedelta(seconds=seconds)
    return t.isoformat(timespec='seconds')


def nights_case(db_url):
    with store.open_store(db_url, readonly=True) as db:
        return [c for c in db.cases() if c['source'] != 'seed']


def _mail(p):
    return [ln for ln in p.stdout.splitlines() if ln.strip()]


# -- Slurm ------------------------------------------------------------------

@pytest.fixture(scope='module')
def slurm(tmp_path_factory):
    """The multi-node Slurm of tests/helpers/slurm_cluster.py (two nodes,
    each in a network namespace of its own), with Slurm's cron enabled."""
    from helpers import slurm_cluster
    # 4 CPUs a node: Slurm's cron job (1 CPU) and the sweep it submits
    # (2 ranks) fit on the first node together, so night 1's sweep lands
    # on the node of the later nights (with 2 CPUs it went to the other
    # node, and night 2's mail said 'changed: nodes: n02 -> n01')
    c = slurm_cluster.started(tmp_path_factory.mktemp('nightly-slurm'),
                              nodes=2, cpus=4, scron=True,
                              partitions=('service',))
    yield c
    left = c.stop()
    assert not left, f'left behind: {left}'


@pytest.fixture(scope='module')
def pg_bridge(slurm):
    """A PostgreSQL server of the test that the cluster's nodes reach: it
    listens on the cluster's bridge address (a node's 127.0.0.1 is its
    own namespace's)."""
    from helpers import postgres
    pgbin = postgres.pg_bin()
    if pgbin is None:
        pytest.skip('PostgreSQL is not installed')
    [port] = free_ports(1)
    yield from postgres.postgres_server(pgbin, slurm.ctl_addr, port,
                                   trust_net=slurm.net)


@pytest.fixture(scope='module')
def scrontab(slurm):
    """Slurm's ``scrontab`` client: on PATH, else built from Debian's
    source package of the installed slurm-client
    (tests/helpers/scrontab_build.py, cached under
    ~/.cache/ccl-health/scrontab/).  Where that fails (no
    network, not Debian) the night goes in with sbatch, and the test says
    so in a warning, never silently.  Returns (path or None, note)."""
    from helpers import scrontab_build
    where, note = scrontab_build.ensure_scrontab(slurm.env()['PATH'])
    print(note)
    if where is None:
        warnings.warn(f'night 1 goes in with sbatch, not through Slurm\'s '
                      f'cron: {note}')
    return where, note


def slurm_extra(cluster):
    return {'SLURM_CONF': cluster.conf, 'PATH': cluster.env()['PATH'],
            'CCL_HEALTH_SCHEDULER': 'squeue', 'CCL_HEALTH_LAUNCHER': '',
            # the local system's ReFrame partition is gpu; Slurm's batch
            'CCL_HEALTH_SLURM_ACCESS': '-p batch'}


#: the environment the cron line carries (a site sets these in its site
#: file or profile; the test's folders and cluster)
CRON_ENV = ('SLURM_CONF', 'PATH', 'CCL_HEALTH_SCHEDULER',
            'CCL_HEALTH_LAUNCHER', 'CCL_HEALTH_SLURM_ACCESS',
            'CCL_HEALTH_ASSUME_GPUS', 'CCL_HEALTH_SITE_DIR',
            'CCL_HEALTH_REFERENCE_DIR', 'CCL_HEALTH_REPLAY_DIR',
            'CCL_HEALTH_DB', 'CCL_HEALTH_CACHE', 'CCL_HEALTH_OUTPUT',
            'CCL_HEALTH_PUBLISH', 'CCL_HEALTH_REPLAY_NET_SOCKET')


def scron_fire(cluster, env, scron, tabfile, tab, fired, timeout=150):
    """``tab`` (a crontab's text, written to ``tabfile``) installed with
    the ``scrontab`` client ``scron`` under ``env`` (its job starts in that
    environment's ``HOME``), then, once ``fired()`` is true or ``timeout``
    passed, Slurm's record of the jobs (``scontrol -o show job``) read
    while the entry is still there (its job still Slurm's cron job), and
    the entry removed.  Returns that record."""
    tabfile.write_text(tab)
    p = subprocess.run([scron, str(tabfile)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    try:
        wait_until(fired, timeout, step=1)
        return cluster.run('scontrol', '-o', 'show', 'job').stdout
    finally:
        subprocess.run([scron, '-r'], env=env, capture_output=True,
                       timeout=60)


def cron_night(cluster, env, night, mailfile, scron, timeout=150):
    """One night fired by Slurm's cron: a real ``scrontab`` entry (every
    minute; removed once it ran) whose command is the nightly line.  Where
    there is no scrontab client (``scron`` None: Debian's slurm-client
    22.05 does not ship it and building it failed), the same line goes in
    with sbatch.  Returns (how it went in, the job's scontrol line, the
    mail)."""
    cmd = 'cd {} && env {} {}'.format(
        shlex.quote(REPO),
        ' '.join(f'{k}={shlex.quote(env[k])}' for k in CRON_ENV if k in env),
        ' '.join(shlex.quote(w) for w in LINE + ['--night', night] + NARROW))

    def mailed():
        return mailfile.exists() and 'page: ' in mailfile.read_text()
    if scron:
        state = scron_fire(
            cluster, env, scron, mailfile.parent / 'crontab',
            f'#SCRON -p batch -A ccl -t 10 --output={mailfile}\n'
            f'* * * * * {cmd}\n', mailed, timeout)
        how = 'scrontab'
    else:
        p = subprocess.run(['sbatch', '-p', 'batch', '-A', 'ccl', '-t', '10',
                            f'--output={mailfile}', '--wrap', cmd],
                           env=env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        how = 'sbatch'
        wait_until(mailed, timeout, step=1)
        state = cluster.run('scontrol', '-o', 'show', 'job').stdout
    return how, state, mailfile.read_text() if mailfile.exists() else ''


def _chromium_dom(page):
    from helpers.pages import find_chromium, run_chromium
    return run_chromium(find_chromium(), '--dump-dom', page.as_uri())


@pytest.mark.slurm
def test_three_nights_through_slurm_postgres_and_the_page(
        slurm, pg_bridge, scrontab, tmp_path):
    from helpers import postgres
    pg_url = postgres.fresh(pg_bridge, 'nights')
    site, refdir, caps = make_world(tmp_path)
    base = nightly_env(tmp_path, site, refdir, caps, pg_url,
                       slurm_extra(slurm))
    www = tmp_path / 'www'
    # -- night 1, fired by Slurm's cron: healthy, no history yet
    how, jobs, mail = cron_night(slurm, dict(
        base, CCL_HEALTH_REPLAY_NET_SOCKET='r25'), 'night-1',
        tmp_path / 'mail-night-1.txt', scrontab[0])
    print(how, mail)
    # the path that fired: Slurm's cron whenever a scrontab client was had
    assert how == ('scrontab' if scrontab[0] else 'sbatch'), scrontab[1]
    cron_job = [j for j in jobs.splitlines() if 'night-1' in j]
    assert cron_job and 'Account=ccl' in cron_job[0] and \
        'Partition=batch' in cron_job[0], jobs
    if how == 'scrontab':
        assert 'CronJob=Yes' in cron_job[0], cron_job[0]
    else:
        assert 'CronJob=Yes' not in cron_job[0], cron_job[0]
    mail = [ln for ln in mail.splitlines() if ln.strip()]
    assert len(mail) == 2 and 'all clear, nothing new' in mail[0] and \
        '1 pass' in mail[0] and mail[1].startswith('page: '), mail
    [night1] = nights_case(pg_url)
    assert night1['verdict'] == 'pass' and night1['case_name'].startswith(CASE)
    # the sweep ran as a Slurm job of the partition and account asked for
    assert (www / 'latest').resolve() == (www / 'nights' / 'night-1')
    script = open(os.path.join(str(tmp_path / 'out' / 'stage'),
                               *_stage_rel(tmp_path / 'out'))).read()
    assert '#SBATCH -p batch' in script and '#SBATCH -A ccl' in script
    # history: 24 healthy runs before night 1, two degraded after it
    seed(pg_url, night1,
         [(f'seed-{n:02d}', _shift(night1['time'], -3600 * (30 - n)), n, {})
          for n in range(1, 24)] +
         [(f'seed-deg-{n}', _shift(night1['time'], n - 31), n,
           {'NCCL_BUFFSIZE': BUFF}) for n in (32, 33)])
    # -- night 2: the third degraded run: exactly the new drift
    p = nightly(dict(base, CCL_HEALTH_REPLAY_NET_SOCKET='r34',
                     NCCL_BUFFSIZE=BUFF), '--night', 'night-2')
    mail = _mail(p)
    print('\n'.join(mail))
    assert p.returncode == 1, p.stdout + p.stderr
    assert 'NEW: 0 new failure(s), ' in mail[0]
    drift = [ln for ln in mail if ln.startswith('DRIFT ')]
    assert drift and all('local/gpu/net-socket all_reduce 1n/2r' in ln
                         for ln in drift)
    changed = [ln.strip() for ln in mail if ln.startswith('    changed:')]
    assert f'changed: NCCL_BUFFSIZE: (unset) -> {BUFF}' in changed
    # beside the cause, only the node list may differ: ReFrame's squeue
    # backend learns a job's nodes only when a poll sees it running, and
    # the replay's job may end before (nodelist recorded as None)
    assert all(c == f'changed: NCCL_BUFFSIZE: (unset) -> {BUFF}' or
               re.fullmatch(r'changed: nodes: (None|\(unset\)) -> \S+|'
                            r'changed: nodes: \S+ -> (None|\(unset\))', c)
               for c in changed), changed
    assert len(mail) == 1 + len(drift) + len(changed) + 1
    # the page of night 2, in a browser: the drift and its cause are there
    dom = _chromium_dom(www / 'latest' / 'index.html')
    assert 'DRIFT' in dom and 'NCCL_BUFFSIZE' in dom
    index = _chromium_dom(www / 'index.html')
    assert 'night-1' in index and 'night-2' in index and 'DRIFT' in index
    # -- night 3: healthy again: all clear, the drift's recovery told once
    p = nightly(dict(base, CCL_HEALTH_REPLAY_NET_SOCKET='r24'),
                '--night', 'night-3')
    mail = _mail(p)
    print('\n'.join(mail))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f'all clear, {len(drift)} recovered' in mail[0]
    assert len(mail) == 2 + len(drift) and all(
        ln.startswith('recovered: DRIFT local/gpu/net-socket all_reduce '
                      '1n/2r ') for ln in mail[1:-1]), mail
    assert (www / 'latest').resolve() == (www / 'nights' / 'night-3')
    night3 = json.loads((www / 'nights' / 'night-3' / 'night.json')
                        .read_text())['run_id']
    # -- night 4: maintenance cancels it (SIGTERM to the nightly, as
    # scancel of its scrontab job does) while its sweep runs in Slurm
    proc = subprocess.Popen(
        LINE + ['--night', 'night-4'] + NARROW, cwd=REPO,
        env=dict(base, CCL_HEALTH_REPLAY_NET_SOCKET='r35',
                 CCL_HEALTH_REPLAY_SLEEP='120'),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 90
    while time.time() < deadline and 'RUNNING' not in slurm.run(
            'squeue', '-h', '-o', '%T').stdout:
        time.sleep(0.5)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    print(stdout)
    assert proc.returncode == 4, stdout + stderr
    mail = [ln for ln in stdout.splitlines() if ln.strip()]
    assert 'night-4: ABORTED (stopped by SIGTERM' in mail[0] and \
        '1 case(s) recorded as aborted' in mail[0], mail
    aborted = [c for c in nights_case(pg_url) if c['verdict'] == 'aborted']
    assert len(aborted) == 1 and aborted[0]['case_name'].startswith(CASE)
    assert 'aborted' in _chromium_dom(www / 'index.html')
    # -- night 5 compares with night 3, the last complete one
    p = nightly(dict(base, CCL_HEALTH_REPLAY_NET_SOCKET='r24'),
                '--night', 'night-5')
    mail = _mail(p)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f'vs run {night3})' in mail[0] and 'all clear' in mail[0]
    # the lock: a nightly while another holds it is skipped in one line
    from ccl_health import safefile
    with safefile.locked(str(www / '.nightly.lock'), blocking=False) as held:
        assert held
        p = nightly(base, '--night', 'night-6', timeout=60)
    assert p.returncode == 3 and _mail(p) == [
        f'ccl-health nightly: skipped: another nightly holds '
        f'{www / ".nightly.lock"}']
    assert not (www / 'nights' / 'night-6').exists()


# -- docs/nightly.md's scrontab block, as written -------------------------

def _once(text, old, new):
    """``text`` with ``old`` (in it exactly once: a doc that changed its
    line fails here, by name) replaced by ``new``."""
    assert text.count(old) == 1, f'{old!r} not once in:\n{text}'
    return text.replace(old, new)


def mail_standin(folder):
    """A folder holding ``mail``: it records its arguments (one a line,
    ``mail.argv``) and the message on its standard input (``mail.body``,
    written whole once the message ended)."""
    bindir = folder / 'mailbin'
    bindir.mkdir()
    (bindir / 'mail').write_text(
        '#!/bin/sh\n# stand-in mail of tests/test_nightly.py\n'
        f'printf \'%s\\n\' "$@" > {folder}/mail.argv\n'
        f'cat > {folder}/mail.body.part && '
        f'mv {folder}/mail.body.part {folder}/mail.body\n')
    (bindir / 'mail').chmod(0o755)
    return bindir


#: the variables of the test's world a scrontab job is given (a site has
#: them in its site files and on its machines): Slurm's job gets no
#: environment of its submitter (scrontab sends only
#: ``SLURM_GET_USER_ENV=1``: the owner's login environment), and starts in
#: the owner's home, where the database and the outputs would be without
#: ``CCL_HEALTH_DB`` / ``CCL_HEALTH_OUTPUT``: the test's folder instead
SCRON_ENV = tuple(k for k in CRON_ENV if k != 'CCL_HEALTH_PUBLISH')


def doc_scrontab(tmp, env, system='local'):
    """docs/nightly.md's scrontab block (read now), changed only where this
    machine differs, each change named:

    - ``--output=`` is a file of the test (``cron.log``);
    - the time fields ``* * * * *`` (it fires at the next minute), and
      the command starts with ``export`` of the test's world (``env``'s
      :data:`SCRON_ENV`: the cluster, the replay stand-ins, the stand-in
      ``mail`` first on ``PATH``);
    - ``/opt/ccl-health`` is this checkout;
    - ``--system frontier --partition batch`` is this cluster's ``local``
      system (``system``) and its ReFrame partition ``gpu``: Slurm's
      partition of its sweep is ``CCL_HEALTH_SLURM_ACCESS``;
    - ``--publish`` is a folder of the test, the sweep narrowed to the
      replay's captures after it (:data:`NARROW`).

    The ``#SCRON`` line's partition, account and time limit, the account
    of the nightly, its mode and the pipe into ``mail`` stay as written
    (the test's cluster has a ``service`` partition).  Returns (the
    crontab's text, the doc's block)."""
    [block] = [b for b in doccommands.page_blocks('nightly.md')
               if b.startswith('#SCRON')]
    tab = _once(block, '--output=/srv/ccl-health/cron.log',
                f'--output={tmp / "cron.log"}')
    exports = ' '.join(f'{k}={shlex.quote(env[k])}'
                       for k in SCRON_ENV if k in env)
    tab = _once(tab, '\n30 2 * * * ', f'\n* * * * * export {exports}; ')
    tab = _once(tab, '/opt/ccl-health/', REPO + '/')
    tab = _once(tab, '--system frontier --partition batch',
                f'--system {system} --partition gpu')
    tab = _once(tab, '--publish /srv/www/ccl-health',
                f'--publish {tmp / "www"} ' +
                ' '.join(shlex.quote(w) for w in NARROW))
    return tab, block


def _doc_mail_args(block):
    """The arguments the doc's line gives ``mail``."""
    line = block.splitlines()[1]
    return shlex.split(line.split('| mail ', 1)[1])


@pytest.mark.slurm
def test_the_docs_scrontab_block_runs_as_slurms_cron_job_and_mails(
        slurm, scrontab, tmp_path):
    if not scrontab[0]:
        pytest.skip(f'no scrontab client here: {scrontab[1]}')
    site, refdir, caps = make_world(tmp_path)
    db = tmp_path / 'ccl-health.db'
    env = nightly_env(tmp_path, site, refdir, caps, str(db), dict(
        slurm_extra(slurm), CCL_HEALTH_REPLAY_NET_SOCKET='r25'))
    env['PATH'] = f'{mail_standin(tmp_path)}{os.pathsep}{env["PATH"]}'
    tab, block = doc_scrontab(tmp_path, env)
    print(tab)
    body = tmp_path / 'mail.body'
    jobs = scron_fire(slurm, env, scrontab[0], tmp_path / 'crontab', tab,
                      body.exists, timeout=180)
    # Slurm's cron job, of the #SCRON line's partition, account, limit
    [cron] = [j for j in jobs.splitlines() if 'CronJob=Yes' in j]
    scron = dict(w.split('=', 1) for w in block.splitlines()[0].split()[1:]
                 if '=' in w)
    assert 'Partition=service ' in cron and 'Account=abc123 ' in cron and \
        'TimeLimit=04:00:00 ' in cron and \
        f'StdOut={tmp_path / "cron.log"}' in cron, cron
    assert scron['--output'] == '/srv/ccl-health/cron.log'
    # mail got the subject and the address of the doc, and the mail text:
    # the verdict line and the page, nothing else
    assert (tmp_path / 'mail.argv').read_text().splitlines() == \
        _doc_mail_args(block) == ['-s', 'ccl-health nightly',
                                  'ops@example.org']
    mail = [ln for ln in body.read_text().splitlines() if ln.strip()]
    print('\n'.join(mail))
    page = tmp_path / 'www' / 'nights'
    assert len(mail) == 2 and re.match(
        r'ccl-health nightly local:gpu \S+: all clear, nothing new \(1 '
        r'case: 1 pass', mail[0]) and mail[1].startswith(
            f'page: {page}{os.sep}'), mail
    # it started where the doc says a line without --db keeps its
    # database: the owner's home
    assert f'WorkDir={pwd.getpwuid(os.getuid()).pw_dir} ' in cron, cron
    [night] = nights_case(str(db))
    assert night['verdict'] == 'pass' and night['case_name'].startswith(CASE)
    # the --output file: what the line wrote outside the pipe (nothing
    # on a night that ran); the mail went to mail only
    assert (tmp_path / 'cron.log').read_text() == ''


def test_the_docs_scrontab_line_mails_why_a_night_could_not_run(tmp_path):
    """The command of the doc's scrontab line, as Slurm's job script runs
    it (``/bin/sh``), on a system no site has: the night cannot run, and
    its line (standard error) reaches the mail, not only the
    ``--output`` file."""
    env = dict(os.environ)
    env['PATH'] = f'{mail_standin(tmp_path)}{os.pathsep}{env["PATH"]}'
    tab, _ = doc_scrontab(tmp_path, env, system='nosuch')
    command = tab.splitlines()[1].split(None, 5)[5]    # after the time
    p = subprocess.run(['/bin/sh', '-c', command], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert (p.stdout, p.stderr) == ('', ''), p.stdout + p.stderr
    mail = (tmp_path / 'mail.body').read_text().splitlines()
    assert "no system 'nosuch'" in mail[0] and mail[-1].startswith(
        'ccl-health nightly: COULD NOT RUN: '), mail


def _stage_rel(out):
    for top, _, files in os.walk(out / 'stage'):
        if 'rfm_job.sh' in files:
            return [os.path.relpath(os.path.join(top, 'rfm_job.sh'),
                                    out / 'stage')]
    raise AssertionError('no job script')


# -- scripts/run ends with the history findings ---------------------------

def _run(env, *extra):
    cmd = [sys.executable, '-m', 'ccl_health.cli', 'run', '--output',
           env['CCL_HEALTH_OUTPUT']] + NARROW + list(extra)
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_run_ends_with_history_findings_and_exits_1_on_a_new_drift(
        tmp_path):
    site, refdir, caps = make_world(tmp_path)
    db = str(tmp_path / 'perf.db')
    base = nightly_env(tmp_path, site, refdir, caps, db,
                       {'CCL_HEALTH_LAUNCHER': 'local'})
    p = _run(dict(base, CCL_HEALTH_REPLAY_NET_SOCKET='r25'))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert 'history: no drop, drift or recovery against earlier runs (no ' \
        'earlier complete run)' in p.stdout
    with store.open_store(db, readonly=True) as s:
        [first] = s.cases()
    seed(db, first,
         [(f'seed-{n:02d}', _shift(first['time'], -3600 * (30 - n)), n, {})
          for n in range(1, 24)] +
         [(f'seed-deg-{n}', _shift(first['time'], n - 31), n,
           {'NCCL_BUFFSIZE': BUFF}) for n in (32, 33)])
    # the seeded degraded runs lie 1 and 2 s after the first run: the
    # next run must be measured after them (a case's time has a resolution
    # of one second) to compare with seed-deg-33; its run id is unique
    # whenever it starts (ccl_health/identity.py)
    import datetime
    last = datetime.datetime.fromisoformat(_shift(first['time'], 2))
    assert wait_until(lambda: datetime.datetime.now(
        datetime.timezone.utc) >= last + datetime.timedelta(seconds=1), 10)
    # the third degraded run: PASS against the reference (tolerance 35 %),
    # a new drift against history: exit 1
    p = _run(dict(base, CCL_HEALTH_REPLAY_NET_SOCKET='r34',
                  NCCL_BUFFSIZE=BUFF))
    print(p.stdout[-2500:])
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    tail = p.stdout.split('== ccl-health verdict ==')[1]
    assert 'net-socket' in tail and ' PASS ' in tail
    assert 'history: 3 finding(s), 3 new since run seed-deg-33:' in tail
    new = [ln for ln in tail.splitlines() if ln.startswith('NEW DRIFT ')]
    assert len(new) == 3 and all('local/gpu/net-socket all_reduce 1n/2r'
                                 in ln for ln in new)
    assert f'    changed: NCCL_BUFFSIZE: (unset) -> {BUFF}' in tail
    # the next run still low: the same drift again, nothing new: exit 0
    p = _run(dict(base, CCL_HEALTH_REPLAY_NET_SOCKET='r35',
                  NCCL_BUFFSIZE=BUFF))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    tail = p.stdout.split('== ccl-health verdict ==')[1]
    assert ', 0 new since run ' in tail and 'NEW ' not in tail
    assert tail.count('\nDRIFT local/gpu/net-socket') >= 1


def test_a_database_out_of_reach_is_could_not_run(tmp_path):
    """The site database cannot be reached: one line, exit 2 (never an
    all-clear, never "something new")."""
    [port] = free_ports(1)              # a port nothing listens on
    site, refdir, caps = make_world(tmp_path)
    url = f'postgresql://nobody@127.0.0.1:{port}/ccl'
    env = nightly_env(tmp_path, site, refdir, caps, url,
                      {'CCL_HEALTH_LAUNCHER': 'local',
                       'CCL_HEALTH_REPLAY_NET_SOCKET': 'r25'})
    p = nightly(env, '--night', 'n1', timeout=300)
    mail = _mail(p)
    assert p.returncode == 2, p.stdout + p.stderr
    assert mail[0].startswith('ccl-health nightly local:gpu n1: COULD NOT '
                              'RUN: cannot connect to ' + url), mail
    assert 'Traceback' not in p.stdout + p.stderr
    night = json.loads((tmp_path / 'www' / 'nights' / 'n1' / 'night.json')
                       .read_text())
    assert night['status'] == 'could-not-run' and night['exit'] == 2


def test_a_node_list_slurm_did_not_give_is_recorded_as_unknown():
    """ReFrame's squeue backend reports ``['None']`` for a job that ended
    before a poll saw it run (seen in the nightly test): recorded as no
    node list, never as a node named None."""
    assert recorder.known_nodelist(['None']) == ''
    assert recorder.known_nodelist(['n01', 'n02']) == 'n01,n02'
    assert recorder.known_nodelist(None) == ''
    report = {'session_info': {'time_start': '2026-11-24T02:00:00'},
              'runs': [{'testcases': [{
                  'name': 'AllReduceSweep', 'display_name': CASE,
                  'result': 'pass', 'fixture': False, 'system': 'local',
                  'partition': 'gpu', 'job_nodelist': ['None'],
                  'transport': 'net-socket', 'collective': 'all_reduce'}]}]}
    [case] = recorder.cases_from_report(report, 'r1')
    assert case.nodelist == ''


def test_a_new_failure_is_one_line_and_a_continuing_one_is_not_repeated(
        tmp_path):
    """Without Slurm (the local scheduler), SQLite: night 1 healthy; night
    2 the sweep crashes (the replayed output cut in the middle, exit 1):
    one line naming it, exit 1; night 3 the same crash: nothing new, said
    as still failing (never "all clear"), exit 0."""
    site, refdir, caps = make_world(tmp_path)
    crash = tmp_path / 'caps' / 'crash'
    shutil.copytree(tmp_path / 'caps' / 'r25', crash)
    text = (crash / 'stdout.txt').read_text().splitlines(True)
    (crash / 'stdout.txt').write_text(''.join(
        ln for ln in text if not ln.strip().startswith(('134217728',
                                                       '268435456', '# Out',
                                                       '# Avg'))))
    (crash / 'rc.txt').write_text('rc=1 wall=3\n')
    db = str(tmp_path / 'perf.db')
    base = nightly_env(tmp_path, site, refdir, caps, db,
                       {'CCL_HEALTH_LAUNCHER': 'local'})
    p = nightly(dict(base, CCL_HEALTH_REPLAY_NET_SOCKET='r25'),
                '--night', 'n1')
    assert p.returncode == 0 and 'all clear' in _mail(p)[0], p.stdout
    p = nightly(dict(base, CCL_HEALTH_REPLAY_NET_SOCKET='crash'),
                '--night', 'n2')
    mail = _mail(p)
    print('\n'.join(mail))
    assert p.returncode == 1, p.stdout + p.stderr
    assert 'NEW: 1 new failure(s), 0 new finding(s)' in mail[0]
    assert len(mail) == 3 and mail[1].startswith('CRASH ' + CASE), mail
    p = nightly(dict(base, CCL_HEALTH_REPLAY_NET_SOCKET='crash'),
                '--night', 'n3')
    mail = _mail(p)
    print('\n'.join(mail))
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(mail) == 2 and 'nothing new, still failing from earlier ' \
        'nights: 1 failure(s), 0 finding(s)' in mail[0] and \
        'all clear' not in mail[0], mail
