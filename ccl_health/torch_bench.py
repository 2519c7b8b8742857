"""The framework's view: collectives through ``torch.distributed`` (NCCL
backend; RCCL on ROCm builds of PyTorch), one process per GPU.

Four modes, each started once per rank (``mpirun -np N``, ``srun``,
``torchrun``) or alone (world size 1)::

    python -m ccl_health.torch_bench bandwidth --sizes 1M:1G \\
        --collectives all_reduce,all_gather,reduce_scatter,broadcast --json out.json
    python -m ccl_health.torch_bench first-call --loops 5 [--backend mpi4py] --json out.json
    python -m ccl_health.torch_bench replay --pattern job.csv --json out.json
    python -m ccl_health.torch_bench train --model comm --steps 20 \\
        --warmup 5 --json out.json

``bandwidth`` prints the columns of nccl-tests (size, count, type, redop,
root, time, algbw, busbw; the same size and busbw conventions, see
:mod:`ccl_health.collectives`) plus the ideal busbw of the links the job
uses and the efficiency busbw / ideal.  ``first-call`` times
``init_process_group`` + the first all_reduce of a 1024x1024 float tensor
against the second, each loop in a fresh process group (or, with
``--backend mpi4py``, MPI_Init / a fresh communicator + the first
Allreduce of a numpy array against the second); the max over ranks is
reported.  ``replay`` replays the calls of a communication-pattern CSV
(:mod:`ccl_health.patterns`).  ``train`` runs a small DDP training loop
(``DistributedDataParallel``, synthetic data) of a communication-bound
(``--model comm``: a wide MLP, small batch) or compute-bound (``--model
compute``: a deep stack of convolutions, large batch) model and reports
samples/s, the median step time and the share of the step spent in NCCL
kernels (``torch.profiler``, a few steps after the timed ones).

Ranks come from Open MPI (``OMPI_COMM_WORLD_RANK``/``_SIZE``/
``_LOCAL_RANK``), Slurm (``SLURM_PROCID``/``NTASKS``/``LOCALID``) or
torchrun (``RANK``/``WORLD_SIZE``/``LOCAL_RANK``); the rendezvous is
``MASTER_ADDR`` (default 127.0.0.1) : ``MASTER_PORT`` (default 29500).

torch is imported inside the functions that need it: the parsing,
formatting and JSON parts are used (and tested) without it.
"""

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time

from . import CclHealthError, TRANSPORTS
from . import transports as registry
from . import collectives as C
from . import patterns
from .units import format_size, parse_size, size_sweep

TOOL = 'ccl_health.torch_bench'
#: collectives this tool runs through torch.distributed
TORCH_COLLECTIVES = ('all_reduce', 'all_gather', 'reduce_scatter',
                     'broadcast', 'reduce', 'alltoall', 'sendrecv')
DEFAULT_COLLECTIVES = ('all_reduce', 'all_gather', 'reduce_scatter',
                       'broadcast')
#: nccl-tests' names of the types, by NCCL name
TYPE_NAMES = {'float32': 'float', 'float16': 'half', 'float64': 'double',
              'bfloat16': 'bfloat16', 'int8': 'int8', 'uint8': 'uint8',
              'int32': 'int32', 'uint32': 'uint32', 'int64': 'int64',
              'uint64': 'uint64', 'float8e4m3': 'f8e4m3',
              'float8e5m2': 'f8e5m2'}
REDOP = {'all_reduce': 'sum', 'reduce_scatter': 'sum', 'reduce': 'sum'}
ROOTED = ('broadcast', 'reduce')
TIMING = ('CUDA events around {iters} back-to-back calls after {warmup} '
          'warm-up calls, per call; averaged over ranks (as nccl-tests -a 1)')
CPU_TIMING = ('wall clock around {iters} back-to-back calls after {warmup} '
              'warm-up calls (gloo on the CPU), per call; averaged over ranks')
FIRST_CALL_NUMEL = 1024 * 1024


# -- pure: environment, arguments, formatting ---------------------------------

def dist_env(env=None):
    """(rank, world size, local rank, local size, launcher) from Open MPI,
    Slurm or torchrun variables; (0, 1, 0, 1, 'none') when started alone."""
    env = os.environ if env is None else env
    for name, r, w, lr, ls in (
            ('mpirun', 'OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE',
             'OMPI_COMM_WORLD_LOCAL_RANK', 'OMPI_COMM_WORLD_LOCAL_SIZE'),
            ('srun', 'SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_LOCALID',
             'SLURM_NTASKS_PER_NODE'),
            ('torchrun', 'RANK', 'WORLD_SIZE', 'LOCAL_RANK',
             'LOCAL_WORLD_SIZE'),
            ('pmi', 'PMI_RANK', 'PMI_SIZE', 'MPI_LOCALRANKID',
             'MPI_LOCALNRANKS')):
        if env.get(r, '') != '' and env.get(w, '') != '':
            try:
                rank, world = int(env[r]), int(env[w])
                local = int(env.get(lr) or (rank if world == 1 else 0))
                # SLURM_NTASKS_PER_NODE may read "4" or be unset
                m = re.match(r'^(\d+)', env.get(ls, ''))
                lsize = int(m.group(1)) if m else None
            except ValueError:
                raise CclHealthError(f'{r}={env.get(r)!r}, {w}='
                                     f'{env.get(w)!r}: not integers') \
                    from None
            if not 0 <= rank < world:
                raise CclHealthError(f'{r}={rank} is not below {w}={world}')
            return rank, world, local, lsize or world, name
    return 0, 1, 0, 1, 'none'


def asked_transport(env=None):
    """The transport an environment asks for, in the suite's vocabulary
    (as the sweep's site files set it up on one node)."""
    env = os.environ if env is None else env
    if env.get('NCCL_P2P_DISABLE') != '1':
        return 'intra'
    if env.get('NCCL_NET_PLUGIN', 'none') == 'none':
        return 'net-ib' if env.get('NCCL_NET') == 'IB' else 'net-socket'
    return ('net-plugin-gdr' if env.get('NCCL_NET_GDR_LEVEL') not in
            (None, 'LOC', '0') else 'net-plugin')


