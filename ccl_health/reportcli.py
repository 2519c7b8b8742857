"""``ccl-health db`` (``scripts/report``): the performance database's
commands (ingest, failed, runs, since, history, compare, detect, accept,
report); :mod:`ccl_health.cli` puts them under its ``db`` subcommand."""

import os
import re
import sys

from ccl_health import (CclHealthError, argnumbers, outputs, shell,
                        summary)
from ccl_health.db import recorder, store
from ccl_health.judge import finding, series


# long: the options of every subcommand, one declaration each
def add_arguments(p):
    """The options and subcommands of ``ccl-health db`` (``scripts/report``)
    on the parser ``p``."""
    import argparse
    from ccl_health.report import DEFAULT_TREND_SIZES
    db_help = ('SQLite file or postgresql:// URL (default $CCL_HEALTH_DB, '
               'else <output>/ccl-health.db); before or after the question')
    p.add_argument('--db', help=db_help)
    dsub = p.add_subparsers(dest='db_cmd', required=True)
    add_parser = dsub.add_parser

    def question(name, **kw):
        """A question: it takes ``--db`` after its name too."""
        q = add_parser(name, **kw)
        q.add_argument('--db', default=argparse.SUPPRESS, help=db_help)
        return q
    dsub.add_parser = question
    q = dsub.add_parser('ingest', help='record finished ReFrame run reports '
                        'or the health checks kept pending (creates the '
                        'database)')
    q.add_argument('reports', nargs='*', help='run report files '
                   '(<output>/reports/run-<time>.json)')
    q.add_argument('--pending', nargs='?', const='', metavar='DIR',
                   help='record the health checks the hook could not record '
                   'within its bound and kept, oldest first, each file '
                   'removed once recorded (default DIR: '
                   '$CCL_HEALTH_PENDING_DIR, else '
                   '~/.local/state/ccl-health/pending); a file that cannot '
                   'be read is named, kept, and the exit is 2')
    q = dsub.add_parser('failed', help='what failed (or could not be '
                        'judged) last night; exit 1 failed, 2 unjudged')
    q.add_argument('--hours', type=argnumbers.HOURS, default=24,
                   help='how far back to look, in hours')
    q = dsub.add_parser('runs', help='the recorded runs, newest first, with '
                        'their verdict counts (the newest 20 unless told)')
    q.add_argument('--last', type=argnumbers.COUNT, help='the newest N runs (default: '
                   '20)')
    q.add_argument('--all', action='store_true', help='every run, newest '
                   'first (a health check is a run of its own: millions on '
                   'a large machine)')
    q.add_argument('--kind', choices=('sweep', 'health', 'fleet'),
                   help='only the sweeps (with the framework checks), the '
                   'health checks, or the fleet runs')
    q = dsub.add_parser('since', help='when did this start')
    q.add_argument('transport', help='intra, net-socket, net-plugin, ...')
    q.add_argument('--size', help='one message size, e.g. 1G (default: any '
                   'size)')
    q.add_argument('--system', help='default: the only one recorded')
    q.add_argument('--partition', help='default: the only one recorded')
    q.add_argument('--node', help="this node's health probes (default: the "
                   'sweeps)')
    q = dsub.add_parser('history', help='history of a transport at a size')
    q.add_argument('transport', help='intra, net-socket, net-plugin, ...')
    q.add_argument('--size', help='one message size, e.g. 1G (default: '
                   'every size)')
    q.add_argument('--system', help='default: the only one recorded')
    q.add_argument('--partition', help='default: the only one recorded')
    q.add_argument('--last', type=argnumbers.COUNT, default=30,
                   help='the newest N cases (default: %(default)s)')
    q.add_argument('--node', help="this node's health probes (default: the "
                   'sweeps)')
    q = dsub.add_parser('compare', help='compare two runs')
    q.add_argument('run_a', help='run id (scripts/report runs lists them)')
    q.add_argument('run_b', help='run id compared with run_a')
    q = dsub.add_parser('detect', help='drops, recoveries, intermittent '
                        'collapses against history, with what changed')
    q.add_argument('--run', help='judge only this run (default: the runs '
                   'of the last --days recorded)')
    q.add_argument('--days', type=argnumbers.DAYS, default=7,
                   help='judge the runs of the last DAYS days before the '
                   'newest record (default: %(default)s); each key from its '
                   'recent history')
    q = dsub.add_parser('accept', help='accept a new level after a '
                        'legitimate change: the history baseline restarts '
                        'at a run (kept with who, why, when; undo with '
                        '--undo ID)')
    q.add_argument('target', nargs='?', metavar='RUN_OR_KEY',
                   help='a run id (every key it measured), or a key as '
                   'detect prints it: "system/partition/transport '
                   'collective Nn/Rr" (at its newest run)')
    q.add_argument('--reason', help='why this is the new normal (a new '
                   'NCCL, new firmware); required')
    q.add_argument('--transport', help='only this transport of the run')
    q.add_argument('--size', help='only this message size (default: every '
                   'size)')
    q.add_argument('--undo', type=argnumbers.ROW_ID, metavar='ID',
                   help='take back the acceptance ID (--list shows them)')
    q.add_argument('--list', action='store_true',
                   help='list the acceptances, undone ones too')
    q = dsub.add_parser('prune', help='roll the healthy health checks '
                        'older than DAYS up into daily rows per node and '
                        'key (never a failure or a finding)')
    q.add_argument('--older-than', type=argnumbers.DAYS, default=90, metavar='DAYS',
                   help='the age the site keeps every check for (default: '
                   '%(default)s)')
    q.add_argument('--dry-run', action='store_true',
                   help='say what would be rolled up, change nothing')
    q = dsub.add_parser('rejudge', help='judge again, from its whole '
                        'history, each key whose kept judging state is '
                        'missing or stale (after an upgrade to schema 8; '
                        'accept and calibrate judge their keys '
                        'again themselves): failed and detect then read '
                        'it by index')
    q.add_argument('--dry-run', action='store_true',
                   help='say how many keys would be judged, change nothing')
    q = dsub.add_parser('migrate', help='move this SQLite database into '
                        'PostgreSQL (an empty database: every table, row for '
                        'row)')
    q.add_argument('--to', required=True, metavar='URL',
                   help='postgresql://user@host:port/database')
    q = dsub.add_parser('report', help='HTML page with plots + summary')
    q.add_argument('--out', default='ccl-health-report',
                   help='folder for index.html and the PNGs (default: '
                   '%(default)s)')
    q.add_argument('--sizes', help='message sizes that get a trend plot, '
                   'comma separated (e.g. 8,1M,1G; min and max name the '
                   'smallest and largest measured); default: the nearest '
                   'measured to ' + ','.join(DEFAULT_TREND_SIZES))
    q.add_argument('--self-contained', action='store_true',
                   help='the figures inline in index.html too (a page of '
                   'few figures has them inline anyway; a bigger one links '
                   'the PNG files beside it)')


