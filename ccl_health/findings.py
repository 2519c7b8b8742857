"""The history findings of one run (what ``scripts/run`` ends with, what the
nightly's news tells): the findings of :func:`ccl_health.judge.history.detect_in`
over the keys the run measured, and which of them are new against the last
complete run before it."""

from ccl_health.db import queries
from ccl_health.judge import history
from ccl_health.judge import verdicts as V


def _finding_id(f):
    return (f.kind, f.key, f.size)


def run_keys(cases, run_id):
    """The history keys (:func:`history.series_key`) a run measured."""
    return {history.series_key(c) for c in cases if c['run_id'] == run_id}


def previous_complete_run(cases, run_id):
    """The newest run before ``run_id`` that measured one of its keys and
    was not aborted (no ``aborted`` case), or None."""
    keys = run_keys(cases, run_id)
    mine = [c['time'] for c in cases if c['run_id'] == run_id]
    if not mine:
        return None
    start = min(mine)
    runs = {}
    for c in cases:
        if c['run_id'] == run_id or history.series_key(c) not in keys:
            continue
        r = runs.setdefault(c['run_id'], {'time': c['time'],
                                          'aborted': False})
        r['time'] = max(r['time'], c['time'])
        if c['verdict'] == str(V.Verdict.ABORTED):
            r['aborted'] = True
    # a run that also holds aborted cases of other keys counts as aborted
    for c in cases:
        if c['run_id'] in runs and c['verdict'] == str(V.Verdict.ABORTED):
            runs[c['run_id']]['aborted'] = True
    done = [(r['time'], rid) for rid, r in runs.items()
            if not r['aborted'] and r['time'] < start]
    return max(done)[1] if done else None


def run_findings(db, run_id):
    """(findings of ``run_id``, the new ones among them, the run they were
    compared with): the history findings of the keys ``run_id`` measured;
    new = not found for the same kind, key and size in the last complete
    run before it."""
    cases = db.cases()
    keys = run_keys(cases, run_id)
    records = [r for r in db.records() if history.series_key(r) in keys]
    found = history.detect_in(db, run_id, [dict(r) for r in records])
    prev = previous_complete_run(cases, run_id)
    before = set()
    if prev:
        before = {_finding_id(f) for f in history.detect_in(
            db, prev, [dict(r) for r in records])}
    new = [f for f in found if _finding_id(f) not in before]
    return found, new, prev


def finding_lines(findings, cases):
    """Short lines: one per finding (drifts, drops of a configuration
    grouped), each followed by its ``changed:`` lines."""
    return queries.drop_lines(findings, cases)
