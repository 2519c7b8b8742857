"""The tool's own trouble never changes a measured verdict (issue 41,
class 1): the measured verdict is printed and recorded first; a failure to
write an extra file adds a note, never replaces it.  Through the real CLI
(``python -m ccl_health.hook`` and ``scripts/ccl-health-check``) with the
stand-ins of tests/replay; "full" is a real full file system (a tmpfs of
a few KiB, filled) or the kernel's ``/dev/full`` device (a node of its
own, ``mknod`` 1:7, so that the machine's ``/dev/full`` is never at
stake)."""

import os
import stat
import subprocess
import uuid

import pytest

from helpers.node import CAP, WRAPPER, hook
from helpers.trust import mutated, recorded

#: the node of the kernel's full device: every write is ENOSPC
FULL_DEV = (1, 7)


def _root():
    if os.getuid() != 0:
        pytest.skip('a full file system of its own needs root (mount)')


@pytest.fixture
def full_dir(tmp_path):
    """A folder on a file system with no space left (a tmpfs of 16 KiB,
    filled); folders can still be made in it, files written to it are
    ENOSPC."""
    _root()
    mnt = tmp_path / f'full-{uuid.uuid4().hex[:6]}'
    mnt.mkdir()
    p = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=16k,mode=1777',
                        'tmpfs', str(mnt)], capture_output=True, text=True)
    if p.returncode:
        pytest.skip(f'cannot mount a tmpfs: {p.stderr.strip()}')
    try:
        fd = os.open(mnt / 'filler', os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b'\0' * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        with pytest.raises(OSError):
            with open(mnt / 'probe', 'wb', buffering=0) as fp:
                fp.write(b'x' * 4096)
        os.unlink(mnt / 'probe')
        yield mnt
    finally:
        subprocess.run(['umount', '-l', str(mnt)], check=False)


@pytest.fixture
def full_device(tmp_path):
    """A device node of the kernel's full device, in the test's folder."""
    _root()
    dev = tmp_path / 'detail.json'
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(*FULL_DEV))
        with pytest.raises(OSError):
            with open(dev, 'w') as fp:
                fp.write('x')
    except PermissionError:
        pytest.skip('cannot make a device node here')
    return dev


MISSING_GPU = ('UNHEALTHY: isolate: missing GPU: nvidia-smi lists 1 of the 2 '
               'GPUs of local:gpu')


def _missing_gpu_with_json(tmp_path, json_path, cmd=None):
    return hook(tmp_path, '--expect-gpus', '2', '--json', str(json_path),
                env={'CCL_HEALTH_FAKE_GPUS': '1'}, cmd=cmd)


# -- --json to a full or unwritable place ------------------------------------

def test_json_to_a_full_device_keeps_the_measured_verdict(tmp_path,
                                                          full_device):
    rc, line, err = _missing_gpu_with_json(tmp_path, full_device)
    assert (rc, line) == (1, MISSING_GPU), err
    assert f'--json {full_device}: cannot write' in err, err
    [case] = recorded(tmp_path)
    assert case['verdict'] == 'missing-gpu', case
    # written into, never replaced by a file
    assert stat.S_ISCHR(os.lstat(full_device).st_mode)


def test_json_on_a_full_file_system_keeps_the_measured_verdict(tmp_path,
                                                               full_dir):
    target = full_dir / 'detail.json'
    rc, line, err = _missing_gpu_with_json(tmp_path, target)
    assert (rc, line) == (1, MISSING_GPU), err
    assert f'--json {target}: cannot write' in err, err
    [case] = recorded(tmp_path)
    assert case['verdict'] == 'missing-gpu', case


# -- the wrapper with a full $TMPDIR -----------------------------------------

def test_wrapper_with_a_full_tmpdir_passes_the_verdict_through(tmp_path,
                                                               full_dir):
    rc, line, err = hook(tmp_path, '--expect-gpus', '2',
                         env={'CCL_HEALTH_FAKE_GPUS': '1',
                              'TMPDIR': str(full_dir)}, cmd=[WRAPPER])
    assert (rc, line) == (1, MISSING_GPU), err
    [case] = recorded(tmp_path)
    assert case['verdict'] == 'missing-gpu', case


def test_wrapper_with_no_temporary_folder_passes_the_verdict_through(
        tmp_path):
    rc, line, err = hook(tmp_path, env={'TMPDIR': str(tmp_path / 'none')},
                         cmd=[WRAPPER])
    assert rc == 0 and line.startswith('HEALTHY: '), (line, err)


# -- a cut debug log beside a complete output --------------------------------

def _cut_logs(tmp_path):
    """The capture 'intra' (complete, exit 0, 330 GB/s at 1 GiB) with its
    NCCL debug logs cut before their first channel line (a full disk or a
    quota under the evidence folder): what is left shows NCCL's network
    set up (``NET/Socket``, as every run does) and no channel."""
    env = mutated(tmp_path)
    folder = tmp_path / 'replay' / 'mut'
    for log in folder.glob('nccl-debug*'):
        text = log.read_text()
        log.write_text(text[:text.index(' Channel ')].rsplit('\n', 1)[0]
                       + '\n')
        assert 'NET/Socket' in log.read_text()
    return env


def test_cut_debug_log_beside_a_complete_fast_output_is_no_fallback(
        tmp_path):
    rc, line, err = hook(tmp_path, env=_cut_logs(tmp_path))
    assert rc == 2 and line.startswith('COULD-NOT-CHECK: '), (line, err)
    assert 'fallback' not in line.split(':')[1], line
    # the transport is what could not be checked: above what sockets can
    # carry, or (issue 43, class G) no channel line left to prove it
    assert 'above what NET/Socket can carry' in line or \
        'the transport is not proven' in line, line
    [case] = recorded(tmp_path)
    assert case['verdict'] == 'could-not-check', case['reason']


def test_socket_bound_is_above_every_real_socket_run():
    # the bound guards against an impossible number: never below a
    # healthy real socket run (tests/fixtures/device/cap/net-socket)
    from ccl_health.judge import ceiling
    best = 0.0
    for row in open(os.path.join(CAP, 'net-socket', 'stdout.txt')):
        tok = row.split()
        if len(tok) >= 12 and tok[0].isdigit():      # busbw: columns 8, 12
            best = max(best, float(tok[7]), float(tok[11]))
    assert 0 < best < ceiling.socket_bound(1).gbps
    assert ceiling.socket_bound(2, 8).gbps > ceiling.socket_bound(1).gbps
    assert ceiling.socket_bound(2) is None
