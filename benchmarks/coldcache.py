"""A database's files out of the page cache before a cold measure
(``db_scale``, ``page_month``, ``nightly_first_night``):
``posix_fadvise(DONTNEED)``, no root needed, after an ``fsync`` (the kernel
drops only clean pages: a copy just written would stay in memory)."""

import os


def uncache(path):
    """The files at ``path`` (a file or a folder) dropped from the page
    cache; a file that cannot be opened is left."""
    files = [path] if os.path.isfile(path) else [
        os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def sqlite(path):
    """A SQLite database ``path`` and its ``-wal`` / ``-shm`` dropped."""
    for ext in ('', '-wal', '-shm'):
        uncache(path + ext)
