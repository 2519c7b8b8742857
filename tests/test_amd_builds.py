"""The AMD recipes compiled for real, on a machine without ROCm or a GPU.

Debian 12's HIP 5.2.3 (``libamdhip64-dev``, ``hipcc``: clang 15), its
libfabric 1.17 (``libfabric-dev``) and cmake stand in for a site's ROCm
and Cray libfabric; they are installed here when missing (root and
apt-get needed, else the tests skip saying why).  RCCL's header is made
from RCCL's pinned source and version file by
:class:`builders.rccl_header.RcclHeaderBuild`'s steps; the aws-ofi-rccl
recipe of :class:`builders.net_plugin.NetPluginBuild` is built against it
through the real build script (:func:`ccl_health.buildcache.build_script`),
under paths with spaces; rccl-tests' sources are compiled with hipcc
against it (there is no ``librccl`` to link: see that test)."""

import os
import re
import shutil
import subprocess
import tarfile
import time
import types

import pytest

from ccl_health import buildcache
from conftest import REPO
from helpers import builds
from helpers.builds import MIRROR, SOURCES

# the system tier: builds with Debian's ROCm (installed when missing)
pytestmark = pytest.mark.system

pytest.importorskip('reframe')

need_mirror = pytest.mark.skipif(
    not all(os.path.exists(os.path.join(MIRROR, SOURCES[p].tarball))
            for p in ('rccl', 'aws-ofi-rccl', 'rccl-tests')),
    reason='no ../shared/mirror with RCCL, aws-ofi-rccl and rccl-tests '
           'beside the checkout')

#: Debian's packages and the files the tests need from them
PACKAGES = ('libamdhip64-dev', 'hipcc', 'libfabric-dev', 'cmake')
NEEDED = ('/usr/bin/hipcc', '/usr/include/hip/hip_runtime.h',
          '/usr/include/rdma/fabric.h', '/usr/bin/cmake')
#: the architecture of Frontier's and LUMI's MI250X GCDs
ARCH = 'gfx90a'


def _missing():
    return [p for p in NEEDED if not os.path.exists(p)] + \
        [t for t in ('nm', 'make', 'gcc') if not shutil.which(t)]


@pytest.fixture(scope='session')
def hip_toolchain():
    """Install Debian's HIP, hipcc, libfabric and cmake when missing;
    skip (saying why) where that cannot be done."""
    missing = _missing()
    if not missing:
        return 'already installed'
    if os.geteuid() != 0 or not shutil.which('apt-get'):
        pytest.skip(f'{", ".join(missing)} missing, and installing '
                    f'{" ".join(PACKAGES)} needs root and apt-get')
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    cmd = ['apt-get', 'install', '-y', '-q', '--no-install-recommends'] + \
        list(PACKAGES)
    start = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0:          # a stale package index: refresh once
        subprocess.run(['apt-get', 'update', '-q'], env=env,
                       capture_output=True, timeout=600)
        p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=900)
    if _missing():
        tail = ' | '.join((p.stderr or p.stdout).strip().splitlines()[-3:])
        pytest.skip(f'apt-get install {" ".join(PACKAGES)} failed '
                    f'(rc={p.returncode}, still missing {_missing()}): '
                    f'{tail}')
    return f'installed in {time.monotonic() - start:.0f} s'


def run_script(script, cwd, tmp_path):
    return builds.run_script(script, cwd, tmp_path, timeout=900)


def version_mk():
    """RCCL's makefiles/version.mk, read from the pinned tarball."""
    src = SOURCES['rccl']
    with tarfile.open(os.path.join(MIRROR, src.tarball)) as tf:
        text = tf.extractfile(f'{src.topdir}/makefiles/version.mk').read()
    return dict(re.findall(r'^(\w+)\s*:=\s*(\S*)', text.decode(), re.M))


