"""The node health hook: a quick single-node check under a hard time limit,
for a node health checker (LBNL NHC, Slurm's HealthCheckProgram).

    python -m ccl_health.hook [--limit 20] [--size 1G] [--repeats 2] ...

It prints ONE line and exits with
  0  HEALTHY: complete positive evidence: every probe exited 0 with a
     complete, finite, correct nccl-tests table, the transport proven
     intra-node from NCCL's debug log, and busbw at or above the reference
     for this node's exact key (system, partition, intra, all_reduce,
     1 node, N GPUs, the probe's size).
  1  UNHEALTHY: <what: which GPU / pair, measured vs expected>: only for a
     measured fault of the node (drains it).
  2  COULD-NOT-CHECK: <why>: every error of the tool itself; never a reason
     to drain the node.

Which is which (the verdict names are those of :mod:`ccl_health.judge.verdicts`):

* Node faults, exit 1.  nccl-tests started on the node's GPUs and then:
  hung past the limit or hit its own ``-T`` timeout (``hang``); crashed or
  exited non-zero, also after a complete table, or printed ``Test CUDA
  failure`` / ``NCCL failure`` (``crash``); stopped without its closing
  summary or without the probe's size (``incomplete``); printed nan / inf,
  ``#wrong`` > 0 or out-of-bounds values (``wrong-results``); ran over the
  network instead of NVLink / PCIe (``fallback``); was slower than the
  reference allows (``below-reference``).  Also the node's own driver
  listing fewer GPUs than its partition has (``missing-gpu``).  The node's
  state, read before and after the probes (:mod:`ccl_health.evidence.nodestate`),
  names the cause first (``UNHEALTHY: GPU 1 in use by pid 4242 (python3,
  12.0 GiB; leftover process on an idle node: drain): ...``), and a cause
  that drains fails passing probes too: another process on a GPU or its
  memory held (``contended``), an NVLink link down, uncorrectable ECC, a
  row-remap failure, a drain XID, a lost GPU (``node-fault``).  NVML /
  amdsmi that cannot be loaded is "not checked" in the ``--json`` detail,
  never an error by itself.
* Could not check, exit 2.  A bad option or environment value; an
  unwritable ``--json`` path; a missing Python module; an unreadable or
  invalid config, site or reference file; no reference for the exact key or
  size; a hostname that matches no system, or a system with several GPU
  partitions and none named; no GPU driver (nvidia-smi / rocminfo);
  ``*_VISIBLE_DEVICES`` hiding GPUs the driver lists, naming GPUs that are
  not here, or of no known form (the environment, not the node); a missing
  ``all_reduce_perf``; a launcher that cannot be started (not found,
  ``OSError``, exit 126 / 127) or that exits before nccl-tests printed
  anything of its own (e.g. ``mpirun``: not enough slots): nothing ran on
  the GPUs; no NCCL debug log to prove the transport from; a limit too
  short to start a probe; SIGTERM / SIGINT; any exception.
  Recording into the performance database never changes the verdict.

The GPU links: where ``ccl-health-links`` is installed beside the test
programs (or the site file names it, or ``nvbandwidth``, in its ``health``
block), one copy matrix of every GPU pair, both directions at once, replaces
the NCCL pair rounds (:func:`run_links`, judged by
:func:`ccl_health.judge.verdicts.judge_links` against the partition's
``peer_copy`` reference, every failing direction named: ``UNHEALTHY: GPU
0->1 copy 72.1 GB/s < 308.8 (reference 386.0)``); without ``peer_copy`` the
links are named, not judged.  A node of one GPU is judged by its copies
alone where ``peer_copy`` has its in-GPU / host kinds.  Without the program
the pair rounds stay.

The system and partition are found as ReFrame's configuration finds them:
the ``hostnames`` patterns of each system in ``config/systems/<system>.py``,
in the order ``config/settings.py`` loads them (file names, a system
matching any host last: :mod:`ccl_health.sitedata.sysconfig`), matched
(``re.match``) against the
host name (``socket.gethostname()``, or ``CCL_HEALTH_HOSTNAME`` to test),
first match wins; the partition is the system's only partition with GPUs.
``--system`` / ``CCL_HEALTH_SYSTEM`` and ``--partition`` /
``CCL_HEALTH_PARTITION`` override.  The full detail goes into the
performance database (the same store as the nightly runs).  It builds
nothing: it runs the binaries the builders installed."""

import argparse
import dataclasses
import glob
import itertools
import json
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ccl_health import resources

#: the checkout, or the installed copy of its folders (:mod:`.resources`)
REPO = resources.PACKAGE_PARENT
HEALTHY, UNHEALTHY, COULD_NOT_CHECK = 0, 1, 2
PREFIX = {HEALTHY: 'HEALTHY', UNHEALTHY: 'UNHEALTHY',
          COULD_NOT_CHECK: 'COULD-NOT-CHECK'}
DEFAULT_LIMIT = 20.0
DEFAULT_SIZE = '1G'
DEFAULT_LAUNCHER = 'mpirun --bind-to none -np'


class CouldNotCheck(Exception):
    """The hook itself could not judge the node (exit 2)."""


class Interrupted(BaseException):
    """SIGTERM / SIGINT arrived."""


@dataclasses.dataclass
class Probe:
    """One all_reduce on a set of GPUs."""
    gpus: tuple               # node GPU indices (nvidia-smi / rocminfo)
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
    #: the verdict name (ccl_health.judge.verdicts.Verdict) this probe was judged
    verdict: str = ''
    #: what the probe's ``*_VISIBLE_DEVICES`` names these GPUs by
    tokens: tuple = ()
    exit_status: object = None


@dataclasses.dataclass
class HookResult:
    code: int
    line: str
    probes: list
    seconds: float
    attempts: int = 1
    verdict: str = 'could-not-check'
    system: str = ''
    partition: str = ''
    #: the node's state before and after the probes and the causes read
    #: from it (:func:`with_node_state`)
    node_state: dict = dataclasses.field(default_factory=dict)


