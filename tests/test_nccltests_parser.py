"""The nccl-tests parser on real outputs captured on 2x H200
(nccl-tests 2.19.6, NCCL 2.28.3)."""

import pytest

from ccl_health import CclHealthError, nccltests


def test_json_and_text_agree_on_the_intra_sweep(capture):
    text = nccltests.parse_text(capture('intra', 'stdout.txt'))
    js = nccltests.parse_json(capture('intra', 'result.json'))
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
    js = nccltests.parse_json(capture(case, 'result.json'))
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
        nccltests.parse_json('{"version": 3, "results": [', 'x.json')
    with pytest.raises(CclHealthError, match='not an nccl-tests JSON'):
        nccltests.parse_json('{"a": 1}', 'y.json')


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
