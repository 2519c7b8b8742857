"""The questions people ask of the performance database."""

import datetime

from .history import attribute, detect
from .units import format_size, parse_size

BAD = ('below-reference', 'drop', 'fallback', 'wrong-results', 'hang',
       'crash', 'build-failed', 'could-not-check')


def last_runs(store, n=1):
    rows = store.query('SELECT run_id, MAX(time) AS t FROM cases '
                       'GROUP BY run_id ORDER BY t DESC')
    return [r['run_id'] for r in rows[:n]]


def failed(store, since_hours=24, now=None):
    """What failed in the last ``since_hours`` (last night): broken cases,
    and drops against history."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    since = (now - datetime.timedelta(hours=since_hours)).isoformat(
        timespec='seconds')
    lines = [f'{c["time"]}  {c["system"]}:{c["partition"]}  '
             f'{c["case_name"]}: {c["verdict"].upper()}: {c["reason"]}'
             for c in store.cases('WHERE time >= ?', (since,))
             if c['verdict'] in BAD]
    recent = {c['run_id'] for c in store.cases('WHERE time >= ?', (since,))}
    cases = store.cases()
    for f in detect(store.records()):
        if f.run_id in recent and f.kind != 'recovery':
            lines.append(f.line())
            if f.kind == 'drop':
                lines += [f'    changed: {c}' for c in attribute(cases, f)]
    return lines


def _match(rec, system, transport, size, partition=None):
    return ((system is None or rec['system'] == system) and
            (partition is None or rec['partition'] == partition) and
            (transport is None or rec['transport'] == transport) and
            (size is None or rec['size'] == size))


def history(store, transport=None, size=None, system=None, partition=None,
            last=30):
    size = parse_size(size) if size is not None else None
    recs = [r for r in store.records()
            if _match(r, system, transport, size, partition)]
    recs.sort(key=lambda r: (r['time'], r['size'] or 0))
    return recs[-last:] if size is not None else recs


def since_when(store, transport, size=None, system=None):
    """When did the current bad streak of this transport (at this size)
    start?  Returns (first bad run time, run id, streak length) or None."""
    size = parse_size(size) if size is not None else None
    cases = [c for c in store.cases() if (system is None or c['system'] ==
                                          system) and c['transport'] ==
             transport]
    bad_runs = set()
    if size is not None:
        for f in detect(store.records()):
            if f.kind == 'drop' and f.key[2] == transport and f.size == size:
                bad_runs.add(f.run_id)
        for r in store.records():
            if r['transport'] == transport and r['size'] == size and \
                    r['size_verdict'] == 'below-reference':
                bad_runs.add(r['run_id'])
    streak = []
    for c in reversed(cases):
        if c['verdict'] in BAD or c['run_id'] in bad_runs:
            streak.append(c)
        else:
            break
    if not streak:
        return None
    first = streak[-1]
    return first['time'], first['run_id'], len(streak)


def compare(store, run_a, run_b):
    """Per case and size: busbw in run A, in run B, ratio B/A."""
    def by(run):
        return {(r['case_name'], r['size']): r for r in store.records(
            'WHERE run_id = ?', (run,)) if r['size'] is not None}
    a, b = by(run_a), by(run_b)
    rows = []
    for key in sorted(set(a) & set(b)):
        va, vb = a[key]['busbw'], b[key]['busbw']
        rows.append((key[0], format_size(key[1]), va, vb,
                     vb / va if va else None))
    return rows
