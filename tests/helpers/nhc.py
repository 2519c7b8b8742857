"""The real LBNL NHC 1.4.3, built from ../shared/mirror into a temporary
prefix (the fixture ``nhc``), and NHC run with the project's check file."""

import os
import shutil
import subprocess
import tarfile
import time

import pytest

from conftest import REPO


NHC_TARBALL = os.path.join(REPO, '..', 'shared', 'mirror',
                           'nhc-1.4.3.tar.gz')


NHC_CHECK = os.path.join(REPO, 'site', 'nhc', 'ccl_health.nhc')


@pytest.fixture(scope='module')
def nhc(tmp_path_factory):
    """The real NHC, built from the mirrored release into a temporary
    prefix (./configure && make install)."""
    if not os.path.exists(NHC_TARBALL):
        pytest.skip(f'{NHC_TARBALL} is not here')
    base = tmp_path_factory.mktemp('nhc')
    with tarfile.open(NHC_TARBALL) as tf:
        tf.extractall(base)
    src = base / 'nhc-1.4.3'
    prefix = base / 'prefix'
    for cmd in (['./configure', f'--prefix={prefix}',
                 f'--sysconfdir={prefix}/etc',
                 f'--libexecdir={prefix}/libexec'],
                ['make'], ['make', 'install']):
        p = subprocess.run(cmd, cwd=src, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, (cmd, p.stdout[-2000:], p.stderr[-2000:])
    nhc_bin = prefix / 'sbin' / 'nhc'
    assert nhc_bin.exists()
    return prefix


def run_nhc(prefix, tmp_path, env, limit=None, watchdog=10, rm='none'):
    """NHC with the project's check file; ``rm``: its NHC_RM (``slurm``:
    the hook asks scontrol, tests/test_hook_node_role.py)."""
    conf = tmp_path / 'nhc-conf'
    # NHC's own scripts (common.nhc: nhc_load_conf, ...) and ours
    shutil.copytree(prefix / 'etc' / 'nhc' / 'scripts', conf / 'scripts')
    shutil.copy(NHC_CHECK, conf / 'scripts' / 'ccl_health.nhc')
    (conf / 'nhc.conf').write_text(
        f'* || check_gpu_ccl {REPO}' + (f' {limit}' if limit else '') +
        '\n')
    cmd = [str(prefix / 'sbin' / 'nhc'), '-c', str(conf / 'nhc.conf'),
           '-l', str(tmp_path / 'nhc.log'), '-t', str(watchdog),
           f'CONFDIR={conf}', f'INCDIR={conf}/scripts',
           f'HELPERDIR={prefix}/libexec/nhc', f'NHC_RM={rm}',
           'MARK_OFFLINE=0', f'RESULTFILE={tmp_path}/nhc.status',
           'DEBUG=1', f'PATH={env["PATH"]}']
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       timeout=120, cwd='/')
    return p, time.monotonic() - t0
