"""The health hook in a hostile environment (issue 20, and issue 19 class
1): each class of the issue through every door a site uses, i.e. the hook
itself (``python -m ccl_health.hook`` with the replay stand-ins of
tests/replay), the LBNL NHC check (site/nhc, run by the REAL NHC 1.4.3
from ../shared/mirror, with its watchdog) and the Slurm HealthCheckProgram
wrapper (site/slurm, with stand-ins of scontrol and logger).

The one rule of the matrix: a door drains (exit 1 / NHC fails / scontrol
drain) exactly when the node has a fault, and never says HEALTHY with
one."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import REPO
from helpers.procs import processes_with, wait_until
from helpers.node import CAP, FAKE, REPLAY, environ, wrong_1g
from helpers.hostile import FOREIGN_NVML, SLURM_WRAPPER, site_naming_replay
from helpers.nhc import nhc, run_nhc  # noqa: F401  (nhc: a fixture)
from helpers.warns import warn_samples

HOOK = [sys.executable, '-m', 'ccl_health.hook']
WRAPPER = os.path.join(REPO, 'scripts', 'ccl-health-check')
STD = ['--tests-prefix', REPLAY, '--launcher', os.path.join(FAKE, 'launch')]


# -- the cases: (name, fault of the node?, how to set it up) ---------------

def _replay_with(tmp_path, first=None):
    """A replay folder with the real intra capture, and ``first``: a
    mutation of it replayed on the first start only."""
    d = tmp_path / 'replay'
    shutil.copytree(os.path.join(CAP, 'intra'), d / 'intra')
    env = {'CCL_HEALTH_REPLAY_DIR': str(d)}
    if first:
        shutil.copytree(d / 'intra', d / 'mut')
        text = (d / 'mut' / 'stdout.txt').read_text()
        (d / 'mut' / 'stdout.txt').write_text(first(text))
        env.update(CCL_HEALTH_REPLAY_INTRA='mut',
                   CCL_HEALTH_REPLAY_ONCE=str(tmp_path / 'once'))
    return env


def _site_with(tmp_path, health_extra):
    """A copy of site/ whose local.yaml's health block has more keys."""
    d = tmp_path / 'site'
    shutil.copytree(os.path.join(REPO, 'site'), d)
    text = (d / 'local.yaml').read_text()
    text = text.replace('  launcher: mpirun --bind-to none -np\n',
                        '  launcher: mpirun --bind-to none -np\n' +
                        health_extra)
    (d / 'local.yaml').write_text(text)
    return {'CCL_HEALTH_SITE_DIR': str(d)}


def case_clean_env(tmp_path):
    # NCCL_P2P_DISABLE=1 makes the replayed run go over sockets: inherited
    # from the caller, it is dropped (named), and the node is healthy
    return {'NCCL_P2P_DISABLE': '1', 'NCCL_ALGO': 'Ring',
            'NCCL_PROTO': 'LL'}, []


def case_locked_db(tmp_path):
    db = tmp_path / 'locked.sqlite'
    return {'CCL_HEALTH_DB': str(db), 'LOCK_DB': str(db)}, []


def case_startup_limit(tmp_path):
    # the program prints nothing for 60 s: the limit left it no time to
    # start; never a hang
    return {'CCL_HEALTH_REPLAY_SLEEP': '60'}, ['--limit', '4']


def case_hang(tmp_path):
    return {'CCL_HEALTH_REPLAY_STALL': '60'}, ['--limit', '4']


def case_foreign_no_reference(tmp_path):
    nv = tmp_path / 'nvml'
    nv.mkdir()
    (nv / 'pynvml.py').write_text(FOREIGN_NVML)
    # a probe size the reference has no entry for: no reference
    env = _site_with(tmp_path, '  size: 3M\n')
    env.update(PYTHONPATH=f'{nv}{os.pathsep}{REPO}',
               FAKE_FOREIGN_PID=str(os.getpid()))
    return env, []


