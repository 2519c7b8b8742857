"""Synthetic but schema-valid data for the database benchmark
(``benchmarks/db_scale.py``) and its CI test (``tests/test_db_scale.py``),
written through the project's own recorder:

* a health check: a :class:`ccl_health.hook.judging.HookResult` with its
  probes (the all-GPU all_reduce and the GPU pairs' rounds, as
  ``hook/check.py`` runs them: 8 GCDs on Frontier, 4 A100s on Perlmutter),
  made a case by :func:`ccl_health.hook.record.case_of` (what the hook
  records), 99 % healthy; a failure carries a node state of the measured
  shape (``tests/fixtures/device/merged-hook``) for every GPU and its tries;
* a nightly sweep: 5 transports x 3 collectives x 31 sizes (8 B .. 8 GiB),
  each case with :func:`ccl_health.db.recorder.run_environment` of a site's
  variables and the node state the sweep records
  (:data:`ccl_health.evidence.nodestate.nodedata.NODE_STATE_KEY`);
* written in bulk (:meth:`ccl_health.db.store.Store.add_cases`, one
  transaction per batch).

The last check and the last night are at ``end`` (default now), so a
24-hour window holds the last day."""

import datetime
import json
import os
import random
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from ccl_health.db import recorder, store  # noqa: E402
from ccl_health.db import schema
from ccl_health.evidence.nodestate.nodedata import NODE_STATE_KEY  # noqa: E402
from ccl_health.hook import record as hook_record  # noqa: E402
from ccl_health.hook.judging import HookResult  # noqa: E402
from ccl_health.hook.probe import Probe  # noqa: E402

#: name, node prefix, nodes, GPUs (ranks) per node, a healthy 1 GiB
#: all_reduce inside the node (GB/s), a pair's
MACHINES = {
    'frontier': ('frontier', 9408, 8, 180.0, 50.0),
    'perlmutter': ('nid', 1800, 4, 230.0, 80.0),
}
TRANSPORTS = ('intra', 'net-socket', 'net-plugin', 'net-plugin-gdr',
              'net-plugin-noGDR')
COLLECTIVES = ('all_reduce', 'all_gather', 'reduce_scatter')
SIZES = [8 << i for i in range(31)]            # 8 B .. 8 GiB
#: a site's variables the runs carry (run_environment keeps these
#: prefixes)
SITE_ENV = {'NCCL_DEBUG': 'WARN', 'NCCL_IB_HCA': 'cxi0,cxi1,cxi2,cxi3',
            'NCCL_NET_GDR_LEVEL': 'PHB', 'NCCL_SOCKET_IFNAME': 'hsn',
            'NCCL_CROSS_NIC': '1', 'FI_PROVIDER': 'cxi',
            'FI_CXI_DEFAULT_CQ_SIZE': '131072', 'FI_CXI_RX_MATCH_MODE':
            'software', 'FI_MR_CACHE_MONITOR': 'userfaultfd',
            'CUDA_VISIBLE_DEVICES': '0,1,2,3', 'HSA_FORCE_FINE_GRAIN_PCIE':
            '1', 'NCCL_NET_PLUGIN': 'libnccl-net-ofi.so'}
VERSIONS = {'nccl_version': '2.28.3', 'plugin_version': 'aws-ofi-nccl 1.21.1',
            'libfabric_version': '1.22.0', 'provider': 'cxi',
            'cuda_driver': '12.8', 'driver': '580.159.04',
            'nccl_tests': '2.19.6'}
FIXTURE = os.path.join(REPO, 'tests', 'fixtures', 'device', 'merged-hook',
                       'merged', 'idle-1.json')


def _node_state(gpus):
    """A node state of the measured shape for ``gpus`` GPUs."""
    with open(FIXTURE) as fp:
        state = json.load(fp)['node_state']
    for side in ('before', 'after'):
        one = state[side]['gpus'][0]
        state[side]['gpus'] = [dict(one, index=i, uuid=f'GPU-{i:08x}-synth')
                               for i in range(gpus)]
    return state


def pairs(gpus):
    """The GPU pairs the hook measures (every pair, in rounds)."""
    return [(a, b) for a in range(gpus) for b in range(a + 1, gpus)]


