"""The builds as the tests run them: the mirror of the pinned source
tarballs beside the checkout (``../shared/mirror``) and the pins of
``builders/sources.yaml``; a build script run as a job runs it; a tiny
source folder packed and pinned as the real ones are."""

import hashlib
import os
import subprocess
import tarfile

from ccl_health import buildcache
from conftest import REPO

#: the mirror of the pinned source tarballs, beside the checkout
MIRROR = os.path.join(os.path.dirname(REPO), 'shared', 'mirror')
#: the pinned sources (builders/sources.yaml)
SOURCES = buildcache.load_sources(os.path.join(REPO, 'builders',
                                               'sources.yaml'))


def run_script(script, cwd, tmp_path, timeout=600):
    """The build script ``script`` (:func:`ccl_health.buildcache.
    build_script`) under bash in ``cwd`` (made), with a TMPDIR of its own
    under ``tmp_path``: the finished process, its output captured."""
    cwd.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmp_path / 'tmp'))
    os.makedirs(env['TMPDIR'], exist_ok=True)
    return subprocess.run(['bash', '-c', script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def pinned_source(src, folder, package, version):
    """The source folder ``src`` packed as ``<folder>/<package>-<version>
    .tar.gz`` (its top folder ``<package>-<version>``), and the
    :class:`ccl_health.buildcache.Source` that pins it by the tarball's
    SHA-256 (its address never fetched)."""
    top = f'{package}-{version}'
    tar = os.path.join(folder, f'{top}.tar.gz')
    with tarfile.open(tar, 'w:gz') as tf:
        tf.add(src, arcname=top)
    with open(tar, 'rb') as fp:
        digest = hashlib.sha256(fp.read()).hexdigest()
    return buildcache.Source(package, version, 'https://x', digest,
                             f'{top}.tar.gz', top)
