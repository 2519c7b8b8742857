"""History judging kept by the writer (issue 30): each series key's
judging state after its newest case (table ``key_state``) and the findings
each case was judged to have (table ``findings``), written in the
transaction that writes the case (:meth:`ccl_health.db.store.Store.
add_cases`).  ``report failed`` and ``report detect`` then read the
findings of their window by index, never a key's history
(:func:`ccl_health.db.windowfindings.judge_keys`).

One judge: a key's state is that of :func:`ccl_health.judge.history.
detect` over the key's whole history (the :class:`ccl_health.judge.stream.
SeriesJudge` of each size after its last record), and a new case is judged
by those judges' next step.  A key is judged again from its whole history
(:func:`rebuild`) where a step would not be that: a case older than (or
as old as) the newest judged (a backfill, an ingest of old logs, a case
written again), a size the key had not measured, a level
(``scripts/report accept``, ``scripts/calibrate``) that starts after
the case or was not there when the state was made (:func:`fingerprint`),
or no state yet.  A reader takes the state of a key only when its levels
are those it was made with, and judges any other key from its whole
history, so a finding never depends on whether a state exists
(``tests/test_db_state.py``).

A change of levels (:meth:`ccl_health.db.store.Store.accept`,
``undo_acceptance``, ``add_baselines``) judges again the keys it names
(:func:`relevel`: those and no others), in its own transaction: its keys
are never left stale.

Two writers of one key (a sweep and its re-run) are serialised: SQLite's
write transaction is one at a time; on PostgreSQL each writer takes a
transaction-scoped advisory lock of each key it judges (in key order),
then reads the state.  Every writer of a state (a case's, ``rejudge``'s)
first takes the levels lock (:data:`LEVELS_LOCK`) shared, a change of
levels takes it alone: one lock, however many keys it judges again (a
lock per key would fill the server's lock table at a machine's nodes)."""

import datetime
import json

from ccl_health.db import inlists
from ccl_health.db.changedcases import CHANGED_KINDS, changed_texts
from ccl_health.db.keyhistory import RECORDS, key_history, sql_time, when
from ccl_health.db.seriestable import SERIES_COLUMNS
from ccl_health.judge import history as H
from ccl_health.judge.series import KEY, has_history, series_key, simulated
from ccl_health.judge.stream import SeriesJudge, finding_data, finding_of

#: the whole history (a key judged again, or at read without a state)
EVER = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)


def has_state(store):
    """Does the store have the tables (schema 8)?"""
    return store.schema_version() >= 8


def keeps_standing(store):
    """Does the store keep each key's standing line with its state
    (schema 11: column ``key_state.standing``)?"""
    return store.schema_version() >= 11


def keeps_changed(store):
    """Does the store keep each drop's and drift's ``changed:`` lines with
    it (schema 12: column ``findings.changed``)?"""
    return store.schema_version() >= 12


def standing_line(key, judges):
    """How the key ``key`` is judged now (the line of
    :func:`ccl_health.judge.standing.standing_of`, what ``scripts/report
    detect`` prints), from its judges of each size (:class:`ccl_health.
    judge.stream.SeriesJudge`); None without one."""
    from ccl_health.judge.standing import standing_of
    sizes = [(j.size, j.level, j.healthy) for j in judges]
    return standing_of({tuple(key): sizes})[tuple(key)] if sizes else None


def _json(data):
    return json.dumps(data, separators=(',', ':'))


def key_text(key):
    """The ``key`` column of a series key."""
    return json.dumps(list(key))


class Levels:
    """The acceptances and baselines of a store, matched to keys."""

    def __init__(self, accepted, baselines):
        self.accepted, self.baselines = accepted, baselines
        groups = {}
        for tag, rows in (('a', [a for a in accepted
                                 if not a.get('undone_at')]),
                          ('b', baselines)):
            for r in rows:
                fields = tuple(r.get(c) for c in KEY + ('kind',))
                groups.setdefault(fields, []).append((tag, r['id']))
        self._groups = groups

    def fingerprint(self, key):
        """The levels of ``key`` (whatever their size) as text: a state
        made with other levels is not the key's."""
        ids = []
        for fields, rows in self._groups.items():
            if all(want is None or want == have
                   for want, have in zip(fields, key[:8])):
                ids += rows
        return json.dumps(sorted(ids))

    def accepted_runs(self):
        return {a['run_id'] for a in self.accepted if not a.get('undone_at')}

    def after(self, key, size, rec):
        """Does a level of ``key`` at ``size`` start after the record
        ``rec`` (it would cut the history before it)?"""
        return any(not lv.starts_after(rec) for lv in H.levels(
            key, size, self.accepted, self.baselines))


