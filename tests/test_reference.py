"""Reference files: loading, lookup, errors that name the file and key,
the shipped files, and calibration."""

import os

import pytest
import yaml

from ccl_health.judge import reference, reference_file
from ccl_health.db.calibrate import entry_from_sweeps
from ccl_health.evidence.nccltests_json import parse_json
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
    ref = reference_file.upsert(str(path), 'demo', 'gpu', e)
    assert ref.lookup('gpu', 'intra', 'all_reduce', 1, 2).busbw[8 << 30] \
        == pytest.approx(346.52)
    # replacing keeps one entry; another transport is added beside it
    reference_file.upsert(str(path), 'demo', 'gpu', e)
    e2 = entry_from_sweeps([sweep], transport='net-socket',
                           collective='all_reduce', nodes=1, gpus_per_node=2,
                           tolerance=0.3, source='t', min_size='1G')
    ref = reference_file.upsert(str(path), 'demo', 'gpu', e2)
    assert len(ref.partitions['gpu'].entries) == 2


def test_calibrate_refuses_to_extend_a_broken_file(tmp_path):
    path = tmp_path / 'demo.yaml'
    path.write_text('system: demo\npartitions: {gpu: {entries: [{}]}}\n')
    sweep = parse_json(read(CAPTURE, 'intra', 'result.json'))
    e = entry_from_sweeps([sweep], transport='intra', collective='all_reduce',
                          nodes=1, gpus_per_node=2, tolerance=0.1, source='t')
    with pytest.raises(reference.ReferenceError, match='missing key'):
        reference_file.upsert(str(path), 'demo', 'gpu', e)
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
    reference_file.upsert(str(path), 'demo', 'gpu', e)
    again = reference.load(str(path)).lookup('gpu', 'intra', 'all_reduce',
                                             1, 2)
    assert again.size_tolerance == {1 << 20: 0.25}
    doc['partitions']['gpu']['entries'][0]['busbw']['1MiB'] = [70, 2]
    with pytest.raises(reference.ReferenceError,
                       match=r'busbw.1MiB: \[70, 2\] is not a busbw .* or '
                       r'\[busbw, its own tolerance in \[0, 1\)\]'):
        reference.parse(yaml.safe_dump(doc), 'demo.yaml')


# -- issue 11: schema, one size named twice, nan / inf, explained misses

@pytest.mark.parametrize('busbw,message', [
    ('{2GiB: 3, 2048MiB: 4}', r"^demo.yaml: partitions.gpu.entries\[0\]."
     r"busbw: 2GiB and 2048MiB name one size \(2GiB\)"),
    ('{1M: 3, 1MiB: 4}', r'busbw: 1M and 1MiB name one size'),
    ('{1048576: 3, 1MiB: 4}', r'busbw: 1048576 and 1MiB name one size'),
    ('{1MiB: 3, 1MiB: 4}', r"not valid YAML: key '1MiB' given twice"),
    ('{1MiB: .inf}', r'entries\[0\].busbw.1MiB: inf is not a finite'),
    ('{1MiB: .nan}', r'entries\[0\].busbw.1MiB: nan is not a finite'),
    ('{1MiB: [3, .nan]}', r'busbw.1MiB\[1\]: nan is not a finite'),
    ('{1MiB: -.inf}', r'busbw.1MiB: -inf is not a finite'),
    ('{1MiB: 0}', r'busbw.1MiB: 0 is not a busbw'),
    ('{1MiB: }', r'busbw.1MiB: None is not a busbw'),
    ('{1MiB: "3"}', r"busbw.1MiB: '3' is not a busbw"),
    ('{1MiB: [3]}', r'busbw.1MiB: \[3\] is not a busbw'),
    ('{1MiB: [3, 0.1, 2]}', r'busbw.1MiB: \[3, 0.1, 2\] is not a busbw'),
    ('{0: 3}', r'busbw.0: a message size must be positive'),
    ('{}', r'entries\[0\].busbw: \{\} should be non-empty'),
])
def test_bad_sizes_and_values_are_errors(busbw, message):
    text = GOOD.replace('{1MiB: 70, 1GiB: 330.5}', busbw)
    with pytest.raises(reference.ReferenceError, match=message):
        reference.parse(text, 'demo.yaml')


