"""The collective sweep: one nccl-tests / rccl-tests binary over a range of
message sizes, one MPI rank per GPU, in one transport configuration.

Sanity: the run completed, nothing was wrong or out of bounds, and the NCCL
debug log proves the transport that was asked for.  Performance: busbw per
message size, compared with ``reference/<system>.yaml`` through ReFrame's
``reference``."""

import os

import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import ReframeError
from reframe.core.logging import getlogger

from ccl_health.evidence import programs
from ccl_health.db import recorder
from ccl_health.db import store
from ccl_health import shell, summary
from ccl_health.evidence import collectives as C
from ccl_health.judge import verdicts as V
from ccl_health.judge import assemble
from ccl_health.judge.casejudge import judge
from ccl_health.units import size_sweep

from ccl_health.rfm.base import PlacedTest, SizeSweepMixin, TransportMixin
from ccl_health.rfm.binaries import BuildAndRunMixin, SiteBinariesMixin, site_installs_tests

RESULT_JSON = programs.RESULT_JSON


class CollectiveSweepBase(SiteBinariesMixin, SizeSweepMixin, TransportMixin,
                          PlacedTest):
    """Generic sweep of the site's installed binaries (as hpctestlib's
    ``osu_run``); :class:`BuildAndRunSweepBase` builds them first
    (``osu_build_run``).  The program (nccl-tests / rccl-tests, a
    :class:`ccl_health.evidence.programs.TestProgram`) follows the partition's GPU
    vendor; a concrete check narrows :attr:`collective` and :attr:`algo`."""

    #: the collective swept (``<collective>_perf``)
    collective = parameter(list(C.SWEPT), loggable=True)
    #: NCCL_ALGO for the whole run; 'default' leaves NCCL to choose
    algo = parameter(['default'], loggable=True)
    #: the program's own per-operation timeout (-T), under time_limit
    op_timeout = variable(int, value=120)

    #: groups the test cases of one run in the performance database
    run_id = variable(str, value=recorder.default_run_id())
    #: the performance database (SQLite path or postgresql:// URL); empty:
    #: $CCL_HEALTH_DB, else <CCL_HEALTH_OUTPUT>/ccl-health.db
    store_url = variable(str, value='')
    sizes_run = variable(list, value=[])

    tags = {'sweep', 'nightly', 'acceptance'}

    @run_after('init')
    def describe(self):
        self.descr = f'{self.collective} sweep over {self.transport}'
        if self.algo != 'default':
            self.descr += f' (NCCL_ALGO={self.algo})'

    def what(self):
        return self.collective

    @run_after('setup')
    def lookup_reference(self):
        self._ref_entry = self._ref.lookup(
            self.current_partition.name, self.transport, self.collective,
            self.num_nodes, self.num_tasks_per_node, self.algo)
        if self._ref_entry:
            self.reference = self._ref_entry.to_rfm(
                self.current_partition.fullname)

    @run_before('run')
    def set_command(self):
        prog = self.program
        max_size = self.max_size_here(self.max_size)
        self.sizes_run = size_sweep(self.min_size, max_size,
                                    self.step_factor)
        prefix = self.binaries_prefix()
        binary = prog.executable(prefix, self.collective)
        # one word of the job script, whatever the prefix's path holds
        self.executable = shell.quote(binary)
        if not self.is_dry_run() and not (
                prefix and os.access(binary, os.X_OK)):
            self.verdict = str(V.Verdict.COULD_NOT_CHECK)
            site_file = f'site/{self.current_system.name}.yaml'
            if not prefix:
                where = (f'no {prog.name} prefix ({site_file} '
                         f'build.{prog.site_key}.prefix)')
            elif not os.path.isdir(prefix):
                where = (f'the {prog.name} prefix {prefix} does not exist '
                         f'({site_file} build.{prog.site_key}.prefix)')
            else:
                where = f'{binary} is missing or not executable'
            raise ReframeError(f'could not check: {where} (a broken build '
                               f'or site install of {prog.name})')
        self.executable_opts = prog.options(
            self.min_size, max_size, self.step_factor, self.iters,
            self.warmup_iters, self.op_timeout, RESULT_JSON)
        env = self.transport_env()
        if self.algo != 'default':
            env['NCCL_ALGO'] = self.algo
        self.set_environment(env, prog.output_files(RESULT_JSON), watch=True)

    # -- reading the outputs ---------------------------------------------

    def _result(self):
        if not hasattr(self, '_parsed'):
            self._parsed = self.program.read(
                os.path.join(self.stagedir, sn.evaluate(self.stdout)),
                os.path.join(self.stagedir, RESULT_JSON))
        return self._parsed

    def _evidence(self):
        """This case's :class:`ccl_health.judge.caseevidence.CaseEvidence`
        (:func:`sweep_evidence`); its proof kept in ``proven_transport``
        / ``transport_proof``."""
        res = self._result()
        killed = summary.slurm_time_limit_line(
            os.path.join(self.stagedir, sn.evaluate(self.stderr)))
        ev = sweep_evidence(
            res, self.exit_status(), self._ref_entry,
            what=self.program.binary(self.collective),
            transport=self.transport, collective=self.collective,
            nodes=self.num_nodes, gpus_per_node=self.num_tasks_per_node,
            algo=self.algo, sizes_run=self.sizes_run,
            exact=self.program.exact_sizes(self.collective),
            missing_reference=self.missing_reference(self.collective,
                                                     self.algo),
            killed=killed, log_paths=self.evidence().files,
            stdout_path=os.path.join(self.stagedir,
                                     sn.evaluate(self.stdout)),
            stderr_path=os.path.join(self.stagedir,
                                     sn.evaluate(self.stderr)),
            ras=self.ras_answer() if killed else None,
            site=getattr(self, '_site', None),
            node_states=self.node_states())
        self.keep_proof(ev.last.proof, ev.last.debug,
                        nccl_tests=res.tests_version or '')
        return ev

    def _judge(self):
        """(verdict, one-line reason): :func:`ccl_health.judge.casejudge.judge`
        of this case's evidence."""
        ev = self._evidence()
        self._run_pids = ev.run_pids()
        self._judgement = judge(ev)
        return self._judgement.verdict, self._judgement.reason

    @sanity_function
    def validate(self):
        verdict, reason = self._judge()
        self.verdict, self.verdict_reason = str(verdict), reason
        self._record(reason)
        # below-reference passes sanity: ReFrame's performance stage says
        # it, with the values in the perflog
        return sn.assert_true(
            verdict in (V.Verdict.PASS, V.Verdict.BELOW_REFERENCE),
            msg=reason)

    def _record(self, reason):
        """Write this case to the performance database now, as soon as its
        outputs are read: nothing is lost if the run dies later."""
        sizes = recorder.sizes_from_sweep(self._result(), self._ref_entry)
        verdict = self.verdict
        versions = dict(self.versions)
        versions.setdefault('driver', str(
            self.current_partition.extras.get('driver', '')))
        case = store.CaseRecord(
            run_id=self.run_id, case_name=self.display_name,
            verdict=verdict,
            system=self.current_system.name,
            partition=self.current_partition.name,
            environ=self.current_environ.name,
            nodelist=recorder.known_nodelist(self.job.nodelist),
            nodes=self.num_nodes, ranks=self.num_tasks,
            collective=self.collective, transport=self.transport,
            proven=self.proven_transport, algo=self.algo, reason=reason,
            versions=versions,
            env=dict(recorder.run_environment(self.env_vars),
                     **recorder.node_state_env(
                         self.node_states(),
                         getattr(self, '_run_pids', ()))),
            suite_revision=recorder.suite_revision(), source='check',
            sizes=sizes)
        try:
            with store.open_store(self.store_url or None) as db:
                db.add_case(case)
        except Exception as err:     # the run report is ingested later
            getlogger().warning(f'{self.display_name}: not recorded in the '
                                f'performance database yet: {err}')

    def measured(self):
        return self._result()



