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

The news is the difference between what the night measured and what
the mails told before (the ledger, :mod:`ccl_health.news`): each change
(a new failure, a worsening, a new finding, a recovery) is told once.  The
lines are printed first, recorded as told next, and only then published:
a night killed, crashed or unable to publish loses no news (the next night
tells what was never told), and a publishing error (disk full, read-only
folder) adds one ``could not publish:`` line.  A night whose jobs were
cancelled (maintenance: ``scancel``, SIGTERM) has its cases in flight
recorded as ``aborted`` (:mod:`ccl_health.db.aborted`) and is listed as
aborted on the index; its news is told by the next night.  A nightly
killed outright takes its main command along (a parent-death signal), and
the next night marks its night ``killed``.

Exit status (:data:`EXIT_NOTHING_NEW` ...): 0 nothing new (a recovery alone
is news, not work), 1 something new needs a person (it wins over 2: the
news is never hidden behind a tool's problem), 2 nothing measured or fewer
cases than the last complete night (what was not measured and why are
named), or the nightly could not run (the database unreachable, a bad
option), or a quiet night could not be published, 3 skipped: another
nightly holds the lock, 4 the night was aborted (its jobs cancelled)."""

import argparse
import contextlib
import datetime
import html
import json
import os
import re
import signal
import socket
import subprocess
import sys
import warnings

from ccl_health import (CclHealthError, dburl, identity, news, outputs,
                        rehearsal)
from ccl_health.db import ledger, store
from ccl_health.judge import verdicts as V
from ccl_health.oneline import clean
from ccl_health import safefile

EXIT_NOTHING_NEW = news.EXIT_NOTHING_NEW
EXIT_NEW = news.EXIT_NEW
EXIT_COULD_NOT_RUN = 2
EXIT_SKIPPED = 3
EXIT_ABORTED = 4

#: a database that fails under the nightly: could not run (exit 2)
DB_ERRORS = (CclHealthError,) + store.driver_errors()

#: what a finding is called in the mail; a recovery is news, not work
NEEDS_A_PERSON = news.NEEDS_A_PERSON


# -- the history findings of one run: :mod:`ccl_health.findings` ----------

def needs_a_person(findings):
    return any(f.kind in NEEDS_A_PERSON for f in findings)


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


#: a night's name: a date or a plain name; never a path, a control
#: character or a name that climbs (``..``)
NIGHT_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,63}')


def night_name(text):
    """``--night``'s value, checked: it names a folder under
    ``<publish>/nights``, so nothing but a date or a plain name."""
    if not NIGHT_NAME.fullmatch(text or '') or '..' in text:
        raise argparse.ArgumentTypeError(
            f'{text!r}: a night is a date (YYYY-MM-DD) or a plain name of '
            f'letters, digits, "-", "_" and "." (at most 64, no "..")')
    return text


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


def _has_page(publish, night):
    return os.path.isfile(os.path.join(publish, 'nights', night['folder'],
                                       'index.html'))


def write_index(publish):
    """``<publish>/index.html``: every night, newest first, with its
    status and its mail lines, a link to its page where one was written;
    ``latest`` points at the newest night with a page.  Returns the
    folder ``latest`` points at, or None."""
    nights = sorted(_nights(publish), key=lambda n: n.get('started', ''),
                    reverse=True)
    rows = []
    for n in nights:
        lines = '<br>'.join(html.escape(x) for x in n.get('lines', []))
        name = html.escape(n['folder'])
        link = (f'<a href="nights/{name}/index.html">{name}</a>'
                if _has_page(publish, n) else name)
        rows.append(f'<tr class="{html.escape(n.get("status", ""))}">'
                    f'<td>{link}</td>'
                    f'<td>{html.escape(n.get("status", ""))}</td>'
                    f'<td>{html.escape(n.get("where", ""))}</td>'
                    f'<td><code>{lines}</code></td></tr>')
    paged = [n for n in nights if _has_page(publish, n)]
    latest = ('<p><a href="latest/index.html">latest</a></p>' if paged
              else '')
    page = ('<!doctype html><html><head><meta charset="utf-8">'
            '<title>ccl-health nights</title><style>body{font-family:'
            'sans-serif} td{padding:4px 8px;vertical-align:top;border-bottom:'
            '1px solid #eee} .new,.could-not-run,.not-measured,.killed'
            '{background:#fde} .aborted{background:#ffe}</style></head><body>'
            '<h1>ccl-health nights</h1>' + latest + '<table><tr><th>night'
            '</th><th>status</th><th>where</th><th>mail</th></tr>' +
            ''.join(rows) + '</table></body></html>')
    # no fixed temporary name, nothing written through a link
    # (:mod:`ccl_health.safefile`)
    safefile.write_atomic(os.path.join(publish, 'index.html'), page)
    if not paged:
        return None
    safefile.symlink_atomic(os.path.join('nights', paged[0]['folder']),
                            os.path.join(publish, 'latest'))
    return paged[0]['folder']


def _alive(pid):
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError, TypeError):
        return True
    return True


def mark_killed(publish):
    """Nights left ``running`` by a nightly that is gone (killed, or
    crashed): marked ``killed``.  Called holding the lock, so no other
    nightly of this folder runs; a night whose process still lives on
    this host is left alone.  Returns {run id: what befell it} (the ledger
    tells their news, :func:`ccl_health.news.night`)."""
    out = {}
    host = socket.gethostname()
    for n in _nights(publish):
        if n.get('status') != 'running':
            continue
        pid = n.get('pid')
        if pid and n.get('host') == host and _alive(pid):
            continue
        folder = n.pop('folder')
        n.update(status='killed', lines=n.get('lines', []) + [
            f'KILLED: the nightly (pid {pid or "?"}) ended before its mail; '
            f'the next night tells its news'])
        _write_meta(os.path.join(publish, 'nights', folder), n)
        out[n['run_id']] = f'night {folder} killed'
    return out


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
    publish = os.path.abspath(args.publish)
    os.makedirs(publish, exist_ok=True)
    lock_path = args.lock or os.path.join(publish, '.nightly.lock')
    with safefile.locked(lock_path, blocking=False) as held:
        if not held:
            print(f'ccl-health nightly: skipped: another nightly holds '
                  f'{lock_path}')
            return EXIT_SKIPPED
        return _night_locked(args, publish)


def _night_locked(args, publish):
    now = datetime.datetime.now()
    night_name = args.night or now.strftime('%Y-%m-%d')
    run_id = identity.new(news.RUN_PREFIX,
                          socket.gethostname().split('.')[0])
    folder = night_folder(publish, night_name, run_id)
    out = os.path.abspath(args.output or outputs.output_dir())
    db_url = args.db or os.environ.get('CCL_HEALTH_DB') or \
        _site_database(args.system) or os.path.join(out, 'ccl-health.db')
    where = f'{args.system}:{args.partition}' if args.partition \
        else args.system
    if getattr(args, 'rehearse', None):      # never taken for a real night
        where += f' (rehearsal: {args.rehearse})'
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
    meta = {'run_id': run_id, 'started': now.isoformat(timespec='seconds'),
            'where': where, 'status': 'running', 'lines': [],
            'pid': os.getpid(), 'host': socket.gethostname()}
    # what could not be published never stops the night nor its news
    unpublished = []
    killed = _publish(unpublished, mark_killed, publish) or {}
    log_path = os.path.join(folder, 'run.log')
    if _publish(unpublished, _write_meta, folder, meta) is False:
        os.makedirs(out, exist_ok=True)
        log_path = os.path.join(out, f'{run_id}.log')
    cmd = run_command(args, out, run_id)
    rc, stopped = _run_child(cmd, env, log_path)
    head = f'ccl-health nightly {where} {night_name}'
    with warnings_to(log_path):      # the standard output is the mail
        status, code, lines = _news(args, db_url, run_id, head, rc,
                                    stopped, env, log_path, killed)
        page = None
        if status != 'could-not-run' and _database_exists(db_url):
            page = _publish(unpublished, _page, db_url, folder,
                            f'ccl-health {where}: night '
                            f'{os.path.basename(folder)}', publish, run_id)
    meta.update(status=status, lines=lines, exit=code,
                finished=datetime.datetime.now().isoformat(timespec='seconds'))
    _publish(unpublished, _write_meta, folder, meta)
    latest = _publish(unpublished, write_index, publish)
    if unpublished:
        line = f'could not publish: {"; ".join(unpublished)}'
        print(line, flush=True)
        # the news keeps its exit (1: a person is needed; 2, 4); a quiet
        # night that could not be published is not a quiet night
        code = EXIT_COULD_NOT_RUN if code == EXIT_NOTHING_NEW else code
        meta.update(lines=lines + [line], exit=code)
        _publish([], _write_meta, folder, meta)
    if page:
        mine = os.path.basename(folder)
        print('page: ' + (args.url.rstrip('/') + (
            '/latest/' if latest == mine else f'/nights/{mine}/')
            if args.url else page))
    return code


@contextlib.contextmanager
def warnings_to(log_path):
    """Every Python warning raised inside (matplotlib's ``AutoDateLocator
    was unable to pick an appropriate interval``, a library's deprecation)
    appended to the night's log ``log_path``, never printed: the nightly's
    standard output and error are its mail.  Where the log cannot be
    written, the warning is dropped (the mail stays the mail)."""
    def to_log(message, category, filename, lineno, file=None, line=None):
        try:
            with safefile.open_append(log_path) as fp:
                fp.write(warnings.formatwarning(message, category, filename,
                                                lineno, line))
        except OSError:
            pass
    with warnings.catch_warnings():
        warnings.simplefilter('default')
        warnings.showwarning = to_log
        yield


def _publish(problems, fn, *a):
    """``fn(*a)``; an error writing (disk full, read-only folder) is
    appended to ``problems`` and gives False."""
    try:
        return fn(*a)
    except (CclHealthError, OSError, ImportError) as err:
        problems.append(' '.join(str(err).split()))
        return False


def _page(db_url, folder, title, publish, run_id=None):
    """The night's page in ``folder`` (its failures: those of the night's
    run ``run_id``); its figures cached for every night
    (``<publish>/.figures``): a night draws only what changed."""
    from ccl_health import report
    from ccl_health.db import health_days
    from ccl_health.report.figures import CACHE
    if _database_exists(db_url):
        # the closed days of the health checks kept (once a day: the
        # page, the next night's too, reads them as kept)
        # (a database this night cannot write: the page counts them)
        try:
            with store.open_store(db_url) as db:
                health_days.keep(db)
        except store.driver_errors():
            pass
    with store.open_store(db_url, readonly=True) as db:
        return report.build(db, folder, title=title,
                            cache=os.path.join(publish, CACHE),
                            run_id=run_id)[0]


def _database_exists(db_url):
    """False where the SQLite file ``db_url`` was never created (the run
    recorded nothing)."""
    if dburl.is_postgres(db_url):
        return True
    return os.path.isfile(dburl.sqlite_path(db_url))


def _open_db(db_url):
    """The site database for the news (writable: the ledger is written),
    or None where its SQLite file was never created (never created here:
    an empty database would answer "nothing failed")."""
    if not _database_exists(db_url):
        return contextlib.nullcontext()
    return store.open_store(db_url)


def _cause(rc, env, log_path, system=''):
    """Why the main command recorded nothing: no GPUs where its jobs would
    run on this host (it made a dry run), else its exit code (a
    batch-scheduled ``system`` is submitted to from a host without GPUs:
    :func:`ccl_health.evidence.nodefacts.submitted_to`)."""
    import shutil
    from ccl_health import resources
    from ccl_health.evidence import nodefacts as node
    gpus = node.detect_gpus(env)
    batch, why_not = node.submitted_to(
        resources.config_dir(env), system, socket.gethostname(), gpus,
        lambda cmd: shutil.which(cmd, path=env.get('PATH'))) \
        if gpus.count == 0 else ([], '')
    if gpus.count == 0 and not batch:
        return (f'{gpus.why_none}'
                + (f' ({why_not})' if why_not else '') +
                f': scripts/run made a dry run (job scripts rendered, '
                f'nothing run); see {log_path}')
    return f'scripts/run exited {rc} and recorded nothing; see {log_path}'


def _news(args, db_url, run_id, head, rc, stopped, env, log_path, killed):
    """Print the night's mail (:mod:`ccl_health.news`), then record it as
    told.  Returns (status, exit code, the lines)."""
    lines = []
    try:
        with _open_db(db_url) as db:
            cases = db.cases('WHERE run_id = ?', (run_id,)) if db else []
            if stopped or any(c['verdict'] == str(V.Verdict.ABORTED)
                              for c in cases):
                lines.append(
                    f'{head}: ABORTED (stopped by {stopped or "a signal"}; '
                    f'exit {rc}): '
                    f'{sum(c["verdict"] == "aborted" for c in cases)} '
                    f'case(s) recorded as aborted, {len(cases)} in all; the '
                    f'next night tells what it measured')
                print(lines[0], flush=True)
                return 'aborted', EXIT_ABORTED, lines
            cause = '' if cases else _cause(
                rc, env, log_path, args.system + (
                    f':{args.partition}' if args.partition else ''))
            mark = ledger.mark(db) if db is not None else None
            told = news.night(db, run_id, args.system, args.partition, head,
                              cause=cause, labels=killed)
            if db is None:
                lines = _print_mail(told)
                return told.status, told.code, lines
            return _tell_once(db, told, mark, run_id, args, head, cause,
                              killed)
    except DB_ERRORS as err:
        line = (f'{head}: COULD NOT RUN: {clean(err, None)}; see '
                f'{log_path}')
        print(line, flush=True)
        return 'could-not-run', EXIT_COULD_NOT_RUN, lines + [line]


def _print_mail(told):
    """The mail: one clean line each (an NCCL WARN's text may carry
    escape sequences), printed and flushed; the lines."""
    lines = [clean(x, None, squeeze=False) for x in told.lines]
    for line in lines:
        print(line)
    sys.stdout.flush()
    return lines


def _tell_once(db, told, mark, run_id, args, head, cause, killed):
    """Print the news and record it as told, once for every nightly of
    the database (:func:`ccl_health.news.tell`).  Returns (status, exit
    code, lines)."""
    lines = []

    def show(night_):
        nonlocal told
        told = night_
        lines[:] = _print_mail(night_)
    try:
        told = news.tell(
            db, told, run_id, scope=(args.system, args.partition or ''),
            show=show, mark=mark, read_again=lambda: news.night(
                db, run_id, args.system, args.partition, head, cause=cause,
                labels=killed))
    except DB_ERRORS as err:
        if not lines:
            lines = _print_mail(told)
        line = (f'could not record what was told: {clean(err, None)}; the '
                f'next night tells it again')
        print(line, flush=True)
        return told.status, told.code or EXIT_COULD_NOT_RUN, lines + [line]
    return told.status, told.code, lines


def _write_meta(folder, meta):
    os.makedirs(folder, exist_ok=True)
    safefile.write_json(os.path.join(folder, NIGHT_FILE), meta)


def _run_child(cmd, env, log_path):
    """Run the main command, its output into ``log_path``.  SIGTERM /
    SIGINT / SIGHUP to the nightly (scancel of a scrontab job, a cron
    stop) go on to it as SIGTERM: it aborts its cases, records them as
    aborted and exits 128 + N.  A nightly killed outright (``kill -9``)
    takes it along: its parent-death signal is SIGTERM (it records its
    cases in flight as aborted and ends; the next night marks the night
    killed and tells its news).  Returns (exit code, the signal's name or
    None)."""
    from ccl_health.stops import passed_on, dies_with_parent
    got = []
    with safefile.open_append(log_path, binary=True) as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log,
                                stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                start_new_session=True,
                                preexec_fn=dies_with_parent(signal.SIGTERM))
        with passed_on(proc, got):
            rc = proc.wait()
    if rc > 128 and not got:
        got.append(signal.Signals(rc - 128).name
                   if rc - 128 in {s.value for s in signal.Signals}
                   else f'signal {rc - 128}')
    return rc, (got[0] if got else None)


#: ``scripts/nightly --help``: plain text in the user's words
HELP = """\
The nightly validation, as a site runs it from cron or scrontab:

    scripts/nightly --system SYSTEM --partition PART --account ACCT \\
        --publish /srv/www/ccl-health

One night: take a lock (two nightlies never overlap), run the sweeps
(scripts/run -- --mode nightly --system SYSTEM:PART), record every case in
the site database (--db, else $CCL_HEALTH_DB, else the site file's
database:, else <output>/ccl-health.db), look for drops and drifts against
earlier nights, write the report page to <publish>/nights/<night>/index.html
(with an index of the nights and a 'latest' link) and print a mail short
enough for cron: one all-clear line when nothing is new, else one line per
new failure or finding, with what changed.

Each change (a new failure, a worsening, a new drop or drift, a recovery)
is told once.  A night that was killed or could not publish loses nothing:
the next night tells what was never told.

Before wiring cron, rehearse a night on this host without GPUs or Slurm:

    scripts/nightly --rehearse healthy

Exit status: 0 nothing new (or still failing as told before); 1 something
new needs a person; 2 nothing measured, fewer cases than the last complete
night, or the nightly could not run; 3 skipped: another nightly holds the
lock; 4 aborted: the night's jobs were cancelled.  More: docs/nightly.md."""


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog='scripts/nightly', description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--system', help='the ReFrame system '
                    '(config/systems/<system>.py); required, but with '
                    '--rehearse')
    ap.add_argument('--partition', help='its partition (ReFrame '
                    '--system SYSTEM:PARTITION; under Slurm also sbatch -p)')
    ap.add_argument('--account', help='the Slurm account of the jobs '
                    '(CCL_HEALTH_ACCOUNT; under the local system with '
                    'Slurm also sbatch -A)')
    ap.add_argument('--mode', default='nightly', help='ReFrame mode '
                    '(default: %(default)s)')
    ap.add_argument('--publish', help='the folder served as the report '
                    'site (default $CCL_HEALTH_PUBLISH)')
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
    ap.add_argument('--night', type=night_name,
                    help='the night\'s name: a date (default: today, '
                    'YYYY-MM-DD) or a plain name of letters, digits, '
                    '"-", "_" and "."')
    ap.add_argument('--rehearse', metavar='SCENARIO',
                    choices=rehearsal.SCENARIOS, help='rehearse a night '
                    'before wiring cron: a real night on this host without '
                    'GPUs or Slurm, replaying the project\'s captures as '
                    'the scenario makes them (%(choices)s); database and '
                    'published folder under <output>/rehearsal unless --db '
                    '/ --publish (ccl_health/rehearsal)')
    ap.add_argument('reframe_args', nargs='*', metavar='-- REFRAME_OPTIONS',
                    help='after --: more ReFrame options for the run')
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return EXIT_COULD_NOT_RUN if e.code else 0
    if not args.system and not args.rehearse:
        ap.print_usage(sys.stderr)
        print(f'{ap.prog}: error: the following arguments are required: '
              f'--system', file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    if args.rehearse:
        try:
            rehearsal.prepare(args)
        except (CclHealthError, OSError) as err:
            print(f'ccl-health nightly: COULD NOT RUN: {err}',
                  file=sys.stderr)
            return EXIT_COULD_NOT_RUN
    args.publish = args.publish or os.environ.get('CCL_HEALTH_PUBLISH')
    if not args.publish:
        print('ccl-health nightly: COULD NOT RUN: no --publish folder (or '
              'CCL_HEALTH_PUBLISH)', file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    try:
        from ccl_health.judge import validate
        validate.before_run(args.system + (f':{args.partition}'
                                           if args.partition else ''))
    except CclHealthError as err:
        print(f'ccl-health nightly: COULD NOT RUN: {err}', file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    try:
        return night(args)
    except (CclHealthError, OSError) as err:
        print(f'ccl-health nightly: COULD NOT RUN: {err}', file=sys.stderr)
        return EXIT_COULD_NOT_RUN


if __name__ == '__main__':
    sys.exit(main())
