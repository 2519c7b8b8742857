"""The hook's children in NHC's empty environment (issue 42, item 4): the
hook run under ``env -i`` has no ``PATH``; Open MPI's ``mpirun`` (the old
path, ``mpirun ... all_reduce_perf``) then finds no ssh / rsh and stops
before any rank (``plm_rsh_component.c(335) Not found``, captured on
2x H200: tests/fixtures/device/hook-timing-x2.md).  The probes' environment
(:func:`ccl_health.hook.settings.resolve`) gives them a ``PATH`` and, where
no remote shell is on it, Open MPI's single-node launcher.
``tests/replay/fake-node/openmpi-launch`` is the stand-in of Open MPI 4.1's
rule."""

import os
import shlex

import pytest

from ccl_health.hook import bounded, settings as hook_settings
from helpers.node import FAKE

OMPI = os.path.join(FAKE, 'openmpi-launch')


def probe_env(environ, launcher=(OMPI, '-np')):
    s = hook_settings.parse(['--launcher', shlex.join(launcher)], env=environ)
    return dict(hook_settings.resolve(s, None, environ).env)


def start(env):
    return bounded.bounded([OMPI, '2', '/bin/sh', '-c', 'echo started'],
                           env, 30)


@pytest.mark.parametrize('environ', [
    {},                                       # env -i: no PATH at all
    {'HOME': '/nonexistent', 'CCL_HEALTH_HOSTNAME': 'gpu001'},
])
def test_the_launcher_starts_in_an_empty_environment(environ):
    env = probe_env(environ)
    got = start(env)
    assert got.returncode == 0 and got.output.strip() == 'started', \
        got.output
    # the standard PATH first, then the launcher's folder
    assert env['PATH'].split(os.pathsep)[:len(os.defpath.split(
        os.pathsep))] == os.defpath.split(os.pathsep)
    assert FAKE in env['PATH'].split(os.pathsep)


def test_the_stand_in_stops_as_open_mpi_does_without_an_agent():
    # the oracle of the test above: without the hook's settings the
    # stand-in fails as mpirun did on the device
    got = start({})
    assert got.returncode == 243 and 'plm_rsh_component.c(335)' in \
        got.output


def test_no_remote_shell_on_path_is_the_single_node_launcher(tmp_path):
    bare = tmp_path / 'bin'
    bare.mkdir()
    env = probe_env({'PATH': str(bare)})
    assert env['PATH'] == str(bare)          # a PATH given is kept
    assert env['OMPI_MCA_plm_rsh_agent'] == ''
    assert start(env).returncode == 0
    # a remote shell on PATH: Open MPI left as it is
    (bare / 'ssh').write_text('#!/bin/sh\n')
    (bare / 'ssh').chmod(0o755)
    assert 'OMPI_MCA_plm_rsh_agent' not in probe_env({'PATH': str(bare)})
    # the site's or the caller's own choice is kept
    assert probe_env({'PATH': str(tmp_path), 'OMPI_MCA_plm': 'isolated'})[
        'OMPI_MCA_plm'] == 'isolated'


def test_a_launcher_named_by_its_name_adds_its_folder():
    env = probe_env({}, launcher=('sh', '-c'))
    assert env['PATH'].split(os.pathsep)[:2] == os.defpath.split(
        os.pathsep)[:2]