def levels_of(store):
    return Levels(*store.levels())


def _records(store, case_ids, then=None):
    """The records of the cases ``case_ids``; with ``then``: ``(records,
    then())``, the queries of ``then`` sent before the records are read
    (one round trip for both in a pipeline)."""
    ids = sorted(set(case_ids))
    curs = [store.execute(f'{RECORDS} WHERE c.id IN '
                          f'({inlists.marks(len(part))})', tuple(part))
            for part in inlists.batches(ids)]
    more = then() if then else None
    out = [r for cur in curs for r in store.rows(cur)]
    return (out, more) if then else out


def _series_records(records):
    """``{key: records}`` of the records that join a history series."""
    out = {}
    for r in records:
        if r.get('size') is None or r.get('busbw') is None or \
                simulated(r):
            continue
        key = series_key(r)
        if has_history(key):
            out.setdefault(key, []).append(r)
    return out


#: the PostgreSQL advisory lock of the levels (two 32-bit keys: never
#: one of a key's, :func:`_lock`)
LEVELS_LOCK = (0x63636C68, 8)


def _hold_levels(store, alone=False):
    """On PostgreSQL, the levels lock (:data:`LEVELS_LOCK`) for this
    transaction: shared (a writer of a key's state), or ``alone`` (a
    change of levels)."""
    if store.kind == 'postgresql':
        store.execute('SELECT pg_advisory_xact_lock' +
                      ('' if alone else '_shared') + '(?, ?)', LEVELS_LOCK)


def _lock(store, keys):
    if store.kind == 'postgresql':
        for key in keys:
            store.execute('SELECT pg_advisory_xact_lock(hashtext(?))',
                          (key_text(key),))


def _rows(store, keys, cols):
    """``(key, row)`` of the state rows of ``keys`` (the columns
    ``cols``), 500 keys a query."""
    texts = [key_text(k) for k in keys]
    for row in inlists.query_in(
            store, f'SELECT {cols} FROM key_state WHERE key IN (?...)',
            texts):
        yield tuple(json.loads(row['key'])), row


def _load(store, keys, states=True):
    """``{key: row}`` of the state rows of ``keys`` (``states``: with
    their states)."""
    return dict(_rows(store, keys, '*' if states else 'key, levels'))


def update(store, case_ids):
    """Judge the cases ``case_ids`` just written (in the writer's
    transaction): each key's state stepped, or the key judged again
    (:func:`rebuild`)."""
    if not case_ids or not has_state(store):
        return
    # on PostgreSQL (a pipeline): the levels lock, the records and the
    # levels in one round trip, the locks and the states in a second
    _hold_levels(store)
    got = _records(store, case_ids, then=lambda: levels_of(store))
    by_key, levels = _series_records(got[0]), got[1]
    if not by_key:
        return
    keys = sorted(by_key, key=key_text)
    _lock(store, keys)
    rows = _load(store, keys)
    states, found, stepped = [], [], []
    for key in keys:
        got = _step(key, rows.get(key), by_key[key], levels)
        if got is None:
            rebuild(store, key, levels)
            continue
        states.append(got[0])
        found += got[1]
        stepped += got[2]
    _write(store, states, found, stepped)


