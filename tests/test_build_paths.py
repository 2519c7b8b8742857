"""Builds in paths with spaces, and a failed build is a failed build.

The build scripts are the real ones (:func:`ccl_health.buildcache.
build_script` with the steps of the builders in ``builders/``), run with
bash on this machine: libfabric 1.22.0 from ``../shared/mirror`` with the
mirror, the cache and the working folder under paths with spaces; damaged
tarballs; failing configure steps behind a pipe.  Fast cases use a tiny
tarball pinned like the real ones."""

import hashlib
import os
import shutil
import subprocess
import types

import pytest

from ccl_health import buildcache
from ccl_health.sitedata import site as site_data
from conftest import REPO
from helpers.builds import MIRROR, SOURCES, pinned_source, run_script

LIBFABRIC = os.path.join(MIRROR, SOURCES['libfabric'].tarball)
need_mirror = pytest.mark.skipif(not os.path.exists(LIBFABRIC),
                                 reason='no ../shared/mirror beside the '
                                        'checkout')
#: providers and parts the test does not need: only build time (the
#: site's own list, site/local.yaml, is used as well)
FAST = ['--disable-static', '--disable-sockets', '--disable-udp',
        '--disable-rxd', '--disable-mrail', '--disable-perf',
        '--disable-trace', '--disable-hook_debug', '--disable-hook_hmem',
        '--disable-dmabuf_peer_mem', '--disable-sm2']


def libfabric_steps(extra=()):
    """The steps of builders.libfabric.LibfabricBuild for the local site
    (site/local.yaml's configure options) plus ``extra``."""
    pytest.importorskip('reframe')
    from builders.libfabric import LibfabricBuild
    conf = dict(site_data.load(os.path.join(REPO, 'site'), 'local')
                .build['libfabric'])
    conf['configure'] = list(conf.get('configure') or []) + list(extra)
    stub = types.SimpleNamespace(site_build=lambda: conf)
    return LibfabricBuild.steps(stub), list(LibfabricBuild.products)


def libfabric_recipe(extra=()):
    steps, products = libfabric_steps(extra)
    return buildcache.Recipe(SOURCES['libfabric'], steps, {'cc': 'gcc'},
                             products=products)


def spaced_mirror(tmp_path, damage=None):
    """A copy of the libfabric tarball in a mirror folder with a space in
    its path; ``damage(bytes) -> bytes`` changes the copy."""
    mdir = tmp_path / 'source mirror'
    mdir.mkdir()
    data = open(LIBFABRIC, 'rb').read()
    (mdir / SOURCES['libfabric'].tarball).write_bytes(
        damage(data) if damage else data)
    return str(mdir)


@need_mirror
def test_libfabric_builds_with_spaces_everywhere(tmp_path):
    cache = str(tmp_path / 'build cache' / "it's here")
    stage = tmp_path / 'out put' / 'stage dir'
    rec = libfabric_recipe(FAST)
    assert ('configure', './configure --prefix="$PREFIX" --disable-verbs '
            '--disable-psm2 --disable-psm3 --disable-efa --disable-usnic '
            '--disable-opx --disable-ucx --enable-tcp --enable-rxm '
            '--enable-shm ' + ' '.join(FAST)) == rec.steps[0]
    script = buildcache.build_script(rec, cache, spaced_mirror(tmp_path), 2)
    res = run_script(script, stage, tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    prefix = rec.prefix(cache)
    assert 'is not space-free: building in' in res.stdout
    assert f'libfabric 1.22.0 installed in {prefix}' in res.stdout
    assert buildcache.is_built(prefix)
    lib = os.path.join(prefix, 'lib', 'libfabric.so')
    assert os.path.isfile(os.path.realpath(lib))
    # the library works: fi_info of the install lists the tcp provider
    fi = subprocess.run([os.path.join(prefix, 'bin', 'fi_info'), '-l'],
                        capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, LD_LIBRARY_PATH=os.path.join(
                            prefix, 'lib')))
    assert fi.returncode == 0 and 'tcp:' in fi.stdout, fi.stderr
    # every step logged in the stage, the scratch build folder removed
    for step in ('fetch', 'unpack', 'configure', 'build', 'install'):
        assert (stage / 'build-logs' / f'{step}.log').is_file()
    assert not [p for p in os.listdir(tmp_path / 'tmp')
                if p.startswith('ccl-health-build.')]
    # compiled-in paths name the space-free link to the cache
    link = [p for p in os.listdir(tmp_path / 'tmp')
            if p.startswith('ccl-health-') and '-cache-' in p]
    assert len(link) == 1
    assert os.readlink(tmp_path / 'tmp' / link[0]) == cache
    pc = open(os.path.join(prefix, 'lib', 'pkgconfig',
                           'libfabric.pc')).read()
    assert f'prefix={tmp_path}/tmp/{link[0]}/' in pc
    # built once: the second run finds it in the cache
    again = run_script(script, tmp_path / 'out put' / 'second stage',
                       tmp_path)
    assert again.returncode == 0 and 'not rebuilt' in again.stdout


