"""A record's identity: the one function that makes a run id (issue 37).

Every door names what it records with :func:`new`: a health check
(``health-``), a sweep run (``scripts/run``: no prefix, or the
``$CCL_HEALTH_RUN_ID`` its caller gave), a nightly (``nightly-``), a fleet
run (``fleet-`` in the database, its folder without), and what is named
after a check (its kept evidence folder, its pending file).  An identity
is

    <prefix><UTC time to the microsecond>Z-<host>-<pid>-<count>-<random>

* unique: two checks of one host in the same microsecond differ by their
  process; two identities of one process by its count; two hosts that
  share a name (containers) by 32 random bits;
* sortable by time: the time is fixed-width, so identities of one prefix
  sort as they were made (what reads ``ORDER BY run_id`` and the prefix
  filters, ``health-%`` and ``nightly-%``, rely on); the identities of
  older versions (``health-2026-11-28T19:54:22+00:00-host``,
  ``nightly-20261128T195422-host-pid``) sort before the new ones of the
  same second and after those of earlier seconds;
* never reused: the store refuses to let a different record take an
  identity already recorded (:meth:`ccl_health.db.store.Store.add_case`).

A small utility (below the database and every door)."""

import datetime
import itertools
import os
import socket

from ccl_health import CclHealthError

#: the time of an identity: UTC to the microsecond, fixed width
STAMP = '%Y%m%dT%H%M%S.%fZ'
#: the longest host part of an identity
HOST_MAX = 64

_COUNT = itertools.count()


def stamp(when=None):
    """``when`` (an aware :class:`datetime.datetime`; default now) as the
    time of an identity: ``20261128T195422.123456Z``."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    return when.astimezone(datetime.timezone.utc).strftime(STAMP)


def host_part(host=None):
    """``host`` (default this host's name) as a part of an identity and of
    a file name: letters, digits, ``-`` and ``.`` kept, anything else
    ``_``, at most :data:`HOST_MAX` characters."""
    host = host or socket.gethostname() or 'host'
    return ''.join(c if c.isascii() and (c.isalnum() or c in '-.') else '_'
                   for c in host)[:HOST_MAX]


def new(prefix='', host=None, when=None):
    """A new identity: ``prefix``, the time (:func:`stamp`), ``host``
    (:func:`host_part`), this process, its count and random bits."""
    return (f'{prefix}{stamp(when)}-{host_part(host)}-{os.getpid()}-'
            f'{next(_COUNT)}-{os.urandom(4).hex()}')


# -- never reused or overwritten -------------------------------------------

class Taken(CclHealthError):
    """A record's identity (its run id and case name) already holds
    another check: the store never overwrites it with this one."""


#: when a case written again under a stored case's identity updates it
#: (SQL over the stored ``cases.`` and the written ``excluded.``): a door's
#: part of the same run (the check's write, then the run report's), or the
#: same check written again (a pending record drained twice, a write given
#: up on that committed later: the same time, verdict and reason).  Only a
#: case that carries the time it was measured is held to it
SAME_RECORD_SQL = (
    "COALESCE(cases.source, '') <> COALESCE(excluded.source, '') OR "
    "(cases.time = excluded.time AND "
    "cases.verdict = excluded.verdict AND COALESCE(cases.reason, '') = "
    "COALESCE(excluded.reason, ''))")


def same_record(stored, case):
    """:data:`SAME_RECORD_SQL` of a stored row (a dict; None: nothing
    stored) and a case written again (a ``CaseRecord``)."""
    return stored is None or (stored['source'] or '') != (
        case.source or '') or (
        stored['time'] == case.time and stored['verdict'] == str(
            case.verdict) and (stored['reason'] or '') == (case.reason or ''))


def taken(case, stored=None):
    """The :class:`Taken` error of ``case``, whose identity ``stored``
    (a row: its time and verdict) holds."""
    was = f' ({stored["verdict"]} at {stored["time"]})' if stored else ''
    return Taken(f'{case.run_id} {case.case_name}: already recorded by '
                 f'another check{was}; not overwritten by this one '
                 f'({case.verdict} at {case.time})')
