"""The environment variables NCCL, RCCL, aws-ofi-nccl and libfabric know,
read from their upstream sources (``env_vars.tsv`` beside this module,
shipped with the package): a variable a site sets that none of them reads
is a typo the library ignores silently (``NCCL_NET_GDR_LEVLE``).

Columns: ``name``, ``source`` (``NVIDIA/nccl``, ``ROCm/rccl``,
``aws/aws-ofi-nccl``, ``ofiwg/libfabric``, ``NVIDIA/nccl-tests``: what its
programs read), ``versions`` (the tags or
commits read that know it, comma-separated) and ``where`` (``path:line``
of the first read).  The table is built by
the test suite's ``read_sources.py`` (its envvars fixtures) from the sources of the
mirror (``builders/sources.yaml``) and NVIDIA/nccl's tags; nothing here
reads it."""

import csv
import difflib
import functools
import os

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     'env_vars.tsv')
#: the prefixes of the variables these libraries own: a name with one of
#: them that the table does not hold is unknown
PREFIXES = ('NCCL_', 'RCCL_', 'OFI_NCCL_', 'FI_')


@functools.lru_cache(maxsize=None)
def known():
    """``{name: [(source, versions), ...]}`` of the table."""
    out = {}
    with open(TABLE, newline='') as fp:
        for row in csv.DictReader(fp, delimiter='\t'):
            out.setdefault(row['name'], []).append(
                (row['source'], row['versions']))
    return out


@functools.lru_cache(maxsize=None)
def sources():
    """``source versions; ...``: what the table was read from."""
    seen = {}
    for rows in known().values():
        for source, versions in rows:
            seen.setdefault(source, set()).update(versions.split(','))
    return '; '.join(f'{s} {", ".join(sorted(v))}'
                     for s, v in sorted(seen.items()))


def unknown(name):
    """None where ``name`` is known or not one of these libraries' (no
    :data:`PREFIXES`), else the reason, with the nearest known name."""
    if not name.startswith(PREFIXES) or name in known():
        return None
    near = difflib.get_close_matches(name, list(known()), n=1, cutoff=0.8)
    return (f'{name} is read by none of {sources()} (the library ignores '
            f'it)' + (f'; did you mean {near[0]}?' if near else ''))