def _step(key, row, records, levels):
    """(the new state row, the findings, the sizes stepped) of ``key``
    after ``records`` (its new cases'), or None where the key must be
    judged again."""
    fp = levels.fingerprint(key)
    if row is None or row['levels'] != fp:
        return None
    data = json.loads(row['state'])
    judges = {int(s): SeriesJudge.load(key, d) for s, d in data.items()}
    last = (row['last_time'], row['last_run'])
    accepted = levels.accepted_runs()
    records = sorted(records, key=lambda r: (r['time'], r['run_id'],
                                             r['case_id'], r['size']))
    found, newest = [], last
    for rec in records:
        judge = judges.get(rec['size'])
        if (rec['time'], rec['run_id']) <= last or judge is None or \
                rec['run_id'] in accepted or \
                levels.after(key, rec['size'], rec):
            return None
        drops, drifts = judge.step(rec)
        found += drops + drifts
        newest = max(newest, (rec['time'], rec['run_id']))
    last = newest
    stepped = sorted({r['size'] for r in records})
    found += [f for f in (judges[s].intermittent() for s in stepped) if f]
    return ((key_text(key), last[0], last[1], fp, _json(
        {str(s): j.state() for s, j in judges.items()}),
        standing_line(key, judges.values())), found,
        [(key_text(key), s) for s in stepped])


def rebuild(store, key, levels=None):
    """Judge ``key`` from its whole history: its findings and state
    written anew."""
    levels = levels or levels_of(store)
    records = key_history(store, key, EVER)
    judges = {}
    found = H.detect(records, accepted=levels.accepted,
                     baselines=levels.baselines, judges=judges)
    store.execute('DELETE FROM findings WHERE key = ?', (key_text(key),))
    mine = [r for r in records if r.get('size') is not None and
            r.get('busbw') is not None and not simulated(r)]
    if not mine:
        store.execute('DELETE FROM key_state WHERE key = ?',
                      (key_text(key),))
        return
    last = max((r['time'], r['run_id']) for r in mine)
    state = _json({str(size): j.state()
                   for (_, size), j in judges.items()})
    _write(store, [(key_text(key), last[0], last[1],
                    levels.fingerprint(key), state,
                    standing_line(key, judges.values()))], found, [])


def _write(store, states, found, stepped):
    """Write state rows, findings, and drop the intermittent findings of
    the (key, size) ``stepped`` (each is of the key's newest case)."""
    cur = store.conn.cursor()
    if stepped:
        cur.executemany(store._sql(
            "DELETE FROM findings WHERE key = ? AND kind = 'intermittent' "
            "AND size = ?"), stepped)
    if found:
        # schema 12: each drop's and drift's changed: lines kept with it
        texts = changed_texts(store, found) if keeps_changed(store) else None
        cur.executemany(store._sql(
            'INSERT INTO findings (case_id, key, size, kind, run_id, time, '
            'body' + (', changed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)' if texts
                      else ') VALUES (?, ?, ?, ?, ?, ?, ?)')),
            [(f.case_id, key_text(f.key), f.size, f.kind, f.run_id, f.time,
              _json(finding_data(f))) + ((texts[i],) if texts else ())
             for i, f in enumerate(found)])
    if states and not keeps_standing(store):    # an older schema
        states = [s[:5] for s in states]
    if states:
        more = len(states[0]) > 5           # the standing line (schema 11)
        cur.executemany(store._sql(
            'INSERT INTO key_state (key, last_time, last_run, levels, state'
            + (', standing) VALUES (?, ?, ?, ?, ?, ?)' if more else
               ') VALUES (?, ?, ?, ?, ?)') +
            ' ON CONFLICT (key) DO UPDATE SET '
            'last_time = excluded.last_time, last_run = excluded.last_run, '
            'levels = excluded.levels, state = excluded.state' +
            (', standing = excluded.standing' if more else '')), states)


def recorded_keys(store, fixed=()):
    """Every history key recorded (the stored series columns: schema 6;
    the table of the series: schema 9); ``fixed``: (column, value) pairs:
    of the cases with those values only (schema 6-8: read through the
    ``cases_series`` index, whose columns they start)."""
    from ccl_health.db import seriestable as series
    from ccl_health.judge.series import SERIES_KEY
    cols = SERIES_KEY
    if series.ided(store):    # the table of the series (a row a key)
        return {k for k in series.distinct(store, cols, dict(fixed))
                if has_history(k)}
    where = ' AND '.join(f'{c} = ?' for c, _ in fixed)
    rows = store.query(f'SELECT DISTINCT {", ".join(cols)} FROM cases' +
                       (f' WHERE {where}' if where else ''),
                       tuple(v for _, v in fixed))
    return {k for k in (tuple(r[c] for c in cols) for r in rows)
            if has_history(k)}


