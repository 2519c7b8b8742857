"""The GPU links' copy matrix: nvbandwidth's text output built from its own
format strings, the ``peer_copy`` reference and the site keys.  The
captured ccl-health-links output (tests/fixtures/device/links/) and the
hook's decisions are tested in tests/test_health_links.py."""

import math
import os

import pytest

from ccl_health.evidence import copymatrix as links
from ccl_health.judge import reference
from ccl_health.judge.linkjudge import judge_links
from ccl_health.judge.verdicts import Verdict
from conftest import REPO
from helpers.nvbandwidth import READ, READ_DESC, WRITE, WRITE_DESC, nvb_output




def test_nvbandwidth_write_matrix_flows_row_to_column():
    text = nvb_output(WRITE, WRITE_DESC, [[None, 386.12, 72.1],
                                          [385.5, None, 386.0],
                                          [386.3, 386.4, None]])
    res = links.parse_nvbandwidth(text, WRITE, nbytes=256 << 20)
    assert res.complete and not res.errors and res.gpu_count == 3
    got = {(ln.src, ln.dst): ln.gbps for ln in res.links}
    assert got[('0', '1')] == 386.12 and got[('0', '2')] == 72.1
    assert got[('1', '0')] == 385.5 and len(got) == 6
    ln = [x for x in res.links if (x.src, x.dst) == ('0', '2')][0]
    assert ln.seconds == pytest.approx((256 << 20) / 72.1e9)
    assert res.gpus[1] == 'NVIDIA H200 (00000000:1a:00)'


def test_nvbandwidth_read_matrix_flows_column_to_row():
    text = nvb_output(READ, READ_DESC, [[None, 10.0], [20.0, None]])
    res = links.parse_nvbandwidth(text, READ)
    got = {(ln.src, ln.dst): ln.gbps for ln in res.links}
    # row 0 reads from column 1: the data flows 1 -> 0
    assert got == {('1', '0'): 10.0, ('0', '1'): 20.0}
    assert math.isnan(res.links[0].seconds)      # no size given


def test_nvbandwidth_na_is_a_pair_without_peer_access():
    text = nvb_output(WRITE, WRITE_DESC, [[None, 386.0, None],
                                          [386.0, None, 386.0],
                                          [None, 386.0, None]])
    res = links.parse_nvbandwidth(text, WRITE, nbytes=256 << 20)
    assert sorted(res.no_peer) == [(0, 2), (2, 0)]
    assert ('0', '2') not in res.expected_directions()
    ref = reference.PeerCopy(256 << 20, 0.2, 'test', {'gpu_to_gpu': 386.0})
    v, why, _ = judge_links(res, 0, ref, expect_gpus=3)
    assert v is Verdict.FALLBACK
    assert why == ('GPU 0->2 cannot peer (no peer access: its copies would '
                   'go through the host); GPU 2->0 cannot peer (no peer '
                   'access: its copies would go through the host)')


def test_nvbandwidth_other_testcases_and_a_missing_sum():
    text = nvb_output('host_to_device_memcpy_ce',
                      'memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)',
                      [[26.0, 25.9]])
    res = links.parse_nvbandwidth(text, WRITE)
    assert res.links == [] and not res.complete
    cut = nvb_output(WRITE, WRITE_DESC, [[None, 1.0], [1.0, None]])
    cut = cut[:cut.index('SUM')]
    res = links.parse_nvbandwidth(cut, WRITE)
    assert len(res.links) == 2 and not res.complete
    v, why, _ = judge_links(res, 0)
    assert v is Verdict.INCOMPLETE


def test_nvbandwidth_error_status():
    # Output::setTestcaseStatusAndAddIfNeeded: "<status>: <message>"
    text = nvb_output(WRITE, WRITE_DESC, [[None, 1.0], [1.0, None]])
    text = text.replace(WRITE_DESC + '\n', WRITE_DESC + '\n' + (
        'ERROR: CUDA_ERROR_ILLEGAL_ADDRESS\n'), 1)
    res = links.parse_nvbandwidth(text.split('  ' + ' ' * 9 + '0')[0],
                                  WRITE)
    assert res.errors and 'CUDA_ERROR_ILLEGAL_ADDRESS' in res.errors[0]
    v, _, _ = judge_links(res, 0)
    assert v is Verdict.CRASH


def test_nvbandwidth_options():
    assert links.nvbandwidth_options(256 << 20) == ['-t', WRITE, '-b', '256']


# -- the reference and site keys ----------------------------------------------

REF = '''system: x
partitions:
  gpu:
    peer_copy: {size: %s, tolerance: 0.2, source: s, gbps: %s%s}
'''


@pytest.mark.parametrize('size, gbps, pairs, says', [
    ('256Mx', '{gpu_to_gpu: 1}', '', 'partitions.gpu.peer_copy.size'),
    ('256MiB', '{gpu_to_gpux: 1}', '', "'gpu_to_gpux' was unexpected"),
    ('256MiB', '{}', '', 'partitions.gpu.peer_copy.gbps'),
    ('256MiB', '{in_gpu: -1}', '', 'partitions.gpu.peer_copy.gbps.in_gpu'),
    ('256MiB', '{gpu_to_gpu: 1}', ", pairs: {'1->1': 2}",
     'partitions.gpu.peer_copy.pairs.1->1: a pair of two different GPUs'),
    ('256MiB', '{gpu_to_gpu: 1}', ", pairs: {'1-2': 2}",
     'partitions.gpu.peer_copy.pairs'),
])
def test_bad_peer_copy_names_the_key(size, gbps, pairs, says):
    with pytest.raises(reference.ReferenceError) as err:
        reference.parse(REF % (size, gbps, pairs), 'r.yaml')
    assert str(err.value).startswith('r.yaml: ') and says in str(err.value)


def test_peer_copy_reads():
    pc = reference.parse(REF % ('256MiB', '{gpu_to_gpu: 386, in_gpu: 1492}',
                                ", pairs: {'0->4': 52}"), 'r').peer_copy('gpu')
    assert (pc.size, pc.tolerance, pc.pairs) == (256 << 20, 0.2,
                                                 {(0, 4): 52.0})
    assert pc.expected(links.Link('0', '4', 1, 1.0, 1.0)) == 52.0
    assert pc.expected(links.Link('4', '0', 1, 1.0, 1.0)) == 386.0
    assert pc.expected(links.Link('0', '0', 1, 1.0, 1.0)) == 1492.0
    assert pc.expected(links.Link('host', '0', 1, 1.0, 1.0)) is None


def test_site_links_keys(tmp_path):
    from ccl_health import CclHealthError
    from ccl_health.sitedata import site
    text = open(os.path.join(REPO, 'site', 'local.yaml')).read()
    good = text.replace('  partition: gpu\n', '  partition: gpu\n  links: '
                        '/opt/x/ccl-health-links\n  nvbandwidth: /opt/nvb\n')
    (tmp_path / 'local.yaml').write_text(good)
    h = site.load(str(tmp_path), 'local').health
    assert (h.links, h.nvbandwidth) == ('/opt/x/ccl-health-links', '/opt/nvb')
    (tmp_path / 'local.yaml').write_text(text.replace(
        '  partition: gpu\n', '  partition: gpu\n  links: 5\n'))
    with pytest.raises(CclHealthError) as err:
        site.load(str(tmp_path), 'local')
    assert 'health.links' in str(err.value)
