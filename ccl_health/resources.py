"""Where the suite's own files are: the ReFrame configuration (``config/``,
with ``config/systems/``), the checks (``checks/``), the build recipes with
their pins (``builders/``, ``builders/sources.yaml``), the site data
(``site/``) and the references (``reference/``).

In a checkout they are the top-level folders next to ``ccl_health/``.  An
installed ``ccl-health`` (``pip install .``, a wheel) carries the same
folders inside the package, under ``ccl_health/_data/`` (the wheel is built
from the top-level folders: ``pyproject.toml`` maps them there), so nothing
lands in site-packages under a name of its own (no top-level ``builders``).

The site data, the references and the ReFrame systems can be replaced by
a folder of one's own, the site directory (``scripts/init-site DIR`` copies
the shipped files there to start from, with ``site/``, ``reference/`` and
``config/systems/`` under it).  It is found the same way by every entry
point, with an empty environment too (NHC, slurmd, cron): the site pointer,
a file at a fixed place (:func:`site_pointer_path`: ``<checkout>/site.conf``,
or ``<prefix>/etc/ccl-health/site.conf`` of an installed package) that
``scripts/init-site`` writes, names the site directory (``dir =``) and the
build cache (``cache =``).  ``CCL_HEALTH_SITE_DIR`` /
``CCL_HEALTH_REFERENCE_DIR`` / ``CCL_HEALTH_CONFIG_DIR`` /
``CCL_HEALTH_CACHE`` still override, each for its own folder.

This module imports nothing of the suite: every module may ask it."""

import os
import sys

#: the folder of the ``ccl_health`` package
PACKAGE = os.path.dirname(os.path.abspath(__file__))
#: the folder that holds the ``ccl_health`` package: the checkout, or
#: site-packages of an installed one (what a job's ``PYTHONPATH`` needs to
#: import this ``ccl_health``)
PACKAGE_PARENT = os.path.dirname(PACKAGE)
#: the shipped folders of an installed package
DATA = os.path.join(PACKAGE, '_data')

#: the folders a complete suite has, under :func:`root`
FOLDERS = ('config', 'checks', 'builders', 'site', 'reference')


def _complete(folder):
    return (os.path.isfile(os.path.join(folder, 'config', 'settings.py'))
            and os.path.isfile(os.path.join(folder, 'builders',
                                            'sources.yaml'))
            and os.path.isdir(os.path.join(folder, 'checks')))


def in_checkout():
    """True when this ``ccl_health`` is the one of a source checkout (the
    top-level folders are next to it)."""
    return _complete(PACKAGE_PARENT)


def root():
    """The folder holding ``config/``, ``checks/``, ``builders/``,
    ``site/`` and ``reference/``: the checkout, else the installed copy."""
    if in_checkout():
        return PACKAGE_PARENT
    if _complete(DATA):
        return DATA
    # an incomplete install: name what is missing rather than fail later
    # on some path below it
    from ccl_health import CclHealthError
    raise CclHealthError(
        f'the suite\'s own files are missing: neither {PACKAGE_PARENT} (a '
        f'checkout) nor {DATA} (an installed package) has config/settings.py, '
        f'builders/sources.yaml and checks/; reinstall ccl-health')


def path(*parts):
    """A path under :func:`root`, e.g. ``path('config', 'settings.py')``."""
    return os.path.join(root(), *parts)


def config_file():
    return path('config', 'settings.py')


#: the site pointer's name in a checkout (in an installed package:
#: ``<prefix>/etc/ccl-health/site.conf``); ``$CCL_HEALTH_SITE_CONF`` names
#: another file
POINTER = 'site.conf'
#: the keys a site pointer may hold
POINTER_KEYS = ('dir', 'cache')


def site_pointer_path(env=None):
    """Where the site pointer is: ``$CCL_HEALTH_SITE_CONF``, else
    ``<checkout>/site.conf``, else (an installed package)
    ``<sys.prefix>/etc/ccl-health/site.conf``."""
    env = os.environ if env is None else env
    if env.get('CCL_HEALTH_SITE_CONF'):
        return os.path.abspath(env['CCL_HEALTH_SITE_CONF'])
    if in_checkout():
        return os.path.join(PACKAGE_PARENT, POINTER)
    return os.path.join(sys.prefix, 'etc', 'ccl-health', POINTER)


def parse_pointer(text, where):
    """``{key: value}`` of a site pointer's text: ``key = value`` lines,
    ``#`` comments and blank lines ignored; an unknown key, a line of
    another form or a relative path is an error naming ``where``."""
    out = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        key, eq, value = line.partition('=')
        key, value = key.strip(), value.strip()
        if not eq or key not in POINTER_KEYS or not value:
            raise _error(f'{where}:{n}: {raw.strip()!r}: expected one of '
                         f'{", ".join(k + " = /path" for k in POINTER_KEYS)}')
        if not os.path.isabs(value):
            raise _error(f'{where}:{n}: {key} = {value}: not an absolute '
                         f'path')
        out[key] = value
    return out


