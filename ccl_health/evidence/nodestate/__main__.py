"""``python -m ccl_health.evidence.nodestate``: read the node's state (JSON on
stdout); ``--record FILE`` keeps every NVML call and answer; ``--replay
FILE`` reads a recording offline; ``--watch FILE`` samples the state every
``--interval`` s until SIGTERM / SIGINT (the job script of a sweep starts
and stops it), one JSON line per reading: ``before`` (full), ``sample``
(processes, memory, utilization, clock events), ``after`` (full, with the
XIDs since ``before``)."""

import argparse
import json
import os
import signal
import socket
import sys
import time

from ccl_health import safefile
from ccl_health.evidence.nodestate import read
from ccl_health.evidence.nodestate.nodedata import NodeState
from ccl_health.evidence.nodestate.diagnose import diagnose


def _parser():
    ap = argparse.ArgumentParser(prog='python -m ccl_health.evidence.nodestate',
                                 description=__doc__.split('\n\n')[0])
    ap.add_argument('--run-id', default=os.environ.get('CCL_HEALTH_RUN_ID'),
                    help="processes whose environment has this "
                    "CCL_HEALTH_RUN_ID are ours (default: this process's)")
    ap.add_argument('--ours', type=int, nargs='*', default=[],
                    help='pids that are ours')
    ap.add_argument('--record', metavar='FILE',
                    help='write every NVML call and answer here (JSON)')
    ap.add_argument('--label', default='', help='name of this reading in '
                    'the --record file')
    ap.add_argument('--append', action='store_true',
                    help='add this reading to an existing --record file')
    ap.add_argument('--replay', metavar='FILE',
                    help='read the state from a --record file, offline')
    ap.add_argument('--reading', type=int, default=0,
                    help='which reading of the --replay file')
    ap.add_argument('--watch', metavar='FILE',
                    help='sample every --interval s until SIGTERM, one JSON '
                    'line per reading')
    ap.add_argument('--interval', type=float, default=1.0)
    ap.add_argument('--xid-state', help='file keeping the time of the last '
                    'XID check (default: XIDs not read, except --watch: '
                    'since it started)')
    ap.add_argument('--causes', action='store_true',
                    help='print the causes (ccl_health.evidence.nodestate.diagnose) '
                    'instead of the state; with --watch FILE: of that file')
    return ap


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.causes and args.watch and os.path.exists(args.watch):
        states = read_watch(args.watch)
        for c in diagnose(states.get('before'), states.get('after'),
                          samples=states.get('samples', [])):
            print(('DRAIN ' if c.drain else '') + c.text)
        return 0
    if args.watch:
        return watch(args.watch, args.run_id, args.ours, args.interval)
    api = None
    if args.replay:
        from ccl_health.evidence.nodestate.nvml import RecordedNvml
        api = RecordedNvml(args.replay, args.reading)
    elif args.record:
        from ccl_health.evidence.nodestate.nvml import LiveNvml, Recording
        try:
            api = Recording(LiveNvml())
        except ImportError as err:
            print(f'cannot record: {err}', file=sys.stderr)
            return 2
    state = read(run_id=args.run_id, ours_pids=args.ours, nvml=api,
                 xid_state=args.xid_state)
    if args.record:
        doc = {'readings': []}
        if args.append and os.path.exists(args.record):
            with open(args.record) as fp:
                doc = json.load(fp)
        doc.setdefault('meta', {'host': socket.gethostname(),
                                'tool': 'python -m ccl_health.evidence.nodestate '
                                        '--record'})
        doc['readings'].append({'label': args.label, 'time': state.time,
                                'seconds': state.seconds,
                                'calls': api.calls,
                                'state': state.to_dict()})
        safefile.write_json(args.record, doc)
    if args.causes:
        for c in diagnose(state):
            print(('DRAIN ' if c.drain else '') + c.text)
    else:
        print(state.to_json())
    return 0


def read_watch(path):
    """``{'before': NodeState, 'samples': [...], 'after': NodeState}`` of a
    ``--watch`` file (what is there: a watcher killed early left no
    ``after``); ``{}`` when the file cannot be read."""
    out = {'samples': []}
    try:
        with open(path) as fp:
            lines = fp.read().splitlines()
    except OSError:
        return {}
    for line in lines:
        try:
            doc = json.loads(line)
            state = NodeState.from_dict(doc['state'])
        except (ValueError, KeyError, TypeError):
            continue             # a line cut short by a kill
        if doc.get('phase') in ('before', 'after'):
            out[doc['phase']] = state
        else:
            out['samples'].append(state)
    return out


def watch(path, run_id, ours, interval):
    stop = []

    def on_signal(signum, frame):
        stop.append(signum)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    t0 = time.time()
    parent = os.getppid()
    ours = set(ours) | {parent}
    with safefile.open_append(path) as fp:
        def write(phase, state):
            fp.write(json.dumps({'phase': phase,
                                 'state': state.to_dict()}) + '\n')
            fp.flush()
        # the job script that started the sampler started the launcher:
        # every rank of the run descends from it
        roots = {parent}
        write('before', read(run_id=run_id, ours_pids=ours, xid_since=t0,
                             roots=roots))
        while not stop and os.getppid() == parent:
            end = time.monotonic() + interval
            while not stop and time.monotonic() < end:
                time.sleep(min(0.1, max(0.0, end - time.monotonic())))
            if stop:
                break
            write('sample', read(run_id=run_id, ours_pids=ours, light=True,
                                 roots=roots))
        write('after', read(run_id=run_id, ours_pids=ours, xid_since=t0,
                            roots=roots))
    return 0


if __name__ == '__main__':
    sys.exit(main())
