import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

CAPTURE = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap')


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
    (:func:`ccl_health.db.reads.each_key`), collected: none where each
    key's judging was kept by its writer (ccl_health/db/state.py)."""
    from ccl_health.db import reads
    judged = []
    each = reads.each_key

    def counting(db, keys, *a, **kw):
        keys = list(keys)
        judged.extend(keys)
        return each(db, keys, *a, **kw)
    monkeypatch.setattr(reads, 'each_key', counting)
    return judged


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
