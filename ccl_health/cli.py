"""The commands people type (scripts/ wraps them):

* ``run``: build, sweep every transport on this machine, print the verdict
  per transport and where the results are stored;
* ``summary``: the verdicts of a finished run, from its ReFrame report;
* ``calibrate``: record a reference from a run.
"""

import argparse
import datetime
import glob
import os
import signal
import subprocess
import sys

from . import (CclHealthError, aborted, calibrate, node, recorder,
               resources, store, summary)
from .buildcache import resolve_mirror

#: the checkout, or the installed copy of its folders (:mod:`.resources`)
REPO = resources.root()
CONFIG = resources.config_file()
SWEEP = os.path.join(resources.checks_dir(), 'collective_sweep.py')


def _reframe():
    import importlib.util
    if importlib.util.find_spec('reframe') is None:
        raise ModuleNotFoundError('No module named reframe', name='reframe')
    exe = os.path.join(os.path.dirname(sys.executable), 'reframe')
    if os.path.exists(exe):
        return [exe]
    return [sys.executable, '-m', 'reframe']


def _job_folders(out):
    """ReFrame's stage and output folders of a run writing to ``out``.
    ReFrame runs each job from its stage folder and cannot launch one whose
    path has whitespace (it splits the path), so for such an ``out`` they go
    to a space-free folder of their own under the temporary folder; the
    reports, the databases and the perflogs stay in ``out``."""
    if not any(c.isspace() for c in out):
        return os.path.join(out, 'stage'), os.path.join(out, 'output')
    import hashlib
    import tempfile
    root = os.path.join(tempfile.gettempdir(), 'ccl-health-%d-%s' % (
        os.getuid(), hashlib.sha256(out.encode()).hexdigest()[:12]))
    return os.path.join(root, 'stage'), os.path.join(root, 'output')


def cmd_run(args):
    out = os.path.abspath(args.output)
    stage, outputdir = _job_folders(out)
    env = dict(os.environ, CCL_HEALTH_OUTPUT=out,
               CCL_HEALTH_RUN_ID=recorder.default_run_id())
    mirror = resolve_mirror(args.mirror)
    if mirror:
        env['CCL_HEALTH_MIRROR'] = mirror
    gpus = node.detect_gpus()
    dry = args.dry_run
    if gpus.count == 0:
        print(f'ccl-health: {gpus.why_none}: nothing can be swept here. '
              f'Showing what would run on a node with 2 GPUs (ReFrame dry '
              f'run); job scripts under {out}/stage.', flush=True)
        env['CCL_HEALTH_ASSUME_GPUS'] = '2:sm_90'
        dry = True
    else:
        print(f'ccl-health: {gpus.count} x {gpus.model} ({gpus.arch}, driver '
              f'{gpus.driver}); outputs in {out}', flush=True)
    stamp = datetime.datetime.now().strftime('%Y%m%dT%H%M%S')
    report = os.path.join(out, 'reports', f'run-{stamp}.json')
    cmd = _reframe() + ['-C', CONFIG, '-c', args.checks or SWEEP,
                        '--report-file', report, '--stage', stage,
                        '--output', outputdir]
    if not stage.startswith(out + os.sep):
        print(f'ccl-health: {out!r} has whitespace, which ReFrame cannot '
              f'run jobs from: stage folders in {stage}', flush=True)
    if not args.checks:
        cmd += ['--tag=nightly']     # the scale runs are asked for by name
    cmd += ['--dry-run'] if dry else ['-r']
    cmd += args.reframe_args
    os.makedirs(os.path.dirname(report), exist_ok=True)
    rc, stopped_by = _run_reframe(cmd, env)
    db_url = env.get('CCL_HEALTH_DB') or os.path.join(out, 'ccl-health.db')
    if stopped_by:
        return _record_stopped(stage, env['CCL_HEALTH_RUN_ID'], db_url,
                               stopped_by, report)
    if not os.path.exists(report):
        print(f'ccl-health: ReFrame wrote no report (exit code {rc}); see '
              f'{out}/reframe.log', file=sys.stderr)
        return rc or 1
    if dry:
        scripts = sorted(glob.glob(os.path.join(
            glob.escape(stage), '**', 'rfm_job.sh'), recursive=True))
        print(f'ccl-health: dry run rendered {len(scripts)} job scripts, '
              f'e.g. {scripts[0] if scripts else "(none)"}')
        return 0 if rc == 0 else rc
    data = summary.load_report(report)
    verdicts = summary.case_verdicts(data)
    # what never reached the check's own recording (hangs, crashes, build
    # failures) and the performance verdicts go in from the report
    with store.open_store(db_url) as db:
        for case in recorder.cases_from_report(data,
                                               env['CCL_HEALTH_RUN_ID']):
            db.add_case(case)
    print('\n== ccl-health verdict ==')
    print(summary.render(verdicts, where=f'{report} (run report); '
                         f'{db_url} (performance database); '
                         f'{out}/results.db (ReFrame results storage); '
                         f'{out}/perflogs (perflog)'))
    return summary.run_exit_code(verdicts)


