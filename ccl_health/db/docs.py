"""A case's JSON documents (its environment, its versions, its detail):
inline in the case when short, else stored once, zlib-compressed, in the
table ``blobs`` (schema 7) and referenced by the case (issue 30).

The environment and versions of the health hook are the same on every
node of a machine for weeks: by reference they are stored once, not
34 million times.  A failure's detail (node state, WARN lines, every
probe) is compressed (about 8x) and referenced by its own case.  Readers
never see the difference: :func:`resolve` puts the text back under its
column's name (``env_json``, ``versions_json``, ``detail_json``)."""

import hashlib
import zlib

from ccl_health.db import inlists

#: a detail longer than this (characters) is stored in ``blobs`` (a
#: healthy hook check's short detail stays inline); an environment and a
#: versions document always are: they repeat from case to case
INLINE_MAX = 512
#: the documents stored by reference whatever their length
SHARED = ('env_json', 'versions_json')
#: the document columns of a case and their reference columns
DOCS = (('env_json', 'env_ref'), ('versions_json', 'versions_ref'),
        ('detail_json', 'detail_ref'))
#: zlib's level (6: its default; 9 gains ~2 % on these documents)
LEVEL = 6


def has_blobs(store):
    return store.schema_version() >= 7


class ByDigest(str):
    """The reference of a document whose blob id is not known here: its
    digest; the case's insert reads the id (:func:`mark`) of the blob that
    :func:`put` stored just before in the same transaction."""


def mark(value):
    """The SQL placeholder of a value of a case's insert: a
    :class:`ByDigest` reference is its blob's id, read by the statement
    itself (no round trip to learn it)."""
    return '(SELECT id FROM blobs WHERE digest = ?)' \
        if isinstance(value, ByDigest) else '?'


def param(value):
    """The parameter of ``value`` in a case's insert (of :func:`mark`)."""
    return str(value) if isinstance(value, ByDigest) else value


def put(store, column, text):
    """``(inline text, reference)`` of the document ``text`` of the case
    column ``column`` (either may be None): in ``blobs`` when it is shared
    (:data:`SHARED`) or long, else inline.  The reference is the blob's
    id where this store knows it, else a :class:`ByDigest` after the blob
    is stored (never replaced: the same digest is the same text).  Blobs
    are never deleted: the ids this store saw are remembered
    (:func:`stored`)."""
    if text is None or not has_blobs(store) or (
            column not in SHARED and len(text) <= INLINE_MAX):
        return text, None
    raw = text.encode('utf-8')
    digest = hashlib.sha256(raw).hexdigest()
    seen = store.__dict__.setdefault('_blob_ids', {})
    if digest in seen:
        return None, seen[digest]
    store.execute('INSERT INTO blobs (digest, body) VALUES (?, ?) ON '
                  'CONFLICT (digest) DO NOTHING',
                  (digest, zlib.compress(raw, LEVEL)))
    return None, ByDigest(digest)


def put_all(store, row):
    """Store the documents of the case row ``row`` (a dict of its
    columns: each document's text is replaced by what stays inline);
    returns ``{column: reference}``."""
    refs = {}
    for col, _ in DOCS:
        row[col], refs[col] = put(store, col, row.get(col))
    return refs


def stored(store, refs, row):
    """Remember the blob ids of the :class:`ByDigest` references ``refs``
    (of :func:`put_all`) that the case row ``row`` (its ``*_ref``
    columns, as inserted) now holds."""
    seen = store.__dict__.setdefault('_blob_ids', {})
    for col, ref in DOCS:
        if isinstance(refs.get(col), ByDigest) and row.get(ref) is not None \
                and len(seen) < 10000:
            seen[str(refs[col])] = row[ref]


def text_of(body):
    """The text of a stored blob body (bytes, or a memoryview from
    PostgreSQL)."""
    return zlib.decompress(bytes(body)).decode('utf-8')


def resolve(store, rows):
    """Put each row's referenced documents back as text (in place; rows
    are dicts with a ``*_ref`` column); returns ``rows``."""
    ids = {r[ref] for r in rows for _, ref in DOCS
           if r.get(ref) is not None}
    if not ids:
        return rows
    bodies = {}
    ids = sorted(ids)
    for b in inlists.query_in(
            store, 'SELECT id, body FROM blobs WHERE id IN (?...)', ids):
        bodies[b['id']] = text_of(b['body'])
    for r in rows:
        for col, ref in DOCS:
            if r.get(ref) is not None:
                r[col] = bodies.get(r[ref])
    return rows


def keep_env(store, case):
    """``case`` with the ``env`` keys already stored for it and not given
    again (the check writes the node state, the run report's later update
    of the case has only the job's variables)."""
    import dataclasses
    import json
    if not case.env:
        return case
    old = resolve(store, store.query(
        'SELECT env_json, env_ref FROM cases WHERE run_id = ? AND '
        'case_name = ?', (case.run_id, case.case_name)))
    if not old or not old[0]['env_json']:
        return case
    try:
        kept = json.loads(old[0]['env_json'])
    except ValueError:
        return case
    if not isinstance(kept, dict) or set(kept) <= set(case.env):
        return case
    return dataclasses.replace(case, env={**kept, **case.env})
