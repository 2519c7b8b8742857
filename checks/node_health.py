"""The node health hook through ReFrame: one job per node of a partition
(``--distribute``), for a sweep of the whole partition after maintenance.

    reframe -C config/settings.py --mode health --distribute=all -r

The job runs the same hook a node health checker calls
(``python -m ccl_health.hook``) with the site's nccl-tests / rccl-tests,
or the ones built here (:mod:`ccl_health.rfm.binaries`)."""

import json
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher
from reframe.core.builtins import (performance_function, run_after,
                                   run_before, sanity_function, variable)

from ccl_health import shell
from ccl_health.hook.settings import default_launcher
from ccl_health.evidence.benignwarns import check_benign
from ccl_health.sitedata import site as site_data
from ccl_health.rfm import binaries
from ccl_health.rfm.base import this_python
from ccl_health.sitedata.sysconfig import partition_gpus



@rfm.simple_test
class NodeHealthCheck(binaries.variant(), rfm.RunOnlyRegressionTest):
    descr = 'node health hook: all_reduce over every GPU and GPU pair'
    valid_systems = ['+gpu']
    valid_prog_environs = ['+ccl']
    #: the hook's own hard limit (s); the job's limit is a little larger
    limit = variable(int, value=20)
    size = variable(str, value='1G')
    #: how the hook starts its ranks inside the job
    hook_launcher = variable(str, value='')
    #: the hook's verdict (ccl_health.judge.verdicts name) and its line, from the
    #: hook's --json detail: what the main command records
    verdict = variable(str, value='')
    verdict_reason = variable(str, value='')
    num_tasks = 1
    num_tasks_per_node = 1
    exclusive_access = True
    time_limit = '2m'
    tags = {'health'}
    maintainers = ['ccl-health']

    @run_after('setup')
    def needs_gpus(self):
        self.skip_if(not partition_gpus(self.current_partition)[0],
                     'no GPU on this partition')

    @run_before('run')
    def set_command(self):
        # the hook starts its own ranks: run it once per node, directly
        self.job.launcher = getlauncher('local')()
        launcher = self.hook_launcher or self.site_launcher() or \
            default_launcher(self.current_partition.scheduler
                             .registered_name)
        self.executable, self.env_vars = this_python()
        self.executable_opts = [
            '-m', 'ccl_health.hook', '--limit', str(self.limit),
            '--size', shell.quote(self.size),
            '--system', self.current_system.name,
            '--partition', self.current_partition.name,
            '--tests-prefix', shell.quote(self.binaries_prefix()),
            '--launcher', shell.word(launcher), '--json', 'health.json']

    def site_launcher(self):
        """The site file's ``health.launcher`` (what the node health
        checker's hook uses on this system): the same command here, so the
        ReFrame job and NHC start their ranks alike.  '' where the site
        file has no ``health`` block."""
        site = site_data.load(getattr(self, 'site_dir', None) or
                              binaries.default_site_dir(),
                              self.current_system.name,
                              benign_check=check_benign)
        return shell.join(site.health.launcher) if site.health else ''

    @sanity_function
    def healthy(self):
        path = os.path.join(self.stagedir, 'health.json')
        try:
            with open(path) as fp:
                detail = json.load(fp)
            self.verdict = str(detail['verdict'])
            self.verdict_reason = str(detail['line'])
        except (OSError, ValueError, KeyError, TypeError) as err:
            self.verdict = 'could-not-check'
            self.verdict_reason = (f'could not check: the hook left no '
                                   f'verdict in {path}: {err}')
        return sn.assert_found(r'^HEALTHY: ', self.stdout,
                               msg=sn.extractsingle(r'^(.*)$', self.stdout, 1))

    @performance_function('GB/s')
    def busbw(self):
        return sn.extractsingle(r'GPUs (\S+) GB/s', self.stdout, 1, float)
