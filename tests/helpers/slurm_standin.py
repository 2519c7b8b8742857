#!/usr/bin/env python3
"""A stand-in Slurm for ``scripts/fleet --resume`` (tests/
test_fleet_resume_stops.py): ``sinfo``, ``scontrol``, ``srun``, ``squeue``
and ``scancel`` over one state file, installed on PATH under those names
(this file, linked).  The folder ``$STANDIN`` holds ``slurm.json`` (nodes
with state and reason, reservations, jobs), ``log`` (every command, in
order, with squeue's answer), ``pids`` (every srun and task started).

What it keeps of Slurm: a drained node shows ``drain`` (``drng`` while a
job runs on it), a node in a reservation ``maint`` (``alloc`` while a step
runs); ``state=resume`` makes a node idle; a reservation without
IGNORE_JOBS over a node running a job is refused ("Requested nodes are
busy"); one in use is not deleted ("Reservation is in use"); each srun
outside an allocation is a job of its ``--reservation`` until it ends, and
``$LINGER`` more squeue calls after (Slurm's completing); ``scancel -R``
sends its srun SIGTERM; srun passes SIGTERM on to its tasks and waits for
them.

Pauses, to stop the resume at a phase without timing: ``$PAUSE`` names
phases, a comma list (``reservation``: after ``create reservation``;
``resume``: after the first ``state=resume``; ``drain``: at the first
``state=drain``);
the command there writes ``at-<phase>`` and waits for ``go-<phase>``.
"""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.environ['STANDIN']
STATE = os.path.join(HERE, 'slurm.json')


class State:
    """slurm.json under its lock."""

    def __enter__(self):
        self.fd = os.open(STATE + '.lock', os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        with open(STATE) as fp:
            self.doc = json.load(fp)
        return self.doc

    def __exit__(self, *exc):
        if exc[0] is None:
            with open(STATE + '.tmp', 'w') as fp:
                json.dump(self.doc, fp, indent=1)
            os.replace(STATE + '.tmp', STATE)
        os.close(self.fd)


def log(line):
    with open(os.path.join(HERE, 'log'), 'a') as fp:
        fp.write(line + '\n')


def pause(phase):
    if phase not in os.environ.get('PAUSE', '').split(',') or \
            os.path.exists(os.path.join(HERE, f'at-{phase}')):
        return
    open(os.path.join(HERE, f'at-{phase}'), 'w').close()
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(HERE, f'go-{phase}')) and \
            time.monotonic() < deadline:
        time.sleep(0.05)


def alive(pid):
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:             # a zombie is not running
        with open(f'/proc/{pid}/stat') as fp:
            return fp.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def live_jobs(doc, resv=None):
    return {j: job for j, job in doc['jobs'].items()
            if (alive(job['pid']) or job['linger'] > 0)
            and (resv is None or job['resv'] == resv)}


