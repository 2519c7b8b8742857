"""The news ledger of a database (tables ``news_told`` and
``news_nights``): what each nightly's mail told, per key and size, and
which nightly runs were told (:mod:`ccl_health.news` decides what that
means).  A nightly appends what it tells, prints it and commits, under
:func:`held`: one teller of a system:partition at a time for every
nightly of the database, whatever its publish folder."""

import contextlib
import datetime

from ccl_health.db.store import NIGHT_COLUMNS, TOLD_COLUMNS


def told(store, system=None):
    """The ledger rows (dicts), oldest first (``system``: of that system
    only); none in a database older than schema 4."""
    if store.schema_version() < 4:
        return []
    if system is None:
        return store.query('SELECT * FROM news_told ORDER BY id')
    return store.query('SELECT * FROM news_told WHERE system = ? ORDER BY '
                       'id', (system,))


def told_nights(store, system, partition):
    """The nightly runs whose news was told for ``system`` and
    ``partition`` ('' for a whole system), oldest first."""
    if store.schema_version() < 4:
        return []
    return store.query('SELECT * FROM news_nights WHERE system = ? AND '
                       'partition = ? ORDER BY id', (system, partition))


def record(store, rows, nights, told_in):
    """Append what a mail told, in one transaction: ``rows`` (dicts of
    :data:`~ccl_health.db.store.TOLD_COLUMNS`) and ``nights`` (dicts of
    :data:`~ccl_health.db.store.NIGHT_COLUMNS`), told by the nightly run
    ``told_in``."""
    with store.transaction():
        append(store, rows, nights, told_in)


def append(store, rows, nights, told_in):
    """:func:`record` inside the caller's transaction (:func:`held`:
    appended, printed, then committed)."""
    at = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec='microseconds')
    for table, cols, items in (('news_told', TOLD_COLUMNS, rows),
                               ('news_nights', NIGHT_COLUMNS, nights)):
        names = cols + ('told_in', 'told_at')
        for item in items:
            store.execute(
                f'INSERT INTO {table} ({", ".join(names)}) VALUES '
                f'({", ".join("?" * len(names))})',
                tuple(item.get(c) for c in cols) + (told_in, at))


def mark(store):
    """What the ledger holds, as one comparable value (the newest row of
    each table): a change between two reads means another nightly told
    something meanwhile."""
    if store.schema_version() < 4:
        return None
    return tuple(store.query(f'SELECT MAX(id) AS m FROM {t}')[0]['m']
                 for t in ('news_told', 'news_nights'))


@contextlib.contextmanager
def held(store, system, partition):
    """One teller of the news of ``system:partition`` at a time, for every
    nightly of this database whatever its publish folder: a write
    transaction (SQLite: the database's one writer; PostgreSQL: and an
    advisory lock of the key, held to its end).  What is told is appended
    in it (:func:`append`), printed, then committed as it ends: a nightly
    killed before it printed told nothing and recorded nothing."""
    with store.transaction():
        if store.kind == 'postgresql':
            store.execute('SELECT pg_advisory_xact_lock(hashtext(?))',
                          (f'ccl-health news {system}:{partition}',))
        yield store
