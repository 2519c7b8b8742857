"""Where the suite's own files are: the ReFrame configuration (``config/``,
with ``config/systems/``), the checks (``checks/``), the build recipes with
their pins (``builders/``, ``builders/sources.yaml``), the site data
(``site/``) and the references (``reference/``).

In a checkout they are the top-level folders next to ``ccl_health/``.  An
installed ``ccl-health`` (``pip install .``, a wheel) carries the same
folders inside the package, under ``ccl_health/_data/`` (the wheel is built
from the top-level folders: ``pyproject.toml`` maps them there), so nothing
lands in site-packages under a name of its own (no top-level ``builders``).

The site data and the references can be replaced by a folder of one's own:
``CCL_HEALTH_SITE_DIR`` / ``CCL_HEALTH_REFERENCE_DIR`` (``ccl-health
init-site DIR`` copies the shipped files there to start from).

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


def config_dir():
    return os.environ.get('CCL_HEALTH_CONFIG_DIR') or path('config')


def checks_dir():
    return path('checks')


def builders_dir():
    return path('builders')


def shipped_site_dir():
    return path('site')


def shipped_reference_dir():
    return path('reference')


def site_dir():
    """The site data in use: ``$CCL_HEALTH_SITE_DIR``, else the shipped."""
    return os.environ.get('CCL_HEALTH_SITE_DIR') or shipped_site_dir()


def reference_dir():
    """The references in use: ``$CCL_HEALTH_REFERENCE_DIR``, else the
    shipped."""
    return os.environ.get('CCL_HEALTH_REFERENCE_DIR') or \
        shipped_reference_dir()


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
