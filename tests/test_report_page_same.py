"""The report page shows what it showed before its Python was cut down
(issue 45: pandas out of the page's tables, matplotlib imported only to
draw): on a database that fills every section
(``tests/helpers/pagedb.py``), the HTML (less its clock and its
database's path), the figures' names and, with the same matplotlib, their
PNG bytes, and the terminal summary are those the code before that work
drew (``tests/fixtures/report-page/``, made at 3176cf3); the window's page
and a night's (``run_id``), the second drawn again into the folder of the
first, as the nightly draws it."""

import json
import os

import matplotlib

from conftest import REPO
from helpers import pagedb

FIXTURE = os.path.join(REPO, 'tests', 'fixtures', 'report-page')


def _kept(name):
    with open(os.path.join(FIXTURE, f'{name}.html'), encoding='utf-8') as fp:
        html = fp.read()
    with open(os.path.join(FIXTURE, f'{name}.json'), encoding='utf-8') as fp:
        return html, json.load(fp)


def test_the_page_shows_what_it_showed(tmp_path):
    db = pagedb.write(str(tmp_path / 'page.db'))
    out = str(tmp_path / 'page')
    for name in ('window', 'night'):
        html, kept = _kept(name)
        got, figures, text = pagedb.page(db, out, kept['run'])
        assert got == html, name
        assert sorted(figures) == sorted(kept['figures']), name
        if matplotlib.__version__ == kept['matplotlib']:
            assert figures == kept['figures'], name
        assert text == kept['terminal'], name