def case_dead_driver_known_count(tmp_path):
    b = tmp_path / 'deadbin'
    b.mkdir()
    (b / 'nvidia-smi').write_text(
        '#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t '
        'communicate with the NVIDIA driver. Make sure that the latest '
        'NVIDIA driver is installed and running."\nexit 9\n')
    (b / 'nvidia-smi').chmod(0o755)
    env = _site_with(tmp_path, '  gpus_per_node: 2\n')
    env['PATH'] = f'{b}{os.pathsep}{os.environ["PATH"]}'
    return env, []


def case_dead_driver_unknown_count(tmp_path):
    env, args = case_dead_driver_known_count(tmp_path)
    del env['CCL_HEALTH_SITE_DIR']
    return env, args


def case_fewer_gpus(tmp_path):
    env = _site_with(tmp_path, '  gpus_per_node: 2\n')
    env['CCL_HEALTH_FAKE_GPUS'] = '1'
    return env, []


def case_wrong_first_attempt(tmp_path):
    return _replay_with(tmp_path, first=wrong_1g), []


def case_huge_limit(tmp_path):
    return {}, ['--limit', '1e9']


def _site_edited(tmp_path, old, new):
    """A copy of site/ whose local.yaml has ``old`` replaced by ``new``."""
    d = tmp_path / 'site'
    shutil.copytree(os.path.join(REPO, 'site'), d)
    text = (d / 'local.yaml').read_text()
    assert old in text
    (d / 'local.yaml').write_text(text.replace(old, new, 1))
    return {'CCL_HEALTH_SITE_DIR': str(d)}


def case_site_match_all(tmp_path):
    # a match-all benign_warns (it would silence every fault): the site
    # file is refused, the healthy node is not drained
    return _site_edited(tmp_path, 'transports:\n', 'benign_warns: '
                        '[{pattern: ".*", why: x}]\ntransports:\n'), []


def case_site_ceiling_typo(tmp_path):
    # a ceiling below the reference (225 GB/s against 330.6): refused,
    # never every node drained as wrong-results
    return _site_edited(tmp_path, '  intra:\n    env: {}\n',
                        '  intra:\n    env: {}\n    ceiling: {links: 18, '
                        'link_gbps: 12.5}\n'), []


#: name: (setup, fault of the node?, verdict the hook gives, exit)
CASES = {
    'clean-env': (case_clean_env, False, 'pass', 0),
    'locked-db': (case_locked_db, False, 'pass', 0),
    'startup-limit': (case_startup_limit, False, 'could-not-check', 2),
    'hang': (case_hang, True, 'hang', 1),
    'foreign-no-reference': (case_foreign_no_reference, True, 'contended',
                             1),
    'dead-driver-known-count': (case_dead_driver_known_count, True,
                                'missing-gpu', 1),
    'dead-driver-unknown-count': (case_dead_driver_unknown_count, False,
                                  'could-not-check', 2),
    'fewer-gpus': (case_fewer_gpus, True, 'missing-gpu', 1),
    'wrong-first-attempt': (case_wrong_first_attempt, True, 'wrong-results',
                            1),
    'huge-limit': (case_huge_limit, False, None, 2),
    'site-match-all': (case_site_match_all, False, 'could-not-check', 2),
    'site-ceiling-typo': (case_site_ceiling_typo, False, 'could-not-check',
                          2),
}


def _setup(name, tmp_path):
    setup, fault, verdict, code = CASES[name]
    env, args = setup(tmp_path)
    return environ(tmp_path, env), args, fault, verdict, code


def _lock(path):
    """Hold ``path``'s SQLite database locked (another process writing)."""
    from ccl_health.db import store
    with store.open_store(path):
        pass
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute('BEGIN EXCLUSIVE')
    return conn


# -- door 1: the hook itself --------------------------------------------------