@pytest.mark.parametrize('edit,message', [
    (lambda e: e.update(tolerance=float('nan')),
     r'entries\[0\].tolerance: nan is not a finite number'),
    (lambda e: e.update(tolerance=float('inf')), r'tolerance: inf is not'),
    (lambda e: e.update(tolerance=-0.1), r'tolerance: -0.1 is not a fraction'),
    (lambda e: e.update(tolerance=1), r'tolerance: 1 is not a fraction'),
    (lambda e: e.update(tolerance='0.1'), r"tolerance: '0.1' is not a "
     r"fraction"),
    (lambda e: e.update(tolerance=True), r'tolerance: True is not a fraction'),
    (lambda e: e.update(nodes=0), r'entries\[0\].nodes: 0 is less than'),
    (lambda e: e.update(nodes=1.5), r'nodes: 1.5 is not of type'),
    (lambda e: e.update(nodes=True), r'nodes: True is not of type'),
    (lambda e: e.update(gpus_per_node='8'), r"gpus_per_node: '8' is not of"),
    (lambda e: e.update(source='  '), r"source: '  ' is not where the "
     r"values come from"),
    (lambda e: e.update(source=None), r'source: None is not where'),
    (lambda e: e.update(colective='x'), r"Additional properties .*"
     r"'colective' was unexpected"),
    (lambda e: e.update(algo=None), r'algo: None is not of type'),
])
def test_bad_entry_values_are_errors(edit, message):
    doc = yaml.safe_load(GOOD)
    edit(doc['partitions']['gpu']['entries'][0])
    with pytest.raises(reference.ReferenceError, match=message):
        reference.parse(yaml.safe_dump(doc), 'demo.yaml')


@pytest.mark.parametrize('text,message', [
    ('', r'^demo.yaml: top level: empty file$'),
    ('- a', r'top level: \[.a.\] is not of type .object.'),
    ('system: demo\npartitions:\n', r'partitions: None is not of type'),
    ('system: demo\npartitions: {gpu: {entries: }}',
     r'partitions.gpu.entries: None is not of type .array.'),
    ('system: demo\npartitions: {gpu: {gdr: {supported: "no", reason: x}}}',
     r"partitions.gpu.gdr.supported: 'no' is not of type 'boolean'"),
    ('system: demo\npartitions: {gpu: {gdr: {supported: false, reason: " "}}}',
     r"gdr.reason: ' ' is not why GDR is unsupported"),
    ('system: demo\npartitions: {gpu: {entry: []}}',
     r"partitions.gpu: Additional properties .*'entry' was unexpected"),
])
def test_bad_structure_is_an_error_naming_the_key(text, message):
    with pytest.raises(reference.ReferenceError, match=message):
        reference.parse(text, 'demo.yaml')


def test_duplicate_entry_names_both():
    doc = yaml.safe_load(GOOD)
    doc['partitions']['gpu']['entries'].append(
        dict(doc['partitions']['gpu']['entries'][0]))
    with pytest.raises(reference.ReferenceError,
                       match=r'entries\[1\]: duplicate entry for intra '
                             r'all_reduce 1x2 default \(entries\[0\]'):
        reference.parse(yaml.safe_dump(doc), 'demo.yaml')


def test_missing_reason_partition_typo():
    ref = reference.load_for_system(os.path.join(REPO, 'reference'),
                                    'frontier')
    why = ref.missing_reason('bacth', 'intra', 'all_reduce', 1, 8)
    assert why.startswith('no reference for frontier:bacth intra all_reduce '
                          '1 node x 8 GPUs in ')
    assert why.endswith("frontier.yaml: no partition 'bacth' (did you mean "
                        "'batch'?) (has: batch)")
    assert ref.lookup('bacth', 'intra', 'all_reduce', 1, 8) is None


