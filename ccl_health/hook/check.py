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

The flow (this module): read the node's state first (a leftover process,
an ECC / XID error, a lost GPU is named whatever else is missing), ask
the resource manager what the node is (:func:`resource_manager`: Slurm's
record of it, once, bounded; the PCI bus where the driver lists no GPU:
the judge's :func:`ccl_health.judge.nodejudge.not_a_gpu_node` and
:func:`~ccl_health.judge.nodejudge.probe_allowed` decide), resolve
the settings once (:mod:`.settings`: options, environment, site file,
defaults), find the system and partition (:mod:`.where`), run the probes
(:mod:`.probes`, each bounded by :mod:`.bounded`: ONE process,
``ccl-health-probe``, for the copy matrix and the all_reduce where it is
built, started ahead as soon as the resource manager allows a probe:
:func:`start_ahead`; else ``all_reduce_perf`` and the copy matrix apart)
in a clean environment (the caller's NCCL_* / FI_* / RCCL_* / HSA_* /
UCX_* ... dropped and named; the site file's ``env`` and ``health.env``
only), read the node's state again,
and have every probe judged by the one judge (:mod:`.judging`: each
all_reduce probe's attempts are one ``CaseEvidence`` for
:func:`ccl_health.judge.casejudge.judge`; the copy matrix goes to
:func:`ccl_health.judge.linkjudge.judge_links`); the line names the action
(isolate / reset; ``monitor`` never drains: exit 2).  The line is
printed before recording (:mod:`.record`); the whole run, recording
included, ends within ``--limit``.

Node faults, exit 1: nccl-tests started on the node's GPUs and then hung
(its header or first row printed, then no end), crashed, stopped without
its closing summary, printed nan / inf / ``#wrong`` > 0 (in ANY try: a
retry absorbs only a bandwidth shortfall), ran over the network instead of
NVLink / PCIe, or was slower than the reference allows; the driver lists
fewer GPUs than the partition has, or cannot answer at all where the
partition's GPU count is known (``missing-gpu``); the node's state shows
another process on a GPU, memory held, an NVLink link down, uncorrectable
ECC, a row-remap failure, a drain XID, a lost GPU.

Could not check, exit 2: a bad option, environment value or file; no
reference, no binary, no GPU driver where the GPU count is unknown; a
``*_VISIBLE_DEVICES`` hiding GPUs; a launcher that cannot start; a limit
too short to start a probe (named); a signal (SIGTERM, SIGINT, SIGHUP,
SIGALRM: every probe stopped, its temporary folders removed); any
exception.  Recording never changes the verdict, and happens only where a
database is named."""

import os
import time
from concurrent.futures import ThreadPoolExecutor

from ccl_health import resources
from ccl_health.hook import judging as judging_words, keep
from ccl_health.hook import bounded as run
from ccl_health.hook.judging import (
    attempt_over, judge_attempts, judged_probe, node_without_gpus,
    probe_evidence, result as _result, unjudged, with_action, with_node_state)
from ccl_health.hook.probe import Probe
from ccl_health.hook.probes import (
    find_links_tool, find_probe_program, find_tests_prefix, pair_rounds,
    one_process_env, probe_env, run_links, run_one_process, run_probe,
    start_early)
from ccl_health.hook.timings import Clock, probe_phases
from ccl_health.hook.settings import (
    DEFAULT_LIMIT, CouldNotCheck, RECORD_BOUND, resolve)
from ccl_health.hook.where import (
    config_system_names, config_system_path, find_partition, find_system)

#: the checkout, or the installed copy of its folders (:mod:`.resources`)
REPO = resources.PACKAGE_PARENT


def read_node_state(settings, session=None):
    """The node's state now (NVML / amdsmi); a library that cannot be
    loaded is a "not checked" fact in it, never an error of the hook.
    ``session``: the hook's NVML session (:func:`check`)."""
    from ccl_health.evidence import nodestate
    from ccl_health.evidence.nodestate.nodedata import not_checked
    try:
        return nodestate.read(run_id=settings.run_id, xid_state=getattr(
            settings, 'xid_state', None) or nodestate.default_xid_state(),
            session=session)
    except Exception as err:         # our bug must not cost the verdict
        return not_checked(f'node state not read: '
                           f'{type(err).__name__}: {err}', 'error')


