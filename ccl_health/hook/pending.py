"""A check the hook could not record, kept until it is (issue 30).

When the hook's bounded write (:func:`ccl_health.hook.record.bounded_record`)
fails or gives up (a SQLite file locked by 64 hooks at once, a PostgreSQL
server restarting, a network blip), its case (:func:`record.case_of`, the
very object it tried to write: same run id, time, sizes, versions,
environment and detail), with the database it was meant for (named
without a password: :func:`ccl_health.outputs.database_key`), is kept as
one JSON file ``case-<identity>.json`` (:func:`ccl_health.identity.new`)
in the pending folder (``--pending-dir``,
``$CCL_HEALTH_PENDING_DIR``, else ``<state>/ccl-health/pending``), a
private folder (:func:`ccl_health.safefile.private_dir`), written
atomically (:func:`ccl_health.safefile.write_atomic`, mode 0600).  At most
:data:`~ccl_health.hook.settings.PENDING_KEEP` files and
:data:`~ccl_health.hook.settings.PENDING_MB` MiB are kept, the oldest
dropped first (and said so in the hook's note); the one just kept stays.

A kept file is recorded only in the database it was meant for: by the
next check whose own write to that database succeeds (:func:`drain`,
oldest first, within what is left of its bound) or by ``scripts/report
ingest --pending [DIR]`` naming that database (:func:`ingest`); a file
meant for another database is left in place for a check or an ingest
that names it.  Each file is removed only after its transaction
committed.  Writing a case again is
idempotent (:meth:`ccl_health.db.store.Store.add_case` updates by
``(run_id, case_name)``): a write the hook gave up on that commits later
in its abandoned thread, or two drains of one shared folder at once, leave
one case; one process records a folder's files at a time (:data:`LOCK`).
A pending file is never the only place a verdict exists: the
hook's line and ``--json`` document are written as ever."""

import dataclasses
import json
import os
import stat
import sys
import time

from ccl_health import CclHealthError, identity, safefile, shell
from ccl_health.outputs import database_key

#: a pending file's name starts with this and ends with :data:`SUFFIX`
PREFIX = 'case-'
SUFFIX = '.json'
#: what a pending file says it is (its ``format``)
FORMAT = 'ccl-health-pending/1'
#: held (``flock``) by the one process recording a folder's files: a
#: folder that many nodes share (a home on a network filesystem) is
#: drained by one hook at a time, not by every hook after a reboot
LOCK = '.drain.lock'


# -- one case as a file -------------------------------------------------------

def to_doc(case, database):
    """``case`` (a :class:`ccl_health.db.store.CaseRecord`) whole, as a
    JSON document, with the database it was meant for (``database``, a
    path or URL: kept as :func:`~ccl_health.outputs.database_key` names
    it, never with a password)."""
    return {'format': FORMAT, 'database': database_key(database),
            'case': dataclasses.asdict(case)}


