"""The nccl-tests parser on real outputs captured on 2x H200
(nccl-tests 2.19.6, NCCL 2.28.3)."""

import pytest

from ccl_health import CclHealthError
from ccl_health.evidence import nccltests, nccltests_json


def test_json_and_text_agree_on_the_intra_sweep(capture):
    text = nccltests.parse_text(capture('intra', 'stdout.txt'))
    js = nccltests_json.parse_json(capture('intra', 'result.json'))
    assert len(text.rows) == len(js.rows) == 31          # 8 B .. 8 GiB
    assert text.rows[0].size == js.rows[0].size == 8
    assert js.rows[-1].size == 8 << 30
    for t, j in zip(text.rows, js.rows):
        assert t.size == j.size and t.count == j.count
        # text is rounded to 2 decimals
        assert t.busbw == pytest.approx(j.busbw, abs=0.01)
    big = js.by_size()[8 << 30]
    assert big.out_of_place.busbw == pytest.approx(346.517076)
    assert big.in_place.busbw == pytest.approx(344.924875)
    assert big.busbw == pytest.approx(346.517076)       # the better of the two
    assert js.nccl_version == 22803
    assert text.tests_version == '2.19.6'
    assert text.collective == 'all_reduce_perf'
    assert js.nranks == text.nranks == 2
    assert js.out_of_bounds == text.out_of_bounds == 0
    assert js.avg_busbw == pytest.approx(113.828196)
    assert js.wrong_total == 0 and js.complete


def test_parse_merges_json_with_stdout(capture):
    res = nccltests.parse(capture('net-plugin', 'stdout.txt'),
                          capture('net-plugin', 'result.json'))
    assert res.source == 'json'
    assert res.tests_version == '2.19.6'
    assert res.hosts == ['vm']
    assert len(res.rows) == 28                            # 8 B .. 1 GiB
    assert 1.0 < res.by_size()[1 << 30].busbw < 4.0


def test_text_interleaved_with_nccl_info_lines(capture):
    out = capture('intra-text-interleaved', 'stdout.txt')
    assert 'NCCL INFO' in out
    res = nccltests.parse_text(out)
    assert [r.size for r in res.rows] == [1 << 20, 4 << 20, 16 << 20,
                                          64 << 20]
    assert res.complete and res.out_of_bounds == 0 and res.nranks == 2


def test_row_cut_by_a_log_line_is_joined():
    out = ('#  Rank  0 Group  0 Pid  1 on  vm device  0 [0000:00:06] H200\n'
           '     1048576        262144     float     sum      -1'
           'vm:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n'
           '    14.83   70.71   70.71       0    14.69   71.38   71.38       0\n'
           '# Out of bounds values : 0 OK\n')
    res = nccltests.parse_text(out)
    assert len(res.rows) == 1 and res.rows[0].busbw == pytest.approx(71.38)


@pytest.mark.parametrize('case', ['coll-all_gather', 'coll-reduce_scatter',
                                  'coll-broadcast', 'coll-reduce',
                                  'coll-alltoall', 'coll-sendrecv'])
def test_every_collective_parses(capture, case):
    text = nccltests.parse_text(capture(case, 'stdout.txt'))
    js = nccltests_json.parse_json(capture(case, 'result.json'))
    assert len(text.rows) == len(js.rows) == 7           # 1 KiB .. 1 GiB x8
    assert text.complete and js.wrong_total == 0
    assert all(r.busbw > 0 for r in js.rows)


def test_rooted_collectives_keep_their_root(capture):
    res = nccltests.parse_text(capture('coll-broadcast', 'stdout.txt'))
    assert {r.root for r in res.rows} == {0}
    res = nccltests.parse_text(capture('intra', 'stdout.txt'))
    assert {r.root for r in res.rows} == {-1}


def test_crashed_run_is_incomplete(capture):
    res = nccltests.parse_text(capture('missing-gpu', 'stdout.txt'))
    assert not res.rows and not res.complete
    assert any('Test failure' in e for e in res.errors)


def test_nccl_tests_timeout_is_seen():
    out = ('#       size         count      type   redop    root     time\n'
           'vm: Test timeout (15s) common.cu:523\n')
    res = nccltests.parse_text(out)
    assert res.timed_out and not res.complete


