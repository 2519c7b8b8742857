"""Turn measured sweeps into reference entries ("calibrate"): after an
acceptance run a site records what its machine does, and later runs are held
to it.

``scripts/calibrate`` (:func:`command`) never damages a reference file: it
checks every input first, builds the new file with :class:`reference_file.Editor`
(comments, sources, key order and the entries it does not touch stay as
they were; an entry it updates keeps its curated per-size tolerances, its
tolerance unless ``--tolerance`` names its transport, and its source, to
which the calibration's provenance is appended unless ``--source`` is
given), validates the result as loading would, and only then replaces the
file atomically.  ``--dry-run`` prints the diff and writes nothing.

Whichever input (run reports, the database, both), a calibration is one
level (:mod:`ccl_health.db.levels`): each size's noise and the
calibration's stamp beside the values in the reference file, and the
level recorded in the database at hand (:func:`level_databases`)."""

import contextlib
import datetime
import math
import os
import statistics

from ccl_health import CclHealthError
from ccl_health.sitedata.transports import NAMES as TRANSPORTS
from ccl_health.judge import baselines
from ccl_health.judge import series
from ccl_health.judge import reference_file
from ccl_health.judge.reference import Entry, busbw_perfvalues
from ccl_health.units import format_size, parse_size
from ccl_health.judge.verdicts import Verdict

#: the tolerance of a new entry when ``--tolerance`` does not name one
DEFAULT_TOLERANCE = 0.10
#: the verdicts of a run whose busbw may become a reference: a complete,
#: proven run, whether or not it met an older reference
USABLE = (Verdict.PASS, Verdict.BELOW_REFERENCE, Verdict.NO_REFERENCE)


def entry_from_sweeps(sweeps, *, transport, collective, nodes, gpus_per_node,
                      tolerance, source, min_size='1M', algo='default',
                      noise_k=4.0):
    """One reference entry from one or more :class:`SweepResult` of the
    same configuration: the median busbw per size over the sweeps, for sizes
    >= ``min_size`` (smaller ones are latency-bound and noisy).  With
    several sweeps (5 or more), a size whose run-to-run noise (``noise_k``
    x the MAD, scaled to a standard deviation: the history's
    :meth:`ccl_health.judge.history.Baseline.allowed_drop`) is larger than
    ``tolerance`` gets that wider tolerance of its own."""
    lo = parse_size(min_size)
    per_size = {}
    for sweep in sweeps:
        for row in sweep.rows:
            if row.size >= lo and row.busbw and math.isfinite(row.busbw) \
                    and row.busbw > 0:
                per_size.setdefault(row.size, []).append(row.busbw)
    if not per_size:
        raise CclHealthError(f'nothing to calibrate {transport}/{collective} '
                             f'from: no size >= {format_size(lo)} with a '
                             f'busbw')
    busbw = {s: round(statistics.median(v), 2) for s, v in per_size.items()}
    size_tol = {}
    for s, vals in per_size.items():
        if len(vals) >= 5:
            # the history's rule (ccl_health.judge.history.Baseline), in whole
            # percents, at most 90 %
            allowed = baselines.baseline(vals).allowed_drop(
                tolerance, noise_k, whole_percent=True)
            if allowed > tolerance:
                size_tol[s] = min(allowed, 0.9)
    return Entry(transport, collective, nodes, gpus_per_node, tolerance,
                 source, busbw, algo, size_tol)


#: the verdicts of the database's cases calibrated from: passed, or
#: complete and proven with nothing to compare against (a configuration's
#: first runs: ReFrame's report holds no busbw for them, they failed its
#: sanity).  Not below-reference: a degradation never becomes the reference
#: unseen.
FROM_STORE = (Verdict.PASS, Verdict.NO_REFERENCE)