@pytest.mark.parametrize('key,why,first', [
    (('intra', 'all_reduce', 1, 4), 'no intra all_reduce entry for 1 node '
     'x 4 GPUs', 'intra all_reduce 1x8 default'),
    (('intra', 'all_gather', 1, 8), 'no intra entry for all_gather',
     'intra all_reduce 1x8 default'),
    (('net-plugin', 'all_reduce', 4, 8), 'no net-plugin all_reduce entry '
     'for 4 nodes x 8 GPUs', 'net-plugin all_reduce 2x8 default'),
    (('net-plugin', 'all_reduce', 64, 8, 'NVLS'), 'no net-plugin all_reduce '
     '64x8 entry with algo NVLS', 'net-plugin all_reduce 64x8 default'),
])
def test_missing_reason_lists_the_nearest_entries(key, why, first):
    ref = reference.load_for_system(os.path.join(REPO, 'reference'),
                                    'frontier')
    assert ref.lookup('batch', *key) is None
    text = ref.missing_reason('batch', *key)
    assert 'frontier.yaml: ' + why + ' (has: ' + first in text
    assert text.count(' default') + text.count(' Tree') + \
        text.count(' Ring') >= len(ref.partitions['batch'].entries)
    assert '\n' not in text


def test_missing_reason_none_when_found_and_empty_partition():
    ref = reference.parse(GOOD, 'demo.yaml')
    assert ref.missing_reason('gpu', 'intra', 'all_reduce', 1, 2) is None
    ref = reference.parse('system: demo\npartitions: {gpu: {}}', 'd.yaml')
    assert ref.missing_reason('gpu', 'intra', 'all_reduce', 1, 2) == (
        'no reference for demo:gpu intra all_reduce 1 node x 2 GPUs in '
        "d.yaml: partition 'gpu' has no entries")


def test_upsert_keeps_comments_and_other_entries_byte_for_byte(tmp_path):
    path = tmp_path / 'local.yaml'
    shipped = read(REPO, 'reference', 'local.yaml')
    path.write_text(shipped)
    ref = reference.load(str(path))
    e = ref.lookup('gpu', 'net-socket', 'all_reduce', 1, 2)
    e.busbw[1 << 20] = 2.6
    reference_file.upsert(str(path), 'local', 'gpu', e)
    new = path.read_text()
    assert '        1MiB: 2.6\n' in new
    # everything before and after the entry is the same text, comments too
    at = shipped.index('    - transport: net-socket')
    head, tail = shipped[:at], shipped[shipped.index('    - transport: ',
                                                       at + 10):]
    assert new.startswith(head) and new.startswith('# ccl-health')
    assert new.endswith(tail) and len(new) > len(head) + len(tail)
    again = reference.load(str(path))
    assert again.lookup('gpu', 'net-socket', 'all_reduce', 1, 2).busbw[
        1 << 20] == 2.6
    assert len(again.partitions['gpu'].entries) == \
        len(ref.partitions['gpu'].entries)


def test_the_schema_check_remembered_keeps_every_key_type():
    """A document remembered as passed (sitedata/schemas.passed_digest) is
    named with the type of each key: a size given as 1048576 and as '1MiB'
    in one mapping is no error of the digest, and {1: x} is not {'1': x}."""
    from ccl_health.sitedata.schemas import passed_digest
    mixed = {'busbw': {1048576: 3, '1MiB': 4}}
    assert passed_digest('schema:x', mixed) == passed_digest('schema:x', mixed)
    assert passed_digest('schema:x', {1: 'a'}) != \
        passed_digest('schema:x', {'1': 'a'})
    assert passed_digest('schema:x', {'a': 1, 'b': 2}) == \
        passed_digest('schema:x', {'b': 2, 'a': 1})
