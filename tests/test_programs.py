"""The drivers of the collective test programs (ccl_health.evidence.programs): the
command line each one gets is one its pinned source accepts (read from the
tarballs of ../shared/mirror), every collective the suite sweeps has its
binary in the program's Makefile, and a run's outputs are read as the
program writes them (captures of 2x H200).  Also the one collective
registry the lists of the suite come from, and the choice between the
site's binaries and a build (ccl_health.rfm.binaries)."""

import os
import re
import shlex
import tarfile

import pytest
import yaml

from ccl_health import CclHealthError, buildcache
from ccl_health.evidence import programs
from ccl_health.evidence import collectives as C
from ccl_health.evidence import nccltests
from conftest import CAPTURE, REPO
from helpers.builds import MIRROR, SOURCES



def source_file(program, path):
    """A file of the program's pinned source tarball in the mirror."""
    src = SOURCES[program.name]
    tarball = os.path.join(MIRROR, src.tarball)
    if not os.path.exists(tarball):
        pytest.skip(f'no {src.tarball} in ../shared/mirror')
    with tarfile.open(tarball) as tf:
        return tf.extractfile(f'{src.topdir}/{path}').read().decode()


def short_options(program):
    """The options the program's getopt_long accepts: {letter: takes an
    argument}."""
    text = source_file(program, 'src/common.cu')
    spec = re.search(r'getopt_long\(argc, argv, "([^"]+)"', text).group(1)
    return {m.group(1): bool(m.group(2))
            for m in re.finditer(r'([A-Za-z])(:?)', spec)}


@pytest.mark.parametrize('program', programs.PROGRAMS.values(),
                         ids=lambda p: p.name)
def test_every_option_is_one_the_pinned_source_accepts(program):
    """An option a program does not know makes it print its usage and exit
    0 with no results: every one passed must be in its getopt string, with
    its argument."""
    accepted = short_options(program)
    opts = program.options('8', '8G', 2, 20, 5, 120, 'out.json')
    i = 0
    while i < len(opts):
        flag = opts[i]
        assert flag.startswith('-') and len(flag) == 2, opts
        assert flag[1] in accepted, (program.name, flag)
        assert accepted[flag[1]], (program.name, flag)   # takes a value
        assert not opts[i + 1].startswith('-'), opts
        i += 2


def test_command_lines():
    assert programs.NCCL_TESTS.options('8', '8G', 2, 20, 5, 120) == shlex.split(
        '-g 1 -b 8 -e 8589934592 -f 2 -n 20 -w 5 -T 120 -J result.json')
    # rccl-tests ae3e635: the same sweep options, no JSON report
    assert programs.RCCL_TESTS.options('1M', '1G', 4, 10, 2, 30) == \
        shlex.split('-g 1 -b 1048576 -e 1073741824 -f 4 -n 10 -w 2 -T 30')
    assert 'J' not in short_options(programs.RCCL_TESTS)
    assert 'x' not in short_options(programs.RCCL_TESTS)
    # the health hook's probes: one size, no JSON
    assert programs.NCCL_TESTS.options(1 << 30, 1 << 30, 2, 5, 2, 19,
                                       json_file=None)[-2:] == ['-T', '19']
    assert programs.NCCL_TESTS.output_files() == ['result.json']
    assert programs.RCCL_TESTS.output_files() == []


@pytest.mark.parametrize('program', programs.PROGRAMS.values(),
                         ids=lambda p: p.name)
def test_every_swept_collective_has_its_binary(program):
    make = source_file(program, 'src/Makefile')
    listed = re.search(r'^BIN_FILES_LIST\s*:=\s*(.*)$', make,
                       re.M).group(1).split()
    for coll in C.SWEPT:
        assert coll in listed, (program.name, coll)
        assert program.binary(coll) == f'{coll}_perf'
    assert program.executable('/p', 'AllReduce') == '/p/bin/all_reduce_perf'
    assert program.products == ['bin/all_reduce_perf']
    with pytest.raises(CclHealthError, match='no binary for gather'):
        program.binary('gather')


def test_program_per_vendor():
    assert programs.for_vendor('amd') is programs.RCCL_TESTS
    assert programs.for_vendor('AMD') is programs.RCCL_TESTS
    assert programs.for_vendor('nvidia') is programs.NCCL_TESTS
    assert programs.for_vendor('') is programs.NCCL_TESTS
    assert programs.for_vendor(None) is programs.NCCL_TESTS
    for p in programs.PROGRAMS.values():
        assert p.name in SOURCES          # what the build fixture builds


def test_site_prefix():
    build = {'libfabric': {'prefix': '/opt/lf'},
             'rccl_tests': {'prefix': '/opt/rccl-tests'}}
    assert programs.site_prefix(build, programs.RCCL_TESTS) == \
        '/opt/rccl-tests'
    assert programs.site_prefix(build, programs.NCCL_TESTS) is None
    assert programs.site_prefix(build) == '/opt/rccl-tests'
    assert programs.site_prefix({'nccl_tests': {'prefix': None}}) is None
    assert programs.site_prefix({}) is None and programs.site_prefix(None) \
        is None


