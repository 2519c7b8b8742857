"""Where results go: one rule for every entry point (``scripts/run``,
``scripts/report``, ``reframe -C config/settings.py``, the health hook).

``$CCL_HEALTH_OUTPUT``, else ``./ccl-health-output``, relative to the
directory the command was started in.  Nothing here creates the folder:
the command that writes into it does."""

import gc
import os
import sys

from ccl_health import dburl

DEFAULT = 'ccl-health-output'


def launch_dir():
    """The directory the command was started in.  ReFrame loads a Python
    configuration from inside the configuration's own folder (its
    ``osext.change_dir``), so while ``config/settings.py`` is being loaded
    by ReFrame the current directory is ``config/``: the directory ReFrame
    was started in is the one that context manager saved."""
    cwd = os.getcwd()
    osext = sys.modules.get('reframe.utility.osext')   # never imported here
    change_dir = getattr(osext, 'change_dir', None)
    if change_dir is None:
        return cwd
    pairs = [(getattr(o, '_wd_save', None), getattr(o, '_dir_name', None))
             for o in gc.get_objects() if type(o) is change_dir]
    targets = {os.path.abspath(t) for _, t in pairs if t}
    # ReFrame nests one per parent folder: the launch directory is the
    # one saved that no other change_dir went to
    outer = [s for s, _ in pairs if s and s not in targets]
    return outer[0] if outer else cwd


def output_dir(base=None):
    """The output folder, absolute: ``$CCL_HEALTH_OUTPUT``, else
    ``ccl-health-output``, relative to ``base`` (default: the launch
    directory)."""
    path = os.environ.get('CCL_HEALTH_OUTPUT') or DEFAULT
    return os.path.abspath(os.path.join(base or launch_dir(), path))


def state_dir():
    """This user's state folder of the suite (what is kept between runs
    on a node: the time of the last XID check, a failing health check's
    evidence): ``$XDG_STATE_HOME/ccl-health``, else
    ``~/.local/state/ccl-health``."""
    base = os.environ.get('XDG_STATE_HOME') or os.path.join(
        os.path.expanduser('~'), '.local', 'state')
    return os.path.join(base, 'ccl-health')


def database(base=None):
    """The performance database: ``$CCL_HEALTH_DB``, else
    ``<output>/ccl-health.db``."""
    return os.environ.get('CCL_HEALTH_DB') or os.path.join(
        output_dir(base), 'ccl-health.db')


#: the folder of ``<output>`` the nightly's rehearsal keeps everything in
#: (its database, published pages, world)
REHEARSAL = 'rehearsal'


def rehearsal_database(output):
    """The rehearsal's database under ``output``."""
    return os.path.join(output, REHEARSAL, 'ccl-health.db')


def database_key(url=None):
    """The database ``url`` names (default: :func:`database`), as text
    without a password: a SQLite file by its real path (two spellings of
    one file are one key), a PostgreSQL URL without its password
    (:func:`ccl_health.dburl.without_password`) and spelled
    ``postgresql://``.  What a pending health check says it was meant for
    (:mod:`ccl_health.hook.pending`)."""
    url = url or database()
    if dburl.is_postgres(url):
        return 'postgresql://' + dburl.without_password(url).split('://', 1)[1]
    return os.path.realpath(os.path.abspath(dburl.sqlite_path(url)))
