"""Turn measured sweeps into reference entries ("calibrate"): after an
acceptance run a site records what its machine does, and later runs are held
to it."""

import statistics

from . import CclHealthError
from .reference import Entry, perf_var
from .units import format_size, parse_size


def entry_from_sweeps(sweeps, *, transport, collective, nodes, gpus_per_node,
                      tolerance, source, min_size='1M', algo='default'):
    """One reference entry from one or more :class:`SweepResult` of the
    same configuration: the median busbw per size over the sweeps, for sizes
    >= ``min_size`` (smaller ones are latency-bound and noisy)."""
    lo = parse_size(min_size)
    per_size = {}
    for sweep in sweeps:
        for row in sweep.rows:
            if row.size >= lo and row.busbw:
                per_size.setdefault(row.size, []).append(row.busbw)
    if not per_size:
        raise CclHealthError(f'nothing to calibrate {transport}/{collective} '
                             f'from: no size >= {format_size(lo)} with a '
                             f'busbw')
    busbw = {s: round(statistics.median(v), 2) for s, v in per_size.items()}
    return Entry(transport, collective, nodes, gpus_per_node, tolerance,
                 source, busbw, algo)


def busbw_from_perfvalues(perfvalues):
    """``{size: busbw}`` from a ReFrame report's test-case ``perfvalues``
    (keys ``<system>:<partition>:busbw_<size>``)."""
    out = {}
    for key, vals in perfvalues.items():
        var = key.rsplit(':', 1)[-1]
        if not var.startswith('busbw_'):
            continue
        size = parse_size(var[len('busbw_'):])
        assert perf_var(size) == var
        out[size] = float(vals[0])
    return out
