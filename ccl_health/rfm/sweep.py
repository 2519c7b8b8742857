"""The collective sweep: one nccl-tests / rccl-tests binary over a range of
message sizes, one MPI rank per GPU, in one transport configuration.

Sanity: the run completed, nothing was wrong or out of bounds, and the NCCL
debug log proves the transport that was asked for.  Performance: busbw per
message size, compared with ``reference/<system>.yaml`` through ReFrame's
``reference``."""

import json
import os

import reframe as rfm
import reframe.utility.typecheck as typ
import reframe.utility.sanity as sn
from reframe.core.exceptions import ReferenceParseError, ReframeError
from reframe.core.logging import getlogger
from reframe.core.builtins import (fixture, parameter, run_after, run_before,
                                   sanity_function, variable)

from builders.nccl_tests import CollectiveTestsBuild
from builders.net_plugin import NetPluginBuild
from ccl_health import TRANSPORTS, CclHealthError, reference
from ccl_health import site as site_data
from ccl_health import nccltests, recorder, store, transport as tproof
from ccl_health.units import parse_size, size_sweep

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DEBUG_FILES = 'nccl-debug.%h.%p.log'
RESULT_JSON = 'result.json'


class CollectiveSweepBase(rfm.RunOnlyRegressionTest):
    """Generic sweep; a concrete check fixes :attr:`collective`."""

    transport = parameter(TRANSPORTS)
    collective = variable(str, value='all_reduce')
    #: NCCL_ALGO for the whole run; 'default' leaves NCCL to choose
    algo = variable(str, value='default')
    #: nodes of the job; 0: the partition's ``sweep_nodes`` extra (1 on
    #: `local`, 2 on the production systems).  ``intra`` always runs on one.
    num_nodes = variable(int, value=0)
    min_size = variable(str, value='8')
    max_size = variable(str, value='8G')
    step_factor = variable(int, value=2)
    iters = variable(int, value=20)
    warmup_iters = variable(int, value=5)
    #: nccl-tests' own per-operation timeout (-T), under time_limit
    op_timeout = variable(int, value=120)
    reference_dir = variable(str, value=os.environ.get(
        'CCL_HEALTH_REFERENCE_DIR', os.path.join(REPO, 'reference')))
    site_dir = variable(str, value=os.environ.get(
        'CCL_HEALTH_SITE_DIR', os.path.join(REPO, 'site')))

    #: extra environment for every run, applied last (``-S extra_env=K:V``)
    extra_env = variable(typ.Dict[str, str], value={})

    #: acceptance (post-maintenance) mode: a sweep with no reference entry
    #: fails instead of passing on what it measured
    acceptance = variable(bool, value=False)

    #: groups the test cases of one run in the performance database
    run_id = variable(str, value=recorder.default_run_id())
    #: the performance database (SQLite path or postgresql:// URL); empty:
    #: $CCL_HEALTH_DB, else <CCL_HEALTH_OUTPUT>/ccl-health.db
    store_url = variable(str, value='')

    # What the run proved; filled at sanity, kept in the report and perflog.
    proven_transport = variable(str, value='')
    transport_proof = variable(str, value='')
    verdict = variable(str, value='')
    versions = variable(dict, value={})
    sizes_run = variable(list, value=[])
    skip_reason = variable(str, value='')

    tests = fixture(CollectiveTestsBuild, scope='environment')
    plugin = fixture(NetPluginBuild, scope='environment')

    valid_systems = ['+gpu']
    valid_prog_environs = ['+ccl']
    time_limit = '10m'
    maintainers = ['ccl-health']
    tags = {'sweep', 'nightly', 'acceptance'}

    @run_after('init')
    def describe(self):
        self.descr = (f'{self.collective} sweep over {self.transport}')

    def skip_if(self, cond, msg=None):
        """ReFrame's skip_if, keeping the reason for the report."""
        if cond:
            self.skip_reason = msg or ''
        super().skip_if(cond, msg)

    @run_after('setup')
    def place_ranks(self):
        extras = self.current_partition.extras
        gpus = int(extras.get('gpus_per_node', 0))
        if self.transport == 'intra':
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
                     f'{self.collective} needs at least 2 GPUs; this '
                     f'partition has {gpus} per node x {self.num_nodes}')

    @run_after('setup')
    def load_reference(self):
        system = self.current_system.name
        part = self.current_partition.name
        try:
            self._site = site_data.load(self.site_dir, system)
            ref = reference.load_for_system(self.reference_dir, system)
        except CclHealthError as err:
            # a ReFrame error: one clear line, no traceback
            raise ReferenceParseError(str(err)) from None
        if self.transport == 'net-plugin-gdr':
            why = ref.gdr_unsupported(part)
            self.skip_if(why is not None, f'GPUDirect RDMA unsupported on '
                         f'{self.current_partition.fullname}: {why}')
        self._ref_entry = ref.lookup(part, self.transport, self.collective,
                                     self.num_nodes, self.num_tasks_per_node,
                                     self.algo)
        if self._ref_entry:
            self.reference = self._ref_entry.to_rfm(
                self.current_partition.fullname)

    @run_before('run')
    def set_command(self):
        tsite = self._site.transport(self.transport)
        max_size = tsite.max_size if (tsite.max_size and parse_size(
            tsite.max_size) < parse_size(self.max_size)) else self.max_size
        self.sizes_run = size_sweep(self.min_size, max_size,
                                    self.step_factor)
        self.executable = os.path.join(self.tests.prefix, 'bin',
                                       f'{self.collective}_perf')
        if not self.is_dry_run() and not os.access(self.executable, os.X_OK):
            raise ReframeError(f'could not check: {self.executable} is '
                               f'missing or not executable (a broken build '
                               f'or site install of nccl-tests)')
        self.executable_opts = [
            '-g', '1', '-b', str(parse_size(self.min_size)),
            '-e', str(parse_size(max_size)), '-f', str(self.step_factor),
            '-n', str(self.iters), '-w', str(self.warmup_iters),
            '-T', str(self.op_timeout)]
        if self.tests.json_output:
            self.executable_opts += ['-J', RESULT_JSON]
        values = {}
        if tsite.uses_plugin:
            values = {'plugin_library': self.plugin.library,
                      'plugin_prefix': self.plugin.prefix,
                      'libfabric_prefix': self.plugin.libfabric.prefix}
        env = self._site.render_env(self.transport, values,
                                    single_node=self.num_nodes == 1)
        if self.algo != 'default':
            env['NCCL_ALGO'] = self.algo
        env.update({'NCCL_DEBUG': 'INFO',
                    'NCCL_DEBUG_SUBSYS': 'INIT,NET,ENV',
                    'NCCL_DEBUG_FILE': os.path.join(self.stagedir,
                                                    DEBUG_FILES)})
        self.modules = tsite.modules
        env.update(self.extra_env)
        self.env_vars = {k: site_data.shell_value(v) for k, v in env.items()}
        self.job.launcher.options = list(self._site.launcher_options)
        self.keep_files = [RESULT_JSON, 'nccl-debug.*.log']

    # -- reading the outputs ---------------------------------------------

    def _result(self):
        if not hasattr(self, '_parsed'):
            out = os.path.join(self.stagedir, sn.evaluate(self.stdout))
            with open(out, errors='replace') as fp:
                stdout = fp.read()
            path = os.path.join(self.stagedir, RESULT_JSON)
            js = open(path).read() if os.path.exists(path) else None
            self._parsed = nccltests.parse(stdout, js, path)
        return self._parsed

    def _evidence(self):
        if not hasattr(self, '_ev'):
            self._ev = tproof.read_evidence(
                tproof.debug_log_files(self.stagedir))
        return self._ev

    def _judge(self):
        """(verdict, one-line reason); verdict in the shared vocabulary."""
        res, ev = self._result(), self._evidence()
        proof = tproof.prove(self.transport, ev)
        self.proven_transport = proof.proven or 'none'
        self.transport_proof = proof.reason
        self.versions = dict(ev.versions, plugin_loaded=ev.plugin_loaded or
                             '', nccl_tests=res.tests_version or '')
        if res.timed_out:
            return 'hang', (f'hang: nccl-tests timed out an operation '
                            f'(-T {self.op_timeout}s): {res.errors[0]}')
        if not res.rows or not res.complete:
            err = res.errors[0] if res.errors else 'no closing summary'
            return 'crash', (f'crash: the sweep did not complete '
                             f'({len(res.rows)} of {len(self.sizes_run)} '
                             f'sizes; {err})')
        if res.wrong_total:
            bad = [r.size for r in res.rows if r.wrong]
            return 'wrong-results', (f'wrong-results: {res.wrong_total} wrong '
                                     f'elements at sizes {bad}')
        if res.out_of_bounds:
            return 'wrong-results', (f'wrong-results: {res.out_of_bounds} '
                                     f'out-of-bounds values')
        if not proof.ok:
            return 'fallback', f'fallback: {proof.reason}'
        if self.acceptance and not self._ref_entry:
            return 'could-not-check', (
                f'could not check: no reference for {self.transport} '
                f'{self.collective} on {self.num_nodes} node(s) x '
                f'{self.num_tasks_per_node} GPUs in '
                f'{self.reference_dir}/{self.current_system.name}.yaml '
                f'(acceptance needs one; record it with scripts/calibrate)')
        return 'pass', proof.reason

    @sanity_function
    def validate(self):
        self.verdict, reason = self._judge()
        self._record(reason)
        return sn.assert_eq(self.verdict, 'pass', msg=reason)

    def _record(self, reason):
        """Write this case to the performance database now, as soon as its
        outputs are read: nothing is lost if the run dies later."""
        sizes = recorder.sizes_from_sweep(self._result(), self._ref_entry)
        versions = dict(self.versions)
        versions.setdefault('driver', str(
            self.current_partition.extras.get('driver', '')))
        case = store.CaseRecord(
            run_id=self.run_id, case_name=self.display_name,
            verdict=recorder.case_verdict(self.verdict, sizes),
            system=self.current_system.name,
            partition=self.current_partition.name,
            environ=self.current_environ.name,
            nodelist=','.join(self.job.nodelist or []),
            nodes=self.num_nodes, ranks=self.num_tasks,
            collective=self.collective, transport=self.transport,
            proven=self.proven_transport, algo=self.algo, reason=reason,
            versions=versions,
            env={k: str(v) for k, v in self.env_vars.items()},
            suite_revision=recorder.suite_revision(), source='check',
            sizes=sizes)
        try:
            with store.open_store(self.store_url or None) as db:
                db.add_case(case)
        except Exception as err:     # the run report is ingested later
            getlogger().warning(f'{self.display_name}: not recorded in the '
                                f'performance database yet: {err}')

    @run_before('performance')
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        self.perf_variables = {
            reference.perf_var(row.size): sn.make_performance_function(
                sn.defer(row.busbw), reference.UNIT)
            for row in self._result().rows}
