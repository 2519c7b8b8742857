#!/usr/bin/env python3
"""A stand-in for nccl-tests' all_reduce_perf that replays outputs captured
on a real GPU node, so the whole ReFrame path (launch, sanity, transport
proof, performance against references, report) runs without a GPU: the
nightly's rehearsal (:mod:`ccl_health.rehearsal`, ``scripts/nightly
--rehearse``) and the test suite (its replay folder links here).  It
runs as a program: it imports the standard library and, for the transport
the environment asks for, the suite's one rule
(:func:`ccl_health.sitedata.transports.asked_from_env`, which needs
nothing else): from the source tree it lies in, else from the package of
the Python that runs it.

The captures: ``CCL_HEALTH_REPLAY_DIR``, else the folder ``captures``
beside the ``bin`` folder it was started from.  A capture is a folder:
``stdout.txt`` (the output), ``rc.txt`` (``rc=N``: its exit status), the
debug logs ``nccl-debug.*.log``, optionally ``result.json`` (what ``-J``
wrote) and ``stall.txt`` (seconds: after its output and logs the program
stops printing and sleeps that long, as a hung rank does, then exits with
the capture's status).

Which capture is replayed: CCL_HEALTH_REPLAY_<TRANSPORT> (e.g.
CCL_HEALTH_REPLAY_NET_PLUGIN=plugin-missing-fallback), else the folder named
like the transport the environment asks for.  CCL_HEALTH_REPLAY_SLEEP makes
it hang that many seconds first (CCL_HEALTH_REPLAY_SLEEP_<TRANSPORT>: only
for that transport).  CCL_HEALTH_REPLAY_STALL makes it print the
capture's header (its leading ``#`` lines: it started) and then stop
progressing that many seconds (a hang, as opposed to a slow start).  With CCL_HEALTH_REPLAY_ONCE=<file>, the
override applies to the first run only (the file remembers it).

Started under another name (the symlinks <collective>_perf next to it), it
replays the capture ``coll-<collective>`` for the intra transport; those
captures have no NCCL debug logs, so the logs of ``intra`` are replayed with
them (the transport proof reads only the channel lines), written as the
processes of the replayed output's rank lines (:func:`as_processes_of`).  There are no
captures of the other collectives over the network transports: it says so
and fails.

Started once per rank (``srun -n 2``, ``mpirun -np 2``), only rank 0 (the
first of SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK that is set; none set:
rank 0) writes the output, the -J JSON and the debug logs of every rank; the
others sleep as long and exit with the same code."""

import glob
import os
import re
import shutil
import socket
import sys
import time

#: the source tree this program lies in, when it runs from one (the
#: test suite's replay links to it): its own rule comes first, whatever
#: Python runs it; a copy (:func:`ccl_health.rehearsal.write_standin`)
#: takes the package of the Python it names
_TREE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__))))
if __name__ == '__main__' and os.path.isfile(
        os.path.join(_TREE, 'ccl_health', 'sitedata', 'transports.py')):
    sys.path.insert(0, _TREE)

from ccl_health.sitedata import transports  # noqa: E402


def captures_dir(env, argv0):
    """``CCL_HEALTH_REPLAY_DIR``, else ``captures`` beside the ``bin``
    folder of ``argv0`` (the path it was started as, links not
    followed)."""
    return env.get('CCL_HEALTH_REPLAY_DIR') or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(argv0))),
        'captures')


def rank(env):
    for var in ('SLURM_PROCID', 'OMPI_COMM_WORLD_RANK', 'PMI_RANK'):
        if env.get(var, '') != '':
            return int(env[var])
    return 0


def exit_code(src):
    with open(os.path.join(src, 'rc.txt')) as fp:
        return int(fp.read().split()[0].split('=')[1])