def _pending_folder(args):
    """The folder of ``ingest --pending [DIR]`` (None without it),
    checked before the database is opened (and created)."""
    if args.db_cmd != 'ingest':
        return None
    if not args.reports and args.pending is None:
        raise CclHealthError('ingest: name run report files, or --pending '
                             '[DIR]')
    if args.pending is None:
        return None
    from ccl_health.hook.settings import kept_folder
    folder = args.pending or kept_folder('pending')
    if args.pending and not os.path.isdir(folder):
        raise CclHealthError(f'--pending {folder}: no such folder')
    return folder


def _ingest_pending(db, folder):
    """``ingest --pending``: record the kept checks of ``folder``, say how
    many; return the files that could not be read."""
    if folder is None:
        return []
    from ccl_health.hook import pending
    done, bad = pending.ingest(db, folder)
    print(f'{done} pending health check(s) recorded from {folder}' +
          (f'; {len(bad)} could not be read (kept, named above)'
           if bad else ''))
    return bad


def _open(args):
    """The store ``args.db`` names; where it is missing and a rehearsal
    left its own beside it (``<output>/rehearsal/ccl-health.db``), the
    error says where that is."""
    try:
        return store.open_store(args.db, readonly=args.db_cmd not in (
            'ingest', 'accept', 'prune', 'rejudge'))
    except CclHealthError as err:
        path = str(args.db or outputs.database())
        near = outputs.rehearsal_database(os.path.dirname(
            os.path.abspath(path))) if path and '://' not in path else ''
        if near and not os.path.exists(path) and os.path.isfile(near):
            raise CclHealthError(
                f'{err}; the nightly\'s rehearsal keeps its own: {near} '
                f'(scripts/report {args.db_cmd} --db {shell.quote(near)})'
            ) from None
        raise


def cmd_db(args):
    """``scripts/report <question>``: each question its own function
    (:data:`_QUESTIONS`), on the database opened once here."""
    pending_dir = _pending_folder(args)
    # questions never create a database (an empty new one would answer
    # "nothing failed"), and a read-only one can still be read
    with _open(args) as db:
        if args.db_cmd == 'ingest':
            return _ingest(db, args, pending_dir)
        return _QUESTIONS[args.db_cmd](db, args)


def _prune(db, args):
    from ccl_health.db import retention
    plan = retention.prune(db, args.older_than, args.dry_run)
    print('\n'.join(plan.lines(args.dry_run)))
    return 0


def _migrate(db, args):
    from ccl_health.db import migrate
    counts = migrate.migrate(db, args.to)
    print(f'moved {db.where} into {args.to}: ' + ', '.join(
        f'{n} {t}' for t, n in counts.items()))
    return 0


def _ingest(db, args, pending_dir):
    n = 0
    for path in args.reports:
        for case in recorder.cases_from_report(summary.load_report(path)):
            db.add_case(case)
            n += 1
    bad = _ingest_pending(db, pending_dir)
    print(f'{n} test case(s) recorded in {db.where}')
    return 2 if bad else 0


def _failed(db, args):
    from ccl_health.db import answers
    from ccl_health.judge import verdicts as verdict
    sims = answers.simulated_runs(db, args.hours)
    note = (f'(left out: {sum(sims.values())} case(s) of '
            f'{len(sims)} simulated run(s), '
            f'{", ".join(sorted(sims))}: scripts/fleet --simulate '
            f'rehearsals, not measurements)') if sims else ''
    found = answers.failures(db, args.hours)
    if found:
        print('\n'.join([line for _, line in found] +
                        ([note] if note else [])))
        return verdict.exit_code(v for v, _ in found)
    window = answers.window_runs(db, args.hours)
    print(f'nothing failed in the last {args.hours:g} h ('
          f'{sum(r.cases for r in window)} case(s) in {len(window)} '
          f'run(s), all pass or skipped)' + (f' {note}' if note else ''))
    return 0


def _since(db, args):
    from ccl_health.db import answers
    from ccl_health.judge import verdicts as verdict
    streak, good = answers.bad_streak(
        db, args.transport, args.size, args.system, args.partition,
        args.node)
    res = (streak[-1]['time'], streak[-1]['run_id'],
           len(streak)) if streak else None
    last = answers.latest(db, args.transport, args.system,
                          args.partition, args.node)
    v = answers.stored_verdict(last['verdict'])
    # the sweeps unless a node is named: said when its health
    # probes were left out
    note = '' if args.node else answers.probes_left_out(
        db, args.transport, args.system, args.partition)
    if res is None:
        print(f'{args.transport}: '
              f'{"healthy" if v is verdict.Verdict.PASS else v} in '
              f'the last run (run {last["run_id"]} at {last["time"]})'
              + (f': {last["reason"]}' if v is not verdict.Verdict.PASS
                 and last['reason'] else ''))
        if note:
            print(note)
        return 0
    print(f'{args.transport}: bad since {res[0]} (run {res[1]}, '
          f'{res[2]} run(s) in a row; last: {last["verdict"]})')
    for line in answers.changed_between(db, good, streak[-1]):
        print(f'    changed: {line}')
    if note:
        print(note)
    return verdict.exit_code([v]) or verdict.EXIT_FAIL