def read_in_background(settings, clock, session=None):
    """The node state's first reading started in a thread (issue 42: it
    runs while the resource manager is asked and the site's files are
    read and checked); the callable returned waits for it (its wait is
    ``node_state_before_wait`` in ``clock``).  It is always complete
    before any probe starts, so the reading is "before"."""
    import threading
    box = {}

    def reading():
        t = time.monotonic()
        box['state'] = read_node_state(settings, session)
        box['seconds'] = time.monotonic() - t
    thread = threading.Thread(target=reading, daemon=True,
                              name='ccl-health-node-state')
    thread.start()

    def before():
        if 'told' not in box:
            t = time.monotonic()
            thread.join()
            clock.aside('node_state_before_wait', time.monotonic() - t)
            clock.add('node_state_before', box.get('seconds'))
            box['told'] = True
        return box['state']
    return before


def sample_while_probing(settings, session=None):
    """Light readings of the node's state taken while the probes run, in
    a thread (issue 42: each GPU's PCIe link judged under load,
    :mod:`ccl_health.evidence.nodestate.sampler`), sharing the hook's
    NVML ``session``; ``.stop()`` returns them."""
    from ccl_health.evidence import nodestate
    from ccl_health.evidence.nodestate.sampler import Sampler
    return Sampler(lambda: nodestate.read(run_id=settings.run_id,
                                          light=True, session=session),
                   seconds=max(1.0, settings.left())).start()


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


def reserve(limit):
    """What the probes leave of the limit for the node state read after
    them and the bounded recording."""
    return min(RECORD_BOUND + 0.5, 0.15 * limit)


def check(settings, environ=None, clock=None):
    """The node's verdict (:class:`HookResult`); ``settings`` from
    :func:`ccl_health.hook.settings.parse`.  The node's state is read
    first (in a thread, while the resource manager and the site's files
    are read: :func:`read_in_background`): a fault it shows is the verdict
    whatever else could not be checked (a process on a GPU only where the
    node is known to run no job).  ``clock``: where the time went
    (:class:`ccl_health.hook.timings.Clock`, in ``res.timings``).  NVML
    is started once for every reading of the check and stopped when it
    ends, whatever ends it (an error, a signal: its ``finally``): the
    readings share one :class:`ccl_health.evidence.nodestate.nvml.Session`
    (issue 42).  Returns the result and the resolved settings."""
    from ccl_health.evidence.nodestate.nvml import Session
    clock = clock or Clock(settings.t0)
    environ = dict(os.environ if environ is None else environ)
    session = Session()
    try:
        return _check_held(settings, environ, clock, session)
    finally:
        session.close()


def _check_held(settings, environ, clock, session):
    """:func:`check` with NVML's ``session`` held."""
    before = read_in_background(settings, clock, session)
    found = {'system': settings.system or '', 'clock': clock,
             'nvml': session,
             'partition': settings.partition or '', 'site': None,
             'expected': None, 'settings': settings,
             # until Slurm said otherwise, a job may run on the GPUs
             'job': 'the node may run a job: its resource manager was not '
                    'asked', 'role': {}}
    work, not_kept = keep.workdir(settings)
    try:
        res = _check(settings, environ, before, found, work)
    except CouldNotCheck as err:
        res = unjudged(str(err), settings.t0,
                       (found['system'], found['partition']))
        res = with_node_state(res, before(), None, found['site'],
                              found['expected'], found['job'])
    finally:
        _cancel_early(found)
    res.probe_ahead = found['early'].said if found.get('early') else ''
    res.role = found['role']
    res = with_action(res, found['site'])
    res.timings = clock.as_dict()
    return keep.settle(res, work, not_kept, settings), found['settings']


def start_ahead(settings, environ, gpus, work):
    """The one probe process started ahead of the site and the plan
    (issue 42: :class:`~ccl_health.hook.probes.EarlyProbe`: its libraries
    loaded and CUDA's driver started while Python works; set to work by
    :func:`_begin_early`), with what the options and the
    environment alone say: the program of ``--tests-prefix`` or the
    newest build, the caller's visible GPUs, the clean environment
    without the site's settings.  None where these say nothing certain
    (no build, MIG, GPUs named that are not here): the plan starts its
    own then.  Only where the resource manager allows a probe."""
    from ccl_health.evidence import nodefacts as node, programs
    env = dict(resolve(settings, None, environ).env,
               CCL_HEALTH_RUN_ID=settings.run_id)
    if 'MIG-' in env.get('CUDA_VISIBLE_DEVICES', ''):
        return None
    try:
        vis = node.visible_gpus(gpus, env)
        prefix = find_tests_prefix(settings.tests_prefix, None,
                                   programs.for_vendor(gpus.vendor))
        path, _ = find_probe_program(prefix, None,
                                     find_links_tool(prefix, None))
    except (CouldNotCheck, node.VisibilityError):
        return None
    if path is None or vis.unknown or not vis.indices:
        return None
    return start_early(path, probe_env(env, gpus, vis, Probe(
        tuple(vis.indices), 0, tokens=tuple(vis.tokens))), work)


