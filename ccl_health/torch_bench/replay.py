"""The replay mode: the calls of a communication-pattern CSV
(:mod:`ccl_health.patterns`) replayed one by one, each with its measured
time, algbw, busbw, ideal busbw and efficiency; optionally the pattern
written back with those columns appended."""

import os

from ccl_health import CclHealthError, patterns

from ccl_health.torch_bench.ops import CPU_TIMING, TIMING, make_op, time_calls, torch_dtype
from ccl_health.torch_bench.output import common_doc, fmt_opt, header_lines, make_row, write_json
from ccl_health.torch_bench.ranks import Dist


def cmd_replay(args):
    calls = patterns.load(args.pattern)
    algo, proto, note = patterns.algo_proto_reported(os.environ)
    d = Dist(args.device)
    d.init()
    try:
        doc, ideal = common_doc(d, 'replay', args)
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
            dtype, dnote = torch_dtype(d.torch, c.datatype)
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
                op = make_op(d, c.collective, c.total_bytes, dtype)
                if op is None:
                    raise CclHealthError(f'{c.total_bytes} bytes is less '
                                         f'than one element per rank')
                call, count, moved, _ = op
                t_us = d.mean(time_calls(d, call, args.iters, args.warmup))
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
                          c.total_bytes, fmt_opt(c.time_us, '.2f'), t_us,
                          m['algbw'], m['busbw'],
                          fmt_opt(m['ideal_busbw'], '.2f'),
                          fmt_opt(m['efficiency_pct'], '.1f')), flush=True)
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