def runs_from_store(db, system, partition, last=20):
    """Per configuration ``(transport, collective, nodes, ranks, algo)``,
    its last ``last`` healthy runs in the performance database (cases whose
    verdict is in :data:`FROM_STORE`), newest first: their case rows, each
    with ``busbw``, ``{size: busbw}``.  Read by the series index
    (:func:`ccl_health.db.scopes.series_keys`): each series' newest healthy
    cases, never the partition's whole history."""
    import heapq
    from ccl_health.db import scopes
    groups = {}
    for key in scopes.series_keys(db, system=system, partition=partition):
        if not key[4] or not key[5]:          # no nodes or ranks recorded
            continue
        group = (key[2], key[3], key[4], key[5], key[6] or 'default')
        groups.setdefault(group, []).append(_healthy_newest(db, key, last))
    merged = {group: list(heapq.merge(*per, key=lambda c: (c['time'],
                                                           c['id']),
                                      reverse=True))[:last]
              for group, per in groups.items()}
    return {group: runs for group, runs in merged.items() if runs}


def _healthy_newest(db, key, last):
    """The newest ``last`` cases of the series ``key`` whose verdict is in
    :data:`FROM_STORE` and that measured a busbw, newest first, each with
    its ``busbw``: read ``last`` at a time from the newest back."""
    from ccl_health.db import newestruns
    from ccl_health.db import keyhistory
    where, params, exact = keyhistory.key_where(db, key)
    marks = ', '.join('?' for _ in FROM_STORE)
    sql = (f'SELECT {", ".join("c." + c for c in keyhistory.CASE_LIGHT)}'
           f' FROM cases c WHERE {where} AND c.verdict IN ({marks}) AND '
           f'(c.time, c.id) < (?, ?) ORDER BY c.time DESC, c.id DESC '
           f'LIMIT ?')
    out, at = [], (newestruns._LATEST, 0)
    while len(out) < last:
        rows = db.query(sql, tuple(params) + tuple(
            v.value for v in FROM_STORE) + at + (last,))
        for c in rows:
            if not exact and series.series_key(c) != key:
                continue
            busbw = {m['size']: m['busbw'] for m in db.query(
                'SELECT size, busbw FROM measurements WHERE case_id = ? AND '
                'busbw IS NOT NULL', (c['id'],))}
            if busbw and len(out) < last:
                out.append(dict(c, busbw=busbw))
        if len(rows) < last:
            break
        at = (rows[-1]['time'], rows[-1]['id'])
    return out


def sweep_from_busbw(busbw_by_size):
    """A :class:`SweepResult` holding only busbw per size (what a run
    report or the database keeps), for :func:`entry_from_sweeps`."""
    from ccl_health.evidence.results import Measurement, Row, SweepResult
    return SweepResult(rows=[Row(s, 0, '', '', None, None,
                                 Measurement(0.0, 0.0, v, 0))
                             for s, v in busbw_by_size.items()])


def sweep_from_perfvalues(perfvalues):
    """The busbw sweep of a run report's test case."""
    return sweep_from_busbw({s: float(vals[0]) for s, vals in
                             busbw_perfvalues(perfvalues)
                             if _finite(vals[0])})


def _finite(x):
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


# -- the command ----------------------------------------------------------

#: what ``ccl-health calibrate --help`` says first
DESCRIPTION = ('Record a reference from a run: checks every input before it '
               'touches reference/<system>.yaml, keeps what it does not '
               'change, writes atomically.')


def add_arguments(p, reference_dir):
    """The options of ``ccl-health calibrate`` on the argparse parser
    ``p``."""
    p.add_argument('--report', action='append',
                   help='ReFrame run report (repeat: the median is kept); '
                   'the level is recorded in the database of its run: the '
                   'ccl-health.db beside its reports/ folder, else '
                   '$CCL_HEALTH_DB, where it exists')
    p.add_argument('--db', help='calibrate from the last healthy runs in '
                   'this performance database instead (or as well), and '
                   'record the level there')
    p.add_argument('--system', help='with --db: the system to calibrate '
                   '(default: every system in the database)')
    p.add_argument('--partition', help='with --db: the partition to '
                   'calibrate (default: every partition of the system)')
    p.add_argument('--last', default='20',
                   help='with --db: how many healthy runs per configuration')
    p.add_argument('--reference-dir', default=reference_dir,
                   help='folder of the reference/<system>.yaml files to '
                   'update')
    p.add_argument('--tolerance', action='append',
                   help='0.1 for all, or TRANSPORT=0.3 (repeatable); an '
                   'existing entry keeps its own unless its transport is '
                   f'named; a new one gets {DEFAULT_TOLERANCE}')
    p.add_argument('--min-size', default='1M',
                   help='smallest message size recorded (latency-bound '
                   'sizes below it are too noisy to judge)')
    p.add_argument('--source', help='provenance text of the values (replaces '
                   "an updated entry's source; else the calibration's "
                   'provenance is appended to it)')
    p.add_argument('--gdr-unsupported', metavar='REASON',
                   help='declare GPUDirect RDMA unsupported on the partition')
    p.add_argument('--dry-run', action='store_true',
                   help='print the change as a unified diff; write nothing')


