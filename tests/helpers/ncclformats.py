"""Lines built from the upstream format strings: nccl-tests 2.19.6
``src/util.cu`` (its header, rank lines, column header, rows and closing
summary, /work/shared/mirror/nccl-tests-2.19.6.tar.gz) and NCCL's logger
prefix (``src/debug.cc``: ``"%s:%d:%d [%d] NCCL INFO "``), for the tests
that prove a reading on what the programs print, not only on pastes."""


def util_cu_row(size, count, halves, tag='', type_name='float', op='sum',
                root=-1):
    """One row as ``writeBenchmarkLinePreamble`` / ``...Body`` write it:
    ``"%12li  %12li  %8s  %6s  %6s"`` (size, count, type, redop, root), then
    per half ``"  %7s  %6s  %6s  %6g"`` (time, algbw, busbw, #wrong), then
    ``"\\n"``; ``halves``: ``[(time, algbw, busbw)]``, out-of-place first;
    ``tag`` before each of the three writes (a launcher that labels every
    write)."""
    out = tag + '%12li  %12li  %8s  %6s  %6s' % (size, count, type_name, op,
                                                  '%6i' % root)
    for time, algbw, busbw in halves:
        out += tag + '  %7s  %6s  %6s  %6g' % (time, f'{algbw:.2f}',
                                                f'{busbw:.2f}', 0)
    return out + '\n'


def util_cu_head(min_bytes, max_bytes, factor=2, ranks=(), program=
                 'all_reduce_perf', version='2.19.6', code=22809):
    """``writeDeviceReport``'s lines (the banner, the run's header, ``#
    Using devices`` and one ``"#  Rank %2d Group %2d Pid %6d on %10s device
    %2d [%04x:%02x:%02x] %s"`` line per ``(rank, host, device)`` of
    ``ranks``), then ``writeResultHeader``'s column header."""
    lines = [f'# nccl-tests version {version} nccl-headers={code} '
             f'nccl-library={code}',
             f'# Collective test starting: {program}',
             f'# nThread 1 nGpus 1 minBytes {min_bytes} maxBytes {max_bytes} '
             f'step: {factor}(factor) warmup iters: 1 iters: 20 agg iters: 1 '
             f'validation: 1 graph: 0 unalign: 0',
             '#', '# Using devices']
    lines += ['#  Rank %2d Group %2d Pid %6d on %10s device %2d '
              '[%04x:%02x:%02x] %s' % (rank, 0, 1000 + rank, host, dev, 0,
                                       0x18 + dev, 0, 'NVIDIA H100 80GB HBM3')
              for rank, host, dev in ranks]
    lines += ['#',
              '# %10s  %12s  %8s  %6s  %6s           out-of-place            '
              '           in-place          ' % ('', '', '', '', ''),
              '# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  '
              '%6s  %6s %*s' % ('size', 'count', 'type', 'redop', 'root',
                                'time', 'algbw', 'busbw', '#wrong', 'time',
                                'algbw', 'busbw', '#wrong', 0, ''),
              '# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  '
              '%6s  %6s %*s' % ('(B)', '(elements)', '', '', '', '(us)',
                                '(GB/s)', '(GB/s)', '', '(us)', '(GB/s)',
                                '(GB/s)', '', 0, '')]
    return '\n'.join(lines) + '\n'


def util_cu_summary(avg_busbw, errors=0, program='all_reduce_perf'):
    """``writeResultFooter``: ``"# %-20s : %d %s"``, ``"# %-20s : %g %s"``
    (no ``NCCL_TESTS_MIN_BW``: an empty word), ``#`` and the closing
    line."""
    return ('# %-20s : %d %s\n' % ('Out of bounds values', errors,
                                   'FAILED' if errors else 'OK') +
            '# %-20s : %g %s\n' % ('Avg bus bandwidth', avg_busbw, '') +
            f'#\n# Collective test concluded: {program}\n')


def sweep(min_bytes, max_bytes, busbw=10.0, elem=4):
    """The rows of a healthy all_reduce sweep ``min_bytes`` x2 ..
    ``max_bytes`` on 2 ranks (algbw = busbw: 2(n-1)/n is 1)."""
    rows, size = [], min_bytes
    while size <= max_bytes:
        t = '%.2f' % max(size / (busbw * 1e3), 1.0)
        rows.append(util_cu_row(size, size // elem,
                                [(t, busbw, busbw), (t, busbw, busbw)]))
        size *= 2
    return rows


def nccl_info(host, pid, tid, dev, text):
    """One line of NCCL's logger: ``"%s:%d:%d [%d] NCCL INFO "`` then
    ``text``."""
    return f'{host}:{pid}:{tid} [{dev}] NCCL INFO {text}'