def test_wrong_results_are_counted():
    out = ('     1048576        262144     float     sum      -1    14.83   '
           '70.71   70.71       3    14.69   71.38   71.38       0\n'
           '# Out of bounds values : 3 FAILED\n')
    res = nccltests.parse_text(out)
    assert res.wrong_total == 3 and res.out_of_bounds == 3


def test_old_format_without_root_and_unchecked_results():
    # nccl-tests before the root column, run with -c 0 (N/A)
    out = ('     1048576        262144     float     sum    14.83   70.71   '
           '70.71    N/A    14.69   71.38   71.38    N/A\n')
    row = nccltests.parse_text(out).rows[0]
    assert row.root is None and row.wrong is None
    assert row.in_place.busbw == pytest.approx(71.38)


def test_broken_json_names_the_file():
    with pytest.raises(CclHealthError, match='x.json: not valid'):
        nccltests_json.parse_json('{"version": 3, "results": [', 'x.json')
    with pytest.raises(CclHealthError, match='not an nccl-tests JSON'):
        nccltests_json.parse_json('{"a": 1}', 'y.json')


# -- outputs published by others (tests/fixtures/published/SOURCES.md) -------

def published(name):
    from conftest import REPO, read
    import os
    return read(os.path.join(REPO, 'tests', 'fixtures', 'published', name))


def test_rccl_tests_two_nodes_mi300x():
    res = nccltests.parse_text(published(
        'rccl-tests_all_reduce_mi300x_aac10_2node.txt'))
    assert res.nranks == 16 and res.hosts == ['gpu-53', 'gpu-56']
    assert res.tests_version == 'rccl-tests develop:448c4c7'
    assert res.library_version == 'RCCL 2.22.3-HEAD:7d8d67c'
    assert len(res.rows) == 32 and res.rows[0].size == 8
    assert res.rows[0].out_of_place.time_us == pytest.approx(256.5)
    assert res.complete and res.out_of_bounds == 0
    assert res.avg_busbw == pytest.approx(92.3318)
    assert res.wrong_total == 0


def test_rccl_tests_one_node_mi300x():
    res = nccltests.parse_text(published(
        'rccl-tests_all_reduce_mi300x_aac8_1node.txt'))
    assert res.nranks == 8 and len(res.rows) == 31
    assert res.avg_busbw == pytest.approx(110.464)
    assert res.rows[0].in_place.time_us == pytest.approx(17.24)


def test_old_nccl_tests_with_mpi_tags_and_debug_lines():
    # nccl-tests before 2.10: no root column, an 'error' column, every line
    # tagged by Open MPI, NCCL INFO lines in the middle of the table
    res = nccltests.parse_text(published(
        'nccl-debug_aws-libfabric_gdrdma_efa-p4d-2node.log'))
    assert res.nranks == 16
    assert res.rows and all(r.root is None for r in res.rows)
    assert res.complete and res.avg_busbw == pytest.approx(11.2432)
    assert res.library_version == 'NCCL 2.9.9+cuda11.2'


# -- lines built from the programs' own format strings ----------------------
# nccl-tests 2.19.6 src/util.cu writeBenchmarkLinePreamble / Body /
# writeResultFooter; nccl-tests v2.0.0 src/common.cu + src/<coll>.cu
# print_line_header; rccl-tests src/common.cu (algo/proto/channels)

def _float_str(v, width):
    """util.cu getFloatStr."""
    for fmt in ('%*.2f', '%*.1f', '%*.0f'):
        s = fmt % (width, v)
        if len(s) <= width:
            return s
    return ('%*.1e' if width >= 7 else '%*.0e') % (width, v)


def row_2_19(size, count, t, bw, wrong=0, dtype='float', op='sum', root=-1,
             per_iter=False, timestamp=None):
    line = '%12li  %12li  %8s  %6s  %6s' % (size, count, dtype, op,
                                            '%6i' % root)
    for _ in range(2):
        line += '  %7s  %6s  %6s  %6g' % (_float_str(t, 7), _float_str(bw, 6),
                                          _float_str(bw, 6), wrong)
        if per_iter:
            line += '  %7s  %7s  %7s  %7s' % tuple(_float_str(x, 7) for x in
                                                   (t, t, t, 1.5))
    if timestamp:
        line += '%21s' % timestamp
    return line


def footer(oob, avg, min_bw_failed=None):
    return ('# %-20s : %d %s\n' % ('Out of bounds values', oob,
                                   'FAILED' if oob else 'OK') +
            '# %-20s : %g %s\n' % ('Avg bus bandwidth', avg,
                                   '' if min_bw_failed is None else
                                   'FAILED' if min_bw_failed else 'OK') +
            '#\n# Collective test concluded: all_reduce_perf\n')