def test_reading_a_run(tmp_path):
    """nccl-tests: the -J report completed by stdout; rccl-tests: its text
    table (it writes no JSON: a file there is not its own)."""
    run = os.path.join(CAPTURE, 'intra')
    stdout = os.path.join(run, 'stdout.txt')
    js = os.path.join(run, 'result.json')
    res = programs.NCCL_TESTS.read(stdout, js)
    assert res.source == 'json' and res.complete
    assert res.rows == nccltests.parse(open(stdout).read(),
                                       open(js).read()).rows
    text = programs.RCCL_TESTS.read(stdout, js)
    assert text.source == 'text' and text.complete
    assert [r.size for r in text.rows] == [r.size for r in res.rows]
    # no JSON written (cut before it): the text is read
    missing = programs.NCCL_TESTS.read(stdout, str(tmp_path / 'none.json'))
    assert missing.source == 'text' and missing.complete


def test_one_collective_registry():
    assert C.SWEPT == ('all_reduce', 'all_gather', 'reduce_scatter',
                       'broadcast', 'reduce', 'alltoall', 'sendrecv')
    assert C.TORCH_DEFAULT == ('all_reduce', 'all_gather', 'reduce_scatter',
                               'broadcast')
    assert set(C.SWEPT) < set(C.COLLECTIVES)
    # the sizes nccl-tests prints exactly: the buffer is not split
    assert [c for c in C.SWEPT if programs.TestProgram.exact_sizes(c)] == \
        ['all_reduce', 'broadcast', 'reduce']
    from ccl_health import torch_bench
    assert torch_bench.TORCH_COLLECTIVES == C.SWEPT
    assert torch_bench.DEFAULT_COLLECTIVES == C.TORCH_DEFAULT


def test_site_or_build_variant(tmp_path):
    """A site file naming its nccl-tests / rccl-tests prefix: the checks
    run the site's binaries; none, or no readable site file: they build."""
    pytest.importorskip('reframe')
    from ccl_health.rfm import binaries, sweep
    site = yaml.safe_load(open(os.path.join(REPO, 'site', 'local.yaml')))
    (tmp_path / 'local.yaml').write_text(yaml.safe_dump(site))
    assert not binaries.site_installs_tests('local', str(tmp_path))
    assert binaries.variant('local', str(tmp_path)) is \
        binaries.BuiltBinariesMixin
    assert sweep.sweep_base('local', str(tmp_path)) is \
        sweep.BuildAndRunSweepBase
    site['build']['rccl_tests'] = {'prefix': '/opt/rccl-tests'}
    (tmp_path / 'local.yaml').write_text(yaml.safe_dump(site))
    assert binaries.site_installs_tests('local', str(tmp_path))
    assert binaries.variant('local', str(tmp_path)) is \
        binaries.SiteBinariesMixin
    assert sweep.sweep_base('local', str(tmp_path)) is \
        sweep.CollectiveSweepBase
    assert not binaries.site_installs_tests('nowhere', str(tmp_path))
    # only the build variant has the build fixture
    assert 'tests' in sweep.BuildAndRunSweepBase.fixture_space
    assert 'tests' not in sweep.CollectiveSweepBase.fixture_space
    # the shipped sites build theirs
    for system in ('local', 'perlmutter', 'frontier'):
        assert not binaries.site_installs_tests(
            system, os.path.join(REPO, 'site'))


def test_health_hook_finds_the_program_of_its_gpus(tmp_path, monkeypatch):
    """The hook runs the program of the node's GPU vendor: the site's
    installation of it, else the newest complete build of it in the
    cache."""
    from types import SimpleNamespace
    from ccl_health.hook import probes
    from ccl_health.hook import settings
    site = SimpleNamespace(build={'rccl_tests': {'prefix': '/opt/rt'}})
    assert probes.find_tests_prefix(None, site, programs.RCCL_TESTS) == \
        '/opt/rt'
    assert probes.find_tests_prefix('/given', site, programs.RCCL_TESTS) \
        == '/given'
    monkeypatch.setenv('CCL_HEALTH_CACHE', str(tmp_path))
    built = tmp_path / 'nccl-tests-2.19.6-abc'
    built.mkdir()
    (built / buildcache.STAMP).write_text('')
    (tmp_path / 'rccl-tests-ae3e635-def').mkdir()      # not complete
    assert probes.find_tests_prefix(None, site, programs.NCCL_TESTS) == \
        str(built)
    with pytest.raises(settings.CouldNotCheck, match='no rccl-tests build'):
        probes.find_tests_prefix(None, None, programs.RCCL_TESTS)