def opt(args, name):
    for i, a in enumerate(args):
        if a.startswith(name + '='):
            return a.split('=', 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return None


def sinfo(args):
    fmt = opt(args, '-o')
    wanted = opt(args, '-n')
    with State() as doc:
        running = {n for job in live_jobs(doc).values() for n in job['nodes']}
        reserved = {n for r in doc['resv'].values() for n in r['nodes']}
        out = []
        for n, node in sorted(doc['nodes'].items()):
            if wanted and n not in wanted.split(','):
                continue
            st = node['state']
            if st == 'drain' and n in running:
                st = 'drng'
            elif st == 'idle' and n in running:
                st = 'alloc'
            elif st == 'idle' and n in reserved:
                st = 'maint'
            out.append(fmt.replace('%N', n).replace('%t', st)
                       .replace('%E', node['reason'] or 'none'))
    print('\n'.join(out))


def scontrol(args):
    if args[:2] == ['show', 'hostnames']:
        print('\n'.join(args[2].split(',')))
        return 0
    kv = dict(a.split('=', 1) for a in args if '=' in a)
    if args[:2] == ['create', 'reservation']:
        with State() as doc:
            nodes = kv['Nodes'].split(',')
            busy = [n for n in nodes if doc['nodes'][n]['state'] in
                    ('alloc', 'mix')]
            if busy and 'IGNORE_JOBS' not in kv.get('Flags', ''):
                print('Error creating the reservation: Requested nodes are '
                      'busy', file=sys.stderr)
                return 1
            doc['resv'][kv['ReservationName']] = {
                'nodes': nodes, 'flags': kv.get('Flags', '')}
        pause('reservation')
        return 0
    if args[:1] == ['delete']:
        name = kv['ReservationName']
        with State() as doc:
            if name not in doc['resv']:
                print('Error deleting the reservation: Invalid reservation '
                      'name', file=sys.stderr)
                return 1
            if live_jobs(doc, name):
                print('Error deleting the reservation: Reservation is in '
                      'use', file=sys.stderr)
                return 1
            del doc['resv'][name]
        return 0
    if args[:1] == ['update']:
        node, state = kv['nodename'], kv['state']
        if state == 'drain':
            pause('drain')
        with State() as doc:
            if state == 'drain':
                doc['nodes'][node].update(state='drain', reason=kv['reason'])
            elif state == 'resume':
                doc['nodes'][node].update(state='idle', reason='')
        if state == 'resume':
            pause('resume')
        return 0
    print(f'scontrol stand-in: {args}?', file=sys.stderr)
    return 1


def squeue(args):
    resv = opt(args, '-R')
    with State() as doc:
        jobs = sorted(live_jobs(doc, resv))
        for j in jobs:
            if not alive(doc['jobs'][j]['pid']):
                doc['jobs'][j]['linger'] -= 1      # completing
    log(f'squeue -> {" ".join(jobs)}')
    print('\n'.join(jobs))


def scancel(args):
    resv = opt(args, '-R')
    with State() as doc:
        for job in live_jobs(doc, resv).values():
            job['linger'] = 0
            try:
                os.kill(job['pid'], signal.SIGTERM)
            except ProcessLookupError:
                pass


def srun(args):
    nodes, resv = [], None
    while args and args[0].startswith('--'):
        a = args.pop(0)
        if a.startswith('--nodelist='):
            nodes = a.split('=', 1)[1].split(',')
        elif a.startswith('--reservation='):
            resv = a.split('=', 1)[1]
    with State() as doc:
        doc['next'] += 1
        job = str(doc['next'])
        doc['jobs'][job] = {'pid': os.getpid(), 'resv': resv,
                            'nodes': nodes, 'linger': 0}
    procs, stopped = [], []

    def on_term(signum, _frame):      # passed on; the tasks waited for below
        stopped.append(signum)
        for p in procs:
            p.send_signal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, on_term)
    with open(os.path.join(HERE, 'pids'), 'a') as fp:
        fp.write(f'{os.getpid()}\n')
    for rank, node in enumerate(nodes):
        env = dict(os.environ, SLURMD_NODENAME=node, SLURM_PROCID=str(rank),
                   SLURM_STEP_NODELIST=','.join(nodes))
        procs.append(subprocess.Popen(args, env=env))
        with open(os.path.join(HERE, 'pids'), 'a') as fp:
            fp.write(f'{procs[-1].pid}\n')
    if stopped:                       # a stop while the tasks started
        on_term(stopped[0], None)
    code = max(p.wait() for p in procs)
    if stopped:
        code = 128 + stopped[0]
    with State() as doc:
        doc['jobs'][job]['linger'] = int(os.environ.get('LINGER', '0'))
        doc['jobs'][job]['pid'] = -1
    return code


def main():
    name = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    if name != 'squeue':
        log(' '.join([name] + args))
    handler = {'sinfo': sinfo, 'scontrol': scontrol, 'squeue': squeue,
               'scancel': scancel, 'srun': srun}[name]
    sys.exit(handler(args) or 0)


if __name__ == '__main__':
    main()
