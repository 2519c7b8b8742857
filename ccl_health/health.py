"""The node health hook: a quick single-node check under a hard time limit,
for a node health checker (LBNL NHC, Slurm's HealthCheckProgram).

    python -m ccl_health.health [--limit 20] [--size 1G] [--repeats 2] ...

It prints ONE line and exits with
  0  HEALTHY
  1  UNHEALTHY: <what: which GPU / pair / transport, measured vs expected>
  2  COULD-NOT-CHECK: <why> (missing binary, no driver, its own error):
     never a reason to drain the node.
A run past the limit is UNHEALTHY with reason "hang".  The full detail goes
into the performance database (the same store as the nightly runs).
It builds nothing: it runs the binaries the builders installed."""

import argparse
import dataclasses
import glob
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from . import CclHealthError, nccltests, reference, site as site_data
from . import transport as tproof
from .buildcache import STAMP, cache_dir
from .node import detect_gpus
from .units import format_size, parse_size

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEALTHY, UNHEALTHY, COULD_NOT_CHECK = 0, 1, 2


class CouldNotCheck(Exception):
    pass


@dataclasses.dataclass
class Probe:
    """One all_reduce on a set of GPUs."""
    gpus: tuple
    size: int
    busbw: float = 0.0
    expected: float = 0.0     # the lower bound: reference x (1 - tolerance)
    ref: float = 0.0
    proven: str = ''
    paths: str = ''
    ok: bool = False
    why: str = ''
    seconds: float = 0.0
    versions: dict = dataclasses.field(default_factory=dict)


def find_tests_prefix(explicit=None, site=None):
    if explicit:
        return explicit
    conf = (site.build.get('nccl_tests') or {}) if site else {}
    if conf.get('prefix'):
        return conf['prefix']
    built = [p for p in glob.glob(os.path.join(cache_dir(), 'nccl-tests-*'))
             if os.path.exists(os.path.join(p, STAMP))]
    if not built:
        raise CouldNotCheck(f'no nccl-tests build in {cache_dir()} (run the '
                            f'suite once, or give --tests-prefix)')
    return max(built, key=lambda p: os.path.getmtime(os.path.join(p, STAMP)))


def visible_gpus(gpus, env):
    """GPU indices a CUDA program sees here (CUDA_VISIBLE_DEVICES hides
    the rest from it, not from nvidia-smi)."""
    cvd = env.get('CUDA_VISIBLE_DEVICES')
    if cvd is None:
        return list(range(gpus.count))
    return [int(x) for x in cvd.split(',') if x.strip().isdigit() and
            int(x) < gpus.count]


def run_probe(probe, binary, launcher, env, deadline, iters, workdir):
    remaining = deadline - time.monotonic()
    if remaining < 1:
        probe.why = 'hang: no time left for this probe'
        return probe
    logdir = tempfile.mkdtemp(prefix='probe-', dir=workdir)
    penv = dict(env, CUDA_VISIBLE_DEVICES=','.join(map(str, probe.gpus)),
                NCCL_DEBUG='INFO', NCCL_DEBUG_SUBSYS='INIT,NET',
                NCCL_DEBUG_FILE=os.path.join(logdir, 'nccl-debug.%h.%p.log'))
    cmd = launcher + [str(len(probe.gpus)), binary, '-g', '1',
                      '-b', str(probe.size), '-e', str(probe.size),
                      '-n', str(iters), '-w', '2',
                      '-T', str(max(1, int(remaining) - 1))]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=penv, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=remaining)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:         # a rank that left the process group may hold the pipe
            proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        probe.seconds = time.monotonic() - t0
        probe.why = (f'hang: all_reduce on GPUs {_gpus(probe.gpus)} did not '
                     f'finish within the {probe.seconds:.0f} s left')
        return probe
    probe.seconds = time.monotonic() - t0
    res = nccltests.parse_text(out)
    ev = tproof.read_evidence(tproof.debug_log_files(logdir))
    probe.versions = ev.versions
    proof = tproof.prove('intra', ev)
    probe.proven = proof.proven or 'none'
    probe.paths = ', '.join(sorted(ev.via)) or 'no channels'
    if res.timed_out:
        probe.why = f'hang: nccl-tests timed out on GPUs {_gpus(probe.gpus)}'
    elif not res.rows:
        last = (res.errors or out.strip().splitlines() or ['no output'])[-1]
        probe.why = (f'all_reduce on GPUs {_gpus(probe.gpus)} failed '
                     f'(exit {proc.returncode}): {last.strip()[:200]}')
    elif res.wrong_total or res.out_of_bounds:
        probe.why = (f'wrong results on GPUs {_gpus(probe.gpus)} '
                     f'({res.wrong_total} wrong elements)')
    elif not proof.ok:
        probe.why = f'GPUs {_gpus(probe.gpus)}: {proof.reason}'
    else:
        row = res.by_size().get(probe.size, res.rows[-1])
        probe.busbw = row.busbw
        if probe.expected and probe.busbw < probe.expected:
            probe.why = (f'GPUs {_gpus(probe.gpus)} all_reduce '
                         f'{format_size(probe.size)}: {probe.busbw:.1f} GB/s '
                         f'< {probe.expected:.1f} (reference {probe.ref:.1f}'
                         f' GB/s; channels {probe.paths})')
        else:
            probe.ok = True
    return probe


