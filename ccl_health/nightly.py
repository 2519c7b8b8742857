"""The nightly validation, as a site runs it from cron or scrontab:

    scripts/nightly --system SYSTEM --partition PART --account ACCT \\
        --publish /srv/www/ccl-health

One night: take the lock (two nightlies never overlap), run the main
command (``scripts/run -- --mode nightly --system SYSTEM:PART``) with its
output in the night's folder, every case recorded in the site database
(``--db``, else ``$CCL_HEALTH_DB``, else the site file's ``database``, else
``<output>/ccl-health.db``), the history findings (drop, drift, recovery,
intermittent) of the keys just measured, the report page regenerated into
``<publish>/nights/<night>/index.html`` with an index of the nights
(``<publish>/index.html``) and a ``latest`` link, then output short enough
for cron mail: one all-clear line when nothing is new, else one line per
new failure and new finding (with the ``changed:`` lines of history).

"New" is judged against the last *complete* night of the same keys: a night
whose jobs were cancelled (maintenance: ``scancel``, SIGTERM) has its cases
in flight recorded as ``aborted`` (:mod:`ccl_health.db.aborted`), is listed
as aborted on the index, and is never what the next night compares with.

Exit status (:data:`EXIT_NOTHING_NEW` ...): 0 nothing new (a recovery alone
is news, not work), 1 something new needs a person, 2 the nightly could not
run (no report, the database unreachable, a bad option), 3 skipped: another
nightly holds the lock, 4 the night was aborted (its jobs cancelled)."""

import argparse
import datetime
import html
import json
import os
import signal
import socket
import subprocess
import sys

from ccl_health import CclHealthError, outputs
from ccl_health.judge import history
from ccl_health.db import queries
from ccl_health.db import store
from ccl_health.judge import verdicts as V

EXIT_NOTHING_NEW = 0
EXIT_NEW = 1
EXIT_COULD_NOT_RUN = 2
EXIT_SKIPPED = 3
EXIT_ABORTED = 4

def _db_errors():
    import sqlite3
    errors = [CclHealthError, OSError, sqlite3.Error]
    try:
        import psycopg
        errors.append(psycopg.Error)
    except ImportError:
        pass
    return tuple(errors)


#: a database that fails under the nightly: could not run (exit 2)
DB_ERRORS = _db_errors()

#: what a finding is called in the mail; a recovery is news, not work
NEEDS_A_PERSON = ('drop', 'drift', 'intermittent')


# -- the history findings of one run (also what scripts/run ends with) ----

def _finding_id(f):
    return (f.kind, f.key, f.size)


def run_keys(cases, run_id):
    """The history keys (:func:`history.series_key`) a run measured."""
    return {history.series_key(c) for c in cases if c['run_id'] == run_id}


def previous_complete_run(cases, run_id):
    """The newest run before ``run_id`` that measured one of its keys and
    was not aborted (no ``aborted`` case), or None."""
    keys = run_keys(cases, run_id)
    mine = [c['time'] for c in cases if c['run_id'] == run_id]
    if not mine:
        return None
    start = min(mine)
    runs = {}
    for c in cases:
        if c['run_id'] == run_id or history.series_key(c) not in keys:
            continue
        r = runs.setdefault(c['run_id'], {'time': c['time'],
                                          'aborted': False})
        r['time'] = max(r['time'], c['time'])
        if c['verdict'] == str(V.Verdict.ABORTED):
            r['aborted'] = True
    # a run that also holds aborted cases of other keys counts as aborted
    for c in cases:
        if c['run_id'] in runs and c['verdict'] == str(V.Verdict.ABORTED):
            runs[c['run_id']]['aborted'] = True
    done = [(r['time'], rid) for rid, r in runs.items()
            if not r['aborted'] and r['time'] < start]
    return max(done)[1] if done else None


def run_findings(db, run_id):
    """(findings of ``run_id``, the new ones among them, the run they were
    compared with): the history findings of the keys ``run_id`` measured;
    new = not found for the same kind, key and size in the last complete
    run before it."""
    cases = db.cases()
    keys = run_keys(cases, run_id)
    records = [r for r in db.records() if history.series_key(r) in keys]
    found = history.detect_in(db, run_id, [dict(r) for r in records])
    prev = previous_complete_run(cases, run_id)
    before = set()
    if prev:
        before = {_finding_id(f) for f in history.detect_in(
            db, prev, [dict(r) for r in records])}
    new = [f for f in found if _finding_id(f) not in before]
    return found, new, prev


def finding_lines(findings, cases):
    """Short lines: one per finding (drifts, drops of a configuration
    grouped), each followed by its ``changed:`` lines."""
    return queries.drop_lines(findings, cases)


def needs_a_person(findings):
    return any(f.kind in NEEDS_A_PERSON for f in findings)