def parse_sizes(text, factor=2):
    """``1M:1G`` (every ``factor``-th size, as nccl-tests -b/-e/-f),
    ``1M:1G:4`` (factor 4) or a list ``1M,64M,1G``."""
    text = str(text).strip()
    if ':' in text:
        parts = text.split(':')
        if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
            raise CclHealthError(f'--sizes {text!r}: use MIN:MAX, '
                                 f'MIN:MAX:FACTOR or a list A,B,C')
        if len(parts) == 3:
            try:
                factor = int(parts[2])
            except ValueError:
                raise CclHealthError(f'--sizes {text!r}: factor '
                                     f'{parts[2]!r} is not an integer') \
                    from None
        return size_sweep(parts[0], parts[1], factor)
    sizes = [parse_size(s) for s in text.split(',') if s.strip()]
    if not sizes or any(s <= 0 for s in sizes):
        raise CclHealthError(f'--sizes {text!r}: no positive size')
    return sizes


def parse_collectives(text):
    out = []
    for name in str(text).split(','):
        name = name.strip()
        if not name:
            continue
        coll = C.canonical(name)
        if coll not in TORCH_COLLECTIVES:
            raise CclHealthError(f'--collectives: {name!r} is not run '
                                 f'through torch.distributed (known: '
                                 f'{", ".join(TORCH_COLLECTIVES)})')
        if coll not in out:
            out.append(coll)
    if not out:
        raise CclHealthError('--collectives: none given')
    return out


def layout(collective, nbytes, nranks, type_size):
    """How nccl-tests lays out ``nbytes`` (its ``size``) for
    ``collective`` on ``nranks``: (count it prints, bytes really moved,
    input elements, output elements).  all_gather / reduce_scatter /
    alltoall: the count is per rank and the size the whole array."""
    if collective in ('all_gather', 'reduce_scatter', 'alltoall'):
        per = nbytes // (type_size * nranks)
        total = per * nranks
        ins = {'all_gather': per, 'reduce_scatter': total,
               'alltoall': total}[collective]
        outs = {'all_gather': total, 'reduce_scatter': per,
                'alltoall': total}[collective]
        return per, per * nranks * type_size, ins, outs
    count = nbytes // type_size
    return count, count * type_size, count, count


def make_row(collective, nbytes, count, dtype, time_us, nranks, ideal):
    alg = C.algbw(nbytes, time_us * 1e-6) if time_us > 0 else 0.0
    bus = C.busbw(alg, collective, nranks)
    eff = C.efficiency_pct(bus, ideal)
    return {'size': nbytes, 'count': count,
            'type': TYPE_NAMES.get(dtype, dtype),
            'redop': REDOP.get(collective, 'none'),
            'root': 0 if collective in ROOTED else -1,
            'time_us': round(time_us, 3), 'algbw': round(alg, 4),
            'busbw': round(bus, 4),
            'ideal_busbw': None if ideal is None else round(ideal, 2),
            'efficiency_pct': None if eff is None else round(eff, 2)}


_HEAD = ('#{:>11} {:>13} {:>9} {:>7} {:>7} {:>10} {:>8} {:>8} {:>8} {:>7}'
         .format('size', 'count', 'type', 'redop', 'root', 'time', 'algbw',
                 'busbw', 'ideal', 'eff'))
_UNITS = ('#{:>11} {:>13} {:>9} {:>7} {:>7} {:>10} {:>8} {:>8} {:>8} {:>7}'
          .format('(B)', '(elements)', '', '', '', '(us)', '(GB/s)',
                  '(GB/s)', '(GB/s)', '(%)'))


def _opt(val, fmt):
    return 'N/A' if val is None else format(val, fmt)


def format_row(row):
    return (f' {row["size"]:>11} {row["count"]:>13} {row["type"]:>9} '
            f'{row["redop"]:>7} {row["root"]:>7} {row["time_us"]:>10.2f} '
            f'{row["algbw"]:>8.2f} {row["busbw"]:>8.2f} '
            f'{_opt(row["ideal_busbw"], ".2f"):>8} '
            f'{_opt(row["efficiency_pct"], ".1f"):>7}')


def format_table(collective, rows):
    """nccl-tests' table for one collective, with ideal busbw and
    efficiency; rows as :func:`make_row` gives them."""
    lines = [f'# Collective test starting: torch_{collective}', _HEAD,
             _UNITS]
    lines += [format_row(r) for r in rows]
    lines.append(f'# Collective test concluded: torch_{collective}')
    return '\n'.join(lines)


def header_lines(doc):
    """The lines above the tables: versions, ranks, ideal, timing."""
    out = [f'# {TOOL} {doc["mode"]}: torch {doc.get("torch_version")}, '
           f'{doc.get("library", "NCCL")} {doc.get("nccl_version") or ""}, '
           f'{doc["world_size"]} rank(s) on {len(doc.get("hosts") or [1])} '
           f'host(s), transport {doc.get("transport")}']
    for i, dev in enumerate(doc.get('devices') or []):
        out.append(f'#  Rank {i:>2} {dev}')
    ideal = doc.get('ideal_busbw')
    out.append(f'# ideal busbw: {_opt(ideal, ".1f")} GB/s '
               f'({doc.get("ideal_source") or "unknown"})')
    if doc.get('timing'):
        out.append(f'# time: {doc["timing"]}')
    for note in doc.get('notes') or []:
        out.append(f'# note: {note}')
    return out


def write_json(path, doc):
    """Write ``doc`` to ``path`` atomically (a crash leaves no half file)."""
    if not path:
        return
    tmp = f'{path}.tmp'
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(tmp, 'w') as fp:
        json.dump(doc, fp, indent=1)
        fp.write('\n')
    os.replace(tmp, path)