def stale_keys(store, levels=None):
    """The recorded keys whose state is missing or was made with other
    levels (a database older than schema 8, a level recorded by an older
    ccl-health, without :func:`relevel`): judged from their whole history
    at every read until :func:`rejudge` or their next case keeps a state
    again.  Reads every key (``SELECT DISTINCT``)."""
    levels = levels or levels_of(store)
    keys = recorded_keys(store)
    return sorted(keys - set(fresh(store, keys, levels, states=False)),
                  key=key_text)


def listed(store):
    """Does the store list its stale keys (schema 10: table
    ``stale_keys``)?  From then on only a writer of this version or newer
    writes a state or a level (an older one refuses a newer schema), and
    every level it writes judges again the keys it names
    (:func:`relevel`): a key's kept state is stale exactly while it is
    listed.  The database keeps the list: a state written takes its key
    off, a state removed puts it on (triggers, schema 10)."""
    return store.schema_version() >= 10


def fill_stale(store):
    """List the keys stale now (:func:`stale_keys`: reads every key once;
    the migration to schema 10)."""
    keys = stale_keys(store)
    store.conn.cursor().executemany(store._sql(
        'INSERT INTO stale_keys (key) VALUES (?)'),
        [(key_text(k),) for k in keys])


def stale_listed(store):
    """The keys listed stale (schema 10; :func:`listed`), as series
    keys."""
    return {tuple(json.loads(r['key'])) for r in store.query(
        'SELECT key FROM stale_keys')}


def rejudge(store, keys, progress=None):
    """Judge each of ``keys`` from its whole history and keep its state
    and findings (:func:`rebuild`), one transaction a key (a stop keeps
    the keys done; a writer of the same key waits for it, or it for the
    writer; a change of levels meanwhile is read by the keys after it).
    ``progress(done, total)`` after each key."""
    for i, key in enumerate(keys, 1):
        with store.transaction():
            _hold_levels(store)
            _lock(store, [key])
            rebuild(store, key)
        if progress:
            progress(i, len(keys))
    return len(keys)


def level_keys(store, rows):
    """The recorded history keys that the level rows ``rows``
    (acceptances, baselines: dicts with the fields of
    :func:`ccl_health.judge.history.accepts`) name, their empty fields
    matching anything: the keys whose levels (:meth:`Levels.fingerprint`)
    they change.  Read from the table of the series (schema 9; before
    it, by the ``cases_series`` index: a row of ``scripts/report accept``
    or ``scripts/calibrate`` names every column of it but the node),
    never from every case."""
    names = KEY + ('kind',)
    out = set()
    for fields in {tuple(r.get(c) for c in names) for r in rows}:
        out |= recorded_keys(store, [(c, v) for c, v in zip(names, fields)
                                     if v is not None])
    return sorted(out, key=key_text)


def relevel(store, rows):
    """In the transaction that writes (or undoes) the level rows ``rows``:
    judge the keys they name (:func:`level_keys`) from their whole history
    with the levels of now and keep their states and findings
    (:func:`rejudge`'s :func:`rebuild`), so that none is left stale;
    returns how many.  On PostgreSQL the levels lock is taken alone
    (:func:`_hold_levels`): no writer steps a key meanwhile."""
    if not rows or not has_state(store):
        return 0
    _hold_levels(store, alone=True)
    keys = level_keys(store, rows)
    levels = levels_of(store)
    for key in keys:
        rebuild(store, key, levels)
    return len(keys)


# -- reading ---------------------------------------------------------------
_COLS = 'case_id, key, size, kind, run_id, time, body'


def finding_cols(store):
    """The columns of a kept finding a reader reads (its ``changed:``
    lines too where kept: :func:`keeps_changed`)."""
    return _COLS + (', changed' if keeps_changed(store) else '')


def finding_row(row, key=None):
    """The :class:`~ccl_health.judge.finding.Finding` of a row of
    ``findings`` (:func:`finding_cols`; ``key``: its key, parsed), with
    its kept ``changed:`` lines where it has them."""
    f = finding_of(json.loads(row['body']), row['kind'], row['run_id'],
                   row['time'], json.loads(row['key']) if key is None
                   else key, row['size'], row['case_id'])
    if row.get('changed') is not None:
        f.changed = tuple(json.loads(row['changed']))
    return f


