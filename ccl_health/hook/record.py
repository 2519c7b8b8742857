"""The hook's result into the performance database, and its ``--json``
document.  Recording comes after the verdict line, only where a database
is named (``--db``, ``CCL_HEALTH_DB`` or the site file's ``health.db``:
never a new file in the folder the hook was started in), and waits at most
:data:`ccl_health.hook.settings.RECORD_BOUND` seconds, within the limit:
a locked or unreachable database is a note, never a wait past the
health checker's watchdog, and the check is kept as a pending file
(:mod:`ccl_health.hook.pending`) that the next check records after its
own."""

import dataclasses
import os
import socket
import threading
import time

from ccl_health import dburl, identity

#: a failure's detail is kept whole up to this many characters of JSON
#: (stored compressed: :mod:`ccl_health.db.docs`); a longer one keeps its
#: verdict's own facts and the probes, and says how long it was
DETAIL_MAX = 256 << 10


def case_of(args, res, environ=None):
    """The hook's result as one case of the performance database: the
    main probe's size, the environment the probes ran with
    (:func:`recorder.run_environment`) and the probes' detail in its own
    field: a healthy check's in short (:func:`short_detail`: its record
    stays under 1 KB, the environment and versions stored once for every
    check that shares them), a failure's whole (:func:`full_detail`)."""
    from ccl_health.db import recorder
    from ccl_health.db import store
    from ccl_health.hook import settings
    sizes = []
    main_probe = res.probes[0] if res.probes else None
    if main_probe and main_probe.busbw:
        sizes.append(store.SizeRecord(
            main_probe.size, main_probe.busbw, ref=main_probe.ref or None,
            verdict=main_probe.verdict or None))
    host = getattr(args, 'hostname', None) or socket.gethostname()
    dropped = dict(getattr(args, 'dropped', ()) or ())
    healthy = str(res.verdict) == 'pass'
    # the check's time, not its write's: a case kept pending and recorded
    # later has the time it was measured
    when = store.now()
    # the check's one identity (made with its settings), else a new one:
    # never the time to the second (two checks of a node in one second
    # are two records)
    run_id = getattr(args, 'run_id', None) or identity.new(
        settings.RUN_PREFIX, host)
    return store.CaseRecord(
        run_id=run_id, time=when,
        case_name='node-health', verdict=res.verdict, system=res.system,
        partition=res.partition, nodelist=host, nodes=1,
        ranks=len(main_probe.gpus) if main_probe else None,
        collective='all_reduce', transport='intra',
        proven=main_probe.proven if main_probe else '',
        reason=res.line, versions=main_probe.versions if main_probe else {},
        env=recorder.run_environment(environ=environ),
        detail=(short_detail(res, dropped) if healthy else
                full_detail(res, dropped)),
        source='health', sizes=sizes)


def full_detail(res, dropped):
    """Everything the hook saw: the probes, the node state, the node's
    role, the tries, the variables dropped (bounded: :data:`DETAIL_MAX`)."""
    import json
    doc = {'action': getattr(res, 'action', None),
           'cause': getattr(res, 'cause', None),
           'evidence': getattr(res, 'evidence', '') or None,
           'probes': [dataclasses.asdict(p) for p in res.probes],
           **({'node_state': res.node_state} if res.node_state else {}),
           **({'role': res.role} if getattr(res, 'role', None) else {}),
           **({'attempts': res.attempt_notes}
              if getattr(res, 'attempt_notes', None) else {}),
           **({'dropped_env': dropped} if dropped else {})}
    size = len(json.dumps(doc, default=str))
    if size <= DETAIL_MAX:
        return doc
    return dict(short_detail(res, dropped), truncated=(
        f'the detail was {size} characters (over {DETAIL_MAX}): node state '
        f'and tries left out; the hook\'s --json document has them'))


def _short_probe(p):
    return {'gpus': list(p.gpus), 'size': p.size,
            'busbw': round(p.busbw, 2) if p.busbw else p.busbw,
            'verdict': p.verdict}


def short_detail(res, dropped):
    """A healthy check in short: its action and cause where it has one
    (a healthy check has neither: left out, 28 bytes of every record),
    the main probe and the slowest of the others (GPU pairs, links) with
    how many there were; never the node state or the tries, only what its
    error counters rose by where any did (``rises``: NVLink, AER; counts
    a healthy line does not name)."""
    doc = {k: v for k, v in (('action', getattr(res, 'action', None)),
                             ('cause', getattr(res, 'cause', None)))
           if v is not None}
    rises = (getattr(res, 'node_state', None) or {}).get('rises')
    if rises:
        doc['rises'] = rises
    doc['probes'] = [_short_probe(p) for p in res.probes[:1]]
    others = [p for p in res.probes[1:] if p.busbw]
    if others:
        doc['probes'].append(_short_probe(min(others,
                                              key=lambda p: p.busbw)))
        doc['others'] = len(res.probes) - 1
    if dropped:
        doc['dropped_env'] = dropped
    return doc