def _result(verdict, why, probes=(), seconds=0.0, attempts=1, system='',
            partition=''):
    """The hook's result for a verdict (a ccl_health.judge.verdicts.Verdict) and
    its one-line reason."""
    from ccl_health.judge.verdicts import exit_code
    code = exit_code([verdict])
    why = ' '.join(str(why).split())
    return HookResult(code, f'{PREFIX[code]}: {why}', list(probes), seconds,
                      attempts, str(verdict), system, partition)


# -- options -----------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one COULD-NOT-CHECK line (exit 2), never
    usage text and its own exit."""

    def error(self, message):
        raise CouldNotCheck(f'{self.prog}: {message}')


def _parser():
    from ccl_health.helptext import Formatter
    ap = _Parser(prog='ccl-health-check', description=(
        __doc__ or '').split('\n\n')[0], formatter_class=Formatter)
    ap.add_argument('--limit', help='hard wall-clock limit, s (default '
                    '$CCL_HEALTH_CHECK_LIMIT, else the site file\'s '
                    'health.limit, else 20)')
    ap.add_argument('--size', help="default: the site file's health.size, "
                    'else 1G')
    ap.add_argument('--iters', type=int, default=10,
                    help='timed iterations of each all_reduce (-n)')
    ap.add_argument('--repeats', type=int, default=2,
                    help='healthy if one of this many tries passes')
    ap.add_argument('--expect-gpus', type=int, default=0,
                    help="GPUs this node must have (default: the site "
                    "file's health.gpus_per_node, else its partition's "
                    "devices in config/systems/)")
    ap.add_argument('--no-pairs', action='store_true',
                    help='skip the GPU links\' checks (the copy matrix of '
                    'ccl-health-links / nvbandwidth, or the NCCL pair '
                    'rounds): only the all-GPU all_reduce')
    ap.add_argument('--system', help='default $CCL_HEALTH_SYSTEM, else the '
                    'system whose hostnames pattern matches this host')
    ap.add_argument('--partition', help="default $CCL_HEALTH_PARTITION, else "
                    "the site file's health.partition, else the system's "
                    "only partition with GPUs")
    ap.add_argument('--tests-prefix', help='installation of nccl-tests / '
                    'rccl-tests to run (default: the newest in the build '
                    'cache, or the site file\'s build prefix)')
    ap.add_argument('--launcher', help='default $CCL_HEALTH_CHECK_LAUNCHER, '
                    "else the site file's health.launcher, else "
                    '"mpirun --bind-to none -np"')
    ap.add_argument('--site-dir', help='folder of site/<system>.yaml '
                    '(default $CCL_HEALTH_SITE_DIR, else site/)')
    ap.add_argument('--reference-dir', help='folder of '
                    'reference/<system>.yaml (default '
                    '$CCL_HEALTH_REFERENCE_DIR, else reference/)')
    ap.add_argument('--config-dir', help='ReFrame configuration (default '
                    '$CCL_HEALTH_CONFIG_DIR or config/)')
    ap.add_argument('--db', help='performance database (default '
                    '$CCL_HEALTH_DB, else $CCL_HEALTH_OUTPUT/ccl-health.db, else '
                    './ccl-health-output/ccl-health.db)')
    ap.add_argument('--no-record', action='store_true',
                    help='do not record the result in the performance '
                    'database')
    ap.add_argument('--json', help='write the full detail here too')
    return ap


def parse_args(argv, env=None):
    """The options, checked; every bad value raises CouldNotCheck naming
    the option or environment variable."""
    env = os.environ if env is None else env
    args = _parser().parse_args(argv)
    # --limit / --size / --launcher, or their environment variables; what
    # neither gives comes from the site file's health block (apply_site)
    if args.limit is not None:
        src, raw = '--limit', args.limit
    else:
        src, raw = 'CCL_HEALTH_CHECK_LIMIT', env.get('CCL_HEALTH_CHECK_LIMIT')
        if raw is not None and raw.strip() == '':
            raw = None
    args.limit = None if raw is None else _limit(src, raw)
    for opt in ('iters', 'repeats'):
        if getattr(args, opt) < 1:
            raise CouldNotCheck(f'--{opt} {getattr(args, opt)}: must be at '
                                f'least 1')
    if args.expect_gpus < 0:
        raise CouldNotCheck(f'--expect-gpus {args.expect_gpus}: must not be '
                            f'negative')
    args.size_bytes = None if args.size is None else _size('--size',
                                                           args.size)
    launcher = args.launcher if args.launcher is not None else env.get(
        'CCL_HEALTH_CHECK_LAUNCHER')
    args.launcher = None if launcher is None else _launcher(launcher)
    args.system = args.system or env.get('CCL_HEALTH_SYSTEM') or None
    args.partition = args.partition or env.get('CCL_HEALTH_PARTITION') or None
    args.site_dir = args.site_dir or env.get('CCL_HEALTH_SITE_DIR') or \
        resources.shipped_site_dir()
    args.reference_dir = args.reference_dir or env.get(
        'CCL_HEALTH_REFERENCE_DIR') or resources.shipped_reference_dir()
    args.config_dir = args.config_dir or env.get('CCL_HEALTH_CONFIG_DIR') or \
        resources.path('config')
    # folders the user named: a mistake is said before anything is measured
    for opt, var, value in (
            ('--site-dir', 'CCL_HEALTH_SITE_DIR', args.site_dir),
            ('--reference-dir', 'CCL_HEALTH_REFERENCE_DIR',
             args.reference_dir),
            ('--config-dir', 'CCL_HEALTH_CONFIG_DIR', args.config_dir)):
        if not os.path.isdir(value):
            src = opt if getattr(args, opt[2:].replace('-', '_')) else var
            raise CouldNotCheck(f'{src} {value}: no such folder')
    args.hostname = env.get('CCL_HEALTH_HOSTNAME') or socket.gethostname()
    #: marks the probes' processes as ours (ccl_health.evidence.nodestate)
    args.run_id = f'health-{os.getpid()}-{int(time.time())}'
    args.xid_state = env.get('CCL_HEALTH_XID_STATE') or None
    if args.json:
        try:                       # fail before measuring, not after
            with open(args.json, 'a'):
                pass
        except OSError as err:
            raise CouldNotCheck(f'--json {args.json}: cannot write: '
                                f'{err.strerror or err}') from None
    return args


def _limit(src, raw):
    try:
        limit = float(raw)
    except (TypeError, ValueError):
        raise CouldNotCheck(f'{src} {raw!r}: not a number of seconds') \
            from None
    if not math.isfinite(limit) or limit <= 0:
        raise CouldNotCheck(f'{src} {raw!r}: the limit must be a positive '
                            f'number of seconds')
    return limit


def _size(src, raw):
    from ccl_health import CclHealthError
    from ccl_health.units import parse_size
    try:
        size = parse_size(raw)
    except (CclHealthError, ValueError) as err:
        raise CouldNotCheck(f'{src} {raw!r}: {err}') from None
    if size <= 0:
        raise CouldNotCheck(f'{src} {raw!r}: must be positive')
    return size


def _launcher(text):
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise CouldNotCheck(f'launcher {text!r}: {err}') from None
    if not words:
        raise CouldNotCheck('the launcher is empty (--launcher / '
                            'CCL_HEALTH_CHECK_LAUNCHER)')
    return words


def apply_site(args, site):
    """The limit, size and launcher the options and environment left
    open, from the site file's ``health`` block, else the defaults."""
    health = site.health if site is not None else None
    if args.limit is None:
        args.limit = (health.limit if health and health.limit is not None
                      else DEFAULT_LIMIT)
    if args.size_bytes is None:
        args.size = health.size if health and health.size else DEFAULT_SIZE
        args.size_bytes = _size(f'{site.path}: health.size' if health and
                                health.size else '--size', args.size)
    if args.launcher is None:
        args.launcher = list(health.launcher) if health else \
            shlex.split(DEFAULT_LAUNCHER)
    return args


