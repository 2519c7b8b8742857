"""The commands people type (scripts/ wraps them):

* ``run``: build, sweep every transport on this machine, print the verdict
  per transport and where the results are stored;
* ``summary``: the verdicts of a finished run, from its ReFrame report;
* ``calibrate``: record a reference from a run.
"""

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import tempfile

from ccl_health import (CclHealthError, entry, helptext, identity, outputs,
                        resources, safefile)
from ccl_health.db import aborted
from ccl_health.db import calibrate
from ccl_health import reportcli as dbcli
from ccl_health.evidence import nodefacts as node
from ccl_health.db import recorder
from ccl_health.db import store
from ccl_health import dburl, summary
from ccl_health.buildcache import resolve_mirror

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
    # installed in a parent environment that .venv sees (scripts/_venv.sh):
    # no console script here, and the package has no __main__; its entry
    # point, as the console script calls it
    return [sys.executable, '-c', 'import sys; from reframe.frontend.cli '
            'import main; sys.argv[0] = "reframe"; sys.exit(main())']


def _job_folders(out):
    """ReFrame's stage and output folders of a run writing to ``out``.
    ReFrame runs each job from its stage folder and cannot launch one whose
    path has whitespace (it splits the path), so for such an ``out`` they go
    to a space-free folder of their own under the temporary folder; the
    reports, the databases and the perflogs stay in ``out``.

    That folder keeps one name for ``out`` from run to run (ReFrame then
    replaces a case's old stage folder instead of leaving one more), so
    its name can be guessed: it is made mode 0700, and one that is there
    already is used only when it, ``stage`` and ``output`` are real
    folders of this user that no one else can write in
    (:func:`ccl_health.safefile.private_dir`); else one line, exit 2.
    Another local user who made it first would otherwise receive the job
    scripts (run as this user) and the results."""
    if not any(c.isspace() for c in out):
        return os.path.join(out, 'stage'), os.path.join(out, 'output')
    root = safefile.private_dir(os.path.join(
        tempfile.gettempdir(), 'ccl-health-%d-%s' % (
            os.getuid(), hashlib.sha256(out.encode()).hexdigest()[:12])),
        'space-free stage folder')
    return tuple(safefile.private_dir(os.path.join(root, name),
                                      'space-free stage folder')
                 for name in ('stage', 'output'))


RUN_HELP = """\
Build what is tested, sweep every transport on this machine with one MPI
rank per GPU, print one verdict line per transport and where the results
are.  On a host without GPUs (a login node, cron, scrontab) the jobs of
a batch-scheduled system (its partitions' scheduler slurm / squeue, with
sbatch on PATH) are submitted all the same, and the run says so; for a
system whose jobs run on this host (`local`), or without sbatch here (a
laptop): say so, render the job scripts (ReFrame dry run), exit 0.  Progress (build steps, the size a sweep reached) is printed every
$CCL_HEALTH_PROGRESS_S seconds (20); ReFrame's full output is in
<output>/reframe.log.  It ends with the history findings (drop, drift,
recovery) of the keys it measured.  Exit 0 pass, 1 a failure or a new drop
/ drift against history, 2 not judged or nothing selected, 128 + N stopped
by signal N."""


#: ReFrame's options that choose the test cases: given after ``--`` they
#: replace the default selection (``--tag=nightly``).  The narrowing ones
#: (``-x``, ``-T``, ``-p``, ``--cpu-only``, ``--gpu-only``) apply within
#: it.
SELECTING = ('-n', '--name', '-t', '--tag', '-E', '--filter-expr', '--mode',
             '--maintainer', '--failed', '--restore-session')


def user_selects(reframe_args):
    """Whether ReFrame's options ``reframe_args`` choose the test cases
    themselves (``-n X``, ``-nX``, ``--name=X``, ``--mode=nightly``...)."""
    for a in reframe_args:
        for opt in SELECTING:
            if a == opt or (opt.startswith('--') and a.startswith(opt + '='))\
                    or (not opt.startswith('--') and a.startswith(opt)
                        and not a.startswith('--')):
                return True
    return False


def _rendered_cases(report):
    """The test cases a dry run rendered a job script for: neither a build
    nor skipped nor failed."""
    for run in report.get('runs', []):
        for tc in run.get('testcases', []):
            if not tc.get('fixture') and tc.get('result') == 'pass':
                yield tc


