"""The report page at machine scale (issue 30): figures are files beside
the page, drawn only for the series that need a look (a finding, a
failure, a change of version), the healthy ones one panel each in their
group's figure; a figure whose data did not change is not drawn again
(its content hash names it in the cache), nor is a day of the health
probes' distribution whose cases did not change; the nodes to look at
are counted in the database and listed.  A failure and a drift are on the
page whatever else is summarised."""

import datetime
import os
import re

import pytest

from ccl_health import report
from ccl_health.db import store
from ccl_health.db import health_days as hd
from ccl_health.report import figures, health, plots
from helpers.pages import T0, page_case

MiB = 1 << 20


def _sweeps(s, nights, drop_night=None,
            collectives=('all_reduce', 'all_gather'),
            transports=('intra', 'net-socket'), first=0, nccl=None):
    for d in range(first, first + nights):
        for coll in collectives:
            for tr in transports:
                bw = 330.0 + d % 3
                if d == drop_night and (coll, tr) == ('all_reduce', 'intra'):
                    bw = 90.0
                c = page_case(f'night-{d}', d, transport=tr, collective=coll,
                          bw=bw)
                if nccl:
                    c.versions = dict(c.versions or {},
                                      nccl_version=nccl(d, coll, tr))
                s.add_case(c)


def _count_draws(monkeypatch):
    """How many times each drawing function ran."""
    calls = {}
    for name in ('busbw_vs_size', 'trend', 'healthy', 'health_days'):
        real = getattr(plots, name)

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] = calls.get(_name, 0) + 1
            return _real(*a, **k)
        monkeypatch.setattr(plots, name, counted)
    return calls


def _every_series_dropped_once(path):
    """8 nights of the four transports, each dropped on night 6: every
    series has its own figures."""
    with store.open_store(path) as s:
        for d in range(8):
            for tr in ('intra', 'net-socket', 'net-plugin',
                       'net-plugin-gdr'):
                s.add_case(page_case(f'night-{d}', d, transport=tr,
                                 bw=90.0 if d == 6 else 330.0 + d % 2))


def _build(path, out, **kw):
    with store.open_store(path, readonly=True) as s:
        return report.build(s, str(out), **kw)


def test_only_series_that_need_a_look_get_their_own_figures(tmp_path):
    path = str(tmp_path / 'r.db')
    with store.open_store(path) as s:
        _sweeps(s, 8, drop_night=6)
        s.add_case(page_case('night-7', 7.3, transport='net-plugin',
                         verdict='hang', sizes=[(8, 0.0)],
                         reason='hang: no output for 600 s'))
    page, _ = _build(path, tmp_path / 'rep')
    files = set(os.listdir(tmp_path / 'rep'))
    own = {f for f in files if f.startswith(('busbw_', 'trend_'))}
    # the drop's series: its busbw per size and its trends; the hang's
    # series (one run): its run's figure; nobody else
    assert {f.split('_1n_x_2r')[0] for f in own} == {
        'busbw_local_gpu_sweep_all_reduce_intra',
        'trend_local_gpu_sweep_all_reduce_intra',
        'busbw_local_gpu_sweep_all_reduce_net-plugin'}
    assert 'healthy_local_gpu_sweep.png' in files
    html = open(page).read()
    # every series still has its section, the healthy ones pointing at
    # their group's figure; the failure and the drop are on the page
    for title in ('all_gather intra', 'all_gather net-socket',
                  'all_reduce net-socket'):
        sec = html.split(f'>local:gpu sweep {title} 1n x 2r</h3>')[1]
        assert 'its panel is in <a href="#healthy_local_gpu_sweep">' in \
            sec.split('<h3')[0]
    assert 'hang: no output for 600 s' in html
    assert 'DROP local/gpu/intra all_reduce 1n/2r' in html


def test_a_change_of_version_needs_a_look(tmp_path):
    path = str(tmp_path / 'r.db')
    with store.open_store(path) as s:
        _sweeps(s, 6, transports=('intra',), collectives=('all_reduce',
                                                          'all_gather'),
                nccl=lambda d, coll, tr: '2.28.3' if (
                    d < 4 or coll == 'all_gather') else '2.29.1')
    with store.open_store(path, readonly=True) as s:
        cases = report.case_rows(s.cases())
    look = report.needs_look(cases, [])
    assert look == {('local', 'gpu', 'sweep', 'all_reduce', 'intra', 1, 2,
                     'default')}


