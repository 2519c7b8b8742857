"""The hook's settings, resolved once: options, then the environment, then
the site file's ``health`` block, then the defaults (:func:`resolve`), into
one frozen :class:`Settings`.  Every bad value is a :class:`CouldNotCheck`
naming the option, variable or file key, raised before anything starts.

Also here: the one default launcher of the suite (:data:`DEFAULT_LAUNCHER`,
:func:`default_launcher`; ``checks/node_health.py`` reads it from here) and
the probes' clean environment (:func:`clean_environment`)."""

import argparse
import dataclasses
import errno
import math
import os
import shlex
import shutil
import socket
import time
from typing import Optional, Tuple

from ccl_health import identity, resources
from ccl_health.outputs import state_dir

HEALTHY, UNHEALTHY, COULD_NOT_CHECK = 0, 1, 2
PREFIX = {HEALTHY: 'HEALTHY', UNHEALTHY: 'UNHEALTHY',
          COULD_NOT_CHECK: 'COULD-NOT-CHECK'}
DEFAULT_LIMIT = 20.0
DEFAULT_SIZE = '1G'
#: the one default launcher: the rank count and the program are appended
DEFAULT_LAUNCHER = 'mpirun --bind-to none -np'
#: inside a Slurm allocation (ReFrame's slurm / squeue schedulers)
SLURM_LAUNCHER = 'srun --overlap --ntasks'
#: bounds of the options: a value past them is refused before anything runs
MAX_LIMIT = 86400.0
MAX_REPEATS = 20
MAX_ITERS = 10000
MAX_GPUS = 1024
MAX_SIZE = 64 << 30
#: the run ids of health checks start with this
RUN_PREFIX = 'health-'
#: the longest the hook waits on its performance database (s)
RECORD_BOUND = 2.0
#: a failing check's evidence (its probes' outputs and NCCL debug logs,
#: which its line names) is kept in a folder of its own under the
#: evidence folder (:mod:`ccl_health.hook.keep`): at most this many such
#: folders and this many MiB in all, the oldest removed first (the newest
#: is kept whatever its size); $CCL_HEALTH_EVIDENCE_KEEP and
#: $CCL_HEALTH_EVIDENCE_MB change them
EVIDENCE_KEEP = 20
EVIDENCE_MB = 200
#: a check the hook could not record (its database locked, down or
#: unreachable within :data:`RECORD_BOUND`) is kept as one file in the
#: pending folder (:mod:`ccl_health.hook.pending`) until a later check or
#: ``scripts/report ingest --pending`` records it: at most this many files
#: and this many MiB, the oldest dropped first ($CCL_HEALTH_PENDING_KEEP,
#: $CCL_HEALTH_PENDING_MB).  A check every 5 minutes (Slurm's
#: HealthCheckInterval=300) keeps 3 days of a database's outage; a failing
#: check's record is at most ~300 KB (its detail capped at
#: :data:`ccl_health.hook.record.DETAIL_MAX`), a healthy one's a few KB
PENDING_KEEP = 1000
PENDING_MB = 100


def default_launcher(scheduler=None):
    """The launcher where neither an option, the environment nor the site
    file names one: ``srun`` inside Slurm, else ``mpirun``."""
    return SLURM_LAUNCHER if scheduler in ('slurm', 'squeue') else \
        DEFAULT_LAUNCHER


class CouldNotCheck(Exception):
    """The hook itself could not judge the node (exit 2)."""


class Interrupted(BaseException):
    """A signal (SIGTERM, SIGINT, SIGHUP, SIGALRM) arrived."""


# -- the probes' clean environment -------------------------------------------

#: what shapes the transport, the algorithm or the GPUs' behaviour of a
#: collective: the NCCL / RCCL environment variables (NCCL's "Environment
#: Variables" page: NCCL_P2P_DISABLE, NCCL_ALGO, NCCL_PROTO, NCCL_NET, ...;
#: RCCL's: RCCL_*, HSA_*), the network plugins' (aws-ofi-nccl: OFI_NCCL_*,
#: libfabric: FI_*, UCX: UCX_*, SHARP / HCOLL), MSCCL's, and CUDA's own
#: knobs that change how kernels are queued.  The caller's values never
#: reach a probe: they come only from the site file.
TRANSPORT_PREFIXES = ('NCCL_', 'RCCL_', 'FI_', 'OFI_NCCL_', 'HSA_', 'UCX_',
                      'MSCCL_', 'MSCCLPP_', 'SHARP_', 'HCOLL_', 'NVSHMEM_',
                      'CCL_')