def sweep_evidence(result, exit_status, ref_entry, *, what, transport,
                   collective, nodes, gpus_per_node, algo, sizes_run, exact,
                   missing_reference='', killed=None, log_paths=(),
                   stdout_path=None, site=None, node_states=None,
                   stderr_path=None, ras=None):
    """The sweep's adapter to the case assembler
    (:mod:`ccl_health.judge.assemble`), a pure function (no ReFrame): its
    stage's stdout (``stdout_path``, parsed as ``result``), stderr (the
    launcher's words: which rank exited first) and debug logs
    (``log_paths``), its exit status, a Slurm time-limit line (``killed``:
    a hang) with what NCCL's RAS said before it (``ras``), the sizes it
    asked (``sizes_run``) and its reference entry."""
    text, err = _read(stdout_path), _read(stderr_path)
    att = assemble.attempt(
        text, log_paths, exit_status, result=result,
        source=stdout_path or 'stdout', transport=transport,
        nodes=nodes or 1, killed=(f'the job exceeded its time limit '
                                  f'({killed})' if killed else None),
        ras=ras, launcher_text=text + '\n' + err if err else None)
    return assemble.case(
        [att], what=what, transport=transport, collective=collective,
        nodes=nodes, gpus_per_node=gpus_per_node, algo=algo,
        expected_sizes=list(sizes_run) or None, exact_sizes=exact,
        site=site, node_states=node_states, reference=ref_entry,
        missing_reference=missing_reference)


def _read(path):
    if not path:
        return ''
    try:
        with open(path, errors='replace') as fp:
            return fp.read()
    except OSError:
        return ''


class BuildAndRunSweepBase(BuildAndRunMixin, CollectiveSweepBase):
    """:class:`CollectiveSweepBase` with its binaries built here."""


#: the sweep this system's site file asks for: of the site's binaries, or
#: built here first (:func:`ccl_health.rfm.binaries.site_installs_tests`)
def sweep_base(system=None, site_dir=None):
    return CollectiveSweepBase if site_installs_tests(system, site_dir) \
        else BuildAndRunSweepBase