def rendered(report):
    """What a dry run rendered, from its run report: ``['16 tasks on 2
    nodes of frontier:batch (8 per node)', ...]``, one per distinct
    shape, fixtures (builds), skipped and failed cases left out."""
    shapes = {}
    for tc in _rendered_cases(report):
        tasks = tc.get('num_tasks') or 1
        per = tc.get('num_tasks_per_node') or tasks
        nodes = tc.get('num_nodes') or max(1, -(-tasks // per))
        key = (f'{tasks} task{"s" if tasks != 1 else ""} on {nodes} '
               f'node{"s" if nodes != 1 else ""} of {tc.get("system")}:'
               f'{tc.get("partition")} ({per} per node)')
        shapes[key] = shapes.get(key, 0) + 1
    return [f'{n} x {k}' for k, n in shapes.items()]


def job_scripts(report):
    """The job scripts this run rendered, from its run report: one per
    test case that was neither a build nor skipped nor failed (a reused
    output folder keeps the scripts of earlier runs and other systems
    beside them: never counted)."""
    out = []
    for tc in _rendered_cases(report):
        path = os.path.join(tc.get('stagedir') or '', 'rfm_job.sh')
        if tc.get('stagedir') and os.path.exists(path):
            out.append(path)
    return sorted(set(out))


def _one_line(text):
    return ' '.join(str(text or '').split())


def dry_run_lines(report, rc):
    """What a dry run ends with: the job scripts it rendered, each case
    it skipped with the reason (a transport the site file does not list),
    and, where ReFrame failed a case (rc != 0), that it did: never
    "PASSED" after a FAILED."""
    scripts = job_scripts(report)
    shapes = rendered(report)
    skipped, failed = {}, []
    for run in report.get('runs', [])[-1:]:
        for tc in run.get('testcases', []):
            if tc.get('fixture') and tc.get('result') != 'fail':
                continue
            name = tc.get('display_name') or tc.get('name') or '?'
            if tc.get('result') == 'skip':
                why = _one_line(tc.get('skip_reason') or
                                tc.get('fail_reason')) or 'skipped'
                checks = skipped.setdefault(why, {})
                check = name.split(' %')[0]
                checks[check] = checks.get(check, 0) + 1
            elif tc.get('result') == 'fail':
                reason = _one_line(tc.get('fail_reason')) or 'failed'
                failed.append(f'ccl-health: FAILED {name}: {reason[:300]}')
    head = (f'ccl-health: dry run rendered {len(scripts)} job scripts'
            + (f': {"; ".join(shapes)}' if shapes else '')
            + f', e.g. {scripts[0] if scripts else "(none)"}.  Nothing '
            f'was run or measured')
    if rc == 0 and not failed:
        head += (' (ReFrame\'s PASSED above means the scripts were '
                 'rendered); on a node with GPUs scripts/run runs them')
    else:
        head += (f'; {len(failed) or "some"} case(s) could not be rendered '
                 f'(ReFrame exit code {rc}; FAILED above, each named '
                 f'below): fix them before a real run')
    skips = [f'ccl-health: skipped {sum(checks.values())} case(s) ('
             + ', '.join(c + (f' x{n}' if n > 1 else '')
                         for c, n in checks.items()) + f'): {why}'
             for why, checks in skipped.items()]
    return [head] + skips + failed


def _selection(args):
    if args.checks or user_selects(args.reframe_args):
        return []
    return ['--tag=nightly']         # the scale runs are asked for by name


def _check_config_dir():
    """A ``CCL_HEALTH_CONFIG_DIR`` (or a site pointer's site directory)
    without system files: one line before ReFrame would print its
    traceback."""
    from ccl_health.sitedata import sysconfig
    mine = resources.config_dir()
    if not sysconfig.system_files(mine):
        src = (f'CCL_HEALTH_CONFIG_DIR={mine}'
               if os.environ.get('CCL_HEALTH_CONFIG_DIR') else
               f'{resources.site_pointer_path()}: {mine}')
        raise CclHealthError(
            f'{src}: no system file in '
            f'{os.path.join(mine, sysconfig.SYSTEMS)} (it names the folder '
            f'that holds systems/: scripts/init-site DIR makes DIR/config)')


# long: scripts/run's steps in the order they run
def cmd_run(args):
    _check_config_dir()
    from ccl_health.judge import validate
    validate.before_run(_system_asked(args.reframe_args))
    out = os.path.abspath(args.output)
    stage, outputdir = _job_folders(out)
    env = dict(os.environ, CCL_HEALTH_OUTPUT=out,
               CCL_HEALTH_RUN_ID=recorder.default_run_id())
    # ReFrame runs from the checkout: a site copy named relative to where
    # the command was started is made absolute
    for var in ('CCL_HEALTH_SITE_DIR', 'CCL_HEALTH_REFERENCE_DIR',
                'CCL_HEALTH_CONFIG_DIR'):
        if env.get(var):
            env[var] = os.path.abspath(env[var])
    if not sys.stdout.isatty():
        env.setdefault('RFM_COLORIZE', 'n')      # cron mail: no ANSI codes
    mirror = resolve_mirror(args.mirror)
    if mirror:
        env['CCL_HEALTH_MIRROR'] = mirror
    gpus = node.detect_gpus()
    dry = args.dry_run
    system = _system_asked(args.reframe_args)
    batch, why_not = submitted_to(system, gpus) if gpus.count == 0 \
        else ([], '')
    if batch:
        # a login node, a scrontab job: the jobs run on the compute nodes
        print(f'ccl-health: this host has no GPU ({gpus.why_none}); '
              + ('rendering' if dry else 'submitting') + ' to '
              f'{", ".join(batch)} (a batch-scheduled system); outputs in '
              f'{out}', flush=True)
    elif gpus.count == 0:
        where = f'--system {system}' if system else 'this machine'
        print(f'ccl-health: {gpus.why_none}: nothing can be swept here'
              + (f' ({why_not})' if why_not else '') + '. '
              f'Showing what would run for {where} (ReFrame dry run'
              + ('' if system else ', the local system pretending 2 GPUs')
              + f'); job scripts under {stage}.', flush=True)
        env.setdefault('CCL_HEALTH_ASSUME_GPUS', '2:sm_90')
        dry = True
    else:
        print(f'ccl-health: {gpus.describe()}; outputs in {out}',
              flush=True)
    # two runs into one output folder never share a run report
    report = os.path.join(out, 'reports', f'{identity.new("run-")}.json')
    cmd = _reframe() + ['-C', CONFIG, '-c', args.checks or SWEEP,
                        '--report-file', report, '--stage', stage,
                        '--output', outputdir]
    if not stage.startswith(out + os.sep):
        print(f'ccl-health: {out!r} has whitespace, which ReFrame cannot '
              f'run jobs from: stage folders in {stage}', flush=True)
    cmd += _selection(args)
    cmd += ['--dry-run'] if dry else ['-r']
    cmd += args.reframe_args
    os.makedirs(os.path.dirname(report), exist_ok=True)
    rc, stopped_by, lmod = _run_reframe(cmd, env, stage, out)
    db_url = env.get('CCL_HEALTH_DB') or os.path.join(out, 'ccl-health.db')
    if stopped_by:
        return _record_stopped(stage, env['CCL_HEALTH_RUN_ID'], db_url,
                               stopped_by, report)
    if not os.path.exists(report):
        if rc == 0:
            print(f'ccl-health: nothing was selected: ReFrame found no test '
                  f'case for {" ".join(_selection(args) + args.reframe_args) or "the default selection"}'
                  f' in {args.checks or SWEEP} (list them with: reframe -C '
                  f'{CONFIG} -c {args.checks or SWEEP} -l)', file=sys.stderr)
            return 2
        print(f'ccl-health: ReFrame wrote no report (exit code {rc}); see '
              f'{out}/reframe.log', file=sys.stderr)
        # no Lmod here: the tool could not run (2), nothing was measured
        # to fail (1)
        return 2 if lmod else rc or 1
    if dry:
        print('\n'.join(dry_run_lines(summary.load_report(report), rc)))
        return 0 if rc == 0 else rc
    data = summary.load_report(report)
    verdicts = summary.case_verdicts(data)
    # what never reached the check's own recording (hangs, crashes, build
    # failures) and the performance verdicts go in from the report
    with store.open_store(db_url) as db:
        for case in recorder.cases_from_report(data,
                                               env['CCL_HEALTH_RUN_ID']):
            db.add_case(case)
        _take_file_levels(db, data, env)
    print('\n== ccl-health verdict ==')
    print(summary.render(verdicts, where=f'{report} (run report); '
                         f'{dburl.shown(db_url)} (performance database); '
                         f'{out}/results.db (ReFrame results storage); '
                         f'{out}/perflogs (perflog); '
                         f'{out}/reframe.log (ReFrame\'s full log)',
                         db=dburl.shown(db_url)))
    code = summary.run_exit_code(verdicts)
    new = _history_lines(db_url, env['CCL_HEALTH_RUN_ID'])
    # a new drop / drift after PASS needs a person: exit 1, never 0
    return max(code, 1) if new and code == 0 else code


def _take_file_levels(db, report, env):
    """The reference files this run was judged against are the level of
    their calibrated entries where the database holds no newer one
    (:func:`ccl_health.db.levels.take_file_levels`): recorded before the
    run's history findings are read.  A file that cannot be read is said,
    never a failure of the run."""
    from ccl_health.db import levels
    from ccl_health.judge import reference
    refdir = env.get('CCL_HEALTH_REFERENCE_DIR') or \
        resources.reference_dir()
    parts = {}
    for tc in report['runs'][-1]['testcases']:
        if tc.get('system') and tc.get('partition'):
            parts.setdefault(tc['system'], set()).add(tc['partition'])
    refs = []
    for system, partitions in sorted(parts.items()):
        try:
            refs.append((reference.load_for_system(refdir, system),
                         partitions))
        except (CclHealthError, OSError):
            continue          # no reference file: no level in it
    for ref, partitions in refs:
        rows = levels.take_file_levels(db, [ref], partitions)
        if rows:
            keys = len({tuple(r[k] for k in store.ACCEPT_KEY[:-1])
                        for r in rows})
            print(f'ccl-health: the calibration in {ref.path} is the level '
                  f'of {keys} configuration(s) in the performance database '
                  f'from now on '
                  f'(the database held no newer one)', flush=True)


def _history_lines(db_url, run_id):
    """Print the history findings (drop, drift, recovery, intermittent)
    of the keys this run measured; True when one is new since the last
    complete run and needs a person (:mod:`ccl_health.findings`)."""
    from ccl_health import findings, nightly
    with store.open_store(db_url, readonly=True) as db:
        found, new, prev = findings.run_findings(db, run_id)
        if not found:
            print(f'history: no drop, drift or recovery against earlier runs'
                  f' ({"compared with run " + prev if prev else "no earlier complete run"})')
            return False
        fresh = {id(f) for f in new}
        print(f'history: {len(found)} finding(s), {len(new)} new since '
              f'{"run " + prev if prev else "no earlier complete run"}:')
        for f in found:
            for line in findings.finding_lines([f], db):
                print(('NEW ' if id(f) in fresh and not line.startswith(' ')
                       else '') + line)
        return nightly.needs_a_person(new)


def submitted_to(system, gpus):
    """``(partitions, why not)``: the partitions the run's jobs are
    submitted to from a host without GPUs (:func:`ccl_health.evidence.
    nodefacts.submitted_to`: every one batch-scheduled, its sbatch here),
    else ``[]``: a dry run."""
    import socket
    return node.submitted_to(resources.config_dir(), system,
                             socket.gethostname(), gpus)


def _system_asked(reframe_args):
    """The ``--system`` given to ReFrame, or ''."""
    for i, a in enumerate(reframe_args):
        if a == '--system' and i + 1 < len(reframe_args):
            return reframe_args[i + 1]
        if a.startswith('--system='):
            return a.split('=', 1)[1]
    return ''


#: ReFrame's error where a system's configuration asks for Lmod and the
#: machine has none, and what helps
LMOD_HINT = ('ccl-health: hint: this system\'s configuration loads its '
             'modules with Lmod, which this machine lacks; to render its job '
             'scripts here set CCL_HEALTH_MODULES_SYSTEM=nomod (docs/sites.md: '
             '"Sites from a laptop")')

#: seconds between two looks at the stage folders for progress
PROGRESS_S = float(os.environ.get('CCL_HEALTH_PROGRESS_S') or 20)


#: how long ReFrame gets to abort its cases and stop its jobs after a
#: SIGTERM / SIGINT before what is left is killed
STOP_GRACE_S = 30


def _run_reframe(cmd, env, stage=None, out=None):
    """Run ReFrame; its output goes on to ours, with progress lines
    (:mod:`ccl_health.progress`) every ``PROGRESS_S`` seconds.  On SIGTERM
    / SIGINT pass SIGTERM on (ReFrame aborts its cases and cancels their
    jobs), wait for it, then stop whatever this run started and is still
    running.  Returns (exit code, the signal's name or None, whether
    ReFrame stopped for want of Lmod)."""
    import threading
    from ccl_health.progress import Progress
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, start_new_session=True,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    got = []
    progress = Progress(stage) if stage else None
    lock = threading.Lock()
    lmod = []

    def say(text):
        with lock:
            sys.stdout.write(text)
            sys.stdout.flush()

    def pump():
        for raw in iter(proc.stdout.readline, b''):
            line = raw.decode(errors='replace')
            say(line)
            if progress:
                progress.saw_line(line)
            if 'sane Lmod' in line or 'sane TMod' in line:
                lmod.append(line)
    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    done = threading.Event()

    def watch():
        while not done.wait(PROGRESS_S):
            for line in progress.poll():
                say(line + '\n')
    watcher = threading.Thread(target=watch, daemon=True)
    if progress:
        watcher.start()

    from ccl_health.stops import passed_on
    try:
        with passed_on(proc, got):
            rc = _wait_stopping(proc, got)
    finally:
        done.set()
        reader.join(timeout=10)
    if lmod:
        print(LMOD_HINT, file=sys.stderr)
    if got:
        left = aborted.stop_leftovers(env['CCL_HEALTH_RUN_ID'])
        if left:
            print(f'ccl-health: stopped {len(left)} process(es) the run had '
                  f'left: {", ".join(map(str, left))}', file=sys.stderr)
    return rc, (got[0] if got else None), bool(lmod)


def _wait_stopping(proc, got):
    """ReFrame's exit code; once stopped (``got``), SIGKILL to its group
    after :data:`STOP_GRACE_S`."""
    while True:
        try:
            return proc.wait(timeout=STOP_GRACE_S if got else None)
        except subprocess.TimeoutExpired:
            print(f'ccl-health: ReFrame did not stop within '
                  f'{STOP_GRACE_S} s of {got[0]}: killing it',
                  file=sys.stderr)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass


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
          f'aborted; recorded in {dburl.shown(db_url)} (run {run_id})'
          + (f'; no run report ({report} was not written)'
             if not os.path.exists(report) else ''))
    return 128 + getattr(signal, stopped_by, signal.SIGTERM).value


def cmd_summary(args):
    verdicts = summary.case_verdicts(summary.load_report(args.report))
    print(summary.render(verdicts))
    return summary.run_exit_code(verdicts)


def cmd_calibrate(args):
    return calibrate.command(args)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    # the scripts name themselves (``--prog scripts/report db ...``): the
    # usage and error lines say the command the user typed
    prog = None
    if argv[:1] == ['--prog'] and len(argv) > 1:
        prog, argv = argv[1], argv[2:]
    ap = argparse.ArgumentParser(prog='ccl-health')
    sub = ap.add_subparsers(dest='cmd', required=True)

    def named(name, **kw):
        if prog and argv[:1] == [name]:
            kw['prog'] = prog
        return sub.add_parser(name, **kw)
    p = named('run', help='build and sweep every transport here',
              description=RUN_HELP)
    p.add_argument('--mirror', help='folder of source tarballs for '
                   'air-gapped nodes (default: $CCL_HEALTH_MIRROR, else '
                   'download from upstream)')
    p.add_argument('--output', default=None, help='where stage folders, '
                   'run reports, perflogs, ReFrame\'s log, results.db and '
                   'ccl-health.db go (default: $CCL_HEALTH_OUTPUT, else '
                   './ccl-health-output)')
    p.add_argument('--checks', help='check file to run (default: '
                   'checks/collective_sweep.py); with it, no default '
                   'selection')
    p.add_argument('--dry-run', action='store_true',
                   help='render the job scripts, run nothing (ReFrame '
                   '--dry-run); automatic without GPUs where the jobs '
                   'would run on this host (the local system)')
    p.add_argument('reframe_args', nargs='*', metavar='-- REFRAME_OPTIONS',
                   help='after --: passed to reframe, e.g. -S max_size=1G. '
                   'A selection (-n, -t, -E, --mode, --maintainer, '
                   '--failed) replaces the default --tag=nightly; -x, -T, '
                   '-p, --cpu-only, --gpu-only narrow it')
    p.set_defaults(func=cmd_run)
    p = named('summary', help='verdicts of a finished run')
    p.add_argument('report', help='a ReFrame run report '
                   '(<output>/reports/run-<time>.json)')
    p.set_defaults(func=cmd_summary)
    p = named('calibrate', help='record a reference from runs',
              description=calibrate.DESCRIPTION)
    calibrate.add_arguments(p, resources.reference_dir())
    p.set_defaults(func=cmd_calibrate)
    p = named('db', help='the performance database: ingest, queries, '
              'detection, report')
    dbcli.add_arguments(p)
    p.set_defaults(func=dbcli.cmd_db)
    from ccl_health import initsite
    p = named('init-site', help='copy the shipped site data, references '
              'and ReFrame systems into DIR to edit them, and say how to '
              'point the suite at the copy',
              description=initsite.__doc__.split('\n\n')[0].replace(
                  '``', ''))
    initsite.add_arguments(p)
    p.set_defaults(func=initsite.command)
    helptext.apply(ap)
    args = ap.parse_args(argv)
    if getattr(args, 'output', '') is None:
        args.output = outputs.output_dir()
    return entry.run(args.func, args)


if __name__ == '__main__':
    sys.exit(main())
