"""The verdict groups (:mod:`ccl_health.judge.verdicts`) as SQL lists:
the one way a query names a group.  Below every other module of the
database package (the schema's index, the reads, retention and the kept
days all use it), so it imports nothing of it."""

from ccl_health.judge.verdicts import GOOD, Verdict


def verdict_list(verdicts):
    """A group of verdicts as an SQL list, ``('pass', 'skipped')``, in the
    order given (each checked to be a verdict, so nothing else is ever
    spelled into SQL; an index and the queries that use it spell it
    alike)."""
    return '(' + ', '.join(f"'{Verdict.parse(v).value}'"
                           for v in verdicts) + ')'


#: the good verdicts as SQL: the cases not in it are those of the partial
#: index ``cases_bad`` (a query names them so to use it)
GOOD_SQL = verdict_list(GOOD)