def _cancel_early(found):
    """The process started ahead ended where it was not used."""
    if found.get('early') is not None:
        found['early'].cancel('the check ended before its probes')


def resource_manager(settings, environ, found):
    """What the resource manager says of this node
    (:mod:`ccl_health.evidence.nodestate.slurmnode`), read once within its
    bound; Slurm named and silent: could not check."""
    from ccl_health.evidence.nodestate import slurmnode as slurm
    seconds = min(slurm.bound(settings.limit or DEFAULT_LIMIT),
                  max(0.1, settings.left() - 1))
    try:
        reading = slurm.read(environ, settings.hostname, seconds,
                             lambda cmd, env, t: run.bounded(cmd, env, t))
    except slurm.NotAnswered as err:
        found['job'] = 'the node may run a job: Slurm did not answer'
        raise CouldNotCheck(str(err)) from None
    found['role'] = reading.to_dict()
    return reading


# long: the hook's steps in the order they run, each bounded by the one limit;
# to split at the probes (issue 39)
def _check(settings, environ, before, found, work):
    from ccl_health.evidence import nodefacts as node
    from ccl_health.judge import nodejudge as node_judge
    from ccl_health.evidence.nodestate import pci
    t0 = settings.t0
    rm = resource_manager(settings, environ, found)
    found['clock'].mark('resource_manager')
    allowed, no_probe = node_judge.probe_allowed(rm.node, rm.own_job)
    found['job'] = no_probe
    gpus = node.detect_gpus(environ, whole_node=True)
    if allowed and gpus.count:
        t = time.monotonic()
        found['early'] = start_ahead(settings, environ, gpus, work)
        found['clock'].aside('probe_start_ahead', time.monotonic() - t)
    skip = None
    if gpus.count == 0:
        on_bus = pci.gpus(pci.root_of(environ))
        found['role']['pci_gpus'] = on_bus
        skip = node_judge.not_a_gpu_node(rm.node, on_bus, gpus.count)

    def skipped():
        return _result(*skip, (), time.monotonic() - t0,
                       prefix=judging_words.SKIPPED)
    try:
        return _check_system(settings, environ, before, found, work, rm,
                             allowed, gpus, skip, skipped)
    except CouldNotCheck:
        if skip is None or settings.expect_gpus or \
                found['role'].get('gpus_said'):
            raise
        # no GPU anywhere and nothing named says it has some: the
        # system's files are not for this node (a CPU node)
        return skipped()


def gpus_said(settings, site, conf, rm_node):
    """What says this node has GPUs, where none is on its PCI bus and
    none answers (its GPUs may have left the bus): ``--expect-gpus``, the
    site file's ``health.gpus_per_node``, or Slurm's record of the node
    in a partition of the system with GPUs (host-name patterns are no
    such word: a CPU node may match them); '' where nothing does."""
    from ccl_health.hook.where import gpu_count, slurm_matches
    if settings.expect_gpus:
        return f'--expect-gpus {settings.expect_gpus}'
    health = getattr(site, 'health', None)
    if health is not None and health.gpus_per_node:
        return f'{site.path}: health.gpus_per_node {health.gpus_per_node}'
    for part in (conf or {}).get('partitions') or []:
        if gpu_count(part) and slurm_matches(part, rm_node):
            return (f'Slurm puts it in partition {part.get("name")} '
                    f'({gpu_count(part)} GPUs)')
    return ''


