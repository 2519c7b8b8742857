"""Message sizes as nccl-tests reads them (``-b 8 -e 8G``): binary
prefixes, whole bytes only, and printed back without loss.  Kept by hand
rather than with a units library: humanfriendly reads ``1G`` / ``1GB`` as
10**9 and ``1.5K`` as a size, pint is a units system; both would need the
same wrapping to give nccl-tests' meaning and refuse the rest."""

import pytest
from hypothesis import given, strategies as st

from ccl_health import CclHealthError
from ccl_health.units import format_size, parse_size, size_sweep


@pytest.mark.parametrize('text, n', [
    ('8', 8), ('8B', 8), ('64K', 64 << 10), ('64k', 64 << 10),
    ('1M', 1 << 20), ('1MB', 1 << 20), ('1MiB', 1 << 20), ('8G', 8 << 30),
    ('8GiB', 8 << 30), (' 2 T ', 2 << 40), (4096, 4096)])
def test_parse_binary_as_nccl_tests(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize('text', ['1.5K', '-1K', '1X', 'G', '', '1 GiBs',
                                  True, '0x10'])
def test_refused_with_an_example(text):
    with pytest.raises(CclHealthError, match='not a message size'):
        parse_size(text)


@given(st.integers(min_value=1, max_value=1 << 50))
def test_format_parses_back_to_the_same_bytes(n):
    assert parse_size(format_size(n)) == n


def test_format_keeps_the_smaller_unit_when_not_whole():
    assert format_size(1 << 30) == '1GiB'
    assert format_size(3 << 19) == '1536KiB'
    assert format_size(1000) == '1000B'


def test_sweep():
    assert size_sweep('8', '64') == [8, 16, 32, 64]
    with pytest.raises(CclHealthError):
        size_sweep('1G', '1M')
