"""ccl_health.evidence.warns on lines built from the upstream ``WARN(...)`` /
``NCCL_OFI_WARN(...)`` format strings.

``tests/fixtures/warns/upstream_formats.tsv`` holds every format string read
from the files named in its README (NVIDIA/nccl, ROCm/rccl, aws-ofi-nccl
1.21.1), the class its words were given (``label.py``) and a line built
from it (each ``%s``/``%d``/``%p`` replaced by a plausible value).  Whether
each is fatal is the product's WARN table
(``ccl_health/evidence/warn_table.tsv``, read from what the upstream code
does right after the call: ``disposition.py`` and ``reviewed.tsv`` of the
same folder).  Every line is tried bare, as users paste it, and with the
logger's ``host:pid:tid [dev] NCCL WARN`` prefix (aws-ofi-nccl's lines with
the ``NET/OFI`` its logger adds)."""
import csv
import os
import re

import pytest

from ccl_health.evidence import warns, warntable

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, 'fixtures', 'warns', 'upstream_formats.tsv')
FATAL_CLASSES = ('connection', 'memory-registration', 'cuda', 'internal',
                 'plugin-init')

with open(TABLE, newline='') as _fp:
    ROWS = list(csv.DictReader(_fp, delimiter='\t'))

#: the product table's row of each string read: (source@version, path,
#: line) -> row
PRODUCT = {(f'{r.source}@{r.version}', r.path, str(r.line), r.format): r
           for r in warntable.rows()}


def _product(row):
    return PRODUCT[(row['source'], row['path'], row['line'], row['format'])]


def _rows(cls=None, disposition=None):
    return [pytest.param(r, id=f"{r['source'].split('@')[0]}:{r['path']}:"
                                f"{r['line']}")
            for r in ROWS if (cls is None or r['class'] == cls) and (
                disposition is None or
                _product(r).disposition == disposition)]


def _lines(row):
    """The row's line as a rank's log prints it and as a user pastes it."""
    text = row['sample']
    if row['source'].startswith('aws/aws-ofi-nccl'):
        text = 'NET/OFI ' + text
    return [f'ip-10-0-1-17:48213:48297 [3] NCCL WARN {text}',
            f'[3] NCCL WARN {text}', f'NCCL WARN {text}']


def test_the_table_is_the_upstream_strings():
    """Each fatal class and the advisories have strings from every source
    they come from, and each sample is its format with only the
    conversions filled in."""
    by = {}
    for r in ROWS:
        by.setdefault(r['class'], set()).add(r['source'].split('@')[0])
    for cls in FATAL_CLASSES:
        assert by[cls] & {'NVIDIA/nccl', 'ROCm/rccl', 'aws/aws-ofi-nccl'}, cls
    assert {'NVIDIA/nccl', 'ROCm/rccl', 'aws/aws-ofi-nccl'} <= by['advisory']
    assert len(ROWS) > 500
    for r in ROWS:
        fmt = r['format'].replace('\\"', '"').replace('\\n', ' ')
        fmt = fmt.replace('%%', '%')
        conv = r"%0\d+|%[-\w.]*?[sdiuxpm]|%lu|'%s'|\s+"
        parts = [p for p in re.split(conv, fmt)
                 if p and not p.startswith('RC:') and p.strip()]
        pos = 0
        for p in parts:
            if p in ("'", ':'):
                continue
            i = r['sample'].find(p, pos)
            assert i >= 0, (p, r['format'], r['sample'])
            pos = i + len(p)


@pytest.mark.parametrize('cls', FATAL_CLASSES)
def test_each_class_has_upstream_strings(cls):
    assert len([r for r in warntable.rows() if r.cls == cls]) >= 15, cls


