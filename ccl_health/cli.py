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
import subprocess
import sys

from . import TRANSPORTS, CclHealthError, calibrate, node, reference, summary
from .buildcache import resolve_mirror

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, 'config', 'settings.py')
SWEEP = os.path.join(REPO, 'checks', 'collective_sweep.py')


def _reframe():
    exe = os.path.join(os.path.dirname(sys.executable), 'reframe')
    return [exe] if os.path.exists(exe) else [sys.executable, '-m',
                                             'reframe']


def cmd_run(args):
    out = os.path.abspath(args.output)
    env = dict(os.environ, CCL_HEALTH_OUTPUT=out)
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
                        '--report-file', report]
    if not args.checks:
        cmd += ['--tag=nightly']     # the scale runs are asked for by name
    cmd += ['--dry-run'] if dry else ['-r']
    cmd += args.reframe_args
    os.makedirs(os.path.dirname(report), exist_ok=True)
    rc = subprocess.call(cmd, env=env, cwd=REPO)
    if not os.path.exists(report):
        print(f'ccl-health: ReFrame wrote no report (exit code {rc}); see '
              f'{out}/reframe.log', file=sys.stderr)
        return rc or 1
    if dry:
        scripts = sorted(glob.glob(os.path.join(
            out, 'stage', '**', 'rfm_job.sh'), recursive=True))
        print(f'ccl-health: dry run rendered {len(scripts)} job scripts, '
              f'e.g. {scripts[0] if scripts else "(none)"}')
        return 0 if rc == 0 else rc
    verdicts = summary.case_verdicts(summary.load_report(report))
    print('\n== ccl-health verdict ==')
    print(summary.render(verdicts, where=f'{report} (run report); '
                         f'{out}/results.db (ReFrame results storage); '
                         f'{out}/perflogs (perflog)'))
    ok = all(v.verdict in ('pass', 'skipped') for v in verdicts)
    return 0 if ok else 1


def cmd_summary(args):
    verdicts = summary.case_verdicts(summary.load_report(args.report))
    print(summary.render(verdicts))
    return 0 if all(v.verdict in ('pass', 'skipped') for v in verdicts) \
        else 1


def _tolerances(specs):
    tol = {t: 0.10 for t in TRANSPORTS}
    for spec in specs or []:
        if '=' in spec:
            t, _, v = spec.partition('=')
            if t not in TRANSPORTS:
                raise CclHealthError(f'--tolerance {spec}: unknown transport '
                                     f'{t!r}')
            tol[t] = float(v)
        else:
            tol = {t: float(spec) for t in TRANSPORTS}
    return tol


def cmd_calibrate(args):
    tol = _tolerances(args.tolerance)
    groups = {}
    for path in args.report:
        for tc in summary.load_report(path)['runs'][-1]['testcases']:
            if tc.get('fixture') or not tc.get('perfvalues'):
                continue
            if tc.get('result') not in ('pass', 'success') and \
                    tc.get('fail_phase') != 'performance':
                print(f'skipping {tc.get("display_name")}: it failed '
                      f'({tc.get("fail_phase")}), not a healthy run')
                continue
            key = (tc['system'], tc['partition'], tc['transport'],
                   tc['collective'], int(tc['num_nodes']),
                   int(tc['num_tasks_per_node']), tc.get('algo', 'default'))
            groups.setdefault(key, []).append(
                calibrate.busbw_from_perfvalues(tc['perfvalues']))
    if not groups:
        raise CclHealthError('no sweep with performance values in '
                             + ', '.join(args.report))
    for (system, part, trans, coll, nodes, gpn, algo), runs in \
            sorted(groups.items()):
        sweeps = [_as_sweep(r) for r in runs]
        source = (args.source or f'calibrated by scripts/calibrate on '
                  f'{datetime.date.today().isoformat()} from '
                  f'{len(runs)} run(s): '
                  + ', '.join(os.path.basename(p) for p in args.report))
        entry = calibrate.entry_from_sweeps(
            sweeps, transport=trans, collective=coll, nodes=nodes,
            gpus_per_node=gpn, tolerance=tol[trans], source=source,
            min_size=args.min_size, algo=algo)
        path = os.path.join(args.reference_dir, f'{system}.yaml')
        gdr = ({'supported': False, 'reason': args.gdr_unsupported}
               if args.gdr_unsupported else None)
        reference.upsert(path, system, part, entry, gdr)
        print(f'{path}: {part} {trans} {coll} {nodes}x{gpn} {algo}: '
              f'{len(entry.busbw)} sizes, tolerance {entry.tolerance:.0%}')
    return 0


def _as_sweep(busbw_by_size):
    from .nccltests import Measurement, Row, SweepResult
    return SweepResult(rows=[Row(s, 0, '', '', None, None,
                                 Measurement(0.0, 0.0, v, 0))
                             for s, v in busbw_by_size.items()])


def main(argv=None):
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
    p.add_argument('--report', action='append', required=True,
                   help='ReFrame run report (repeat: the median is kept)')
    p.add_argument('--reference-dir', default=os.path.join(REPO,
                                                           'reference'))
    p.add_argument('--tolerance', action='append',
                   help='0.1 for all, or TRANSPORT=0.3 (repeatable)')
    p.add_argument('--min-size', default='1M')
    p.add_argument('--source', help='provenance text of the values')
    p.add_argument('--gdr-unsupported', metavar='REASON',
                   help='declare GPUDirect RDMA unsupported on the partition')
    p.set_defaults(func=cmd_calibrate)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except CclHealthError as err:
        print(f'ccl-health: error: {err}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == '__main__':
    sys.exit(main())