def test_per_iteration_and_timestamp_columns():
    out = (row_2_19(1048576, 262144, 14.83, 70.71, per_iter=True) + '\n' +
           row_2_19(2097152, 524288, 29.6, 70.9,
                    timestamp='2026-11-22 21:55:10') + '\n' + footer(0, 70.8))
    res = nccltests.parse_text(out)
    assert [r.size for r in res.rows] == [1048576, 2097152]
    assert res.rows[0].out_of_place.busbw == pytest.approx(70.71)
    assert res.rows[0].in_place.time_us == pytest.approx(14.83)
    assert res.rows[1].busbw == pytest.approx(70.9) and res.complete


def test_nonfinite_values_keep_their_row():
    for v in ('nan', '-nan', 'inf', '-inf'):
        line = row_2_19(1048576, 262144, 14.83, 70.71)
        line = line.replace('70.71', '%6s' % v, 1)
        res = nccltests.parse_text(line + '\n' + footer(0, 70.7))
        assert len(res.rows) == 1, v
        assert res.nonfinite_sizes == [1048576]
        assert res.rows[0].out_of_place.invalid


def test_out_of_bounds_failed_and_own_average_check():
    res = nccltests.parse_text(row_2_19(8, 2, 9.1, 0.0) + '\n' +
                               footer(3, 0.0, min_bw_failed=True))
    assert res.out_of_bounds == 3 and res.avg_busbw_failed and res.complete


@pytest.mark.parametrize('where', ['before', 'after'])
@pytest.mark.parametrize('line', [
    "vm: Test CUDA failure common.cu:1180 'an illegal memory access was "
    "encountered'",
    "vm: Test NCCL failure common.cu:1089 'unhandled system error / '",
    ' .. vm pid 123: Test failure common.cu:1145',
    "Cuda failure common.cu:393 'out of memory'",
    "NCCL failure common.cu:417 'unhandled cuda error'",
    "Hip error: 'hipErrorOutOfMemory'(2) at common.cu:1288",
    "vm:1:2 [0] NCCL WARN HIP failure 'hipErrorIllegalAddress'",
    'MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD with '
    'errorcode 1.'])
def test_failure_lines_are_errors(line, where):
    row = row_2_19(8, 2, 9.1, 0.0)
    out = f'{line}\n{row}\n' if where == 'before' else f'{row}\n{line}\n'
    res = nccltests.parse_text(out)
    assert len(res.rows) == 1 and len(res.errors) == 1
    assert res.errors[0].split()[-1] == line.split()[-1]


def test_library_last_error_is_a_note_not_a_failure():
    res = nccltests.parse_text(row_2_19(8, 2, 9.1, 0.0) + '\n' +
                               footer(0, 0.0) + '# error: NET/IB : no device\n')
    assert not res.errors and 'NET/IB' in res.notes[0] and res.complete


def _row_2_0(size, count, dtype, keys, t, bw, delta):
    """nccl-tests v2.0.0: '%12li  %12li  %6s  %6s' + '  %7s  %6.2f  %6.2f
    %5.0le' per group."""
    line = '%12li  %12li  %6s' % (size, count, dtype)
    for k in keys:
        line += '  %6s' % k
    for _ in range(2):
        line += '  %7s  %6.2f  %6.2f  %5.0e' % ('%7.2f' % t, bw, bw, delta)
    return line


HEADER_2_0 = ('#       size         count    type   redop     time   algbw   '
              'busbw  error     time   algbw   busbw  error\n')


@pytest.mark.parametrize('keys, redop, root', [
    (['sum'], 'sum', None),             # all_reduce: redop
    (['0'], '', 0),                     # broadcast: root
    (['sum', '0'], 'sum', 0),           # reduce: redop root
    ([], '', None)])                    # all_gather: neither