TRANSPORT_NAMES = ('CUDA_DEVICE_MAX_CONNECTIONS', 'CUDA_LAUNCH_BLOCKING',
                   'CUDA_MODULE_LOADING', 'CUDA_AUTO_BOOST',
                   'GPU_MAX_HW_QUEUES', 'HIP_FORCE_DEV_KERNARG')
#: kept although their prefix matches: the suite's own stand-ins and
#: settings (CCL_HEALTH_*), and NCCL's RAS address and switch (NCCL_RAS_*:
#: where it is asked which rank stopped; they shape no transport)
KEEP_PREFIXES = ('CCL_HEALTH_', 'NCCL_RAS_')


def shapes_transport(name):
    return not name.startswith(KEEP_PREFIXES) and (
        name.startswith(TRANSPORT_PREFIXES) or name in TRANSPORT_NAMES)


def clean_environment(environ, *site_envs):
    """``(env, dropped)``: ``environ`` without what shapes the transport
    (:func:`shapes_transport`), then the site file's settings in order;
    ``dropped``: the caller's values that were removed (name: value),
    those the site file sets again included."""
    env, dropped = {}, {}
    for k, v in environ.items():
        (dropped if shapes_transport(k) else env)[k] = v
    for extra in site_envs:
        env.update({k: str(v) for k, v in (extra or {}).items()})
    return env, dict(sorted(dropped.items()))


#: Open MPI's launch agents (``plm_rsh_agent``'s default, ``ssh : rsh``)
RSH_AGENTS = ('ssh', 'rsh')


def for_children(env, launcher=()):
    """The probes' environment made to work where the hook's own is empty
    (NHC, slurmd and cron run it under ``env -i``): no ``PATH``: the
    standard one (``os.defpath``) and the launcher's own folder; and
    where no ssh / rsh is on that ``PATH`` (and neither the caller nor the
    site set it), Open MPI's ``plm_rsh_agent`` set empty: its rsh launcher
    then steps aside for its single-node one ("isolated", Open MPI 4.0.3
    and later, ompi PR 7340), where it would otherwise stop with "plm_rsh_agent
    ... could not be found" (plm_rsh_component.c) before starting any
    rank.  The hook runs on one node only, so no remote shell is needed."""
    env = dict(env)
    if not env.get('PATH'):
        folders = os.defpath.split(os.pathsep)
        first = launcher[0] if launcher else ''
        found = first if os.sep in first else (
            shutil.which(first, path=os.defpath) if first else None)
        if found:
            folder = os.path.dirname(os.path.abspath(found))
            if folder not in folders:
                folders.append(folder)
        env['PATH'] = os.pathsep.join(f for f in folders if f)
    if not any(k in env for k in ('OMPI_MCA_plm_rsh_agent',
                                  'OMPI_MCA_orte_rsh_agent',
                                  'OMPI_MCA_plm')) and \
            not any(shutil.which(a, path=env['PATH']) for a in RSH_AGENTS):
        env['OMPI_MCA_plm_rsh_agent'] = ''
    return env


