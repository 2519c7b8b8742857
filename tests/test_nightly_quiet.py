"""The nightly's standard output (and error) is its mail, nothing else
(issue 40): a warning raised while it tells the news or draws the night's
page (matplotlib's ``AutoDateLocator was unable to pick an appropriate
interval`` from the sixth night on) goes to the night's log."""

import argparse
import glob
import sys
import warnings

from ccl_health import nightly

LOCATOR = ('AutoDateLocator was unable to pick an appropriate interval for '
           'this date range. It may be necessary to add an interval value '
           "to the AutoDateLocator's intervald dictionary. Defaulting to 6.")


def test_warnings_go_to_the_log_not_the_mail(tmp_path, monkeypatch, capsys):
    def news(*a):
        warnings.warn('a library deprecation', DeprecationWarning)
        print('ccl-health nightly local: nothing new')
        return 'quiet', 0, ['ccl-health nightly local: nothing new']

    def page(db_url, folder, title, publish, run_id=None):
        warnings.warn(LOCATOR, UserWarning)        # as matplotlib does
        return str(tmp_path / 'index.html')
    monkeypatch.setattr(nightly, '_run_child', lambda cmd, env, log:
                        (0, None))
    monkeypatch.setattr(nightly, '_news', news)
    monkeypatch.setattr(nightly, '_page', page)
    monkeypatch.setattr(nightly, '_database_exists', lambda url: True)
    args = argparse.Namespace(
        system='local', partition=None, account=None, mode='nightly',
        publish=str(tmp_path / 'www'), url=None, output=str(tmp_path / 'o'),
        db=str(tmp_path / 'db.sqlite'), mirror=None, lock=None,
        night='2026-11-25', rehearse=None, reframe_args=[])
    def to_stderr(message, category, filename, lineno, file=None,
                  line=None):        # Python's own: pytest records them
        sys.stderr.write(warnings.formatwarning(message, category, filename,
                                                lineno, line))
    with warnings.catch_warnings():
        warnings.simplefilter('always')
        warnings.showwarning = to_stderr
        assert nightly.night(args) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == 'ccl-health nightly local: nothing new'
    assert 'Warning' not in out + err and 'AutoDateLocator' not in out + err
    [log] = glob.glob(str(tmp_path / 'www' / '**' / 'run.log'),
                      recursive=True)
    text = open(log).read()
    assert 'UserWarning: AutoDateLocator was unable' in text
    assert 'DeprecationWarning: a library deprecation' in text
