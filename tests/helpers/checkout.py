"""A checkout of its own (its parts linked from this one) and init-site run
in it: what init-site writes is never this checkout's."""

import os
import subprocess

from conftest import REPO

#: PATH of an empty environment (cron's, slurmd's)
BASE_PATH = '/usr/bin:/bin'


#: what a checkout is made of (tests/ left out: product code never reads it)
PARTS = ('ccl_health', 'config', 'checks', 'builders', 'site', 'reference',
         'scripts', '.venv')


def make_checkout(folder):
    tree = folder / 'ccl-health'
    tree.mkdir()
    for part in PARTS:
        os.symlink(os.path.join(REPO, part), tree / part)
    return tree


def init_site(checkout, site, *args, env=None):
    p = subprocess.run([str(checkout / 'scripts' / 'init-site'), str(site),
                        *args], env=env or {'PATH': BASE_PATH,
                                            'HOME': str(site.parent)},
                       capture_output=True, text=True, timeout=120,
                       cwd=str(checkout))
    assert p.returncode == 0, p.stdout + p.stderr
    return p