def _error(text):
    from ccl_health import CclHealthError
    return CclHealthError(text)


def site_pointer(env=None):
    """The site pointer's ``{key: value}`` (:func:`parse_pointer`), ``{}``
    where there is none.  A pointer whose site directory is missing is an
    error (never a silent fall-back to the shipped files)."""
    where = site_pointer_path(env)
    try:
        with open(where) as fp:
            text = fp.read()
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise _error(f'{where}: cannot read the site pointer: '
                     f'{err.strerror or err}') from None
    got = parse_pointer(text, where)
    if 'dir' in got and not os.path.isdir(got['dir']):
        raise _error(f'{where}: dir = {got["dir"]}: no such folder (the '
                     f'site directory scripts/init-site made)')
    return got


def _from_site(var, under, shipped, env):
    """``$var``, else ``<site directory>/<under>`` of the site pointer,
    else the shipped folder."""
    env = os.environ if env is None else env
    if env.get(var):
        return env[var]
    mine = site_pointer(env).get('dir')
    return os.path.join(mine, under) if mine else shipped()


def config_dir(env=None):
    """The folder holding ``systems/`` in use: ``$CCL_HEALTH_CONFIG_DIR``,
    else the site pointer's ``<dir>/config``, else the shipped
    ``config/``."""
    return _from_site('CCL_HEALTH_CONFIG_DIR', 'config',
                      lambda: path('config'), env)


def checks_dir():
    return path('checks')


def builders_dir():
    return path('builders')


def shipped_site_dir():
    return path('site')


def shipped_reference_dir():
    return path('reference')


def site_dir(env=None):
    """The site data in use: ``$CCL_HEALTH_SITE_DIR``, else the site
    pointer's ``<dir>/site``, else the shipped."""
    return _from_site('CCL_HEALTH_SITE_DIR', 'site', shipped_site_dir, env)


def reference_dir(env=None):
    """The references in use: ``$CCL_HEALTH_REFERENCE_DIR``, else the site
    pointer's ``<dir>/reference``, else the shipped."""
    return _from_site('CCL_HEALTH_REFERENCE_DIR', 'reference',
                      shipped_reference_dir, env)


def cache_dir(env=None):
    """The build cache: ``$CCL_HEALTH_CACHE``, else the site pointer's
    ``cache``, else ``$XDG_CACHE_HOME/ccl-health/builds`` (default
    ``~/.cache``: the home of whoever runs it, root's under NHC)."""
    env = os.environ if env is None else env
    return os.path.abspath(
        env.get('CCL_HEALTH_CACHE') or site_pointer(env).get('cache') or
        os.path.join(env.get('XDG_CACHE_HOME') or
                     os.path.expanduser('~/.cache'), 'ccl-health', 'builds'))


def git_checkout():
    """The checkout's folder when it is a git work tree, else None (an
    installed package has no revision of its own but its version)."""
    if in_checkout() and os.path.exists(os.path.join(PACKAGE_PARENT,
                                                     '.git')):
        return PACKAGE_PARENT
    return None


def importable():
    """Make the build recipes (``builders``) importable by that name: in a
    checkout the checkout is on ``sys.path`` already; an installed package
    keeps them under :data:`DATA`, which goes on ``sys.path`` (at its end:
    nothing installed is shadowed)."""
    top = root()
    if top not in sys.path and not any(
            os.path.isdir(os.path.join(p or '.', 'builders'))
            and os.path.isfile(os.path.join(p or '.', 'builders',
                                            'sources.yaml'))
            for p in sys.path):
        sys.path.append(top)
    return top


#: the optional parts: the top-level module whose absence means the extra
#: is not installed, and the extra that brings it
EXTRAS = {
    'pandas': ('report', 'the report'),
    'matplotlib': ('report', 'the report'),
    'reframe': ('reframe', 'running the checks'),
    'psycopg': ('postgres', 'a PostgreSQL database'),
    'psycopg_binary': ('postgres', 'a PostgreSQL database'),
}


def missing_extra(err, prog='ccl-health'):
    """The one line for an ``ImportError`` of an optional dependency
    (``ccl-health: the report needs the 'report' extra: pip install
    "ccl-health[report]"``), or None when ``err`` is about something
    else."""
    name = (getattr(err, 'name', None) or '').split('.')[0]
    if name not in EXTRAS:
        return None
    extra, what = EXTRAS[name]
    how = (f'pip install "ccl-health[{extra}]"' if not in_checkout() else
           f'pip install "ccl-health[{extra}]" (in a checkout: pip install '
           f'-e "{PACKAGE_PARENT}[{extra}]")')
    return (f'{prog}: {what} needs the {extra!r} extra ({name} is not '
            f'installed for {sys.executable}): {how}')
