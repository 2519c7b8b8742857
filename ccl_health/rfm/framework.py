"""ReFrame base tests for the framework-level checks: the same placement,
site environment, transport proof and references as the collective sweep
(:mod:`ccl_health.rfm.sweep`), running ``python3 -m
ccl_health.torch_bench`` instead of an nccl-tests binary.

* :class:`FrameworkBase`: one rank per GPU on ``num_nodes`` nodes (a skip
  with the reason below 2 GPUs), the repository importable in the job
  (``PYTHONPATH``), the rendezvous of ``torch.distributed``, the JSON the
  tool writes.
* :class:`NcclFrameworkBase`: + a ``transport`` parameter, the site's
  environment of that transport, ``NCCL_DEBUG=INFO`` to one file per rank,
  and the transport proof in sanity, as the sweep does.
"""

import json
import os
import zlib

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (fixture, parameter, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import ReferenceParseError

from builders.net_plugin import NetPluginBuild
from ccl_health import TRANSPORTS, CclHealthError, reference
from ccl_health import site as site_data
from ccl_health import transport as tproof
from ccl_health.units import format_size, parse_size

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DEBUG_FILES = 'nccl-debug.%h.%p.log'
RESULT_JSON = 'torch-bench.json'
MODULE = 'ccl_health.torch_bench'


class FrameworkBase(rfm.RunOnlyRegressionTest):
    """A ``ccl_health.torch_bench`` mode, one rank per GPU."""

    #: the mode of ccl_health.torch_bench (set by the concrete check)
    bench_mode = variable(str, value='bandwidth')
    #: the Python that has torch (and mpi4py); the job inherits PATH
    python = variable(str, value='python3')
    #: nodes of the job; 0: the partition's ``sweep_nodes`` extra
    num_nodes = variable(int, value=0)
    #: the name of the collective in the reference file (torch_<name>)
    collective = variable(str, value='')
    reference_dir = variable(str, value=os.environ.get(
        'CCL_HEALTH_REFERENCE_DIR', os.path.join(REPO, 'reference')))
    site_dir = variable(str, value=os.environ.get(
        'CCL_HEALTH_SITE_DIR', os.path.join(REPO, 'site')))
    extra_env = variable(typ.Dict[str, str], value={})
    acceptance = variable(bool, value=False)

    verdict = variable(str, value='')
    versions = variable(dict, value={})
    skip_reason = variable(str, value='')
    proven_transport = variable(str, value='')
    transport_proof = variable(str, value='')

    valid_systems = ['+gpu']
    valid_prog_environs = ['+ccl']
    time_limit = '10m'
    maintainers = ['ccl-health']
    tags = {'framework'}

    def skip_if(self, cond, msg=None):
        if cond:
            self.skip_reason = msg or ''
        super().skip_if(cond, msg)

    def _single_node_only(self):
        return False

    @run_after('setup')
    def place_ranks(self):
        extras = self.current_partition.extras
        gpus = int(extras.get('gpus_per_node', 0))
        if self._single_node_only():
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
                     f'{self.bench_mode} needs at least 2 GPUs; this '
                     f'partition has {gpus} per node x {self.num_nodes}')

    @run_after('setup')
    def load_site(self):
        try:
            self._site = site_data.load(self.site_dir,
                                        self.current_system.name)
            self._ref = reference.load_for_system(self.reference_dir,
                                                  self.current_system.name)
        except CclHealthError as err:
            raise ReferenceParseError(str(err)) from None

    def bench_args(self):
        """Arguments after ``python3 -m ccl_health.torch_bench <mode>``."""
        return []

    def run_env(self):
        """The environment of the run (before ``extra_env``)."""
        return dict(self._site.env)

    @run_before('run')
    def set_command(self):
        self.executable = self.python
        self.executable_opts = (['-m', MODULE, self.bench_mode] +
                                self.bench_args() + ['--json', RESULT_JSON])
        env = self.run_env()
        # the suite's own package, whatever Python the job finds
        env['PYTHONPATH'] = REPO + '${PYTHONPATH:+:$PYTHONPATH}'
        # a rendezvous port of its own: concurrent jobs on one node
        env['MASTER_PORT'] = str(29500 + 10 * (zlib.crc32(
            self.unique_name.encode()) % 500))
        if self.num_nodes > 1:
            # the batch script runs on the first node, where rank 0 is
            self.prerun_cmds = ['export MASTER_ADDR=$(hostname)']
        env.update(self.extra_env)
        self.env_vars = {k: site_data.shell_value(v) for k, v in env.items()}
        self.job.launcher.options = list(self._site.launcher_options)
        self.keep_files = [RESULT_JSON, 'nccl-debug.*.log']

    # -- outputs -------------------------------------------------------------

    def _doc(self):
        if not hasattr(self, '_parsed_doc'):
            path = os.path.join(self.stagedir, RESULT_JSON)
            try:
                with open(path) as fp:
                    self._parsed_doc = json.load(fp)
            except (OSError, ValueError) as err:
                self._parsed_doc = {'error': f'{RESULT_JSON}: {err}'}
        return self._parsed_doc

    def _stderr_tail(self):
        try:
            with open(os.path.join(self.stagedir,
                                   sn.evaluate(self.stderr))) as fp:
                lines = [ln for ln in fp.read().splitlines() if ln.strip()]
            return lines[-1][:300] if lines else ''
        except OSError:
            return ''

    def _judge_output(self):
        """(verdict, reason) from the JSON alone, or None when it is
        fine."""
        doc = self._doc()
        if 'error' in doc or not doc.get('complete'):
            why = doc.get('error') or 'the run did not complete'
            tail = self._stderr_tail()
            return 'crash', (f'crash: {why}' + (f' ({tail})' if tail else ''))
        return None

    def _judge(self):
        bad = self._judge_output()
        if bad:
            return bad
        return 'pass', 'completed'

    @sanity_function
    def validate(self):
        self.verdict, reason = self._judge()
        return sn.assert_eq(self.verdict, 'pass', msg=reason)


class NcclFrameworkBase(FrameworkBase):
    """torch.distributed over NCCL/RCCL in one of the suite's transports,
    proven from NCCL's debug log."""

    transport = parameter(TRANSPORTS)
    plugin = fixture(NetPluginBuild, scope='environment')

    def _single_node_only(self):
        return self.transport == 'intra'

    @run_after('setup')
    def skip_gdr(self):
        if self.transport == 'net-plugin-gdr':
            why = self._ref.gdr_unsupported(self.current_partition.name)
            self.skip_if(why is not None, f'GPUDirect RDMA unsupported on '
                         f'{self.current_partition.fullname}: {why}')

    def run_env(self):
        tsite = self._site.transport(self.transport)
        values = {}
        if tsite.uses_plugin:
            values = {'plugin_library': self.plugin.library,
                      'plugin_prefix': self.plugin.prefix,
                      'libfabric_prefix': self.plugin.libfabric.prefix}
        env = self._site.render_env(self.transport, values,
                                    single_node=self.num_nodes == 1)
        env.update({'NCCL_DEBUG': 'INFO',
                    'NCCL_DEBUG_SUBSYS': 'INIT,NET,ENV',
                    'NCCL_DEBUG_FILE': os.path.join(self.stagedir,
                                                    DEBUG_FILES)})
        self.modules = tsite.modules
        return env

    def bench_args(self):
        return ['--transport', self.transport]

    def _evidence(self):
        if not hasattr(self, '_ev'):
            self._ev = tproof.read_evidence(
                tproof.debug_log_files(self.stagedir))
        return self._ev

    def _judge(self):
        bad = self._judge_output()
        ev = self._evidence()
        proof = tproof.prove(self.transport, ev)
        self.proven_transport = proof.proven or 'none'
        self.transport_proof = proof.reason
        doc = self._doc()
        self.versions = dict(ev.versions, plugin_loaded=ev.plugin_loaded or
                             '', torch=doc.get('torch_version') or '',
                             torch_nccl=doc.get('nccl_version') or '')
        if bad:
            return bad
        more = self._judge_results()
        if more:
            return more
        if not proof.ok:
            return 'fallback', f'fallback: {proof.reason}'
        return 'pass', proof.reason

    def _judge_results(self):
        """(verdict, reason) for what the mode measured, or None."""
        return None


