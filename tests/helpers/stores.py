"""A SQLite store as the tests see it from outside: scripts/report's
command, another writer holding the database, the cases it holds."""

import sqlite3
import sys

from ccl_health.db import schema, store

#: scripts/report's database commands, as this Python runs them
REPORT = [sys.executable, '-m', 'ccl_health.cli', '--prog', 'scripts/report',
          'db']


def locked(path):
    """Another writer holding the SQLite database ``path`` (BEGIN
    IMMEDIATE): readers go on, every other writer waits."""
    with store.open_store(str(path)):
        pass
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute('BEGIN IMMEDIATE')
    return conn


def case_rows(path):
    """(id, run_id, time, verdict) of every case of the database
    ``path``, oldest first."""
    with store.open_store(str(path), readonly=True) as db:
        return db.query('SELECT id, run_id, time, verdict FROM cases ORDER '
                        'BY time, run_id')


def old_database(path, version):
    """A SQLite database at schema ``version`` as an older ccl-health left
    it: the ``meta`` table and the migrations 1 to ``version`` of
    :mod:`ccl_health.db.schema` (as SQLite takes them), committed.  Returns
    the open connection, for the rows a test writes as that version did
    (the caller commits and closes it)."""
    conn = sqlite3.connect(str(path))
    conn.execute('CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)')
    for v in range(1, version + 1):
        for stmt in schema._MIGRATIONS[v]:
            conn.execute(stmt.replace('{pk}', 'INTEGER PRIMARY KEY '
                                      'AUTOINCREMENT'))
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)",
                 (str(version),))
    conn.commit()
    return conn
