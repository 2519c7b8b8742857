"""The one way readers batch ``IN`` lists (ccl_health.db.inlists): every
value asked is read, in batches of at most 500 bound values, with the
parameters before and after each batch in their places."""

import sqlite3

import pytest

from ccl_health.db import inlists


class _Counting:
    """A store's ``query`` over an in-memory SQLite table, counting the
    queries and the most parameters one was given."""

    def __init__(self, n):
        self.conn = sqlite3.connect(':memory:')
        self.conn.execute('CREATE TABLE t (id INTEGER, kind TEXT, size INT)')
        self.conn.executemany('INSERT INTO t VALUES (?, ?, ?)',
                              [(i, 'a' if i % 3 else 'b', i % 7)
                               for i in range(n)])
        self.queries, self.most = 0, 0

    def query(self, sql, params=()):
        self.queries += 1
        self.most = max(self.most, len(params))
        cur = self.conn.execute(sql, params)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


@pytest.mark.parametrize('n', [0, 1, 499, 500, 501, 1201])
def test_every_value_read_in_batches_of_500(n):
    store = _Counting(2000)
    ids = list(range(0, 2 * n, 2))
    got = inlists.query_in(store, 'SELECT id FROM t WHERE id IN (?...)',
                           ids)
    # the oracle: the same rows picked in Python from the whole table
    want = [r[0] for r in store.conn.execute('SELECT id FROM t')
            if r[0] in set(ids)]
    assert sorted(r['id'] for r in got) == sorted(want)
    assert store.queries == -(-n // 500)
    assert store.most <= 500


def test_parameters_before_and_after_the_list_keep_their_places():
    store = _Counting(1500)
    ids = list(range(1300))
    got = inlists.query_in(
        store, 'SELECT id FROM t WHERE kind = ? AND id IN (?...) AND '
        'size = ?', ids, before=('b',), after=(3,))
    want = [i for i in ids if i % 3 == 0 and i % 7 == 3]
    assert sorted(r['id'] for r in got) == want
    assert store.queries == 3 and store.most == 502


def test_a_query_without_its_list_is_refused():
    with pytest.raises(ValueError, match=r'\(\?\.\.\.\)'):
        inlists.query_in(_Counting(1), 'SELECT id FROM t WHERE id IN (?)',
                         [1])


def test_batches_keep_the_order():
    assert inlists.batches(range(7), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert inlists.batches([]) == []
    assert inlists.marks(3) == '?, ?, ?'
