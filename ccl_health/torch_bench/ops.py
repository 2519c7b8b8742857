"""The collectives through ``torch.distributed``: how nccl-tests lays out a
size (:func:`layout`), the call of one collective with its one-call
correctness check (:func:`make_op`), and its timing (:func:`time_calls`),
shared by the bandwidth and replay modes."""

import time

from ccl_health import CclHealthError
from ccl_health.evidence import collectives as C


#: collectives this tool runs through torch.distributed
TORCH_COLLECTIVES = C.SWEPT
TIMING = ('CUDA events around {iters} back-to-back calls after {warmup} '
          'warm-up calls, per call; averaged over ranks (as nccl-tests -a 1)')
CPU_TIMING = ('wall clock around {iters} back-to-back calls after {warmup} '
              'warm-up calls (gloo on the CPU), per call; averaged over ranks')


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


def torch_dtype(torch, name):
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


def make_op(d, collective, nbytes, dtype):
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


def time_calls(d, call, iters, warmup):
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