def as_sweep(doc, collective):
    """The rows of one collective of a bandwidth (or replay) JSON as a
    :class:`ccl_health.nccltests.SweepResult`, so that the checks judge
    them like nccl-tests' (in-place column; #wrong from the check)."""
    from .nccltests import Measurement, Row, SweepResult
    res = SweepResult(collective=f'torch_{collective}', source='json')
    sec = (doc.get('collectives') or {}).get(collective)
    if sec is None:
        res.errors.append(f'no results for {collective} in the output')
        return res
    wrong = (sec.get('check') or {}).get('wrong')
    for i, r in enumerate(sec.get('rows') or []):
        res.rows.append(Row(int(r['size']), int(r['count']), r['type'],
                            r['redop'], r['root'], None,
                            Measurement(float(r['time_us']),
                                        float(r['algbw']), float(r['busbw']),
                                        wrong if i == 0 else None)))
    res.nranks = doc.get('world_size')
    res.devices = list(doc.get('devices') or [])
    res.hosts = list(doc.get('hosts') or [])
    res.errors.extend(sec.get('errors') or [])
    if doc.get('complete'):
        res.out_of_bounds = 0
    return res


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


# -- pure: the training step (train mode) -------------------------------------

#: the models of the train mode.  ``width``: the MLP's width or the
#: convolutions' channels; ``depth``: hidden layers; ``batch``: samples per
#: rank and step.  Sizes keep one case under ~30 s on 2 GPUs even over
#: NCCL's socket transport (~0.45 GB/s through torch on one host: 285 MB of
#: gradients take ~0.6 s a step).
TRAIN_MODELS = {
    'comm': {'kind': 'mlp', 'width': 4096, 'depth': 4, 'classes': 1000,
             'batch': 32,
             'what': 'communication-bound: a wide MLP (many parameters, '
                     'little arithmetic per sample) and a small batch, so '
                     'that the gradient all_reduce dominates the step'},
    'compute': {'kind': 'conv', 'width': 64, 'depth': 16, 'image': 64,
                'classes': 10, 'batch': 256,
                'what': 'compute-bound: a deep stack of 3x3 convolutions '
                        '(few parameters, much arithmetic) and a large '
                        'batch, so that the gradient all_reduce is small '
                        'next to the forward and backward passes'},
}
TRAIN_TIMING = ('wall clock of each step (forward, backward with DDP\'s '
                'gradient all_reduce, optimizer step, then a device '
                'synchronize), the max over ranks; {steps} steps after '
                '{warmup} warm-up steps; samples/s = global batch / median '
                'step')
PROFILE_WHAT = ('torch.profiler (CPU + CUDA activity) over {n} further '
                'steps: the device time of the CUDA kernels whose name '
                'contains "nccl" (any case) / the wall time of those steps, '
                'per rank; the mean over ranks')
TRAIN_UNITS = {'samples_per_s': 'samples/s', 'step_ms': 'ms',
               'nccl_fraction': '%', 'params': 'parameters'}


def count_params(spec):
    """The parameters (weights and biases) of a model of
    :data:`TRAIN_MODELS`' shape."""
    w, n, k = spec['width'], spec['depth'], spec['classes']
    if spec['kind'] == 'mlp':
        return n * (w * w + w) + w * k + k
    return (3 * 9 * w + w) + n * (w * w * 9 + w) + w * k + k


def describe_model(spec):
    w, n, k = spec['width'], spec['depth'], spec['classes']
    if spec['kind'] == 'mlp':
        return (f'MLP: {n} x (Linear({w}, {w}) + ReLU), Linear({w}, {k}); '
                f'input {w} floats, {k} classes')
    img = spec['image']
    return (f'CNN: Conv2d(3, {w}, 3x3) + ReLU, {n} x (Conv2d({w}, {w}, '
            f'3x3) + ReLU), average pool, Linear({w}, {k}); input '
            f'3x{img}x{img}, {k} classes')


def model_spec(name, batch=None, width=None, depth=None):
    """The model ``name`` of :data:`TRAIN_MODELS` with the overrides given
    (None: the default), its parameter count and description."""
    if name not in TRAIN_MODELS:
        raise CclHealthError(f'--model {name!r}: not one of '
                             f'{", ".join(sorted(TRAIN_MODELS))}')
    spec = dict(TRAIN_MODELS[name], model=name)
    for key, val in (('batch', batch), ('width', width), ('depth', depth)):
        if val is None:
            continue
        if int(val) < 1:
            raise CclHealthError(f'--{key} {val}: must be >= 1')
        spec[key] = int(val)
    spec['params'] = count_params(spec)
    spec['describe'] = describe_model(spec)
    return spec


def check_train_args(args):
    """Errors in the train mode's numbers, before torch is imported."""
    if args.steps < 1:
        raise CclHealthError(f'--steps {args.steps}: must be >= 1')
    for name in ('warmup', 'profile_steps'):
        if getattr(args, name) < 0:
            raise CclHealthError(f'--{name.replace("_", "-")} '
                                 f'{getattr(args, name)}: must be >= 0')
    return model_spec(args.model, args.batch, args.width, args.depth)


def trace_kernels(trace):
    """(name, device time in us) of every GPU kernel of a torch.profiler
    (Kineto) Chrome trace, a dict with ``traceEvents`` or the list of
    events: the complete events (``ph`` X) of category ``kernel``."""
    events = trace.get('traceEvents') if isinstance(trace, dict) else trace
    out = []
    for e in events or []:
        if not isinstance(e, dict) or \
                str(e.get('cat', '')).lower() != 'kernel' or \
                e.get('ph', 'X') != 'X':
            continue
        try:
            dur = float(e.get('dur') or 0.0)
        except (TypeError, ValueError):
            continue
        out.append((str(e.get('name', '')), dur))
    return out


def short_kernel_name(name):
    """A kernel's name without its template and argument lists."""
    return re.split(r'[(<]', name, 1)[0].strip() or name


def profile_share(kernels, wall_s, steps, top=5):
    """One rank's profiled steps: the device time of its NCCL kernels
    (names containing 'nccl', any case) against the wall time of the steps.
    ``nccl_fraction`` is a percentage; None when no kernel was recorded at
    all (no CUDA activity: nothing to divide)."""
    total = nccl = 0.0
    count = ncount = 0
    by = {}
    for name, dur in kernels:
        total += dur
        count += 1
        if 'nccl' in name.lower():
            nccl += dur
            ncount += 1
            c = by.setdefault(short_kernel_name(name), [0, 0.0])
            c[0] += 1
            c[1] += dur
    wall_us = wall_s * 1e6
    return {'steps': steps, 'wall_ms': round(wall_us / 1e3, 3),
            'kernels': count, 'kernel_ms': round(total / 1e3, 3),
            'nccl_kernels': ncount, 'nccl_ms': round(nccl / 1e3, 3),
            'nccl_fraction': (round(100.0 * nccl / wall_us, 2)
                              if count and wall_us > 0 else None),
            'top_nccl_kernels': [
                {'name': n, 'count': c, 'ms': round(us / 1e3, 3)}
                for n, (c, us) in sorted(by.items(),
                                         key=lambda kv: -kv[1][1])[:top]]}