def test_nccl_tests_2_0_tables(keys, redop, root):
    ranks = ''.join('#   Rank %2d Pid %6d on %10s device %2d [0x%02x] %s\n'
                    % (r, 100 + r, 'node', r, r, 'A100') for r in range(2))
    ok = _row_2_0(1024, 256, 'float', keys, 9.5, 0.11, 5e-07)
    bad = _row_2_0(2048, 512, 'float', keys, 9.6, 0.21, 2e-05)
    res = nccltests.parse_text(ranks + HEADER_2_0 + ok + '\n' + bad + '\n' +
                               footer(1, 0.16))
    assert res.format == 'nccl-tests-2.0' and res.check_column == 'error'
    assert [(r.redop, r.root) for r in res.rows] == [(redop, root)] * 2
    # float on 2 ranks: wrong beyond 1e-5 * (2 - 1) (DeltaMaxValue)
    assert res.rows[0].wrong == 0 and res.rows[1].wrong == 2
    assert res.rows[1].out_of_place.max_delta == pytest.approx(2e-05)


def test_nccl_tests_2_0_tolerance_grows_with_ranks():
    # the published 16-rank p4d run prints 5e-07: within 1e-5 * 15
    assert nccltests.delta_tolerance('float', 16) == pytest.approx(1.5e-4)
    assert nccltests.delta_tolerance('int32', 16) < 1e-100
    assert nccltests.delta_tolerance('half', None) == pytest.approx(1e-2)


def test_rccl_tests_algo_proto_channels_and_in_place_only():
    pre = '%12li  %12li  %8s  %6s  %6s' % (1048576, 262144, 'float', 'sum',
                                           '%6i' % 0)
    body = '  %7s  %6.2f  %6.2f  %5g' % ('%7.2f' % 20.5, 51.1, 95.9, 0)
    res = nccltests.parse_text(pre + body + body + '%8s  %8s  %10d' %
                               ('RING', 'SIMPLE', 16) + '\n' +
                               pre + body + '%8s  %8s  %10s' %
                               ('N/A', 'N/A', 'N/A') + '\n')
    assert len(res.rows) == 2
    assert res.rows[0].out_of_place.busbw == pytest.approx(95.9)
    assert res.rows[1].out_of_place is None
    assert res.rows[1].in_place.busbw == pytest.approx(95.9)


@pytest.mark.parametrize('prefix', [
    '[1,0]<stdout>:', '0: ', '12: ', 'nid001234: ', 'gpu-53.local: ',
    '2024-05-01T12:00:00.123Z ', '2024-05-01T12:00:00+02:00 ',
    '[2024-05-01 12:00:00] ', '[2024-05-01 12:00:00,123] 3: '])
def test_prefixed_lines(capture, prefix):
    out = capture('intra', 'stdout.txt')
    plain = nccltests.parse_text(out)
    res = nccltests.parse_text(''.join(prefix + ln for ln in
                                       out.splitlines(keepends=True)))
    assert [r.size for r in res.rows] == [r.size for r in plain.rows]
    assert res.complete and res.nranks == 2
    assert res.tests_version == '2.19.6'


def test_text_cut_inside_the_average_line_is_not_complete(capture):
    out = capture('intra', 'stdout.txt')
    i = out.index('# Avg bus bandwidth')
    assert not nccltests.parse_text(out[:i + 28]).complete
    assert nccltests.parse_text(out[:out.index('\n', i) + 1]).complete


def test_json_nan_and_inf_as_nccl_tests_writes_them(capture):
    js = capture('intra', 'result.json')
    # jsonDouble: nan as the string "nan", inf as printf's bare inf
    js = js.replace('"bus_bw": 0.000875', '"bus_bw": "nan"', 1)
    js = js.replace('"bus_bw": 346.517076', '"bus_bw": inf', 1)
    res = nccltests_json.parse_json(js)
    assert res.nonfinite_sizes == [8, 8 << 30] and len(res.rows) == 31


