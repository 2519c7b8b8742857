"""What every ccl-health check shares: one rank per GPU on ``num_nodes``
nodes, the site facts and references of the system, the outcome variables
kept in the run report and perflog, and (:class:`TransportMixin`) a
transport configuration with its environment and the proof, from NCCL's
debug log, of the transport that ran."""

import json
import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (fixture, parameter, run_after,
                                   run_before, variable)
from reframe.core.exceptions import ReferenceParseError

from ccl_health import resources
resources.importable()      # the build recipes: the checkout's or shipped
from builders.net_plugin import NetPluginBuild  # noqa: E402
from ccl_health import CclHealthError, shell
from ccl_health.db import recorder
from ccl_health.judge import reference  # noqa: E402
from ccl_health.sitedata import transports as registry
from ccl_health.db.aborted import CASE_FILE
from ccl_health.sitedata import overrides
from ccl_health.evidence.benignwarns import check_benign
from ccl_health.sitedata import site as site_data
from ccl_health.sitedata import sysconfig
from ccl_health.evidence import debuglog as tproof
from ccl_health.evidence.proof import prove
from ccl_health.units import SWEEP, parse_size

#: what a job's PYTHONPATH needs to import this ccl_health (the checkout,
#: or the site-packages it is installed in)
REPO = resources.PACKAGE_PARENT


def this_python():
    """``(executable, env_vars)`` of a job that runs this Python on this
    ccl_health (``executable -m ccl_health....``): each one word of the
    job script, whatever the paths hold (a checkout in ``/home/me/my
    checkout`` made ``export PYTHONPATH=/home/me/my checkout...`` and ran
    ``/home/me/my``)."""
    return shell.quote(sys.executable or 'python3'), {
        'PYTHONPATH': site_data.shell_value(f'{REPO}:${{PYTHONPATH}}')}


DEBUG_FILES = 'nccl-debug.%h.%p.log'
#: the launcher's exit status, written by the job script itself (the job's
#: own exit code is not known under every scheduler)
EXIT_STATUS_FILE = 'ccl-health-exit-status'
#: the node's state before, while and after the program ran
#: (``python -m ccl_health.evidence.nodestate --watch``), one JSON line a reading
NODE_STATE_FILE = 'ccl-health-nodestate.jsonl'
#: what NCCL's RAS said shortly before the job's time limit
#: (``python -m ccl_health.evidence.ras --watch``): which rank stopped
RAS_FILE = 'ccl-health-ras.json'


def ras_margin(limit):
    """Seconds before a job's time limit to ask RAS: its query's bound
    and as much again for the job script (a quarter of a short limit)."""
    from ccl_health.evidence.ras import DEFAULT_BOUND
    return min(2 * DEFAULT_BOUND + 3, 0.25 * limit)