def flip(data):
    mid = len(data) // 2
    return data[:mid] + bytes([data[mid] ^ 0x01]) + data[mid + 1:]


@need_mirror
@pytest.mark.parametrize('damage', [lambda d: d[:len(d) // 3], flip],
                         ids=['truncated', 'flipped-byte'])
def test_damaged_tarball_fails_before_configure(tmp_path, damage):
    mirror = spaced_mirror(tmp_path, damage)
    rec = libfabric_recipe()
    stage = tmp_path / 'stage dir'
    res = run_script(buildcache.build_script(rec, str(tmp_path / 'cache'),
                                             mirror, 2), stage, tmp_path)
    assert res.returncode == 1
    path = os.path.join(mirror, 'libfabric-1.22.0.tar.gz')
    got = hashlib.sha256(damage(open(LIBFABRIC, 'rb').read())).hexdigest()
    assert res.stderr.splitlines() == [
        f'ccl-health: build of libfabric 1.22.0 failed: {path}: sha256 '
        f'mismatch: {got}, expected {SOURCES["libfabric"].sha256} '
        f'(builders/sources.yaml)']
    assert sorted(os.listdir(stage / 'build-logs')) == ['fetch.log']
    assert 'installed' not in res.stdout
    assert not os.path.exists(rec.prefix(str(tmp_path / 'cache')))


@need_mirror
def test_failed_configure_behind_a_pipe_fails_the_build(tmp_path):
    """A real configure error (CUDA asked for, not there) piped into tee:
    the step and the script exit nonzero, no stamp, one line naming it."""
    steps, products = libfabric_steps(['--with-cuda=/nonexistent/cuda'])
    name, cmd = steps[0]
    assert name == 'configure'
    steps[0] = (name, cmd + ' 2>&1 | tee configure.out')
    rec = buildcache.Recipe(SOURCES['libfabric'], steps, products=products)
    stage = tmp_path / 'stage dir'
    res = run_script(buildcache.build_script(rec, str(tmp_path / 'cache x'),
                                             MIRROR, 2), stage, tmp_path)
    assert res.returncode == 1
    log = stage / 'build-logs' / 'configure.log'
    assert res.stderr.splitlines()[-1] == (
        "ccl-health: build of libfabric 1.22.0 failed at step 'configure': "
        "configure: error: CUDA support requested but CUDA runtime not "
        f"available.; log: {log}")
    assert not (stage / 'build-logs' / 'build.log').exists()
    prefix = rec.prefix(str(tmp_path / 'cache x'))
    assert not buildcache.is_built(prefix)
    assert 'installed' not in res.stdout


# --- fast cases: a tiny tarball pinned like the real ones -----------------

@pytest.fixture
def toy(tmp_path):
    """(mirror folder with a space, Source) of a tiny make project that
    hands its build folder to a sub-make as nccl-tests' Makefile does."""
    src = tmp_path / 'src' / 'toy-1.0'
    (src / 'sub').mkdir(parents=True)
    (src / 'Makefile').write_text(
        'BUILDDIR ?= build\noverride BUILDDIR := $(abspath $(BUILDDIR))\n'
        'all:\n\t${MAKE} -C sub all BUILDDIR=${BUILDDIR}\n')
    (src / 'sub' / 'Makefile').write_text(
        'all:\n\tmkdir -p $(BUILDDIR) && echo built > $(BUILDDIR)/out\n')
    mdir = tmp_path / 'the mirror'
    mdir.mkdir()
    return str(mdir), pinned_source(src, mdir, 'toy', '1.0')


def toy_install(extra=''):
    return [('build', 'make' + extra),
            ('install', 'mkdir -p "$PREFIX/bin" && cp build/out '
                        '"$PREFIX/bin/"')]


def test_make_build_with_spaces_in_stage_cache_and_mirror(tmp_path, toy):
    mirror, src = toy
    cache = str(tmp_path / 'my cache')
    rec = buildcache.Recipe(src, toy_install(), products=['bin/out'])
    res = run_script(buildcache.build_script(rec, cache, mirror, 2),
                     tmp_path / 'out dir' / 'stage', tmp_path)
    assert res.returncode == 0, res.stderr
    assert open(os.path.join(rec.prefix(cache), 'bin', 'out')).read() == \
        'built\n'
    # the same Makefile run in a folder with a space fails: make splits
    # the path (why the script builds in a space-free folder)
    shutil.copytree(tmp_path / 'src' / 'toy-1.0', tmp_path / 'a b')
    direct = subprocess.run(['make'], cwd=tmp_path / 'a b',
                            capture_output=True, text=True)
    assert direct.returncode != 0 and 'No rule to make target' in \
        direct.stderr


def test_a_failing_command_inside_a_step_fails_it(tmp_path, toy):
    """``set -e`` holds inside a step: a failure followed by more commands
    is not hidden by the last one's success."""
    mirror, src = toy
    rec = buildcache.Recipe(src, [('build', 'make no-such-target; '
                                            'echo carried on')])
    res = run_script(buildcache.build_script(rec, str(tmp_path / 'c'),
                                             mirror, 2), tmp_path / 'w',
                     tmp_path)
    assert res.returncode == 1
    assert "failed at step 'build': make: *** No rule to make target " \
        "'no-such-target'.  Stop.; log:" in res.stderr
    assert 'carried on' not in (tmp_path / 'w' / 'build-logs' /
                                'build.log').read_text()
    assert not buildcache.is_built(rec.prefix(str(tmp_path / 'c')))
    # as ReFrame keeps it: the stage's rfm_build.err, read back in one line
    (tmp_path / 'w' / 'rfm_build.err').write_text(res.stderr)
    assert buildcache.failure_line(str(tmp_path / 'w')) == \
        res.stderr.splitlines()[-1]
    assert buildcache.failure_line(str(tmp_path / 'w')).startswith(
        "ccl-health: build of toy 1.0 failed at step 'build': make: ***")
    assert buildcache.failure_line(str(tmp_path / 'nowhere')) is None


def test_missing_product_leaves_no_stamp(tmp_path, toy):
    mirror, src = toy
    rec = buildcache.Recipe(src, toy_install(), products=['lib/libtoy.so'])
    cache = str(tmp_path / 'c')
    res = run_script(buildcache.build_script(rec, cache, mirror, 2),
                     tmp_path / 'w', tmp_path)
    assert res.returncode == 1
    assert res.stderr.splitlines() == [
        f'ccl-health: build of toy 1.0 failed: the install left no '
        f'{rec.prefix(cache)}/lib/libtoy.so']
    assert not buildcache.is_built(rec.prefix(cache))


def test_site_path_with_space_is_named(tmp_path, toy):
    mirror, src = toy
    check = buildcache.no_space_check({'MPI_HOME': '$MY_MPI',
                                       'CUDA_HOME': '/usr/local/cuda'})
    assert check == ('ccl_no_space MPI_HOME "$MY_MPI"; '
                     'ccl_no_space CUDA_HOME /usr/local/cuda')
    rec = buildcache.Recipe(src, [('check-paths', check)] + toy_install())
    script = buildcache.build_script(rec, str(tmp_path / 'c'), mirror, 2)
    os.environ['MY_MPI'] = '/opt/my mpi'
    try:
        res = run_script(script, tmp_path / 'w', tmp_path)
    finally:
        del os.environ['MY_MPI']
    assert res.returncode == 1
    assert res.stderr.splitlines()[-1].startswith(
        "ccl-health: build of toy 1.0 failed at step 'check-paths': "
        "ccl-health: MPI_HOME='/opt/my mpi' contains whitespace, which this "
        "build cannot take; log: ")


def test_site_values_expand_only_name_references(tmp_path, toy):
    mirror, src = toy
    value = '/opt/a b/$(touch pwned)`touch pwned2`/${HOME_X}/$HOME_X'
    word = buildcache.shell_value(value)
    rec = buildcache.Recipe(src, [
        ('build', f'printf "%s\\n" {word} > "$PREFIX.value"; mkdir -p '
                  '"$PREFIX"')])
    cache = str(tmp_path / 'c')
    os.environ['HOME_X'] = 'x y'
    try:
        res = run_script(buildcache.build_script(rec, cache, mirror, 2),
                         tmp_path / 'w', tmp_path)
    finally:
        del os.environ['HOME_X']
    assert res.returncode == 0, res.stderr
    assert open(rec.prefix(cache) + '.value').read() == \
        '/opt/a b/$(touch pwned)`touch pwned2`/x y/x y\n'
    assert not list(tmp_path.rglob('pwned*'))


def test_dependency_in_the_cache_is_named_through_its_link():
    assert buildcache.cache_path('/c d/libfabric-1.22.0-0123', '/c d') == \
        '"$CACHE"/libfabric-1.22.0-0123'
    assert buildcache.cache_path('/opt/cray/libfabric/1.20.1', '/c d') == \
        '/opt/cray/libfabric/1.20.1'
    assert buildcache.cache_path('/opt/lib fabric', '/c') == \
        "'/opt/lib fabric'"
