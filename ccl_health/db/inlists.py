"""Reads of many ids or keys at once: ``IN (...)`` lists of at most
:data:`BATCH` values a query (SQLite's and PostgreSQL's bound parameters
kept few), one way for every reader of the database."""

#: values a query's ``IN`` list holds at most
BATCH = 500

#: what a query's text holds where its ``IN`` list goes
LIST = '(?...)'


def batches(values, size=BATCH):
    """``values`` as lists of at most ``size``, in their order."""
    values = list(values)
    return [values[i:i + size] for i in range(0, len(values), size)]


def marks(n):
    """``n`` bound parameters, comma-separated."""
    return ', '.join('?' * n)


def query_in(store, sql, values, before=(), after=()):
    """The rows of ``sql`` for every value of ``values``: its ``(?...)``
    made an ``IN`` list of a batch of them, a query a batch (the bound
    parameters: ``before``, the batch, ``after``); rows in batch order."""
    if LIST not in sql:
        raise ValueError(f'no {LIST} in {sql!r}')
    out = []
    for part in batches(values):
        out += store.query(sql.replace(LIST, f'({marks(len(part))})'),
                           tuple(before) + tuple(part) + tuple(after))
    return out