class PlacedTest(rfm.RunOnlyRegressionTest):
    """One MPI rank per GPU, as ``srun`` runs it on the sites: the GPUs
    per node are the partition's ``devices`` (ReFrame's
    ``select_devices('gpu')``)."""

    #: nodes of the job; 0: the partition's ``sweep_nodes`` extra (1 on
    #: `local`, 2 on the production systems)
    num_nodes = variable(int, value=0)
    reference_dir = variable(str, value=resources.reference_dir())
    site_dir = variable(str, value=resources.site_dir())
    #: extra environment for every run, applied last (``-S extra_env=K:V``)
    extra_env = variable(typ.Dict[str, str], value={})
    #: acceptance (post-maintenance) mode: a check with no reference entry
    #: fails instead of passing on what it measured
    acceptance = variable(bool, value=False)

    # What the run proved; filled at sanity, kept in the report and perflog.
    verdict = variable(str, value='')
    #: the verdict's one-line reason, as the check wrote it
    verdict_reason = variable(str, value='')
    versions = variable(dict, value={})
    skip_reason = variable(str, value='')
    proven_transport = variable(str, value='')
    transport_proof = variable(str, value='')

    valid_systems = ['+gpu']
    valid_prog_environs = ['+ccl']
    time_limit = '10m'
    maintainers = ['ccl-health']

    def skip_if(self, cond, msg=None):
        """ReFrame's skip_if, keeping the reason for the report."""
        if cond:
            self.skip_reason = msg or ''
        super().skip_if(cond, msg)

    def single_node_only(self):
        return False

    def what(self):
        """What needs the GPUs, for the skip message."""
        return self.name

    @run_after('setup')
    def place_ranks(self):
        extras = self.current_partition.extras
        gpus = sysconfig.partition_gpus(self.current_partition)[0]
        if self.single_node_only():
            self.num_nodes = 1
        elif self.num_nodes == 0:
            self.num_nodes = int(extras.get('sweep_nodes', 1))
        self.skip_if(gpus == 0, 'no GPU on this partition')
        max_nodes = extras.get('max_nodes')
        self.skip_if(max_nodes is not None and self.num_nodes > max_nodes,
                     f'needs {self.num_nodes} nodes; '
                     f'{self.current_partition.fullname} has {max_nodes}')
        self.num_tasks_per_node = gpus
        self.num_tasks = gpus * self.num_nodes
        self.skip_if(self.num_tasks < 2,
                     f'{self.what()} needs at least 2 GPUs; this '
                     f'partition has {gpus} per node x {self.num_nodes}')

    @run_after('setup')
    def load_site_data(self):
        try:
            # read once: a transport check read it at init already
            # (:meth:`TransportMixin.note_unavailable_transport`)
            self._site = getattr(self, '_site', None) or site_data.load(
                self.site_dir, self.current_system.name,
                benign_check=check_benign)
            self._ref = reference.load_for_system(self.reference_dir,
                                                  self.current_system.name)
            overrides.check_ceilings(self._site, self._ref)
        except CclHealthError as err:
            # a ReFrame error: one clear line, no traceback
            raise ReferenceParseError(str(err)) from None

    def set_environment(self, env, keep_files, watch=False):
        """The job's environment (``extra_env`` last, shell-quoted), the
        launcher options of the programming environment (its
        ``extras.launcher_options``), the files to keep; the launcher's exit
        status kept in :data:`EXIT_STATUS_FILE` (the job script still ends
        with it); what the case is in :data:`CASE_FILE`.  ``watch``: the
        node's state sampled around and while the program runs
        (:meth:`node_state_cmds`)."""
        run_id = getattr(self, 'run_id', '')
        if run_id:       # marks the ranks as ours (ccl_health.evidence.nodestate)
            env['CCL_HEALTH_RUN_ID'] = run_id
        env.update(self.extra_env)
        self.env_vars = {k: site_data.shell_value(v) for k, v in env.items()}
        self.job.launcher.options = list(
            self.current_environ.extras.get('launcher_options', []))
        self.keep_files = list(keep_files) + ['nccl-debug.*.log',
                                              EXIT_STATUS_FILE, CASE_FILE,
                                              RAS_FILE]
        start, stop = self.node_state_cmds() if watch else ([], [])
        if watch:
            self.keep_files.append(NODE_STATE_FILE)
        ras_start, ras_stop = self.ras_cmds()
        self.prerun_cmds = list(self.prerun_cmds) + start + ras_start
        self.postrun_cmds = (['ccl_health_rc=$?',
                              f'echo "$ccl_health_rc" > {EXIT_STATUS_FILE}']
                             + ras_stop + stop + list(self.postrun_cmds) +
                             ['exit "$ccl_health_rc"'])
        if not self.is_dry_run():
            with open(os.path.join(self.stagedir, CASE_FILE), 'w') as fp:
                json.dump(self.case_info(), fp, indent=1)

    def node_state_cmds(self):
        """``(before, after)`` lines of the job script: start the node
        state sampler (``python -m ccl_health.evidence.nodestate --watch``, this
        Python, every second, on the node the script runs on) and wait for
        its first reading; stop it after the program (it writes its last
        reading on SIGTERM).  A node without NVML / amdsmi gets "not
        checked" readings; a sampler that cannot start costs at most 3 s
        and leaves no readings (nothing judged from them)."""
        from shlex import quote
        py = quote(sys.executable or 'python3')
        start = [
            f'PYTHONPATH={quote(REPO)}${{PYTHONPATH:+:$PYTHONPATH}} {py} -m '
            f'ccl_health.evidence.nodestate --watch {NODE_STATE_FILE} --run-id '
            f'{quote(getattr(self, "run_id", "") or "none")} '
            f'</dev/null >/dev/null 2>&1 &',
            'ccl_health_watch=$!',
            f'for _ in $(seq 30); do [ -s {NODE_STATE_FILE} ] && break; '
            f'sleep 0.1; done']
        stop = ['kill -TERM "$ccl_health_watch" 2>/dev/null',
                'wait "$ccl_health_watch" 2>/dev/null']
        return start, stop

    def ras_cmds(self):
        """``(before, after)`` lines of the job script: ask NCCL's RAS which
        rank stopped (``python -m ccl_health.evidence.ras --watch``) shortly
        before the job's time limit, while its processes still run: at the
        limit less :func:`ras_margin` (the query's bound and a margin), on
        this node and, where ``NCCL_RAS_ADDR`` listens on every interface,
        on each node of the job; stopped after the program (a run that
        ended in time is never asked).  Its query's bound is half the time
        left then (at most RAS's own, ``--bound``): a RAS that does not
        answer is said to, before the job is ended."""
        from shlex import quote
        from ccl_health.evidence.ras import DEFAULT_BOUND
        try:        # ReFrame keeps it in seconds; '10m' where not yet
            limit = float(typ.Duration(self.time_limit)) \
                if self.time_limit else 0.0
        except (TypeError, ValueError):
            limit = 0.0
        if limit <= 0:
            return [], []
        at = int(max(1.0, limit - ras_margin(limit)))
        bound = min(DEFAULT_BOUND, max(0.5, (limit - at) / 2))
        py = quote(sys.executable or 'python3')
        start = [
            f'PYTHONPATH={quote(REPO)}${{PYTHONPATH:+:$PYTHONPATH}} {py} -m '
            f'ccl_health.evidence.ras --watch {RAS_FILE} --at {at} '
            f'--bound {bound:g} '
            f'--nodes "$(scontrol show hostnames "${{SLURM_JOB_NODELIST:-}}" '
            f'2>/dev/null | paste -sd, -)" </dev/null >/dev/null 2>&1 &',
            'ccl_health_ras=$!']
        stop = ['kill -TERM "$ccl_health_ras" 2>/dev/null',
                'wait "$ccl_health_ras" 2>/dev/null']
        return start, stop

    def ras_answer(self):
        """What RAS said before the time limit
        (:class:`ccl_health.evidence.ras.Answer`), or None: not asked."""
        from ccl_health.evidence.ras import read_watch
        return read_watch(os.path.join(self.stagedir, RAS_FILE))

    def node_states(self):
        """The readings of the sampler (:meth:`node_state_cmds`):
        ``{'before', 'samples', 'after'}``, ``{}`` when there are none."""
        from ccl_health.evidence.nodestate.__main__ import read_watch
        return read_watch(os.path.join(self.stagedir, NODE_STATE_FILE))

    def case_info(self):
        """What the case is, for recording it if it never gets judged."""
        return {'case_name': self.display_name,
                'system': self.current_system.name,
                'partition': self.current_partition.name,
                'environ': self.current_environ.name,
                'nodes': self.num_nodes, 'ranks': self.num_tasks,
                'transport': getattr(self, 'transport', ''),
                'collective': getattr(self, 'collective', ''),
                'algo': getattr(self, 'algo', 'default'),
                'run_id': getattr(self, 'run_id', ''),
                'store_url': getattr(self, 'store_url', ''),
                'stdout': sn.evaluate(self.stdout),
                'sizes': list(getattr(self, 'sizes_run', []) or []),
                'env': recorder.run_environment(self.env_vars)}

    def exit_status(self):
        """The launcher's exit status, or None when unknown (the job was
        killed before the script could write it)."""
        try:
            with open(os.path.join(self.stagedir, EXIT_STATUS_FILE)) as fp:
                return int(fp.read().strip())
        except (OSError, ValueError):
            return None

    def missing_reference(self, collective, algo='default'):
        """Why there is no reference for this case's exact key (file, key,
        the nearest keys there are), or None when there is one."""
        why = self._ref.missing_reason(
            self.current_partition.name, getattr(self, 'transport', ''),
            collective, self.num_nodes, self.num_tasks_per_node, algo)
        return why and f'{why} (record one with scripts/calibrate)'