def hook_result(machine, rng, healthy=True):
    """One health check's :class:`HookResult` on ``machine``."""
    _, _, gpus, bw, pair_bw = MACHINES[machine]
    main = Probe(tuple(range(gpus)), 1 << 30, rng.gauss(bw, bw * 0.01),
                 expected=bw * 0.9, ref=bw, proven='intra',
                 paths='NVLink' if machine == 'perlmutter' else 'xGMI',
                 ok=True, seconds=1.2, versions=VERSIONS, verdict='pass',
                 tokens=tuple(str(g) for g in range(gpus)))
    probes = [main] + [
        Probe(p, 256 << 20, rng.gauss(pair_bw, pair_bw * 0.01),
              expected=pair_bw * 0.9, ref=pair_bw, proven='intra', ok=True,
              seconds=0.4, versions=VERSIONS, verdict='pass',
              tokens=tuple(map(str, p))) for p in pairs(gpus)]
    if healthy:
        return HookResult(0, f'HEALTHY: all_reduce 1GiB {main.busbw:.1f} '
                          f'GB/s (reference {bw:.1f}) on {gpus} GPUs, '
                          f'{len(probes) - 1} GPU pairs', probes, 14.2,
                          verdict='pass', system=machine, partition='gpu')
    main.busbw *= 0.6
    main.verdict, main.ok = 'below-reference', False
    main.why = f'1GiB {main.busbw:.2f} vs {bw:.2f} GB/s (allowed -10%)'
    return HookResult(1, f'UNHEALTHY: isolate: all GPUs: attempt 2 of 2: '
                      f'below-reference: {main.why}', probes, 31.0,
                      attempts=2, verdict='below-reference', system=machine,
                      partition='gpu', node_state=_node_state(gpus),
                      attempt_notes=[f'attempt 1 of 2: below-reference: '
                                     f'{main.why}'] * 2,
                      action='isolate', cause='bandwidth',
                      role={'state': 'IDLE', 'gres': f'gpu:{gpus}'})


def hook_case(machine, node, when, rng, healthy=True):
    """The case the hook records for one check (its own recorder)."""
    args = type('Args', (), {'db': None, 'hostname': node})()
    case = hook_record.case_of(args, hook_result(machine, rng, healthy),
                               environ=SITE_ENV)
    case.time = when.isoformat(timespec='seconds')
    case.run_id = f'health-{case.time}-{node}'
    return case


def sweep_cases(machine, night, when, rng, level=1.0):
    """The 15 cases of one nightly sweep."""
    states = NODE_STATE_KEY
    doc = {'before': _node_state(MACHINES[machine][2])['before'],
           'after': _node_state(MACHINES[machine][2])['after'],
           'samples': 12, 'foreign': [], 'causes': []}
    env = recorder.run_environment({'NCCL_DEBUG_FILE': f'/tmp/n{night}.%h'},
                                   environ=SITE_ENV)
    env[states] = json.dumps(doc, sort_keys=True)
    run_id = f'nightly-{when:%Y%m%dT%H%M%SZ}-gen'
    out = []
    for ti, transport in enumerate(TRANSPORTS):
        nodes = 1 if transport == 'intra' else 2
        for coll in COLLECTIVES:
            peak = (200.0 if transport == 'intra' else 40.0) / (1 + ti / 4)
            sizes = []
            for s in SIZES:
                bw = level * peak * s / (s + (1 << 22)) * \
                    rng.gauss(1.0, 0.01)
                ref = peak * s / (s + (1 << 22))
                sizes.append(store.SizeRecord(
                    s, bw, bw, bw * 0.99, bw / 1.75, bw / 1.76,
                    s / max(bw, 1e-9) / 1e3, s / max(bw, 1e-9) / 1e3,
                    ref, 0.1, 'pass' if bw >= ref * 0.9 else
                    'below-reference'))
            verdict = 'pass' if all(x.verdict == 'pass' for x in sizes) \
                else 'below-reference'
            out.append(store.CaseRecord(
                run_id=run_id, case_name=f'AllReduceSweep %transport='
                f'{transport} %collective={coll}', verdict=verdict,
                time=when.isoformat(timespec='seconds'), system=machine,
                partition='gpu', environ='gnu',
                nodelist=','.join(f'n{i}' for i in range(nodes)),
                nodes=nodes, ranks=nodes * MACHINES[machine][2],
                collective=coll, transport=transport, proven=transport,
                reason='' if verdict == 'pass' else 'below reference',
                versions=VERSIONS, env=env, suite_revision='abc123',
                source='sweep', sizes=sizes))
    return out


