"""benchmarks/nightly_first_night.py (issue 45): the first nights of the
nightly's rehearsal on a copy of a database, timed and split.  The
oracles: the source file's bytes (never written), each night's own files
(its mail in night.json, its ReFrame log's profiler report) and the
night's wall clock measured outside the night's process (the parts add up
within it)."""

import datetime
import hashlib
import json
import os
import sys

import pytest

from conftest import REPO
from ccl_health.db import store

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import db_gen  # noqa: E402
import nightly_first_night as nfn  # noqa: E402

#: the system tier (tests/conftest.py): ReFrame runs of the rehearsal
pytestmark = pytest.mark.system

pytest.importorskip('reframe')

END = datetime.datetime(2026, 11, 20, 12, 0, tzinfo=datetime.timezone.utc)

PROFILE = """\
[2026-11-29T03:36:19.742126] debug: reframe: main: 6.563826 s
[2026-11-29T03:36:19.742955] debug: reframe:             \
RegressionTask.sanity: 5.710276 s
[2026-11-29T03:36:24.531887] debug: reframe: main: 0.892032 s
[2026-11-29T03:36:24.532611] debug: reframe:             \
RegressionTask.sanity: 0.038709 s
"""


def _sha(path):
    with open(path, 'rb') as fp:
        return hashlib.sha256(fp.read()).hexdigest()


def test_reframe_profile_reads_the_last_report(tmp_path):
    log = tmp_path / 'reframe.log'
    log.write_text(PROFILE)
    assert nfn.reframe_profile(str(log)) == (0.892032, 0.038709)
    assert nfn.reframe_profile(str(tmp_path / 'none.log')) == (None, None)


def test_two_nights_on_a_copy(tmp_path):
    src = str(tmp_path / 'src.db')
    with store.open_store(src) as db:
        db_gen.write_nights(db, 'frontier', 3, END)
        db_gen.write_checks(db, 'frontier', 4, 3, 10, END, batch=1000,
                            seed=3)
    before = _sha(src)
    out = str(tmp_path / 'results.json')
    assert nfn.main(['--db', src, '--work', str(tmp_path / 'work'),
                     '--nights', '2', '--cold', '--json', out]) == 0
    assert _sha(src) == before          # only the copy was written
    [result] = json.load(open(out))
    assert result['database'] == 'src'
    one, two = result['nights']
    www = tmp_path / 'work' / 'src' / 'www' / 'nights'
    for n, row in ((1, one), (2, two)):
        meta = json.load(open(www / f'night-{n}' / 'night.json'))
        assert row['exit'] == meta['exit'] == 0
        assert row['mail'] == meta['lines'][:1]
        assert (www / f'night-{n}' / 'index.html').is_file()
        # the parts were measured inside the night, its wall outside it
        assert row['sweep'] + row['news'] + row['page'] < row['wall']
        assert row['rest'] >= 0
        assert 0 < row['reframe_sanity'] < row['reframe_main'] < row['sweep']
        assert row['beyond_sweeps'] == pytest.approx(
            row['wall'] - (row['reframe_main'] - row['reframe_sanity']),
            abs=0.02)
    assert 'nothing told before' in one['mail'][0]
    assert 'vs run' in two['mail'][0]
    # the copy is the nights' database: both runs recorded in it
    with store.open_store(str(tmp_path / 'work' / 'src' / 'night.db'),
                          readonly=True) as db:
        runs = {c['run_id'] for c in db.cases(
            "WHERE run_id LIKE 'nightly-%' AND system = 'local'")}
    assert len(runs) == 2
    table = nfn.markdown(json.load(open(out))).splitlines()
    assert len(table) == 2 + 2 and table[2].startswith('| src |')