# -- which system, which partition ------------------------------------------

def config_system_names(config_dir):
    """The systems of the ReFrame configuration: the file names of
    ``<config_dir>/systems/*.py``, sorted (:mod:`ccl_health.sitedata.sysconfig`)."""
    from ccl_health.sitedata.sysconfig import SYSTEMS, system_files
    names = [name for name, _ in system_files(config_dir)]
    if not names:
        raise CouldNotCheck(f'{os.path.join(config_dir, SYSTEMS)}: no '
                            f'system files (<system>.py)')
    return names


def config_system_path(config_dir, name):
    from ccl_health.sitedata.sysconfig import SYSTEMS
    return os.path.join(config_dir, SYSTEMS, f'{name}.py')


def load_config_system(config_dir, name, gpus):
    """The ``system`` dict of ``config/systems/<name>.py`` (loaded as
    ReFrame's configuration loads it, without ReFrame; the GPUs it detects
    are ``gpus``, detected once)."""
    from ccl_health.evidence import node
    from ccl_health.sitedata import sysconfig
    path = config_system_path(config_dir, name)
    detect = node.detect_gpus
    node.detect_gpus = lambda env=None, whole_node=False: gpus
    try:
        system = sysconfig.load_file(path, 'ccl_health_hook_config').system
        if not isinstance(system, dict) or not isinstance(
                system.get('hostnames'), list):
            raise TypeError('no system dict with a hostnames list')
    except Exception as err:
        raise CouldNotCheck(f'{path}: cannot load the system '
                            f'configuration: {type(err).__name__}: '
                            f'{err}') from None
    finally:
        node.detect_gpus = detect
    return system


def config_systems(config_dir, gpus):
    """``[(name, system dict)]`` of every system file, in the order ReFrame
    tries them (file names; a system matching any host last)."""
    from ccl_health.sitedata.sysconfig import in_reframe_order
    return in_reframe_order(
        [(name, load_config_system(config_dir, name, gpus))
         for name in config_system_names(config_dir)], lambda it: it[1])


def _gpu_count(part):
    from ccl_health.sitedata.sysconfig import partition_gpus
    return partition_gpus(part)[0]


def find_system(args, gpus):
    """``(system name, system dict or None)`` for this host: as ReFrame
    picks the system (first ``hostnames`` pattern that ``re.match``-es the
    host name, in the configuration's order); --system (and
    CCL_HEALTH_SYSTEM) overrides.  ``None``: a system named by --system
    that the ReFrame configuration does not have."""
    cfg = args.config_dir
    names = config_system_names(cfg)
    system = None
    if args.system:
        if args.system in names:
            system = load_config_system(cfg, args.system, gpus)
    else:
        for fname, conf in config_systems(cfg, gpus):
            for patt in conf['hostnames']:
                try:
                    hit = re.match(patt, args.hostname)
                except re.error as err:
                    raise CouldNotCheck(
                        f'{config_system_path(cfg, fname)}: hostnames '
                        f'pattern {patt!r}: {err}') from None
                if hit:
                    system, args.system_file = conf, fname
                    break
            if system:
                break
        if system is None:
            raise CouldNotCheck(
                f'host name {args.hostname!r} matches no system of {cfg} '
                f'(hostnames patterns of {", ".join(names)}): give --system '
                f'or CCL_HEALTH_SYSTEM')
    return args.system or system['name'], system