def _gpus(gpus):
    return '<->'.join(map(str, gpus)) if len(gpus) == 2 else \
        ','.join(map(str, gpus))


def pair_rounds(gpus):
    """Every pair of GPUs, in rounds of disjoint pairs (run together)."""
    pairs = list(itertools.combinations(gpus, 2))
    rounds = []
    while pairs:
        used, this = set(), []
        for p in list(pairs):
            if not used & set(p):
                this.append(p)
                used |= set(p)
                pairs.remove(p)
        rounds.append(this)
    return rounds


@dataclasses.dataclass
class Verdict:
    code: int
    line: str
    probes: list
    seconds: float
    attempts: int = 1


def check(args, env=None):
    env = dict(os.environ if env is None else env)
    t0 = time.monotonic()
    deadline = t0 + args.limit
    try:
        site = site_data.load(args.site_dir, args.system)
        env.update(site.env)
        ref = reference.load_for_system(args.reference_dir, args.system)
    except CclHealthError as err:
        raise CouldNotCheck(str(err)) from None
    gpus = detect_gpus()
    if gpus.count == 0:
        raise CouldNotCheck(gpus.why_none)
    entry = None
    if args.expect_gpus:
        expected_gpus = args.expect_gpus
    else:
        expected_gpus = gpus.count
        for n in range(gpus.count, 1, -1):
            entry = ref.lookup(args.partition, 'intra', 'all_reduce', 1, n)
            if entry:
                break
    visible = visible_gpus(gpus, env)
    if len(visible) < expected_gpus:
        return Verdict(UNHEALTHY, f'UNHEALTHY: missing GPU: {len(visible)} of '
                       f'{expected_gpus} GPUs visible to CUDA '
                       f'(nvidia-smi lists {gpus.count}; CUDA_VISIBLE_DEVICES='
                       f'{env.get("CUDA_VISIBLE_DEVICES", "unset")})', [],
                       time.monotonic() - t0)
    entry = entry or ref.lookup(args.partition, 'intra', 'all_reduce', 1,
                                len(visible))
    binary = os.path.join(find_tests_prefix(args.tests_prefix, site), 'bin',
                          'all_reduce_perf')
    if not os.access(binary, os.X_OK):
        raise CouldNotCheck(f'{binary} is missing or not executable')
    launcher = args.launcher.split()
    size = parse_size(args.size)
    pair_entry = ref.lookup(args.partition, 'intra', 'all_reduce', 1, 2)

    def expect(e):
        if e and size in e.busbw:
            return e.busbw[size], e.busbw[size] * (1 - e.tolerance_at(size))
        return 0.0, 0.0

    probes, attempts = [], 0
    with tempfile.TemporaryDirectory(prefix='ccl-health-') as work:
        for attempts in range(1, args.repeats + 1):
            probes = []
            r, lo = expect(entry)
            p = run_probe(Probe(tuple(visible), size, expected=lo, ref=r),
                          binary, launcher, env, deadline, args.iters, work)
            probes.append(p)
            if p.ok and len(visible) > 2 and not args.no_pairs:
                pr, plo = expect(pair_entry)
                for rnd in pair_rounds(visible):
                    procs = [Probe(pair, size, expected=plo, ref=pr)
                             for pair in rnd]
                    with ThreadPoolExecutor(len(procs)) as pool:
                        list(pool.map(lambda q: run_probe(
                            q, binary, launcher, env, deadline,
                            max(1, args.iters // 2), work), procs))
                    probes += procs
            bad = [q for q in probes if not q.ok]
            if not bad or any(q.why.startswith('hang') for q in bad) or \
                    time.monotonic() > deadline - 2:
                break
    seconds = time.monotonic() - t0
    bad = [q for q in probes if not q.ok]
    if bad:
        return Verdict(UNHEALTHY, 'UNHEALTHY: ' + '; '.join(
            q.why for q in bad[:3]), probes, seconds, attempts)
    main = probes[0]
    ref_txt = f' (reference {main.ref:.1f})' if main.ref else \
        ' (no reference: measured only)'
    pairs = len(probes) - 1
    return Verdict(HEALTHY, f'HEALTHY: all_reduce {format_size(size)} on '
                   f'{len(visible)} GPUs {main.busbw:.1f} GB/s{ref_txt}'
                   + (f', {pairs} GPU pairs ok' if pairs else '')
                   + f', {seconds:.1f} s', probes, seconds, attempts)


def record(args, verdict):
    from . import store
    verdicts = {HEALTHY: 'pass', COULD_NOT_CHECK: 'could-not-check'}
    v = verdicts.get(verdict.code)
    if v is None:
        v = 'hang' if 'hang' in verdict.line else 'below-reference' \
            if 'GB/s <' in verdict.line else 'crash'
    sizes = []
    main = verdict.probes[0] if verdict.probes else None
    if main and main.busbw:
        sizes.append(store.SizeRecord(main.size, main.busbw, ref=main.ref or
                                      None, verdict='pass' if main.ok else
                                      'below-reference'))
    case = store.CaseRecord(
        run_id=f'health-{store.now()}-{socket.gethostname()}',
        case_name='node-health', verdict=v, system=args.system,
        partition=args.partition, nodelist=socket.gethostname(), nodes=1,
        ranks=len(main.gpus) if main else None, collective='all_reduce',
        transport='intra', proven=main.proven if main else '',
        reason=verdict.line, versions=main.versions if main else {},
        env={'probes': json.dumps([dataclasses.asdict(p) for p in
                                   verdict.probes])},
        source='health', sizes=sizes)
    with store.open_store(args.db) as db:
        db.add_case(case)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog='ccl-health-check')
    ap.add_argument('--limit', type=float, default=float(os.environ.get(
        'CCL_HEALTH_CHECK_LIMIT', 20)), help='hard wall-clock limit, s')
    ap.add_argument('--size', default='1G')
    ap.add_argument('--iters', type=int, default=10)
    ap.add_argument('--repeats', type=int, default=2,
                    help='healthy if one of this many tries passes')
    ap.add_argument('--expect-gpus', type=int, default=0)
    ap.add_argument('--no-pairs', action='store_true')
    ap.add_argument('--system', default=os.environ.get('CCL_HEALTH_SYSTEM',
                                                       'local'))
    ap.add_argument('--partition', default='gpu')
    ap.add_argument('--tests-prefix')
    ap.add_argument('--launcher', default=os.environ.get(
        'CCL_HEALTH_CHECK_LAUNCHER', 'mpirun --bind-to none -np'))
    ap.add_argument('--site-dir', default=os.environ.get(
        'CCL_HEALTH_SITE_DIR', os.path.join(REPO, 'site')))
    ap.add_argument('--reference-dir', default=os.environ.get(
        'CCL_HEALTH_REFERENCE_DIR', os.path.join(REPO, 'reference')))
    ap.add_argument('--db', help='performance database (default '
                    '$CCL_HEALTH_DB or <CCL_HEALTH_OUTPUT>/ccl-health.db)')
    ap.add_argument('--no-record', action='store_true')
    ap.add_argument('--json', help='write the full detail here too')
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    t0 = time.monotonic()
    try:
        verdict = check(args)
    except CouldNotCheck as err:
        verdict = Verdict(COULD_NOT_CHECK, f'COULD-NOT-CHECK: {err}', [],
                          time.monotonic() - t0)
    except Exception as err:        # our own bug must never drain a node
        verdict = Verdict(COULD_NOT_CHECK, f'COULD-NOT-CHECK: internal error '
                          f'{type(err).__name__}: {err}', [],
                          time.monotonic() - t0)
    print(verdict.line, flush=True)
    if args.json:
        with open(args.json, 'w') as fp:
            json.dump({'code': verdict.code, 'line': verdict.line,
                       'seconds': verdict.seconds,
                       'attempts': verdict.attempts,
                       'probes': [dataclasses.asdict(p)
                                  for p in verdict.probes]}, fp, indent=1)
    if not args.no_record:
        try:
            record(args, verdict)
        except Exception as err:
            print(f'(not recorded in the performance database: {err})',
                  file=sys.stderr)
    return verdict.code


if __name__ == '__main__':
    sys.exit(main())