def parse_tolerances(specs):
    """``{transport: tolerance}`` named by ``--tolerance`` options (``0.1``
    for every transport, ``TRANSPORT=0.3`` for one); each a finite fraction
    in [0, 1)."""
    out = {}
    for spec in specs or []:
        name, sep, value = str(spec).rpartition('=')
        if sep and name not in TRANSPORTS:
            raise CclHealthError(f'--tolerance {spec}: unknown transport '
                                 f'{name!r} (known: {", ".join(TRANSPORTS)})')
        try:
            tol = float(value)
        except ValueError:
            tol = None
        if tol is None or not math.isfinite(tol) or not 0 <= tol < 1:
            raise CclHealthError(f'--tolerance {spec}: {value!r} is not a '
                                 f'fraction in [0, 1) (e.g. 0.1 for 10 %)')
        out.update({name: tol} if sep else {t: tol for t in TRANSPORTS})
    return out


def _check_args(args):
    """Every input checked before anything is read or written."""
    tol = parse_tolerances(args.tolerance)
    if not args.report and not args.db:
        raise CclHealthError('give --report (run reports) or --db (the '
                             'performance database) to calibrate from')
    if args.db and not (args.system and args.partition):
        raise CclHealthError('--db needs --system and --partition')
    try:
        last = int(args.last)
    except (TypeError, ValueError):
        last = 0
    if last < 1:
        raise CclHealthError(f'--last {args.last}: not a positive number')
    try:
        min_size = parse_size(args.min_size)
    except CclHealthError as err:
        raise CclHealthError(f'--min-size: {err}') from None
    for opt in ('source', 'gdr_unsupported'):
        val = getattr(args, opt)
        if val is not None and not val.strip():
            raise CclHealthError(f'--{opt.replace("_", "-")}: empty text')
    if not os.path.isdir(args.reference_dir):
        raise CclHealthError(
            f'--reference-dir {args.reference_dir}: no such folder (the '
            f'folder of the reference files; create it for a first one)')
    for path in args.report or []:
        if not os.path.isfile(path):
            raise CclHealthError(f'--report {path}: no such file')
    if args.db and '://' not in args.db and not os.path.isfile(args.db):
        raise CclHealthError(f'--db {args.db}: no such file')
    return tol, last, min_size


def _usable(tc):
    """Why test case ``tc`` of a run report cannot be calibrated from, or
    None."""
    if tc.get('verdict'):
        v = Verdict.parse(tc['verdict'], Verdict.COULD_NOT_CHECK)
        if v not in USABLE:
            return f'its verdict is {v}'
    if tc.get('result') not in ('pass', 'success') and \
            tc.get('fail_phase') != 'performance':
        return f'it failed ({tc.get("fail_phase")})'
    return None