def find_partition(args, name, system, site):
    """``(partition, GPUs per node or 0)``: --partition (and
    CCL_HEALTH_PARTITION), else the site file's ``health.partition``, else
    the system's only partition with GPUs; the GPUs are the partition's
    ``devices`` and the site file's ``health.gpus_per_node``, which must
    agree where both are given."""
    cfg = args.config_dir
    health = site.health if site is not None else None
    wanted, src = args.partition, '--partition / CCL_HEALTH_PARTITION'
    if not wanted and health:
        wanted, src = health.partition, f'{site.path}: health.partition'
    told = health.gpus_per_node if health else None
    if system is None:          # a system the ReFrame config does not know
        if not wanted:
            raise CouldNotCheck(
                f'system {name!r} is not in {cfg} (has: '
                f'{", ".join(config_system_names(cfg))}): give --partition '
                f'or health.partition in {site.path}')
        return wanted, told or 0
    parts = {p.get('name'): p for p in system.get('partitions') or []}
    origin = config_system_path(cfg, getattr(args, 'system_file', None)
                                or args.system or name)
    if wanted:
        if wanted not in parts:
            raise CouldNotCheck(f'{src}: no partition {wanted!r} in system '
                                f'{name!r} of {origin} (has: '
                                f'{", ".join(sorted(map(str, parts)))})')
        partition = wanted
    else:
        with_gpus = [p for p, conf in parts.items() if _gpu_count(conf)]
        how = ('named by --system / CCL_HEALTH_SYSTEM' if args.system else
               f'matched by host name {args.hostname!r}')
        if not with_gpus:
            raise CouldNotCheck(f'system {name!r} ({how}) has no partition '
                                f'with GPUs in {origin}')
        if len(with_gpus) > 1:
            raise CouldNotCheck(
                f'ambiguous: system {name!r} ({how}) has several partitions '
                f'with GPUs in {origin} ({", ".join(with_gpus)}): give '
                f'--partition, CCL_HEALTH_PARTITION or health.partition in '
                f'{site.path}')
        partition = with_gpus[0]
    devices = _gpu_count(parts[partition])
    if told and devices and told != devices:
        raise CouldNotCheck(
            f'{site.path}: health.gpus_per_node: {told}, but partition '
            f'{partition!r} of {origin} has {devices} GPUs (devices): one '
            f'of them is wrong')
    return partition, told or devices


# -- the probes --------------------------------------------------------------

def find_tests_prefix(explicit=None, site=None, program=None):
    """The install prefix of ``program`` (:mod:`ccl_health.evidence.programs`;
    default nccl-tests): given, the site's, or the newest build."""
    from ccl_health.evidence import programs
    from ccl_health.buildcache import STAMP, cache_dir
    program = program or programs.NCCL_TESTS
    if explicit:
        return explicit
    prefix = programs.site_prefix(site.build, program) if site else None
    if prefix:
        return prefix
    built = [p for p in glob.glob(os.path.join(cache_dir(),
                                               f'{program.name}-*'))
             if os.path.exists(os.path.join(p, STAMP))]
    if not built:
        raise CouldNotCheck(f'no {program.name} build in {cache_dir()} (run '
                            f'the suite once, or give --tests-prefix)')
    return max(built, key=lambda p: os.path.getmtime(os.path.join(p, STAMP)))


def probe_env(env, gpus, vis, probe):
    """The environment of one probe: its GPUs made visible by the tokens
    they were given by (UUIDs stay UUIDs), or by their indices."""
    from ccl_health.evidence import node
    penv = dict(env)
    if gpus.vendor == 'amd':
        # HIP indices count within ROCR_VISIBLE_DEVICES' list when it is set
        rocr = list(range(gpus.count))
        if env.get('ROCR_VISIBLE_DEVICES') is not None:
            rocr = node.visible_gpus(gpus, {
                'ROCR_VISIBLE_DEVICES': env['ROCR_VISIBLE_DEVICES']}).indices
        penv.pop('CUDA_VISIBLE_DEVICES', None)
        penv['HIP_VISIBLE_DEVICES'] = ','.join(str(rocr.index(g))
                                               for g in probe.gpus)
    else:
        penv['CUDA_VISIBLE_DEVICES'] = ','.join(probe.tokens)
        if not vis.variable:      # indices we chose: nvidia-smi's order
            penv.setdefault('CUDA_DEVICE_ORDER', 'PCI_BUS_ID')
    return penv


_RUNNING = set()
_RUNNING_LOCK = threading.Lock()
# nccl-tests / rccl-tests' own header lines (a launcher may prefix them)
_STARTED = re.compile(r'#\s*(nccl-tests version|Collective test starting|'
                      r'nThread\s+\d+|Using devices)|rccl-tests:')


def run_probe(probe, binary, launcher, env, deadline, iters, workdir,
              program=None):
    from ccl_health.evidence import programs
    program = program or programs.NCCL_TESTS
    from ccl_health.evidence import debuglog as tproof
    from ccl_health.judge.verdicts import Verdict, judge_output
    from ccl_health.units import format_size
    where = f'GPUs {_gpus(probe.gpus)}'
    remaining = deadline - time.monotonic()
    if remaining < 1:
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = (f'the limit left no time for all_reduce on {where} '
                     f'(raise --limit)')
        return probe
    logdir = tempfile.mkdtemp(prefix='probe-', dir=workdir)
    penv = dict(env, NCCL_DEBUG='INFO', NCCL_DEBUG_SUBSYS='INIT,NET',
                NCCL_DEBUG_FILE=os.path.join(logdir, 'nccl-debug.%h.%p.log'))
    cmd = launcher + [str(len(probe.gpus)), binary] + program.options(
        probe.size, probe.size, 2, iters, 2, max(1, int(remaining) - 1),
        json_file=None)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, env=penv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                errors='replace', start_new_session=True)
    except OSError as err:
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = (f'cannot start the launcher {launcher[0]!r}: '
                     f'{err.strerror or err}')
        return probe
    out = _communicate(proc, remaining)
    probe.seconds = time.monotonic() - t0
    if out is None:
        probe.verdict = Verdict.HANG.value
        probe.why = (f'hang: all_reduce on {where} did not finish within '
                     f'the {probe.seconds:.0f} s left')
        return probe
    probe.exit_status = proc.returncode
    res = program.parse(out)
    lines = [ln.strip() for ln in out.strip().splitlines() if ln.strip()]
    last = (lines or ['no output'])[-1][:200]
    if proc.returncode in (126, 127) or (
            not res.rows and not res.errors and not _STARTED.search(out)):
        # nothing of nccl-tests' own: the launcher or the program never ran
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = (f'{" ".join(launcher)} could not start all_reduce_perf '
                     f'on {where} (exit {proc.returncode}): {last}')
        return probe
    bad = judge_output(res, proc.returncode, expected_sizes=[probe.size],
                       what=f'all_reduce on {where}')
    if bad:
        probe.verdict, probe.why = bad[0].value, bad[1]
        # the launcher's last words, where nccl-tests named no error
        said = [ln for ln in lines if not ln.startswith('#') and
                not re.match(r'^\d+\s', ln)]
        if bad[0] is Verdict.CRASH and not res.errors and said:
            probe.why += f': {said[-1][:200]}'
        return probe
    ev = tproof.read_evidence(tproof.debug_log_files(logdir))
    probe.versions = ev.versions
    proof = tproof.prove('intra', ev)
    probe.proven = proof.proven or 'none'
    probe.paths = ', '.join(sorted(ev.via)) or 'no channels'
    if proof.proven is None:
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = f'{where}: {proof.reason}'
        return probe
    if not proof.ok:
        probe.verdict = Verdict.FALLBACK.value
        probe.why = f'fallback: {where}: {proof.reason}'
        return probe
    probe.busbw = res.by_size()[probe.size].busbw
    if probe.expected and probe.busbw < probe.expected:
        probe.verdict = Verdict.BELOW_REFERENCE.value
        probe.why = (f'{where} all_reduce {format_size(probe.size)}: '
                     f'{probe.busbw:.1f} GB/s < {probe.expected:.1f} '
                     f'(reference {probe.ref:.1f} GB/s; channels '
                     f'{probe.paths})')
        return probe
    probe.ok = True
    probe.verdict = Verdict.PASS.value
    return probe