@pytest.fixture(scope='module')
def rccl_header(hip_toolchain, tmp_path_factory):
    """(cache folder, RcclHeaderBuild's recipe) built through the real
    build script, the cache and the stage under paths with spaces."""
    from builders.rccl_header import RcclHeaderBuild
    tmp = tmp_path_factory.mktemp('rccl header')
    cache = str(tmp / 'build cache')
    stub = types.SimpleNamespace()
    rec = buildcache.Recipe(SOURCES['rccl'], RcclHeaderBuild.steps(stub),
                            {'cmake': 'test'},
                            products=list(RcclHeaderBuild.products))
    res = run_script(buildcache.build_script(rec, cache, MIRROR, 2),
                     tmp / 'stage dir', tmp)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return cache, rec, tmp


@need_mirror
def test_rccl_header_made_from_source_and_version_file(rccl_header):
    cache, rec, tmp = rccl_header
    prefix = rec.prefix(cache)
    assert buildcache.is_built(prefix)
    header = open(os.path.join(prefix, 'include', 'rccl', 'rccl.h')).read()
    v = version_mk()
    assert (v['NCCL_MAJOR'], v['NCCL_MINOR'], v['NCCL_PATCH']) == \
        ('2', '17', '1')
    assert f'#define NCCL_MAJOR {v["NCCL_MAJOR"]}\n' in header
    assert f'#define NCCL_MINOR {v["NCCL_MINOR"]}\n' in header
    assert f'#define NCCL_PATCH {v["NCCL_PATCH"]}\n' in header
    assert '#define NCCL_SUFFIX ""\n' in header
    # RCCL's rule: a one-digit patch is written 0N (2.17.1 -> 21701)
    assert '#define NCCL_VERSION_CODE 21701\n' in header
    assert '${' not in header
    assert open(os.path.join(prefix, 'include', 'nccl.h')).read() == header
    # the rest is src/nccl.h.in as shipped
    src = SOURCES['rccl']
    with tarfile.open(os.path.join(MIRROR, src.tarball)) as tf:
        template = tf.extractfile(f'{src.topdir}/src/nccl.h.in').read() \
            .decode()
    kept = [ln for ln in template.splitlines() if '${' not in ln]
    assert [ln for ln in header.splitlines() if ln in kept] == kept
    assert 'ncclResult_t  ncclAllReduce(' in header
    # it compiles as HIP code for the MI250X, with Debian's hipcc
    prog = tmp / 'use header.cpp'
    prog.write_text('#include <rccl/rccl.h>\n'
                    'static_assert(NCCL_VERSION_CODE == NCCL_VERSION(2, 17, '
                    '1), "version");\n'
                    'ncclResult_t (*f)(int*) = ncclGetVersion;\n')
    cc = subprocess.run(['hipcc', f'--offload-arch={ARCH}', '-fsyntax-only',
                         '-I', os.path.join(prefix, 'include'), str(prog)],
                        capture_output=True, text=True, timeout=300)
    assert cc.returncode == 0, cc.stderr[-3000:]


def plugin_recipe(cache, header_prefix):
    """aws-ofi-rccl's recipe as NetPluginBuild makes it for a partition
    whose HIP is Debian's (``hip_home: /usr``), with Debian's libfabric as
    the site's (``build.libfabric.prefix: /usr``) and the header built by
    RcclHeaderBuild; the plugin's own tests are off (they need MPI and a
    librccl)."""
    from builders.net_plugin import NetPluginBuild
    extras = {'gpu_vendor': 'amd', 'gpu_arch': ARCH, 'rocm_home': '/usr',
              'hip_home': '/usr'}
    conf = {'package': 'aws-ofi-rccl', 'library': 'librccl-net.so',
            'configure': ['--disable-tests']}
    stub = types.SimpleNamespace(
        package='aws-ofi-rccl', cache_dir=cache,
        site_build=lambda: conf, extra=lambda k, d=None: extras.get(k, d),
        libfabric=types.SimpleNamespace(prefix='/usr'),
        rccl_header=types.SimpleNamespace(prefix=header_prefix))
    stub.hip_prefix = types.MethodType(NetPluginBuild.hip_prefix, stub)
    stub.rccl_prefix = types.MethodType(NetPluginBuild.rccl_prefix, stub)
    products = NetPluginBuild.products.fget(stub)
    deps = NetPluginBuild.dependency_keys(stub)
    return buildcache.Recipe(SOURCES['aws-ofi-rccl'],
                             NetPluginBuild.steps(stub), {'cc': 'gcc'},
                             deps, products)


