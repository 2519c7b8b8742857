"""``scripts/report prune`` (issue 30, retention): the healthy health
checks older than the site's age roll up into daily rows per node and
key; nothing recorded as a failure or found against history is lost."""

import datetime
import os
import random
import subprocess
import sys

import pytest

from conftest import REPO
from ccl_health import CclHealthError
from ccl_health.db import retention, store
from ccl_health.judge import history
from ccl_health.judge.verdicts import GOOD

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import db_gen  # noqa: E402

END = datetime.datetime(2026, 11, 20, 23, 0, tzinfo=datetime.timezone.utc)
NODES = ('nid00001', 'nid00002', 'nid00003')
DAYS, PER_DAY = 30, 10


def _db(path):
    """Three nodes checked 10 times a day for 30 days; a few failures; a
    drop of nid00002 on day 10 that its verdict did not see (a finding
    against its history only); two nights of sweeps."""
    rng = random.Random(30)
    cases = []
    for d in range(DAYS):
        for k in range(PER_DAY):
            when = END - datetime.timedelta(days=DAYS - 1 - d,
                                            hours=2 * (PER_DAY - 1 - k))
            for node in NODES:
                fail = (d * PER_DAY + k) % 37 == 5 and node == NODES[0]
                c = db_gen.hook_case('perlmutter', node, when, rng,
                                     healthy=not fail)
                if node == NODES[1] and d == 10 and k == 2:
                    c.sizes[0].busbw *= 0.5          # verdict pass, a drop
                cases.append(c)
    with store.open_store(path) as db:
        db.add_cases(cases)
        db_gen.write_nights(db, 'perlmutter', 2, END)
    return path


def _state(path):
    """(the failing cases, every column; the findings against history;
    the healthy checks counted)."""
    with store.open_store(path, readonly=True) as s:
        cases = s.cases()
        found = history.detect(s.records(), accepted=s.acceptances(),
                               baselines=s.baselines())
        daily = retention.daily(s)
    failing = sorted((tuple(sorted(c.items())) for c in cases
                      if c['verdict'] not in GOOD),
                     key=repr)
    findings = sorted((f.kind, f.run_id, f.key, f.size, round(f.value, 6))
                      for f in found)
    healthy = sum(1 for c in cases if c['source'] == 'health' and
                  c['verdict'] in GOOD)
    return failing, findings, healthy + sum(r['checks'] for r in daily), \
        len(cases)


def test_prune_keeps_every_failure_and_finding(tmp_path):
    path = _db(str(tmp_path / 'r.db'))
    failing, findings, checks, n = _state(path)
    assert failing and any(f[0] == 'drop' and f[2][8] == NODES[1]
                           for f in findings), findings
    now = END + datetime.timedelta(hours=1)
    with store.open_store(path) as s:
        plan = retention.prune(s, 14, dry_run=True, now=now)
    assert plan.checks > 0 and plan.kept_findings >= 1
    assert plan.lines(True)[0].startswith(
        f'would roll up {plan.checks} healthy health check(s) of ')
    assert _state(path) == (failing, findings, checks, n)     # untouched
    with store.open_store(path) as s:
        done = retention.prune(s, 14, now=now)
    assert (done.checks, done.rows) == (plan.checks, plan.rows)
    after = _state(path)
    assert after[0] == failing                 # every failure, as it was
    assert after[1] == findings                # every finding, judged alike
    assert after[2] == checks                  # every check counted
    assert after[3] == n - done.checks
    with store.open_store(path, readonly=True) as s:
        rows = retention.daily(s)
        # per day, node, key and size; the days before the cut only
        assert rows and all(r['day'] < plan.cutoff for r in rows)
        # (nid00001's failures are findings too: their history is kept)
        assert NODES[2] in {r['node'] for r in rows} <= set(NODES)
        assert all(r['busbw_min'] <= r['busbw_median'] <= r['busbw_max']
                   for r in rows if r['busbw_min'] is not None)
        # the sweeps are never touched
        assert len(s.cases("WHERE source = 'sweep'")) == 30
    # a second prune finds nothing left to roll up
    with store.open_store(path) as s:
        again = retention.prune(s, 14, now=now)
    assert again.checks == 0 and again.lines(False)[0].startswith(
        'nothing to roll up before ')


def test_prune_through_the_cli_and_its_floor(tmp_path):
    path = _db(str(tmp_path / 'c.db'))
    cmd = [os.path.join(REPO, 'scripts', 'report'), '--db', path, 'prune']
    p = subprocess.run(cmd + ['--older-than', '3'], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and 'is under 7 days' in p.stderr, p.stderr
    p = subprocess.run(cmd + ['--older-than', '10', '--dry-run'],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith('would roll up '), p.stdout
    with store.open_store(path, readonly=True) as s:
        assert retention.daily(s) == []


def test_prune_needs_the_current_schema(tmp_path):
    path = _db(str(tmp_path / 'o.db'))
    with store.open_store(path) as s:
        s.execute("UPDATE meta SET value = '6' WHERE key = "
                  "'schema_version'")
        s.conn.commit()
        s.__dict__.pop('_version', None)     # read it again
        with pytest.raises(CclHealthError, match='open it for writing'):
            retention.prune(s, 30)