def _communicate(proc, timeout):
    """The output of ``proc`` (a probe's program, registered as running
    so that a signal stops it), or None when it did not finish within
    ``timeout``: then it is stopped."""
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        _kill(proc)
        try:         # a rank that left the process group may hold the pipe
            proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        return None
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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


# -- the GPU links: one copy matrix in one process --------------------------

#: the copy size where no ``peer_copy`` reference gives one
LINKS_DEFAULT_SIZE = 256 << 20


@dataclasses.dataclass
class LinksProbe:
    """The copy matrix of every GPU pair (``ccl-health-links`` or
    nvbandwidth, :mod:`ccl_health.evidence.links`), judged by
    :func:`ccl_health.judge.verdicts.judge_links`; it stands in for the NCCL pair
    rounds where the program is installed."""
    gpus: tuple               # node GPU indices, in the program's order
    tool: str = ''
    path: str = ''
    size: int = 0
    tokens: tuple = ()
    ok: bool = False
    why: str = ''
    verdict: str = ''
    seconds: float = 0.0
    init_s: object = None
    copy_s: object = None
    exit_status: object = None
    #: every measured direction: name, src, dst, GB/s, reference, lower
    #: bound (None: not judged), ok
    links: list = dataclasses.field(default_factory=list)
    #: directed pairs that cannot peer, by node GPU index
    no_peer: list = dataclasses.field(default_factory=list)
    judged: bool = False
    # what the hook's record reads of its probes (no bandwidth of NCCL's)
    busbw: float = 0.0
    ref: float = 0.0
    proven: str = ''
    versions: dict = dataclasses.field(default_factory=dict)


def find_links_tool(prefix, site):
    """``(tool, path)`` of what measures the GPU links, or None (then the
    hook runs the NCCL pair rounds): the site's ``health.links``, else
    ``bin/ccl-health-links`` of the tests' install prefix (the builders put
    it there), else the site's ``health.nvbandwidth``.  A path the site
    names that is not executable cannot be checked with (exit 2)."""
    from ccl_health.evidence import links
    health = site.health if site is not None else None
    named = [(links.PROGRAM, getattr(health, 'links', None)),
             (links.NVBANDWIDTH, getattr(health, 'nvbandwidth', None))]
    for tool, path in named:
        if path and not os.access(path, os.X_OK):
            key = 'links' if tool == links.PROGRAM else tool
            raise CouldNotCheck(f'{site.path}: health.{key}: {path} is '
                                f'missing or not executable')
    if named[0][1]:
        return named[0]
    built = os.path.join(prefix, 'bin', links.PROGRAM)
    if os.access(built, os.X_OK):
        return links.PROGRAM, built
    if named[1][1]:
        return named[1]
    return None


def run_links(tool, gpu_ids, tokens, env, deadline, peer_copy):
    """Run the copy matrix on ``gpu_ids`` (made visible by ``env``), alone
    (nothing else runs on the GPUs meanwhile), and judge it."""
    from ccl_health.evidence import links
    from ccl_health.judge.verdicts import Verdict, judge_links
    name, path = tool
    size = peer_copy.size if peer_copy is not None else LINKS_DEFAULT_SIZE
    probe = LinksProbe(tuple(gpu_ids), name, path, size, tuple(tokens))
    label = {i: g for i, g in enumerate(gpu_ids)}.get
    remaining = deadline - time.monotonic()
    if remaining < 1:
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = ('the limit left no time for the copy matrix of the '
                     'GPU links (raise --limit)')
        return probe
    opts = (links.links_options(size) if name == links.PROGRAM else
            links.nvbandwidth_options(size))
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen([path] + opts, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                errors='replace', start_new_session=True)
    except OSError as err:
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = f'cannot start {path}: {err.strerror or err}'
        return probe
    out = _communicate(proc, remaining)
    probe.seconds = time.monotonic() - t0
    if out is None:
        probe.verdict = Verdict.HANG.value
        probe.why = (f'hang: {name} (the copy matrix of the GPU links) did '
                     f'not finish within the {probe.seconds:.0f} s left')
        return probe
    probe.exit_status = proc.returncode
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    last = (lines or ['no output'])[-1][:200]
    # its own lines: the header, or an error it names (before the header)
    ours = (f'# {links.PROGRAM} ', '# error:', '# usage error:') \
        if name == links.PROGRAM else ('nvbandwidth Version',)
    if proc.returncode in (126, 127) or not any(ln.startswith(ours)
                                                for ln in lines):
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = (f'{path} did not start (exit {proc.returncode}): '
                     f'{last}')
        return probe
    res = links.parse_links(out) if name == links.PROGRAM else \
        links.parse_nvbandwidth(out, nbytes=size)
    probe.init_s, probe.copy_s = res.init_s, res.copy_s
    probe.no_peer = [(label(a), label(b)) for a, b in sorted(set(
        res.no_peer))]
    verdict, why, judged = judge_links(res, proc.returncode, peer_copy,
                                       label, expect_gpus=len(gpu_ids))
    probe.judged = any(ref is not None for _, ref, _, _ in judged)
    probe.links = [{'name': ln.name(label), 'src': ln.src, 'dst': ln.dst,
                    'bytes': ln.bytes, 'seconds': ln.seconds,
                    'gbps': ln.gbps, 'ref': ref, 'lower': lo, 'ok': ok}
                   for ln, ref, lo, ok in judged]
    probe.verdict, probe.why = verdict.value, why
    probe.ok = verdict is Verdict.PASS
    return probe