def summarize_train(step_s, global_batch, params, profiles=()):
    """The train mode's summary: samples/s (global batch / median step),
    step times in ms, and the NCCL share in percent (the mean over ranks of
    :func:`profile_share`; None unless every rank measured it)."""
    if not step_s:
        raise CclHealthError('no training step was timed')
    med = statistics.median(step_s)
    fr = [p.get('nccl_fraction') for p in profiles]
    have = [f for f in fr if f is not None]
    ok = bool(fr) and len(have) == len(fr)
    return {'samples_per_s': (round(global_batch / med, 3) if med > 0
                              else None),
            'step_ms': round(med * 1e3, 4),
            'step_ms_min': round(min(step_s) * 1e3, 4),
            'step_ms_max': round(max(step_s) * 1e3, 4),
            'step_ms_mean': round(statistics.mean(step_s) * 1e3, 4),
            'nccl_fraction': round(statistics.mean(have), 2) if ok else None,
            'nccl_fraction_min': min(have) if ok else None,
            'nccl_fraction_max': max(have) if ok else None,
            'nccl_ms_per_step': (round(statistics.mean(
                p['nccl_ms'] / p['steps'] for p in profiles), 4)
                if ok and all(p.get('steps') for p in profiles) else None),
            'params': params, 'global_batch': global_batch,
            'steps': len(step_s)}


def train_fields(spec, args, params, world, backend):
    """What the train mode's JSON says of the run before it starts: the
    model, batch, steps, data, DDP, timing and units (with ``notes``)."""
    fields = {
        'model': spec['model'], 'model_kind': spec['kind'],
        'model_describe': spec['describe'], 'model_what': spec['what'],
        'model_spec': {k: v for k, v in spec.items()
                       if k not in ('describe', 'what')},
        'params': params, 'batch_per_rank': spec['batch'],
        'global_batch': spec['batch'] * world, 'dtype': 'float32',
        'steps': args.steps, 'warmup': args.warmup,
        'profile_steps': args.profile_steps,
        'data': 'synthetic: one random batch per rank, made on the device '
                'once (no data loader, no download)',
        'loss': 'cross-entropy on random labels',
        'optimizer': 'SGD, lr 1e-3',
        'ddp': {'class': 'torch.nn.parallel.DistributedDataParallel',
                'bucket_cap_mb': 25, 'backend': backend},
        'timing': TRAIN_TIMING.format(steps=args.steps, warmup=args.warmup),
        'profile_what': (PROFILE_WHAT.format(n=args.profile_steps)
                         if args.profile_steps > 0 else 'not profiled'),
        'units': dict(TRAIN_UNITS), 'notes': []}
    if params != spec['params']:
        fields['notes'].append(f'the model has {params} parameters, '
                               f'{spec["params"]} were expected')
    if backend != 'nccl':
        fields['notes'].append(f'{backend}: no NCCL kernels, the NCCL share '
                               f'is not measured')
    return fields


def train_results(step_s, shares, global_batch, params):
    """What the train mode's JSON says after the steps: the step times (ms,
    the max over ranks), every rank's profile (:func:`profile_share` plus
    ``rank``, or ``{'rank', 'error'}``), the first profiler error, the
    summary, ``complete``."""
    out = {'step_ms': [round(t * 1e3, 4) for t in step_s],
           'profile': list(shares),
           'summary': summarize_train(step_s, global_batch, params, shares),
           'complete': True}
    errors = [p for p in shares if p.get('error')]
    if errors:
        out['profile_error'] = (f'rank {errors[0].get("rank", "?")}: '
                                f'{errors[0]["error"]}')
    return out


def format_train(doc):
    """The train mode's report, below :func:`header_lines`."""
    s = doc['summary']
    lines = [f'# model {doc["model"]}: {doc["model_describe"]}; '
             f'{s["params"]:,} parameters ({s["params"] * 4 / 1e6:.0f} MB '
             f'of fp32 gradients per step), batch {doc["batch_per_rank"]} '
             f'per rank ({s["global_batch"]} global)',
             '#{:>5} {:>12}'.format('step', 'time (ms)')]
    for i, t in enumerate(doc.get('step_ms') or []):
        lines.append(' {:>5} {:>12.3f}'.format(i, t))
    for p in doc.get('profile') or []:
        if p.get('error'):
            lines.append(f'# rank {p.get("rank")}: profiler: {p["error"]}')
            continue
        top = ', '.join(f'{k["name"]} x{k["count"]}'
                        for k in p.get('top_nccl_kernels') or [])
        lines.append(f'# rank {p.get("rank")}: {p["nccl_kernels"]} of '
                     f'{p["kernels"]} kernels are NCCL\'s, {p["nccl_ms"]:.3f}'
                     f' of {p["wall_ms"]:.3f} ms over {p["steps"]} steps'
                     + (f' ({top})' if top else ''))
    frac = s.get('nccl_fraction')
    lines.append(f'# {_opt(s["samples_per_s"], ".1f")} samples/s (global), '
                 f'step {s["step_ms"]:.3f} ms (median of {s["steps"]}), '
                 f'NCCL kernels {_opt(frac, ".1f")} % of the step time')
    return '\n'.join(lines)


# -- link facts: what the job's GPUs and NICs can carry -----------------------