def runs_from_reports(paths):
    """The healthy runs of the run reports ``paths`` with a busbw per size,
    as the database's runs are (:func:`runs_from_store`): case rows (the
    columns of the history key, ``case_name``, ``run_id``: the report's
    name, ``time``: when its session ended, :func:`ccl_health.db.levels.
    report_time`) with ``busbw``, ``{size: busbw}``."""
    from ccl_health import summary
    from ccl_health.db import levels
    runs = []
    for path in paths:
        try:
            report = summary.load_report(path)
            cases = report['runs'][-1]['testcases']
        except (KeyError, IndexError, TypeError):
            raise CclHealthError(f'{path}: not a ReFrame run report (no '
                                 f'runs[-1].testcases)') from None
        name = os.path.basename(path)
        run_id = name[:-len('.json')] if name.endswith('.json') else name
        ended = levels.report_time(report)
        for tc in cases:
            if tc.get('fixture') or not busbw_perfvalues(
                    tc.get('perfvalues')):
                continue          # no busbw per size: nothing to calibrate
            why = _usable(tc)
            if why:
                print(f'skipping {tc.get("display_name")}: {why}, not a '
                      f'healthy run')
                continue
            try:
                nodes = int(tc['num_nodes'])
                run = {'system': tc['system'], 'partition': tc['partition'],
                       'transport': tc['transport'],
                       'collective': tc['collective'], 'nodes': nodes,
                       'ranks': nodes * int(tc['num_tasks_per_node']),
                       'algo': tc.get('algo') or 'default'}
            except (KeyError, TypeError, ValueError) as err:
                print(f'skipping {tc.get("display_name")}: no {err} in the '
                      f'run report')
                continue
            time = ended or tc.get('job_completion_time')
            runs.append(dict(
                run, case_name=tc.get('display_name') or tc.get('name'),
                source='report', run_id=run_id,
                time=time if isinstance(time, str) else '',
                busbw={r.size: r.busbw for r in sweep_from_perfvalues(
                    tc['perfvalues']).rows}))
    return runs


def _entry_key(run):
    """The reference entry a run is a measurement of: ``(system,
    partition, transport, collective, nodes, gpus per node, algo)``."""
    return (run['system'], run['partition'], run['transport'],
            run['collective'], run['nodes'], run['ranks'] // run['nodes'],
            run.get('algo') or 'default')


def command(args):
    """``ccl-health calibrate``: returns the exit code; a bad input is a
    :class:`CclHealthError` raised before any file is touched."""
    tol, last, _ = _check_args(args)
    runs = runs_from_reports(args.report or [])
    if args.db:
        from ccl_health.db import store
        # read read-only, never created; written (the level) only once the
        # new reference files are built and valid
        with store.open_store(args.db, readonly=True) as db:
            for got in runs_from_store(db, args.system, args.partition,
                                       last).values():
                runs += got
    groups = {}    # (system, partition, transport, collective, nodes,
    #                 gpus per node, algo) -> [run]
    for run in runs:
        groups.setdefault(_entry_key(run), []).append(run)
    if not groups:
        raise CclHealthError('no healthy sweep with performance values to '
                             'calibrate from')
    # every file read, changed and written under its lock (re-read there:
    # another calibration's change is kept); a dry run writes nothing and
    # takes no lock
    with contextlib.ExitStack() as held:
        if not args.dry_run:
            for system in sorted({k[0] for k in groups}):
                held.enter_context(reference_file.locked(os.path.join(
                    args.reference_dir, f'{system}.yaml')))
        return _calibrate(args, groups, tol)


def _source(args):
    return 'scripts/calibrate ' + ' '.join(
        opt for opt, given in (('--report', args.report), ('--db', args.db))
        if given)


#: the database ``scripts/run`` records in beside its run reports
#: (``<output>/reports/run-*.json``, ``<output>/ccl-health.db``)
BESIDE_REPORTS = os.path.join(os.pardir, 'ccl-health.db')


def level_databases(args):
    """Where the calibration's level is recorded: ``--db``; else, with
    ``--report``, the database of the runs reported: the
    ``ccl-health.db`` beside each report's folder (what ``scripts/run``
    and the nightly's rehearsal record in), else ``$CCL_HEALTH_DB`` (a
    site's database); only one that exists.  Empty: none at hand (the
    reference file carries the level)."""
    if args.db:
        return [args.db]
    out = []
    for path in args.report or []:
        beside = os.path.normpath(os.path.join(
            os.path.dirname(os.path.abspath(path)), BESIDE_REPORTS))
        if os.path.isfile(beside) and beside not in out:
            out.append(beside)
    site = os.environ.get('CCL_HEALTH_DB')
    if not out and site and ('://' in site or os.path.isfile(site)):
        out.append(site)
    return out


