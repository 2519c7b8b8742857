"""The train mode: a small DDP training loop (``DistributedDataParallel``,
synthetic data) of a communication-bound (``comm``: a wide MLP, small
batch) or compute-bound (``compute``: deep convolutions, large batch) model;
samples/s, the median step time and the share of the step spent in NCCL
kernels (``torch.profiler``, a few steps after the timed ones)."""

import json
import os
import re
import statistics
import time

from ccl_health import CclHealthError

from ccl_health.torch_bench.output import common_doc, fmt_opt, header_lines, write_json
from ccl_health.torch_bench.ranks import Dist


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
    lines.append(f'# {fmt_opt(s["samples_per_s"], ".1f")} samples/s (global), '
                 f'step {s["step_ms"]:.3f} ms (median of {s["steps"]}), '
                 f'NCCL kernels {fmt_opt(frac, ".1f")} % of the step time')
    return '\n'.join(lines)


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
    doc, _ = common_doc(d, 'train', args)
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