@need_mirror
def test_aws_ofi_rccl_plugin_builds_against_the_made_header(rccl_header):
    cache, header, tmp = rccl_header
    hprefix = header.prefix(cache)
    rec = plugin_recipe(cache, hprefix)
    assert rec.steps[0] == (
        'configure', './configure --prefix="$PREFIX" --with-libfabric=/usr '
        '--with-hip=/usr --with-rccl="$CACHE"/'
        f'{os.path.basename(hprefix)} --disable-tests')
    assert rec.products == ['lib/librccl-net.so']
    assert rec.deps == {'libfabric': '/usr', 'rccl': hprefix}
    stage = tmp / 'plugin stage'
    start = time.monotonic()
    res = run_script(buildcache.build_script(rec, cache, MIRROR, 2), stage,
                     tmp)
    took = time.monotonic() - start
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    prefix = rec.prefix(cache)
    assert f'aws-ofi-rccl 17d41cb installed in {prefix}' in res.stdout
    lib = os.path.join(prefix, 'lib', 'librccl-net.so')
    assert os.path.isfile(os.path.realpath(lib))
    nm = subprocess.run(['nm', '-D', '--defined-only', lib],
                        capture_output=True, text=True, timeout=60)
    assert nm.returncode == 0, nm.stderr
    plugin = re.findall(r' [DBR] (ncclNetPlugin_v\d+)$', nm.stdout, re.M)
    assert plugin == ['ncclNetPlugin_v5'], nm.stdout[-2000:]
    # built against that header (the configure log names it) and linked to
    # the libfabric given, nothing of RCCL
    conf = (stage / 'build-logs' / 'configure.log').read_text()
    assert 'checking for rdma/fabric.h... yes' in conf
    assert 'checking for hip/hip_runtime.h... yes' in conf
    # the made header is the only rccl/rccl.h the compiler can find here
    assert not [d for d in ('/usr/include', '/usr/local/include',
                            '/opt/rocm/include')
                if os.path.exists(os.path.join(d, 'rccl', 'rccl.h'))]
    ldd = subprocess.run(['ldd', lib], capture_output=True, text=True)
    assert re.search(r'libfabric\.so\.1 => /\S+', ldd.stdout), ldd.stdout
    assert 'not found' not in ldd.stdout and 'rccl' not in ldd.stdout
    print(f'aws-ofi-rccl build: {took:.0f} s')


# --- rccl-tests: compiled with hipcc, not linked ---------------------------

#: hipify-perl's renames for the CUDA names rccl-tests' sources use (its
#: Makefile runs ``hipify-perl -quiet-warnings FILE`` on every source).
#: hipify-perl ships with ROCm (Frontier's and LUMI's ``rocm`` modules) but
#: is not packaged in Debian 12: without it on PATH the tests use this
#: stand-in, which makes these renames and no other change; where a real
#: hipify-perl is on PATH it is used.
HIPIFY_SED = [
    r's/\bcudaDeviceProp\b/hipDeviceProp_t/g',
    r's/\bcudaHostAlloc\b/hipHostMalloc/g',
    r's/\bcudaHostAllocMapped\b/hipHostMallocMapped/g',
    r's/\bcudaHostAllocPortable\b/hipHostMallocPortable/g',
    r's/\bcudaFreeHost\b/hipHostFree/g',
    r's/\bcuda\([A-Z]\)/hip\1/g',
    r's/"cuda_runtime\.h"/<hip\/hip_runtime.h>/',
    r's/"cuda\.h"/<hip\/hip_runtime.h>/',
    r's/<cuda_runtime\.h>/<hip\/hip_runtime.h>/',
    r's/<cuda_fp16\.h>/<hip\/hip_fp16.h>/',
]
#: rccl-tests' programs (its src/Makefile's BIN_FILES_LIST, RCCL API call)
PROGRAMS = {'all_reduce': 'ncclAllReduce', 'all_gather': 'ncclAllGather',
            'broadcast': 'ncclBroadcast',
            'reduce_scatter': 'ncclReduceScatter', 'reduce': 'ncclReduce',
            'alltoall': 'ncclAllToAll', 'scatter': 'ncclSend',
            'gather': 'ncclRecv', 'sendrecv': 'ncclSend',
            'alltoallv': 'ncclAllToAllv'}


