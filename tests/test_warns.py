"""ccl_health.evidence.warns on lines built from the upstream ``WARN(...)`` /
``NCCL_OFI_WARN(...)`` format strings.

``tests/fixtures/warns/upstream_formats.tsv`` holds every format string read
from the files named in its README (NVIDIA/nccl, ROCm/rccl, aws-ofi-nccl
1.21.1), the class it was given by reading it (``label.py``: a fatal class,
``advisory`` for a warning after which the library goes on, ``other`` for
the rest) and a line built from it (each ``%s``/``%d``/``%p`` replaced by a
plausible value).  Every line is tried bare, as users paste it, and with the
logger's ``host:pid:tid [dev] NCCL WARN`` prefix (aws-ofi-nccl's lines with
the ``NET/OFI`` its logger adds)."""
import csv
import os
import re

import pytest

from ccl_health.evidence import warns

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, 'fixtures', 'warns', 'upstream_formats.tsv')
FATAL_CLASSES = ('connection', 'memory-registration', 'cuda', 'internal',
                 'plugin-init')

with open(TABLE, newline='') as _fp:
    ROWS = list(csv.DictReader(_fp, delimiter='\t'))


def _rows(cls):
    return [pytest.param(r, id=f"{r['source'].split('@')[0]}:{r['path']}:"
                                f"{r['line']}")
            for r in ROWS if r['class'] == cls]


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
    assert len(_rows(cls)) >= 15, cls


@pytest.mark.parametrize('row', _rows('connection'))
def test_connection_and_progress_errors(row):
    for line in _lines(row):
        assert warns.read_text(line)[0].fatal == 'connection', line


@pytest.mark.parametrize('row', _rows('memory-registration'))
def test_memory_registration_failures(row):
    for line in _lines(row):
        assert warns.read_text(line)[0].fatal == 'memory-registration', line


@pytest.mark.parametrize('row', _rows('cuda'))
def test_cuda_and_hip_failures(row):
    for line in _lines(row):
        assert warns.read_text(line)[0].fatal == 'cuda', line


@pytest.mark.parametrize('row', _rows('internal'))
def test_internal_and_unhandled_errors(row):
    for line in _lines(row):
        assert warns.read_text(line)[0].fatal == 'internal', line


@pytest.mark.parametrize('row', _rows('plugin-init'))
def test_plugin_initialisation_failures(row):
    for line in _lines(row):
        assert warns.read_text(line)[0].fatal == 'plugin-init', line


@pytest.mark.parametrize('row', _rows('advisory'))
def test_advisories_do_not_fail_a_case(row):
    for line in _lines(row):
        [w] = warns.read_text(line)
        assert w.fatal is None, line
        assert 'not fatal' in w.describe()


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
    ('x:1:1 [0] NCCL WARN Call to ibv_open_device failed', 'internal'),
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
    # not an ibv verb: aws-ofi-nccl's freelist stays "other"
    ('x:1:1 [0] NCCL WARN NET/OFI Call to nccl_ofi_freelist_entry_alloc '
     'failed', None),
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
