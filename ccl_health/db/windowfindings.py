"""The cases and the history findings of a time window or of a run
(``scripts/report failed`` and ``detect``, the page, the nightly's
findings), bounded by key and time (issue 30): what a question needs,
never the whole ``cases`` table.

* the cases of a time window (:func:`window_cases`) or of a run
  (:func:`run_cases`), without the heavy columns (``env_json``,
  ``versions_json``, ``detail_json``: read only for the rows shown,
  :mod:`ccl_health.db.changedcases`);
* the findings of the keys of a window (:func:`judge_keys`,
  :func:`kept_findings`, :func:`window_findings`) or of one run
  (:func:`run_history`): those kept with each case
  (:mod:`ccl_health.db.keystate`), a key without a kept state judged from
  its history (:func:`each_key`: :mod:`ccl_health.db.keyhistory`);
* what changed before a finding (:func:`changed`: as kept with it, or
  read from its cases, :mod:`ccl_health.db.changedcases`).

A time is text (ISO 8601).  A window's SQL bound is
:data:`ccl_health.db.keyhistory.MARGIN` wider than asked (times recorded
with another UTC offset sort by their text), and the rows are then kept by their real time
(:func:`ccl_health.db.keyhistory.when`)."""

from ccl_health.db import changedcases, inlists, seriestable
from ccl_health.db.verdictsql import GOOD_SQL
from ccl_health.judge import history
from ccl_health.db.keyhistory import (
    CASE_LIGHT, LOOKBACK, RECORDS, indexed, key_history, key_where,
    select_cols, sql_time, when, with_docs, with_refs)

#: and every column of the ``records`` view (the page's plots)
_RECORDS_FULL = RECORDS.replace(
    'c.algo, ', 'c.algo, c.proven, c.reason, c.nccl_version, '
    'c.plugin_version, c.libfabric_version, c.provider, c.cuda_driver, '
    'c.driver, c.tests_version, c.suite_revision, ').replace(
    'm.busbw, ', 'm.busbw, m.busbw_oop, m.busbw_ip, m.algbw_oop, '
    'm.algbw_ip, m.time_oop_us, m.time_ip_us, ')


def _when(text):
    return when(text)


def window_cases(store, since, until=None, columns=CASE_LIGHT, kinds=None,
                 records=False, failing=False, run_prefix=None):
    """The cases recorded at ``since`` or later (before ``until``), oldest
    first, ``columns`` only (``records``: one row per case and size, as
    :func:`key_history`); ``kinds``: of these kinds of case only
    (:func:`ccl_health.judge.history.kind_of`); ``failing``: only those
    whose verdict is not good (the partial index ``cases_bad``);
    ``run_prefix``: of the runs whose id starts so (no ``%`` or ``_`` in
    it) only, sorted out by the database."""
    from ccl_health.judge.series import kind_of
    sql = (f'{_RECORDS_FULL} WHERE' if records else
           f'SELECT {select_cols(columns)} FROM cases c WHERE')
    sql += ' c.time >= ?'
    params = [sql_time(since)]
    if until is not None:
        sql += ' AND c.time < ?'
        params.append(sql_time(until, later=True))
    if failing:
        sql += f' AND c.verdict NOT IN {GOOD_SQL}'
    if run_prefix is not None:
        sql += ' AND c.run_id LIKE ?'
        params.append(run_prefix + '%')
    if kinds is not None and indexed(store):
        from ccl_health.judge.series import PROBE_KIND
        if PROBE_KIND not in kinds and store.schema_version() >= 9:
            # the literal of the partial kind index (schema 9: without
            # the probes), so it is the one read, never every case of
            # the window (a month of Frontier's checks for the page's
            # sweeps)
            sql += f" AND c.kind <> '{PROBE_KIND}'"
        sql += f' AND c.kind IN ({", ".join("?" * len(kinds))})'
        params += list(kinds)
    rows = store.query(sql + ' ORDER BY c.time, c.id', tuple(params))
    return [r for r in rows if _when(r['time']) >= since and
            (until is None or _when(r['time']) < until) and
            (kinds is None or kind_of(r) in kinds)]


def run_cases(store, run_id, columns=CASE_LIGHT):
    """The cases of the run ``run_id``, oldest first."""
    return with_docs(store, store.query(
        f'SELECT {select_cols(with_refs(store, columns))} FROM cases c WHERE '
        f'c.run_id = ? ORDER BY c.time, c.id', (run_id,)))


def each_key(store, keys, since, until=None, lookback=LOOKBACK):
    """``(key, records)`` of each key of ``keys`` in turn: its
    :func:`key_history` and the records of the runs accepted as a level of
    it (``scripts/report accept``: the level's value, however old).  One
    key's records in memory at a time."""
    from ccl_health.judge.series import series_key
    accepted = []
    for run_id in sorted({a['run_id'] for a in
                          store.acceptances(active=True)}):
        accepted += store.query(f'{RECORDS} WHERE c.run_id = ?', (run_id,))
    for key in sorted(set(keys), key=lambda k: tuple(map(str, k))):
        records = key_history(store, key, since, until, lookback)
        have = {(r['case_id'], r['size']) for r in records}
        records += [r for r in accepted if series_key(r) == key and
                    (r['case_id'], r['size']) not in have]
        yield key, records


