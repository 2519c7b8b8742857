""""What changed since the last good run?" for a failure as for a drift
(issue 40): ``scripts/report since`` names the versions and environment
that differ between the last passing run and the first bad one (a crash
too, which measured nothing), and ``scripts/report compare`` names them
between two runs, whatever they measured."""

import datetime
import os
import subprocess

from conftest import REPO

from ccl_health.db import store

T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.timezone.utc)


def _case(run, day, verdict, nccl, env, sizes):
    return store.CaseRecord(
        run, 'AllReduceSweep %transport=net-socket', verdict,
        time=(T0 + datetime.timedelta(days=day)).isoformat(),
        system='local', partition='gpu', nodes=1, ranks=2,
        collective='all_reduce', transport='net-socket', source='check',
        reason='' if verdict == 'pass' else 'crash: all_reduce_perf exited '
        'with status 1 after NCCL WARN Failed to initialize any NET plugin',
        versions={'nccl_version': nccl}, env=env,
        sizes=[store.SizeRecord(s, b, verdict=verdict) for s, b in sizes])


def _report(db, *args):
    p = subprocess.run(['bash', os.path.join(REPO, 'scripts', 'report'),
                        '--db', db, *args], capture_output=True, text=True,
                       cwd=REPO, timeout=300)
    return p.returncode, p.stdout + p.stderr


def test_a_crash_says_what_changed_since_the_last_good_run(tmp_path):
    db = str(tmp_path / 'perf.db')
    good = {'NCCL_NET': 'Socket', 'NCCL_P2P_DISABLE': '1'}
    bad = {'NCCL_NET': 'bogus', 'NCCL_P2P_DISABLE': '1'}
    with store.open_store(db) as s:
        for d in range(3):
            s.add_case(_case(f'night-{d}', d, 'pass', '2.21.5', good,
                             [(1 << 20, 2.0), (1 << 27, 9.0)]))
        s.add_case(_case('night-3', 3, 'crash', '2.28.3', bad, []))
    rc, out = _report(db, 'since', 'net-socket')
    assert rc == 1, out
    assert 'bad since' in out and 'run night-3' in out
    assert 'changed: nccl: 2.21.5 -> 2.28.3' in out, out
    assert 'changed: NCCL_NET: Socket -> bogus' in out
    assert 'NCCL_P2P_DISABLE' not in out
    rc, out = _report(db, 'compare', 'night-2', 'night-3')
    assert rc == 0, out
    assert 'changed: nccl: 2.21.5 -> 2.28.3' in out, out
    assert 'changed: NCCL_NET: Socket -> bogus' in out