def _history(db, args):
    from ccl_health.db import answers
    if args.last < 1:
        raise CclHealthError(f'--last {args.last}: not a positive '
                             f'number')
    for r in answers.history(db, args.transport, args.size,
                             args.system, args.partition,
                             last=args.last, node=args.node):
        if r['size'] is None:
            print(f'{r["time"]}  {r["run_id"]}  {r["case_name"]}: '
                  f'{r["case_verdict"]}')
            continue
        ref = f'  ref {r["ref"]:.2f}' if r['ref'] else ''
        bw = (f'{r["busbw"]:9.2f}' if r['busbw'] is not None
              else f'{"-":>9}')
        print(f'{r["time"]}  {r["run_id"]}  {r["transport"]:<15}'
              f'{r["size"]:>12}  {bw} GB/s{ref}  '
              f'{r["size_verdict"]}  (case {r["case_verdict"]})')
    note = '' if args.node else answers.probes_left_out(
        db, args.transport, args.system, args.partition)
    if note:
        print(note)
    return 0


def _compare(db, args):
    from ccl_health.db import answers
    for name, size, a, b, ratio in answers.compare(db, args.run_a,
                                                   args.run_b):
        print(f'{name:<45} {size:>7}  {a:9.2f} -> {b:9.2f} GB/s  '
              f'x{ratio:.3f}' if ratio else
              f'{name:<45} {size:>7}  {a} -> {b} GB/s')
    # what differs (versions, environment), a crash's case too
    for name, lines in answers.run_changes(db, args.run_a, args.run_b):
        print(f'{name}:')
        print('\n'.join(f'    changed: {ln}' for ln in lines))
    return 0


def _detect(db, args):
    from ccl_health.db import answers, windowfindings
    answers.check_not_empty(db)
    answers.check_runs(db, args.run)
    keys, since, runs, scope = _detect_scope(db, args)
    # each key's findings kept with its cases, or the key judged
    # from its history (windowfindings.judge_keys)
    how = {}
    found = windowfindings.judge_keys(db, keys, since, runs, standing=how)
    # the drops of one run and configuration on one line each
    for line in answers.drop_lines(found, db):
        print(line)
    if not found:
        print(f'no drops against history in {scope} ({len(how)} '
              f'key(s) judged, each as below)')
    # how each key is judged: against a baseline, on its history,
    # or not yet (and why), in the order of the keys (the same
    # every time)
    for _, line in sorted(how.items(), key=lambda kv: tuple(
            (v is None, str(v)) for v in kv[0])):
        print(line)
    return 1 if any(f.kind != 'recovery' for f in found) else 0


def _report(db, args):
    from ccl_health import report
    page, text = report.build(
        db, args.out, sizes=args.sizes,
        inline=True if args.self_contained else None)
    print(text)
    print(f'report: {page}')
    return 0


def cmd_runs(db, args):
    """``scripts/report runs [--last N | --all] [--kind KIND]``: the
    newest runs (:data:`ccl_health.db.newestruns.DEFAULT_LAST` unless told),
    each printed as it is read; past the default, a last line says how to
    see more."""
    from ccl_health.db import answers, newestruns
    answers.check_not_empty(db)
    if args.last is not None and args.last < 1:
        raise CclHealthError(f'--last {args.last}: not a positive number')
    if args.all and args.last is not None:
        raise CclHealthError('runs: --last N or --all, not both')
    last = None if args.all else args.last or newestruns.DEFAULT_LAST
    shown, more = 0, False
    for r in newestruns.newest_first(db, newestruns.KINDS.get(args.kind)):
        if last is not None and shown == last:
            more = True
            break
        print(r.line(), flush=last is None and shown % 100 == 0)
        shown += 1
    kind = f' --kind {args.kind}' if args.kind else ''
    if more and args.last is None:
        print(f'(the newest {shown} {args.kind + " " if args.kind else ""}'
              f'runs; older ones: scripts/report runs{kind} --last '
              f'{2 * shown}, or every run: scripts/report runs{kind} --all)')
    elif not shown:
        raise CclHealthError(f'no {args.kind} runs in {db.where} (see them '
                             f'all: scripts/report runs)')
    return 0


def _detect_scope(db, args):
    """(history keys, from when, the runs judged, what that is) of
    ``report detect``: one run, else the runs of the last ``--days``
    before the newest record (:mod:`ccl_health.db.windowfindings`)."""
    import datetime
    from ccl_health.db import keyhistory, windowfindings
    if args.run:
        cases = windowfindings.run_cases(db, args.run)
        since = min(keyhistory.when(c['time']) for c in cases)
        return windowfindings.history_keys(cases), since, {args.run}, \
            f'run {args.run}'
    newest = db.query('SELECT max(time) AS t FROM cases')[0]['t']
    try:
        since = keyhistory.when(newest) - datetime.timedelta(days=args.days)
    except OverflowError:
        since = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
    # the records of the window: by their time (a window of the hook's
    # checks holds as many runs)
    return (windowfindings.window_keys(db, since), since, None,
            f'the {args.days:g} days to {newest}')


#: ``system/partition/transport collective Nn/Rr`` (history.where_text)
_KEY_TEXT = re.compile(r'^([^/\s]+)/([^/\s]+)/(\S+) (\S+) (\d+)n/(\d+)r'
                       r'(?: \[([^\]]+)\])?$')


def _who():
    import getpass
    try:
        return os.environ.get('USER') or getpass.getuser()
    except Exception:                  # no user name known
        return f'uid {os.getuid()}'


def cmd_rejudge(db, args):
    """``scripts/report rejudge [--dry-run]``: :func:`ccl_health.db.keystate.
    rejudge` of the stale keys, with progress on stderr."""
    import time
    from ccl_health.db import keystate as state
    if not state.has_state(db):
        raise CclHealthError(f'{db.where}: schema {db.schema_version()} '
                             f'keeps no judging state (open it for writing '
                             f'once to migrate it)')
    keys = state.stale_keys(db)
    if not args.dry_run:
        # the closed days of the health checks kept too (what the page
        # reads: ccl_health.db.health_days.keep)
        from ccl_health.db import health_days
        days = health_days.keep(db)
        if days:
            print(f'kept {len(days)} day(s) of health checks in '
                  f'{db.where}')
    if args.dry_run or not keys:
        print(f'{len(keys)} key(s) to judge again from their history in '
              f'{db.where}' + ('' if keys else ': every key has its state'))
        return 0
    t0, shown = time.monotonic(), [0.0]

    def progress(done, total):
        now = time.monotonic() - t0
        if done == total or now - shown[0] >= 5:
            shown[0] = now
            print(f'ccl-health: rejudge: {done}/{total} keys '
                  f'({now:.0f} s)', file=sys.stderr, flush=True)
    n = state.rejudge(db, keys, progress)
    print(f'judged {n} key(s) again from their history in {db.where}; '
          f'each keeps its state')
    return 0


