"""What writing a case needs, imported before the write: the health hook
knows its database when it starts and imports the driver and the judge
while its probe runs, so its bounded write at the end does not pay for it
(about 80 ms of CPU for psycopg and the judge)."""

from ccl_health import CclHealthError, dburl


def preload(url):
    """Import what writing a case to ``url`` needs (its driver, the
    documents and the judging state: ~80 ms of CPU for psycopg and the
    judge), so that a writer that knows its database early (the health
    hook, while its probe runs: :func:`preload_in_background`) does not
    pay it inside its bounded write.  Errors are left to the write."""
    try:
        if dburl.is_postgres(str(url or '')):
            import psycopg  # noqa: F401
            import psycopg.pq  # noqa: F401
        from ccl_health.db import docs, windowfindings  # noqa: F401
        from ccl_health.db import keystate as state  # noqa: F401
    except (ImportError, CclHealthError):
        pass


def preload_in_background(url):
    """:func:`preload` in a daemon thread (the caller never waits for
    it: a write that comes first imports what it needs itself)."""
    import threading
    threading.Thread(target=preload, args=(url,), daemon=True,
                     name='ccl-health-preload').start()
