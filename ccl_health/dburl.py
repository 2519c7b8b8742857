"""The database a user names: a SQLite file (a path, or ``sqlite:///path``)
or a PostgreSQL URL (``postgresql://`` / ``postgres://``).  Any other
``scheme://`` is an error, never a SQLite file named after the URL; and a
URL is shown only through :func:`shown`, which never prints a password
(``docs/database.md``: keep it in ``PGPASSFILE`` or a service file)."""

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ccl_health import CclHealthError

POSTGRES_SCHEMES = ('postgresql', 'postgres')
_SCHEME = re.compile(r'^([A-Za-z][A-Za-z0-9+.-]*)://')
# libpq's key=value form and a query parameter: password=...
_PASSWORD_PARAM = re.compile(r'(password=)([^&\s]*)', re.IGNORECASE)


def is_postgres(url):
    """True for a PostgreSQL URL, False for a SQLite file; a URL of any
    other scheme is a :class:`CclHealthError` naming it."""
    m = _SCHEME.match(url or '')
    if not m:
        return False
    scheme = m.group(1).lower()
    if scheme in POSTGRES_SCHEMES:
        return True
    if scheme == 'sqlite' and url.startswith('sqlite:///'):
        return False
    raise CclHealthError(
        f'{shown(url)}: unknown database URL scheme {m.group(1)!r}: give a '
        f'SQLite file (a path or sqlite:///path) or a postgresql:// URL')


def sqlite_path(url):
    """The file of a SQLite database named ``url``."""
    return url[len('sqlite:///'):] if url.startswith('sqlite:///') else url


def shown(url):
    """``url`` as it may be printed or written: its password (the one of
    ``user:password@``, and a ``password=`` parameter) replaced by ``***``."""
    if not url:
        return url
    text = str(url)
    if _SCHEME.match(text):
        try:
            netloc = urlsplit(text).netloc
        except ValueError:
            netloc = ''
        if '@' in netloc:
            cred, host = netloc.rsplit('@', 1)
            if ':' in cred:
                user = cred.split(':', 1)[0]
                text = text.replace(netloc, f'{user}:***@{host}', 1)
    return _PASSWORD_PARAM.sub(r'\1***', text)


def without_password(url):
    """A PostgreSQL ``url`` with no password at all (in its authority or
    a ``password`` parameter): the same text whether the password was in
    the URL or in ``PGPASSFILE``, so it names the database (a key); a
    path as given."""
    url = str(url or '')
    if not is_postgres(url):
        return url
    parts = urlsplit(url)
    user, at, host = parts.netloc.rpartition('@')
    query = urlencode([(k, v) for k, v in parse_qsl(
        parts.query, keep_blank_values=True) if k.lower() != 'password'])
    return urlunsplit((parts.scheme, (user.partition(':')[0] + '@' if at
                                      else '') + host, parts.path, query, ''))


def hide_in(text, url):
    """``text`` with every occurrence of ``url`` shown as :func:`shown`
    shows it (an error message of a driver that repeats the URL)."""
    if not url or not text:
        return text
    return str(text).replace(str(url), shown(url))