def _check_system(settings, environ, before, found, work, rm, allowed, gpus,
                  skip, skipped):
    """The hook's steps after the resource manager, in the order they run,
    each bounded by the one limit: the system, its site and partition
    (:func:`_find_site`); the node's GPUs (:func:`_gpu_faults`); the GPUs
    to probe and their reference (:func:`_plan`); the probes
    (:func:`_probe`); their judging (:func:`~ccl_health.hook.judging.
    judge_attempts`, the node's state read again)."""
    clock = found['clock']
    checked, site, system, conf, fname = _find_site(settings, gpus, found)
    settings = resolve(settings, site, environ)
    found['settings'] = settings
    partition, configured = find_partition(settings, system, conf, site,
                                           fname, gpus, rm.node)
    found['partition'] = partition
    clock.mark('site')
    if skip is not None:
        said = gpus_said(settings, site, conf, rm.node)
        if not said:
            return skipped()
        # no GPU on the bus, yet the node must have some: missing-gpu
        found['role']['gpus_said'] = said
    t0 = settings.t0

    def result_of(verdict, why, probes=(), attempts=1):
        return _result(verdict, why, probes, time.monotonic() - t0, attempts,
                       system, partition)
    expected_gpus = settings.expect_gpus or configured or (
        rm.node.gpus if rm.node is not None else 0)
    found['expected'] = expected_gpus or None
    fault = _gpu_faults(gpus, expected_gpus, system, partition, before,
                        found, allowed, result_of)
    if fault is not None:
        return fault
    plan = _plan(settings, checked, site, system, partition, gpus,
                 expected_gpus or gpus.count)
    clock.mark('plan')
    before = before()             # complete before any probe starts
    # only now a context of ours on the GPUs: the first reading saw none
    _begin_early(plan, found.get('early'))
    # the PCIe links under load; stopped whatever ends the probes (a
    # signal: no reading after the hook's NVML session is closed)
    sampler = sample_while_probing(settings, found.get('nvml'))
    try:
        tries, attempts, path = _probe(plan, work, before,
                                       found.get('early'))
    finally:
        loaded = sampler.stop()
    clock.mark('probe')
    probe_phases(clock, tries)
    after = read_node_state(settings, found.get('nvml'))
    clock.mark('node_state_after')
    cases = {g: plan.evidence(g, atts, before) for g, atts in
             attempts.items()}
    ours = {p for c in cases.values() for p in c.run_pids()}
    if found.get('early') is not None:   # the probe process started ahead
        ours.add(found['early'].proc.pid)
    res = with_node_state(judge_attempts(
        tries, settings.repeats, result_of, plan.pair_entry, plan.size,
        plan.n, system, partition, t0, plan.links_tool, plan.links_only,
        cases), before, after, site, ours=ours, under_load=loaded)
    res.probe_path = path
    clock.mark('judging')
    return res


def _find_site(settings, gpus, found):
    """The system (its config file), checked as ``scripts/validate``
    checks it, and its site file: ``(checked, site, system, conf,
    fname)``."""
    from ccl_health import CclHealthError
    from ccl_health.sitedata import site as site_data
    from ccl_health.evidence.benignwarns import check_benign
    from ccl_health.judge import validate
    system, conf, fname = find_system(settings, gpus)
    found['system'] = system
    # the checks of scripts/validate first (a missing file is the loaders'
    # to name, below)
    checked = validate.check(
        [system], settings.config_dir, settings.site_dir,
        settings.reference_dir, missing_ok=True,
        loaded={system: (config_system_path(settings.config_dir, fname),
                         conf)} if conf is not None else None)
    if checked.errors:
        raise CouldNotCheck(checked.one_line(
            f'scripts/validate --system {system}'))
    try:
        site = checked.sites.get(system) or \
            site_data.load(settings.site_dir, system,
                           benign_check=check_benign)
    except CclHealthError as err:
        if conf is None:
            raise CouldNotCheck(
                f'system {system!r} is not in {settings.config_dir} (has: '
                f'{", ".join(config_system_names(settings.config_dir))}); '
                f'{err}') from None
        raise CouldNotCheck(str(err)) from None
    found['site'] = site
    return checked, site, system, conf, fname