def test_a_drift_gets_its_figures_and_its_row(tmp_path):
    """A drift (sustained small shift, no single drop) is a finding: its
    series is drawn, its row is on the page."""
    path = str(tmp_path / 'd.db')
    with store.open_store(path) as s:
        for i in range(26):
            shift = 0.04 if i >= 22 else 0.0
            v = (100.0 + (i * 7919 % 11) / 10) * (1 - shift)
            s.add_case(store.CaseRecord(
                f'night-{i:02d}', 'AllReduceSweep %transport=net-socket',
                'pass', time=(T0 + datetime.timedelta(days=i)).isoformat(),
                system='s', partition='p', nodes=2, ranks=2,
                collective='all_reduce', transport='net-socket',
                sizes=[store.SizeRecord(64 * MiB, v, tolerance=0.1,
                                        verdict='pass')]))
    page, text = _build(path, tmp_path / 'rep')
    html = open(page).read()
    assert 'DRIFT s/p/net-socket all_reduce 2n/2r' in html
    files = os.listdir(tmp_path / 'rep')
    assert 'busbw_s_p_sweep_all_reduce_net-socket_2n_x_2r.png' in files
    assert not any(f.startswith('healthy_') for f in files)


def test_a_figure_is_drawn_again_only_when_its_data_changed(tmp_path,
                                                            monkeypatch):
    path = str(tmp_path / 'r.db')
    with store.open_store(path) as s:
        _sweeps(s, 8, drop_night=6)
        for d in range(3):
            for n in range(4):
                s.add_case(page_case(f'h{d}{n}', d + n / 10, source='health',
                                 name='node-health', nodelist=f'n{n}',
                                 sizes=[(1 << 30, 331.0 - n)]))
    calls = _count_draws(monkeypatch)
    out = tmp_path / 'rep'
    _build(path, out)
    first = dict(calls)
    assert first['busbw_vs_size'] == 1
    assert first['trend'] == 3           # 8 B, 1 MiB and 1 GiB measured
    assert first['healthy'] == 1 and first['health_days'] == 1
    pngs = {f: open(out / f, 'rb').read() for f in os.listdir(out)
            if f.endswith('.png')}
    calls.clear()
    _build(path, out)
    assert calls == {}                      # nothing changed: nothing drawn
    assert {f: open(out / f, 'rb').read() for f in os.listdir(out)
            if f.endswith('.png')} == pngs
    # a new night of the healthy series only: their group's figure again,
    # the dropped series' own figures (the drop is older) not; the cache
    # names each figure by its content
    with store.open_store(path) as s:
        _sweeps(s, 1, first=8, collectives=('all_gather',))
    calls.clear()
    _build(path, out)
    assert calls.get('healthy') == 1
    assert 'trend' not in calls and 'busbw_vs_size' not in calls
    cached = os.listdir(out / figures.CACHE)
    assert all(re.fullmatch(r'.+-[0-9a-f]{20}\.(png|json)', f)
               for f in cached), cached


def test_a_big_page_links_its_figures_a_small_one_carries_them(tmp_path):
    path = str(tmp_path / 'r.db')
    _every_series_dropped_once(path)
    page, _ = _build(path, tmp_path / 'big')
    html = open(page).read()
    imgs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(imgs) > figures.INLINE_FIGURES
    assert 'data:image/png' not in html
    for src in imgs:
        assert os.path.isfile(tmp_path / 'big' / src)
    page, _ = _build(path, tmp_path / 'one', sizes='1G')
    html = open(page).read()
    imgs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(imgs) <= figures.INLINE_FIGURES
    assert all(src.startswith('data:image/png;base64,') for src in imgs)
    page, _ = _build(path, tmp_path / 'one', sizes='1G', inline=False)
    assert 'data:image/png' not in open(page).read()


def test_a_later_page_removes_the_figures_it_no_longer_shows(tmp_path):
    path = str(tmp_path / 'r.db')
    with store.open_store(path) as s:
        _sweeps(s, 8, drop_night=6, transports=('intra',),
                collectives=('all_reduce',))
    out = tmp_path / 'rep'
    os.makedirs(out)
    (out / 'mine.png').write_bytes(b'not the page\'s')
    _build(path, out)
    assert 'trend_local_gpu_sweep_all_reduce_intra_1n_x_2r_8B.png' in \
        os.listdir(out)
    _build(path, out, sizes='1M')
    trends = sorted(f for f in os.listdir(out) if f.startswith('trend_'))
    assert trends == ['trend_local_gpu_sweep_all_reduce_intra_1n_x_2r_'
                      '1MiB.png']
    assert (out / 'mine.png').read_bytes() == b'not the page\'s'