def cmd_accept(db, args):
    """``scripts/report accept RUN|KEY --reason ...``: the history of the
    keys restarts at that run, its values their baseline at once
    (:func:`ccl_health.judge.history.parts`); only a run whose cases all
    passed is accepted (:func:`unhealthy`); ``--undo ID`` takes one back,
    ``--list`` shows them."""
    from ccl_health.db import answers
    from ccl_health.units import parse_size
    if args.list:
        rows = db.acceptances()
        for a in rows:
            print(acceptance_line(a))
        if not rows:
            print(f'no acceptances in {db.where}')
        return 0
    if args.undo is not None:
        a = db.undo_acceptance(args.undo, _who())
        print(f'undone: {acceptance_line(a)}; detection judges against the '
              f'history before it again')
        return 0
    if not args.target:
        raise CclHealthError('accept: give a run id or a key '
                             '("system/partition/transport collective '
                             'Nn/Rr"), or --undo ID, or --list')
    if not (args.reason or '').strip():
        raise CclHealthError('accept: --reason "..." is required (why this '
                             'is the new level: a new NCCL, new firmware)')
    size = parse_size(args.size) if args.size else None
    answers.check_not_empty(db)
    runs = set(answers.recorded(db, 'run_id'))
    m = _KEY_TEXT.match(args.target.strip())
    if args.target in runs:
        recs = db.records('WHERE run_id = ?', (args.target,))
        want = None
    elif m:
        want = (m.group(1), m.group(2), m.group(3), m.group(4),
                int(m.group(5)), int(m.group(6)), m.group(7) or 'sweep')
        recs = [r for r in db.records(
                    'WHERE system = ? AND partition = ? AND transport = ? '
                    'AND collective = ? AND nodes = ? AND ranks = ?',
                    want[:6])
                if (*series.series_key(r)[:6],
                    series.series_key(r)[7]) == want]
        if recs:       # at the key's newest run
            last = max((r['time'], r['run_id']) for r in recs)[1]
            recs = [r for r in recs if r['run_id'] == last]
    else:
        answers.check_runs(db, args.target)
        recs, want = [], None
    # a run that is not healthy is never a level (its measured sizes or
    # not: a crash may have measured none)
    bad = unhealthy(db, recs, whole_run=want is None,
                    transport=args.transport)
    if bad:
        raise CclHealthError(
            f'accept: run {bad["run_id"]} is not healthy: {bad["case_name"]}'
            f' is {bad["verdict"]} (only a run whose cases passed becomes a '
            f'level; a new level below the reference is recalibrated: '
            f'scripts/calibrate)')
    recs = [r for r in recs if r['size'] is not None and
            r['busbw'] is not None and
            (args.transport is None or r['transport'] == args.transport) and
            (size is None or r['size'] == size)]
    if not recs:
        raise CclHealthError(f'accept: no measured sizes of {args.target!r}'
                             + (f' ({args.transport})' if args.transport
                                else '') + f' in {db.where}')
    rows = {}
    for r in recs:
        key = series.series_key(r)
        rows.setdefault(key, {
            'run_id': r['run_id'], 'run_time': r['time'],
            **dict(zip(store.ACCEPT_KEY, key)), 'size': size})
    ids = db.accept(list(rows.values()), _who(), args.reason.strip())
    for i, key in zip(ids, rows):
        print(f'accepted #{i}: {finding.where_text(key)}'
              f'{" at " + args.size if args.size else ""} from run '
              f'{rows[key]["run_id"]}: its values are the baseline from '
              f'there on (undo: scripts/report accept --undo {i})')
    return 0


def unhealthy(db, recs, whole_run, transport=None):
    """The first case row, of the run(s) of the records ``recs``, whose
    verdict is not pass, or None: with ``whole_run`` every case of the run
    (of ``transport``, when given; a case skipped measured nothing and is
    no fault), else the cases of the keys of ``recs``."""
    from ccl_health.judge.verdicts import Verdict
    keys = {series.series_key(r) for r in recs}
    for run_id in sorted({r['run_id'] for r in recs}):
        for c in db.cases('WHERE run_id = ?', (run_id,)):
            if whole_run:
                if transport is not None and c['transport'] != transport:
                    continue
            elif series.series_key(c) not in keys:
                continue
            if c['verdict'] not in (Verdict.PASS.value,
                                    Verdict.SKIPPED.value):
                return c
    return None


def acceptance_line(a):
    key = tuple(a[k] for k in series.KEY) + (a['kind'],)
    state = (f'; undone by {a["undone_by"]} at {a["undone_at"]}'
             if a['undone_at'] else '')
    return (f'#{a["id"]} {a["created"]} {a["who"]}: '
            f'{finding.where_text(key)}'
            f'{" at " + str(a["size"]) if a["size"] else ""} from run '
            f'{a["run_id"]}: {a["reason"]}{state}')


#: the questions of ``scripts/report`` but ``ingest``: subcommand ->
#: function of the database and the arguments
_QUESTIONS = {
    'accept': cmd_accept, 'prune': _prune, 'rejudge': cmd_rejudge,
    'migrate': _migrate, 'failed': _failed, 'runs': cmd_runs,
    'since': _since, 'history': _history, 'compare': _compare,
    'detect': _detect, 'report': _report,
}