def _gpu_faults(gpus, expected_gpus, system, partition, before, found,
                allowed, result_of):
    """The result where the node's GPUs end the check before any probe
    (none answers, fewer than the partition has, a job on them), else
    None."""
    from ccl_health.judge import nodejudge as node_judge
    site, no_probe = found['site'], found['job']
    if gpus.count == 0:
        # a vendor tool is installed and lists none: its driver does not
        # answer (a fault where the partition has GPUs); no tool at all
        # is the environment
        fault = node_without_gpus(gpus, expected_gpus, system, partition) \
            if gpus.tool else None
        if fault is None:
            raise CouldNotCheck(gpus.why_none)
        res = result_of(*fault)
        # no GPU at all answers where the partition has some: the driver
        # no longer answers (a reboot is expected to clear it)
        res.cause = 'driver-not-answering'
        return with_node_state(res, before(), None, site, expected_gpus,
                               no_probe)
    expected_gpus = expected_gpus or gpus.count
    fault = node_judge.missing_gpus(
        gpus.why_none, expected_gpus, f'{system}:{partition}', gpus.count,
        'nvidia-smi' if gpus.vendor == 'nvidia' else 'rocminfo')
    if fault is not None:
        return with_node_state(result_of(*fault), before(), None, site,
                               job=no_probe)
    if not allowed:
        # a job runs here: no probe on its GPUs; the state read is the check
        state = before()
        return with_node_state(result_of(*node_judge.node_state_only(
            state, no_probe)), state, None, site, expected_gpus, no_probe)
    return None


def _visible(settings, gpus, expected_gpus, system, partition):
    """The GPUs this check sees (:func:`ccl_health.evidence.nodefacts.
    visible_gpus`): all of the partition's, else could not check."""
    from ccl_health.evidence import nodefacts as node
    env = dict(settings.env)
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
    return vis


