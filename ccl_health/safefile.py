"""Files and folders another local user cannot turn against the suite: the
one place that writes a file atomically, opens a log for append, makes a
symbolic link, and creates or checks a folder under a shared directory.

* :func:`write_atomic` (:func:`write_json`): a new file made exclusively
  (``mkstemp``: ``O_CREAT | O_EXCL``, a random name, mode 0600 until it is
  complete) in the target's own folder, flushed, then renamed over the
  target.  A symbolic link or file planted at a fixed temporary name
  (``.index.html.tmp``) is never written through: no fixed temporary name
  is used.  ``os.replace`` replaces a link at the target itself, never
  the link's target.
* :func:`open_append`: ``O_NOFOLLOW``; only a regular file; the same for
  a lock file (:func:`locked`).
* :func:`symlink_atomic`: the link made under a random name, then renamed
  over the old one.
* :func:`own_dir`: a folder the suite writes in and reads back from (a
  fleet run's folder, its state's): made where missing, else used only
  when it (and the folders above it, to a given one) is a real folder of
  this user; :func:`read_own` reads back a file only when it is a
  regular file of this user (never through a link); :func:`open_new`
  makes a file exclusively (a step's output, read back through the same
  descriptor).
* :func:`private_dir`: a folder with a stable name (the same one every run)
  under a shared directory (``/tmp``): made mode 0700, or, if it is there
  already, used only when it is a real folder (not a symbolic link) owned
  by this user and writable by no one else; otherwise one line
  (:class:`ccl_health.CclHealthError`).  Where no stable name is needed
  :func:`tempfile.mkdtemp` is the rule.
"""

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile

from ccl_health import CclHealthError


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(folder):
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def write_atomic(path, data, mode=None):
    """Replace the file at ``path`` with ``data`` (``str`` or ``bytes``)
    atomically: a reader sees the old file or the new one, never a part,
    and nothing is written through a link.  ``mode``: the new file's
    permissions (default: the old file's, else 0666 less the umask)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    if mode is None:
        try:
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) \
                else None
        except FileNotFoundError:
            pass
        if mode is None:
            mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=folder, suffix='.tmp',
                               prefix=f'.{os.path.basename(path)}.')
    try:
        with os.fdopen(fd, 'wb' if isinstance(data, bytes) else 'w',
                       **({} if isinstance(data, bytes)
                          else {'encoding': 'utf-8'})) as fp:
            fp.write(data)
            fp.flush()
            os.fsync(fp.fileno())
            os.fchmod(fp.fileno(), mode)
    except BaseException:
        _unlink(tmp)
        raise
    _replace(tmp, path)
    _fsync_dir(folder)


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _replace(tmp, path):
    """Rename ``tmp`` over ``path`` (one rename: atomic); ``tmp`` is
    removed when it cannot be."""
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def write_json(path, doc, indent=1):
    """``doc`` as JSON into ``path`` (:func:`write_atomic`)."""
    write_atomic(path, json.dumps(doc, indent=indent) + '\n')


def open_append(path, binary=False):
    """``path`` opened for append, created (0666 less the umask) when
    missing; never through a symbolic link (``O_NOFOLLOW``), and only a
    regular file (a FIFO or device planted there is refused)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | \
        getattr(os, 'O_CLOEXEC', 0) | getattr(os, 'O_NONBLOCK', 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP and os.path.islink(path):
            raise OSError(err.errno, 'a symbolic link is there: not '
                          'written through it', path) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, 'not a regular file', path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, 'ab' if binary else 'a')
    except BaseException:
        os.close(fd)
        raise


def symlink_atomic(target, link):
    """Make ``link`` a symbolic link to ``target``, replacing what is at
    ``link`` in one rename; the new link is made under a random name
    first (never a fixed ``link.tmp`` that another user could hold)."""
    folder = os.path.dirname(os.path.abspath(link))
    for _ in range(100):
        tmp = os.path.join(folder, f'.{os.path.basename(link)}.'
                           f'{os.urandom(6).hex()}.tmp')
        try:
            os.symlink(target, tmp)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(f'{folder}: cannot make a temporary link')
    _replace(tmp, link)


def unsafe_reason(path, st=None):
    """Why the folder ``path`` is not ours alone ('' when it is): a
    symbolic link, not a folder, another owner, or writable by the group
    or others."""
    try:
        st = st or os.lstat(path)
    except FileNotFoundError:
        return 'it does not exist'
    if stat.S_ISLNK(st.st_mode):
        return 'it is a symbolic link'
    if not stat.S_ISDIR(st.st_mode):
        return 'it is not a folder'
    if st.st_uid != os.getuid():
        return f'it is owned by uid {st.st_uid}, not {os.getuid()}'
    if st.st_mode & 0o022:
        return (f'its mode {stat.S_IMODE(st.st_mode):o} lets others write '
                f'in it')
    return ''


