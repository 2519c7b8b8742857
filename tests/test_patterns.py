"""Communication-pattern CSVs (ccl_health.patterns): the shipped example and
clear errors naming the file and line."""

import os

import pytest

from conftest import REPO
from ccl_health import patterns
from ccl_health.patterns import PatternError

DIR = os.path.join(REPO, 'tests', 'fixtures', 'patterns')   # bad-*.csv
HEADER = ','.join(patterns.COLUMNS)


def test_example_is_shipped_as_package_data():
    assert patterns.EXAMPLE == os.path.join(
        REPO, 'ccl_health', 'data', 'patterns', 'example.csv')
    with open(os.path.join(REPO, 'pyproject.toml')) as fp:
        assert '"data/patterns/*.csv"' in fp.read()
    assert not os.path.exists(os.path.join(DIR, 'example.csv'))


def test_example_is_read():
    calls = patterns.load(patterns.EXAMPLE)
    assert len(calls) == 8
    first = calls[0]
    assert (first.line, first.routine, first.collective, first.count,
            first.datatype, first.type_size, first.nranks, first.algo,
            first.protocol, first.total_bytes, first.time_us) == (
        2, 'allgather', 'all_gather', 1, 'float32', 4, 2, 'Ring', 'LL', 8,
        9.6)
    assert {c.collective for c in calls} == {'all_gather', 'all_reduce',
                                             'broadcast'}
    grads = [c for c in calls if c.collective == 'all_reduce']
    # the gradient buckets add up to the model's parameters
    assert sum(c.count for c in grads) == 25557032
    assert all(c.total_bytes == c.count * 4 for c in grads)


@pytest.mark.parametrize('name, message', [
    ('bad-missing-column.csv', 'line 1: missing column(s) PROTOCOL'),
    ('bad-datatype.csv', "line 3: unknown datatype 'float24'"),
    ('bad-routine.csv', "line 4: unknown routine 'allsum'"),
])
def test_malformed_files_name_file_and_line(name, message):
    path = os.path.join(DIR, name)
    with pytest.raises(PatternError) as err:
        patterns.load(path)
    assert str(err.value).startswith(f'{path}: ')
    assert message in str(err.value)


@pytest.mark.parametrize('row, message', [
    ('allreduce,abc,float32,2,Ring,LL,4,1.0', 'line 2: num_samples (element '
     "count) is not a number: 'abc'"),
    ('allreduce,1,float32,two,Ring,LL,4,1.0', "line 2: nranks is not a "
     "number: 'two'"),
    ('allreduce,1,float32,2,Ring,LL,-4,1.0', 'line 2: TOTALBYTES must be '
     "positive, got '-4'"),
    ('allreduce,1,float32,2,Ring,LL,4,fast', 'line 2: TIME_FOR_EACH_NCCL_'
     "COMM_CALL_MICROSEC is not a number: 'fast'"),
    ('allreduce,1.5,float32,2,Ring,LL,4,1.0', 'not a number'),
    ('allreduce,1,float32', 'line 2: 3 fields, the header has 8'),
])
def test_bad_values_name_the_line(row, message):
    with pytest.raises(PatternError, match=r'^job\.csv: ') as err:
        patterns.parse(f'{HEADER}\n{row}\n', 'job.csv')
    assert message in str(err.value)


def test_unknown_time_names_and_aliases():
    calls = patterns.parse(
        f'{HEADER}\nAllReduce,4,bfloat16,8,?,?,8,?\n'
        f'reduce_scatter,2,half,2,Ring,Simple,8,3\n'
        f'send,2,ncclFloat32,2,Ring,Simple,8,3\n'
        f'alltoall,1,Float8e4m3,2,?,?,2,1.5\n', 'p.csv')
    assert calls[0].collective == 'all_reduce' and calls[0].time_us is None
    assert calls[0].datatype == 'bfloat16' and calls[0].type_size == 2
    assert calls[1].collective == 'reduce_scatter' and \
        calls[1].datatype == 'float16'
    assert calls[2].collective == 'sendrecv' and calls[2].type_size == 4
    assert calls[3].datatype == 'float8e4m3' and calls[3].type_size == 1


def test_empty_and_header_only_files():
    with pytest.raises(PatternError, match='p.csv: line 1: empty file'):
        patterns.parse('', 'p.csv')
    with pytest.raises(PatternError, match='p.csv: no calls after the header'):
        patterns.parse(HEADER + '\n', 'p.csv')
    with pytest.raises(PatternError, match='cannot read the pattern file'):
        patterns.load('/nonexistent/p.csv')


def test_algo_and_protocol_are_default_unless_set_for_the_process():
    algo, proto, note = patterns.algo_proto_reported({})
    assert (algo, proto) == ('Default', 'Default')
    assert 'cannot be forced per call' in note and 'NCCL_ALGO=unset' in note
    algo, proto, note = patterns.algo_proto_reported(
        {'NCCL_ALGO': 'Tree', 'NCCL_PROTO': 'Simple'})
    assert (algo, proto) == ('Tree', 'Simple')
    assert 'NCCL_ALGO=Tree' in note


def test_product_code_reads_nothing_under_tests():
    """What the product ships lives in the product: no module, check,
    builder, configuration or script points into tests/ (the shipped
    pattern is package data)."""
    import re
    bad = re.compile(r'''tests/(fixtures|replay)|['"]tests['"]|'''
                     r'''['"]fixtures['"]''')
    found = []
    for top in ('ccl_health', 'checks', 'builders', 'config', 'scripts'):
        for root, _, files in os.walk(os.path.join(REPO, top)):
            for name in files:
                if name.endswith(('.pyc', '.md')):
                    continue
                path = os.path.join(root, name)
                with open(path, errors='replace') as fp:
                    for i, line in enumerate(fp, 1):
                        if bad.search(line):
                            found.append(f'{os.path.relpath(path, REPO)}:'
                                         f'{i}: {line.strip()}')
    assert not found, '\n'.join(found)