def record(args, res, environ=None, timeout=None):
    """Record :func:`case_of` in the database ``args.db`` (``timeout``:
    its busy timeout)."""
    from ccl_health.db import store
    case = case_of(args, res, environ)
    kw = {} if timeout is None else {'timeout': timeout}
    with store.open_store(args.db, **kw) as db:
        db.add_case(case)


def bounded_record(settings, res, environ, bound):
    """Record within ``bound`` seconds: ``(note, drained)``.  ``note`` is
    ``''`` when recorded, else why not and where the case is kept
    (:func:`ccl_health.hook.pending.keep`); ``drained``: how many pending
    checks were recorded after it.  The database's own busy timeout is the
    bound, and the recording runs in a thread the hook does not wait for
    past it."""
    case = case_of(settings, res, environ)   # one case: the write and the
    drained = []                             # kept file are the same run
    if bound <= 0.05:
        note = 'not recorded: no time left within --limit'
    else:
        note = _write(settings, case, bound, drained)
    if note:
        note += _keep(settings, case)
    return note, len(drained)


def _write(settings, case, bound, drained):
    """Write ``case``, then the pending checks while time is left: ``''``
    when ``case`` is recorded, else why not."""
    from ccl_health.hook import pending
    box = {}
    deadline = time.monotonic() + bound
    folder = getattr(settings, 'pending_dir', '') or ''

    def work():
        from ccl_health.db import store
        try:
            with store.open_store(settings.db, timeout=bound) as db:
                db.add_case(case)
                box['ok'] = True
                if folder:
                    pending.drain(db, folder, deadline, drained)
        except BaseException as err:          # noqa: B902
            box.setdefault('ok', False)
            box['err'] = dburl.hide_in(f'{type(err).__name__}: {err}',
                                       settings.db)
    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(bound + 0.2)
    if box.get('ok'):
        return ''
    if t.is_alive():
        return (f'not recorded in the performance database '
                f'{dburl.shown(settings.db)}: gave up after {bound:.1f} s')
    return (f'not recorded in the performance database '
            f'{dburl.shown(settings.db)}: {box.get("err", "no answer")}')


def _keep(settings, case):
    """Keep ``case`` in the pending folder: the note's end, saying where
    (and what older ones were dropped) or why not."""
    from ccl_health import CclHealthError
    from ccl_health.hook import pending
    folder = getattr(settings, 'pending_dir', '') or ''
    if not folder:
        return '; not kept: no pending folder'
    try:
        path, dropped = pending.keep(case, folder, settings.pending_keep,
                                     settings.pending_bytes, settings.db)
    except CclHealthError as err:
        return f'; not kept: {err}'
    note = (f'; kept in {path}, recorded by the next check or '
            f'scripts/report ingest --pending')
    if dropped:
        note += (f' (dropped the {len(dropped)} oldest pending check(s) '
                 f'over {settings.pending_keep} files / '
                 f'{settings.pending_bytes >> 20} MiB, the oldest '
                 f'{os.path.basename(dropped[0])})')
    return note


def json_document(res, settings=None, recorded=None):
    """The hook's ``--json`` detail of a result (what NodeHealthCheck and
    ``scripts/fleet`` read)."""
    doc = {'code': res.code, 'verdict': res.verdict,
           'action': getattr(res, 'action', None),
           'cause': getattr(res, 'cause', None), 'line': res.line,
           'evidence': getattr(res, 'evidence', '') or None,
           'seconds': res.seconds, 'attempts': res.attempts,
           'system': res.system, 'partition': res.partition,
           'probes': [dataclasses.asdict(p) for p in res.probes],
           'node_state': res.node_state,
           'role': getattr(res, 'role', None) or {},
           'attempt_notes': list(getattr(res, 'attempt_notes', []) or []),
           'probe_path': getattr(res, 'probe_path', '') or None,
           'probe_ahead': getattr(res, 'probe_ahead', '') or None,
           'timings': dict(getattr(res, 'timings', None) or {})}
    doc['dropped_env'] = dict(getattr(settings, 'dropped', ()) or ())
    doc['database'] = dburl.shown(getattr(settings, 'db', None)) or None
    if recorded is not None:
        doc['recorded'] = recorded
    return doc
