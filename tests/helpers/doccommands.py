"""The commands of README.md and docs/ run as written here: the fixtures
they read (a database of captured history, a run report, a bare
nccl-tests capture), their placeholders filled, each in its dry-run form."""

import os
import re
import shlex
import shutil
import subprocess
import sys

from conftest import REPO


HIST = os.path.join(REPO, 'tests', 'fixtures', 'device', 'history-health',
                    'keep')
CAP = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap', 'intra')
REPORT = os.path.join(HIST, 'reports-d1', 'run-20261122T222359.json')


def page_commands(page):
    """The commands of the ```bash blocks of ``docs/<page>``, in order:
    comments dropped, continuation lines joined."""
    with open(os.path.join(REPO, 'docs', page)) as fp:
        text = fp.read()
    out = []
    for block in re.findall(r'```bash\n(.*?)```', text, re.S):
        for line in block.replace('\\\n', ' ').splitlines():
            line = re.sub(r'\s+#\s.*$', '', line).strip()
            if line and not line.startswith('#'):
                out.append(line)
    return out


def page_blocks(page, lang=''):
    """The text of the fenced blocks of ``docs/<page>`` whose language is
    ``lang`` (``''``: the blocks that name none, such as a crontab), in
    order, as written."""
    with open(os.path.join(REPO, 'docs', page)) as fp:
        lines = fp.read().splitlines(keepends=True)
    out, block, fence = [], None, None
    for line in lines:
        if block is None:
            m = re.match(r'^(```+)(\S*)\s*$', line)
            if m:
                block, fence, want = [], m[1], m[2] == lang
        elif line.rstrip() == fence:
            if want:
                out.append(''.join(block))
            block = None
        else:
            block.append(line)
    return out


def placeholders(cmd):
    """The README's placeholders replaced by what the fixtures hold."""
    return (cmd.replace('run-<time>.json', os.path.basename(REPORT))
            .replace('<system>', 'local').replace('<partition>', 'gpu')
            .replace('RUN_A RUN_B', 'healthy-01 degraded-proto-ll')
            .replace('all_reduce.out', 'stdout.txt')
            .replace('run-report.json', REPORT))


def expand_optional(cmd):
    """``[--run RUN]``: the command without its optional parts and with
    all of them."""
    if not re.search(r'\s\[[^\]]+\]', cmd):
        return [cmd]
    bare = re.sub(r'\s\[[^\]]+\]', '', cmd)
    full = re.sub(r'\s\[([^\]]+)\]', lambda m: ' ' + m.group(1), cmd)
    return [bare, full.replace('RUN', 'degraded-proto-ll')]


def _home(work, cmd):
    """``~`` is a home of the test's own; ``scripts/init-site ~/mysite`` a
    new folder each time (the pages copy into one twice), and a command
    that reads ``~/mysite`` finds the copy made."""
    home = work / 'home'
    home.mkdir(exist_ok=True)
    if cmd.startswith('scripts/init-site '):
        n = len(list(home.glob('init-*')))
        cmd = cmd.replace('~/mysite', str(home / f'init-{n}'))
    elif '~/mysite' in cmd and not (home / 'mysite').exists():
        subprocess.run([os.path.join(REPO, 'scripts', 'init-site'),
                        str(home / 'mysite')], check=True,
                       capture_output=True, env=dict(
                           os.environ, CCL_HEALTH_SITE_CONF=str(
                               home / 'mysite.conf')))
    return re.sub(r'(?<![\w/])~/', str(home) + '/', cmd), home