# -- options ------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one COULD-NOT-CHECK line (exit 2), never
    usage text and its own exit."""

    def error(self, message):
        raise CouldNotCheck(f'{self.prog}: {message}')


DB_HELP = ("performance database (a SQLite file or a postgresql:// URL; "
           "default $CCL_HEALTH_DB, else the site file's health.db).  Where "
           "none is named the hook records nothing (it never creates a "
           "database in the folder it is started in).  Recording comes "
           "after the verdict line and waits at most "
           f"{RECORD_BOUND:g} s (within --limit)")


def parser(description=''):
    from ccl_health.helptext import Formatter
    ap = _Parser(prog='ccl-health-check', description=description,
                 formatter_class=Formatter)
    ap.add_argument('--limit', help='hard wall-clock limit of the whole run, '
                    'recording included, s (default '
                    '$CCL_HEALTH_CHECK_LIMIT, else the site file\'s '
                    f'health.limit, else {DEFAULT_LIMIT:g}; at most '
                    f'{MAX_LIMIT:g})')
    ap.add_argument('--size', help="default: the site file's health.size, "
                    f'else {DEFAULT_SIZE}')
    ap.add_argument('--iters', type=int, default=10,
                    help='timed iterations of each all_reduce (-n)')
    ap.add_argument('--repeats', type=int, default=2,
                    help='tries: a later try may absorb a bandwidth '
                    'shortfall only; wrong results, non-finite values, a '
                    'crash or incomplete output in any try is the verdict')
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
                    f'"{DEFAULT_LAUNCHER}"')
    ap.add_argument('--site-dir', help='folder of site/<system>.yaml '
                    '(default $CCL_HEALTH_SITE_DIR, else <dir>/site of the '
                    'site pointer site.conf, else site/)')
    ap.add_argument('--reference-dir', help='folder of '
                    'reference/<system>.yaml (default '
                    '$CCL_HEALTH_REFERENCE_DIR, else <dir>/reference of '
                    'site.conf, else reference/)')
    ap.add_argument('--config-dir', help='ReFrame configuration (default '
                    '$CCL_HEALTH_CONFIG_DIR, else <dir>/config of site.conf, '
                    'else config/)')
    ap.add_argument('--db', help=DB_HELP)
    ap.add_argument('--no-record', action='store_true',
                    help='do not record the result in the performance '
                    'database')
    ap.add_argument('--json', help='write the full detail here too (the '
                    'environment variables dropped from the probes '
                    'included)')
    ap.add_argument('--evidence-dir', help='where a failing check keeps '
                    'its probes\' outputs and debug logs, which its line '
                    'names (default $CCL_HEALTH_EVIDENCE_DIR, else '
                    '$XDG_STATE_HOME/ccl-health/evidence, else '
                    '~/.local/state/ccl-health/evidence); at most '
                    f'{EVIDENCE_KEEP} checks\' and {EVIDENCE_MB} MiB '
                    '($CCL_HEALTH_EVIDENCE_KEEP, $CCL_HEALTH_EVIDENCE_MB), '
                    'the oldest removed first')
    ap.add_argument('--pending-dir', help='where a check that could not be '
                    'recorded within its bound is kept until the next '
                    'check or "scripts/report ingest --pending" records it '
                    '(default $CCL_HEALTH_PENDING_DIR, else '
                    '$XDG_STATE_HOME/ccl-health/pending, else '
                    '~/.local/state/ccl-health/pending); at most '
                    f'{PENDING_KEEP} files and {PENDING_MB} MiB '
                    '($CCL_HEALTH_PENDING_KEEP, $CCL_HEALTH_PENDING_MB), the '
                    'oldest dropped first')
    return ap


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything the hook runs with, resolved once (:func:`parse` from
    the options and environment, :func:`resolve` with the site file)."""
    limit: Optional[float]
    size: Optional[str]
    size_bytes: Optional[int]
    iters: int
    repeats: int
    expect_gpus: int
    no_pairs: bool
    system: Optional[str]
    partition: Optional[str]
    tests_prefix: Optional[str]
    launcher: Optional[Tuple[str, ...]]
    site_dir: str
    reference_dir: str
    config_dir: str
    #: the ReFrame systems are a site's own (``config_dir`` is not the
    #: shipped ``config/``): `local` is then no host-name match
    site_configured: bool
    db: Optional[str]
    no_record: bool
    json: Optional[str]
    hostname: str
    #: the check's identity (:func:`ccl_health.identity.new`): its
    #: record's run id, in its kept evidence folder's and pending file's
    #: names; marks the probes' processes as ours
    #: (ccl_health.evidence.nodestate)
    run_id: str
    xid_state: Optional[str]
    #: where a failing check's evidence is kept, and the bounds
    evidence_dir: str = ''
    evidence_keep: int = EVIDENCE_KEEP
    evidence_bytes: int = EVIDENCE_MB << 20
    #: where a check that could not be recorded is kept, and the bounds
    pending_dir: str = ''
    pending_keep: int = PENDING_KEEP
    pending_bytes: int = PENDING_MB << 20
    #: monotonic time the hook started: the limit counts from here
    t0: float = 0.0
    #: where the database name came from ('' where none is named)
    db_source: str = ''
    #: the probes' environment (clean) and the caller's values dropped
    env: Tuple[Tuple[str, str], ...] = ()
    dropped: Tuple[Tuple[str, str], ...] = ()

    @property
    def deadline(self):
        return self.t0 + (self.limit or DEFAULT_LIMIT)

    def left(self):
        return self.deadline - time.monotonic()