def _probes(path, days=3, nodes=5):
    with store.open_store(path) as s:
        for d in range(days):
            for n in range(nodes):
                bad = (d, n) == (1, 2)
                s.add_case(page_case(
                    f'h{d}-{n}', d + n / 100, source='health',
                    name='node-health', nodelist=f'n{n}',
                    verdict='crash' if bad else 'pass',
                    reason='crash: rank 3 died' if bad else '',
                    sizes=[(1 << 30, 300.0 + 10 * n + d)]))


def test_health_days_day_by_day_and_cached(tmp_path, monkeypatch):
    path = str(tmp_path / 'p.db')
    _probes(path)
    cache = str(tmp_path / 'cache')
    os.makedirs(cache)
    with store.open_store(path, readonly=True) as s:
        whole = [dict(r) for r in hd.health_days(s)]
        # a range of days is what the days in it are, one by one
        day1 = T0.date() + datetime.timedelta(days=1)
        assert [r['day'] for r in hd.health_days(
            s, day1.isoformat(), (day1 + datetime.timedelta(days=1))
            .isoformat())] == [day1.isoformat()]
        calls = []
        real = hd.health_days
        monkeypatch.setattr(hd, 'health_days', lambda *a, **k: calls.append(
            a[1:]) or real(*a, **k))
        assert health.days_rows(s, None, cache) == whole
        assert len(calls) == 3
        calls.clear()
        assert health.days_rows(s, None, cache) == whole
        assert calls == []
    # a probe added to the newest day: that day is computed again, only
    with store.open_store(path) as s:
        s.add_case(page_case('h2-9', 2.5, source='health', name='node-health',
                         nodelist='n9', sizes=[(1 << 30, 100.0)]))
    with store.open_store(path, readonly=True) as s:
        rows = health.days_rows(s, None, cache)
        assert rows == [dict(r) for r in real(s)]
    assert [c[0] for c in calls] == [(T0.date() + datetime.timedelta(
        days=2)).isoformat()]


def test_nodes_to_look_at_counted_and_listed(tmp_path):
    path = str(tmp_path / 'p.db')
    _probes(path)
    with store.open_store(path, readonly=True) as s:
        rows = health.node_rows(s, T0 - datetime.timedelta(days=1))
    assert [(r['node'], r['not_good'], r['verdicts']) for r in rows] == [
        ('n2', 1, '1 crash')]
    page, _ = _build(path, tmp_path / 'rep')
    html = open(page).read()
    nodes = html.split('<h3 id="nodes">')[1].split('</table>')[0]
    assert '<td>n2</td>' in nodes and '1 crash' in nodes
    assert 'crash: rank 3 died' in html       # and in the failures


def test_self_contained_on_the_command_line(tmp_path):
    from helpers.pages import report_cli
    path = str(tmp_path / 'r.db')
    _every_series_dropped_once(path)
    rc, _, err = report_cli(path, 'report', '--out', str(tmp_path / 'a'))
    assert rc == 0, err
    assert 'data:image/png' not in (tmp_path / 'a' / 'index.html').read_text()
    rc, _, err = report_cli(path, 'report', '--out', str(tmp_path / 'b'),
                     '--self-contained')
    assert rc == 0, err
    html = (tmp_path / 'b' / 'index.html').read_text()
    imgs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(imgs) > figures.INLINE_FIGURES
    assert all(src.startswith('data:image/png;base64,') for src in imgs)


def test_the_nodes_findings_are_capped_the_series_never(tmp_path,
                                                        monkeypatch):
    path = str(tmp_path / 'r.db')
    with store.open_store(path) as s:
        _sweeps(s, 8, drop_night=6, transports=('intra',),
                collectives=('all_reduce',))
        for d in range(8):
            for n in range(3):
                s.add_case(page_case(f'h{d}-{n}', d + 0.2 + n / 100,
                                 source='health', name='node-health',
                                 nodelist=f'n{n}', sizes=[(
                                     1 << 30, 100.0 if d == 7 else
                                     330.0 + (d + n) % 2)]))
    monkeypatch.setattr(report, 'NODE_FINDINGS_LISTED', 1)
    page, _ = _build(path, tmp_path / 'rep')
    html = open(page).read()
    part = html.split('id="findings"')[1].split('<h2')[0]
    assert 'DROP local/gpu/intra all_reduce 1n/2r at' in part     # sweep
    rows = part.split('<tr><td class="time">')[1:]
    assert sum('[health probe] on n' in r for r in rows) == 1
    assert '2 older row(s) of the nodes\' health probes are not listed' in \
        part
    nodes = html.split('<h3 id="nodes">')[1].split('</table>')[0]
    for n in ('n0', 'n1', 'n2'):
        assert f'<td>{n}</td>' in nodes