# -- failures -------------------------------------------------------------

def _bad(verdict):
    v = queries.stored_verdict(verdict)
    return V.exit_code([v]) != 0


def new_failures(cases, run_id, prev):
    """Case rows of ``run_id`` that failed or could not be judged where the
    same case of ``prev`` had another verdict (all of them without a
    ``prev``); and the count of those that failed the same way before."""
    before = {c['case_name']: c['verdict'] for c in cases
              if prev and c['run_id'] == prev}
    new, same = [], 0
    for c in cases:
        if c['run_id'] != run_id or not _bad(c['verdict']):
            continue
        if before.get(c['case_name']) == c['verdict']:
            same += 1
        else:
            new.append(c)
    return new, same


def failure_line(c):
    reason = ' '.join((c['reason'] or '').split())
    if len(reason) > 160:
        reason = reason[:157] + '...'
    return f'{c["verdict"].upper()} {c["case_name"]}: {reason}'


# -- publishing -----------------------------------------------------------

NIGHT_FILE = 'night.json'


def _nights(publish):
    root = os.path.join(publish, 'nights')
    out = []
    if os.path.isdir(root):
        for name in sorted(os.listdir(root)):
            try:
                with open(os.path.join(root, name, NIGHT_FILE)) as fp:
                    out.append(dict(json.load(fp), folder=name))
            except (OSError, ValueError):
                continue
    return out


def night_folder(publish, night, run_id):
    """``nights/<night>``; a second nightly of the same date gets
    ``<night>.2``, ``.3``..."""
    root = os.path.join(publish, 'nights')
    name, n = night, 1
    while True:
        path = os.path.join(root, name)
        try:
            with open(os.path.join(path, NIGHT_FILE)) as fp:
                if json.load(fp).get('run_id') == run_id:
                    return path
        except (OSError, ValueError):
            if not os.path.exists(path):
                return path
        n += 1
        name = f'{night}.{n}'


def write_index(publish):
    """``<publish>/index.html``: every night, newest first, with its
    status and its mail lines; ``latest`` points at the newest."""
    nights = sorted(_nights(publish), key=lambda n: n.get('started', ''),
                    reverse=True)
    rows = []
    for n in nights:
        lines = '<br>'.join(html.escape(x) for x in n.get('lines', []))
        rows.append(f'<tr class="{html.escape(n.get("status", ""))}">'
                    f'<td><a href="nights/{html.escape(n["folder"])}/'
                    f'index.html">{html.escape(n["folder"])}</a></td>'
                    f'<td>{html.escape(n.get("status", ""))}</td>'
                    f'<td>{html.escape(n.get("where", ""))}</td>'
                    f'<td><code>{lines}</code></td></tr>')
    page = ('<!doctype html><html><head><meta charset="utf-8">'
            '<title>ccl-health nights</title><style>body{font-family:'
            'sans-serif} td{padding:4px 8px;vertical-align:top;border-bottom:'
            '1px solid #eee} .new,.could-not-run{background:#fde} '
            '.aborted{background:#ffe}</style></head><body>'
            '<h1>ccl-health nights</h1><p><a href="latest/index.html">'
            'latest</a></p><table><tr><th>night</th><th>status</th>'
            '<th>where</th><th>mail</th></tr>' + ''.join(rows) +
            '</table></body></html>')
    tmp = os.path.join(publish, '.index.html.tmp')
    with open(tmp, 'w') as fp:
        fp.write(page)
    os.replace(tmp, os.path.join(publish, 'index.html'))
    if nights:
        link = os.path.join(publish, 'latest')
        tmp = link + '.tmp'
        if os.path.lexists(tmp):
            os.remove(tmp)
        os.symlink(os.path.join('nights', nights[0]['folder']), tmp)
        os.replace(tmp, link)


# -- the night ------------------------------------------------------------

def _site_database(system):
    """The ``database`` of ``site/<system>.yaml`` (a URL), or None."""
    import yaml
    from ccl_health import resources
    path = os.path.join(resources.site_dir(), f'{system}.yaml')
    try:
        with open(path) as fp:
            data = yaml.safe_load(fp) or {}
    except (OSError, yaml.YAMLError):
        return None         # the run itself names a broken site file
    url = data.get('database') if isinstance(data, dict) else None
    return url if isinstance(url, str) and url else None


def run_command(args, out, run_id):
    """The main command of the night, as a list (``scripts/run``'s)."""
    cmd = [sys.executable, '-m', 'ccl_health.cli', '--prog', 'scripts/run',
           'run', '--output', out]
    if args.mirror:
        cmd += ['--mirror', args.mirror]
    system = args.system + (f':{args.partition}' if args.partition else '')
    return cmd + ['--', '--mode', args.mode, '--system', system] + \
        list(args.reframe_args)


