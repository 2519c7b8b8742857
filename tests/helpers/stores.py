"""A SQLite store as the tests see it from outside: scripts/report's
command, another writer holding the database, the cases it holds."""

import sqlite3
import sys

from ccl_health.db import store

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