def as_run_here(cmd, work):
    """(argv, env, expected exit statuses, what the output must show) of a
    README command in its dry-run form."""
    env = dict(os.environ, CCL_HEALTH_OUTPUT=str(work / 'ccl-health-output'),
               CCL_HEALTH_ASSUME_GPUS='2:sm_90', RFM_COLORIZE='n')
    env.pop('CCL_HEALTH_DB', None)
    cmd, env['HOME'] = _home(work, cmd)
    if cmd.startswith('source .venv/bin/activate'):
        # the venv scripts/run made: reframe is on PATH after it
        return (['bash', '-c', f'source {REPO}/.venv/bin/activate && '
                 f'command -v reframe'], env, {0},
                re.escape(os.path.join(REPO, '.venv', 'bin', 'reframe')))
    cron = re.match(r'^(\S+\s+){5}(cd \S+ && )?', cmd)
    if cron and cmd.split()[0][0].isdigit():
        # a crontab / scrontab line: the command after the schedule, from
        # this checkout, publishing into the test's folder
        cmd = cmd[cron.end():].replace('/opt/ccl-health/', '').replace(
            '/srv/www/ccl-health', str(work / 'www'))
    words = shlex.split(cmd)
    if words[:2] == ['env', '-i']:
        # as NHC / slurmd start it: an empty environment
        words = words[2:]
        env = {}
    while words and re.match(r'^[A-Z_]+=', words[0]):
        k, v = words.pop(0).split('=', 1)
        env[k] = v
    exe = words[0]
    if exe.startswith('scripts/'):
        words[0] = os.path.join(REPO, exe)
    if exe == 'scripts/run':
        # a dry run always, with the outputs under the test's folder
        at = words.index('--') if '--' in words else len(words)
        words[at:at] = ['--dry-run', '--output', str(work / 'run-out')]
        return words, env, {0}, r'dry run rendered [1-9]\d* job scripts'
    if exe == 'reframe' and '--list-stored-sessions' in words:
        # ReFrame's own storage of the output folder, through the
        # suite's configuration: its table of sessions
        return ([os.path.join(os.path.dirname(sys.executable), 'reframe')] +
                words[1:], env, {0}, r'^\W+ UUID\s+\W+ Start time ')
    if exe == 'reframe':
        if 'FleetAcceptance' in words:
            # its steps are srun steps: this machine's system as a Slurm
            # partition, as at a site (without one the check is skipped)
            env['CCL_HEALTH_SCHEDULER'] = 'squeue'
        words = [os.path.join(os.path.dirname(sys.executable), 'reframe')] + \
            ['--dry-run' if w == '-r' else w for w in words[1:]]
        return words, env, {0}, r'Ran [1-9]\d*/\d+ test case'
    if exe == 'scripts/explain':
        logs = sorted(str(work / f) for f in os.listdir(work)
                      if f.startswith('nccl-debug'))
        at = words.index('nccl-debug.*.log')
        words[at:at + 1] = logs
        return words, env, {0}, r'PASS|"verdict": "pass"'
    if exe == 'scripts/report':
        sub = next(w for w in words[1:] if not w.startswith('-') and
                   'ccl-health-output' not in w)
        if sub == 'failed':
            # the fixture database is older than a day: its whole history
            words += ['--hours', '1e7']
            return words, env, {1}, r'DROP .* in run degraded-nchannels4'
        if sub == 'since':
            # the fixture database holds the intra transport
            words = [w.replace('net-plugin', 'intra') for w in words]
            return words, env, {1}, r'intra: bad since'
        if sub == 'accept':
            # its own copy of the database: the other questions keep
            # theirs; only a healthy run becomes a level, so the copy
            # ends with healthy-20 (the two degradations taken out)
            acc = work / 'accept-output'
            if not acc.exists():
                acc.mkdir()
                shutil.copy(os.path.join(HIST, 'hist.db'),
                            acc / 'ccl-health.db')
                import sqlite3
                with sqlite3.connect(acc / 'ccl-health.db') as con:
                    con.execute("DELETE FROM measurements WHERE case_id IN "
                                "(SELECT id FROM cases WHERE run_id LIKE "
                                "'degraded-%')")
                    con.execute("DELETE FROM cases WHERE run_id LIKE "
                                "'degraded-%'")
            env['CCL_HEALTH_OUTPUT'] = str(acc)
            words = [w.replace('<run-id>', 'healthy-20') for w in words]
            if '--undo' in words:
                from ccl_health.db import store
                with store.open_store(str(acc / 'ccl-health.db')) as db:
                    if not db.acceptances(active=True):
                        db.accept([{'run_id': 'degraded-proto-ll',
                                    'run_time': '2026-01-01T00:00:00'}],
                                  'test', 'for the undo')
                    words[words.index('--undo') + 1] = str(
                        db.acceptances(active=True)[0]['id'])
                return words, env, {0}, r'^undone: #\d+ '
            if '--list' in words:
                return words, env, {0}, r'^(#\d+ |no acceptances)'
            return words, env, {0}, r'^accepted #\d+: local/gpu/'
        if sub == 'ingest':
            env['CCL_HEALTH_OUTPUT'] = str(work / 'ingested')
            return words, env, {0}, r'1 test case\(s\) recorded'
        expect = {'report': r'report: report/index.html',
                  'history': r'GB/s', 'compare': r'x0\.\d+',
                  'detect': r'DROP', 'runs': r'degraded-proto-ll'}[sub]
        return words, env, {0, 1}, expect
    if exe == 'scripts/nightly' and '--rehearse' in words:
        # a real night on the rehearsal's captures, in a folder of its own
        scenario = words[words.index('--rehearse') + 1]
        # (a folder of its own each time: the README and docs/nightly.md
        # both rehearse, and a second night in one folder tells nothing new)
        n = len(list(work.glob(f'rehearse-{scenario}-*')))
        env['CCL_HEALTH_OUTPUT'] = str(work / f'rehearse-{scenario}-{n}')
        head = rf'^ccl-health nightly local:gpu \(rehearsal: {scenario}\) \S+: '
        return words, env, {0} if scenario == 'healthy' else {1}, \
            head + ('all clear' if scenario == 'healthy' else
                    r'NEW: 1 new failure.*\nCRASH AllReduceSweep')
    if exe == 'scripts/nightly':
        # no GPU here: scripts/run renders the job scripts and records
        # nothing, which is never an all-clear, and the mail says why
        # (tests/test_nightly.py runs the line through Slurm against the
        # replay stand-ins)
        env['CCL_HEALTH_MODULES_SYSTEM'] = 'nomod'
        env.pop('CCL_HEALTH_ASSUME_GPUS')
        system = words[words.index("--system") + 1]
        where = f'{system}:{words[words.index("--partition") + 1]}'
        if system == 'local':
            return words, env, {2}, rf'^ccl-health nightly {where} \S+: ' \
                r'NOTHING MEASURED: no GPU found \(.*\): scripts/run made ' \
                r'a dry run'
        # a site system is scheduled by Slurm: its jobs are submitted
        # from a host without GPUs (cron on a login node); here a
        # stand-in sbatch refuses them, which is the night's news
        # (tests/test_site_pointer.py: what was submitted)
        standin = work / 'sbatch-refuses'
        standin.mkdir(exist_ok=True)
        # each line a first night of its own (the page lines show it twice)
        n = len(list(work.glob('night-*')))
        env['CCL_HEALTH_OUTPUT'] = str(work / f'night-{n}')
        words[words.index('--publish') + 1] = str(work / f'night-{n}' /
                                                   'www')
        (standin / 'sbatch').write_text(
            '#!/bin/sh\necho "sbatch: error: stand-in: refused" >&2\n'
            'exit 1\n')
        (standin / 'sbatch').chmod(0o755)
        env['PATH'] = f'{standin}{os.pathsep}{env["PATH"]}'
        return words, env, {1}, rf'^ccl-health nightly {where} \S+: NEW: ' \
            r'[1-9]\d* new failure'
    if exe == 'scripts/validate':
        return words, env, {0}, r'^OK: \d+ system\(s\) \(.*local'
    if exe == 'scripts/calibrate':
        return words + ['--dry-run'], env, {0}, r'reference/local\.yaml'
    if exe == 'scripts/ccl-health-check':
        # no GPU here: the hook says so, exit 2, never a reason to drain
        env.pop('CCL_HEALTH_ASSUME_GPUS', None)
        return words, env, {0, 1, 2}, r'^(HEALTHY|SKIPPED|UNHEALTHY|COULD-NOT-CHECK): '
    if exe == 'scripts/init-site':
        # its site pointer beside the copy (never this checkout's
        # site.conf, which every other test would read)
        env['CCL_HEALTH_SITE_CONF'] = words[1] + '.conf'
        return words, env, {0}, r'^  export CCL_HEALTH_CONFIG_DIR=\S+$'
    if exe == 'scripts/fleet':
        if '--simulate' in words:
            # the example plan that ships, named from the checkout's root
            at = words.index('--simulate') + 1
            words[at] = os.path.join(REPO, words[at])
            if '--resume' in words:
                return words, env, {1}, r'^fleet --resume \(SIMULATED: no ' \
                    r'Slurm asked or touched\): 3 node\(s\) drained by ' \
                    r'ccl-health'
            return words, env, {1}, r'(?s)fleet: 16 nodes checked.*BAD n12:' \
                r'.*BAD n3:.*SUSPECT LINK n5 - n9.*STRAGGLER n7.*  next: '
        # no Slurm cluster here: one line, exit 2, nothing drained
        env['PATH'] = '/usr/bin:/bin'
        return words, env, {2}, r'^fleet: error: (sinfo|salloc|scontrol)'
    raise AssertionError(f'README command of unknown kind: {cmd}')