class TransportMixin(rfm.RegressionTestPlugin):
    """A transport configuration (one record of
    :mod:`ccl_health.sitedata.transports`: intra, net-socket, net-ib,
    net-ib-gdr, net-plugin, net-plugin-gdr): the site's environment of it,
    NCCL's debug log to one file per rank, and the proof of the transport
    that ran.  ``transport``
    is the record's name (the test names, the run report and the
    references read it); :attr:`transport_info` is the record."""

    #: the transports that need no build of their own; the plugin ones
    #: are :class:`PluginBuildMixin`'s checks' (a failed plugin build must
    #: not take these down with it)
    transport = parameter(registry.builtin_names())

    @property
    def transport_info(self):
        """The record of this check's transport."""
        return registry.get(self.transport)

    def plugin_values(self):
        """Placeholders of the site's environment that name a build."""
        return {}

    def single_node_only(self):
        return not self.transport_info.uses_network

    @run_after('init')
    def note_unavailable_transport(self):
        """The reason of :meth:`skip_unavailable_transport`, known before
        any build: a case never set up because a build it needs failed is
        still skipped for it (the run report keeps ``skip_reason``), never
        build-failed: a transport the site file does not list is never a
        failure of the night.  The site read here is the one the checks
        use (:meth:`PlacedTest.load_site_data` reads it only where it could
        not be read here, and then says why)."""
        site = runtime_site(site_dir=self.site_dir)
        if site is None:
            return
        self._site = site
        why = site.unavailable(self.transport)
        if why:
            self.skip_reason = why

    @run_after('setup')
    def skip_unavailable_transport(self):
        """A transport the site file does not list (``net-ib`` without
        InfiniBand, the plugin's without a plugin) is skipped, with the
        reason (:meth:`ccl_health.sitedata.site.Site.unavailable`)."""
        why = self._site.unavailable(self.transport)
        self.skip_if(why is not None, why)

    @run_after('setup')
    def skip_gdr(self):
        if self.transport_info.needs_gdr:
            why = self._ref.gdr_unsupported(self.current_partition.name)
            self.skip_if(why is not None, f'GPUDirect RDMA unsupported on '
                         f'{self.current_partition.fullname}: {why}')

    def transport_env(self):
        """The environment of this transport, with NCCL's debug log."""
        tsite = self._site.transport(self.transport)
        values = (self.plugin_values() if self.transport_info.uses_plugin
                  else {})
        env = self._site.render_env(self.transport, values,
                                    single_node=self.num_nodes == 1)
        env.update({'NCCL_DEBUG': 'INFO',
                    'NCCL_DEBUG_SUBSYS': 'INIT,NET,ENV',
                    'NCCL_DEBUG_FILE': os.path.join(self.stagedir,
                                                    DEBUG_FILES)})
        self.modules = tsite.modules
        return env

    def max_size_here(self, max_size):
        """``max_size``, capped by the site's ``max_size`` of this
        transport (slow transports on one node)."""
        cap = self._site.transport(self.transport).max_size
        if cap and parse_size(cap) < parse_size(max_size):
            return cap
        return max_size

    def evidence(self):
        if not hasattr(self, '_ev'):
            self._ev = tproof.read_evidence(
                tproof.debug_log_files(self.stagedir))
        return self._ev

    def prove_transport(self, **versions):
        """The proof, kept in ``proven_transport`` / ``transport_proof``;
        ``versions`` from the debug log plus the ones given."""
        ev = self.evidence()
        return self.keep_proof(prove(self.transport, ev,
                                            nodes=self.num_nodes or 1),
                               ev, **versions)

    def keep_proof(self, proof, ev, **versions):
        """Keep ``proof`` in ``proven_transport`` / ``transport_proof``
        and the versions of the debug-log evidence ``ev`` plus the ones
        given in ``versions``."""
        self.proven_transport = proof.proven or 'none'
        self.transport_proof = proof.reason
        self.versions = dict(ev.versions, plugin_loaded=ev.plugin_loaded or
                             '', **versions)
        return proof