class _Plan:
    """What the probes of one check are: the GPUs, the reference entries,
    the programs and the bound (:func:`_plan`)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def probe(self, gpu_set, e, attempt):
        return Probe(tuple(gpu_set), self.size,
                     ref=e.busbw[self.size] if e else 0.0,
                     tokens=tuple(self.token[g] for g in gpu_set),
                     attempt=attempt)

    def evidence(self, gpu_set, atts, node):
        """The one case of the all_reduce on ``gpu_set`` (every attempt)."""
        main = tuple(gpu_set) == tuple(self.visible)
        e = self.entry if main else self.pair_entry
        return probe_evidence(
            atts, self.size, gpu_set, e, missing_reference='' if e else
            _no_reference(self.ref, self.system, self.partition,
                          len(gpu_set), self.size),
            site=self.site, judge_bandwidth=main or
            self.pair_entry is not None, node=node)


def _plan(settings, checked, site, system, partition, gpus, expected_gpus):
    """The probes' plan (:class:`_Plan`): the reference of this node's key,
    the visible GPUs, the programs (the one probe process where it is
    built, else ``all_reduce_perf`` and the copy matrix apart)."""
    from ccl_health import CclHealthError
    from ccl_health.evidence import programs
    from ccl_health.judge import reference
    from ccl_health.sitedata import overrides
    try:
        ref = checked.references.get(system) or \
            reference.load_for_system(settings.reference_dir, system)
        overrides.check_ceilings(site, ref)
    except CclHealthError as err:
        raise CouldNotCheck(str(err)) from None
    vis = _visible(settings, gpus, expected_gpus, system, partition)
    visible = vis.indices
    size = settings.size_bytes
    n = len(visible)
    program = programs.for_vendor(gpus.vendor)
    prefix = find_tests_prefix(settings.tests_prefix, site, program)
    links_tool = None if settings.no_pairs else find_links_tool(prefix,
                                                                site)
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
    one, why_not = find_probe_program(prefix, site, links_tool)
    binary = program.executable(prefix, 'all_reduce')
    if one is None and not links_only and not os.access(binary, os.X_OK):
        raise CouldNotCheck(f'{binary} is missing or not executable')
    env = dict(settings.env, CCL_HEALTH_RUN_ID=settings.run_id)
    return _Plan(settings=settings, site=site, system=system,
                 partition=partition, ref=ref, entry=entry,
                 pair_entry=pair_entry, peer_copy=peer_copy, gpus=gpus,
                 vis=vis, visible=visible, n=n, size=size,
                 token=dict(zip(vis.indices, vis.tokens)), program=program,
                 binary=binary, links_tool=links_tool, links_only=links_only,
                 one=one, why_not=why_not, env=env,
                 deadline=settings.deadline - reserve(settings.limit))


def _begin_early(plan, early):
    """The process started ahead (:func:`start_ahead`) set to work for the
    plan, once the node's first reading is complete (until then it has
    loaded its libraries and started CUDA's driver: no context, nothing of
    it on a GPU): its environment made the plan's, its contexts and (where
    an all_reduce is planned) NCCL's communicators started; cancelled where
    the plan runs the programs apart or another program or environment."""
    if early is None:
        return
    if plan.one is None:
        early.cancel(f'the probes run apart ({plan.why_not})')
        return
    env = probe_env(plan.env, plan.gpus, plan.vis,
                    plan.probe(plan.visible, None, 1))
    early.begin(plan.one, one_process_env(env, early.logdir,
                                          early.ras_address),
                nccl=not plan.links_only)


def _probe(plan, work, before, early=None):
    """Every try of the probes: ``(tries, attempts, path)``: the probes of
    each try, every attempt of each all_reduce by its GPUs, and which path
    ran them (for ``--json``); ``before``: the node's state read first
    (its NVLink links bound an impossible busbw); ``early``: the one
    probe process started ahead (:func:`start_ahead`, set to work by
    :func:`_begin_early`), for the first try where it is the one process."""
    settings = plan.settings
    attempts = {}

    def judge_probe(p, att, words):
        attempts.setdefault(p.gpus, []).append(att)
        return judged_probe(p, att, judge(plan.evidence(p.gpus, [att],
                                                        before)), words)
    from ccl_health.judge.casejudge import judge
    tries = []
    for attempt in range(1, settings.repeats + 1):
        if plan.one is not None:
            probes = _one_process_try(plan, attempt, work, judge_probe,
                                      early)
        else:
            probes = _apart_try(plan, attempt, work, judge_probe)
        early = None
        tries.append(probes)
        if attempt_over(probes) != 'retry' or \
                time.monotonic() > plan.deadline - 2:
            break
    path = (f'one process: {plan.one}' if plan.one is not None else
            f'apart: {plan.why_not}')
    return tries, attempts, path


def _one_process_try(plan, attempt, work, judge_probe, early=None):
    """One try through the one probe process (:func:`run_one_process`,
    ``early``: the process started ahead, used where it fits): the
    all_reduce's probe first, then the copy matrix's (the order of
    :func:`_apart_try`)."""
    main = None if plan.links_only else plan.probe(plan.visible, plan.entry,
                                                   attempt)
    lp, att = run_one_process(
        plan.one, plan.links_tool is not None, main, plan.visible,
        [plan.token[g] for g in plan.visible],
        probe_env(plan.env, plan.gpus, plan.vis,
                  plan.probe(plan.visible, None, attempt)),
        plan.deadline, plan.peer_copy, plan.settings.iters, work,
        plan.program, plan.settings.limit, early=early)
    probes = []
    if main is not None and att is not None:
        judge_probe(main, att[0], att[1])
        probes.append(main)
    if lp is not None:
        lp.attempt = attempt
        probes.append(lp)
    return probes


def _apart_try(plan, attempt, work, judge_probe):
    """One try where the one probe process is not built: ``all_reduce_perf``
    through the launcher, then the copy matrix (or the NCCL pair rounds)."""
    settings = plan.settings

    def one(p, iters):
        return run_probe(p, plan.binary, settings.launcher,
                         probe_env(plan.env, plan.gpus, plan.vis, p),
                         plan.deadline, iters, work, plan.program,
                         settings.limit, judge_probe)[0]
    visible, n = plan.visible, plan.n
    probes = [] if plan.links_only else [one(plan.probe(visible, plan.entry,
                                                        attempt),
                                             settings.iters)]
    if plan.links_tool is not None and all(q.ok for q in probes):
        lp = run_links(
            plan.links_tool, visible, [plan.token[g] for g in visible],
            probe_env(plan.env, plan.gpus, plan.vis,
                      plan.probe(visible, None, attempt)),
            plan.deadline, plan.peer_copy, settings.limit)
        lp.attempt = attempt
        probes.append(lp)
    elif probes and probes[0].ok and n > 2 and not settings.no_pairs:
        for rnd in pair_rounds(visible):
            procs = [plan.probe(pair, plan.pair_entry, attempt)
                     for pair in rnd]
            with ThreadPoolExecutor(len(procs)) as pool:
                list(pool.map(lambda q: one(
                    q, max(1, settings.iters // 2)), procs))
            probes += procs
            if any(not q.ok for q in procs):
                break
    return probes
