"""A database that fills every part of the report page (issue 45), and
the page drawn from it with what changes from run to run taken out: the
oracle of ``tests/fixtures/report-page/`` (the page the code before
issue 45's page work drew, 3176cf3) is compared with it.

Ten nightly sweeps of five transports and three collectives
(``benchmarks/db_gen.py``: its recorder, the sweeps' versions and
environment), a drop on night 8 (one series), a series below its reference
throughout, a change of NCCL's version on night 9 (another); 12 nodes'
health checks, 4 a day over 6 days, one in 12 failing; a build failure, a hang, an aborted and a skipped case; a
framework benchmark; a series measured once."""

import datetime
import hashlib
import os
import random
import re
import sys

from ccl_health.db import store
from conftest import REPO

END = datetime.datetime(2026, 11, 20, 3, 0, tzinfo=datetime.timezone.utc)
#: the page's clock (its "generated" time, the days since a failure)
NOW = END + datetime.timedelta(hours=5)


def _db_gen():
    sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
    import db_gen
    return db_gen


def _case(run, when, name, verdict, coll='all_reduce', transport='intra',
          reason='', sizes=((1 << 30, 150.0),), source='sweep'):
    return store.CaseRecord(
        run, name, verdict, time=when.isoformat(timespec='seconds'),
        system='perlmutter', partition='gpu', nodes=1, ranks=4,
        collective=coll, transport=transport, source=source, reason=reason,
        nodelist='n0', sizes=[store.SizeRecord(s, b, time_oop_us=s / b / 1e3,
                                               ref=200.0, tolerance=0.1,
                                               verdict=verdict)
                              for s, b in sizes])


def write(path):
    """The database at ``path`` (SQLite), written once."""
    gen = _db_gen()
    rng = random.Random(7)
    with store.open_store(path) as db:
        for n in range(10):
            when = END - datetime.timedelta(days=9 - n)
            cases = gen.sweep_cases('perlmutter', n, when, rng)
            for c in cases:
                what = (c.transport, c.collective)
                if n == 9 and what == ('intra', 'reduce_scatter'):
                    c.versions = dict(c.versions, nccl_version='2.29.1')
                if what == ('net-plugin-noGDR', 'all_gather') or (
                        n == 8 and what == ('net-socket', 'all_reduce')):
                    for s in c.sizes:
                        s.busbw = s.busbw * 0.5
                        s.verdict = 'below-reference'
                    c.verdict, c.reason = 'below-reference', \
                        'below reference at every size'
            db.add_cases(cases)
        gen.write_checks(db, 'perlmutter', 12, 6, 4, END, seed=3, fail=0.08)
        night = END - datetime.timedelta(hours=1)
        run = f'nightly-{night:%Y%m%dT%H%M%SZ}-extra'
        db.add_cases([
            _case(run, night, 'BuildAwsOfi', 'build-failed',
                  transport='net-plugin', reason='build-failed: '
                  'aws-ofi-nccl: configure: error: libfabric not found',
                  sizes=()),
            _case(run, night, 'AllReduceSweep %transport=net-socket %n=4',
                  'hang', transport='net-socket',
                  reason='hang: no output for 600 s', sizes=()),
            _case(run, night, 'CollectiveSweep %coll=alltoall', 'aborted',
                  coll='alltoall', reason='aborted: SIGTERM', sizes=()),
            _case(run, night, 'CollectiveSweep %transport=net-plugin-gdr',
                  'skipped', transport='net-plugin-gdr',
                  reason='skipped: GPUDirect RDMA unsupported', sizes=()),
            _case(run, night, 'TorchBandwidth', 'pass',
                  coll='torch_all_reduce', source='framework',
                  sizes=((1 << 20, 20.0), (1 << 26, 120.0))),
            _case(run, night, 'CollectiveSweep %coll=broadcast', 'pass',
                  coll='broadcast', sizes=((1 << 20, 30.0),
                                           (1 << 30, 190.0)))])
    return path


def page(path, outdir, run_id=None):
    """(the page's HTML with its database's path and its clock taken out,
    ``{figure name: sha256 of its PNG}``, the terminal summary) of the
    database at ``path``, drawn into ``outdir`` (figures linked, never
    inline)."""
    from ccl_health import report
    with store.open_store(path, readonly=True) as db:
        index, text = report.build(db, outdir, now=NOW, inline=False,
                                   run_id=run_id)
    with open(index, encoding='utf-8') as fp:
        html = fp.read().replace(str(path), 'DB')
    html = re.sub(re.escape(NOW.isoformat(timespec='seconds')), 'NOW', html)
    figures = {}
    for name in sorted(os.listdir(outdir)):
        if name.endswith('.png'):
            with open(os.path.join(outdir, name), 'rb') as fp:
                figures[name] = hashlib.sha256(fp.read()).hexdigest()
    return html, figures, text