#: how long ReFrame gets to abort its cases and stop its jobs after a
#: SIGTERM / SIGINT before what is left is killed
STOP_GRACE_S = 30


def _run_reframe(cmd, env):
    """Run ReFrame; on SIGTERM / SIGINT pass SIGTERM on (ReFrame aborts its
    cases and cancels their jobs), wait for it, then stop whatever this
    run started and is still running.  Returns (exit code, the signal's
    name or None)."""
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, start_new_session=True)
    got = []

    def on_signal(signum, _frame):
        if not got:
            got.append(signal.Signals(signum).name)
            try:
                proc.send_signal(signal.SIGTERM)
            except OSError:
                pass

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM,
                                                     signal.SIGINT,
                                                     signal.SIGHUP)}
    try:
        while True:
            try:
                rc = proc.wait(timeout=STOP_GRACE_S if got else None)
                break
            except subprocess.TimeoutExpired:
                print(f'ccl-health: ReFrame did not stop within '
                      f'{STOP_GRACE_S} s of {got[0]}: killing it',
                      file=sys.stderr)
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if got:
        left = aborted.stop_leftovers(env['CCL_HEALTH_RUN_ID'])
        if left:
            print(f'ccl-health: stopped {len(left)} process(es) the run had '
                  f'left: {", ".join(map(str, left))}', file=sys.stderr)
    return rc, (got[0] if got else None)


def _record_stopped(stage, run_id, db_url, stopped_by, report):
    """A run stopped by a signal: record the cases in flight as aborted,
    say what was recorded, exit 128 + the signal."""
    with store.open_store(db_url) as db:
        done = {c['case_name']: c for c in db.cases('WHERE run_id = ?',
                                                    (run_id,))}
        flying = aborted.cases_in_flight(stage, run_id, set(done),
                                         stopped_by)
        for case in flying:
            db.add_case(case)
    print(f'\n== ccl-health verdict: the run was stopped by {stopped_by} ==')
    for name, c in sorted(done.items()):
        print(f'{name:<45} {c["verdict"].upper():<16} {c["reason"]}')
    for case in flying:
        print(f'{case.case_name:<45} {"ABORTED":<16} {case.reason}')
    print(f'{len(done)} case(s) judged before the stop, {len(flying)} '
          f'aborted; recorded in {db_url} (run {run_id})'
          + (f'; no run report ({report} was not written)'
             if not os.path.exists(report) else ''))
    return 128 + getattr(signal, stopped_by, signal.SIGTERM).value


def cmd_summary(args):
    verdicts = summary.case_verdicts(summary.load_report(args.report))
    print(summary.render(verdicts))
    return summary.run_exit_code(verdicts)


def cmd_calibrate(args):
    return calibrate.command(args)


