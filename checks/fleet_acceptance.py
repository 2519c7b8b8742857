"""The whole partition through ReFrame (``--mode acceptance``), for a site
that drives everything through ReFrame: one job over every idle node of
the partition (ReFrame's flexible allocation, ``num_tasks = 0``) that runs
the fleet procedure of ``scripts/fleet`` inside its allocation: the node
check on every node at once, pairs, growing groups with bisection,
stragglers; every step an ``srun`` job step of this job.

    reframe -C config/settings.py --mode acceptance -n FleetAcceptance -r

With ``-S resume=1`` it is ``scripts/fleet --resume`` instead: only the
nodes drained with a reason starting ``ccl-health:`` are re-checked and
resumed after the site's number of consecutive passing checks (every step
its own job in a maintenance reservation; this job holds one node to run
from).

It never drains (``scripts/fleet --drain`` does, run by a person); its
verdict and reason come from the run's ``fleet.json``
(:func:`ccl_health.fleet.rounds.exit_code`): ``pass`` only when every node was
checked and found healthy, the worst verdict of a failed step when a node,
link or group is bad, ``could-not-check`` otherwise."""

import json
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher
from reframe.core.builtins import (run_after, run_before, sanity_function,
                                   variable)

from ccl_health.fleet.resume import exit_code as resume_exit_code
from ccl_health.fleet.resume import summary_text as resume_text
from ccl_health.fleet.rounds import exit_code, summary_text
from ccl_health.rfm.base import runtime_site, this_python
from ccl_health.sitedata.sysconfig import partition_gpus
from ccl_health.sitedata.transports import fleet_default
from ccl_health.judge.verdicts import Verdict, worst

SLURM = ('slurm', 'squeue')
#: the nodes of a dry run's script where ``fleet_nodes`` is 0
DRY_RUN_NODES = 2


@rfm.simple_test
class FleetAcceptance(rfm.RunOnlyRegressionTest):
    descr = ('every node of the partition: node check, pairs, groups with '
             'bisection, stragglers (scripts/fleet inside one job)')
    valid_systems = ['+gpu']
    valid_prog_environs = ['+ccl']
    #: nodes of the job; 0: every idle node of the partition (ReFrame's
    #: flexible allocation; a dry run renders :data:`DRY_RUN_NODES`)
    fleet_nodes = variable(int, value=0)
    #: set by ``--mode acceptance`` for every check; the fleet is strict
    #: whatever it says (only an all-healthy partition passes)
    acceptance = variable(bool, value=True)
    #: the verdict (a ccl_health.judge.verdicts name) and its line
    verdict = variable(str, value='')
    verdict_reason = variable(str, value='')
    #: ``scripts/fleet --resume``: back to service for the nodes that
    #: ccl-health drained (:mod:`ccl_health.fleet.resume`)
    resume = variable(bool, value=False)
    num_tasks_per_node = 1
    exclusive_access = True
    time_limit = '2h'
    tags = {'acceptance', 'fleet'}
    maintainers = ['ccl-health']

    @run_after('setup')
    def needs_slurm(self):
        self.skip_if(not partition_gpus(self.current_partition)[0],
                     'no GPU on this partition')
        site = runtime_site(self.current_system.name)
        self.skip_if(site is not None and not (site.fleet or {}).get(
            'transport') and fleet_default(site.transports) is None,
            f'no network transport for the fleet\'s pairs and groups: '
            f'{site and site.path} lists none under transports:')
        sched = self.current_partition.scheduler.registered_name
        self.skip_if(sched not in SLURM,
                     f'the fleet runs its steps with srun: scheduler '
                     f'{sched!r} of {self.current_partition.fullname} is not '
                     f'Slurm')

    @run_before('run')
    def set_command(self):
        # ReFrame's flexible allocation asks Slurm for the partition's
        # nodes when the job is made; a dry run (no Slurm at hand) renders
        # the script for the smallest fleet with a pair instead
        self.num_tasks = 1 if self.resume else self.fleet_nodes or (
            DRY_RUN_NODES if self.is_dry_run() else 0)
        # one process in the batch script; the steps are its srun steps
        self.job.launcher = getlauncher('local')()
        self.executable, self.env_vars = this_python()
        self.executable_opts = [
            '-m', 'ccl_health.fleet', '--inside',
            '--site', self.current_system.name,
            '--partition', self.current_partition.name,
            '--json', 'fleet-summary.json'] + (
                ['--resume'] if self.resume else [])

    @sanity_function
    def healthy(self):
        path = os.path.join(self.stagedir, 'fleet-summary.json')
        try:
            with open(path) as fp:
                summary = json.load(fp)
            if summary.get('mode') == 'resume':
                code = resume_exit_code(summary)
                text = resume_text(summary)
            else:
                code = exit_code(summary)
                text = summary_text(summary)
        except (OSError, ValueError, KeyError, TypeError) as err:
            code, text = 2, (f'could not check: the fleet left no summary '
                             f'in {path}: {err}')
        failed = [] if code != 1 else [
            res['verdict'] for r in summary['rounds'] for res in r['results']
            if not Verdict.parse(res['verdict'], Verdict.CRASH).good] + (
                [str(Verdict.CRASH)] if summary.get('systemic') else [])
        self.verdict = str(
            Verdict.PASS if code == 0 else
            (worst(failed) or Verdict.DROP) if code == 1 else
            Verdict.COULD_NOT_CHECK)
        self.verdict_reason = ' | '.join(text.splitlines()[:4])
        return sn.assert_eq(code, 0, msg=self.verdict_reason)