def _record_level(args, rows):
    """Record the calibration's level (:func:`ccl_health.db.levels.
    level_rows`) in the databases at hand (:func:`level_databases`): the
    baseline drops and drifts are judged from.  Returns the lines to
    print."""
    from ccl_health.db import store
    if not rows:
        return []
    urls = level_databases(args)
    keys = len({tuple(r[k] for k in store.ACCEPT_KEY[:-1]) for r in rows})
    if not urls:
        return [f'no performance database beside the run report(s) or in '
                f'$CCL_HEALTH_DB: the level of {keys} configuration(s) is '
                f'in the reference file (each size\'s noise beside its '
                f'value); scripts/run records it in its database after its '
                f'next run']
    if args.dry_run:
        return [f'{url}: would record the baseline of {keys} '
                f'configuration(s) ({len(rows)} sizes)' for url in urls]
    lines = []
    for url in urls:
        try:
            with store.open_store(url) as db:
                db.add_baselines(rows)
        except CclHealthError as err:
            raise CclHealthError(f'{err} (the baseline of the calibration '
                                 f'could not be recorded; no reference '
                                 f'file was written)') from None
        except store.driver_errors() as err:
            raise CclHealthError(f'{url}: cannot record the baseline of the '
                                 f'calibration: {err} (no reference file '
                                 f'was written)') from None
        lines.append(f'{url}: recorded the baseline of {keys} '
                     f'configuration(s) ({len(rows)} sizes): the history '
                     f'judges against it from the next run')
    return lines


def _calibrate(args, groups, tol):
    from ccl_health.db import levels
    origin = ', '.join(os.path.basename(p) for p in args.report or [])
    if args.db:
        origin += f'{", " if origin else ""}{args.db}'
    today = datetime.date.today().isoformat()
    editors, notes = {}, []
    every = []              # the level rows of every configuration
    for (system, part, trans, coll, nodes, gpn, algo), runs in \
            sorted(groups.items()):
        sweeps = [sweep_from_busbw(r['busbw']) for r in runs]
        rows = levels.level_rows(runs, args.min_size, _source(args))
        every += rows
        if system not in editors:
            editors[system] = reference_file.Editor(
                os.path.join(args.reference_dir, f'{system}.yaml'), system)
            for p in sorted({k[1] for k in groups if k[0] == system}):
                if args.gdr_unsupported:
                    editors[system].set_gdr(p, False, args.gdr_unsupported)
        ed = editors[system]
        old = ed.current.lookup(part, trans, coll, nodes, gpn, algo) \
            if ed.current else None
        tolerance = tol.get(trans, old.tolerance if old else
                            DEFAULT_TOLERANCE)
        provenance = (f'calibrated by scripts/calibrate on {today} from '
                      f'{len(sweeps)} run(s): {origin}')
        entry = entry_from_sweeps(
            sweeps, transport=trans, collective=coll, nodes=nodes,
            gpus_per_node=gpn, tolerance=tolerance,
            source=args.source or provenance if old is None else provenance,
            min_size=args.min_size, algo=algo)
        entry.noise, entry.calibrated = levels.entry_level(
            [r for r in rows if r['size'] in entry.busbw])
        ed.put(part, entry, merge=True, tolerance=tol.get(trans),
               source=args.source)
        wider = ', '.join(f'{format_size(s)} {t:.0%}' for s, t in
                          sorted(entry.size_tolerance.items()))
        notes.append(f'{ed.path}: {part} {entry.label()}: '
                     f'{len(entry.busbw)} sizes from {len(sweeps)} run(s)'
                     + (f' (noisier sizes: {wider})' if wider else ''))
    # every new file is built and validated before any is written; the
    # baseline is recorded first (a database that cannot be written leaves
    # the reference files as they were)
    texts = {system: ed.render() for system, ed in editors.items()}
    notes += _record_level(args, every)
    for system, ed in editors.items():
        text = texts[system]
        if args.dry_run:
            print(ed.diff(text) or f'{ed.path}: no change\n', end='')
        elif text != ed.old_text:
            reference_file.write_atomic(ed.path, text)
    for line in notes:
        print(line)
    for ed in editors.values():
        for change in ed.changes:
            print(f'{ed.path}: {change}')
    if args.dry_run:
        print('dry run: nothing written')
    return 0


if __name__ == '__main__':       # python -m ccl_health.db.calibrate ...
    import argparse
    import sys
    from ccl_health import entry, helptext, resources
    parser = argparse.ArgumentParser(prog='ccl-health calibrate',
                                     description=DESCRIPTION)
    add_arguments(parser, resources.reference_dir())
    helptext.apply(parser)
    sys.exit(entry.run(command, parser.parse_args()))
