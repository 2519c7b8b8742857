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


def test_a_page_drawn_again_imports_neither_pandas_nor_matplotlib(tmp_path):
    """Drawn again into the same folder (the nightly's page) with nothing
    new, no figure is drawn: the page's tables are plain Python and
    neither pandas nor matplotlib is imported (seconds of a loaded
    machine's start-up)."""
    import subprocess
    import sys
    db = pagedb.write(str(tmp_path / 'page.db'))
    out = str(tmp_path / 'page')
    pagedb.page(db, out)
    code = (
        'import sys\n'
        f'sys.path[:0] = [{os.path.join(REPO, "tests")!r}, {REPO!r}]\n'
        'from helpers import pagedb\n'
        f'pagedb.page({db!r}, {out!r})\n'
        'print(sorted(m for m in ("pandas", "matplotlib", "numpy") '
        'if m in sys.modules))\n')
    p = subprocess.run([sys.executable, '-c', code], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == '[]'


def test_without_the_report_extra_a_page_to_draw_says_so(
        tmp_path, monkeypatch, capsys):
    """pandas is imported only to draw; without it (the ``report`` extra)
    a page with figures to draw is still one line naming the extra, exit
    2, and no page (as when the page imported it first)."""
    import sys
    from ccl_health import cli
    db = pagedb.write(str(tmp_path / 'page.db'))
    monkeypatch.setitem(sys.modules, 'pandas', None)
    rc = cli.main(['--prog', 'scripts/report', 'db', '--db', db, 'report',
                   '--out', str(tmp_path / 'page')])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "'report' extra" in err[0], err
    assert not os.path.exists(tmp_path / 'page' / 'index.html')