def night(args):
    import fasteners
    publish = os.path.abspath(args.publish)
    os.makedirs(publish, exist_ok=True)
    lock_path = args.lock or os.path.join(publish, '.nightly.lock')
    lock = fasteners.InterProcessLock(lock_path)
    if not lock.acquire(blocking=False):
        print(f'ccl-health nightly: skipped: another nightly holds '
              f'{lock_path}')
        return EXIT_SKIPPED
    try:
        return _night_locked(args, publish)
    finally:
        lock.release()


def _night_locked(args, publish):
    now = datetime.datetime.now()
    night_name = args.night or now.strftime('%Y-%m-%d')
    run_id = (f'nightly-{now.strftime("%Y%m%dT%H%M%S")}-'
              f'{socket.gethostname().split(".")[0]}-{os.getpid()}')
    folder = night_folder(publish, night_name, run_id)
    os.makedirs(folder, exist_ok=True)
    out = os.path.abspath(args.output or outputs.output_dir())
    db_url = args.db or os.environ.get('CCL_HEALTH_DB') or \
        _site_database(args.system) or os.path.join(out, 'ccl-health.db')
    where = f'{args.system}:{args.partition}' if args.partition \
        else args.system
    env = dict(os.environ, CCL_HEALTH_RUN_ID=run_id, CCL_HEALTH_DB=db_url,
               CCL_HEALTH_OUTPUT=out, RFM_COLORIZE='n')
    if args.account:
        env['CCL_HEALTH_ACCOUNT'] = args.account
        access = env.get('CCL_HEALTH_SLURM_ACCESS', '')
        if env.get('CCL_HEALTH_SCHEDULER') in ('slurm', 'squeue') and \
                '-A' not in access.split() and \
                '--account' not in access:
            env['CCL_HEALTH_SLURM_ACCESS'] = \
                f'{access} -A {args.account}'.strip()
    if args.partition and env.get('CCL_HEALTH_SCHEDULER') in (
            'slurm', 'squeue') and '-p' not in \
            env.get('CCL_HEALTH_SLURM_ACCESS', '').split():
        env['CCL_HEALTH_SLURM_ACCESS'] = (
            env.get('CCL_HEALTH_SLURM_ACCESS', '') +
            f' -p {args.partition}').strip()
    log_path = os.path.join(folder, 'run.log')
    meta = {'run_id': run_id, 'started': now.isoformat(timespec='seconds'),
            'where': where, 'status': 'running', 'lines': []}
    _write_meta(folder, meta)
    cmd = run_command(args, out, run_id)
    rc, stopped = _run_child(cmd, env, log_path)
    lines, status, code = [], 'could-not-run', EXIT_COULD_NOT_RUN
    try:
        with store.open_store(db_url, readonly=True) as db:
            cases = db.cases('WHERE run_id = ?', (run_id,))
            if stopped or any(c['verdict'] == str(V.Verdict.ABORTED)
                              for c in cases):
                status, code = 'aborted', EXIT_ABORTED
                lines.append(
                    f'ccl-health nightly {where} {night_name}: ABORTED '
                    f'(stopped by {stopped or "a signal"}; exit {rc}): '
                    f'{sum(c["verdict"] == "aborted" for c in cases)} '
                    f'case(s) recorded as aborted, {len(cases)} in all; the '
                    f'next night compares with the last complete one')
            elif not cases:
                lines.append(
                    f'ccl-health nightly {where} {night_name}: COULD NOT RUN:'
                    f' scripts/run exited {rc} and recorded nothing in '
                    f'the database; see {log_path}')
            else:
                status, code, lines = _judge_night(db, run_id, where,
                                                   night_name)
    except DB_ERRORS as err:
        lines.append(f'ccl-health nightly {where} {night_name}: COULD NOT '
                     f'RUN: {" ".join(str(err).split())}; see {log_path}')
    page = ''
    if status != 'could-not-run':
        try:
            from ccl_health import report
            with store.open_store(db_url, readonly=True) as db:
                page, _ = report.build(
                    db, folder, title=f'ccl-health {where}: night '
                    f'{os.path.basename(folder)}')
        except (CclHealthError, OSError, ImportError) as err:
            lines.append(f'ccl-health nightly: the report page could not '
                         f'be written: {err}')
            code = max(code, EXIT_NEW) if code != EXIT_ABORTED else code
    meta.update(status=status, lines=lines, exit=code,
                finished=datetime.datetime.now().isoformat(timespec='seconds'))
    _write_meta(folder, meta)
    write_index(publish)
    for line in lines:
        print(line)
    url = args.url.rstrip('/') + '/latest/' if args.url else \
        (page or os.path.join(folder, 'index.html'))
    print(f'page: {url}')
    return code