@pytest.mark.parametrize('name', sorted(CASES))
def test_hook(tmp_path, name):
    env, args, fault, verdict, code = _setup(name, tmp_path)
    lock = _lock(env['LOCK_DB']) if env.get('LOCK_DB') else None
    detail = tmp_path / 'detail.json'
    t0 = time.monotonic()
    try:
        p = subprocess.run(HOOK + STD + ['--json', str(detail)] + args,
                           env=env, capture_output=True, text=True,
                           timeout=120, cwd=str(tmp_path))
    finally:
        if lock:
            lock.close()
    wall = time.monotonic() - t0
    lines = p.stdout.splitlines()
    assert len(lines) == 1, (p.stdout, p.stderr)
    # the rule of the matrix
    assert (p.returncode == 1) == fault, (name, lines[0])
    # the line says what the exit says (docs/hook.md)
    assert lines[0].startswith({0: 'HEALTHY: ', 1: 'UNHEALTHY: ',
                                2: 'COULD-NOT-CHECK: '}[p.returncode]), \
        (name, p.returncode, lines[0])
    assert p.returncode == code, (name, lines[0], p.stderr)
    if verdict:
        assert json.loads(detail.read_text())['verdict'] == verdict, lines
    d = json.loads(detail.read_text()) if verdict else {}
    if name == 'clean-env':
        assert d['dropped_env'] == {'NCCL_ALGO': 'Ring', 'NCCL_PROTO': 'LL',
                                    'NCCL_P2P_DISABLE': '1'}
        assert lines[0].startswith('HEALTHY: all_reduce 1GiB on 2 GPUs')
    elif name == 'locked-db':
        # the line first, the recording given up within its bound and the
        # whole run inside NHC's default watchdog
        assert 'not recorded in the performance database' in p.stderr
        assert 'gave up' in d['recorded'] or 'locked' in d['recorded']
        assert wall < 20
    elif name == 'startup-limit':
        assert 'did not start within' in lines[0] and \
            '--limit 4 s' in lines[0], lines[0]
    elif name == 'foreign-no-reference':
        assert lines[0].startswith(
            f'UNHEALTHY: reset (a reboot is expected to clear it): GPU 1 in '
            f'use by pid {os.getpid()} '), lines[0]
        assert 'no reference' in lines[0]
    elif name == 'dead-driver-known-count':
        assert lines[0].startswith('UNHEALTHY: reset (a reboot is expected '
                                   'to clear it): missing GPU: '), lines[0]
        assert d['action'] == 'reset' and \
            d['cause'] == 'driver-not-answering', d
        # the driver's failure in the user's words, not nvidia-smi's
        assert 'no GPU found (nvidia-smi: no NVIDIA driver answered)' in \
            lines[0] and 'local:gpu has 2 GPUs' in lines[0], lines[0]
    elif name == 'dead-driver-unknown-count':
        assert lines[0].startswith('COULD-NOT-CHECK: no GPU found '
                                   '(nvidia-smi: '), lines[0]
    elif name == 'wrong-first-attempt':
        assert lines[0].startswith('UNHEALTHY: isolate: '), lines[0]
        assert 'wrong-results' in lines[0] and d['action'] == 'isolate'
        assert d['verdict'] == 'wrong-results', d
        assert d['attempt_notes'][0].startswith(
            'attempt 1 of 2: wrong-results'), d['attempt_notes']
        assert d['attempts'] == 1
    elif name == 'huge-limit':
        assert 'at most 86400' in lines[0]
    elif name == 'site-match-all':
        assert lines[0].startswith('COULD-NOT-CHECK: ') and \
            "local.yaml: benign_warns[0].pattern: '.*' matches any line" \
            in lines[0], lines[0]
    elif name == 'site-ceiling-typo':
        assert 'local.yaml: transports.intra.ceiling: 18 links x 12.5 GB/s' \
            ' = 225 GB/s is below the reference ' in lines[0], lines[0]