class SizeSweepMixin(rfm.RegressionTestPlugin):
    """Message sizes from ``min_size`` to ``max_size`` by ``step_factor``,
    ``iters`` timed iterations after ``warmup_iters``; one performance
    variable ``busbw_<size>`` per measured size (:meth:`measured`)."""

    min_size = variable(str, value=SWEEP[0])
    max_size = variable(str, value=SWEEP[1])
    step_factor = variable(int, value=SWEEP[2])
    iters = variable(int, value=20)
    warmup_iters = variable(int, value=5)

    def measured(self):
        """The :class:`~ccl_health.evidence.nccltests.SweepResult` of the run."""
        raise NotImplementedError

    @run_before('performance')
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        self.perf_variables = {
            reference.perf_var(row.size): sn.make_performance_function(
                sn.defer(row.busbw), reference.UNIT)
            for row in self.measured().rows}


#: the transports that run over the network plugin (and need its build)
PLUGIN_TRANSPORTS = registry.plugin_names()


class PluginBuildMixin(rfm.RegressionTestPlugin):
    """The plugin build (and through it libfabric) for a check of the
    network-plugin transports: only those depend on it, so a failed plugin
    build cannot take intra and net-socket down with it.  The check sets
    ``transport = parameter(PLUGIN_TRANSPORTS)`` in its own body (ReFrame
    does not let two bases both define one parameter).  A site that lists
    no plugin transport gets :class:`NoPluginMixin` instead
    (:func:`plugin_mixin`)."""

    plugin = fixture(NetPluginBuild, scope='environment')

    def plugin_values(self):
        return {'plugin_library': self.plugin.library,
                'plugin_prefix': self.plugin.prefix,
                'libfabric_prefix': self.plugin.libfabric.prefix}