def test_the_product_table_has_every_string_read():
    """Each string of the fixture is a row of the product table, with a
    disposition, the statement that decides it and, when fatal, a
    class."""
    for r in ROWS:
        p = _product(r)
        assert p.disposition in ('fatal', 'advisory', 'by-event'), p
        assert p.evidence, p
        assert (p.cls != '') == (p.disposition == 'fatal'), p
    sources = {r.source for r in warntable.rows()}
    versions = {(r.source, r.version) for r in warntable.rows()}
    assert sources == {'NVIDIA/nccl', 'ROCm/rccl', 'aws/aws-ofi-nccl'}
    assert {v for s, v in versions if s == 'NVIDIA/nccl'} == {
        'v2.4.7-1', 'v2.12.12-1', 'v2.18.6-1', '5067397c'}
    for src in sources:
        disp = {r.disposition for r in warntable.rows() if r.source == src}
        assert {'fatal', 'advisory'} <= disp, src


def _fatal_expected(row):
    """A fatal string keeps the class its words had; one whose words named
    none has the table's class."""
    return row['class'] if row['class'] in FATAL_CLASSES else \
        _product(row).cls


@pytest.mark.parametrize('row', _rows(disposition='fatal'))
def test_strings_after_which_the_code_fails_are_fatal(row):
    for line in _lines(row):
        [w] = warns.read_text(line)
        # the same text printed by two calls of one source may carry
        # another call's class
        same = {r.cls for r in warntable.rows() if r.disposition == 'fatal'
                and r.regex.fullmatch(w.text)}
        assert w.fatal == _fatal_expected(row) or w.fatal in same, (
            line, _product(row))
        assert w.origin and w.evidence, w


@pytest.mark.parametrize('row', _rows(disposition='advisory'))
def test_strings_after_which_the_code_goes_on_do_not_fail_a_case(row):
    for line in _lines(row):
        [w] = warns.read_text(line)
        assert w.fatal is None, (line, _product(row).evidence)
        assert 'not fatal' in w.describe()


@pytest.mark.parametrize('row', _rows(disposition='by-event'))
def test_an_async_event_the_table_does_not_know_keeps_its_words(row):
    """The sample's event (``mlx5_0``) is no ibv_event_type_str: the line
    is read by its words, as before (``Got async event``: fatal)."""
    want = row['class'] if row['class'] in FATAL_CLASSES else None
    for line in _lines(row):
        [w] = warns.read_text(line)
        assert w.fatal == want, line
        assert w.fatal == warns.fatal_class(w.text)


#: rdma-core libibverbs/enum_strs.c ibv_event_type_str, every event type
IBV_EVENTS = {
    'CQ error': 'connection',
    'local work queue catastrophic error': 'connection',
    'invalid request local work queue error': 'connection',
    'local access violation work queue error': 'connection',
    'communication established': None, 'send queue drained': None,
    'path migrated': None, 'path migration request error': None,
    'local catastrophic error': 'connection', 'port active': None,
    'port error': 'link-down', 'LID change': None, 'P_Key change': None,
    'SM change': None, 'SRQ catastrophic error': None,
    'SRQ limit reached': None, 'last WQE reached': None,
    'client reregistration': None, 'GID table change': None,
    'WQ fatal': None, 'Device link speed change': None,
}
#: the async-event forms: NCCL < 2.22 (no device), NCCL 2.22 and RCCL
#: (device:port), NCCL >= 2.23's non-fatal form (with the event number)
EVENT_FORMS = ('NET/IB : Got async event : {e}',
               'NET/IB : mlx5_4:1 Got async event : {e}',
               'NET/IB : mlx5_4:1 Got non-fatal async event: {e}(7)')


@pytest.mark.parametrize('event', sorted(IBV_EVENTS))
@pytest.mark.parametrize('form', EVENT_FORMS)
def test_ib_async_events_by_their_type(event, form):
    """The newest NCCL's split of the events applies to the older forms
    too: device fatal, CQ and QP errors are fatal, a port error is a link
    down, the rest advisory; case as users retype it too."""
    for e in (event, event.lower()):
        line = f'node7:8:9 [0] NCCL WARN {form.format(e=e)}'
        [w] = warns.read_text(line)
        assert w.fatal == IBV_EVENTS[event], line
        assert w.network and 'common.cc' in w.evidence, w