def hipify_path(bindir):
    """PATH with a hipify-perl: the real one, else the stand-in."""
    if not shutil.which('hipify-perl'):
        bindir.mkdir(parents=True, exist_ok=True)
        script = bindir / 'hipify-perl'
        script.write_text('#!/bin/bash\n# stand-in for hipify-perl '
                          '(tests/test_amd_builds.py)\nexec sed' +
                          ''.join(f" -e '{e}'" for e in HIPIFY_SED) +
                          ' "${@: -1}"\n')
        script.chmod(0o755)
    return f'{bindir}{os.pathsep}{os.environ.get("PATH", "")}'


def recipe_build_steps(extras):
    from builders.nccl_tests import CollectiveTestsBuild
    # the partition's GPUs come from its devices: 8 GCDs of this arch
    stub = types.SimpleNamespace(package='rccl-tests', gpu_arch='',
                                 extra=lambda k, d=None: extras.get(k, d),
                                 gpu=lambda: (8, extras['gpu_arch'], 'amd'))
    return dict(CollectiveTestsBuild.steps(stub))


@need_mirror
def test_rccl_tests_compile_with_the_recipe_command_line(hip_toolchain,
                                                         tmp_path):
    """The rccl-tests recipe's own build step (the one the Frontier dry
    run asserts, with this machine's paths and without MPI), through the
    real build script: hipify, every object compiled by hipcc for gfx90a
    against the made header; every link then fails on ``-lrccl`` alone
    (there is no librccl), so the build fails at that step and nothing is
    installed.  ``MAKEFLAGS=k`` lets make go on past the first failed
    link, ``MAKEFILES`` (``.SECONDARY:``) keeps the objects make would
    delete as intermediates: neither changes the command line."""
    from builders.rccl_header import RcclHeaderBuild
    # the header in a space-free cache: Make takes NCCL_HOME unquoted
    cache = str(tmp_path / 'cache')
    hrec = buildcache.Recipe(SOURCES['rccl'],
                             RcclHeaderBuild.steps(types.SimpleNamespace()),
                             {'cmake': 'test'},
                             products=list(RcclHeaderBuild.products))
    res = run_script(buildcache.build_script(hrec, cache, MIRROR, 2),
                     tmp_path / 'header', tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    header = hrec.prefix(cache)

    frontier = recipe_build_steps({'gpu_vendor': 'amd', 'gpu_arch': ARCH,
                            'rocm_home': '/opt/rocm-5.7.1',
                            'rccl_home': '/opt/rocm-5.7.1/rccl',
                            'mpi_home': '$MPICH_DIR'})
    assert frontier['build'] == (
        'HCC_AMDGPU_TARGET=gfx90a make -j$JOBS MPI=1 MPI_HOME="$MPICH_DIR" '
        'ROCM_PATH=/opt/rocm-5.7.1 NCCL_HOME=/opt/rocm-5.7.1/rccl')
    here = recipe_build_steps({'gpu_vendor': 'amd', 'gpu_arch': ARCH,
                        'rocm_home': '/usr', 'rccl_home': header})
    # the same command line: Debian's ROCm prefix, the made header, no MPI
    assert here['build'] == frontier['build'].replace(
        ' MPI=1 MPI_HOME="$MPICH_DIR"', '').replace(
        '/opt/rocm-5.7.1/rccl', header).replace('/opt/rocm-5.7.1', '/usr')
    rec = buildcache.Recipe(SOURCES['rccl-tests'], list(here.items()),
                            {'hipcc': 'test'},
                            products=['bin/all_reduce_perf'])
    keep = tmp_path / 'keep-objects.mk'
    keep.write_text('.SECONDARY:\n')
    stage = tmp_path / 'stage'
    stage.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp_path), MAKEFLAGS='k',
               MAKEFILES=str(keep), PATH=hipify_path(tmp_path / 'bin'))
    start = time.monotonic()
    jobs = min(os.cpu_count() or 1, 8)
    res = subprocess.run(['bash', '-c', buildcache.build_script(
        rec, cache, MIRROR, jobs)], cwd=stage, env=env, capture_output=True,
        text=True, timeout=1800)
    took = time.monotonic() - start
    log = (stage / 'build-logs' / 'build.log').read_text()
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-3000:]
    assert "ccl-health: build of rccl-tests ae3e635 failed at step " \
        "'build'" in res.stderr.splitlines()[-1]
    assert not (stage / 'build-logs' / 'install.log').exists()
    assert not buildcache.is_built(rec.prefix(cache))
    # no compile error anywhere; each link failed, on -lrccl only
    assert not re.search(r'\.(cpp|cc|h):\d+:\d+: error', log), log[-3000:]
    links = re.findall(r'^/usr/bin/ld: (.*)$', log, re.M)
    assert links == ['cannot find -lrccl: No such file or directory'] * \
        len(PROGRAMS), log[-3000:]
    assert len(re.findall(r'^Linking ', log, re.M)) == len(PROGRAMS)
    assert f'-I{header}/include ' in log
    build = stage / SOURCES['rccl-tests'].topdir / 'build'
    for obj in ['common.o', 'timer.o', 'verifiable/verifiable.o'] + \
            [f'{p}.o' for p in PROGRAMS]:
        assert (build / obj).is_file(), obj
    # the device code (the kernels are in common.cu and verifiable.cu; the
    # programs' files only call RCCL): for the MI250X only, as
    # HCC_AMDGPU_TARGET says, in hipcc's offload bundle
    for obj in ('common.o', 'verifiable/verifiable.o'):
        data = (build / obj).read_bytes()
        assert re.findall(rb'hipv4-amdgcn-amd-amdhsa--(gfx\w+)', data) == \
            [b'gfx90a'], obj
    for prog, call in PROGRAMS.items():
        nm = subprocess.run(['nm', '-u', str(build / f'{prog}.o')],
                            capture_output=True, text=True, timeout=60)
        assert re.search(rf'\b{call}\b', nm.stdout), (prog, nm.stdout)
    # the stand-in or not, nothing of CUDA is left in what was compiled
    for f in (build / 'hipify').iterdir():
        assert not re.search(r'\bcuda[A-Z]', f.read_text()), f.name
    print(f'rccl-tests compile: {took:.0f} s')


