"""Issue 41, classes 4-6: what a user types is checked before it is used.
Bad numbers are one error naming the option (exit 2, never a traceback,
never exit 1 which for ``failed`` means "failed"); a database URL of an
unknown scheme is an error, never a SQLite file named after the URL (with
its password) in the current folder; a password is never printed; a
night's name is a date or a plain name, never a path.  Everything through
the real command lines."""

import os
import subprocess

import pytest

from ccl_health import CclHealthError, dburl
from ccl_health.db import store
from conftest import REPO

REPORT = os.path.join(REPO, 'scripts', 'report')
NIGHTLY = os.path.join(REPO, 'scripts', 'nightly')
FLEET = os.path.join(REPO, 'scripts', 'fleet')


def run(cmd, cwd):
    p = subprocess.run(['bash', *cmd], capture_output=True, text=True,
                       cwd=cwd, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def db(tmp_path):
    path = tmp_path / 'site.db'
    with store.open_store(str(path)):
        pass
    return str(path)


def _one_error(rc, out, err, option):
    assert rc == 2, (rc, out, err)
    assert 'Traceback' not in err + out
    last = err.strip().splitlines()[-1]
    assert option in last, err


@pytest.mark.parametrize('cmd,option', [
    (['failed', '--hours', 'nan'], '--hours'),
    (['failed', '--hours', 'inf'], '--hours'),
    (['failed', '--hours', '1e308'], '--hours'),
    (['failed', '--hours', '-5'], '--hours'),
    (['failed', '--hours', '0'], '--hours'),
    (['prune', '--older-than', 'nan'], '--older-than'),
    (['prune', '--older-than', 'inf'], '--older-than'),
    (['prune', '--older-than', '1e308'], '--older-than'),
    (['accept', '--undo', '99999999999999999999999'], '--undo'),
    (['accept', '--undo', '-3'], '--undo'),
    (['runs', '--last', '0'], '--last'),
    (['detect', '--days', 'nan'], '--days'),
])
def test_a_bad_number_is_one_error_naming_its_option(db, tmp_path, cmd,
                                                       option):
    before = os.path.getmtime(db)
    rc, out, err = run([REPORT, '--db', db, *cmd], tmp_path)
    _one_error(rc, out, err, option)
    assert os.path.getmtime(db) == before       # nothing was done


def test_a_good_number_still_answers(db, tmp_path):
    rc, out, err = run([REPORT, '--db', db, 'failed', '--hours', '0.5'],
                       tmp_path)
    # an empty database: the answer is about the window asked, exit 2
    assert rc == 2 and 'nothing recorded in the last 0.5 h' in err, (
        rc, out, err)


@pytest.mark.parametrize('url', [
    'postgresql+psycopg://ops:Sup3rSecret@db.example/ccl',
    'mysql://ops:Sup3rSecret@db.example/ccl',
    'https://ops:Sup3rSecret@db.example/ccl',
])
def test_an_unknown_database_scheme_is_an_error_without_its_password(
        tmp_path, url):
    rc, out, err = run([REPORT, '--db', url, 'failed'], tmp_path)
    assert rc == 2 and 'unknown database URL scheme' in err, (rc, out, err)
    assert 'Sup3rSecret' not in out + err
    assert os.listdir(tmp_path) == []           # no SQLite file made here
    with pytest.raises(CclHealthError, match='unknown database URL scheme'):
        store.open_store(url)
    assert os.listdir(tmp_path) == []


def test_a_postgres_password_is_never_shown(tmp_path):
    url = 'postgresql://ops:Sup3rSecret@127.0.0.1:9/ccl?password=Other1'
    # nothing listens on port 9: the connection error names the URL
    rc, out, err = run([REPORT, '--db', url, 'failed'], tmp_path)
    assert rc == 2, (rc, out, err)
    assert 'Sup3rSecret' not in out + err and 'Other1' not in out + err
    assert 'ops:***@127.0.0.1:9' in err
    # the one way a URL is shown, on every form libpq takes
    for text in (url, 'postgres://ops:Sup3rSecret@h/d',
                 'postgresql://h/d?user=ops&password=Sup3rSecret'):
        shown = dburl.shown(text)
        assert 'Sup3rSecret' not in shown and '***' in shown
    assert dburl.shown('/srv/ccl/site.db') == '/srv/ccl/site.db'
    assert dburl.hide_in(f'cannot reach {url}', url).count('***') == 2


@pytest.mark.parametrize('night', ['../../../x', '/etc/cron.d/x',
                                   'a\nb', '\x1b[31mred', '..', '.hidden',
                                   'x' * 65])
def test_a_night_is_a_date_or_a_plain_name(tmp_path, night):
    rc, out, err = run([NIGHTLY, '--rehearse', 'healthy', '--night', night,
                        '--publish', str(tmp_path / 'www')], tmp_path)
    _one_error(rc, out, err, '--night')
    assert not (tmp_path / 'www').exists()
    assert not os.path.exists(os.path.join(os.path.dirname(str(tmp_path)),
                                           'x'))


@pytest.mark.parametrize('opt,value', [('--round-limit', 'inf'),
                                       ('--round-limit', 'nan'),
                                       ('--straggler-k', '-1'),
                                       ('--max-parallel', '0')])
def test_a_bad_fleet_number_is_one_line(tmp_path, opt, value):
    rc, out, err = run([FLEET, '--simulate',
                        os.path.join(REPO, 'site', 'fleet-faults.example.json'),
                        '--nodelist', 'n[1-4]', opt, value], tmp_path)
    assert rc == 2 and 'Traceback' not in err + out, (rc, out, err)
    assert opt in err and len(err.strip().splitlines()) == 1, err