def from_doc(doc):
    """The :class:`CaseRecord` of a pending file's document; a document
    that is not one is :class:`CclHealthError` saying why."""
    from ccl_health.db import store
    if not isinstance(doc, dict) or doc.get('format') != FORMAT:
        raise CclHealthError(f'not a pending check (its format is not '
                             f'{FORMAT!r})')
    raw = doc.get('case')
    if not isinstance(raw, dict):
        raise CclHealthError('no case in it')
    fields = {f.name: f for f in dataclasses.fields(store.CaseRecord)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise CclHealthError(f'unknown field(s) {", ".join(unknown)}')
    for name in ('run_id', 'case_name', 'verdict', 'time'):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise CclHealthError(f'{name} missing or not text')
    for name in ('versions', 'env', 'detail'):
        if not isinstance(raw.get(name, {}), dict):
            raise CclHealthError(f'{name} is not a mapping')
    sizes = raw.get('sizes', [])
    size_fields = {f.name for f in dataclasses.fields(store.SizeRecord)}
    if not isinstance(sizes, list) or not all(
            isinstance(s, dict) and isinstance(s.get('size'), int) and
            set(s) <= size_fields for s in sizes):
        raise CclHealthError('sizes is not a list of sizes')
    case = store.CaseRecord(**dict(raw, sizes=[store.SizeRecord(**s)
                                               for s in sizes]))
    store.check_verdicts(case)
    return case


def meant_for(doc):
    """The database a pending file's document was meant for
    (:func:`~ccl_health.outputs.database_key`); None in a file of a version
    that did not say (recorded only where a person names the database:
    ``scripts/report ingest --pending``)."""
    meant = doc.get('database') if isinstance(doc, dict) else None
    if meant is not None and (not isinstance(meant, str) or not meant):
        raise CclHealthError('its database is not text')
    return meant


def read(path):
    """The case kept in the file ``path`` (:class:`CclHealthError` naming
    the file when it cannot be read)."""
    return load(path)[0]


def load(path):
    """``(case, database)`` of the file ``path``: the case kept and the
    database it was meant for (:func:`meant_for`); :class:`CclHealthError`
    naming the file when it cannot be read."""
    try:
        with open(path, encoding='utf-8') as fp:
            doc = json.load(fp)
        return from_doc(doc), meant_for(doc)
    except (OSError, ValueError, TypeError, CclHealthError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror \
            else err
        raise CclHealthError(f'{path}: cannot read the pending check: '
                             f'{why}') from None


# -- the folder ---------------------------------------------------------------

def files(folder):
    """The pending files of this user in ``folder``, oldest first:
    ``[(path, size)]`` (a file being written, ``.case-...tmp``, is not
    one)."""
    return [(path, st.st_size) for path, st in safefile.owned_oldest_first(
        folder, lambda name: name.startswith(PREFIX) and
        name.endswith(SUFFIX), stat.S_ISREG)]


def keep(case, folder, most, max_bytes, database):
    """Keep ``case``, meant for ``database`` (a path or URL), in a new
    file of ``folder`` (made private when missing); then drop the oldest
    others until at most ``most`` files of at most ``max_bytes`` in all
    are left.  Returns ``(path, dropped)``; :class:`CclHealthError` (one
    line) where it cannot be kept."""
    try:
        os.makedirs(os.path.dirname(folder), exist_ok=True)
    except OSError as err:
        raise CclHealthError(f'{folder}: cannot create the pending folder: '
                             f'{err.strerror or err}') from None
    safefile.private_dir(folder, 'pending folder')
    path = os.path.join(folder, identity.new(PREFIX, case.nodelist or 'host')
                        + SUFFIX)
    try:
        safefile.write_atomic(path, json.dumps(to_doc(case, database),
                                               default=str), mode=0o600)
    except (OSError, TypeError, ValueError) as err:
        raise CclHealthError(f'{path}: cannot keep the check: '
                             f'{getattr(err, "strerror", None) or err}') \
            from None
    return path, prune(folder, most, max_bytes, spare=path)


def prune(folder, most, max_bytes, spare=None):
    """Remove the oldest pending files of ``folder`` until at most
    ``most`` are left taking at most ``max_bytes`` (``spare`` stays).
    Returns the removed paths."""
    def remove(path):
        try:
            os.unlink(path)
        except FileNotFoundError:      # gone already: counted as removed
            pass
        except OSError:
            return False
        return True
    return safefile.prune_oldest(files(folder), most, max_bytes, remove,
                                 spare)


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:      # another drain of a shared folder
        pass


# -- recording them -----------------------------------------------------------

def drain(db, folder, deadline, recorded=None):
    """Record the pending files of ``folder`` meant for the open store
    ``db`` in it, oldest first, each in its own transaction and removed
    once it committed (its path appended to ``recorded``); a new one is
    started only while the time left before ``deadline``
    (``time.monotonic``) is more than twice the slowest write so far, and
    none while another process records the folder (:data:`LOCK`).  A file
    meant for another database (or one that does not say) is left for a
    check or an ingest that names it; a file that cannot be read or
    written is left (``ingest`` names it).  Returns ``recorded``."""
    recorded = [] if recorded is None else recorded
    found = files(folder)
    if not found:
        return recorded
    here = database_key(db.where)
    slowest = 0.05
    try:
        with safefile.locked(os.path.join(folder, LOCK),
                             blocking=False) as held:
            if not held:           # another check is recording them
                return recorded
            for path, _ in found:
                if deadline - time.monotonic() <= 2 * slowest:
                    break
                t = time.monotonic()
                try:
                    case, meant = load(path)
                    if meant != here:          # another database's
                        continue
                    db.add_case(case)
                except Exception:              # noqa: B902 the next one
                    continue
                finally:
                    slowest = max(slowest, time.monotonic() - t)
                _remove(path)
                recorded.append(path)
    except OSError:                # no lock file there: leave them
        pass
    return recorded


def ingest(db, folder, err=None):
    """Record the pending files of ``folder`` meant for ``db`` (and those
    of a version that did not say which database: a person named this
    one) in it, oldest first, with progress on ``err`` (stderr); a file
    meant for another database is left in place (how many, and for which
    database, said on ``err``); a file that cannot be read, or whose
    identity another check holds (:class:`ccl_health.identity.Taken`), is
    named with its path, kept and skipped.  Returns ``(recorded, bad)``."""
    err = err or sys.stderr
    done, bad, others = 0, [], {}
    if not files(folder):
        return done, bad
    here = database_key(db.where)
    with safefile.locked(os.path.join(folder, LOCK)):
        found = files(folder)  # what a hook left while we waited for it
        for i, (path, _) in enumerate(found, 1):
            try:
                case, meant = load(path)
                if meant not in (None, here):
                    others[meant] = others.get(meant, 0) + 1
                else:
                    db.add_case(case)
                    _remove(path)
                    done += 1
            except CclHealthError as why:
                bad.append(path)
                print(f'{why} (kept; skipped)', file=err, flush=True)
            if i % 100 == 0 or i == len(found):
                print(f'pending: {i} of {len(found)} file(s) read, {done} '
                      f'recorded', file=err, flush=True)
    for meant, n in sorted(others.items()):
        print(f'pending: {n} file(s) meant for {meant}, not {here}: left '
              f'in {folder} (scripts/report --db {shell.quote(meant)} '
              f'ingest --pending '
              f'records them)', file=err, flush=True)
    return done, bad
