"""The first-call mode: ``init_process_group`` + the first all_reduce of a
1024x1024 float tensor against the second, each loop in a fresh process
group (or with ``--backend mpi4py``: MPI_Init / a fresh communicator + the
first Allreduce of a numpy array against the second); the max over
ranks."""

import json
import socket
import statistics
import time

from ccl_health import CclHealthError

from ccl_health.torch_bench.output import TOOL, common_doc, write_json
from ccl_health.torch_bench.ranks import Dist


FIRST_CALL_NUMEL = 1024 * 1024


def summarize_first_call(loops):
    """Summary of first-call loops (each with the max over ranks): medians
    and extremes."""
    firsts = [lp['first_call_s'] for lp in loops]
    seconds = [lp['second_call_s'] for lp in loops]
    return {'first_call_s': statistics.median(firsts),
            'first_call_max_s': max(firsts),
            'first_call_loop0_s': firsts[0],
            'second_call_s': statistics.median(seconds),
            'second_call_max_s': max(seconds),
            'ratio_first_to_second': (statistics.median(firsts) /
                                      statistics.median(seconds)
                                      if statistics.median(seconds) > 0
                                      else None)}


def format_first_call(doc):
    lines = [f'# {TOOL} first-call: {doc["backend"]}, {doc["world_size"]} '
             f'rank(s); {doc["what"]}; the max over ranks',
             '#{:>5} {:>12} {:>16} {:>12} {:>12}'.format(
                 'loop', 'init (s)', '1st coll. (s)', 'first (s)',
                 'second (s)')]
    for lp in doc['loops']:
        lines.append(' {:>5} {:>12.6f} {:>16.6f} {:>12.6f} {:>12.6f}'.format(
            lp['loop'], lp['init_s'], lp['first_collective_s'],
            lp['first_call_s'], lp['second_call_s']))
    s = doc['summary']
    lines.append(f'# first call (init + first collective): median '
                 f'{s["first_call_s"]:.6f} s, max {s["first_call_max_s"]:.6f}'
                 f' s; second call: median {s["second_call_s"]:.6f} s')
    return '\n'.join(lines)


def cmd_first_call(args):
    if args.backend == 'mpi4py':
        return _first_call_mpi(args)
    import torch
    d = Dist(args.device)
    x = torch.ones((1024, 1024), dtype=torch.float32, device=d.device)
    d.sync()
    loops, per_rank = [], []
    for i in range(args.loops):
        t0 = time.perf_counter()
        d.init(port=d.base_port + i)       # a fresh rendezvous each loop
        t1 = time.perf_counter()
        d.dist.all_reduce(x)
        d.sync()
        t2 = time.perf_counter()
        d.dist.all_reduce(x)
        d.sync()
        t3 = time.perf_counter()
        mine = [t1 - t0, t2 - t1, t2 - t0, t3 - t2]
        allr = d.gather_strings(json.dumps(mine))      # not timed
        per_rank.append([json.loads(s) for s in allr])
        mx = [max(r[k] for r in per_rank[-1]) for k in range(4)]
        loops.append({'loop': i, 'init_s': mx[0],
                      'first_collective_s': mx[1], 'first_call_s': mx[2],
                      'second_call_s': mx[3]})
        if i == args.loops - 1:
            doc, _ = common_doc(d, 'first-call', args)
        d.done()
    doc.update({'backend': d.backend, 'numel': FIRST_CALL_NUMEL,
                'what': ('init_process_group + first all_reduce of a '
                         '1024x1024 float32 tensor vs the second; a fresh '
                         'process group (and rendezvous port) per loop'),
                'loops': loops, 'per_rank': per_rank,
                'per_rank_fields': ['init_s', 'first_collective_s',
                                    'first_call_s', 'second_call_s'],
                'summary': summarize_first_call(loops), 'complete': True})
    if d.rank == 0:
        print(format_first_call(doc), flush=True)
        write_json(args.json, doc)
    return 0


def _first_call_mpi(args):
    try:
        import mpi4py
        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI
        import numpy as np
    except ImportError as err:
        raise CclHealthError(f'--backend mpi4py: {err}') from None
    x = np.ones((1024, 1024), dtype=np.float32)
    y = np.empty_like(x)
    loops, per_rank = [], []
    comm = None
    for i in range(args.loops):
        t0 = time.perf_counter()
        if i == 0:
            MPI.Init()
            comm = MPI.COMM_WORLD.Dup()
        else:
            comm = MPI.COMM_WORLD.Dup()      # a fresh communicator
        t1 = time.perf_counter()
        comm.Allreduce(x, y, op=MPI.SUM)
        t2 = time.perf_counter()
        comm.Allreduce(x, y, op=MPI.SUM)
        t3 = time.perf_counter()
        mine = [t1 - t0, t2 - t1, t2 - t0, t3 - t2]
        allr = comm.allgather(mine)
        per_rank.append(allr)
        mx = [max(r[k] for r in allr) for k in range(4)]
        loops.append({'loop': i, 'init_s': mx[0],
                      'first_collective_s': mx[1], 'first_call_s': mx[2],
                      'second_call_s': mx[3]})
        comm.Free()
    rank, world = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    hosts = MPI.COMM_WORLD.allgather(socket.gethostname())
    doc = {'tool': TOOL, 'mode': 'first-call', 'format': 1,
           'backend': 'mpi4py', 'world_size': world,
           'hosts': sorted(set(hosts)), 'numel': FIRST_CALL_NUMEL,
           'mpi_version': MPI.Get_library_version().strip().splitlines()[0],
           'mpi4py_version': mpi4py.__version__,
           'what': ('MPI_Init (loop 0) or MPI_Comm_dup (later loops: MPI '
                    'cannot be initialized twice in one process) + first '
                    'Allreduce of a 1024x1024 float32 numpy array vs the '
                    'second'),
           'loops': loops, 'per_rank': per_rank,
           'per_rank_fields': ['init_s', 'first_collective_s',
                               'first_call_s', 'second_call_s'],
           'summary': summarize_first_call(loops), 'complete': True}
    if rank == 0:
        print(format_first_call(doc), flush=True)
        write_json(args.json, doc)
    MPI.Finalize()
    return 0
