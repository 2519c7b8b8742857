"""Build recipes: pins match the mirror, cache keys change only with the
recipe, the rendered script builds once, reuses the cache, and names the
failing step and its log."""

import os
import subprocess

import pytest

from ccl_health import CclHealthError, buildcache
from helpers.builds import MIRROR, SOURCES, pinned_source


def test_pins_are_the_mirror_checksums():
    if not os.path.isdir(MIRROR):
        pytest.skip('no ../shared/mirror beside the checkout')
    sums = {}
    with open(os.path.join(MIRROR, 'SHA256SUMS')) as fp:
        for line in fp:
            digest, name = line.split()
            sums[name] = digest
    for src in SOURCES.values():
        assert sums[src.tarball] == src.sha256, src.name


def recipe(steps=(('build', 'true'),), **toolchain):
    return buildcache.Recipe(SOURCES['nccl-tests'], list(steps),
                             toolchain or {'nvcc': '13.0'})


def test_cache_key_follows_the_recipe():
    base = recipe().key()
    assert recipe().key() == base                        # stable
    assert recipe(nvcc='12.4').key() != base             # toolkit
    assert recipe((('build', 'make -j2'),)).key() != base  # steps
    other = buildcache.Recipe(SOURCES['libfabric'], [('build', 'true')],
                              {'nvcc': '13.0'})
    assert other.key() != base                           # package/version
    assert recipe().prefix('/c').startswith('/c/nccl-tests-2.19.6-')


def run_script(tmp_path, rec, mirror, name):
    work = tmp_path / name
    work.mkdir()
    script = buildcache.build_script(rec, str(tmp_path / 'cache'), mirror, 2)
    return subprocess.run(['bash', '-c', script], cwd=work,
                          capture_output=True, text=True)


@pytest.fixture
def mirror(tmp_path):
    """A mirror holding a tiny tarball pinned like the real ones: (its
    folder, the Source that pins the tarball)."""
    src_dir = tmp_path / 'src' / 'nccl-tests-2.19.6'
    src_dir.mkdir(parents=True)
    (src_dir / 'Makefile').write_text('all:\n\techo built > out.txt\n')
    mdir = tmp_path / 'mirror'
    mdir.mkdir()
    return str(mdir), pinned_source(src_dir, mdir, 'nccl-tests', '2.19.6')


def test_build_once_then_cached(tmp_path, mirror):
    mdir, src = mirror
    rec = buildcache.Recipe(src, [('build', 'make'),
                                  ('install', 'mkdir -p $PREFIX/bin && '
                                   'cp out.txt $PREFIX/bin/')])
    first = run_script(tmp_path, rec, mdir, 'w1')
    assert first.returncode == 0, first.stderr
    prefix = rec.prefix(str(tmp_path / 'cache'))
    assert buildcache.is_built(prefix)
    assert open(os.path.join(prefix, 'bin', 'out.txt')).read() == 'built\n'
    second = run_script(tmp_path, rec, mdir, 'w2')
    assert second.returncode == 0
    assert 'is cached at' in second.stdout and 'not rebuilt' in second.stdout
    assert 'ccl-health: nccl-tests 2.19.6: build' not in second.stdout


def test_failed_step_is_named_with_its_log(tmp_path, mirror):
    mdir, src = mirror
    rec = buildcache.Recipe(src, [('configure', 'echo checking nvcc... no; '
                                   'exit 3')])
    res = run_script(tmp_path, rec, mdir, 'w')
    assert res.returncode == 1
    log = tmp_path / 'w' / 'build-logs' / 'configure.log'
    assert (f"failed at step 'configure': checking nvcc... no; log: {log}"
            ) in res.stderr
    assert 'checking nvcc... no' in log.read_text()
    assert not buildcache.is_built(rec.prefix(str(tmp_path / 'cache')))


def test_checksum_mismatch_stops_the_build(tmp_path, mirror):
    mdir, _ = mirror
    src = buildcache.Source('nccl-tests', '2.19.6', 'https://x', '0' * 64,
                            'nccl-tests-2.19.6.tar.gz', 'nccl-tests-2.19.6')
    res = run_script(tmp_path, buildcache.Recipe(src, []), mdir, 'w')
    assert res.returncode == 1
    assert (f"failed: {mdir}/nccl-tests-2.19.6.tar.gz: sha256 mismatch: "
            in res.stderr and f"expected {'0' * 64}" in res.stderr)
    assert not (tmp_path / 'w' / 'build-logs' / 'unpack.log').exists()


def test_missing_tarball_in_mirror(tmp_path):
    (tmp_path / 'm').mkdir()
    res = run_script(tmp_path, recipe(), str(tmp_path / 'm'), 'w')
    assert res.returncode == 1 and "failed at step 'fetch'" in res.stderr


def test_mirror_option_and_environment(tmp_path):
    assert buildcache.resolve_mirror(None, {}) is None
    assert buildcache.resolve_mirror(None, {'CCL_HEALTH_MIRROR': str(
        tmp_path)}) == str(tmp_path)
    with pytest.raises(CclHealthError, match='is not a folder'):
        buildcache.resolve_mirror('/nonexistent/mirror', {})


def test_upstream_download_command_without_mirror():
    script = buildcache.build_script(recipe(), '/c', None)
    assert 'curl -fsSL' in script and SOURCES['nccl-tests'].url in script