def cmd_db(args):
    from . import queries, report, verdict
    # questions never create a database (an empty new one would answer
    # "nothing failed"), and a read-only one can still be read
    with store.open_store(args.db, readonly=args.db_cmd != 'ingest') as db:
        if args.db_cmd == 'ingest':
            n = 0
            for path in args.reports:
                for case in recorder.cases_from_report(
                        summary.load_report(path)):
                    db.add_case(case)
                    n += 1
            print(f'{n} test case(s) recorded in {db.where}')
        elif args.db_cmd == 'failed':
            found = queries.failures(db, args.hours)
            if found:
                print('\n'.join(line for _, line in found))
                return verdict.exit_code(v for v, _ in found)
            window = [r for r in queries.runs(db)
                      if queries.when(r.last_time) >=
                      queries.window_start(args.hours)]
            print(f'nothing failed in the last {args.hours:g} h ('
                  f'{sum(r.cases for r in window)} case(s) in {len(window)} '
                  f'run(s), all pass or skipped)')
        elif args.db_cmd == 'runs':
            queries.check_not_empty(db)
            for r in queries.runs(db, args.last):
                print(r.line())
        elif args.db_cmd == 'since':
            res = queries.since_when(db, args.transport, args.size,
                                     args.system, args.partition)
            last = queries.latest(db, args.transport, args.system,
                                  args.partition)
            v = queries.stored_verdict(last['verdict'])
            if res is None:
                print(f'{args.transport}: '
                      f'{"healthy" if v is verdict.Verdict.PASS else v} in '
                      f'the last run (run {last["run_id"]} at {last["time"]})'
                      + (f': {last["reason"]}' if v is not verdict.Verdict.PASS
                         and last['reason'] else ''))
                return 0
            print(f'{args.transport}: bad since {res[0]} (run {res[1]}, '
                  f'{res[2]} run(s) in a row; last: {last["verdict"]})')
            return verdict.exit_code([v]) or verdict.EXIT_FAIL
        elif args.db_cmd == 'history':
            for r in queries.history(db, args.transport, args.size,
                                     args.system, args.partition,
                                     last=args.last):
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
        elif args.db_cmd == 'compare':
            for name, size, a, b, ratio in queries.compare(db, args.run_a,
                                                           args.run_b):
                print(f'{name:<45} {size:>7}  {a:9.2f} -> {b:9.2f} GB/s  '
                      f'x{ratio:.3f}' if ratio else
                      f'{name:<45} {size:>7}  {a} -> {b} GB/s')
        elif args.db_cmd == 'detect':
            from .history import attribute, detect
            queries.check_not_empty(db)
            queries.check_runs(db, args.run)
            cases = db.cases()
            found = detect(db.records(), run_id=args.run)
            for f in found:
                print(f.line())
                if f.kind == 'drop':
                    for c in attribute(cases, f):
                        print(f'    changed: {c}')
            if not found:
                print(f'no drops against history in '
                      f'{f"run {args.run}" if args.run else "any run"} '
                      f'({len({c["run_id"] for c in cases})} run(s) recorded)')
            return 1 if any(f.kind != 'recovery' for f in found) else 0
        elif args.db_cmd == 'report':
            page, text = report.build(db, args.out, sizes=args.sizes)
            print(text)
            print(f'report: {page}')
    return 0


def cmd_init_site(args):
    """Copy ``site/`` and ``reference/`` as shipped into ``args.dir``."""
    import shlex
    import shutil
    dest = os.path.abspath(args.dir)
    pairs = [(resources.shipped_site_dir(), os.path.join(dest, 'site')),
             (resources.shipped_reference_dir(),
              os.path.join(dest, 'reference'))]
    clash = [os.path.join(d, os.path.relpath(os.path.join(top, f), src))
             for src, d in pairs for top, _, files in os.walk(src)
             for f in files
             if os.path.exists(os.path.join(
                 d, os.path.relpath(os.path.join(top, f), src)))]
    if clash and not args.force:
        raise CclHealthError(
            f'{dest}: {len(clash)} file(s) there already (e.g. {clash[0]}); '
            f'nothing copied (--force overwrites them)')
    n = 0
    for src, d in pairs:
        for top, _, files in os.walk(src):
            rel = os.path.relpath(top, src)
            os.makedirs(os.path.join(d, rel), exist_ok=True)
            for f in files:
                if f.endswith(('.pyc', '.pyo')):
                    continue
                shutil.copy2(os.path.join(top, f), os.path.join(d, rel, f))
                n += 1
    site, ref = pairs[0][1], pairs[1][1]
    print(f'ccl-health: copied {n} file(s): the site data to {site}, the '
          f'references to {ref}.\nEdit them, then point the suite at them '
          f'(every command, the health hook and ReFrame runs read these):\n'
          f'  export CCL_HEALTH_SITE_DIR={shlex.quote(site)}\n'
          f'  export CCL_HEALTH_REFERENCE_DIR={shlex.quote(ref)}')
    return 0