def main(argv):
    env = os.environ
    if '--help' in argv or '-h' in argv:
        print(f'usage: {os.path.basename(sys.argv[0])} [nccl-tests options]: '
              f'a stand-in of nccl-tests that replays captured outputs '
              f'(CCL_HEALTH_REPLAY_DIR; ccl_health/rehearsal/standin.py)')
        return 0
    transport = transports.asked_from_env(env)
    collective = os.path.basename(sys.argv[0])[:-len('_perf')] \
        if sys.argv[0].endswith('_perf') else 'all_reduce'
    default = transport
    if collective != 'all_reduce':
        if transport != 'intra':
            sys.stderr.write(f'replay: no capture of {collective} over '
                             f'{transport}\n')
            return 2
        default = f'coll-{collective}'
    case = env.get('CCL_HEALTH_REPLAY_' + transport.upper().replace('-', '_'),
                   default)
    once = env.get('CCL_HEALTH_REPLAY_ONCE')
    if once:        # the override replays once; later runs are the default
        if os.path.exists(once):
            case = default
        else:
            open(once, 'w').close()
    captures = captures_dir(env, sys.argv[0])
    src = os.path.join(captures, case)
    if not os.path.isfile(os.path.join(src, 'stdout.txt')):
        sys.stderr.write(f'replay: no capture {case!r} in {captures} '
                         f'(CCL_HEALTH_REPLAY_DIR)\n')
        return 2
    logs = src
    if not glob.glob(os.path.join(src, 'nccl-debug.*.log')) and \
            case.startswith('coll-'):
        logs = os.path.join(captures, 'intra')
    sleep = env.get('CCL_HEALTH_REPLAY_SLEEP_' + transport.upper().replace(
        '-', '_'), env.get('CCL_HEALTH_REPLAY_SLEEP', '0'))
    time.sleep(float(sleep))
    stall = float(env.get('CCL_HEALTH_REPLAY_STALL', '0') or 0)
    if stall and rank(env) == 0:
        with open(os.path.join(src, 'stdout.txt')) as fp:
            for line in fp:
                if not line.startswith('#'):
                    break
                sys.stdout.write(line)
        sys.stdout.flush()
        time.sleep(stall)
        return 1
    stalled = stall_seconds(src)
    if rank(env) != 0:
        time.sleep(stalled)
        return exit_code(src)
    if '-J' in argv and os.path.exists(os.path.join(src, 'result.json')):
        shutil.copy(os.path.join(src, 'result.json'), argv[argv.index('-J') + 1])
    with open(os.path.join(src, 'stdout.txt')) as fp:
        text = fp.read()
    pattern = env.get('NCCL_DEBUG_FILE')
    if pattern:
        paths = sorted(glob.glob(os.path.join(logs, 'nccl-debug.*.log')))
        bodies = as_processes_of(text, [open(p).read() for p in paths])
        for i, body in enumerate(bodies):
            dst = pattern.replace('%h', socket.gethostname()).replace(
                '%p', str(os.getpid() * 10 + i))
            with open(dst, 'w') as fp:
                fp.write(body)
    sys.stdout.write(text)
    sys.stdout.flush()
    time.sleep(stalled)
    return exit_code(src)


def stall_seconds(src):
    """The seconds of the capture's ``stall.txt`` (0 without one)."""
    try:
        with open(os.path.join(src, 'stall.txt')) as fp:
            return float(fp.read().split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0


#: the Pid of nccl-tests' rank lines; the pid of NCCL's logger prefix
RANK_PID = re.compile(r'^#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)',
                      re.M)
LOG_PID = re.compile(r'^([^\s:]+):(\d+):(\d+) \[', re.M)


def as_processes_of(text, bodies):
    """The debug logs ``bodies`` as the processes of the output ``text``
    wrote them: where the logs were captured in another run than the
    output (the collectives' captures have none of their own; the drift
    runs share one set), each log's pid becomes the pid of the rank line
    it stands for, in order, as a real run's logs would be."""
    want = list(dict.fromkeys(RANK_PID.findall(text)))
    out = []
    for i, body in enumerate(bodies):
        m = LOG_PID.search(body)
        if m and i < len(want) and m.group(2) != want[i]:
            old, new = m.group(2), want[i]
            body = LOG_PID.sub(lambda x: f'{x.group(1)}:{new}:{x.group(3)} ['
                               if x.group(2) == old else x.group(0), body)
        out.append(body)
    return out


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