@pytest.mark.parametrize('form', EVENT_FORMS)
def test_a_port_error_that_port_active_follows_is_not_fatal(form):
    err = f'n:1:1 [0] NCCL WARN {form.format(e="port error")}'
    up = f'n:1:1 [0] NCCL WARN {form.format(e="port active")}'
    assert [w.fatal for w in warns.read_text(err)] == ['link-down']
    got = warns.read_text(f'{err}\n{up}\n')
    assert [w.fatal for w in got] == [None, None], got
    assert 'port active' in got[0].describe()
    # down again after it came back: down
    got = warns.read_text(f'{err}\n{up}\n{err}\n')
    assert got[0].fatal == 'link-down'
    # port active before the error does not bring it back
    assert warns.read_text(f'{up}\n{err}\n')[1].fatal == 'link-down'


def test_port_active_of_another_device_does_not_bring_a_link_back():
    text = ('n:1:1 [0] NCCL WARN NET/IB : mlx5_1:1 Got async event : port '
            'error\nn:1:1 [0] NCCL WARN NET/IB : mlx5_2:1 Got async event '
            ': port active\n')
    assert [w.fatal for w in warns.read_text(text)] == ['link-down', None]


def test_a_skipped_hca_is_advisory():
    for text in ('NET/IB : Unable to open device mlx5_4',
                 'NET/IB : Unable to query port_num 2',
                 'NET/IB : Unable to query device mlx5_4'):
        [w] = warns.read_text(f'h:1:1 [0] NCCL WARN {text}')
        assert w.fatal is None and 'continue;' in w.evidence, w


@pytest.mark.parametrize('fmt,line', [
    ('a %s b %d c', 'a x y b -3 c'),
    ('%.*s at %p', 'ab at 0x7f00aa'),
    ('flags 0x%016%lu) type %d', 'flags 0x0000000000000040) type 3'),
    ('size %zu key %016lx', 'size 4096 key 00000000000000ff'),
    ('RC: %zd, (%lu) %u%%', 'RC: -22, (7) 9%'),
    ('ID %%lu for %d', 'ID 17 for 3'),
    ('first\\nsecond %s', 'first'),
    ('Missing \\"iommu=pt\\"  from %s', 'Missing "iommu=pt" from x'),
])
def test_printf_formats_as_regexes(fmt, line):
    assert warntable.format_regex(fmt).fullmatch(line), (fmt, line)
    if not fmt.endswith('%s'):
        assert not warntable.format_regex(fmt).fullmatch(line + ' 0x')


def test_every_warn_is_read_and_named():
    """Whatever its class, a WARN line is read (so it reaches the reason);
    the RCCL logger's own ``RCCL WARN`` too."""
    for r in ROWS:
        for line in _lines(r) + [f'node1:9:9 [0] RCCL WARN {r["sample"]}']:
            [w] = warns.read_text(line)
            assert w.text.endswith(r['sample']), line
            assert w.text[:40] in w.describe()


@pytest.mark.parametrize('line,cls', [
    # the two real lines of issue 19, as their logs print them
    ('ip-172-31-9-4:1193:1262 [0] NCCL WARN [Service thread] Error '
     'encountered progressing operation=Connect, res=3, closing connection',
     'connection'),
    ('ip-172-31-9-4:1193:1262 [0] NCCL WARN NET/OFI Unable to register '
     'memory (type = 2) for device 0. RC: -22, Error: Invalid argument',
     'memory-registration'),
    # NCCL 2.18's CUDACHECK, pasted without its prefix
    ("NCCL WARN Cuda failure 'an illegal memory access was encountered'",
     'cuda'),
    # older RCCL's HIP check
    ("[1] NCCL WARN HIP failure 'hipErrorNoDevice'", 'cuda'),
    ('x:1:1 [0] NCCL WARN NET/Plugin : Failed to initialize NET plugin '
     'libnccl-net.so', 'plugin-init'),
    # advisories and plugin probing that NCCL goes on from
    ('x:1:1 [0] NCCL WARN NET/Plugin : No plugin found (libnccl-net.so), '
     'using internal implementation', None),
    ('x:1:1 [0] NCCL WARN NET/Plugin : dlerror=libnccl-net.so: cannot open '
     'shared object file: No such file or directory No plugin found '
     '(libnccl-net.so), using internal implementation', None),
    ('x:1:1 [0] NCCL WARN NET/Plugin : Plugin load returned 2 : '
     'libnccl-net.so: cannot open shared object file: No such file or '
     'directory : when loading libnccl-net.so', None),
    ('x:1:1 [0] NCCL WARN Failed to find ncclNetPlugin_v8 symbol.', None),
    ('x:1:1 [0] NCCL WARN Missing "iommu=pt" from kernel command line which '
     'can lead to system instablity or hang!', None),
    # an older RCCL's advice, from tests/fixtures/published
    ('x:1:1 [0] NCCL WARN Missing "amd_iommu=on" from kernel command line '
     'which can lead to system instablity or hang!', None),
    ('x:1:1 [0] NCCL WARN NET/IB : mlx5_2:1 Got non-fatal async event: '
     'port active(9)', None),
])
def test_real_lines(line, cls):
    [w] = warns.read_text(line)
    assert w.fatal == cls