def test_rccl_release_without_the_version_block_fails_in_one_line(tmp_path):
    """A CMakeLists.txt that makes the header otherwise: the step says so
    (no toolchain needed: it fails before cmake runs)."""
    from builders.rccl_header import RcclHeaderBuild
    src = tmp_path / 'src' / 'rccl-x'
    (src / 'src').mkdir(parents=True)
    (src / 'CMakeLists.txt').write_text('project(rccl)\n')
    (src / 'src' / 'nccl.h.in').write_text('#define NCCL_MAJOR ${NCCL_MAJOR}\n')
    source = builds.pinned_source(src, tmp_path, 'rccl', 'x')
    rec = buildcache.Recipe(source, RcclHeaderBuild.steps(None),
                            products=list(RcclHeaderBuild.products))
    stage = tmp_path / 'stage'
    res = run_script(buildcache.build_script(rec, str(tmp_path / 'c'),
                                             str(tmp_path), 2), stage,
                     tmp_path)
    assert res.returncode == 1
    assert res.stderr.splitlines()[-1] == (
        "ccl-health: build of rccl x failed at step 'cut-version-block': "
        'ccl-health: CMakeLists.txt has no block from "# Determine version '
        'from makefiles/version.mk" to "include/nccl.h)" (configure_file of '
        'src/nccl.h.in): this RCCL release makes its header otherwise; log: '
        f'{stage}/build-logs/cut-version-block.log')
    assert not buildcache.is_built(rec.prefix(str(tmp_path / 'c')))


# --- ccl-health-links: the same source as HIP -------------------------------