def fill_changed(store, batch=2000):
    """Keep the ``changed:`` lines of every drop and drift kept without
    them (the migration to schema 12), ``batch`` findings at a time."""
    last, cols = 0, finding_cols(store)
    while True:
        rows = store.query(
            f'SELECT id, {cols} FROM findings WHERE id > ? AND kind IN '
            f'({", ".join("?" * len(CHANGED_KINDS))}) AND changed IS NULL '
            f'ORDER BY id LIMIT {int(batch)}', (last,) + CHANGED_KINDS)
        if not rows:
            return
        last = rows[-1]['id']
        texts = changed_texts(store, [finding_row(r) for r in rows])
        store.conn.cursor().executemany(store._sql(
            'UPDATE findings SET changed = ? WHERE id = ?'),
            [(t, r['id']) for t, r in zip(texts, rows)])


def fresh(store, keys, levels, states=True):
    """``{key: state}`` of the keys of ``keys`` whose state is theirs
    (made with their levels of now); the others are judged at read.
    ``states``: False: ``{key: None}`` (the states are not read)."""
    if not has_state(store):
        return {}
    out = {}
    for key, row in _load(store, keys, states).items():
        if row['levels'] == levels.fingerprint(key):
            out[key] = json.loads(row['state']) if states else None
    return out


def findings(store, keys, since=None, runs=None):
    """The findings kept of the keys ``keys`` (a set) of the runs ``runs``
    (a set), else of the records from ``since`` on."""
    rows, cols = [], finding_cols(store)
    if runs is not None:
        runs = sorted(r for r in runs if r is not None)
        rows = inlists.query_in(
            store, f'SELECT {cols} FROM findings WHERE run_id IN (?...)',
            runs)
    else:
        rows = store.query(f'SELECT {cols} FROM findings WHERE time >= ?',
                           (sql_time(since),))
    texts = {key_text(k): tuple(k) for k in keys}
    out = [finding_row(r, texts[r['key']]) for r in rows
           if r['key'] in texts]
    return [f for f in out if runs is not None or when(f.time) >= since]


def kept_standing(store, keys, lines=True):
    """``{key: its standing line}`` of the keys of ``keys`` that have a
    kept state (``lines`` False: ``{key: None}``), read from the column
    ``standing`` (schema 11), never the states, but for a row kept before
    it (its line made from its state).  Of a store that lists its stale
    keys (:func:`listed`): a key's state not listed is its own."""
    from ccl_health.judge.standing import standing_of
    cols = 'key' + (', standing' if lines and keeps_standing(store) else '')
    out = {key: row.get('standing') for key, row in _rows(store, keys, cols)}
    if lines:
        old = [k for k, line in out.items() if line is None]
        states = {k: json.loads(r['state']) for k, r in _load(
            store, old).items()}
        out.update(standing_of(standing(states)))
    return out


def fill_standing(store):
    """Keep the standing line of every kept state not listed stale (the
    migration to schema 11), a batch of rows at a time.  A stale key's
    row is left without one: writing it would take the key off the list
    (the database's triggers), and its line is made when it is judged."""
    keys = [tuple(json.loads(r['key'])) for r in store.query(
        'SELECT key FROM key_state WHERE standing IS NULL AND key NOT IN '
        '(SELECT key FROM stale_keys)')]
    for part in inlists.batches(keys):
        lines = kept_standing(store, part)
        store.conn.cursor().executemany(store._sql(
            'UPDATE key_state SET standing = ? WHERE key = ?'),
            [(line, key_text(k)) for k, line in lines.items()])


def standing(states):
    """``{key: [(size, level, healthy values)]}`` of the newest part of
    each size (:func:`ccl_health.judge.standing.standing_of`)."""
    out = {}
    for key, data in states.items():
        for d in data.values():
            j = SeriesJudge.load(key, d)
            out.setdefault(tuple(key), []).append((j.size, j.level,
                                                   j.healthy))
    return out
