"""What changed before a history finding, read (issue 45): the case
rows its ``changed:`` lines compare (:func:`ccl_health.judge.attribution.
attribute`: the flagged run's case of its key, the first of a drift's, the
key's last passing case before them), read for many findings together
(:func:`attribution_many`), and those lines as JSON text, made once by
the writer that keeps a finding (:func:`changed_texts`, schema 12).
Below the window's reads (:mod:`ccl_health.db.windowfindings`) and the
state kept per key (:mod:`ccl_health.db.keystate`), which both use it."""

import json

from ccl_health.db import inlists
from ccl_health.db.keyhistory import (
    CASE_LIGHT, key_cases_before, of_key, select_cols, with_docs, with_refs)

#: the columns of a case that attribution reads (a listing's and the
#: environment)
CASE_ATTRIBUTED = CASE_LIGHT + ('env_json',)
#: the kinds of finding shown with what changed before them (their
#: ``changed:`` lines kept with them, schema 12)
CHANGED_KINDS = ('drop', 'drift')


def attribution_cases(store, finding):
    """The case rows (with ``env_json``) that
    :func:`ccl_health.judge.attribution.attribute` compares for ``finding``:
    the flagged run's case of its key, the first of a drift's, and the
    key's last passing case before them; oldest first
    (:func:`attribution_many` of the one finding)."""
    return attribution_many(store, [finding])[0]


def attribution_many(store, findings, batch=500):
    """The rows of :func:`attribution_cases` of each of ``findings`` (a
    list, in its order), read together: the cases of their runs by run id, 500 a
    query, and each key's last passing case before its finding, ``batch``
        keys a query (:func:`_last_passing`); every document resolved once: a
    few round trips, not four a finding (``report detect`` lists
    thousands of a machine's drops)."""
    cols = with_refs(store, CASE_ATTRIBUTED)
    runs = sorted({r for f in findings for r in (f.run_id, f.since_run)
                   if r})
    by_run = {}
    for row in inlists.query_in(
            store, f'SELECT {select_cols(cols)} FROM cases c WHERE c.run_id '
            f'IN (?...) ORDER BY c.time, c.id', runs):
        by_run.setdefault(row['run_id'], []).append(row)
    out, wants = [], []
    for n, f in enumerate(findings):
        mine = of_key(f.key)
        got = [c for c in by_run.get(f.run_id, ()) if mine(c)]
        if not got:
            out.append([])
            continue
        before = got[0]['time']
        if f.since_run:
            first = [c for c in by_run.get(f.since_run, ()) if mine(c)]
            got += first
            before = first[0]['time'] if first else f.since_time or before
        out.append(got)
        wants.append((n, f.key, before))
    for n, row in _last_passing(store, wants, cols, batch):
        out[n].append(row)
    with_docs(store, [c for cases in out for c in cases])
    return [sorted(cases, key=lambda c: (c['time'], c['id']))
            for cases in out]


def _last_passing(store, wants, cols, batch):
    """``(n, case)`` of each ``(n, key, before)`` of ``wants``: the key's
    newest passing case recorded before ``before``, where it has one;
    schema 9: ``batch`` a query (a list of series ids and times joined to
    each one's newest passing case, an index search each)."""
    from ccl_health.db import seriestable as series
    if not series.ided(store):        # an older schema: key by key
        for n, key, before in wants:
            for row in key_cases_before(store, key, before, 1,
                                        CASE_ATTRIBUTED, 'pass'):
                yield n, row
        return
    ids = series.ids(store, [key for _, key, _ in wants])
    todo = [(n, ids[series.key_text(key)], before)
            for n, key, before in wants if series.key_text(key) in ids]
    for part in inlists.batches(todo, batch):
        values = ', '.join(['(CAST(? AS INTEGER), CAST(? AS INTEGER), '
                            'CAST(? AS TEXT))'] * len(part))
        for row in store.query(
                f'WITH w (wanted, sid, before) AS (VALUES {values}) SELECT '
                f'w.wanted, {select_cols(cols)} FROM w JOIN cases c ON c.id '
                f'= (SELECT b.id FROM cases b WHERE b.series_id = w.sid AND '
                f'b.verdict = ? AND b.time < w.before ORDER BY b.time DESC, '
                f'b.id DESC LIMIT 1)',
                tuple(x for t in part for x in t) + ('pass',)):
            yield row.pop('wanted'), row


def changed_texts(store, found):
    """The ``changed:`` lines of each finding of ``found`` (JSON text; None
    for a finding of another kind): what changed before it, read from the
    store now (:func:`attribution_many`, all together) as a reader shows
    it.  A finding's lines read its key's cases up to its own, written
    before it or with it: the same lines at any later read, unless a case
    of the key is written before it later (a backfill, a case written
    again: the key is judged again, its lines made again:
    :func:`ccl_health.db.keystate.rebuild`)."""
    from ccl_health.judge.attribution import attribute
    want = [f for f in found if f.kind in CHANGED_KINDS]
    cases = attribution_many(store, want) if want else []
    lines = {id(f): json.dumps(attribute(c, f), separators=(',', ':'))
             for f, c in zip(want, cases)}
    return [lines.get(id(f)) for f in found]
