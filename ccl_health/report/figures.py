"""The page's figures as files beside it, each drawn only when what it
shows changed.

A figure is named by the page (``trend_<series>_1GiB.png``, what the page
links) and kept in a cache folder under the content hash of what it shows
(the data handed to the drawing function, the drawing code and matplotlib's
version): ``<cache>/<name>-<hash>.png``.  A page whose figure's data did
not change since the last page links (or copies) the cached file instead of
drawing it again, so a nightly re-render costs only what changed.  The
cache is the page folder's ``.figures`` unless the caller shares one between
pages (the nightly: one folder per night, one cache); files of the cache
unused for :data:`CACHE_DAYS` days are removed.

A small page (at most :data:`INLINE_FIGURES` figures) also carries its
figures inline (PNG as base64), a single file to mail or attach; a bigger
one links them (``inline`` forces either)."""

import base64
import dataclasses
import functools
import hashlib
import os
import tempfile
import time

from ccl_health import CclHealthError, safefile

#: a page of at most this many figures carries them inline too
INLINE_FIGURES = 12
#: cached figures unused this long are removed
CACHE_DAYS = 14
#: the cache folder in the page's folder (when no other is given)
CACHE = '.figures'
#: the list of figure files the page folder holds (removed when a later
#: page no longer shows them)
MANIFEST = '.figures.list'


@dataclasses.dataclass
class Figure:
    name: str             # file name of the PNG, beside the page
    caption: str
    path: str             # the cached file (its content hash in its name)
    inline: bool = False

    @property
    def png(self):
        with open(self.path, 'rb') as fp:
            return fp.read()

    @property
    def src(self):
        """What the page's ``<img src>`` says: the file, or the PNG inline."""
        if self.inline:
            return 'data:image/png;base64,' + base64.b64encode(
                self.png).decode()
        return self.name


@functools.lru_cache(maxsize=1)
def _code_digest():
    """The drawing code and matplotlib's version: a change of either
    draws every figure again (its version read from its installed
    metadata: a page whose figures are all cached never imports it)."""
    from importlib import metadata
    from ccl_health.report import plots
    h = hashlib.blake2b(digest_size=16)
    with open(plots.__file__, 'rb') as fp:
        h.update(fp.read())
    try:
        version = metadata.version('matplotlib')
    except metadata.PackageNotFoundError:
        import matplotlib
        version = matplotlib.__version__
    h.update(version.encode())
    return h.digest()


def digest(*data):
    """The content hash of ``data``: anything whose ``repr`` says what it
    is (tuples, numbers, strings, lists and dicts of them: the rows a
    figure is drawn from)."""
    h = hashlib.blake2b(_code_digest(), digest_size=10)
    for d in data:
        h.update(repr(d).encode())
        h.update(b'\0')
    return h.hexdigest()


class Figures:
    """The figures of one page written into ``outdir``: :meth:`add` draws
    a figure (or finds it in the cache), :meth:`finish` decides inline or
    linked and removes what an earlier page left that this one does not
    show."""

    def __init__(self, outdir, cache=None, inline=None):
        self.outdir = outdir
        self.cache = cache or os.path.join(outdir, CACHE)
        self.inline = inline
        self.figures = []
        self.drawn = self.reused = 0
        try:
            os.makedirs(self.cache, exist_ok=True)
        except OSError as err:
            raise CclHealthError(f'{self.cache}: cannot create the figures\' '
                                 f'cache: {err.strerror or err}') from None

    def add(self, name, caption, draw, *data):
        """The figure ``name`` showing ``data``: ``draw()`` gives its PNG
        bytes (drawn from ``data`` and nothing else), called only when the
        cache has no figure of this name and content."""
        stem = name[:-4] if name.endswith('.png') else name
        cached = os.path.join(self.cache, f'{stem}-{digest(*data)}.png')
        if os.path.exists(cached):
            self.reused += 1
            try:
                os.utime(cached)
            except OSError:
                pass
        else:
            write_whole(cached, draw())
            self.drawn += 1
        _place(cached, os.path.join(self.outdir, name))
        fig = Figure(name, caption, cached)
        self.figures.append(fig)
        return fig

    def finish(self):
        """Inline or linked (:data:`INLINE_FIGURES`); the files of an
        earlier page in this folder that this one does not show removed;
        the cache's files unused for :data:`CACHE_DAYS` removed."""
        inline = (len(self.figures) <= INLINE_FIGURES
                  if self.inline is None else self.inline)
        for f in self.figures:
            f.inline = inline
        names = {f.name for f in self.figures}
        listing = os.path.join(self.outdir, MANIFEST)
        try:
            with open(listing, encoding='utf-8') as fp:
                before = set(fp.read().split())
        except OSError:
            before = set()
        for old in before - names:
            if os.path.basename(old) == old and old.endswith('.png'):
                try:
                    os.remove(os.path.join(self.outdir, old))
                except OSError:
                    pass
        write_whole(listing, ('\n'.join(sorted(names)) + '\n').encode())
        limit = time.time() - CACHE_DAYS * 86400
        try:
            entries = list(os.scandir(self.cache))
        except OSError:
            entries = []
        for e in entries:
            try:
                if e.name.endswith(('.png', '.json')) and \
                        e.stat().st_mtime < limit:
                    os.remove(e.path)
            except OSError:
                pass


def write_whole(path, data):
    """``data`` into ``path``, whole or not at all (a temporary file
    renamed)."""
    folder = os.path.dirname(path) or '.'
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix='.tmp-')
        with os.fdopen(fd, 'wb') as fp:
            fp.write(data)
        os.replace(tmp, path)
    except OSError as err:
        raise CclHealthError(f'{path}: cannot write: '
                             f'{err.strerror or err}') from None


def _place(cached, path):
    """The cached figure as ``path``: a hard link (no copy), else a copy;
    replacing what was there."""
    try:
        if os.path.samefile(cached, path):
            return              # the same file already (a rename would
    except OSError:             # leave both names)
        pass
    folder = os.path.dirname(path) or '.'
    # a random temporary name (a fixed one could be a planted link that
    # the copy would write through)
    tmp = os.path.join(folder, f'.tmp-{os.urandom(8).hex()}-'
                       f'{os.path.basename(path)}')
    try:
        try:
            os.link(cached, tmp)
        except OSError:
            with open(cached, 'rb') as fp:
                safefile.write_atomic(path, fp.read())
        else:
            try:
                os.replace(tmp, path)
            except OSError:
                os.unlink(tmp)
                raise
    except OSError as err:
        raise CclHealthError(f'{path}: cannot write the figure: '
                             f'{err.strerror or err}') from None
