import os
import sys
import types

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

CAPTURE = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap')


# -- the tiers ---------------------------------------------------------------
# The fast tier is pure logic: no build, no package install, no server
# (Slurm, PostgreSQL, PgBouncer), no browser, no ReFrame run.  Everything
# else is the system tier (marker ``system``), found here from what a test
# uses, so that a new test lands in its tier without being told:
#   - a fixture that starts or installs something (by name, transitively);
#   - a helper it calls that runs ReFrame, a browser, a server or a build;
#   - a backend parametrized as a server (``db_url[postgresql]``);
#   - the ``slurm`` marker (a Slurm cluster is a system);
# and marked by hand (``pytestmark = pytest.mark.system``) where a module is
# system as a whole.  ``scripts/test --fast`` runs ``-m "not system"``.
SYSTEM_FIXTURES = {
    'pg_url': 'a PostgreSQL server',
    'pg_server': 'a PostgreSQL server',
    'cluster': 'a Slurm cluster',
    'slurm': 'a Slurm cluster',
    'chromium': 'a Chromium browser',
    'wheel': 'a wheel built and installed with pip',
    'hip_toolchain': "a HIP compiler (Debian's ROCm, installed when missing)",
}
#: the values of a parametrized backend that are servers
SYSTEM_PARAMS = {
    'postgresql': 'a PostgreSQL server',
    'pgbouncer': 'a PostgreSQL server behind PgBouncer',
}
SYSTEM_CALLS = {
    'run_suite': 'a ReFrame run',
    'dry_run': 'a ReFrame dry run (Lmod installed when missing)',
    'postgres_server': 'a PostgreSQL server',
    'local_server': 'a PostgreSQL server',
    'find_chromium': 'a Chromium browser',
    'run_chromium': 'a Chromium browser',
    'build_script': 'a build',
    'MIRROR': 'the source tarballs of ../shared/mirror',
    'NHC_TARBALL': 'a build of NHC from ../shared/mirror',
}


def _names(code):
    """Every name a code object and the functions inside it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def system_reason(item):
    """Why a test is of the system tier, or None (the fast tier)."""
    if item.get_closest_marker('slurm'):
        return 'a Slurm cluster'
    for name in item.fixturenames:
        if name in SYSTEM_FIXTURES:
            return SYSTEM_FIXTURES[name]
    params = getattr(getattr(item, 'callspec', None), 'params', {})
    for value in params.values():
        if isinstance(value, str) and value in SYSTEM_PARAMS:
            return SYSTEM_PARAMS[value]
    codes = [item.function.__code__] if hasattr(item, 'function') else []
    for name in item.fixturenames:
        for fdef in item._fixtureinfo.name2fixturedefs.get(name, ()):
            code = getattr(fdef.func, '__code__', None)
            if code is not None:
                codes.append(code)
    # a helper called, or a system fixture called by hand
    # (``test_store_postgres.pg_url.__wrapped__(...)``)
    calls = {**SYSTEM_FIXTURES, **SYSTEM_CALLS}
    for code in codes:
        for name in sorted(_names(code) & set(calls)):
            return calls[name]
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker('system'):
            continue
        if system_reason(item):
            item.add_marker(pytest.mark.system)


def read(*parts):
    with open(os.path.join(*parts), errors='replace') as fp:
        return fp.read()


@pytest.fixture
def capture():
    """Outputs captured from bare nccl-tests runs on 2x H200
    (benchmarks/device/capture_raw.sh)."""
    return lambda case, name: read(CAPTURE, case, name)


@pytest.fixture(autouse=True, scope='session')
def _evidence_dir(tmp_path_factory):
    """A failing health check keeps its evidence (ccl_health.hook.keep):
    in the tests, under their own temporary folder, not the user's
    ~/.local/state."""
    os.environ.setdefault('CCL_HEALTH_EVIDENCE_DIR',
                          str(tmp_path_factory.mktemp('evidence')))


@pytest.fixture(autouse=True)
def _pending_dir(tmp_path_factory, monkeypatch):
    """A check the hook could not record is kept in the pending folder
    (ccl_health.hook.pending) and recorded by the next check's hook: in
    the tests, a folder of each test's own, so that a check one test
    could not record is never drained into another test's database."""
    monkeypatch.setenv('CCL_HEALTH_PENDING_DIR',
                       str(tmp_path_factory.mktemp('pending')))


@pytest.fixture
def judged_at_read(monkeypatch):
    """The keys a read judged from their history
    (:func:`ccl_health.db.windowfindings.each_key`), collected: none where each
    key's judging was kept by its writer (ccl_health/db/keystate.py)."""
    from ccl_health.db import windowfindings
    judged = []
    each = windowfindings.each_key

    def counting(db, keys, *a, **kw):
        keys = list(keys)
        judged.extend(keys)
        return each(db, keys, *a, **kw)
    monkeypatch.setattr(windowfindings, 'each_key', counting)
    return judged


# -- the database backends ----------------------------------------------------

@pytest.fixture(scope='module')
def pg_server():
    """The tests' PostgreSQL server (tests/helpers/postgres.py) of a module,
    on a free port of 127.0.0.1; installed there when missing."""
    from helpers import postgres
    yield from postgres.local_server()


@pytest.fixture(params=['sqlite', 'postgresql'])
def db_url(request, tmp_path):
    """A new, empty database of the backend: a SQLite file, or a database
    of its own on the tests' PostgreSQL server."""
    if request.param == 'sqlite':
        return str(tmp_path / 'site.db')
    from helpers import postgres
    server = request.getfixturevalue('pg_server')
    return postgres.fresh(server,
                          f'soak_{request.node.name.split("[")[0][5:25]}')


#: the checkout's own site pointer (scripts/init-site writes it): a test
#: that leaves one behind would point every later test at its site
_POINTER = os.path.join(REPO, 'site.conf')
_POINTER_BEFORE = os.path.exists(_POINTER)


def pytest_sessionfinish(session, exitstatus):
    if os.path.exists(_POINTER) and not _POINTER_BEFORE:
        os.unlink(_POINTER)
        print(f'\nFAILED: a test wrote {_POINTER} (run init-site with '
              f'CCL_HEALTH_SITE_CONF set); removed it')
        session.exitstatus = 1