class NoPluginMixin(rfm.RegressionTestPlugin):
    """The plugin checks of a site whose file lists no plugin transport:
    nothing is built for them (no plugin, no libfabric), and each is
    skipped at setup with the reason
    (:meth:`TransportMixin.skip_unavailable_transport`)."""

    def plugin_values(self):
        return {}


def runtime_site(system=None, site_dir=None):
    """The site file of ``system`` (default: the system ReFrame runs on)
    in ``site_dir`` (default: ``CCL_HEALTH_SITE_DIR``, else the shipped
    ``site/``), as the check files read it when they load; None when it
    cannot be read (the checks then report its error at setup)."""
    if system is None:
        import reframe.core.runtime as rt
        system = rt.runtime().system.name
    try:
        return site_data.load(site_dir or resources.site_dir(), system,
                              benign_check=check_benign)
    except (CclHealthError, OSError):
        return None


def plugin_mixin(system=None, site_dir=None):
    """:class:`PluginBuildMixin` where the site file lists a plugin
    transport (or cannot be read), else :class:`NoPluginMixin`: a site
    without the plugin never builds it for checks that are skipped."""
    site = runtime_site(system, site_dir)
    if site is not None and not set(PLUGIN_TRANSPORTS) & set(site.transports):
        return NoPluginMixin
    return PluginBuildMixin
