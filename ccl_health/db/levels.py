"""What a calibration records, whichever input it was made from (issue
37): one level, in the reference file and in the performance database.

A calibration's runs (from run reports: ``scripts/calibrate --report``;
from the database: ``--db``) are case rows with their ``busbw`` per size;
:func:`level_rows` makes them the level of each history key and size (the
median and relative noise of the runs, :func:`ccl_health.judge.history.
measured`; the newest run, after which the history is judged against it):
rows of the store's ``baselines``.  The same rows give the reference
file's entry its ``noise`` and ``calibrated`` stamp (:func:`entry_level`).

The reference file is that level where the database holds no newer one:
:func:`file_rows` reads a calibrated entry back as the rows it stands for,
and :func:`take_file_levels` records them in a database that has no level
of the key at or after it (``scripts/run`` does, after each run, with the
reference files it ran against), so a calibration recorded only in the
file is the level from the first run after it, never "waiting for 15
runs"."""

import datetime
import math

from ccl_health.judge import history
from ccl_health.judge.baselines import measured
from ccl_health.judge import series
from ccl_health.units import parse_size


def level_rows(runs, min_size='1M', source='scripts/calibrate'):
    """The levels a calibration from ``runs`` (case rows with ``run_id``,
    ``time``, the columns of the history key and ``busbw``, ``{size:
    busbw}``) measured, as rows of the store's ``baselines``
    (:data:`ccl_health.db.store.BASELINE_COLUMNS` but ``created``): per
    history key (the kind of case included) and size >= ``min_size``, the
    median and relative noise of its runs (:func:`history.measured`), the
    runs named, the newest of them where the history judged against it
    starts."""
    lo = parse_size(min_size)
    by_key = {}
    for r in runs:
        by_key.setdefault(series.series_key(r), []).append(r)
    rows = []
    for key, rs in sorted(by_key.items(), key=lambda kv: str(kv[0])):
        newest = max(rs, key=lambda r: (r['time'], r['run_id']))
        sizes = sorted({s for r in rs for s in r['busbw']})
        for size in sizes:
            vals = [r['busbw'][size] for r in rs
                    if r['busbw'].get(size) is not None and
                    math.isfinite(r['busbw'][size]) and
                    r['busbw'][size] > 0]
            if size < lo or not vals:
                continue
            median, noise = measured(vals)
            rows.append({
                **dict(zip(series.KEY + ('kind',), key)), 'size': size,
                'median': median, 'noise': noise, 'n': len(vals),
                'runs': sorted({r['run_id'] for r in rs}),
                'run_id': newest['run_id'], 'run_time': newest['time'],
                'source': source})
    return rows


def entry_level(rows):
    """``(noise, calibrated)`` of a reference entry from the level rows of
    its configuration (:func:`level_rows`): each size's relative noise
    (rounded as the file keeps it) and the calibration's stamp (how many
    runs, the newest and its time)."""
    if not rows:
        return {}, None
    newest = max(rows, key=lambda r: (r['run_time'], r['run_id']))
    return ({r['size']: round(r['noise'], 4) for r in rows},
            {'runs': max(r['n'] for r in rows), 'newest': newest['run_id'],
             'time': newest['run_time']})


def file_kind(collective):
    """The kind of case an entry of a reference file is the level of: a
    framework collective's (``torch_*``) or a sweep's
    (:func:`ccl_health.judge.series.kind_of`)."""
    return series.kind_of({'collective': collective})


def file_rows(ref, partitions=None):
    """The level rows (:func:`level_rows`' form) a reference file
    (:class:`ccl_health.judge.reference.SystemReference`) holds: one per
    size of each calibrated entry (one with ``calibrated`` and the noise of
    the size), of ``partitions`` (default: every partition)."""
    rows = []
    for pname, part in sorted(ref.partitions.items()):
        if partitions is not None and pname not in partitions:
            continue
        for e in part.entries:
            cal = e.calibrated
            if not cal:
                continue
            key = {'system': ref.system, 'partition': pname,
                   'transport': e.transport, 'collective': e.collective,
                   'nodes': e.nodes, 'ranks': e.nodes * e.gpus_per_node,
                   'algo': e.algo, 'kind': file_kind(e.collective)}
            for size, noise in sorted(e.noise.items()):
                rows.append(dict(
                    key, size=size, median=e.busbw[size], noise=noise,
                    n=cal['runs'], runs=[cal['newest']],
                    run_id=cal['newest'], run_time=cal['time'],
                    source=f'reference file {ref.path}'))
    return rows


def _when(text):
    from ccl_health.db.keyhistory import when
    return when(text)


def newer_in_db(row, accepted, baselines):
    """Does the database hold a level of ``row``'s key and size (a
    baseline or an active acceptance) that starts at or after it?"""
    key = tuple(row[c] for c in series.KEY + ('kind',))
    start = _when(row['run_time'])
    return any(_when(lv.run_time) >= start for lv in history.levels(
        key, row['size'], accepted, baselines))


def take_file_levels(db, refs, partitions=None):
    """Record in the store ``db`` the levels of the reference files
    ``refs`` (:func:`file_rows`) that it holds no newer one of
    (:func:`newer_in_db`): the keys they name judged again from their whole
    history (:meth:`ccl_health.db.store.Store.add_baselines`).  Returns the
    rows recorded."""
    accepted, baselines = db.levels()
    rows = [r for ref in refs for r in file_rows(ref, partitions)
            if not newer_in_db(r, accepted, baselines)]
    if rows:
        db.add_baselines(rows)
    return rows


def report_time(report):
    """The time a run report's calibrated runs end at: one second after its
    ReFrame session ended (every case of the session was recorded by then;
    the first run after it is judged against the level), as the store
    writes times; None where the report does not say."""
    info = report.get('session_info') or {}
    end = info.get('time_end_unix')
    if not isinstance(end, (int, float)) or not math.isfinite(end):
        return None
    t = datetime.datetime.fromtimestamp(math.floor(end) + 1,
                                        datetime.timezone.utc)
    return t.isoformat(timespec='seconds')