def private_dir(path, what='folder'):
    """The folder ``path`` (a stable name under a shared directory), made
    mode 0700 when missing; one that is there already is used only when it
    is ours alone (:func:`unsafe_reason`), else :class:`CclHealthError`
    with one line.  Returns ``path``."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as err:
        raise CclHealthError(f'{path}: cannot create the {what}: '
                             f'{err.strerror or err}') from None
    why = unsafe_reason(path)
    if why:
        raise CclHealthError(
            f'{path}: not used as the {what}: {why} (another user may have '
            f'made it; remove it, or choose another path)')
    return path


def _refuse_dir(path, st, what):
    if stat.S_ISLNK(st.st_mode):
        why = 'it is a symbolic link'
    elif not stat.S_ISDIR(st.st_mode):
        why = 'it is not a folder'
    elif st.st_uid != os.geteuid():
        why = f'it is owned by uid {st.st_uid}, not {os.geteuid()}'
    else:
        return
    raise CclHealthError(
        f'{path}: not used as the {what}: {why} (another user could plant '
        f'links in it or swap its files; remove it, or choose another '
        f'output folder)')


def own_dir(path, what='folder', below=None):
    """The folder ``path``, made with its parents where missing; it, and
    every folder between ``below`` (not itself) and it, is used only when
    it is a real folder (not a symbolic link) of this user: in another
    user's folder a file the suite writes could be a planted link, and
    one it reads back could be swapped (:class:`CclHealthError`, one
    line).  Returns ``path``."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise CclHealthError(f'{path}: cannot create the {what}: '
                             f'{err.strerror or err}') from None
    path = os.path.abspath(path)
    stop = os.path.abspath(below) if below else None
    chain, p = [], path
    while True:
        chain.append(p)
        up = os.path.dirname(p)
        if stop is None or p == stop or up == p or \
                not p.startswith(stop + os.sep):
            break
        p = up
    if stop is not None and chain[-1] == stop:
        chain.pop()
    for p in reversed(chain):
        _refuse_dir(p, os.lstat(p), what)
    return path


def read_own(path, what='file'):
    """The text of ``path`` (None where it is missing), read only when it
    is a regular file of this user, never through a link
    (``O_NOFOLLOW``): one planted by another user is
    :class:`CclHealthError`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                     getattr(os, 'O_CLOEXEC', 0))
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise CclHealthError(f'{path}: not read as the {what}: it is a '
                                 f'symbolic link') from None
        raise
    with os.fdopen(fd, 'rb') as fp:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CclHealthError(f'{path}: not read as the {what}: not a '
                                 f'regular file')
        if st.st_uid != os.geteuid():
            raise CclHealthError(f'{path}: not read as the {what}: it is '
                                 f'owned by uid {st.st_uid}, not '
                                 f'{os.geteuid()} (another user may have '
                                 f'planted it)')
        return fp.read().decode('utf-8', errors='replace')


def open_new(path, binary=False):
    """``path`` made anew for writing and reading back (``w+``), mode
    0600: what is at that name is removed first, then the file is made
    exclusively (``O_EXCL | O_NOFOLLOW``): never a planted link or file.
    Read it back through the same object (``seek(0)``): a file swapped
    in at the name meanwhile is never what is read."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                 getattr(os, 'O_CLOEXEC', 0), 0o600)
    return os.fdopen(fd, 'w+b' if binary else 'w+')


@contextlib.contextmanager
def locked(path, blocking=True):
    """Hold ``flock`` on the lock file ``path`` (made when missing, never
    through a symbolic link: :func:`open_append`).  Yields True while held;
    with ``blocking=False`` yields False at once when another process
    holds it."""
    fp = open_append(path)
    try:
        try:
            fcntl.flock(fp.fileno(), fcntl.LOCK_EX |
                        (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fp.fileno(), fcntl.LOCK_UN)
    finally:
        fp.close()


def owned_oldest_first(folder, wanted, kind):
    """``[(path, stat)]`` of the entries of ``folder`` that this user owns,
    whose name ``wanted(name)`` accepts and whose ``lstat`` is of
    ``kind`` (``stat.S_ISREG``, ``stat.S_ISDIR``; a link never is), oldest
    first (by time, then name); none where the folder cannot be read."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = []
    for name in names:
        if not wanted(name):
            continue
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if kind(st.st_mode) and st.st_uid == os.getuid():
            found.append((st.st_mtime, name, path, st))
    found.sort(key=lambda f: f[:2])
    return [(path, st) for _, _, path, st in found]


def prune_oldest(found, most, max_bytes, remove, spare=None):
    """Remove entries of ``found`` (``[(path, size)]``, oldest first) from
    the oldest until at most ``most`` are left taking at most
    ``max_bytes``; ``spare`` is never removed, nor one that ``remove(path)``
    says (False) it could not remove.  Returns the removed paths."""
    count, total = len(found), sum(size for _, size in found)
    removed = []
    for path, size in found:
        if count <= most and total <= max_bytes:
            break
        if path == spare or not remove(path):
            continue
        count, total = count - 1, total - size
        removed.append(path)
    return removed
