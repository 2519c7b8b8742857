"""A night's page shows that night's failures (issue 40): the nightly's
page of run ``night-2`` lists night 2's crash, not night 1's hang, which
the 30-day window still holds (``scripts/report failed``)."""

import datetime

from ccl_health import nightly
from ccl_health.db import store

T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.timezone.utc)


def _case(run, day, verdict, reason, transport='net-socket'):
    return store.CaseRecord(
        run, f'AllReduceSweep %transport={transport}', verdict,
        time=(T0 + datetime.timedelta(days=day)).isoformat(),
        system='local', partition='gpu', nodes=1, ranks=2,
        collective='all_reduce', transport=transport, source='check',
        reason=reason, sizes=[store.SizeRecord(8, 0.0, verdict=verdict)])


def test_the_night_page_lists_that_nights_failures(tmp_path):
    db = str(tmp_path / 'perf.db')
    with store.open_store(db) as s:
        s.add_case(_case('night-1', 1, 'hang', 'hang: no output for 600 s'))
        s.add_case(_case('night-2', 2, 'crash', 'crash: all_reduce_perf '
                         'exited with status 3 after NCCL WARN '
                         'socketProgress'))
    folder = tmp_path / 'www' / 'nights' / '2026-11-03'
    page = nightly._page(db, str(folder), 'ccl-health local:gpu: night '
                         '2026-11-03', str(tmp_path / 'www'), 'night-2')
    text = open(page).read()
    fails = text.split('id="failures"')[1].split('<h2')[0]
    assert 'exited with status 3 after NCCL WARN socketProgress' in fails
    assert 'no output for 600 s' not in fails
    assert "This night's run night-2 only" in fails