def test_links_program_compiles_as_hip(hip_toolchain, tmp_path):
    """builders/src/ccl_health_links.cu through builders/src/gpu_compat.h:
    the rccl-tests recipe's ``links`` step as it is (Debian's ROCm prefix
    /usr), compiled by hipcc for gfx90a and linked against libamdhip64.
    Without an AMD GPU it runs only as far as its own errors: a bad option
    (exit 2) and no device (exit 1), each one line the hook reads."""
    from builders.nccl_tests import LINKS_PRODUCT, links_step
    from ccl_health.evidence import copymatrix as links
    extras = {'rocm_home': '/usr'}
    cmd = links_step('rccl-tests', ARCH, lambda k, d=None: extras.get(k, d))
    assert cmd.startswith(f'/usr/bin/hipcc -x hip --offload-arch={ARCH} -O2 '
                          f'-o "$PREFIX"/bin/ccl-health-links ')
    prefix = tmp_path / 'pre fix'
    (prefix / 'bin').mkdir(parents=True)
    p = subprocess.run(['bash', '-euo', 'pipefail', '-c', cmd],
                       env=dict(os.environ, PREFIX=str(prefix)),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    prog = str(prefix / LINKS_PRODUCT)
    usage = subprocess.run([prog, '-b', '1x'], capture_output=True,
                           text=True, timeout=60)
    assert usage.returncode == 2
    assert links.parse_links(usage.stdout).errors == [
        'usage error: bad size: 1x (usage: ccl-health-links [-b BYTES] '
        '[-n REPEATS] [-w WARMUP])']
    run = subprocess.run([prog], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, HIP_VISIBLE_DEVICES='',
                                  ROCR_VISIBLE_DEVICES=''))
    res = links.parse_links(run.stdout)
    if run.returncode == 0:          # a machine with an AMD GPU after all
        assert res.complete and res.links, run.stdout
    else:
        assert run.returncode == 1, run.stdout + run.stderr
        assert res.errors and res.errors[0].startswith(
            'error: cudaGetDeviceCount(&n) failed: '), run.stdout