# long: each option checked in the order of --help, one error line each
def parse(argv, env=None, t0=None, description=''):
    """The options and the environment, checked (site file not read yet)."""
    env = os.environ if env is None else env
    args = parser(description).parse_args(argv)
    if args.limit is not None:
        src, raw = '--limit', args.limit
    else:
        src, raw = 'CCL_HEALTH_CHECK_LIMIT', env.get('CCL_HEALTH_CHECK_LIMIT')
        if raw is not None and raw.strip() == '':
            raw = None
    limit = None if raw is None else limit_value(src, raw)
    for opt, most in (('iters', MAX_ITERS), ('repeats', MAX_REPEATS)):
        val = getattr(args, opt)
        if val < 1:
            raise CouldNotCheck(f'--{opt} {val}: must be at least 1')
        if val > most:
            raise CouldNotCheck(f'--{opt} {val}: at most {most}')
    if args.expect_gpus < 0:
        raise CouldNotCheck(f'--expect-gpus {args.expect_gpus}: must not be '
                            f'negative')
    if args.expect_gpus > MAX_GPUS:
        raise CouldNotCheck(f'--expect-gpus {args.expect_gpus}: at most '
                            f'{MAX_GPUS}')
    size_bytes = None if args.size is None else size_value('--size',
                                                           args.size)
    launcher = args.launcher if args.launcher is not None else env.get(
        'CCL_HEALTH_CHECK_LAUNCHER')
    db, db_source = args.db, '--db'
    if not db:
        db, db_source = env.get('CCL_HEALTH_DB') or None, 'CCL_HEALTH_DB'
    if args.json:
        try:                       # fail before measuring, not after
            # never through a link (one planted there is replaced by the
            # atomic write, its target never made nor touched)
            os.close(os.open(args.json, os.O_WRONLY | os.O_APPEND |
                             os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK,
                             0o666))
        except OSError as err:
            if err.errno != errno.ELOOP and not os.path.islink(args.json):
                raise CouldNotCheck(f'--json {args.json}: cannot write: '
                                    f'{err.strerror or err}') from None
    folders = {}
    # folders the user named: a mistake is said before anything is measured
    # else the site pointer's site directory (site.conf: found with an
    # empty environment too), else the shipped folders
    from ccl_health import CclHealthError
    try:
        resources.site_pointer(env)
    except CclHealthError as err:
        raise CouldNotCheck(str(err)) from None
    for key, opt, var, in_use in (
            ('site_dir', '--site-dir', 'CCL_HEALTH_SITE_DIR',
             resources.site_dir),
            ('reference_dir', '--reference-dir', 'CCL_HEALTH_REFERENCE_DIR',
             resources.reference_dir),
            ('config_dir', '--config-dir', 'CCL_HEALTH_CONFIG_DIR',
             resources.config_dir)):
        value = getattr(args, key) or in_use(env)
        if not os.path.isdir(value):
            src = opt if getattr(args, key) else var if env.get(var) else \
                f'{resources.site_pointer_path(env)}: dir ='
            raise CouldNotCheck(f'{src} {value}: no such folder')
        folders[key] = value
    host = env.get('CCL_HEALTH_HOSTNAME') or socket.gethostname()
    # a site's own systems (named here, by the variable or by the site
    # pointer), not the shipped examples: `local` (any host) is then no
    # host-name match (ccl_health.hook.where)
    site_configured = os.path.realpath(folders['config_dir']) != \
        os.path.realpath(resources.path('config'))
    return Settings(
        limit=limit, size=args.size, size_bytes=size_bytes,
        iters=args.iters, repeats=args.repeats,
        expect_gpus=args.expect_gpus, no_pairs=args.no_pairs,
        system=args.system or env.get('CCL_HEALTH_SYSTEM') or None,
        partition=args.partition or env.get('CCL_HEALTH_PARTITION') or None,
        tests_prefix=args.tests_prefix,
        launcher=None if launcher is None else tuple(
            launcher_value(launcher)),
        **folders, site_configured=site_configured,
        db=db, db_source=db_source if db else '',
        no_record=args.no_record, json=args.json,
        hostname=host,
        # the check's one identity: its record, its kept evidence folder,
        # its pending file, and the mark of its probes' processes
        run_id=identity.new(RUN_PREFIX, host),
        xid_state=env.get('CCL_HEALTH_XID_STATE') or None,
        **_kept(args, env, 'evidence', EVIDENCE_KEEP, EVIDENCE_MB),
        **_kept(args, env, 'pending', PENDING_KEEP, PENDING_MB),
        t0=time.monotonic() if t0 is None else t0)


