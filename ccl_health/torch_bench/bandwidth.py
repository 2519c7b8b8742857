"""The bandwidth mode: busbw per size and collective through
``torch.distributed``, in nccl-tests' columns, with the ideal busbw of the
links and the efficiency."""

from ccl_health import CclHealthError
from ccl_health.evidence import collectives as C
from ccl_health.units import format_size, parse_size, size_sweep

from ccl_health.torch_bench.ops import (CPU_TIMING, TIMING, TORCH_COLLECTIVES, make_op,
                  time_calls, torch_dtype)
from ccl_health.torch_bench.output import (common_doc, format_table, header_lines, make_row,
                     write_json)
from ccl_health.torch_bench.ranks import Dist


DEFAULT_COLLECTIVES = C.TORCH_DEFAULT


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


def _sweep_one(d, coll, sizes, dtype, args, ideal, sec):
    checked = False
    for nbytes in sizes:
        op = make_op(d, coll, nbytes, dtype)
        if op is None:
            continue
        call, count, moved, check = op
        if not checked and not args.no_check:
            wrong = int(round(d.mean(check()) * d.world))
            sec['check'] = {'size': moved, 'wrong': wrong}
            checked = True
        t_us = d.mean(time_calls(d, call, args.iters, args.warmup))
        sec['rows'].append(make_row(coll, moved, count, args.dtype, t_us,
                                    d.world, ideal))
        del call, op, check


def cmd_bandwidth(args):
    sizes = parse_sizes(args.sizes, args.step_factor)
    colls = parse_collectives(args.collectives)
    d = Dist(args.device)
    d.init()
    try:
        doc, ideal = common_doc(d, 'bandwidth', args)
        dtype, note = torch_dtype(d.torch, args.dtype)
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