def links_summary(probe, where):
    """What a passed copy matrix says in the HEALTHY line: its directions
    by kind with their range, and whether they were judged."""
    from ccl_health.units import format_size
    kinds = {}
    for ln in probe.links:
        kinds.setdefault(_kind_label(ln), []).append(ln)
    parts = []
    for label_, lns in kinds.items():
        vals = [ln['gbps'] for ln in lns]
        refs = sorted({ln['ref'] for ln in lns if ln['ref'] is not None})
        rng = (f'{min(vals):.1f}' if min(vals) == max(vals) or len(vals) == 1
               else f'{min(vals):.1f}-{max(vals):.1f}')
        parts.append(f'{len(lns)} {label_} {rng} GB/s' + (
            f' (reference {", ".join(f"{r:.1f}" for r in refs)})' if refs
            else ''))
    txt = f'{probe.tool} {format_size(probe.size)}: ' + ', '.join(parts)
    if probe.no_peer:
        txt += '; ' + ', '.join(f'GPU {a}->{b} cannot peer'
                                for a, b in probe.no_peer)
    if not probe.judged:
        txt += f' (not judged: no peer_copy reference for {where})'
    elif any(ln['ref'] is None for ln in probe.links):
        txt += ' (the others not judged: no reference for their kind)'
    return txt


def _kind_label(ln):
    if ln['src'] == 'host':
        return 'host->GPU'
    if ln['dst'] == 'host':
        return 'GPU->host'
    return 'in-GPU' if ln['src'] == ln['dst'] else 'GPU->GPU'


# -- the check ---------------------------------------------------------------

def _no_reference(ref, system, partition, n, size=None, entry=None):
    from ccl_health.units import format_size
    key = (f'{system}:{partition} intra all_reduce 1 node x {n} GPUs')
    if entry is not None:
        return (f'no reference for {key} at {format_size(size)} in '
                f'{ref.path} (the entry has: '
                f'{", ".join(format_size(s) for s in sorted(entry.busbw))}; '
                f'give --size)')
    missing = getattr(ref, 'missing_reason', None)
    if missing:
        why = missing(partition, 'intra', 'all_reduce', 1, n)
        if why:
            return why
    return f'no reference for {key} in {ref.path}'