def test_no_database_named_records_nothing_where_it_runs(tmp_path):
    env = environ(tmp_path)
    del env['CCL_HEALTH_DB']
    env.pop('CCL_HEALTH_OUTPUT', None)
    p = subprocess.run(HOOK + STD + ['--json', str(tmp_path / 'd.json')],
                       env=env, capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout
    assert not (tmp_path / 'ccl-health-output').exists()
    assert 'no performance database named' in json.loads(
        (tmp_path / 'd.json').read_text())['recorded']
    help_ = subprocess.run(HOOK + ['--help'], env=env, capture_output=True,
                           text=True, timeout=60).stdout
    assert 'records nothing' in ' '.join(help_.split())


def _no_process_left(marker):
    return wait_until(lambda: not processes_with(marker), 5)


def _stop_signals_deliverable():
    """In the child: the stop signals at their default, whatever the test
    runner inherited (under ``nohup`` SIGHUP is ignored, and a shell cannot
    trap a signal ignored on entry: the wrapper would never see it)."""
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(s, signal.SIG_DFL)


@pytest.mark.parametrize('sig', ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGALRM'])
@pytest.mark.parametrize('cmd', ['hook', 'wrapper'])
def test_signal_in_a_probe_is_one_line_and_leaves_nothing(tmp_path, sig,
                                                          cmd):
    tmp = tmp_path / 'tmp'
    tmp.mkdir()
    kept = tmp_path / 'evidence'        # where the probes' folder is made
    env = environ(tmp_path, {'CCL_HEALTH_REPLAY_STALL': '60',
                             'TMPDIR': str(tmp),
                             'CCL_HEALTH_EVIDENCE_DIR': str(kept)})

    def work_folders():
        return [d / f for d in (tmp, kept) if d.is_dir()
                for f in os.listdir(d) if f.startswith(('ccl-health-',
                                                        'check-'))]
    p = subprocess.Popen((HOOK if cmd == 'hook' else [WRAPPER]) + STD +
                         ['--limit', '50'], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         start_new_session=True,
                         preexec_fn=_stop_signals_deliverable)
    # wait until the probe runs (its debug-log folder exists)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not [
            f for f in work_folders() if os.listdir(f)]:
        time.sleep(0.1)
    assert work_folders(), 'the probe never started'
    time.sleep(0.5)
    if cmd == 'wrapper' and sig == 'SIGALRM':
        os.killpg(p.pid, signal.SIGALRM)    # NHC's watchdog: the group
    else:
        p.send_signal(getattr(signal, sig))
    out, err = p.communicate(timeout=30)
    assert p.returncode == 2, (out, err)
    assert out == f'COULD-NOT-CHECK: stopped by {sig} before the check ' \
        f'finished\n', (out, err)
    assert _no_process_left(str(tmp_path)), 'a probe outlived the hook'
    # nothing of the probes is left; under a double stop (the wrapper passes
    # on the signal its group also got) an emptied evidence folder may
    # remain for a moment: it holds nothing and the next check prunes it
    left = [f for f in work_folders() if not f.name.startswith('check-')
            or any(os.scandir(f))]
    assert left == []


def test_sigterm_right_after_start_is_one_line(tmp_path):
    env = environ(tmp_path)
    p = subprocess.Popen(HOOK + STD, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(0.01)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    if p.returncode == -signal.SIGTERM:
        # the interpreter had not started running Python yet: nothing of
        # the hook can answer there; the wrapper (what NHC and Slurm run)
        # still gives the line (below)
        pytest.skip('SIGTERM arrived before the interpreter ran the hook')
    assert p.returncode == 2 and out == (
        'COULD-NOT-CHECK: stopped by SIGTERM before the check finished\n'), \
        (p.returncode, out, err)


def test_sigterm_right_after_start_through_the_wrapper(tmp_path):
    env = environ(tmp_path)
    p = subprocess.Popen([WRAPPER] + STD, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(0.01)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    lines = out.splitlines()
    assert p.returncode == 2 and len(lines) == 1 and \
        lines[0].startswith('COULD-NOT-CHECK: '), (p.returncode, out, err)


# -- door 2: LBNL NHC 1.4.3 with its watchdog ---------------------------------

NHC_CASES = ['clean-env', 'locked-db', 'startup-limit', 'hang',
             'dead-driver-known-count', 'dead-driver-unknown-count',
             'fewer-gpus', 'wrong-first-attempt', 'foreign-no-reference',
             'site-match-all', 'site-ceiling-typo']


@pytest.mark.parametrize('name', NHC_CASES)
def test_nhc(nhc, tmp_path, name):
    env, args, fault, _, _ = _setup(name, tmp_path)
    # what the hook gets through NHC: its environment (the site's own
    # settings of the hook would be in site/<system>.yaml)
    env['CCL_HEALTH_CHECK_LAUNCHER'] = os.path.join(FAKE, 'launch')
    env['CCL_HEALTH_SITE_DIR'] = env.get('CCL_HEALTH_SITE_DIR') or \
        os.path.join(REPO, 'site')
    prefix_dir = tmp_path / 'prefix-site'
    site_naming_replay(prefix_dir, env)
    limit = args[args.index('--limit') + 1] if '--limit' in args else '8'
    lock = _lock(env['LOCK_DB']) if env.get('LOCK_DB') else None
    try:
        p, wall = run_nhc(nhc, tmp_path, env, limit=limit)
    finally:
        if lock:
            lock.close()
    log = (tmp_path / 'nhc.log').read_text() if (
        tmp_path / 'nhc.log').exists() else ''
    assert 'watchdog' not in log.lower() or 'has expired' not in log, log
    assert (p.returncode != 0) == fault, (name, p.returncode, p.stdout,
                                          p.stderr, log[-2000:])
    assert wall < 10, (name, wall)      # inside NHC's watchdog (-t 10)
    # the check ran and said what the hook said
    said = 'UNHEALTHY' if fault else ('HEALTHY' if name in (
        'clean-env', 'locked-db') else 'could not check')
    assert f'check_gpu_ccl' in log and (said in log or (
        fault and 'ccl-health: ' in p.stdout + log)), log[-3000:]


# -- door 3: the Slurm HealthCheckProgram wrapper ----------------------------

SLURM_CASES = ['clean-env', 'locked-db', 'startup-limit', 'hang',
               'dead-driver-known-count', 'fewer-gpus',
               'wrong-first-attempt', 'site-match-all', 'site-ceiling-typo']


@pytest.mark.parametrize('name', SLURM_CASES)
def test_slurm_wrapper(tmp_path, name):
    env, args, fault, _, _ = _setup(name, tmp_path)
    b = tmp_path / 'slurmbin'
    b.mkdir()
    calls = tmp_path / 'calls'
    for tool in ('scontrol', 'logger'):
        (b / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {calls}\n')
        (b / tool).chmod(0o755)
    env['PATH'] = f'{b}{os.pathsep}{env["PATH"]}'
    env['CCL_HEALTH_CHECK_LAUNCHER'] = os.path.join(FAKE, 'launch')
    env['CCL_HEALTH_SITE_DIR'] = env.get('CCL_HEALTH_SITE_DIR') or \
        os.path.join(REPO, 'site')
    site_naming_replay(tmp_path / 'prefix-site', env)
    if '--limit' in args:
        env['CCL_HEALTH_CHECK_LIMIT'] = args[args.index('--limit') + 1]
    lock = _lock(env['LOCK_DB']) if env.get('LOCK_DB') else None
    try:
        p = subprocess.run([SLURM_WRAPPER], env=env, capture_output=True,
                           text=True, timeout=120, cwd='/')
    finally:
        if lock:
            lock.close()
    assert p.returncode == 0
    text = calls.read_text() if calls.exists() else ''
    drained = 'state=drain' in text
    assert drained == fault, (name, text)
    assert 'logger -t ccl-health' in text


def test_site_health_env_is_the_only_source_of_transport_settings(tmp_path):
    # the probe's environment, seen by a launcher that writes it down
    seen = tmp_path / 'seen.env'
    launch = tmp_path / 'launch'
    launch.write_text(f'#!/bin/sh\nenv > {seen}\nshift\nexec "$@"\n')
    launch.chmod(0o755)
    env = environ(tmp_path, dict(
        _site_with(tmp_path, '  env:\n    NCCL_IB_HCA: mlx5_0\n'),
        NCCL_ALGO='Tree', FI_PROVIDER='efa', CUDA_DEVICE_MAX_CONNECTIONS='1',
        CCL_HEALTH_MARK='kept'))
    p = subprocess.run(HOOK + ['--tests-prefix', REPLAY, '--launcher',
                               str(launch), '--json',
                               str(tmp_path / 'd.json')],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout
    got = dict(ln.split('=', 1) for ln in seen.read_text().splitlines()
               if '=' in ln)
    assert got['NCCL_IB_HCA'] == 'mlx5_0'          # the site file's
    assert got['NCCL_NVLS_ENABLE'] == '0'          # the site file's env
    assert 'NCCL_ALGO' not in got and 'FI_PROVIDER' not in got and \
        'CUDA_DEVICE_MAX_CONNECTIONS' not in got
    assert got['CCL_HEALTH_MARK'] == 'kept'
    d = json.loads((tmp_path / 'd.json').read_text())
    assert d['dropped_env'] == {'CUDA_DEVICE_MAX_CONNECTIONS': '1',
                                'FI_PROVIDER': 'efa', 'NCCL_ALGO': 'Tree'}
    # read through the store: a long detail is stored compressed
    from ccl_health.db import store
    with store.open_store(env['CCL_HEALTH_DB'], readonly=True) as db:
        [case] = db.cases()
    assert json.loads(case['detail_json'])['dropped_env'] == \
        d['dropped_env']


# -- WARN lines whose upstream code goes on (issue 27, item 2) ---------------

def _replay_with_warns(tmp_path, texts):
    """The real intra capture replayed with ``texts`` as NCCL WARN lines
    of each rank's debug log (the rank's own logger prefix)."""
    import glob
    d = tmp_path / 'replay'
    shutil.copytree(os.path.join(CAP, 'intra'), d / 'intra')
    for log in glob.glob(str(d / 'intra' / 'nccl-debug.*.log')):
        with open(log) as fp:
            body = fp.read()
        prefix = body.split(' NCCL INFO', 1)[0]
        with open(log, 'a') as fp:
            for t in texts:
                fp.write(f'{prefix} NCCL WARN {t}\n')
    return {'CCL_HEALTH_REPLAY_DIR': str(d)}


def _hook_with_warns(tmp_path, texts):
    env = environ(tmp_path, _replay_with_warns(tmp_path, texts))
    detail = tmp_path / 'detail.json'
    p = subprocess.run(HOOK + STD + ['--json', str(detail)], env=env,
                       capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path))
    lines = p.stdout.splitlines()
    assert len(lines) == 1, (p.stdout, p.stderr)
    return p.returncode, lines[0], json.loads(detail.read_text())


def test_every_advisory_warn_through_the_hook_is_healthy(tmp_path):
    """Every string of the WARN table after which the upstream code goes
    on, all in one probe's logs: HEALTHY, no drain."""
    texts = warn_samples('advisory')
    assert len(texts) > 100
    code, line, d = _hook_with_warns(tmp_path, texts)
    assert code == 0 and line.startswith('HEALTHY: '), line
    assert d['verdict'] == 'pass', d


@pytest.mark.parametrize('name,texts,code', [
    # the lines, as RCCL and NCCL up to 2.22 print them
    ('gid-change', ['NET/IB : mlx5_0:1 Got async event : GID table change',
                    'NET/IB : Got async event : GID table change'], 0),
    ('port-active', ['NET/IB : mlx5_0:1 Got async event : port active'], 0),
    ('client-reregister', ['NET/IB : Got async event : client '
                           'reregistration'], 0),
    ('sm-change', ['NET/IB : mlx5_0:1 Got async event : SM change'], 0),
    ('skipped-hca', ['NET/IB : Unable to open device mlx5_4',
                     'NET/IB : Unable to query port_num 2'], 0),
    ('skipped-hca-verbs', ['Call to ibv_open_device failed',
                           'NET/IB : Unable to open device mlx5_4',
                           'Call to ibv_query_device failed with error '
                           'Invalid argument errno 22',
                           'NET/IB : Unable to query device mlx5_5'], 0),
    # an intra-node probe needs no network: the IB code's faults are named
    ('qp-fatal-on-intra', ['NET/IB : mlx5_0:1 Got async event : local work '
                           'queue catastrophic error'], 0),
    ('port-error-on-intra', ['NET/IB : Got async event : port error'], 0),
    # a real fault of the probe's own path still fails
    ('cuda-failure', ["Cuda failure 'an illegal memory access was "
                      "encountered'"], 1),
])
def test_warns_through_the_hook(tmp_path, name, texts, code):
    got, line, d = _hook_with_warns(tmp_path, texts)
    assert got == code, (name, line)
    if code == 0:
        assert line.startswith('HEALTHY: ') and 'fallback' not in line, line
    else:
        assert line.startswith('UNHEALTHY: ') and 'class cuda' in line, line
