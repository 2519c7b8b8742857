"""Build the store's records (:class:`~ccl_health.db.store.CaseRecord`) from
what a run produced: the parsed sweep + debug-log evidence (written by the
check as soon as its outputs are read), or a finished ReFrame run report
(for what never got that far: hangs, crashes, build failures; and for runs
made elsewhere)."""

import functools
import os
import subprocess

from ccl_health import identity
from ccl_health import resources
from ccl_health import summary
from ccl_health.judge.reference import busbw_perfvalues
from ccl_health.db.store import CaseRecord, SizeRecord
from ccl_health.judge import casejudge as judge
from ccl_health.evidence.nodestate.nodedata import NODE_STATE_KEY



@functools.lru_cache(maxsize=None)
def suite_revision():
    checkout = resources.git_checkout()
    try:
        if checkout is None:        # installed: its version says it
            raise OSError
        out = subprocess.run(['git', '-C', checkout, 'rev-parse', '--short=12',
                              'HEAD'], capture_output=True, text=True,
                             timeout=10)
        if out.returncode == 0:
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    from ccl_health import __version__
    return __version__


#: the environment variables a run's performance may depend on: recorded
#: with every case (their values), so that a drop can be attributed to one
RUN_ENV_PREFIXES = ('NCCL_', 'FI_', 'CUDA_', 'HIP_', 'ROCR_', 'HSA_', 'UCX_')


def run_environment(env_vars=None, environ=None):
    """The environment a case ran with, as a flat ``{name: value}`` of
    strings: every ``NCCL_* FI_* CUDA_* HIP_* ROCR_* HSA_* UCX_*`` variable
    of ``environ`` (default: this process's, which the job inherits), then
    ``env_vars`` (what the case sets itself, e.g. a ReFrame test's
    ``env_vars``: these win, whatever their names).  One function for the
    sweep, the health hook and the run report's cases."""
    environ = os.environ if environ is None else environ
    out = {k: str(v) for k, v in environ.items()
           if k.startswith(RUN_ENV_PREFIXES)}
    out.update({k: str(v) for k, v in (env_vars or {}).items()})
    return dict(sorted(out.items()))


#: one size against its reference, and a case from its sizes: the judge's
size_verdict = judge.size_verdict
case_verdict = judge.case_verdict


def sizes_from_sweep(result, ref_entry=None):
    """The size records of a parsed sweep: every row with the judge's
    finding against ``ref_entry``."""
    out = []
    for row, f in zip(result.rows, judge.findings(result, ref_entry)):
        oop, ip = row.out_of_place, row.in_place
        out.append(SizeRecord(
            row.size, row.busbw, oop and oop.busbw, ip and ip.busbw,
            oop and oop.algbw, ip and ip.algbw, oop and oop.time_us,
            ip and ip.time_us, f.ref, f.tolerance, f.verdict))
    return out


def cases_from_report(report, default_run_id=None):
    """CaseRecords for every non-fixture test case of a ReFrame report."""
    session = (report.get('session_info') or {}).get('uuid', '')
    verdicts = summary.case_verdicts(report)
    tcs = [tc for tc in report['runs'][-1]['testcases']
           if not tc.get('fixture')]
    out = []
    for tc, cv in zip(tcs, verdicts):
        sizes = []
        for size, vals in busbw_perfvalues(tc.get('perfvalues')):
            value, ref, lower = vals[0], vals[1] or None, vals[2]
            tol = -lower if lower else None
            sizes.append(SizeRecord(size, value, ref=ref, tolerance=tol,
                                    verdict=size_verdict(value, ref,
                                                         tol or 0.0)))
        nodelist = known_nodelist(tc.get('job_nodelist'))
        time = tc.get('job_completion_time') or tc.get('job_submit_time')
        if isinstance(time, (int, float)):
            time = None
        out.append(CaseRecord(
            run_id=tc.get('run_id') or default_run_id or session,
            case_name=tc.get('display_name') or tc.get('name'),
            verdict=cv.verdict, time=time or '',
            system=tc.get('system', ''), partition=tc.get('partition', ''),
            environ=tc.get('environ', ''),
            nodelist=nodelist,
            nodes=tc.get('num_nodes') or None,
            ranks=tc.get('num_tasks') or None,
            collective=tc.get('collective', ''),
            transport=tc.get('transport', ''),
            proven=tc.get('proven_transport', ''),
            algo=tc.get('algo') or 'default', reason=cv.reason,
            versions=tc.get('versions') or {},
            env=run_environment(tc.get('env_vars'), environ={}),
            source='report', sizes=sizes))
    return out


def node_state_env(states, ours=()):
    """``{NODE_STATE_KEY: JSON}`` of the sampler's readings (before,
    after, how many samples, the causes), or ``{}`` where there were
    none.  ``ours``: the pids the run's ranks printed (never foreign)."""
    import dataclasses
    import json
    from ccl_health.evidence.nodestate.diagnose import (diagnose,
                                                        foreign_processes)
    if not states or not (states.get('before') or states.get('after')):
        return {}
    before, after = states.get('before'), states.get('after')
    samples = states.get('samples', [])
    causes = diagnose(before, after, samples=samples, ours=ours)
    doc = {'before': before.to_dict() if before else None,
           'after': after.to_dict() if after else None,
           'samples': len(samples),
           'foreign': sorted({f'{p.pid}:{p.name}' for p in
                              foreign_processes(samples, ours=ours).values()}),
           'causes': [dataclasses.asdict(c) for c in causes]}
    return {NODE_STATE_KEY: json.dumps(doc, sort_keys=True)}


def known_nodelist(nodes):
    """The node names of a job, as ``'n1,n2'``; what the scheduler did
    not say is left out: ReFrame's squeue backend lists ``'None'`` for a
    job that ended before a poll saw it run."""
    if isinstance(nodes, str):
        nodes = nodes.split(',')
    return ','.join(n for n in (nodes or [])
                    if n and n not in ('None', '(null)', '(None)'))


def default_run_id():
    """The run id of a sweep run: ``$CCL_HEALTH_RUN_ID`` (what
    ``scripts/run`` and the nightly give every case of one run), else a
    new identity (:func:`ccl_health.identity.new`)."""
    return os.environ.get('CCL_HEALTH_RUN_ID') or identity.new()
