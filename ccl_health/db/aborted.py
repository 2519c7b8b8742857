"""A run stopped by a signal (Slurm's SIGTERM at a time limit or on
``scancel``, Ctrl-C) loses nothing: the cases in flight, which never reached
their judgement, are recorded as ``aborted`` with whatever they measured,
and nothing the run started is left running.

Every check writes what it is (``ccl-health-case.json``, see
:mod:`ccl_health.rfm.base`) into its stage folder before its job starts;
here those files are matched against what the run already recorded."""

import glob
import json
import os
import signal
import time

from ccl_health.evidence import nccltests
from ccl_health.db import store
from ccl_health.evidence import debuglog as tproof
from ccl_health.units import format_size
from ccl_health.judge.verdicts import Verdict

CASE_FILE = 'ccl-health-case.json'


def cases_in_flight(stage_root, run_id, recorded=(), stopped_by='a signal'):
    """CaseRecords (verdict ``aborted``) for the cases of ``run_id`` under
    ``stage_root`` that are not among the ``recorded`` case names."""
    out = []
    pattern = os.path.join(glob.escape(stage_root), '**', CASE_FILE)
    for path in sorted(glob.glob(pattern, recursive=True)):
        try:
            with open(path) as fp:
                info = json.load(fp)
        except (OSError, ValueError):
            continue
        if info.get('run_id') != run_id or \
                info.get('case_name') in recorded:
            continue
        out.append(_record(os.path.dirname(path), info, stopped_by))
    return out


def _record(stagedir, info, stopped_by):
    stdout = ''
    try:
        with open(os.path.join(stagedir, info.get('stdout') or
                               'rfm_job.out'), errors='replace') as fp:
            stdout = fp.read()
    except OSError:
        pass
    res = nccltests.parse_text(stdout)
    ev = tproof.read_evidence(tproof.debug_log_files(stagedir))
    sizes = [store.SizeRecord(r.size, r.busbw, verdict=str(Verdict.ABORTED))
             for r in res.rows if r.busbw is not None]
    asked = info.get('sizes') or []
    last = f', last {format_size(res.rows[-1].size)}' if res.rows else ''
    reason = (f'aborted: stopped by {stopped_by} after '
              f'{len(res.rows)}' + (f' of {len(asked)}' if asked else '') +
              f' size(s){last}; nothing was judged')
    return store.CaseRecord(
        run_id=info.get('run_id', ''), case_name=info.get('case_name', '?'),
        verdict=str(Verdict.ABORTED), system=info.get('system', ''),
        partition=info.get('partition', ''),
        environ=info.get('environ', ''), nodes=info.get('nodes'),
        ranks=info.get('ranks'), collective=info.get('collective', ''),
        transport=info.get('transport', ''),
        proven=(ev.proven() or '') if ev.files else '',
        algo=info.get('algo') or 'default', reason=reason,
        versions=dict(ev.versions), env=info.get('env') or {},
        source='aborted', sizes=sizes)


def leftover_processes(run_id, marker='CCL_HEALTH_RUN_ID'):
    """pids of processes (not this one) whose environment carries this
    run's id: what the run started and nobody stopped (Linux /proc)."""
    want = f'{marker}={run_id}'.encode()
    pids = []
    for d in glob.glob('/proc/[0-9]*'):
        pid = int(os.path.basename(d))
        if pid == os.getpid():
            continue
        try:
            with open(os.path.join(d, 'environ'), 'rb') as fp:
                if want in fp.read().split(b'\0'):
                    pids.append(pid)
        except OSError:
            continue
    return pids


def stop_leftovers(run_id, grace=5.0):
    """SIGTERM, then SIGKILL after ``grace`` s, every leftover of the run;
    returns the pids that were found."""
    pids = leftover_processes(run_id)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and \
                any(_alive(p) for p in pids):
            time.sleep(0.1)
    return pids


def _alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as fp:
            return fp.read().split(') ', 1)[1][:1] != 'Z'
    except (OSError, IndexError):
        return False