@need_mirror
def test_probe_program_compiles_as_hip_with_rccl(rccl_header, tmp_path):
    """ccl-health-probe: the links source with -DCCL_HEALTH_PROBE, its
    all_reduce through RCCL's header (<rccl/rccl.h>, gpu_compat.h), as the
    rccl-tests recipe's ``probe`` step compiles it, for gfx90a against the
    made header; compiled only (there is no librccl to link here)."""
    from builders.nccl_tests import PROBE_PRODUCT, probe_step
    cache, rec, _ = rccl_header
    extras = {'rocm_home': '/usr', 'rccl_home': rec.prefix(cache)}
    cmd = probe_step('rccl-tests', ARCH, lambda k, d=None: extras.get(k, d))
    assert cmd.startswith(f'/usr/bin/hipcc -x hip --offload-arch={ARCH} -O2 '
                          f'-DCCL_HEALTH_PROBE -o "$PREFIX"/{PROBE_PRODUCT} ')
    assert ' -lrccl # ' in cmd
    compile_only = cmd.split(' # ')[0].replace(
        f' -o "$PREFIX"/{PROBE_PRODUCT} ', ' -c -o "$PREFIX"/probe.o ')
    prefix = tmp_path / 'pre fix'
    prefix.mkdir()
    p = subprocess.run(['bash', '-euo', 'pipefail', '-c', compile_only],
                       env=dict(os.environ, PREFIX=str(prefix)),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert (prefix / 'probe.o').stat().st_size > 0


#: the few RCCL names ccl-health-probe calls, for a stand-in library: its
#: -S protocol runs before any of them (tests/helpers has no C, so here)
_RCCL_STUB_H = '''#pragma once
typedef struct ncclComm *ncclComm_t;
typedef enum { ncclSuccess = 0, ncclUnhandledCudaError = 1,
               ncclInvalidUsage = 5 } ncclResult_t;
typedef enum { ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
#define NCCL_VERSION_CODE 21800
ncclResult_t ncclGetVersion(int *);
const char *ncclGetErrorString(ncclResult_t);
ncclResult_t ncclCommInitAll(ncclComm_t *, int, const int *);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclAllReduce(const void *, void *, size_t, ncclDataType_t,
                           ncclRedOp_t, ncclComm_t, hipStream_t);
'''
_RCCL_STUB_C = '''#include <hip/hip_runtime.h>
#include "rccl/rccl.h"
ncclResult_t ncclGetVersion(int *v) { *v = 21800; return ncclSuccess; }
const char *ncclGetErrorString(ncclResult_t) { return "stand-in"; }
ncclResult_t ncclCommInitAll(ncclComm_t *, int, const int *) {
    return ncclUnhandledCudaError; }
ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }
ncclResult_t ncclAllReduce(const void *, void *, size_t, ncclDataType_t,
                           ncclRedOp_t, ncclComm_t, hipStream_t) {
    return ncclSuccess; }
'''


def test_probe_started_ahead_waits_for_its_go(hip_toolchain, tmp_path):
    """ccl-health-probe -S (issue 42, the hook starts it ahead): built with
    hipcc against a stand-in RCCL, it waits on standard input: the end of
    input without a go ends it at once with exit 3 and nothing printed
    (the hook did not want it), also once started (its contexts and NCCL
    in threads); env / unset lines, "start nccl", then ``go OPTIONS`` run
    it with those options (its "# early" line, then, without a GPU here,
    the copy matrix's own error, exit 1); a line of no known form, or an
    env line after the start (its threads run), is a usage error (exit
    2)."""
    from ccl_health.evidence import copymatrix as links
    (tmp_path / 'rccl').mkdir()
    (tmp_path / 'rccl' / 'rccl.h').write_text(_RCCL_STUB_H)
    (tmp_path / 'stub.cpp').write_text(_RCCL_STUB_C)
    prog = str(tmp_path / 'ccl-health-probe')
    p = subprocess.run(
        ['/usr/bin/hipcc', '-x', 'hip', f'--offload-arch={ARCH}', '-O2',
         '-DCCL_HEALTH_PROBE', f'-I{tmp_path}', '-o', prog,
         os.path.join(REPO, 'builders', 'src', 'ccl_health_links.cu'),
         str(tmp_path / 'stub.cpp')],
        capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    env = dict(os.environ, HIP_VISIBLE_DEVICES='', ROCR_VISIBLE_DEVICES='')

    def run(stdin):
        return subprocess.run([prog, '-S'], input=stdin, capture_output=True,
                              text=True, timeout=60, env=env)
    quiet = run('env NCCL_DEBUG=INFO\n')
    assert (quiet.returncode, quiet.stdout) == (3, '')
    begun = run('env NCCL_DEBUG=INFO\nstart nccl\n')
    assert (begun.returncode, begun.stdout) == (3, '')
    late = run('start\nenv NCCL_X=1\n')
    assert late.returncode == 2 and late.stdout.startswith(
        '# usage error: unknown line on stdin: env NCCL_X=1'), late.stdout
    nothing = run('env NCCL_X=a b\nunset NCCL_Y\nstart nccl\n'
                  'go -b 0 -a 0\n')
    assert nothing.returncode == 0, nothing.stdout + nothing.stderr
    assert re.fullmatch(r'# early [0-9.]+ s before the go, contexts [0-9.]+ '
                        r's after it\n', nothing.stdout), nothing.stdout
    copies = run('go -b 1M -a 0\n')
    assert copies.returncode == 1, copies.stdout
    res = links.parse_links(copies.stdout)
    assert res.errors and res.errors[0].startswith(
        'error: cudaGetDeviceCount(&n) failed: '), copies.stdout
    bad = run('go -b 1x\n')
    assert bad.returncode == 2 and links.parse_links(bad.stdout).errors == [
        'usage error: bad size: 1x (usage: ccl-health-probe [-b BYTES|0] '
        '[-n REPEATS] [-w WARMUP] [-a BYTES|0] [-i ITERS] [-W WARMUP] '
        '[-O 0|1] [-S])'], bad.stdout
    odd = run('export NCCL_X=1\n')
    assert odd.returncode == 2 and odd.stdout.startswith(
        '# usage error: unknown line on stdin: export NCCL_X=1'), odd.stdout
