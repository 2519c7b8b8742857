"""The report page's tests: cases to draw, scripts/report run on a
database, and a real browser (Chromium) to load the page."""

import datetime
import os
import shutil
import subprocess

import pytest

from ccl_health.db import store
from conftest import REPO

T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.timezone.utc)


def report_cli(db, *args):
    """(exit, stdout, stderr) of scripts/report on ``db``."""
    p = subprocess.run(['bash', os.path.join(REPO, 'scripts', 'report'),
                        '--db', str(db), *args], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    return p.returncode, p.stdout, p.stderr


def page_case(run, day, transport='intra', collective='all_reduce',
          verdict='pass', bw=330.0, source='check', name=None, sizes=None,
          reason='', tolerance=0.1, nodelist=''):
    """A case of run ``run`` on day ``day`` after :data:`T0`, its sizes at
    ``bw`` GB/s (1 GiB) and proportionally below."""
    sizes = sizes or [(8, 0.002 * bw / 330), (1 << 20, 40.0 * bw / 330),
                      (1 << 30, bw)]
    return store.CaseRecord(
        run, name or (f'AllReduceSweep %transport={transport}'
                      if collective == 'all_reduce' else
                      f'CollectiveSweep %transport={transport} '
                      f'%coll={collective}'), verdict,
        time=(T0 + datetime.timedelta(days=day)).isoformat(),
        system='local', partition='gpu', nodes=1, ranks=2,
        collective=collective, transport=transport, source=source,
        reason=reason, nodelist=nodelist,
        sizes=[store.SizeRecord(s, b, time_oop_us=s / max(b, 1e-9) / 1e3 + 9,
                                ref=(330.0 if s == 1 << 30 else None),
                                tolerance=tolerance if s == 1 << 30 else None,
                                verdict='pass') for s, b in sizes])


def find_chromium():
    """Chromium's path; Debian's package installed where this is root
    with apt-get, else the test skipped."""
    for name in ('chromium', 'chromium-browser', 'google-chrome'):
        exe = shutil.which(name)
        if exe:
            return exe
    if os.geteuid() != 0 or not shutil.which('apt-get'):
        pytest.skip('no chromium, and not root with apt-get to install '
                    'Debian\'s chromium package')
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    for cmd in (['apt-get', 'update', '-q'],
                ['apt-get', 'install', '-y', '-q', 'chromium']):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           timeout=900)
        if p.returncode:
            pytest.skip(f'could not install chromium ({" ".join(cmd)}: '
                        f'{p.stderr.strip().splitlines()[-1:]})')
    return shutil.which('chromium')


def run_chromium(exe, *args):
    """Headless Chromium's stdout (``--dump-dom``, ``--screenshot``)."""
    p = subprocess.run([exe, '--headless', '--no-sandbox', '--disable-gpu',
                        '--hide-scrollbars', *args], capture_output=True,
                       text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout
