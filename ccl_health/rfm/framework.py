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
* one base per benchmark of the tool, with its command line, its judging
  and its performance variables: :class:`TorchBandwidthBase`,
  :class:`TorchFirstCallBase` and :class:`MpiFirstCallBase` (with
  :class:`FirstCallMixin`), :class:`PatternReplayBase`,
  :class:`TrainingStepBase`; the checks (``checks/framework_checks.py``)
  only name their parameters.
"""

import json
import os
import re
import zlib

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, run_after, run_before,
                                   sanity_function, variable)

from ccl_health import patterns
from ccl_health.torch_bench.train import TRAIN_MODELS
from ccl_health.sitedata.transports import IDEAL_NIC
from ccl_health.units import format_size, parse_size

from ccl_health.rfm.base import REPO, PlacedTest, SizeSweepMixin, TransportMixin

RESULT_JSON = 'torch-bench.json'
MODULE = 'ccl_health.torch_bench'


#: the last line of a Python traceback (``RuntimeError: ...``,
#: ``torch.distributed.DistNetworkError: ...``), or the tool's own error
#: line, behind the launcher's tag of the rank (``[1,0]<stderr>:``)
_RANK_ERROR = re.compile(
    r'^(?:\[[^\]]*\](?:<std\w+>)?:?\s*)?'
    r'((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b(?::.*)?'
    r'|ccl_health\.torch_bench: error: .*)$')


def failing_rank_line(*texts):
    """The failing rank's own error in ``texts`` (the job's stderr, then
    its stdout): the first exception a rank printed (the first to fail is
    the cause; the others fail after it), else the last line outside the
    launcher's banners (Open MPI's blocks between lines of dashes), else
    ''.  Never only the banner."""
    last = ''
    for text in texts:
        banner = False
        for line in (text or '').splitlines():
            s = line.strip()
            if not s:
                continue
            if set(s) <= set('-=*'):
                banner = not banner
                continue
            m = _RANK_ERROR.match(s)
            if m:
                return m.group(1)[:300]
            if not banner:
                last = s
        if last:
            break
    return last[:300]


class FrameworkBase(PlacedTest):
    """A ``ccl_health.torch_bench`` mode, one rank per GPU."""

    #: the mode of ccl_health.torch_bench (set by the concrete check)
    bench_mode = variable(str, value='bandwidth')
    #: the Python that has torch (and mpi4py); the job inherits PATH
    python = variable(str, value='python3')
    #: the name of the collective in the reference file (torch_<name>)
    collective = variable(str, value='')
    tags = {'framework'}

    def what(self):
        return self.bench_mode

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
        env['PYTHONPATH'] = REPO + ':${PYTHONPATH}'
        # a rendezvous port of its own: checks that run at the same time
        # on one node share nothing; a block of free ports picked on the
        # first node, where rank 0 listens, as the job starts (this
        # check's own fixed block where none can be picked)
        fixed = 29500 + 10 * (zlib.crc32(self.unique_name.encode()) % 500)
        env['MASTER_PORT'] = str(fixed)
        self.prerun_cmds = [
            f'export MASTER_PORT=$({self.python} -m {MODULE}.port --count '
            f'10 --default {fixed} 2>/dev/null || echo {fixed})']
        if self.num_nodes > 1:
            # the batch script runs on the first node, where rank 0 is
            self.prerun_cmds.append('export MASTER_ADDR=$(hostname)')
        self.set_environment(env, [RESULT_JSON])

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
        """The failing rank's own error (:func:`failing_rank_line`) of the
        job's stderr, else of its stdout."""
        texts = []
        for name in (self.stderr, self.stdout):
            try:
                with open(os.path.join(self.stagedir, sn.evaluate(name)),
                          errors='replace') as fp:
                    texts.append(fp.read())
            except OSError:
                pass
        return failing_rank_line(*texts)

    def _hang(self):
        """(verdict, reason) of a job Slurm ended at its time limit: the
        one judge's ``hang``, naming the rank NCCL's RAS named before it
        (:meth:`ras_answer`) or the debug log that stopped first; None
        where it was not ended so.  The debug logs are the stage's own
        (a check without a transport, MPI's first call, reads none of its
        evidence otherwise)."""
        from ccl_health import summary
        from ccl_health.evidence.debuglog import debug_log_files
        from ccl_health.judge import assemble
        from ccl_health.judge.casejudge import judge
        stage = lambda name: os.path.join(self.stagedir, sn.evaluate(name))
        line = summary.slurm_time_limit_line(stage(self.stderr))
        if not line:
            return None
        try:
            with open(stage(self.stdout), errors='replace') as fp:
                out = fp.read()
        except OSError:
            out = ''
        j = judge(assemble.case([assemble.unrun(
            killed=f'the job exceeded its time limit ({line})',
            ras=self.ras_answer(), logs=debug_log_files(self.stagedir),
            stdout=out)],
            what=f'{MODULE} {self.bench_mode}'))
        return str(j.verdict), j.reason

    def _judge_output(self):
        """(verdict, reason) from the JSON alone, or None when it is
        fine."""
        hang = self._hang()
        if hang:
            return hang
        doc = self._doc()
        rc = self.exit_status()
        if 'error' in doc or not doc.get('complete') or rc:
            why = doc.get('error') or 'the run did not complete'
            if rc:
                why = f'exit status {rc}; {why}'
            tail = self._stderr_tail()
            return 'crash', (f'crash: {why}' + (f' ({tail})' if tail else ''))
        if rc is None:
            return 'could-not-check', ('could not check: the exit status '
                                       'of the run is unknown')
        return None

    def _judge(self):
        bad = self._judge_output()
        if bad:
            return bad
        return 'pass', 'completed'

    @sanity_function
    def validate(self):
        self.verdict, reason = self._judge()
        self.verdict_reason = reason
        return sn.assert_eq(self.verdict, 'pass', msg=reason)


class NcclFrameworkBase(TransportMixin, FrameworkBase):
    """torch.distributed over NCCL/RCCL in one of the suite's transports,
    proven from NCCL's debug log."""

    def run_env(self):
        return self.transport_env()

    def bench_args(self):
        return ['--transport', self.transport]

    def _judge(self):
        bad = self._judge_output()
        doc = self._doc()
        proof = self.prove_transport(
            torch=doc.get('torch_version') or '',
            torch_nccl=doc.get('nccl_version') or '')
        if bad:
            return bad
        more = self._judge_results()
        if more and more[0] != 'no-reference':
            return more
        if not proof.ok:
            if proof.proven is None:       # nothing to prove it from
                return 'could-not-check', f'could not check: {proof.reason}'
            return 'fallback', f'fallback: {proof.reason}'
        return more or ('pass', proof.reason)

    def _judge_results(self):
        """(verdict, reason) for what the mode measured, or None."""
        return None


class TorchBandwidthBase(SizeSweepMixin, NcclFrameworkBase):
    """busbw per size of one collective through torch.distributed,
    against ``reference/<system>.yaml`` entries named ``torch_<collective>``;
    the gap to the nccl-tests reference of the same collective (framework
    overhead) is recorded in ``framework_gap``."""

    bench_mode = 'bandwidth'
    min_size = '1M'
    max_size = '1G'
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
        lo = parse_size(self.min_size)
        hi = parse_size(self.max_size_here(self.max_size))
        args = super().bench_args() + [
            '--sizes', f'{format_size(lo)}:{format_size(hi)}',
            '--step-factor', str(self.step_factor),
            '--collectives', self.torch_collective_name(),
            '--iters', str(self.iters), '--warmup', str(self.warmup_iters)]
        if self.ideal_busbw > 0:
            args += ['--ideal-busbw', str(self.ideal_busbw)]
        elif self.current_partition.extras.get('nic_gbps') and \
                self.transport_info.ideal_from == IDEAL_NIC:
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
        if self._ref_entry is None:
            return 'no-reference', ('no-reference: ' + (
                self.missing_reference(self.collective) or
                'no reference entry'))
        return None

    def measured(self):
        return self._sweep()


class FirstCallMixin(rfm.RegressionTestPlugin):
    """The first-call mode: ``loops`` fresh starts, the perf variables
    first_call_s / first_call_max_s / second_call_s, and an optional upper
    bound (``first_call_limit_s``)."""

    loops = variable(int, value=5)
    #: an upper bound for first_call_s (median over loops), seconds; 0: none
    first_call_limit_s = variable(float, value=0.0)

    @run_after('setup')
    def set_limit(self):
        if self.first_call_limit_s > 0:
            self.reference = {self.current_partition.fullname: {
                'first_call_s': (self.first_call_limit_s, None, 0.0, 's')}}

    @run_before('performance')
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        s = self._doc().get('summary') or {}
        self.perf_variables = {name: sn.make_performance_function(
            sn.defer(float(s.get(name, 0.0))), 's')
            for name in ('first_call_s', 'first_call_max_s',
                         'second_call_s')}



class TorchFirstCallBase(FirstCallMixin, NcclFrameworkBase):
    """The first-call mode through torch.distributed over ``transport``:
    init_process_group + the first all_reduce vs the second, ``loops``
    fresh process groups."""

    bench_mode = 'first-call'

    @run_after('init')
    def describe(self):
        self.collective = 'torch_first_call'
        self.descr = (f'time to the first all_reduce (torch) over '
                      f'{self.transport}')

    def bench_args(self):
        return super().bench_args() + ['--loops', str(self.loops)]


class MpiFirstCallBase(FirstCallMixin, FrameworkBase):
    """The first-call mode with plain MPI (mpi4py): MPI_Init or a fresh
    communicator + the first Allreduce vs the second; one node, no NCCL,
    no transport."""

    bench_mode = 'first-call'
    transport = variable(str, value='')

    @run_after('init')
    def describe(self):
        self.collective = 'mpi_first_call'
        self.descr = 'time to the first Allreduce (mpi4py)'

    def single_node_only(self):
        return True

    def bench_args(self):
        return ['--backend', 'mpi4py', '--loops', str(self.loops)]


class PatternReplayBase(NcclFrameworkBase):
    """Replays a communication-pattern CSV (default: the example the suite
    ships, :data:`ccl_health.patterns.EXAMPLE`) and records per line the
    measured time, algbw, busbw, ideal busbw and efficiency; a line that
    fails to replay is a crash naming the line."""

    bench_mode = 'replay'
    #: the pattern CSV (``-S pattern=job.csv``)
    pattern = variable(str, value=patterns.EXAMPLE)
    iters = variable(int, value=20)
    warmup_iters = variable(int, value=5)
    #: the tool's notes (pattern recorded on other ranks, ALGO/PROTO, ...)
    replay_notes = variable(list, value=[])

    @run_after('init')
    def describe(self):
        self.collective = 'torch_replay'
        self.descr = (f'replay of {os.path.basename(self.pattern)} over '
                      f'{self.transport}')

    def bench_args(self):
        return super().bench_args() + [
            '--pattern', self.pattern, '--iters', str(self.iters),
            '--warmup', str(self.warmup_iters), '--csv', 'replay.csv']

    @run_before('run')
    def keep_csv(self):
        self.keep_files = self.keep_files + ['replay.csv']

    def _judge_results(self):
        doc = self._doc()
        self.replay_notes = list(doc.get('notes') or [])
        bad = [r for r in doc.get('rows') or [] if r.get('error')]
        if bad:
            return 'crash', (f'crash: line {bad[0]["line"]} of the pattern: '
                             f'{bad[0]["error"]}')
        if not doc.get('rows'):
            return 'crash', 'crash: nothing was replayed'
        return None

    @run_before('performance')
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        perf = {}
        for row in self._doc().get('rows') or []:
            key = f'line{row["line"]}_{row["collective"]}'
            perf[f'{key}_busbw'] = sn.make_performance_function(
                sn.defer(float(row.get('busbw_GBps') or 0.0)), 'GB/s')
            perf[f'{key}_time'] = sn.make_performance_function(
                sn.defer(float(row.get('measured_time_us') or 0.0)), 'us')
        self.perf_variables = perf


class TrainingStepBase(NcclFrameworkBase):
    """A small DDP training loop on synthetic data (``torch_bench train``)
    of the model ``model`` (a parameter: ``comm``, communication-bound;
    ``compute``, compute-bound): samples/s (global), the median step time
    and the share of the step spent in NCCL kernels (torch.profiler) as
    performance variables, an optional lower bound on samples/s, and
    could-not-check when the profiler could not say the NCCL share."""

    bench_mode = 'train'
    #: the models of ``torch_bench train`` (a check may narrow them)
    model = parameter(sorted(TRAIN_MODELS))
    steps = variable(int, value=20)
    warmup_steps = variable(int, value=5)
    profile_steps = variable(int, value=5)
    #: samples per rank and step; 0: the model's default
    batch = variable(int, value=0)
    #: a lower bound for samples_per_s (global), samples/s; 0: none
    min_samples_per_s = variable(float, value=0.0)
    #: the tool's summary (samples/s, step times, NCCL share, parameters)
    train_summary = variable(dict, value={})

    @run_after('init')
    def describe(self):
        self.collective = f'torch_train_{self.model}'
        self.descr = (f'DDP training step ({self.model}-bound model) over '
                      f'{self.transport}')

    def bench_args(self):
        args = super().bench_args() + [
            '--model', self.model, '--steps', str(self.steps),
            '--warmup', str(self.warmup_steps),
            '--profile-steps', str(self.profile_steps)]
        if self.batch > 0:
            args += ['--batch', str(self.batch)]
        return args

    @run_after('setup')
    def set_lower_bound(self):
        if self.min_samples_per_s > 0:
            self.reference = {self.current_partition.fullname: {
                'samples_per_s': (self.min_samples_per_s, 0.0, None,
                                  'samples/s')}}

    def _judge_results(self):
        doc = self._doc()
        s = doc.get('summary') or {}
        self.train_summary = dict(s)
        if not s.get('samples_per_s'):
            return 'crash', 'crash: no training step was timed'
        if self.profile_steps > 0:
            if doc.get('profile_error'):
                return 'could-not-check', (f'could not check the NCCL share: '
                                           f'torch.profiler failed on '
                                           f'{doc["profile_error"]}')
            if s.get('nccl_fraction') is None:
                return 'could-not-check', (
                    'could not check the NCCL share: the profiler recorded '
                    'no CUDA kernel')
            nccl = sum(p.get('nccl_kernels') or 0
                       for p in doc.get('profile') or [])
            if nccl == 0 and (doc.get('world_size') or 0) > 1:
                return 'could-not-check', (
                    'could not check the NCCL share: the profiler recorded '
                    'kernels but none of NCCL\'s (DDP all_reduces every '
                    'step)')
        return None

    @run_before('performance')
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        s = self._doc().get('summary') or {}
        self.perf_variables = {
            name: sn.make_performance_function(
                sn.defer(float(s.get(name) or 0.0)), unit)
            for name, unit in (('samples_per_s', 'samples/s'),
                               ('step_ms', 'ms'), ('nccl_fraction', '%'))}