def history_records(store, keys, since, until=None, lookback=LOOKBACK):
    """The records of :func:`each_key`, every key's together."""
    return [r for _, records in each_key(store, keys, since, until,
                                         lookback) for r in records]


def history_keys(cases):
    """The history keys (:func:`ccl_health.judge.history.series_key`) of
    the case rows ``cases`` that are judged against their history."""
    from ccl_health.judge.series import has_history, series_key
    return {k for k in map(series_key, cases) if has_history(k)}


def judge_keys(store, keys, since, runs=None, until=None, standing=None,
               read=None, **kw):
    """The history findings of the runs ``runs`` (default: of the records
    from ``since`` on) of the keys ``keys``: those each case was judged to
    have when it was written (:mod:`ccl_health.db.keystate`: read by index),
    and the keys without such a state judged from their whole history
    (:func:`each_key`), one at a time: the same findings either way (a
    store that lists its stale keys, schema 10: those listed and those
    without a state).  ``standing``: a dict given the lines of how each
    key is judged (:func:`ccl_health.judge.standing.standing`; kept with
    each key's state, schema 11); ``read``: a set given
    the run ids judged.  ``until`` or other judging arguments (``kw``):
    every key judged here."""
    from ccl_health.db import keystate as state
    from ccl_health.judge.history import detect
    from ccl_health.judge.standing import standing as standing_of
    from ccl_health.judge.standing import standing_of as lines_of
    acc, base = store.acceptances(), store.baselines()
    keys = set(keys)
    if until is not None or kw:
        kept = {}
    elif state.listed(store):
        # schema 10: a key's kept state is its own unless listed stale;
        # its standing line kept with it (schema 11), never its state read
        kept = state.kept_standing(store, keys - state.stale_listed(store),
                                   lines=standing is not None)
        if standing is not None:
            standing.update((k, line) for k, line in kept.items()
                            if line is not None)
    else:
        kept = state.fresh(store, keys, state.Levels(acc, base),
                           states=standing is not None)
        if standing is not None:
            standing.update(lines_of(state.standing(kept)))
    out = state.findings(store, set(kept), since, runs) if kept else []
    if kept and read is not None:
        read.update(runs if runs is not None else (
            r['run_id'] for r in store.query(
                'SELECT DISTINCT run_id FROM cases WHERE time >= ?',
                (sql_time(since),))))
    judged = set(runs) if runs is not None else \
        (lambda rec: _when(rec['time']) >= since)
    for _, records in each_key(store, keys - set(kept), state.EVER, until):
        out += detect(records, runs=judged, accepted=acc, baselines=base,
                      **kw)
        if standing is not None:
            standing.update(standing_of(records, acc, base))
        if read is not None:
            read.update(r['run_id'] for r in records)
    return sorted(out, key=finding_order)


def _in_window(store, key, since):
    """The run ids of the key ``key``'s cases (not simulated) recorded
    from ``since`` on, read by its series index."""
    from ccl_health.judge.series import simulated
    where, params, _ = key_where(store, key)
    return {r['run_id'] for r in store.query(
        f'SELECT c.run_id, c.time FROM cases c WHERE {where} AND c.time >= '
        f'?', tuple(params) + (sql_time(since),))
        if _when(r['time']) >= since and not simulated(r['run_id'])}


def kept_findings(store, since, runs=True, probes=None):
    """The history findings of a window (schema 10, the stale keys
    listed: :func:`ccl_health.db.keystate.listed`), read from what is kept,
    never from every key of the window: the findings kept of its cases
    (by the time index of ``findings``), the stale keys measured in it
    judged from their history (:func:`each_key`), each key's as
    :func:`judge_keys` gives them.  ``runs``: the findings of the window's
    runs (as :func:`window_findings` of its cases, ``report failed``):
    also those of their cases before ``since``, of keys measured in the
    window; a health check is a run of its own (one case: the hook's
    run id), so those are of the other kinds' runs (by the kind index);
    False: the findings of the cases from ``since`` on (``judge_keys``
    without runs).  ``probes``: True, of the health probes' keys only;
    False, of the others only."""
    import json
    from ccl_health.db import keystate as state
    from ccl_health.judge.history import detect, has_history
    from ccl_health.judge.series import HISTORY_KINDS, PROBE_KIND, simulated

    def wanted(key):
        return has_history(key) and (probes is None or
                                     (key[7] == PROBE_KIND) == probes)
    stale = {k for k in state.stale_listed(store) if wanted(k)}
    other = set()
    if runs:
        # the runs of the other kinds judged against history (a fleet
        # step is judged within its run: no finding kept), by the partial
        # kind index
        other = {r['run_id'] for r in window_cases(
            store, since, columns=('run_id', 'time'), kinds=tuple(
                k for k in HISTORY_KINDS if k != PROBE_KIND))
            if not simulated(r['run_id'])}
    cols = state.finding_cols(store)
    rows = store.query(f'SELECT {cols} FROM findings WHERE time >= ?',
                       (sql_time(since),))
    rows = [r for r in rows if _when(r['time']) >= since]
    seen = {r['case_id'] for r in rows}
    early = [r for r in inlists.query_in(
        store, f'SELECT {cols} FROM findings WHERE run_id IN (?...)',
        sorted(other)) if r['case_id'] not in seen and
        _when(r['time']) < since]
    measured = {}

    def in_window(key):
        if key not in measured:
            measured[key] = _in_window(store, key, since)
        return bool(measured[key])
    out = []
    for r, before in [(r, False) for r in rows] + [(r, True) for r in early]:
        key = tuple(json.loads(r['key']))
        if not wanted(key) or key in stale or (before and
                                                not in_window(key)):
            continue
        out.append(state.finding_row(r, key))
    acc, base = store.acceptances(), store.baselines()
    for key, records in each_key(store, {k for k in stale
                                         if in_window(k)}, state.EVER):
        judged = (measured[key] | other) if runs else \
            (lambda rec: _when(rec['time']) >= since)
        out += detect(records, runs=judged, accepted=acc, baselines=base)
    return sorted(out, key=finding_order)