def kept_folder(what, env=None):
    """The folder the hook keeps ``what`` in where no option names one:
    ``$CCL_HEALTH_<WHAT>_DIR``, else ``<state>/<what>``
    (:func:`ccl_health.outputs.state_dir`)."""
    env = os.environ if env is None else env
    return os.path.abspath(env.get(f'CCL_HEALTH_{what.upper()}_DIR') or
                           os.path.join(state_dir(), what))


def _kept(args, env, what, keep, mb):
    """Where the hook keeps ``what`` (``evidence``: a failing check's
    evidence; ``pending``: a check not recorded): ``--<what>-dir``,
    ``$CCL_HEALTH_<WHAT>_DIR``, else ``<state>/<what>``; and its bounds
    (``$CCL_HEALTH_<WHAT>_KEEP`` files, ``$CCL_HEALTH_<WHAT>_MB`` MiB)."""
    var = f'CCL_HEALTH_{what.upper()}'
    folder = getattr(args, f'{what}_dir') or kept_folder(what, env)
    bounds = {}
    for key, name, default in ((f'{what}_keep', f'{var}_KEEP', keep),
                               (f'{what}_bytes', f'{var}_MB', mb)):
        raw = (env.get(name) or '').strip()
        try:
            val = int(raw) if raw else default
        except ValueError:
            val = -1
        if val < 1:
            raise CouldNotCheck(f'{name} {raw!r}: must be a whole number, at '
                                f'least 1')
        bounds[key] = val << 20 if key.endswith('_bytes') else val
    return {f'{what}_dir': os.path.abspath(folder), **bounds}


def resolve(settings, site, environ):
    """``settings`` with what the options and environment left open taken
    from the site file's ``health`` block, else the defaults, and the
    probes' clean environment (:func:`clean_environment`: the caller's
    transport settings dropped, the site file's ``env`` and
    ``health.env`` added)."""
    health = site.health if site is not None else None
    changes = {}
    if settings.limit is None:
        changes['limit'] = limit_value(
            f'{site.path}: health.limit', health.limit) \
            if health and health.limit is not None else DEFAULT_LIMIT
    if settings.size_bytes is None:
        size = health.size if health and health.size else DEFAULT_SIZE
        changes['size'] = size
        changes['size_bytes'] = size_value(
            f'{site.path}: health.size' if health and health.size
            else '--size', size)
    if settings.launcher is None:
        changes['launcher'] = tuple(health.launcher) if health else \
            tuple(shlex.split(DEFAULT_LAUNCHER))
    if not settings.db and health is not None and getattr(health, 'db',
                                                          None):
        changes['db'] = health.db
        changes['db_source'] = f'{site.path}: health.db'
    env, dropped = clean_environment(
        environ, site.env if site is not None else {},
        getattr(health, 'env', None) or {})
    env = for_children(env, changes.get('launcher', settings.launcher))
    changes['env'] = tuple(sorted(env.items()))
    changes['dropped'] = tuple(dropped.items())
    return dataclasses.replace(settings, **changes)


def limit_value(src, raw):
    try:
        limit = float(raw)
    except (TypeError, ValueError):
        raise CouldNotCheck(f'{src} {raw!r}: not a number of seconds') \
            from None
    if not math.isfinite(limit) or limit <= 0:
        raise CouldNotCheck(f'{src} {raw!r}: the limit must be a positive '
                            f'number of seconds')
    if limit > MAX_LIMIT:
        raise CouldNotCheck(f'{src} {raw!r}: the limit is at most '
                            f'{MAX_LIMIT:g} s')
    return limit


def size_value(src, raw):
    from ccl_health import CclHealthError
    from ccl_health.units import parse_size
    try:
        size = parse_size(raw)
    except (CclHealthError, ValueError, OverflowError) as err:
        raise CouldNotCheck(f'{src} {raw!r}: {err}') from None
    if size <= 0:
        raise CouldNotCheck(f'{src} {raw!r}: must be positive')
    if size > MAX_SIZE:
        raise CouldNotCheck(f'{src} {raw!r}: at most 64 GiB')
    return size


def launcher_value(text):
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise CouldNotCheck(f'launcher {text!r}: {err}') from None
    if not words:
        raise CouldNotCheck('the launcher is empty (--launcher / '
                            'CCL_HEALTH_CHECK_LAUNCHER)')
    return words
