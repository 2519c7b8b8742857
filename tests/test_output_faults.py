"""The fault matrix of the output judgement: every real capture under
tests/fixtures x every way a run or a log collector damages its output
(tests/helpers/mutations.py), through
:func:`ccl_health.evidence.nccltests.parse` and
:func:`ccl_health.judge.casejudge.judge_output`.  Only the unmutated complete
capture with exit status 0 may be judged fine (``None``)."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers import mutations as M
from ccl_health.evidence import nccltests
from ccl_health.judge.casejudge import judge_output
from ccl_health.judge.verdicts import Verdict

CAPTURES = M.complete_captures()
IDS = [c[0] for c in CAPTURES]
FAST = settings(max_examples=25, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


def judge(stdout, js=None, rc=0, expected=None):
    res = nccltests.parse(stdout, js, 'result.json')
    return res, judge_output(res, rc, expected, 'all_reduce_perf')


def test_the_matrix_has_real_captures_of_every_kind():
    names = ' '.join(IDS)
    assert len(CAPTURES) >= 20
    for kind in ('cap/intra', 'suite-run', 'four-gpus', 'framework',
                 'published/rccl-tests', 'published/nccl-debug'):
        assert kind in names


@pytest.mark.parametrize('name, out, js, rc', CAPTURES, ids=IDS)
def test_complete_capture_with_exit_0_is_fine_and_nothing_else(
        name, out, js, rc):
    res, bad = judge(out, js, 0)
    assert bad is None, bad
    assert res.complete and res.rows and not res.nonfinite_sizes
    # the same output with any other exit status, or none known
    for status in (1, 2, 5, 124, 137, -9):
        v, why = judge_output(res, status)
        assert v is Verdict.CRASH and f'status {status}' in why
        assert 'after a complete table' in why
    v, why = judge_output(res, None)
    assert v is Verdict.COULD_NOT_CHECK and 'exit status' in why
    # every size asked for must be there
    asked = [r.size for r in res.rows] + [res.rows[-1].size * 2]
    v, why = judge_output(res, 0, asked)
    assert v is Verdict.INCOMPLETE and '1 of' in why


@pytest.mark.parametrize('name, out, js, rc', CAPTURES, ids=IDS)
def test_truncation_at_every_line_before_the_summary_is_never_fine(
        name, out, js, rc):
    end = M.closing_index(out)
    assert end is not None
    n = len(M.lines(out))
    for cut in range(n + 1):
        text = M.truncate_lines(out, cut)
        res, bad = judge(text)
        if cut <= end:
            assert bad is not None, f'cut after {cut} lines judged fine'
            assert bad[0] in (Verdict.INCOMPLETE, Verdict.COULD_NOT_CHECK)
            assert not res.complete
        else:
            assert bad is None, (cut, bad)


@pytest.mark.parametrize('name, out, js, rc', CAPTURES, ids=IDS)
def test_zero_rows_and_missing_closing_lines_are_not_judged_fine(
        name, out, js, rc):
    # issue 43, class E: an output that shows its summary, or every size of
    # its sweep, reached its end: what is not in it could not be checked
    # (could-not-check), never a failure and never a pass
    res, bad = judge(M.only_header(out))
    assert not res.rows and bad[0] is Verdict.COULD_NOT_CHECK
    assert 'not in the text' in bad[1] and 'closing summary' in bad[1]
    res, bad = judge(M.drop_closing(out))
    assert res.rows and 'closing summary' in bad[1]
    if res.expected_sizes():
        assert bad[0] is Verdict.COULD_NOT_CHECK
        assert 'every size announced by its header' in bad[1]
    else:        # no header: whether the sweep is whole is not known
        assert bad[0] is Verdict.INCOMPLETE
    # neither the rows nor the summary: the run printed nothing to judge
    res, bad = judge(M.drop_closing(M.only_header(out)))
    assert not res.rows and bad[0] is Verdict.INCOMPLETE
    assert 'no result rows' in bad[1]
    # a row gone too: the run stopped before its end
    rows = M.row_indexes(out)
    if len(rows) > 1:
        res, bad = judge(M.truncate_lines(out, rows[-1]))
        assert bad[0] is Verdict.INCOMPLETE and 'closing summary' in bad[1]


@FAST
@given(data=st.data())
def test_random_cut_inside_a_line_before_the_summary(data):
    name, out, js, rc = data.draw(st.sampled_from(CAPTURES))
    lines = M.lines(out)
    end = sum(len(ln) for ln in lines[:M.closing_index(out) + 1])
    # a cut anywhere up to the end of the "Avg bus bandwidth" line, its
    # newline excluded
    n = data.draw(st.integers(0, end - 1))
    res, bad = judge(M.truncate_chars(out, n))
    assert bad is not None


@FAST
@given(data=st.data())
def test_failure_line_anywhere_is_never_fine(data):
    name, out, js, rc = data.draw(st.sampled_from(CAPTURES))
    kind = data.draw(st.sampled_from(sorted(M.FAILURE_LINES)))
    at = data.draw(st.integers(0, len(M.lines(out))))
    text = M.insert_line(out, at, M.FAILURE_LINES[kind])
    res, bad = judge(text, js)
    assert bad is not None and bad[0] is Verdict.CRASH, (kind, at, bad)
    assert any(M.FAILURE_LINES[kind].split("'")[0].strip()[-12:] in e
               for e in res.errors)
    # with the nonzero exit the program then has
    res, bad = judge(text, js, 1)
    assert bad[0] is Verdict.CRASH and 'status 1' in bad[1]


@FAST
@given(data=st.data())
def test_nonfinite_value_in_any_row_is_wrong_results(data):
    name, out, js, rc = data.draw(st.sampled_from(CAPTURES))
    rows = M.row_indexes(out)
    row = data.draw(st.integers(0, len(rows) - 1))
    group = data.draw(st.sampled_from([0, -1]))
    column = data.draw(st.integers(0, 2))
    value = data.draw(st.sampled_from(M.NONFINITE))
    text = M.inject_nonfinite(out, row, group, column, value)
    for j in (None, js):                   # the text alone, and with JSON
        res, bad = judge(text, j)
        # the row is still there: seen, not dropped
        assert len(res.rows) == len(nccltests.parse(out, j).rows)
        assert bad is not None and bad[0] is Verdict.WRONG_RESULTS, bad
        assert 'non-finite' in bad[1]


@FAST
@given(data=st.data())
def test_wrong_elements_in_any_row_are_wrong_results(data):
    name, out, js, rc = data.draw(st.sampled_from(CAPTURES))
    row = data.draw(st.integers(0, len(M.row_indexes(out)) - 1))
    n = data.draw(st.integers(1, 10 ** 7))
    text = M.set_wrong(out, row, n)
    for j in (None, js):
        res, bad = judge(text, j)
        assert bad[0] is Verdict.WRONG_RESULTS
        # nccl-tests >= 2.12 counts wrong elements; before, the 'error'
        # column holds the largest difference, judged by its tolerance
        assert ('wrong elements' in bad[1]) != (
            'beyond the tolerance' in bad[1])
        assert ('beyond the tolerance' in bad[1]) == (
            res.format == 'nccl-tests-2.0')


@pytest.mark.parametrize('name, out, js, rc', CAPTURES, ids=IDS)
def test_out_of_bounds_failed_is_counted_not_zero(name, out, js, rc):
    res, bad = judge(M.oob_failed(out, 7))
    assert res.out_of_bounds == 7
    assert bad[0] is Verdict.WRONG_RESULTS and '7 out-of-bounds' in bad[1]
    if js:
        res, bad = judge(M.oob_failed(out, 7), js)
        assert res.out_of_bounds == 7 and bad[0] is Verdict.WRONG_RESULTS


@pytest.mark.parametrize('name, out, js, rc', CAPTURES, ids=IDS)
def test_own_average_check_failed_is_not_fine(name, out, js, rc):
    res, bad = judge(M.avg_failed(out))
    assert res.avg_busbw_failed and bad[0] is Verdict.BELOW_REFERENCE


@pytest.mark.parametrize('kind', sorted(M.PREFIXES))
@pytest.mark.parametrize('name, out, js, rc', CAPTURES, ids=IDS)
def test_launcher_and_collector_prefixes_change_nothing(
        kind, name, out, js, rc):
    plain = nccltests.parse_text(out)
    text = M.prefix_lines(out, kind)
    res, bad = judge(text)
    assert bad is None, bad
    assert [(r.size, r.busbw) for r in res.rows] == \
        [(r.size, r.busbw) for r in plain.rows]
    assert (res.nranks, res.out_of_bounds, res.avg_busbw,
            res.tests_version) == (plain.nranks, plain.out_of_bounds,
                                   plain.avg_busbw, plain.tests_version)
    # and damage behind the prefixes is still seen
    end = M.closing_index(text)
    assert judge(M.truncate_lines(text, end))[1][0] is (
        Verdict.COULD_NOT_CHECK if plain.expected_sizes() else
        Verdict.INCOMPLETE)
    assert judge(M.truncate_lines(text, M.row_indexes(text)[-1]))[1][0] \
        is Verdict.INCOMPLETE
    res, bad = judge(M.insert_line(text, 3, M.prefix_lines(
        M.FAILURE_LINES['test-cuda'], kind)))
    assert bad[0] is Verdict.CRASH


JSON_CAPTURES = [c for c in CAPTURES if c[2]]


@FAST
@given(data=st.data())
def test_cut_json_never_hides_the_complete_text_table(data):
    name, out, js, rc = data.draw(st.sampled_from(JSON_CAPTURES))
    n = data.draw(st.integers(0, len(js) - 2))
    res, bad = judge(out, M.truncate_json(js, n))
    assert res.json_error and res.source == 'text'
    assert bad is None                     # judged on the complete text
    assert len(res.rows) == len(nccltests.parse_text(out).rows)
    # with the text cut too, never fine
    cut = M.truncate_lines(out, M.closing_index(out))
    assert judge(cut, M.truncate_json(js, n))[1] is not None


@pytest.mark.parametrize('name, out, js, rc', JSON_CAPTURES,
                         ids=[c[0] for c in JSON_CAPTURES])
def test_json_faults(name, out, js, rc):
    res, bad = judge(out, js)
    assert res.source == 'json' and bad is None
    for value in ('nan', 'inf', '-inf'):
        res, bad = judge(out, M.json_nonfinite(js, value=value))
        assert bad[0] is Verdict.WRONG_RESULTS, (value, bad)
    res, bad = judge(out, M.json_wrong(js, 0, 4))
    assert bad[0] is Verdict.WRONG_RESULTS and '4 wrong' in bad[1]


@pytest.mark.parametrize('name, out, js, rc', CAPTURES[:6] + CAPTURES[-3:],
                         ids=IDS[:6] + IDS[-3:])
def test_rccl_json_lines_and_array(name, out, js, rc):
    text = nccltests.parse_text(out)
    for array in (False, True):
        jl = M.rccl_json_lines(text, array=array)
        alone = nccltests.parse_any(jl, 'rccl.json')
        assert [r.size for r in alone.rows] == [r.size for r in text.rows]
        assert [r.busbw for r in alone.rows] == \
            pytest.approx([r.busbw for r in text.rows])
        v = judge_output(alone, 0)
        if array:              # written at the end: complete by itself
            assert alone.format == 'rccl-tests-json' and v is None
        else:                  # written as it goes: no closing summary
            assert alone.format == 'rccl-tests-json-lines'
            assert v[0] is Verdict.COULD_NOT_CHECK
        # with the stdout: complete only when the stdout is
        assert judge(out, jl)[1] is None
        cut = M.truncate_lines(out, M.closing_index(out))
        if array:    # written after the summary: the run got to its end
            assert judge(cut, jl)[1] is None
        else:
            # every size there, the summary not: not checked (issue 43)
            merged, bad = judge(cut, jl)
            assert bad[0] is (Verdict.COULD_NOT_CHECK if
                              merged.expected_sizes() else Verdict.INCOMPLETE)
        # nan in a result
        text.rows[0].in_place.busbw = float('nan')
        bad = judge_output(nccltests.parse_any(
            M.rccl_json_lines(text, array=array)), 0)
        text.rows[0].in_place.busbw = 1.0
        assert bad[0] is Verdict.WRONG_RESULTS


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_only_the_unmutated_complete_capture_with_exit_0_is_fine(data):
    """The rule itself, over random captures x mutations x exit statuses:
    ``None`` only with exit 0 and no damaging mutation (a prefix changes
    nothing)."""
    import random
    name, out, js, rc = data.draw(st.sampled_from(CAPTURES))
    damage = data.draw(st.sampled_from([None] + sorted(M.OUTPUT_DAMAGING)))
    harmless = data.draw(st.sampled_from([None] + sorted(M.HARMLESS)))
    status = data.draw(st.sampled_from([0, 0, 0, None, 1, 2, 124, 137]))
    use_json = data.draw(st.booleans()) and js is not None
    rnd = random.Random(data.draw(st.integers(0, 2 ** 32)))
    text = out
    if damage:
        text = M.OUTPUT_DAMAGING[damage](text, rnd)
    if harmless:
        text = M.HARMLESS[harmless](text, rnd)
    # a JSON complete by itself speaks for the rows; damage the text only
    # where the JSON has no say (no JSON), or where the text has the last
    # word (errors, the summary, nan, wrong)
    if use_json and damage in ('truncate-lines', 'truncate-chars',
                               'drop-closing', 'zero-rows'):
        use_json = False
    res = nccltests.parse(text, js if use_json else None, 'result.json')
    bad = judge_output(res, status, None, 'all_reduce_perf')
    if damage is None and status == 0:
        assert bad is None, (name, harmless, bad)
    else:
        assert bad is not None, (name, damage, harmless, status)
        if status not in (0, None):
            assert bad[0] in (Verdict.CRASH, Verdict.WRONG_RESULTS,
                              Verdict.HANG)