def _judge_night(db, run_id, where, night_name):
    cases = db.cases()
    mine = [c for c in cases if c['run_id'] == run_id]
    found, new, prev = run_findings(db, run_id)
    failures, same = new_failures(cases, run_id, prev)
    lines = [failure_line(c) for c in failures]
    lines += finding_lines(new, cases)
    counts = {}
    for c in mine:
        counts[c['verdict']] = counts.get(c['verdict'], 0) + 1
    tally = ', '.join(f'{n} {v}' for v, n in sorted(counts.items()))
    vs = f'vs run {prev}' if prev else 'no earlier complete night'
    if failures or needs_a_person(new):
        head = (f'ccl-health nightly {where} {night_name}: NEW: '
                f'{len(failures)} new failure(s), '
                f'{sum(f.kind in NEEDS_A_PERSON for f in new)} new '
                f'finding(s) ({len(mine)} cases: {tally}; {vs})')
        return 'new', EXIT_NEW, [head] + lines
    old = len(found) - len(new)
    if same or old:
        # never "all clear" while something is still wrong
        head = (f'ccl-health nightly {where} {night_name}: nothing new, '
                f'still failing from earlier nights: {same} failure(s), '
                f'{old} finding(s) ({len(mine)} cases: {tally}; {vs})')
        return 'still', EXIT_NOTHING_NEW, [head] + lines
    head = (f'ccl-health nightly {where} {night_name}: all clear, nothing '
            f'new ({len(mine)} cases: {tally}; {vs})')
    return 'clear', EXIT_NOTHING_NEW, [head] + lines


def _write_meta(folder, meta):
    tmp = os.path.join(folder, NIGHT_FILE + '.tmp')
    with open(tmp, 'w') as fp:
        json.dump(meta, fp, indent=1)
    os.replace(tmp, os.path.join(folder, NIGHT_FILE))


def _run_child(cmd, env, log_path):
    """Run the main command, its output into ``log_path``.  SIGTERM /
    SIGINT / SIGHUP to the nightly (scancel of a scrontab job, a cron
    stop) go on to it as SIGTERM: it aborts its cases, records them as
    aborted and exits 128 + N.  Returns (exit code, the signal's name or
    None)."""
    from ccl_health.stops import passed_on
    got = []
    with open(log_path, 'ab') as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log,
                                stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                start_new_session=True)
        with passed_on(proc, got):
            rc = proc.wait()
    if rc > 128 and not got:
        got.append(signal.Signals(rc - 128).name
                   if rc - 128 in {s.value for s in signal.Signals}
                   else f'signal {rc - 128}')
    return rc, (got[0] if got else None)


HELP = __doc__


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog='scripts/nightly', description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--system', required=True, help='the ReFrame system '
                    '(config/systems/<system>.py)')
    ap.add_argument('--partition', help='its partition (ReFrame '
                    '--system SYSTEM:PARTITION; under Slurm also sbatch -p)')
    ap.add_argument('--account', help='the Slurm account of the jobs '
                    '(CCL_HEALTH_ACCOUNT; under the local system with '
                    'Slurm also sbatch -A)')
    ap.add_argument('--mode', default='nightly', help='ReFrame mode '
                    '(default: %(default)s)')
    ap.add_argument('--publish', default=os.environ.get(
        'CCL_HEALTH_PUBLISH'), help='the folder served as the report site '
        '(default $CCL_HEALTH_PUBLISH)')
    ap.add_argument('--url', help='the address of the published folder '
                    '(the mail names its latest page)')
    ap.add_argument('--output', help='outputs of the runs (default '
                    '$CCL_HEALTH_OUTPUT, else ./ccl-health-output)')
    ap.add_argument('--db', help='the site database: SQLite file or '
                    'postgresql:// URL (default $CCL_HEALTH_DB, else the '
                    'site file\'s database, else <output>/ccl-health.db)')
    ap.add_argument('--mirror', help='source tarballs (scripts/run --mirror)')
    ap.add_argument('--lock', help='the lock file (default '
                    '<publish>/.nightly.lock)')
    ap.add_argument('--night', help='the night\'s name (default: today, '
                    'YYYY-MM-DD)')
    ap.add_argument('reframe_args', nargs='*', metavar='-- REFRAME_OPTIONS',
                    help='after --: more ReFrame options for the run')
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return EXIT_COULD_NOT_RUN if e.code else 0
    if not args.publish:
        print('ccl-health nightly: COULD NOT RUN: no --publish folder (or '
              'CCL_HEALTH_PUBLISH)', file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    try:
        return night(args)
    except (CclHealthError, OSError) as err:
        print(f'ccl-health nightly: COULD NOT RUN: {err}', file=sys.stderr)
        return EXIT_COULD_NOT_RUN


if __name__ == '__main__':
    sys.exit(main())
