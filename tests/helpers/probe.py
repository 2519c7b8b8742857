"""The hook with its one probe process (ccl-health-probe) or the copy
matrix and the all_reduce apart (issue 42), on an install prefix as the
builders leave it, the captures of tests/replay replayed."""

import json
import os
import shutil

from ccl_health.evidence import copymatrix as links
from helpers.node import REPLAY, timed_hook


PROBE = os.path.join(REPLAY, 'probe', 'ccl-health-probe')
LINKS = os.path.join(REPLAY, 'links', 'ccl-health-links')
CAPTURES = os.path.join(REPLAY, 'captures')


def prefix(tmp_path, name, probe=True):
    """An install prefix as the builders leave it: all_reduce_perf (the
    replayed one), bin/ccl-health-links and (``probe``)
    bin/ccl-health-probe."""
    p = tmp_path / name
    (p / 'bin').mkdir(parents=True)
    os.symlink(os.path.join(REPLAY, 'bin', 'all_reduce_perf'),
               p / 'bin' / 'all_reduce_perf')
    os.symlink(LINKS, p / 'bin' / links.PROGRAM)
    if probe:
        os.symlink(PROBE, p / 'bin' / links.PROBE_PROGRAM)
    return str(p)


def probe_hook(tmp_path, probe, *args, env=None, case='intra'):
    """(exit, line, --json) of the hook with the prefix with or without
    the one probe process, the same captures replayed."""
    run = tmp_path / ('one' if probe else 'apart')
    run.mkdir()
    capdir = run / 'captures'
    shutil.copytree(CAPTURES, capdir, symlinks=True)
    if isinstance(case, tuple):       # (name, edit of its stdout)
        name, edit = case
        out = capdir / name / 'stdout.txt'
        out.write_text(edit(out.read_text()))
        case = name
    e = {'CCL_HEALTH_REPLAY_DIR': str(capdir),
         'CCL_HEALTH_REPLAY_INTRA': case,
         'CCL_HEALTH_REPLAY_PROBE': str(capdir / case),
         'CCL_HEALTH_REPLAY_LINKS_ARGS': str(run / 'links-args'),
         'CCL_HEALTH_REPLAY_PROBE_ARGS': str(run / 'probe-args')}
    e.update(env or {})
    rc, line, wall = timed_hook(run, '--tests-prefix',
                                prefix(run, 'prefix', probe), *args, env=e)
    return rc, line, json.loads((run / 'detail.json').read_text()), run