def _run(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return p.stdout if p.returncode == 0 else ''
    except (OSError, subprocess.TimeoutExpired):
        return ''


def nic_line_rate(env=None, sysfs='/sys/class/net'):
    """(Gb/s, interface) of the NIC NCCL's socket transport uses: the one
    ``NCCL_SOCKET_IFNAME`` names, else the fastest interface that is up
    (not loopback); (None, why) when the kernel does not say."""
    env = os.environ if env is None else env
    want = [i for i in (env.get('NCCL_SOCKET_IFNAME') or '').split(',')
            if i and not i.startswith('^')]
    try:
        names = sorted(os.listdir(sysfs))
    except OSError:
        return None, f'no {sysfs}'
    best = (None, 'no interface reports a speed')
    for name in names:
        if name == 'lo' or (want and not any(name.startswith(w.lstrip('='))
                                             for w in want)):
            continue
        try:
            with open(os.path.join(sysfs, name, 'speed')) as fp:
                mbps = int(fp.read().strip())
        except (OSError, ValueError):
            continue
        if mbps > 0 and (best[0] is None or mbps / 1000 > best[0]):
            best = (mbps / 1000.0, name)
    return best


def link_facts(transport, arch, local_size, args, env=None):
    """(ideal busbw GB/s or None, where it comes from)."""
    if getattr(args, 'ideal_busbw', None):
        return args.ideal_busbw, 'given (--ideal-busbw)'
    if registry.get(transport).ideal_from == registry.IDEAL_NVLINK:
        gen = args.nvlink_gen or C.nvlink_generation(arch)
        links, how = args.nvlink_links, '--nvlink-links'
        if not links:
            topo = C.parse_topo_nvlinks(_run(['nvidia-smi', 'topo', '-m']))
            visible = (env or os.environ).get('CUDA_VISIBLE_DEVICES')
            gpus = (range(local_size) if not visible and local_size > 1
                    else sorted({i for i, _ in topo}))
            links, how = C.nvlinks_per_gpu(topo, gpus), 'nvidia-smi topo -m'
        if not gen or not links:
            return None, (f'no NVLink known between the GPUs ({arch or "?"}'
                          f', {links or 0} links from {how})')
        return C.ideal_busbw(transport, nvlink_gen=gen,
                             nvlink_links=links), (
            f'NVLink {gen} x {links} links x {C.NVLINK_GBPS_PER_LINK[gen]:g} '
            f'GB/s per direction ({how})')
    gbps, nic = (args.nic_gbps, '--nic-gbps') if args.nic_gbps else \
        nic_line_rate(env)
    if not gbps:
        return None, f'NIC line rate unknown ({nic})'
    return C.ideal_busbw(transport, nic_gbps=gbps), (
        f'NIC line rate {gbps:g} Gb/s / 8 ({nic})')


# -- torch ------------------------------------------------------------------

def _torch_dtype(torch, name):
    """A torch dtype for an NCCL type name; a same-size stand-in where
    torch.distributed has none (note returned)."""
    direct = {'float32': 'float32', 'float16': 'float16',
              'float64': 'float64', 'bfloat16': 'bfloat16', 'int8': 'int8',
              'uint8': 'uint8', 'int32': 'int32', 'int64': 'int64'}
    subst = {'uint32': 'int32', 'uint64': 'int64', 'float8e4m3': 'uint8',
             'float8e5m2': 'uint8'}
    if name in direct:
        return getattr(torch, direct[name]), None
    if name in subst:
        return getattr(torch, subst[name]), (f'{name} replayed as '
                                             f'{subst[name]} (same bytes)')
    raise CclHealthError(f'unknown datatype {name!r}')


class Dist:
    """One process of the job: rank, GPU, process group."""

    def __init__(self, device='cuda'):
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        (self.rank, self.world, self.local_rank, self.local_size,
         self.launcher) = dist_env()
        os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
        os.environ.setdefault('MASTER_PORT', '29500')
        self.base_port = int(os.environ['MASTER_PORT'])
        self.cuda = device != 'cpu'
        if not self.cuda:
            # gloo on the CPU: the logic of this tool without a GPU (tests);
            # the timings say nothing about a GPU's links
            self.backend, self.device = 'gloo', torch.device('cpu')
            self.gpu, self.arch = 'cpu', 'cpu'
            return
        if not torch.cuda.is_available():
            raise CclHealthError('torch sees no GPU (torch.cuda.is_available'
                                 '() is False)')
        ngpu = torch.cuda.device_count()
        self.device = torch.device('cuda', self.local_rank % ngpu)
        torch.cuda.set_device(self.device)
        props = torch.cuda.get_device_properties(self.device)
        self.gpu = props.name
        self.arch = (props.gcnArchName.split(':')[0] if getattr(
            torch.version, 'hip', None) and hasattr(props, 'gcnArchName')
            else f'sm_{props.major}{props.minor}')
        self.backend = 'nccl'

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def init(self, port=None):
        if port is not None:
            os.environ['MASTER_PORT'] = str(port)
        self.dist.init_process_group(self.backend, init_method='env://',
                                     rank=self.rank, world_size=self.world)

    def done(self):
        if self.dist.is_initialized():
            self.dist.destroy_process_group()

    def versions(self):
        torch = self.torch
        try:
            v = torch.cuda.nccl.version()
            nccl = '.'.join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:          # noqa: BLE001 (no NCCL in this build)
            nccl = None
        return {'torch_version': torch.__version__,
                'nccl_version': nccl if self.cuda else None,
                'library': 'gloo' if not self.cuda else 'RCCL' if getattr(
                    torch.version, 'hip', None) else 'NCCL',
                'cuda_version': torch.version.cuda,
                'hip_version': getattr(torch.version, 'hip', None)}

    def gather_strings(self, text):
        out = [None] * self.world
        self.dist.all_gather_object(out, text)
        return out

    def reduce_max(self, values):
        t = self.torch.tensor(values, dtype=self.torch.float64,
                              device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.tolist()

    def mean(self, value):
        t = self.torch.tensor([value], dtype=self.torch.float64,
                              device=self.device)
        self.dist.all_reduce(t)
        return t.item() / self.world


def _op(d, collective, nbytes, dtype):
    """(call, count printed, bytes moved, check) for ``collective`` of
    ``nbytes`` (nccl-tests' size) in ``dtype``; None when too small."""
    torch, dist = d.torch, d.dist
    n, r = d.world, d.rank
    size = torch.tensor([], dtype=dtype).element_size()
    count, moved, ins, outs = layout(collective, nbytes, n, size)
    if count == 0:
        return None
    inp = torch.empty(ins, dtype=dtype, device=d.device)
    out = inp if collective in ('all_reduce', 'broadcast', 'reduce') else \
        torch.empty(outs, dtype=dtype, device=d.device)
    if collective == 'all_reduce':
        def call(): dist.all_reduce(inp)
    elif collective == 'broadcast':
        def call(): dist.broadcast(inp, src=0)
    elif collective == 'reduce':
        def call(): dist.reduce(inp, dst=0)
    elif collective == 'all_gather':
        def call(): dist.all_gather_into_tensor(out, inp)
    elif collective == 'reduce_scatter':
        def call(): dist.reduce_scatter_tensor(out, inp)
    elif collective == 'alltoall':
        def call(): dist.all_to_all_single(out, inp)
    elif collective == 'sendrecv':
        if n < 2:
            raise CclHealthError('sendrecv needs at least 2 ranks')

        def call():
            ops = [dist.P2POp(dist.isend, inp, (r + 1) % n),
                   dist.P2POp(dist.irecv, out, (r - 1) % n)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
    else:
        raise CclHealthError(f'{collective} is not run through torch')

    def check():
        """Wrong elements after one call on known data (small integers,
        exact in every type)."""
        per = count if collective in ('all_gather', 'reduce_scatter',
                                      'alltoall') else None
        if collective == 'alltoall':
            inp.copy_((torch.arange(n, device=d.device) + r * n)
                      .repeat_interleave(per).to(dtype))
        else:
            inp.fill_(r + 1)
        call()
        d.sync()
        tot = n * (n + 1) // 2
        if collective == 'all_reduce':
            want = torch.full_like(inp, tot)
            got = inp
        elif collective == 'broadcast':
            want, got = torch.full_like(inp, 1), inp
        elif collective == 'reduce':
            if r != 0:
                return 0
            want, got = torch.full_like(inp, tot), inp
        elif collective == 'all_gather':
            want = (torch.arange(n, device=d.device) + 1).repeat_interleave(
                per).to(dtype)
            got = out
        elif collective == 'reduce_scatter':
            want, got = torch.full_like(out, tot), out
        elif collective == 'alltoall':
            want = (torch.arange(n, device=d.device) * n + r) \
                .repeat_interleave(per).to(dtype)
            got = out
        else:
            want, got = torch.full_like(out, (r - 1) % n + 1), out
        return int((got != want).sum().item())

    return call, count, moved, check


def _time(d, call, iters, warmup):
    torch = d.torch
    for _ in range(warmup):
        call()
    d.sync()
    if not d.cuda:
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        return (time.perf_counter() - t0) * 1e6 / iters
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        call()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters     # us per call


def _common_doc(d, mode, args):
    transport = args.transport or asked_transport()
    ideal, source = link_facts(transport, d.arch, d.local_size, args)
    hosts = d.gather_strings(socket.gethostname())
    devs = d.gather_strings(f'{socket.gethostname()} device '
                            f'{d.device.index or 0} {d.gpu} ({d.arch})')
    doc = {'tool': TOOL, 'mode': mode, 'format': 1,
           'world_size': d.world, 'launcher': d.launcher,
           'hosts': sorted(set(hosts)), 'devices': devs,
           'transport': transport, 'ideal_busbw': ideal,
           'ideal_source': source,
           'env': {k: v for k, v in sorted(os.environ.items())
                   if k.startswith(('NCCL_', 'FI_', 'CUDA_VISIBLE'))},
           'notes': [], 'complete': False}
    doc.update(d.versions())
    return doc, ideal


def _sweep_one(d, coll, sizes, dtype, args, ideal, sec):
    checked = False
    for nbytes in sizes:
        op = _op(d, coll, nbytes, dtype)
        if op is None:
            continue
        call, count, moved, check = op
        if not checked and not args.no_check:
            wrong = int(round(d.mean(check()) * d.world))
            sec['check'] = {'size': moved, 'wrong': wrong}
            checked = True
        t_us = d.mean(_time(d, call, args.iters, args.warmup))
        sec['rows'].append(make_row(coll, moved, count, args.dtype, t_us,
                                    d.world, ideal))
        del call, op, check


def cmd_bandwidth(args):
    sizes = parse_sizes(args.sizes, args.step_factor)
    colls = parse_collectives(args.collectives)
    d = Dist(args.device)
    d.init()
    try:
        doc, ideal = _common_doc(d, 'bandwidth', args)
        dtype, note = _torch_dtype(d.torch, args.dtype)
        if note:
            doc['notes'].append(note)
        doc.update({'iters': args.iters, 'warmup': args.warmup,
                    'sizes': sizes, 'dtype': args.dtype,
                    'timing': (TIMING if d.cuda else CPU_TIMING).format(
                        iters=args.iters, warmup=args.warmup),
                    'collectives': {}})
        if d.rank == 0:
            print('\n'.join(header_lines(doc)), flush=True)
        for coll in colls:
            sec = {'rows': [], 'errors': []}
            doc['collectives'][coll] = sec
            if coll == 'sendrecv' and d.world < 2:
                sec['errors'].append('sendrecv needs at least 2 ranks')
                continue
            try:
                _sweep_one(d, coll, sizes, dtype, args, ideal, sec)
            except (RuntimeError, ValueError, CclHealthError) as err:
                # e.g. an operation this backend lacks; the others still run
                msg = str(err).strip().splitlines()
                sec['errors'].append(f'{coll}: {type(err).__name__}: '
                                     f'{msg[0] if msg else ""}')
                if d.rank == 0:
                    print(f'# {coll}: error: {sec["errors"][-1]}',
                          flush=True)
            if d.rank == 0:
                print(format_table(coll, sec['rows']), flush=True)
                if 'check' in sec:
                    print(f'# {coll}: {sec["check"]["wrong"]} wrong elements '
                          f'at {format_size(sec["check"]["size"])}',
                          flush=True)
        doc['complete'] = True
        if d.rank == 0:
            write_json(args.json, doc)
    finally:
        d.done()
    return 0


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
            doc, _ = _common_doc(d, 'first-call', args)
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


def cmd_replay(args):
    calls = patterns.load(args.pattern)
    algo, proto, note = patterns.algo_proto_reported(os.environ)
    d = Dist(args.device)
    d.init()
    try:
        doc, ideal = _common_doc(d, 'replay', args)
        doc.update({'pattern': os.path.abspath(args.pattern),
                    'iters': args.iters, 'warmup': args.warmup,
                    'timing': (TIMING if d.cuda else CPU_TIMING).format(
                        iters=args.iters, warmup=args.warmup),
                    'replay_algo': algo, 'replay_protocol': proto,
                    'columns': patterns.replay_columns(), 'rows': []})
        doc['notes'].append(note)
        if any(c.nranks != d.world for c in calls):
            doc['notes'].append(
                f'the pattern was recorded on '
                f'{sorted({c.nranks for c in calls})} ranks and is replayed '
                f'on {d.world}: busbw uses {d.world}')
        if d.rank == 0:
            print('\n'.join(header_lines(doc)), flush=True)
            print('#{:>5} {:>14} {:>10} {:>6} {:>12} {:>12} {:>10} {:>8} '
                  '{:>8} {:>8} {:>7}'.format(
                      'line', 'routine', 'type', 'ranks', 'bytes',
                      'job (us)', 'time (us)', 'algbw', 'busbw', 'ideal',
                      'eff'), flush=True)
        for c in calls:
            dtype, dnote = _torch_dtype(d.torch, c.datatype)
            if dnote and dnote not in doc['notes']:
                doc['notes'].append(dnote)
            row = {'line': c.line, 'routine': c.routine,
                   'num_samples': c.count, 'datatype': c.datatype,
                   'nranks': c.nranks, 'ALGO': c.algo,
                   'PROTOCOL': c.protocol, 'TOTALBYTES': c.total_bytes,
                   'TIME_FOR_EACH_NCCL_COMM_CALL_MICROSEC': c.time_us,
                   'replay_ALGO': algo, 'replay_PROTOCOL': proto,
                   'replay_nranks': d.world, 'collective': c.collective}
            if c.collective == 'sendrecv' and d.world < 2:
                row['error'] = 'sendrecv needs at least 2 ranks'
                doc['rows'].append(row)
                continue
            try:
                op = _op(d, c.collective, c.total_bytes, dtype)
                if op is None:
                    raise CclHealthError(f'{c.total_bytes} bytes is less '
                                         f'than one element per rank')
                call, count, moved, _ = op
                t_us = d.mean(_time(d, call, args.iters, args.warmup))
            except (RuntimeError, ValueError, CclHealthError) as err:
                msg = str(err).strip().splitlines()
                row['error'] = f'{type(err).__name__}: {msg[0] if msg else ""}'
                doc['rows'].append(row)
                if d.rank == 0:
                    print(f' {c.line:>5} {c.routine:>14} error: '
                          f'{row["error"]}', flush=True)
                continue
            m = make_row(c.collective, moved, count, c.datatype, t_us,
                         d.world, ideal)
            row.update({'measured_time_us': m['time_us'],
                        'algbw_GBps': m['algbw'], 'busbw_GBps': m['busbw'],
                        'ideal_busbw_GBps': m['ideal_busbw'],
                        'efficiency_pct': m['efficiency_pct']})
            doc['rows'].append(row)
            if d.rank == 0:
                print(' {:>5} {:>14} {:>10} {:>6} {:>12} {:>12} {:>10.2f} '
                      '{:>8.2f} {:>8.2f} {:>8} {:>7}'.format(
                          c.line, c.routine, c.datatype, c.nranks,
                          c.total_bytes, _opt(c.time_us, '.2f'), t_us,
                          m['algbw'], m['busbw'],
                          _opt(m['ideal_busbw'], '.2f'),
                          _opt(m['efficiency_pct'], '.1f')), flush=True)
        doc['complete'] = True
        if d.rank == 0:
            write_json(args.json, doc)
            if args.csv:
                write_replay_csv(args.csv, doc)
    finally:
        d.done()
    return 0


def write_replay_csv(path, doc):
    """The pattern with the measured columns appended."""
    import csv
    cols = doc['columns']
    with open(path, 'w', newline='') as fp:
        w = csv.writer(fp)
        w.writerow(cols)
        for row in doc['rows']:
            w.writerow(['?' if row.get(c) is None and c ==
                        'TIME_FOR_EACH_NCCL_COMM_CALL_MICROSEC' else
                        ('' if row.get(c) is None else row[c])
                        for c in cols])


def _train_model(torch, spec, device, rank):
    """The model of ``spec`` (the same initial weights on every rank; DDP
    broadcasts rank 0's anyway) and one synthetic batch on ``device``."""
    nn = torch.nn
    w, n, k, b = spec['width'], spec['depth'], spec['classes'], spec['batch']
    torch.manual_seed(0)
    if spec['kind'] == 'mlp':
        layers = []
        for _ in range(n):
            layers += [nn.Linear(w, w), nn.ReLU(inplace=True)]
        layers.append(nn.Linear(w, k))
        shape = (b, w)
    else:
        layers = [nn.Conv2d(3, w, 3, padding=1), nn.ReLU(inplace=True)]
        for _ in range(n):
            layers += [nn.Conv2d(w, w, 3, padding=1), nn.ReLU(inplace=True)]
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(w, k)]
        shape = (b, 3, spec['image'], spec['image'])
    model = nn.Sequential(*layers).to(device)
    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)
    x = torch.randn(shape, device=device, generator=gen)
    y = torch.randint(0, k, (b,), device=device, generator=gen)
    return model, x, y


def _precision(torch):
    """The float32 settings the run had (TF32 on or off), as far as this
    torch says."""
    import warnings
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        try:
            out['float32_matmul_precision'] = \
                torch.get_float32_matmul_precision()
        except Exception as err:    # noqa: BLE001 (informative only)
            out['float32_matmul_precision'] = f'? ({type(err).__name__})'
        try:
            out['cudnn_allow_tf32'] = bool(torch.backends.cudnn.allow_tf32)
        except Exception as err:    # noqa: BLE001
            out['cudnn_allow_tf32'] = f'? ({type(err).__name__})'
    return out


def _profile(d, step, n):
    """``n`` steps under torch.profiler: :func:`profile_share` of this
    rank, or ``{'error': ...}``.  The steps run whatever the profiler does:
    the other ranks' all_reduces wait for them."""
    import tempfile

    def error(err):
        msg = str(err).strip().splitlines()
        return {'steps': n, 'error': f'{type(err).__name__}: '
                                     f'{msg[0] if msg else ""}'}
    prof = None
    try:
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU]
        if d.cuda:
            acts.append(ProfilerActivity.CUDA)
        d.sync()
        prof = profile(activities=acts)
        prof.start()
    except Exception as err:       # noqa: BLE001 (reported, not fatal)
        failed, prof = error(err), None
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    d.sync()
    wall = time.perf_counter() - t0
    if prof is None:
        return failed
    try:
        prof.stop()
        fd, path = tempfile.mkstemp(prefix='ccl-health-trace-',
                                    suffix='.json')
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as fp:
                trace = json.load(fp)
        finally:
            os.unlink(path)
    except Exception as err:       # noqa: BLE001
        return error(err)
    return profile_share(trace_kernels(trace), wall, n)