def test_cut_json_falls_back_to_the_text(capture):
    out, js = capture('intra', 'stdout.txt'), capture('intra',
                                                      'result.json')
    res = nccltests.parse(out, js[:len(js) // 2], 'result.json')
    assert res.source == 'text' and 'result.json' in res.json_error
    assert len(res.rows) == 31 and res.complete and not res.errors
    # a JSON closed after a failure (jsonOutputFinalize) but without its
    # summary does not win over a complete text either
    doc = js[:js.index(',\n "out_of_bounds"')] + '\n}'
    res = nccltests.parse(out, doc, 'result.json')
    assert res.source == 'text' and res.complete
    # an empty JSON file is damaged, not absent
    assert nccltests.parse(out, '', 'r.json').json_error


def test_rccl_tests_json_lines():
    # Reporter::addResult, MPI build: strings quoted, numbers std::to_string
    line = ('{"name":"AllReduce", "nodes":2, "ranks":16, "ranksPerNode":8, '
            '"gpusPerRank":1, "size":%d, "type":"float", "redop":"sum", '
            '"inPlace":%d, "time":%s, "algBw":1.000000, "busBw":%s, '
            '"wrong":"%s"}')
    text = '\n'.join([line % (1024, 0, '12.500000', '1.875000', '0'),
                      line % (1024, 1, '12.400000', '1.890000', '0'),
                      line % (2048, 0, '-nan', '-nan', '0'),
                      line % (2048, 1, '13.000000', '3.100000', '2')]) + '\n'
    res = nccltests.parse_any(text, 'r.json')
    assert res.format == 'rccl-tests-json-lines' and res.nranks == 16
    assert [r.size for r in res.rows] == [1024, 2048]
    assert res.rows[0].busbw == pytest.approx(1.89)
    assert res.nonfinite_sizes == [2048] and res.rows[1].wrong == 2
    assert res.closed is None and not res.complete
    with pytest.raises(CclHealthError, match='r.json: not an nccl-tests .*'
                       'nor rccl-tests JSON lines'):
        nccltests.parse_any('{"size": 1}\n', 'r.json')
    with pytest.raises(CclHealthError, match='r.json:2: not an rccl-tests'):
        nccltests.parse_any(text.splitlines()[0] + '\n{"size": 1}\n',
                            'r.json')


def test_nccl_tests_2_0_without_rank_lines_trusts_its_own_count():
    # a 16-rank float run prints 5e-05 (within 1e-5 * 15); without the
    # rank lines the rank count is unknown: the program's "0 OK" decides
    row = _row_2_0(1024, 256, 'float', ['sum'], 9.5, 0.11, 5e-05)
    res = nccltests.parse_text(HEADER_2_0 + row + '\n' + footer(0, 0.1))
    assert res.nranks is None and res.rows[0].wrong == 0
    res = nccltests.parse_text(HEADER_2_0 + row + '\n')     # no summary
    assert res.rows[0].wrong == 2             # strictest: both groups


def test_launcher_messages_are_left_to_the_exit_status():
    res = nccltests.parse_text('srun: error: Unable to allocate resources: '
                               'Invalid partition name specified\n')
    assert not res.errors and not res.rows and not res.complete


def test_parse_detects_a_json_given_as_the_output(capture):
    res = nccltests.parse(capture('intra', 'result.json'))
    assert res.source == 'json' and len(res.rows) == 31 and res.complete


def test_per_iteration_in_place_only_row():
    # util.cu writeResultHeader with per_iter_timing, and a trace-replay row
    # (writeBenchMarkLineNullBody: 32 spaces for the out-of-place group)
    header = ('# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s'
              '  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s \n' % (
                  'size', 'count', 'type', 'redop', 'root', 'time', 'algbw',
                  'busbw', '#wrong', 'i_min', 'i_max', 'i_p99', 'i_cv%',
                  'time', 'algbw', 'busbw', '#wrong', 'i_min', 'i_max',
                  'i_p99', 'i_cv%'))
    pre = '%12li  %12li  %8s  %6s  %6s' % (1048576, 262144, 'float', 'sum',
                                           '%6i' % -1)
    body = ' ' * 32 + '  %7s  %6s  %6s  %6g' % ('  14.83', ' 70.71', ' 70.71',
                                               0) + \
        '  %7s  %7s  %7s  %7s' % ('  14.50', '  15.20', '  15.10', '   1.50')
    res = nccltests.parse_text(header + pre + body + '\n')
    row = res.rows[0]
    assert row.out_of_place is None and row.in_place.busbw == 70.71
    assert row.wrong == 0
    # without the header the per-iteration values cannot pass as a #wrong
    assert not nccltests.parse_text(pre + body + '\n').rows


# -- the oldest and the rarer forms (issue 19), from the format strings -----
# nccl-tests b188a15 (2017, the first release) src/common.cu:
#   printf("nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s)
#           warmup iters: %d iters: %d validation: %d \n", ...)
#   printf("#   Rank %2d on %10s device %2d [0x%02x] %s\n", ...)  (no Pid)
#   PRINT("  %7.3f  %5.2f  %5.2f  %7.0le", ...)           (time in ms)
#   PRINT(" Out of bounds values : %d %s\n"), PRINT(" Avg bus bandwidth
#   : %g %s\n")                                              (no '#')
# src/all_reduce.cu print_header: "# %10s  %12s  %6s  %6s  %7s  %5s  %5s
#   %7s ..." with "bytes", "N", "type", "op", "time", "algbw", "busbw",
#   "res"; print_line_header "%12li  %12li  %6s  %6s"

def _oldest(rows, oob=0, ranks=(('node1', 0), ('node1', 1), ('node2', 0))):
    out = ['nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) '
           'warmup iters: %d iters: %d validation: %d ' % (
               1, 1, 8, 1024, 2, 'factor', 5, 20, 1),
           '# Using devices']
    for r, (host, dev) in enumerate(ranks):
        out.append('#   Rank %2d on %10s device %2d [0x%02x] %s' % (
            r, host, dev, 6 + dev, 'Tesla P100-SXM2-16GB'))
    out.append('# %10s  %12s  %6s  %6s  %7s  %5s  %5s  %7s  %7s  %5s  %5s  '
               '%7s' % ('bytes', 'N', 'type', 'op', 'time', 'algbw', 'busbw',
                        'res', 'time', 'algbw', 'busbw', 'res'))
    for size, delta in rows:
        line = '%12li  %12li  %6s  %6s' % (size, size // 4, 'float', 'sum')
        for _ in range(2):
            line += '  %7.3f  %5.2f  %5.2f  %7.0le' % (0.042, 0.01, 0.02,
                                                      delta)
        out.append(line)
    out.append(' Out of bounds values : %d %s' % (oob, 'FAILED' if oob
                                                   else 'OK'))
    out.append(' Avg bus bandwidth    : %g %s' % (0.02, ''))
    return '\n'.join(out) + '\n'


def test_the_oldest_table_is_read():
    res = nccltests.parse_text(_oldest([(8, 1e-7), (1024, 0.0)]))
    assert [r.size for r in res.rows] == [8, 1024]
    assert res.format == 'nccl-tests-2.0' and res.check_column == 'error'
    assert res.complete and res.out_of_bounds == 0 and res.wrong_total == 0
    assert res.nranks == 3
    assert res.ranks_per_host == {'node1': 2, 'node2': 1}
    assert (res.min_bytes, res.max_bytes, res.step, res.step_factor) == \
        (8, 1024, 2, 2)
    assert res.expected_sizes() == [8, 16, 32, 64, 128, 256, 512, 1024]


def test_the_oldest_table_with_a_float_error_beyond_tolerance_is_wrong():
    res = nccltests.parse_text(_oldest([(8, 1e-7), (1024, 1.0)], oob=2))
    assert [r.wrong for r in res.rows] == [0, 2]
    assert res.out_of_bounds == 2


def test_rccl_tests_run_header():
    # rccl-tests src/common.cu (2022-): "# nThreads: %d nGpus: %d nRanks: %d
    # minBytes: %ld maxBytes: %ld step: %ld(%s) warmupIters: %d iters: %d
    # validation: %d \n"
    head = ('# nThreads: %d nGpus: %d nRanks: %d minBytes: %ld maxBytes: %ld '
            'step: %ld(%s) warmupIters: %d iters: %d validation: %d \n' % (
                1, 8, 1, 1024, 4096, 1024, 'bytes', 5, 20, 1))
    res = nccltests.parse_text(head)
    assert (res.threads, res.gpus_per_process) == (1, 8)
    assert (res.min_bytes, res.max_bytes, res.step, res.step_factor) == \
        (1024, 4096, 1024, None)
    assert res.expected_sizes() == [1024, 2048, 3072, 4096]
    assert nccltests.parse_text(head.replace('nRanks: 1 ', '')).min_bytes \
        == 1024


def test_rccl_tests_json_lines_with_the_wrong_key_as_a_string():
    line = ('{"name":"AllReduce", "nodes":1, "ranks":8, "ranksPerNode":8, '
            '"gpusPerRank":1, "size":%d, "type":"float", "redop":"sum", '
            '"inPlace":%d, "time":12.3, "algBw":0.1, "busBw":0.2, '
            '"#wrong":"%s"}')
    text = '\n'.join(line % (s, p, w) for s, p, w in
                     ((1024, 0, '0'), (1024, 1, '3'), (2048, 0, '0'),
                      (2048, 1, '0')))
    res = nccltests.parse_any(text)
    assert res.format == 'rccl-tests-json-lines'
    assert [r.wrong for r in res.rows] == [3, 0]
    assert res.rows[0].in_place.wrong == 3


def test_ranks_per_host_from_rank_lines_with_and_without_pid_and_group():
    lines = ['#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s' % (
        r, 0, 100 + r, h, d, '0000:05:00', 'NVIDIA H100')
        for r, (h, d) in enumerate((('a', 0), ('a', 1), ('a', 2), ('b', 0)))]
    lines.append('#   Rank %2d Pid %6d on %10s device %2d [0x%02x] %s' % (
        4, 200, 'b', 1, 7, 'NVIDIA H100'))
    res = nccltests.parse_text('\n'.join(lines))
    assert res.nranks == 5 and res.ranks_per_host == {'a': 3, 'b': 2}


def test_rank_lines_give_each_ranks_process():
    """``#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s``
    (nccl-tests 2.13+), without ``Group`` (2.4-2.12) and without ``Pid``
    (before 2.4): the Pid of each rank, None where the line has none."""
    from ccl_health.evidence import nccltests as NT
    text = '\n'.join([
        '# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) '
        'warmup iters: 1 iters: 1 agg iters: 1 validation: 1 graph: 0',
        '#',
        '#  Rank  0 Group  0 Pid  25615 on         vm device  0 '
        '[0000:00:06] NVIDIA H200',
        '#   Rank  1 Pid  25616 on         vm device  1 [0x07] NVIDIA H200',
        '#   Rank  2 on         vm device  2 [0x08] Tesla V100-SXM2-16GB',
        ''])
    res = NT.parse_text(text)
    assert res.rank_pids == [25615, 25616, None]
    assert res.rank_hosts == ['vm'] * 3
    assert res.devices[0] == 'vm:0 NVIDIA H200'


def test_json_devices_give_each_ranks_process():
    import os
    from ccl_health.evidence import nccltests_json
    path = os.path.join(os.path.dirname(__file__), 'fixtures', 'device',
                        'cap', 'net-socket', 'result.json')
    res = nccltests_json.parse_json(open(path).read(), path)
    assert res.rank_pids == [25615, 25616]


# -- issue 31.4: tables as people paste them ---------------------------------

_HEAD = ('# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup '
         'iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n'
         '#\n# Using devices\n'
         '#  Rank  0 Group  0 Pid   1001 on      node1 device  0 [0x07] X\n'
         '#  Rank  1 Group  0 Pid   1002 on      node1 device  1 [0x0b] X\n'
         '#\n'
         '#       size         count      type   redop    root     time   '
         'algbw   busbw #wrong     time   algbw   busbw #wrong\n'
         '#        (B)    (elements)                               (us)  '
         '(GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n')
_ROWS = ('           8             2     float     sum      -1    12.90    '
         '0.00    0.00      0    12.87    0.00    0.00      0\n'
         '          16             4     float     sum      -1    12.88    '
         '0.00    0.00      0    12.83    0.00    0.00      0\n')
_TAIL = '# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n#\n'


def _read(text):
    return nccltests.parse_text(text)


def test_data_rows_behind_a_hash_are_rows():
    text = _HEAD + ''.join('#' + ln[1:] for ln in _ROWS.splitlines(True)) + \
        _TAIL
    res = _read(text)
    assert [r.size for r in res.rows] == [8, 16] and res.complete


@pytest.mark.parametrize('prefix', ['0: ', '  0: ', '[0] ', '[1,0]<stdout>:',
                                    '        [1,0]<stdout>:',
                                    '2024-05-01T12:00:00.123456789Z ',
                                    '[pod/nccl-tests-launcher-x2k/mpi] ',
                                    '2024-05-01T12:00:00.123456789Z 0: '])
def test_launcher_and_collector_prefixes(prefix):
    text = ''.join(prefix + ln for ln in (_HEAD + _ROWS + _TAIL)
                   .splitlines(True))
    res = _read(text)
    assert [r.size for r in res.rows] == [8, 16], prefix
    assert res.complete and res.nranks == 2 and res.hosts == ['node1']


def test_a_row_cut_by_an_interleaved_debug_line_is_joined():
    first, second = _ROWS.splitlines(True)
    cut = first.index('   12.90')
    text = (_HEAD + first[:cut] + '\n'
            'node1:1001:1010 [0] NCCL INFO Connected all rings\n' +
            first[cut:] + second + _TAIL)
    res = _read(text)
    assert [r.size for r in res.rows] == [8, 16] and res.complete
    assert res.rows[0].out_of_place.time_us == 12.90


def test_some_rank_lines_do_not_count_the_ranks():
    # "Rank  1" alone (a pasted excerpt): not one rank; NCCL's own lines
    # in the text name the communicator's size
    lines = _HEAD.splitlines(True)
    text = ''.join(ln for ln in lines if 'Rank  0' not in ln) + _ROWS + _TAIL
    res = _read(text)
    assert res.nranks is None and res.ranks_per_host == {}
    res = _read(text + 'node1:1002:1010 [1] NCCL INFO comm 0x1 rank 1 nranks '
                       '16 cudaDev 1 busId 1000 - Init COMPLETE\n')
    assert res.nranks == 16
    # the first ranks' lines only, and NCCL says more: its count
    res = _read(_HEAD + _ROWS + 'node1:1002:1010 [1] NCCL INFO comm 0x1 rank 1 '
                'nRanks 16 nNodes 2 localRanks 8 localRank 1 MNNVL 0\n' + _TAIL)
    assert res.nranks == 16 and res.ranks_per_host == {}


def _devices_report(n_gpus, procs, shown):
    """nccl-tests' device report (src/util.cu, writeDeviceReport) of
    ``procs`` [(host, pid)] each driving ``n_gpus`` GPUs (``-g``), with
    only the rank lines whose rank is in ``shown``."""
    out = ['# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) '
           'warmup iters: %d iters: %d agg iters: %d validation: %d graph: '
           '%d unalign: %d' % (1, n_gpus, 8, 16, 2, 'factor', 5, 20, 1, 1,
                               0, 0), '#', '# Using devices']
    for proc, (host, pid) in enumerate(procs):
        for i in range(n_gpus):
            rank = proc * n_gpus + i
            if rank in shown:
                out.append('#  Rank %2d Group %2d Pid %6d on %10s device %2d '
                           '[%04x:%02x:%02x] %s' % (rank, 0, pid, host, i, 0,
                                                    0x10 + i, 0, 'NVIDIA B200'))
    return '\n'.join(out) + '\n'


def test_a_process_with_fewer_rank_lines_than_its_gpus_is_an_excerpt():
    # "nGpus 8": each process prints 8 rank lines; ranks 0..3 of one
    # process are a cut, not 4 ranks (they look like ranks 0 .. n-1)
    one = [('node1', 4242)]
    res = _read(_devices_report(8, one, range(4)) + _ROWS + _TAIL)
    assert res.nranks is None and res.rank_lines_partial
    assert res.ranks_per_host == {}
    res = _read(_devices_report(8, one, range(8)) + _ROWS + _TAIL)
    assert res.nranks == 8 and res.ranks_per_host == {'node1': 8}
    # two processes of 4 GPUs, all shown: 8 ranks on 2 hosts
    two = [('node1', 11), ('node2', 11)]
    res = _read(_devices_report(4, two, range(8)) + _ROWS + _TAIL)
    assert res.nranks == 8 and res.ranks_per_host == {'node1': 4,
                                                      'node2': 4}
    # the second process cut after 2 of its 4 lines: unknown
    res = _read(_devices_report(4, two, range(6)) + _ROWS + _TAIL)
    assert res.nranks is None
    # ... unless NCCL's own lines name the communicator's size
    res = _read(_devices_report(4, two, range(6)) + _ROWS +
                'node2:11:12 [1] NCCL INFO comm 0x1 rank 5 nranks 8 cudaDev '
                '1 busId 1000 - Init COMPLETE\n' + _TAIL)
    assert res.nranks == 8


def test_the_rank_count_of_the_busbw_factor():
    from ccl_health.evidence import collectives as C
    # all_reduce: busbw = algbw x 2(n-1)/n, printed with two decimals
    assert C.ranks_of_factor('all_reduce', [(100.0, 175.0)]) == 8
    assert C.ranks_of_factor('all_gather', [(80.0, 70.0)]) == 8
    # a factor that does not depend on n, or too little to tell: unknown
    assert C.ranks_of_factor('broadcast', [(10.0, 10.0)]) is None
    assert C.ranks_of_factor('all_reduce', [(0.5, 0.9)]) is None
    assert C.ranks_of_factor('all_reduce', [(2.0, 3.98)]) is None
