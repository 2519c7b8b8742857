"""A second local user (root only) and what it makes: a shared folder like
/tmp it can reach, a link it plants (issues 19, 21)."""

import os
import pwd
import shutil
import subprocess
import tempfile

import pytest


#: the second local user
OTHER = 'nobody'


def other_user():
    """The second local user (root only: the tests act as it)."""
    if os.getuid() != 0:
        pytest.skip('acting as a second local user needs root')
    try:
        return pwd.getpwnam(OTHER)
    except KeyError:
        subprocess.run(['useradd', '-M', '-s', '/usr/sbin/nologin', OTHER],
                       check=True)
        return pwd.getpwnam(OTHER)


def as_other(*cmd):
    other_user()
    subprocess.run(['runuser', '-u', OTHER, '--'] + list(cmd), check=True,
                   cwd='/')


@pytest.fixture
def shared():
    """A shared temporary directory like /tmp (mode 1777) that the second
    user can reach (pytest's own folder is 0700)."""
    d = tempfile.mkdtemp(prefix='ccl-health-test-shared-', dir='/tmp')
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def plant(link, target):
    """A symbolic link made by the second user where it can (else by us:
    the writer must not follow it either way)."""
    if os.getuid() == 0:
        as_other('ln', '-s', str(target), str(link))
    else:
        os.symlink(target, link)
