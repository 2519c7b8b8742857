"""ReFrame runs through the main command on replayed outputs
(tests/replay: stand-in binaries that replay what 2x H200 printed): a site
whose tests prefix is the replay, the run, its verdict lines and cases."""

import json
import os
import subprocess
import sys

import yaml

from ccl_health.sitedata.transports import NAMES as TRANSPORTS
from conftest import REPO


def make_site(tmp_path, tests_prefix=None):
    site = yaml.safe_load(open(os.path.join(REPO, 'site', 'local.yaml')))
    for key in ('libfabric', 'plugin'):
        d = tmp_path / f'fake-{key}' / 'lib'
        d.mkdir(parents=True)
        site['build'][key]['prefix'] = str(d.parent)
    site['build']['nccl_tests'] = {
        'prefix': tests_prefix or os.path.join(REPO, 'tests', 'replay')}
    sdir = tmp_path / 'site'
    sdir.mkdir()
    (sdir / 'local.yaml').write_text(yaml.safe_dump(site))
    return str(sdir)


def replay_env(tmp_path, env=None, tests_prefix=None):
    """The environment of a run on the replayed outputs: two GPUs assumed
    (sm_90), the local launcher, the site of :func:`make_site`, a build
    cache of its own; ``env`` on top (a value None unsets the variable)."""
    full_env = dict(os.environ, CCL_HEALTH_ASSUME_GPUS='2:sm_90',
                    CCL_HEALTH_LAUNCHER='local',
                    CCL_HEALTH_SITE_DIR=make_site(tmp_path, tests_prefix),
                    CCL_HEALTH_CACHE=str(tmp_path / 'cache'))
    for name, value in (env or {}).items():
        if value is None:
            full_env.pop(name, None)
        else:
            full_env[name] = value
    return full_env


def run_suite(tmp_path, *reframe_args, env=None, tests_prefix=None,
              checks=None, options=()):
    """The main command (``run --output <tmp_path>/out``, ``--checks``
    and ``options`` given) in :func:`replay_env`: (the process, the newest
    run report or None, the output folder)."""
    out = tmp_path / 'out'
    full_env = replay_env(tmp_path, env, tests_prefix)
    cmd = [sys.executable, '-m', 'ccl_health.cli', 'run', '--output',
           str(out)] + (['--checks', checks] if checks else []) + \
        list(options)
    if reframe_args:
        cmd += ['--'] + list(reframe_args)
    p = subprocess.run(cmd, env=full_env, cwd=REPO, capture_output=True,
                       text=True, timeout=600)
    reports = sorted((out / 'reports').glob('run-*.json'))
    report = json.loads(reports[-1].read_text()) if reports else None
    return p, report, out


def verdict_lines(stdout):
    """{transport: line}; lines of other collectives than all_reduce are
    keyed '<collective> <transport>'."""
    transports = TRANSPORTS
    lines = stdout.split('== ccl-health verdict ==')[1].strip().splitlines()
    out = {}
    for ln in lines:
        words = ln.split()
        if words and words[0] in transports:
            out[words[0]] = ln
        elif len(words) > 1 and words[1] in transports:
            out[f'{words[0]} {words[1]}'] = ln
    return out


def cases(report):
    return {tc['transport']: tc for tc in report['runs'][-1]['testcases']
            if not tc['fixture']}