def cmd_train(args):
    spec = check_train_args(args)
    d = Dist(args.device)
    d.init()
    try:
        doc = _train(d, spec, args)
        if d.rank == 0:
            print(format_train(doc), flush=True)
            write_json(args.json, doc)
    finally:
        # DDP's reducer is gone (with _train's frame) before its process
        # group: the other order can abort the process at exit
        import gc
        gc.collect()
        d.done()
    return 0


def _train(d, spec, args):
    """The train mode's run in ``d``'s process group: the JSON document."""
    torch = d.torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    doc, _ = _common_doc(d, 'train', args)
    if d.cuda:
        torch.backends.cudnn.benchmark = True
    model, x, y = _train_model(torch, spec, d.device, d.rank)
    params = sum(p.numel() for p in model.parameters())
    ddp = DDP(model, device_ids=[d.device.index] if d.cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(ddp(x), y).backward()
        opt.step()

    fields = train_fields(spec, args, params, d.world, d.backend)
    doc['notes'] += fields.pop('notes')
    doc.update(fields, precision=_precision(torch))
    if d.rank == 0:
        print('\n'.join(header_lines(doc)), flush=True)
    for _ in range(args.warmup):
        step()
    d.sync()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        d.sync()
        times.append(time.perf_counter() - t0)
    step_s = d.reduce_max(times)        # the slowest rank sets the pace
    shares = []
    if args.profile_steps > 0:
        mine = dict(_profile(d, step, args.profile_steps), rank=d.rank)
        shares = [json.loads(s) for s in d.gather_strings(json.dumps(mine))]
    doc.update(train_results(step_s, shares, doc['global_batch'], params))
    return doc


def build_parser():
    ap = argparse.ArgumentParser(prog=f'python -m {TOOL}',
                                 description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='mode', required=True)

    def common(p):
        p.add_argument('--json', help='write the results here (rank 0)')
        p.add_argument('--transport', choices=TRANSPORTS,
                       help='the transport the environment sets up '
                       '(default: read from NCCL_P2P_DISABLE, ...)')
        p.add_argument('--ideal-busbw', type=float, metavar='GB/s',
                       help='the ideal busbw, instead of the link facts')
        p.add_argument('--nvlink-gen', type=int, help='NVLink generation '
                       '(default: from the GPU architecture)')
        p.add_argument('--nvlink-links', type=int, help='NVLink links per '
                       'GPU (default: nvidia-smi topo -m)')
        p.add_argument('--nic-gbps', type=float, help='NIC line rate, Gb/s, '
                       'per GPU (default: /sys/class/net)')
        p.add_argument('--device', choices=['cuda', 'cpu'], default='cuda',
                       help='cpu: gloo on the CPU, to try this tool without '
                       'a GPU (the timings then mean nothing for the links)')

    p = sub.add_parser('bandwidth', help='busbw per size and collective')
    common(p)
    p.add_argument('--sizes', default='1M:1G',
                   help='MIN:MAX[:FACTOR] or A,B,C (default 1M:1G)')
    p.add_argument('--step-factor', type=int, default=2)
    p.add_argument('--collectives', default=','.join(DEFAULT_COLLECTIVES))
    p.add_argument('--dtype', default='float32',
                   choices=sorted(TYPE_NAMES))
    p.add_argument('--iters', type=int, default=20)
    p.add_argument('--warmup', type=int, default=5)
    p.add_argument('--no-check', action='store_true',
                   help='skip the one-call correctness check')
    p.set_defaults(func=cmd_bandwidth)

    p = sub.add_parser('first-call', help='init + first collective vs '
                       'the second')
    common(p)
    p.add_argument('--loops', type=int, default=5)
    p.add_argument('--backend', choices=['nccl', 'mpi4py'], default='nccl')
    p.set_defaults(func=cmd_first_call)

    p = sub.add_parser('replay', help='replay a communication pattern CSV')
    common(p)
    p.add_argument('--pattern', required=True)
    p.add_argument('--iters', type=int, default=20)
    p.add_argument('--warmup', type=int, default=5)
    p.add_argument('--csv', help='also write the pattern with the measured '
                   'columns appended')
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser('train', help='a small DDP training loop: samples/s, '
                       'step time, NCCL share of the step')
    common(p)
    p.add_argument('--model', choices=sorted(TRAIN_MODELS), default='comm',
                   help='comm: a wide MLP, small batch (the all_reduce '
                   'dominates); compute: deep convolutions, large batch '
                   '(default comm)')
    p.add_argument('--steps', type=int, default=20, help='timed steps')
    p.add_argument('--warmup', type=int, default=5, help='untimed steps '
                   'first')
    p.add_argument('--profile-steps', type=int, default=5,
                   help='steps under torch.profiler after the timed ones '
                   '(0: none, no NCCL share)')
    p.add_argument('--batch', type=int, help='samples per rank and step '
                   '(default: the model\'s)')
    p.add_argument('--width', type=int, help='MLP width or convolution '
                   'channels (default: the model\'s)')
    p.add_argument('--depth', type=int, help='hidden layers (default: the '
                   'model\'s)')
    p.set_defaults(func=cmd_train)
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    for name in ('iters', 'loops'):
        if getattr(args, name, 1) < 1:
            print(f'{TOOL}: error: --{name} must be >= 1', file=sys.stderr)
            return 2
    try:
        return args.func(args)
    except CclHealthError as err:
        print(f'{TOOL}: error: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
