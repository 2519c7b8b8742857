"""Reference files: loading, lookup, errors that name the file and key,
the shipped files, and calibration."""

import os

import pytest
import yaml

from ccl_health import reference
from ccl_health.calibrate import entry_from_sweeps
from ccl_health.nccltests import parse_json
from conftest import CAPTURE, REPO, read

GOOD = """
system: demo
partitions:
  gpu:
    gdr: {supported: false, reason: no FI_HMEM}
    entries:
      - transport: intra
        collective: all_reduce
        nodes: 1
        gpus_per_node: 2
        tolerance: 0.1
        source: measured
        busbw: {1MiB: 70, 1GiB: 330.5}
"""


def test_load_and_lookup(tmp_path):
    ref = reference.parse(GOOD, 'demo.yaml')
    e = ref.lookup('gpu', 'intra', 'all_reduce', 1, 2)
    assert e.busbw == {1 << 20: 70.0, 1 << 30: 330.5}
    assert ref.lookup('gpu', 'intra', 'all_reduce', 1, 4) is None
    assert ref.lookup('gpu', 'intra', 'all_reduce', 1, 2, 'Ring') is None
    assert ref.gdr_unsupported('gpu') == 'no FI_HMEM'
    assert ref.gdr_unsupported('other') is None
    assert e.to_rfm('demo:gpu') == {'demo:gpu': {
        'busbw_1MiB': (70.0, -0.1, None, 'GB/s'),
        'busbw_1GiB': (330.5, -0.1, None, 'GB/s')}}


@pytest.mark.parametrize('edit,message', [
    (lambda d: d['partitions']['gpu']['entries'][0].pop('source'),
     r"demo.yaml: partitions.gpu.entries\[0\]: missing key 'source'"),
    (lambda d: d['partitions']['gpu']['entries'][0].update(transport='nvl'),
     r"entries\[0\].transport: 'nvl' is not one of \['intra'"),
    (lambda d: d['partitions']['gpu']['entries'][0].update(tolerance=1.5),
     r'entries\[0\].tolerance: 1.5 is not a fraction in \[0, 1\)'),
    (lambda d: d['partitions']['gpu']['entries'][0]['busbw'].update(
        {'1 GB-ish': 3}), r"busbw.1 GB-ish: not a message size"),
    (lambda d: d['partitions']['gpu']['entries'][0]['busbw'].update(
        {'2GiB': -1}), r'busbw.2GiB: -1 is not a busbw in GB/s \(a positive number\)'),
    (lambda d: d['partitions']['gpu']['entries'].append(
        dict(d['partitions']['gpu']['entries'][0])), 'duplicate entry'),
    (lambda d: d['partitions']['gpu']['gdr'].pop('reason'),
     "partitions.gpu.gdr: missing key 'reason'"),
    (lambda d: d.pop('partitions'), "top level: missing key 'partitions'"),
])
def test_malformed_reference_names_file_and_key(edit, message):
    doc = yaml.safe_load(GOOD)
    edit(doc)
    with pytest.raises(reference.ReferenceError, match=message):
        reference.parse(yaml.safe_dump(doc), 'demo.yaml')


def test_not_yaml_and_missing_file(tmp_path):
    with pytest.raises(reference.ReferenceError, match='x.yaml: not valid '
                       'YAML'):
        reference.parse('a: [1,', 'x.yaml')
    with pytest.raises(reference.ReferenceError,
                       match="no reference file for system 'mars'.*local"):
        reference.load_for_system(os.path.join(REPO, 'reference'), 'mars')


def test_wrong_system_in_file(tmp_path):
    (tmp_path / 'a.yaml').write_text(GOOD)
    with pytest.raises(reference.ReferenceError, match="system is 'demo'"):
        reference.load_for_system(str(tmp_path), 'a')


@pytest.mark.parametrize('name', sorted(
    f[:-5] for f in os.listdir(os.path.join(REPO, 'reference'))
    if f.endswith('.yaml')))
def test_shipped_references_load(name):
    ref = reference.load_for_system(os.path.join(REPO, 'reference'), name)
    entries = [e for p in ref.partitions.values() for e in p.entries]
    assert entries and all(e.source for e in entries)


def test_local_reference_declares_gdr_unsupported():
    ref = reference.load_for_system(os.path.join(REPO, 'reference'), 'local')
    assert 'GDR not supported' in ref.gdr_unsupported('gpu')
    intra = ref.lookup('gpu', 'intra', 'all_reduce', 1, 2)
    assert intra.busbw[1 << 30] > 300          # H200 NVLink, ~330 GB/s


def test_calibrate_round_trip(tmp_path):
    sweep = parse_json(read(CAPTURE, 'intra', 'result.json'))
    e = entry_from_sweeps([sweep, sweep], transport='intra',
                          collective='all_reduce', nodes=1, gpus_per_node=2,
                          tolerance=0.1, source='test', min_size='64M')
    assert min(e.busbw) == 64 << 20 and max(e.busbw) == 8 << 30
    path = tmp_path / 'demo.yaml'
    ref = reference.upsert(str(path), 'demo', 'gpu', e)
    assert ref.lookup('gpu', 'intra', 'all_reduce', 1, 2).busbw[8 << 30] \
        == pytest.approx(346.52)
    # replacing keeps one entry; another transport is added beside it
    reference.upsert(str(path), 'demo', 'gpu', e)
    e2 = entry_from_sweeps([sweep], transport='net-socket',
                           collective='all_reduce', nodes=1, gpus_per_node=2,
                           tolerance=0.3, source='t', min_size='1G')
    ref = reference.upsert(str(path), 'demo', 'gpu', e2)
    assert len(ref.partitions['gpu'].entries) == 2


def test_calibrate_refuses_to_extend_a_broken_file(tmp_path):
    path = tmp_path / 'demo.yaml'
    path.write_text('system: demo\npartitions: {gpu: {entries: [{}]}}\n')
    sweep = parse_json(read(CAPTURE, 'intra', 'result.json'))
    e = entry_from_sweeps([sweep], transport='intra', collective='all_reduce',
                          nodes=1, gpus_per_node=2, tolerance=0.1, source='t')
    with pytest.raises(reference.ReferenceError, match='missing key'):
        reference.upsert(str(path), 'demo', 'gpu', e)
    assert 'entries: [{}]' in path.read_text()     # left as it was


def test_per_size_tolerance(tmp_path):
    doc = yaml.safe_load(GOOD)
    doc['partitions']['gpu']['entries'][0]['busbw']['1MiB'] = [70, 0.25]
    ref = reference.parse(yaml.safe_dump(doc), 'demo.yaml')
    e = ref.lookup('gpu', 'intra', 'all_reduce', 1, 2)
    assert e.tolerance_at(1 << 20) == 0.25 and e.tolerance_at(1 << 30) == 0.1
    assert e.to_rfm('s:p')['s:p']['busbw_1MiB'] == (70.0, -0.25, None,
                                                    'GB/s')
    # written back the same way
    path = tmp_path / 'demo.yaml'
    reference.upsert(str(path), 'demo', 'gpu', e)
    again = reference.load(str(path)).lookup('gpu', 'intra', 'all_reduce',
                                             1, 2)
    assert again.size_tolerance == {1 << 20: 0.25}
    doc['partitions']['gpu']['entries'][0]['busbw']['1MiB'] = [70, 2]
    with pytest.raises(reference.ReferenceError,
                       match=r'busbw.1MiB: \[70, 2\] is not a busbw .* or '
                       r'\[busbw, its own tolerance in \[0, 1\)\]'):
        reference.parse(yaml.safe_dump(doc), 'demo.yaml')
