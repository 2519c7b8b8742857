"""Settings shared by every system: where outputs go, the perflog, ReFrame's
results storage (SQLite), and the run modes.

Outputs: ``$CCL_HEALTH_OUTPUT``, else ``./ccl-health-output`` relative to
the directory ``reframe`` (or ``scripts/run``) was started in, the same rule
as every other command (:mod:`ccl_health.outputs`).  Loading this file
creates nothing; ReFrame's own log file needs its folder, so the folder is
made when ReFrame's command line is what loads it (it opens the log next)."""

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from ccl_health.outputs import output_dir  # noqa: E402

OUTPUT = output_dir()
if 'reframe.frontend.cli' in sys.modules:
    os.makedirs(OUTPUT, exist_ok=True)
CHECKS = os.path.join(_REPO, 'checks')

general = [{
    'check_search_path': [CHECKS],
    'check_search_recursive': True,
    'report_file': os.path.join(OUTPUT, 'reports',
                                'run-report-{sessionid}.json'),
    'save_log_files': True,
    'keep_stage_files': True,
}]

storage = [{
    'enable': True,
    'sqlite_db_file': os.path.join(OUTPUT, 'results.db'),
}]

logging = [{
    'level': 'debug',
    'handlers': [
        {'type': 'file', 'name': os.path.join(OUTPUT, 'reframe.log'),
         'level': 'debug', 'format': '[%(asctime)s] %(levelname)s: '
         '%(check_name)s: %(message)s', 'append': True},
        {'type': 'stream', 'name': 'stdout', 'level': 'info',
         'format': '%(message)s'},
    ],
    'handlers_perflog': [{
        'type': 'filelog',
        'prefix': os.path.join(OUTPUT, 'perflogs',
                               '%(check_system)s/%(check_partition)s'),
        'level': 'info',
        'format': ('%(check_job_completion_time)s|%(check_result)s|'
                   '%(check_display_name)s|%(check_system)s:'
                   '%(check_partition)s|%(check_environ)s|'
                   '%(check_transport)s|%(check_proven_transport)s|'
                   '%(check_verdict)s|%(check_num_tasks)s|'
                   '%(check_versions)s|%(check_perfvalues)s'),
        # one field per message size: busbw_1GiB=330.4 GB/s (ref 330, -0.1)
        'format_perfvars': ('%(check_perf_var)s=%(check_perf_value)s '
                            '%(check_perf_unit)s (ref %(check_perf_ref)s, '
                            '%(check_perf_lower_thres)s)|'),
        'append': True,
    }],
}]

modes = [
    # every transport, the full sweep, after each night
    {'name': 'nightly',
     'options': ['--tag=nightly', '--exec-policy=async']},
    # after maintenance, before the machine goes back to users: every
    # transport; a sweep without a reference fails instead of passing
    {'name': 'acceptance',
     'options': ['--tag=acceptance', '--exec-policy=async',
                 '--setvar=acceptance=True']},
    # the quick single-node subset (node health)
    {'name': 'health',
     'options': ['--tag=health', '--exec-policy=serial']},
    # every other collective of nccl-tests over every transport: after an
    # NCCL, plugin or libfabric upgrade (not nightly: CollectiveSweep says
    # why)
    {'name': 'collectives',
     'options': ['--tag=collectives', '--exec-policy=async']},
    # the scale runs (NCCL_ALGO comparison at 64 nodes, ...)
    {'name': 'scale',
     'options': ['--tag=scale', '--exec-policy=serial']},
]
