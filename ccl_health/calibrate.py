"""Turn measured sweeps into reference entries ("calibrate"): after an
acceptance run a site records what its machine does, and later runs are held
to it."""

import math
import statistics

from . import CclHealthError
from .reference import Entry, busbw_perfvalues
from .units import format_size, parse_size


def entry_from_sweeps(sweeps, *, transport, collective, nodes, gpus_per_node,
                      tolerance, source, min_size='1M', algo='default',
                      noise_k=4.0):
    """One reference entry from one or more :class:`SweepResult` of the
    same configuration: the median busbw per size over the sweeps, for sizes
    >= ``min_size`` (smaller ones are latency-bound and noisy).  With
    several sweeps, a size whose run-to-run noise (``noise_k`` x the MAD,
    scaled to a standard deviation) is larger than ``tolerance`` gets that
    wider tolerance of its own."""
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
    size_tol = {}
    for s, vals in per_size.items():
        if len(vals) >= 5:
            med = statistics.median(vals)
            mad = statistics.median(abs(v - med) for v in vals)
            noise = math.ceil(100 * noise_k * 1.4826 * mad / med) / 100
            if noise > tolerance:
                size_tol[s] = min(noise, 0.9)
    return Entry(transport, collective, nodes, gpus_per_node, tolerance,
                 source, busbw, algo, size_tol)


def sweeps_from_store(db, system, partition, last=20):
    """Per configuration, the busbw of its last ``last`` healthy runs in the
    performance database (cases that passed)."""
    groups = {}
    for c in reversed(db.cases('WHERE system = ? AND partition = ? AND '
                               "verdict = 'pass'", (system, partition))):
        key = (c['transport'], c['collective'], c['nodes'], c['ranks'],
               c['algo'] or 'default')
        runs = groups.setdefault(key, [])
        if len(runs) >= last or not c['nodes'] or not c['ranks']:
            continue
        busbw = {m['size']: m['busbw'] for m in db.query(
            'SELECT size, busbw FROM measurements WHERE case_id = ? AND '
            'busbw IS NOT NULL', (c['id'],))}
        if busbw:
            runs.append(sweep_from_busbw(busbw))
    return groups


def sweep_from_busbw(busbw_by_size):
    """A :class:`SweepResult` holding only busbw per size (what a run
    report or the database keeps), for :func:`entry_from_sweeps`."""
    from .nccltests import Measurement, Row, SweepResult
    return SweepResult(rows=[Row(s, 0, '', '', None, None,
                                 Measurement(0.0, 0.0, v, 0))
                             for s, v in busbw_by_size.items()])


def sweep_from_perfvalues(perfvalues):
    """The busbw sweep of a run report's test case."""
    return sweep_from_busbw({s: float(vals[0]) for s, vals in
                             busbw_perfvalues(perfvalues)})