def check(args, env=None):
    from ccl_health import CclHealthError
    from ccl_health.evidence import node
    from ccl_health.evidence import programs
    from ccl_health.judge import reference
    from ccl_health.sitedata import site as site_data
    from ccl_health.units import format_size
    from ccl_health.judge.verdicts import Verdict
    env = dict(os.environ if env is None else env)
    t0 = time.monotonic()
    gpus = node.detect_gpus(env, whole_node=True)
    if gpus.count == 0:
        raise CouldNotCheck(gpus.why_none)
    system, conf = find_system(args, gpus)
    args.found = (system, args.partition or '')
    try:
        site = site_data.load(args.site_dir, system)
    except CclHealthError as err:
        if conf is None:
            raise CouldNotCheck(
                f'system {system!r} is not in {args.config_dir} (has: '
                f'{", ".join(config_system_names(args.config_dir))}); '
                f'{err}') from None
        raise CouldNotCheck(str(err)) from None
    apply_site(args, site)
    deadline = t0 + args.limit
    partition, configured = find_partition(args, system, conf, site)
    args.found = (system, partition)

    def result(verdict, why, probes=(), attempts=1):
        return _result(verdict, why, probes, time.monotonic() - t0, attempts,
                       system, partition)
    env.update(site.env)
    try:
        ref = reference.load_for_system(args.reference_dir, system)
    except CclHealthError as err:
        raise CouldNotCheck(str(err)) from None
    expected_gpus = args.expect_gpus or configured or gpus.count
    if gpus.count < expected_gpus:
        tool = 'nvidia-smi' if gpus.vendor == 'nvidia' else 'rocminfo'
        return result(Verdict.MISSING_GPU, (
            f'missing GPU: {tool} lists {gpus.count} of the {expected_gpus} '
            f'GPUs of {system}:{partition}'))
    try:
        vis = node.visible_gpus(gpus, env, node.mig_devices(env) if any(
            'MIG-' in env.get(v, '') for v in (
                'CUDA_VISIBLE_DEVICES',)) else {})
    except node.VisibilityError as err:
        raise CouldNotCheck(f'{err} (this node has {gpus.count} GPUs)') \
            from None
    shown = f'{vis.variable}={vis.value!r}'
    if vis.unknown:
        raise CouldNotCheck(
            f'{shown} names GPU(s) {", ".join(vis.unknown)} that are not on '
            f'this node (it has {gpus.count}: '
            f'{", ".join(gpus.uuids) or "no UUIDs"}): the environment, not '
            f'the node')
    if len(vis.indices) < expected_gpus:
        raise CouldNotCheck(
            f'{shown} leaves {len(vis.indices)} of the {expected_gpus} GPUs '
            f'of {system}:{partition} visible ({gpus.count} listed by the '
            f'driver): unset it to check the whole node')
    visible = vis.indices
    token = dict(zip(vis.indices, vis.tokens))
    size = args.size_bytes
    n = len(visible)
    program = programs.for_vendor(gpus.vendor)
    prefix = find_tests_prefix(args.tests_prefix, site, program)
    links_tool = None if args.no_pairs else find_links_tool(prefix, site)
    peer_copy = ref.peer_copy(partition)
    # one GPU: no NCCL path between GPUs (all_reduce's busbw is 0); its
    # copies are judged where the program and a peer_copy reference exist
    links_only = n == 1 and links_tool is not None and peer_copy is not None \
        and any(k in peer_copy.gbps for k in ('in_gpu', 'host_to_gpu',
                                               'gpu_to_host'))
    entry = ref.lookup(partition, 'intra', 'all_reduce', 1, n)
    if not links_only and (entry is None or size not in entry.busbw):
        raise CouldNotCheck(_no_reference(ref, system, partition, n, size,
                                          entry))
    pair_entry = ref.lookup(partition, 'intra', 'all_reduce', 1, 2)
    if pair_entry is not None and size not in pair_entry.busbw:
        pair_entry = None
    binary = program.executable(prefix, 'all_reduce')
    if not links_only and not os.access(binary, os.X_OK):
        raise CouldNotCheck(f'{binary} is missing or not executable')

    def probe(gpu_set, e):
        r, lo = (e.busbw[size], e.busbw[size] * (1 - e.tolerance_at(size))) \
            if e else (0.0, 0.0)
        p = Probe(tuple(gpu_set), size, expected=lo, ref=r,
                  tokens=tuple(token[g] for g in gpu_set))
        return p

    def run(p, iters):
        return run_probe(p, binary, args.launcher,
                         probe_env(env, gpus, vis, p), deadline, iters, work,
                         program)

    env['CCL_HEALTH_RUN_ID'] = args.run_id   # the probes' ranks are ours
    before = read_node_state(args)
    probes, attempts = [], 0
    with tempfile.TemporaryDirectory(prefix='ccl-health-') as work:
        for attempts in range(1, args.repeats + 1):
            probes = [] if links_only else [run(probe(visible, entry),
                                                args.iters)]
            if links_tool is not None and all(q.ok for q in probes):
                probes.append(run_links(
                    links_tool, visible, [token[g] for g in visible],
                    probe_env(env, gpus, vis, probe(visible, None)),
                    deadline, peer_copy))
            elif probes[0].ok and n > 2 and not args.no_pairs:
                for rnd in pair_rounds(visible):
                    procs = [probe(pair, pair_entry) for pair in rnd]
                    with ThreadPoolExecutor(len(procs)) as pool:
                        list(pool.map(lambda q: run(q, max(1, args.iters // 2)),
                                      procs))
                    probes += procs
                    if any(not q.ok for q in procs):
                        break
            judged = [Verdict(q.verdict) for q in probes]
            if all(v is Verdict.PASS for v in judged) or \
                    any(v in (Verdict.HANG, Verdict.COULD_NOT_CHECK)
                        for v in judged) or time.monotonic() > deadline - 2:
                break
    after = read_node_state(args)
    # the GPU count was judged above (missing-gpu, from nvidia-smi /
    # rocminfo): the node state judges the rest
    return with_node_state(_judged(probes, attempts, result, pair_entry,
                                   size, n, system, partition, t0,
                                   links_tool, links_only),
                           before, after, site)


def _judged(probes, attempts, result, pair_entry, size, n, system,
            partition, t0, links_tool=None, links_only=False):
    """The result of the probes alone."""
    from ccl_health.units import format_size
    from ccl_health.judge.verdicts import Verdict
    bad = [q for q in probes if not q.ok]
    if bad:
        from ccl_health.judge.verdicts import worst
        v = worst([q.verdict for q in bad])
        same = [q for q in bad if q.verdict == v.value]
        return result(v, '; '.join(q.why for q in same[:3]), probes,
                      attempts)
    if links_tool is not None:
        return result(Verdict.PASS, _links_pass_line(
            probes, links_only, system, partition, n, size, t0), probes,
            attempts)
    main_probe = probes[0]
    pairs = len(probes) - 1
    pair_txt = ''
    if pairs:
        pair_txt = (f', {pairs} GPU pairs ok' if pair_entry else
                    f', {pairs} GPU pairs ran clean (bandwidth not judged: '
                    f'no reference for 1 node x 2 GPUs at '
                    f'{format_size(size)})')
    return result(Verdict.PASS, (
        f'all_reduce {format_size(size)} on {n} GPUs '
        f'{main_probe.busbw:.1f} GB/s (reference {main_probe.ref:.1f}) on '
        f'{system}:{partition}{pair_txt}, '
        f'{time.monotonic() - t0:.1f} s'), probes, attempts)


def _links_pass_line(probes, links_only, system, partition, n, size, t0):
    """The HEALTHY line where the copy matrix checked the links."""
    from ccl_health.units import format_size
    where = f'{system}:{partition}'
    links_txt = links_summary(probes[-1], where)
    if links_only:
        head = f'{links_txt} on {where} (1 GPU: no all_reduce)'
    else:
        main_probe = probes[0]
        head = (f'all_reduce {format_size(size)} on {n} GPUs '
                f'{main_probe.busbw:.1f} GB/s (reference '
                f'{main_probe.ref:.1f}) on {where}, {links_txt}')
    return f'{head}, {time.monotonic() - t0:.1f} s'


# -- the node's state (ccl_health.evidence.nodestate) -------------------------------

def read_node_state(args):
    """The node's state now (NVML / amdsmi); a library that cannot be
    loaded is a "not checked" fact in it, never an error of the hook."""
    from ccl_health.evidence import nodestate
    try:
        return nodestate.read(run_id=args.run_id, xid_state=getattr(
            args, 'xid_state', None) or nodestate.default_xid_state())
    except Exception as err:         # our bug must not cost the verdict
        return nodestate.not_checked(f'node state not read: '
                                     f'{type(err).__name__}: {err}', 'error')


#: what the line says after a foreign process on a node the hook runs on
#: (an idle node: nothing of a job should be there)
IDLE_NODE = 'leftover process on an idle node: drain'


def cause_text(cause):
    """A cause as the verdict line names it."""
    if cause.kind == 'foreign-process':
        return cause.text[:-1] + f'; {IDLE_NODE})' if \
            cause.text.endswith(')') else f'{cause.text} ({IDLE_NODE})'
    return cause.text


def with_node_state(res, before, after, site=None, expected_gpus=None):
    """The probes' result ``res`` with the causes the node's state shows
    (:func:`ccl_health.evidence.nodestate.diagnose.diagnose`) named first: a failed
    probe's line starts with the first cause; a cause that drains
    (a foreign process or memory held: ``contended``; an NVLink link down,
    uncorrectable ECC, a row-remap failure, a drain XID, a lost GPU:
    ``node-fault``) makes passing probes UNHEALTHY; other causes are noted
    after a HEALTHY line; an unjudged result stays unjudged (the cause
    noted).  The readings and causes go into ``res.node_state``."""
    from ccl_health.evidence.nodestate.diagnose import MEMORY_HELD_FRACTION, diagnose
    from ccl_health.judge.verdicts import Verdict
    health = getattr(site, 'health', None)
    causes = diagnose(before, after,
                      expected_model=getattr(health, 'gpu_model', None),
                      expected_count=expected_gpus,
                      memory_held=getattr(health, 'memory_held', None) or
                      MEMORY_HELD_FRACTION)
    res.node_state = {
        'before': before.to_dict() if before else None,
        'after': after.to_dict() if after else None,
        'causes': [dataclasses.asdict(c) for c in causes],
        'not_checked': {**(before.not_checked if before else {}),
                        **(after.not_checked if after else {})},
        'seconds': round((before.seconds if before else 0) +
                         (after.seconds if after else 0), 3)}
    if not causes:
        return res
    first = causes[0]
    named = cause_text(first)
    why = res.line.split(': ', 1)[1] if ': ' in res.line else res.line
    shared = first.kind in ('foreign-process', 'memory-held')
    if res.code == UNHEALTHY:
        if shared:
            res.verdict = Verdict.CONTENDED.value
        res.line = f'{PREFIX[UNHEALTHY]}: {named}: {why}'
    elif res.code == HEALTHY and first.drain:
        res.code = UNHEALTHY
        res.verdict = (Verdict.CONTENDED if shared else
                       Verdict.NODE_FAULT).value
        res.line = (f'{PREFIX[UNHEALTHY]}: {named}: although the probes '
                    f'passed: {why}')
    elif res.code == HEALTHY:
        res.line += '; noted: ' + '; '.join(c.text for c in causes[:2])
    else:
        res.line += f' (node state: {named})'
    return res


def record(args, res, environ=None):
    """The hook's result as one case of the performance database: the
    main probe's size, the probes' detail in its own field, and the
    environment the hook ran with (:func:`recorder.run_environment`: the
    probes inherit it), so that a drop is attributed to a variable set for
    the hook."""
    from ccl_health.db import recorder
    from ccl_health.db import store
    sizes = []
    main_probe = res.probes[0] if res.probes else None
    if main_probe and main_probe.busbw:
        sizes.append(store.SizeRecord(
            main_probe.size, main_probe.busbw, ref=main_probe.ref or None,
            verdict=main_probe.verdict or None))
    host = getattr(args, 'hostname', None) or socket.gethostname()
    case = store.CaseRecord(
        run_id=f'health-{store.now()}-{host}',
        case_name='node-health', verdict=res.verdict, system=res.system,
        partition=res.partition, nodelist=host, nodes=1,
        ranks=len(main_probe.gpus) if main_probe else None,
        collective='all_reduce', transport='intra',
        proven=main_probe.proven if main_probe else '',
        reason=res.line, versions=main_probe.versions if main_probe else {},
        env=recorder.run_environment(environ=environ),
        detail={'probes': [dataclasses.asdict(p) for p in res.probes],
                **({'node_state': res.node_state}
                   if res.node_state else {})},
        source='health', sizes=sizes)
    with store.open_store(args.db) as db:
        db.add_case(case)


def _on_signal(signum, frame):
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        _kill(proc)
    raise Interrupted(signal.Signals(signum).name)


def main(argv=None):
    """Print the one verdict line, return 0 / 1 / 2.  Nothing here raises:
    every error of the hook is COULD-NOT-CHECK (exit 2)."""
    t0 = time.monotonic()
    args = None
    try:
        old = {s: signal.signal(s, _on_signal)
               for s in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:            # not the main thread (tests)
        old = {}
    try:
        args = parse_args(argv)
        res = check(args)
    except CouldNotCheck as err:
        res = _unjudged(str(err), t0, args)
    except Interrupted as sig:
        res = _unjudged(f'stopped by {sig} before the check finished',
                        t0, args)
    except ImportError as err:
        res = _unjudged(f'a Python module is missing ({sys.executable}): '
                        f'{type(err).__name__}: {err}', t0, args)
    except SystemExit:            # --help (argparse printed it): no check
        return COULD_NOT_CHECK
    except Exception as err:       # our own bug must never drain a node
        res = _unjudged(f'internal error {type(err).__name__}: {err}', t0,
                        args)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if args is not None and args.json:
        try:
            with open(args.json, 'w') as fp:
                json.dump(json_document(res), fp, indent=1)
        except (OSError, TypeError, ValueError) as err:
            res = _unjudged(f'--json {args.json}: cannot write: {err} '
                            f'(measured: {res.line})', t0, args)
    print(res.line, flush=True)
    if args is not None and not args.no_record:
        try:
            record(args, res)
        except Exception as err:
            print(f'(not recorded in the performance database: {err})',
                  file=sys.stderr)
    return res.code


def json_document(res):
    """The hook's ``--json`` detail of a :class:`HookResult` (what
    NodeHealthCheck and ``scripts/fleet`` read)."""
    return {'code': res.code, 'verdict': res.verdict, 'line': res.line,
            'seconds': res.seconds, 'attempts': res.attempts,
            'system': res.system, 'partition': res.partition,
            'probes': [dataclasses.asdict(p) for p in res.probes],
            'node_state': res.node_state}


def _unjudged(why, t0, args):
    why = ' '.join(str(why).split()) or 'unknown error'
    return HookResult(COULD_NOT_CHECK, f'COULD-NOT-CHECK: {why}', [],
                      time.monotonic() - t0, 1, 'could-not-check',
                      *(getattr(args, 'found', None) or (
                          getattr(args, 'system', None) or '',
                          getattr(args, 'partition', None) or '')))


if __name__ == '__main__':
    sys.exit(main())
