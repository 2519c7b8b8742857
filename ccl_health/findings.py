"""The history findings of one run (what ``scripts/run`` ends with, what the
nightly's news tells): the findings of :func:`ccl_health.db.windowfindings.detect_in`
over the keys the run measured, and which of them are new against the last
complete run before it."""

from ccl_health.db import answers, windowfindings
from ccl_health.db import inlists, keyhistory
from ccl_health.judge import series
from ccl_health.judge import verdicts as V


def _finding_id(f):
    return (f.kind, f.key, f.size)


def run_keys(cases, run_id):
    """The history keys (:func:`history.series_key`) a run measured."""
    return {series.series_key(c) for c in cases if c['run_id'] == run_id}


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
        if c['run_id'] == run_id or series.series_key(c) not in keys:
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
    run before it.  Each key's findings are those kept with its cases, or
    it is judged from its history (:func:`ccl_health.db.windowfindings.judge_keys`),
    never the whole database."""
    mine = windowfindings.run_cases(db, run_id)
    if not mine:
        return [], [], None
    keys = run_keys(mine, run_id)
    start = min(keyhistory.when(c['time']) for c in mine)
    prev = previous_complete_run(
        _cases_before(db, keys, keyhistory.sql_time(start, later=True)) + mine,
        run_id)
    since = start
    if prev:
        since = min([since] + [keyhistory.when(c['time'])
                               for c in windowfindings.run_cases(db, prev)])
    both = windowfindings.judge_keys(db, windowfindings.history_keys(mine),
                                     since, {run_id, prev})
    found = [f for f in both if f.run_id == run_id]
    before = {_finding_id(f) for f in both if f.run_id == prev}
    new = [f for f in found if _finding_id(f) not in before]
    return found, new, prev


def _cases_before(db, keys, t):
    """The newest cases of ``keys`` recorded before the text time ``t``
    (:data:`keyhistory.LOOKBACK` of each), and the aborted cases of their
    runs (a run aborted anywhere is not complete)."""
    out = []
    for key in keys:
        out += keyhistory.key_cases_before(db, key, t, keyhistory.LOOKBACK,
                                      keyhistory.CASE_LIGHT)
    runs = sorted({c['run_id'] for c in out})
    out += inlists.query_in(
        db, 'SELECT run_id, verdict, time FROM cases WHERE verdict = ? AND '
        'run_id IN (?...)', runs, before=(str(V.Verdict.ABORTED),))
    return out


def finding_lines(findings, cases):
    """Short lines: one per finding (drifts, drops of a configuration
    grouped), each followed by its ``changed:`` lines (``cases``: the
    store, or case rows)."""
    return answers.drop_lines(findings, cases)