@pytest.mark.parametrize('line,cls', [
    # src/misc/ibvwrap.cc "Call to %s failed" for every verb it wraps, as
    # NCCL 2.7 printed it (tests/fixtures/published, NVIDIA/nccl#380) and
    # with the later "with error %s" tail; the qp and reg_mr calls keep
    # their own classes
    ('spark01:2683:2826 [0] misc/ibvwrap.cc:268 NCCL WARN Call to '
     'ibv_create_cq failed', 'internal'),
    ('x:1:1 [0] misc/ibvwrap.cc:130 NCCL WARN Call to ibv_alloc_pd failed '
     'with error Cannot allocate memory', 'internal'),
    # issue 41: the two verbs whose caller (net_ib/init.cc) skips the HCA
    # and goes on: advisory, the WARN that follows names the HCA
    ('x:1:1 [0] NCCL WARN Call to ibv_open_device failed', None),
    ('x:1:1 [0] NCCL WARN Call to ibv_query_device failed with error '
     'Invalid argument errno 22', None),
    ('x:1:1 [0] NCCL WARN Call to ibv_query_device failed with error '
     'Invalid argument', None),
    ('x:1:1 [0] NCCL WARN Call to ibv_close_device failed', 'internal'),
    ('x:1:1 [0] NCCL WARN Call to ibv_create_qp failed', 'connection'),
    ('x:1:1 [0] NCCL WARN Call to ibv_reg_mr failed', 'memory-registration'),
    # src/misc/shmutils.cc: "Error while %s shared memory segment %s (size
    # %d)" (NCCL 2.12), "... (size %ld), error: %s (%d)" (2.19+)
    ('ubuntu:9621:9685 [0] misc/shmutils.cc:112 NCCL WARN Error while '
     'creating shared memory segment /dev/shm/nccl-zTYolS (size 5967872)',
     'internal'),
    ('x:1:1 [0] NCCL WARN Error while attaching to shared memory segment '
     '/dev/shm/nccl-AbCdEf (size 9637888), error: No such file or '
     'directory (2)', 'internal'),
    # not an ibv verb: aws-ofi-nccl's freelist allocation, after which
    # its code returns -ENOMEM (src/nccl_ofi_rdma.cpp)
    ('x:1:1 [0] NCCL WARN NET/OFI Call to nccl_ofi_freelist_entry_alloc '
     'failed', 'internal'),
])
def test_failed_verbs_and_shared_memory_segments(line, cls):
    [w] = warns.read_text(line)
    assert w.fatal == cls


def test_a_site_may_declare_an_upstream_fatal_string_benign():
    line = 'x:1:1 [0] NCCL WARN NET/IB : mlx5_0:1 async fatal event: ' \
           'local catastrophic error'
    assert warns.read_text(line)[0].fatal == 'connection'
    benign = warns.benign_patterns([{'pattern': r'mlx5_0:1 async fatal',
                                     'why': 'port 1 of mlx5_0 is unused',
                                     'overrides': 'connection'}])
    [w] = warns.read_text(line, benign=benign)
    assert w.fatal is None and w.benign == 'port 1 of mlx5_0 is unused'