def write_nights(db, machine, nights, end, seed=1):
    """``nights`` nightly sweeps, one a day, the last at ``end``."""
    rng = random.Random(seed)
    for n in range(nights):
        when = end - datetime.timedelta(days=nights - 1 - n)
        db.add_cases(sweep_cases(machine, n, when, rng))


def write_checks(db, machine, nodes, days, per_day, end, seed=2,
                 batch=5000, fail=0.01, progress=None, ordered=True):
    """``per_day`` checks a day of each of ``nodes`` nodes over ``days``
    days up to ``end``; ``fail``: the share that fails.  Returns how many
    were written.  A round's checks (each node's, spread over an hour)
    are written in the order of their time, as a database receives them
    (each recorded as it ends); ``ordered=False``: in the order of the
    nodes (runs of falling times: the worst case of a B-tree's fill, the
    order of the measurements before 2026-11-28)."""
    rng = random.Random(seed)
    prefix = MACHINES[machine][0]
    names = [f'{prefix}{i:05d}' for i in range(1, nodes + 1)]
    start = end - datetime.timedelta(days=days)
    step = datetime.timedelta(days=1) / per_day
    done, pending = 0, []
    for k in range(days * per_day):
        base = start + step * (k + 1)
        when = [base - datetime.timedelta(seconds=(i * 7) % 3600)
                for i in range(len(names))]
        healthy = [rng.random() >= fail for _ in names]
        order = sorted(range(len(names)), key=lambda i: (when[i], i)) \
            if ordered else range(len(names))
        for i in order:
            pending.append(hook_case(machine, names[i], when[i], rng,
                                     healthy=healthy[i]))
            if len(pending) >= batch:
                db.add_cases(pending)
                done += len(pending)
                pending = []
                if progress:
                    progress(done)
    if pending:
        db.add_cases(pending)
        done += len(pending)
    return done


def as_schema_9(db):
    """The store ``db`` (written by this version) as schema 9 left it:
    nothing kept of its days, no list of stale keys, none of their
    triggers, the time index of the time alone, no standing line kept with
    a key's state, no ``changed:`` lines kept with a finding (what a
    reader of schema 9 reads: every day counted, every key of a window
    looked at, each key's state read, what changed before each drop read
    from its cases).  Commits."""
    with db.transaction():
        if 'standing' in db.columns('key_state'):
            db.execute('ALTER TABLE key_state DROP COLUMN standing')
        if 'changed' in db.columns('findings'):
            db.execute('ALTER TABLE findings DROP COLUMN changed')
        if db.kind == 'sqlite':
            for (name,) in db.conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = "
                    "'trigger'").fetchall():
                db.execute(f'DROP TRIGGER {name}')
        else:
            db.execute('DROP TRIGGER IF EXISTS cases_day_changed ON cases')
            db.execute('DROP TRIGGER IF EXISTS sizes_day_changed ON '
                       'measurements')
            db.execute('DROP TRIGGER IF EXISTS key_state_changed ON '
                       'key_state')
            db.execute('DROP TRIGGER IF EXISTS series_last_changed ON '
                       'cases')
        if 'last_time' in db.columns('series'):
            db.execute('ALTER TABLE series DROP COLUMN last_time')
        db.execute('DROP INDEX IF EXISTS cases_time')
        db.execute('CREATE INDEX cases_time ON cases (time)')
        db.execute('DROP TABLE IF EXISTS kept_days')
        db.execute('DROP TABLE IF EXISTS stale_keys')
        db.execute("UPDATE meta SET value = '9' WHERE key = "
                   "'schema_version'")
    db._version = 9


def as_schema_8(db):
    """The store ``db`` (written by this version) as schema 8 left it: no
    table of the series, no series id, the series index of ten columns
    and the kind index of every kind (the schema's own statements).  For
    the upgrade's measurement and test; commits."""
    as_schema_9(db)
    with db.transaction():
        for stmt in ('DROP INDEX cases_by_series', 'DROP INDEX cases_kind',
                     'ALTER TABLE cases DROP COLUMN series_id',
                     'DROP TABLE series'):
            db.execute(stmt)
        for stmt in schema._MIGRATIONS[6]:
            if isinstance(stmt, str) and ('EXISTS cases_series ' in stmt or
                                          'EXISTS cases_kind ' in stmt):
                db.execute(stmt)
        db.execute("UPDATE meta SET value = '8' WHERE key = "
                   "'schema_version'")