def main(argv=None):
    from .report import DEFAULT_TREND_SIZES
    ap = argparse.ArgumentParser(prog='ccl-health')
    sub = ap.add_subparsers(dest='cmd', required=True)
    p = sub.add_parser('run', help='build and sweep every transport here')
    p.add_argument('--mirror', help='folder of source tarballs (else '
                   '$CCL_HEALTH_MIRROR, else download)')
    p.add_argument('--output', default=os.environ.get(
        'CCL_HEALTH_OUTPUT', 'ccl-health-output'),
        help='where stage dirs, reports, perflogs and results.db go')
    p.add_argument('--checks', help='check file(s) to run (default: the '
                   'collective sweep)')
    p.add_argument('--dry-run', action='store_true')
    p.add_argument('reframe_args', nargs='*', help='after --: passed to '
                   'reframe (e.g. -S max_size=1G -n intra)')
    p.set_defaults(func=cmd_run)
    p = sub.add_parser('summary', help='verdicts of a finished run')
    p.add_argument('report')
    p.set_defaults(func=cmd_summary)
    p = sub.add_parser('calibrate', help='record a reference from runs')
    calibrate.add_arguments(p, resources.reference_dir())
    p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser('db', help='the performance database: ingest, '
                       'queries, detection, report')
    p.add_argument('--db', help='SQLite file or postgresql:// URL (default '
                   '$CCL_HEALTH_DB, else <output>/ccl-health.db)')
    dsub = p.add_subparsers(dest='db_cmd', required=True)
    q = dsub.add_parser('ingest', help='record finished ReFrame run reports '
                        '(creates the database)')
    q.add_argument('reports', nargs='+')
    q = dsub.add_parser('failed', help='what failed (or could not be '
                        'judged) last night; exit 1 failed, 2 unjudged')
    q.add_argument('--hours', type=float, default=24)
    q = dsub.add_parser('runs', help='the recorded runs, newest first, with '
                        'their verdict counts')
    q.add_argument('--last', type=int, help='only the newest N runs')
    q = dsub.add_parser('since', help='when did this start')
    q.add_argument('transport')
    q.add_argument('--size')
    q.add_argument('--system')
    q.add_argument('--partition')
    q = dsub.add_parser('history', help='history of a transport at a size')
    q.add_argument('transport')
    q.add_argument('--size')
    q.add_argument('--system')
    q.add_argument('--partition')
    q.add_argument('--last', type=int, default=30)
    q = dsub.add_parser('compare', help='compare two runs')
    q.add_argument('run_a')
    q.add_argument('run_b')
    q = dsub.add_parser('detect', help='drops, recoveries, intermittent '
                        'collapses against history, with what changed')
    q.add_argument('--run', help='judge only this run (default: all)')
    q = dsub.add_parser('report', help='HTML page with plots + summary')
    q.add_argument('--out', default='ccl-health-report',
                   help='folder for index.html and the PNGs (default: '
                   '%(default)s)')
    q.add_argument('--sizes', help='message sizes that get a trend plot, '
                   'comma separated (e.g. 8,1M,1G; min and max name the '
                   'smallest and largest measured); default: the nearest '
                   'measured to ' + ','.join(DEFAULT_TREND_SIZES))
    p.set_defaults(func=cmd_db)
    p = sub.add_parser('init-site', help='copy the shipped site data and '
                       'references into DIR to edit them, and say how to '
                       'point the suite at it')
    p.add_argument('dir', help='a new or empty folder (site/ and reference/ '
                   'go under it)')
    p.add_argument('--force', action='store_true', help='overwrite files '
                   'that are there already')
    p.set_defaults(func=cmd_init_site)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except CclHealthError as err:
        print(f'ccl-health: error: {err}', file=sys.stderr)
        return 2
    except ImportError as err:      # an extra that is not installed
        line = resources.missing_extra(err)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == '__main__':
    sys.exit(main())
