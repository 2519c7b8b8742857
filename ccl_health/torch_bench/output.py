"""What the tool writes: the rows and tables in nccl-tests' columns (plus
ideal busbw and efficiency), the header lines, the JSON document
(:func:`common_doc`, :func:`write_json`) and its reading back as a sweep
for the checks (:func:`as_sweep`)."""

import json
import os
import socket

from ccl_health.evidence import collectives as C
from ccl_health.sitedata import transports

from ccl_health.torch_bench.linkfacts import link_facts


TOOL = 'ccl_health.torch_bench'
#: nccl-tests' names of the types, by NCCL name
TYPE_NAMES = {'float32': 'float', 'float16': 'half', 'float64': 'double',
              'bfloat16': 'bfloat16', 'int8': 'int8', 'uint8': 'uint8',
              'int32': 'int32', 'uint32': 'uint32', 'int64': 'int64',
              'uint64': 'uint64', 'float8e4m3': 'f8e4m3',
              'float8e5m2': 'f8e5m2'}
REDOP = {'all_reduce': 'sum', 'reduce_scatter': 'sum', 'reduce': 'sum'}
ROOTED = ('broadcast', 'reduce')


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


def fmt_opt(val, fmt):
    return 'N/A' if val is None else format(val, fmt)


def format_row(row):
    return (f' {row["size"]:>11} {row["count"]:>13} {row["type"]:>9} '
            f'{row["redop"]:>7} {row["root"]:>7} {row["time_us"]:>10.2f} '
            f'{row["algbw"]:>8.2f} {row["busbw"]:>8.2f} '
            f'{fmt_opt(row["ideal_busbw"], ".2f"):>8} '
            f'{fmt_opt(row["efficiency_pct"], ".1f"):>7}')


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
    out.append(f'# ideal busbw: {fmt_opt(ideal, ".1f")} GB/s '
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
    from ccl_health import safefile
    safefile.write_json(path, doc)


def as_sweep(doc, collective):
    """The rows of one collective of a bandwidth (or replay) JSON as a
    :class:`ccl_health.evidence.nccltests.SweepResult`, so that the checks judge
    them like nccl-tests' (in-place column; #wrong from the check)."""
    from ccl_health.evidence.results import Measurement, Row, SweepResult
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


def common_doc(d, mode, args):
    transport = args.transport or transports.asked_from_env(os.environ)
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