#: the order of a key's findings at a size: its drops and recoveries, an
#: intermittent pattern, its drifts (as :func:`ccl_health.judge.history.
#: detect` gives them)
_KIND_ORDER = {'drop': 0, 'recovery': 0, 'intermittent': 1, 'drift': 2}


def finding_order(f):
    """A finding's place in :func:`judge_keys`' answer: by key, size,
    kind (:data:`_KIND_ORDER`) and time."""
    return (tuple(map(str, f.key)), f.size, _KIND_ORDER.get(f.kind, 3),
            f.time, f.run_id)


def window_keys(store, since):
    """The history keys measured from ``since`` on: counted in the
    database (schema 6), else from the window's cases."""
    from ccl_health.judge.series import KEY, has_history
    if not indexed(store):
        return history_keys(window_cases(store, since))
    if seriestable.keeps_last(store):   # each series' newest time, kept
        names = KEY + ('kind', 'node')
        return {k for k in (tuple(r[c] for c in names) for r in
                            seriestable.measured_since(store, names,
                                                       sql_time(since)))
                if has_history(k)}
    if store.schema_version() >= 10:    # the series ids of the time index
        cols = ', '.join(f's.{c}' for c in KEY + ('kind', 'node'))
        return {k for k in (tuple(r[c] for c in KEY + ('kind', 'node'))
                            for r in store.query(
                                f'SELECT {cols} FROM series s WHERE s.id '
                                f'IN (SELECT c.series_id FROM cases c WHERE '
                                f'c.time >= ?)', (sql_time(since),)))
                if has_history(k)}
    cols = ', '.join(KEY + ('kind', 'node'))
    return {k for k in (tuple(r[c] for c in KEY + ('kind', 'node'))
                        for r in store.query(
                            f'SELECT DISTINCT {cols} FROM cases WHERE time '
                            f'>= ?', (sql_time(since),)))
            if has_history(k)}


def window_findings(store, cases, since, runs=None, **kw):
    """The history findings of the runs ``runs`` (default: those of
    ``cases``, the cases of a window starting at ``since``), each key
    judged from its recent history only (:func:`judge_keys`)."""
    runs = {c['run_id'] for c in cases} if runs is None else set(runs)
    return judge_keys(store, history_keys(cases), since, runs, **kw)


def run_history(store, run_id, since=None):
    """The records :func:`ccl_health.judge.history.detect` needs to judge
    the run ``run_id``: the recent history of the keys it measured
    (from ``since``, default its first case, with :data:`LOOKBACK` cases
    of each key before)."""
    cases = run_cases(store, run_id)
    if not cases:
        return []
    start = min(_when(c['time']) for c in cases)
    if since is not None:
        start = min(start, since)
    return history_records(store, history_keys(cases), start)


def changed(source, finding):
    """The ``changed:`` lines of a finding
    (:func:`ccl_health.judge.attribution.attribute`); ``source``: a store
    (the lines kept with the finding, schema 12, else read bounded:
    :func:`ccl_health.db.changedcases.attribution_cases`) or the case
    rows."""
    from ccl_health.judge.attribution import attribute
    if hasattr(source, 'query'):
        if finding.changed is not None:
            return list(finding.changed)
        source = changedcases.attribution_cases(source, finding)
    return attribute(source, finding)


def detect_in(store, run_id=None, records=None, **kw):
    """:func:`ccl_health.judge.history.detect` over a store's records (or ``records``, some of
    them) with its acceptances and baselines.  The findings of one run
    (``run_id``) are those of the keys it measured (:func:`judge_keys`:
    kept with each case, or judged from the key's history), never the
    whole table judged."""
    if records is None and run_id is not None:
        cases = run_cases(store, run_id)
        if not cases:
            return []
        return judge_keys(store, history_keys(cases), min(
            _when(c['time']) for c in cases), {run_id}, **kw)
    return history.detect(store.records() if records is None else records,
                  run_id=run_id, accepted=store.acceptances(),
                  baselines=store.baselines(), **kw)