class TorchBandwidthBase(NcclFrameworkBase):
    """busbw per size of one collective through torch.distributed,
    against ``reference/<system>.yaml`` entries named ``torch_<collective>``;
    the gap to the nccl-tests reference of the same collective (framework
    overhead) is recorded in ``framework_gap``."""

    bench_mode = 'bandwidth'
    min_size = variable(str, value='1M')
    max_size = variable(str, value='1G')
    step_factor = variable(int, value=2)
    iters = variable(int, value=20)
    warmup_iters = variable(int, value=5)
    #: the ideal busbw, GB/s, when the link facts cannot be read on the
    #: nodes (0: read them: NVLink from nvidia-smi, NIC from sysfs)
    ideal_busbw = variable(float, value=0.0)
    #: busbw / nccl-tests reference - 1 per size, percent (negative: slower
    #: through the framework)
    framework_gap = variable(dict, value={})
    sizes_run = variable(list, value=[])

    def torch_collective_name(self):
        raise NotImplementedError

    @run_after('init')
    def describe(self):
        self.collective = f'torch_{self.torch_collective_name()}'
        self.descr = (f'{self.torch_collective_name()} through '
                      f'torch.distributed over {self.transport}')

    @run_after('setup')
    def load_reference(self):
        part = self.current_partition.name
        look = (part, self.transport)
        rest = (self.num_nodes, self.num_tasks_per_node)
        self._ref_entry = self._ref.lookup(*look, self.collective, *rest)
        self._nccl_tests_entry = self._ref.lookup(
            *look, self.torch_collective_name(), *rest)
        if self._ref_entry:
            self.reference = self._ref_entry.to_rfm(
                self.current_partition.fullname)

    def bench_args(self):
        tsite = self._site.transport(self.transport)
        max_size = tsite.max_size if (tsite.max_size and parse_size(
            tsite.max_size) < parse_size(self.max_size)) else self.max_size
        lo, hi = parse_size(self.min_size), parse_size(max_size)
        args = super().bench_args() + [
            '--sizes', f'{format_size(lo)}:{format_size(hi)}',
            '--step-factor', str(self.step_factor),
            '--collectives', self.torch_collective_name(),
            '--iters', str(self.iters), '--warmup', str(self.warmup_iters)]
        if self.ideal_busbw > 0:
            args += ['--ideal-busbw', str(self.ideal_busbw)]
        elif self.current_partition.extras.get('nic_gbps') and \
                self.transport != 'intra':
            args += ['--nic-gbps',
                     str(self.current_partition.extras['nic_gbps'])]
        return args

    def _sweep(self):
        if not hasattr(self, '_sw'):
            from ccl_health.torch_bench import as_sweep
            self._sw = as_sweep(self._doc(), self.torch_collective_name())
        return self._sw

    def _judge_results(self):
        res = self._sweep()
        self.sizes_run = [r.size for r in res.rows]
        if res.errors:
            return 'crash', f'crash: {res.errors[0]}'
        if not res.rows:
            return 'crash', 'crash: no size was measured'
        if res.wrong_total:
            return 'wrong-results', (f'wrong-results: {res.wrong_total} '
                                     f'wrong elements after one '
                                     f'{self.torch_collective_name()}')
        if self._nccl_tests_entry:
            ref = self._nccl_tests_entry.busbw
            self.framework_gap = {
                format_size(r.size): round(100.0 * (r.busbw / ref[r.size]
                                                    - 1), 1)
                for r in res.rows if r.size in ref and r.busbw}
        if self.acceptance and not self._ref_entry:
            return 'could-not-check', (
                f'could not check: no reference for {self.transport} '
                f'{self.collective} in {self.reference_dir}/'
                f'{self.current_system.name}.yaml')
        return None

    @run_before('performance')
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        self.perf_variables = {
            reference.perf_var(row.size): sn.make_performance_function(
                sn.defer(row.busbw), reference.UNIT)
            for row in self._sweep().rows}


class FirstCallMixin:
    """Perf variables of the first-call mode, and an optional upper bound
    (``first_call_limit_s``)."""

    def _first_call_perf(self):
        s = self._doc().get('summary') or {}
        return {name: sn.make_performance_function(
            sn.defer(float(s.get(key, 0.0))), 's')
            for name, key in (('first_call_s', 'first_call_s'),
                              ('first_call_max_s', 'first_call_max_s'),
                              ('second_call_s', 'second_call_s'))}

    def _first_call_reference(self):
        if self.first_call_limit_s > 0:
            self.reference = {self.current_partition.fullname: {
                'first_call_s': (self.first_call_limit_s, None, 0.0, 's')}}
