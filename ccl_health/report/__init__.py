"""The report people look at, from the performance database: one HTML
page (``index.html``) of the last :data:`PAGE_DAYS` days recorded, its
figures beside it as PNG files (inline too on a small page:
:mod:`ccl_health.report.figures`), and a short terminal summary.

Everything is grouped by what was measured, never mixed: a *series* is one
(system, partition, kind, collective, transport, nodes, ranks, algo), where
the kind is a ``sweep`` (nccl-tests / rccl-tests), a ``health probe`` (the
node health hook), a ``fleet`` step or a ``framework`` benchmark (torch_*).
A series that needs a look (a finding against history, a failure or a
change of version in the window: :func:`needs_look`) gets its busbw and
time per message size over every size measured (log axes: the latency
region too), with the reference band (reference down to reference x
(1 - tolerance)), and busbw over time at the chosen sizes, with dates, the
band, and each drop labelled with its run; the others are one small panel
each in their group's figure.  The page also lists every failure (reasons,
fallbacks, hangs, build failures, aborted, unjudged) and every drop against
history with what changed (:func:`ccl_health.judge.attribution.attribute`).
The health probes are plotted as the machine's distribution over nodes per
day (:mod:`ccl_health.db.health_days`, computed in the database), never as
one series of every node; the nodes that need a look are listed
(:mod:`ccl_health.report.health`), a node's own drops are findings naming
it.  The fleet's steps are on the fleet's own page (``fleet.html``), not
plotted here.

The page is a jinja2 template (``page.html.j2``, autoescaped); terminal
tables are tabulate."""

import dataclasses
import datetime
import os
import re

from ccl_health import CclHealthError, safefile
from ccl_health.sitedata import transports
from ccl_health.db import windowfindings
from ccl_health.judge.finding import where_text
from ccl_health.judge.series import KEY, kind_of
from ccl_health.units import format_size, parse_size
from ccl_health.judge.verdicts import GOOD, Verdict
from ccl_health.judge.attribution import ATTRIBUTION_FIELDS
from ccl_health.judge.series import READ_ORDER
from ccl_health.report.health import (  # noqa: F401 (the page's parts)
    HEALTH_DAYS_LISTED, NODES_LISTED, HealthSection, health_sections,
    node_rows, node_trends, probe_summary)

#: the kinds of case, in page order
KINDS = ('sweep', 'health probe', 'fleet', 'framework', 'other')
#: kinds not plotted as a series: the health probes (every node's: the
#: distribution per day instead, :func:`health_sections`) and the fleet's
#: steps (compared within their run, on the fleet's page)
NOT_PLOTTED = ('health probe', 'fleet')
#: trend sizes when none are asked for: the smallest measured (latency),
#: those nearest 1 MiB, 64 MiB and 1 GiB, and the largest
DEFAULT_TREND_SIZES = ('min', '1MiB', '64MiB', '1GiB', 'max')
#: findings against history shown in the terminal summary (the page has all)
TERMINAL_FINDINGS = 20

_NUMERIC = ('size', 'busbw', 'busbw_oop', 'busbw_ip', 'algbw_oop',
            'algbw_ip', 'time_oop_us', 'time_ip_us', 'ref', 'tolerance',
            'nodes', 'ranks')


#: days of records the page shows, up to the newest record: its summary,
#: failures, findings against history, plots and the health probes' days
PAGE_DAYS = 30
#: the health probes' findings against their node's history are those of
#: the last hours of the window (a node's state now, as ``report failed``);
#: each node's history is read for them (:mod:`ccl_health.db.windowfindings`)
PROBE_FINDING_HOURS = 24
#: failing cases listed on the page (newest first; all are counted)
FAILURES_LISTED = 500
#: rows of the nodes' findings against their history listed (newest
#: first; every node with one is among the nodes to look at)
NODE_FINDINGS_LISTED = 100
#: the kinds read case by case for the page: the health probes are counted
#: in the database (:func:`probe_summary`, :func:`health_sections`)
CASE_KINDS = tuple(k for k in KINDS if k != 'health probe')


def _text(value):
    return '' if value is None else value


def _count(value):
    """A node or rank count as the page groups it: a number, else 0."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def _number(value):
    """A measured number, None where none was recorded (or none can be
    read)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value) if isinstance(value, str) else value
    except ValueError:
        return None
    return None if value != value else value     # NaN: none


def _plain_series(row):
    """``row``'s series columns as the page groups them (in place): its
    text columns '' where NULL, its node and rank counts numbers (0 where
    none)."""
    for k in ('collective', 'transport', 'system', 'partition', 'algo'):
        row[k] = _text(row.get(k))
    for k in ('nodes', 'ranks'):
        row[k] = _count(row.get(k))


def case_rows(rows):
    """The page's cases: the rows of ``rows`` (database case rows, oldest
    first) with their ``kind`` (:func:`ccl_health.judge.series.kind_of`)
    and ``when`` (an aware datetime), the text columns of a series ''
    where NULL and its node and rank counts numbers (0 where none)."""
    from ccl_health.db.keyhistory import when
    out = []
    for r in rows:
        c = dict(r)
        c['kind'] = kind_of(c)
        c['when'] = when(c['time'])
        _plain_series(c)
        out.append(c)
    return out


def record_rows(rows, cases):
    """The page's records (one row per case and size, :data:`_NUMERIC`
    numbers or None), each with its case's ``kind`` (``cases``:
    :func:`case_rows`; ``other`` where its case is not among them) and
    its ``when``."""
    from ccl_health.db.keyhistory import when
    kinds = {(c['run_id'], c['case_name']): c['kind'] for c in cases}
    times = {}
    out = []
    for r in rows:
        d = dict(r)
        for k in _NUMERIC:
            if k in d:
                d[k] = _number(d[k])
        _plain_series(d)
        d['kind'] = kinds.get((d['run_id'], d['case_name']), 'other')
        if d['time'] not in times:
            times[d['time']] = when(d['time'])
        d['when'] = times[d['time']]
        out.append(d)
    return out


def _series(row):
    """The series (:data:`READ_ORDER`) of a case or record row."""
    return tuple(row[k] for k in READ_ORDER)


def _by_series(rows):
    """``{series: [rows]}``, in the order each series is first met."""
    out = {}
    for r in rows:
        out.setdefault(_series(r), []).append(r)
    return out


def series_name(key, group=True):
    """``local:gpu sweep all_reduce intra 1n x 2r`` (+ algo when not the
    default); without the group (system, partition, kind) when ``group``
    is False."""
    k = dict(zip(READ_ORDER, key))
    algo = '' if k['algo'] in ('', 'default') else f' algo={k["algo"]}'
    name = (f'{k["collective"] or "-"} {k["transport"] or "-"} '
            f'{k["nodes"] or "?"}n x {k["ranks"] or "?"}r{algo}')
    return (f'{k["system"]}:{k["partition"]} {k["kind"]} ' + name
            if group else name)


def _slug(text):
    return re.sub(r'[^A-Za-z0-9._-]+', '_', text).strip('_')


def summary_table(store, now=None, cases=None, recs=None, probes=()):
    """One row per series (system, partition, kind, collective, transport,
    nodes, ranks, algo): last verdict, last value vs reference at the
    largest referenced size, runs, failures, days since the last failure
    (of ``cases`` (:func:`case_rows`) and their records ``recs``
    (:func:`record_rows`), default every case; and the rows of
    ``probes``: :func:`probe_summary`).  A list of dicts, in page
    order."""
    if cases is None:
        cases = case_rows(store.cases())
    if not cases and not probes:
        return []
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if recs is None:
        recs = record_rows(store.records(), cases)
    # each case's largest size measured with a reference
    big = {}
    for r in recs:
        if r['ref'] is None or r['busbw'] is None or r['size'] is None:
            continue
        k = (r['run_id'], r['case_name'])
        if k not in big or r['size'] >= big[k]['size']:
            big[k] = r
    rows = [dict(p) for p in probes]
    for key, grp in sorted(_by_series(cases).items()):
        k = dict(zip(READ_ORDER, key))
        last = sorted(grp, key=lambda c: c['when'])[-1]
        fails = [c for c in grp if c['verdict'] not in GOOD]
        days = ((now - max(c['when'] for c in fails)).days if fails
                else None)
        top = big.get((last['run_id'], last['case_name']))
        value = (f'{top["busbw"]:.2f} / {top["ref"]:.2f} GB/s at '
                 f'{format_size(int(top["size"]))}' if top else '')
        rows.append({'system': k['system'], 'partition': k['partition'],
                     'kind': k['kind'], 'collective': k['collective'],
                     'transport': k['transport'],
                     'nodes x ranks': f'{k["nodes"] or "?"} x '
                                      f'{k["ranks"] or "?"}',
                     'algo': k['algo'],
                     'last run': str(last['time'])[:16].replace('T', ' '),
                     'last verdict': last['verdict'],
                     'last vs reference': value,
                     'runs': len({c['run_id'] for c in grp}),
                     'failures': len(fails),
                     'days since failure': ('never failed' if days is None
                                            else days)})
    rows.sort(key=lambda r: (r['system'], r['partition'],
                             KINDS.index(r['kind']), r['collective'],
                             transports.order(r['transport'])))
    return rows


def resolve_sizes(wanted, recorded):
    """The trend sizes of one series: ``wanted`` are names (``min``,
    ``max``) or sizes; with ``exact`` False (the defaults) each is the
    nearest recorded size, else only sizes recorded exactly."""
    sizes = sorted(set(int(s) for s in recorded))
    if not sizes:
        return []
    out = set()
    for w in wanted:
        if w == 'min':
            out.add(sizes[0])
        elif w == 'max':
            out.add(sizes[-1])
        else:
            out.add(min(sizes, key=lambda s: abs(s - w)))
    return sorted(out)


def parse_trend_sizes(text):
    """``--sizes`` (comma separated: sizes, ``min``, ``max``; default
    :data:`DEFAULT_TREND_SIZES`) as a list of ``'min'``/``'max'``/bytes."""
    items = DEFAULT_TREND_SIZES if not text else [
        t.strip() for t in text.split(',') if t.strip()]
    return [t.lower() if str(t).lower() in ('min', 'max') else parse_size(t)
            for t in items]


@dataclasses.dataclass
class Section:
    """The plots of one series."""
    key: tuple
    title: str
    anchor: str
    note: str
    figures: list
    #: a series with nothing to look at: the anchor of its group's figure
    #: that has its panel
    panel: str = ''


def failure_rows(cases, verdicts=None, reason=None, limit=None):
    """Every case of ``cases`` (:func:`case_rows`) that is not good
    (failures and unjudged; or whose verdict is in ``verdicts``), grouped
    by kind then collective, newest first within a group (the first
    ``limit`` only); ``reason(case)`` says each one's reason (the page
    passes :func:`ccl_health.db.answers.shown_reason`, as ``scripts/report
    failed`` says it)."""
    bad = [c for c in cases if (c['verdict'] in verdicts if verdicts else
                                c['verdict'] not in GOOD)]
    # newest first, then by group (both sorts stable: equal ones keep
    # the order they were read in)
    bad.sort(key=lambda c: c['when'], reverse=True)
    bad.sort(key=lambda c: (KINDS.index(c['kind']), c['collective'],
                            c['transport']))
    return [{'kind': r['kind'], 'collective': r['collective'] or '-',
             'transport': r['transport'] or '-', 'time': r['time'],
             'run': r['run_id'], 'where': f'{r["system"]}:{r["partition"]}',
             'case': r['case_name'], 'verdict': r['verdict'],
             'reason': (reason(r) if reason else r['reason']) or
             '(no reason recorded)'}
            for r in bad[:limit]]


def failure_counts(cases):
    """Per kind and collective: how many cases per verdict (failing and
    unjudged only), for the failures section's overview."""
    groups = {}
    for c in cases:
        if c['verdict'] not in GOOD:
            counts = groups.setdefault((c['kind'], c['collective']), {})
            counts[c['verdict']] = counts.get(c['verdict'], 0) + 1
    rows = []
    for (kind, coll), counts in groups.items():
        # the most first; as many: the first met first
        order = sorted(counts.items(), key=lambda vn: -vn[1])
        rows.append({'kind': kind, 'collective': coll or '-',
                     'cases': sum(counts.values()),
                     'verdicts': ', '.join(f'{n} {v}' for v, n in order)})
    rows.sort(key=lambda r: (KINDS.index(r['kind']), r['collective']))
    return rows


def _short(text, limit=240):
    """A change as shown on the page: long values (an environment variable
    holding JSON) cut, the full text is in ``scripts/report detect``."""
    text = str(text)
    return text if len(text) <= limit else \
        text[:limit] + ' ... (in full: scripts/report detect)'


def finding_rows(findings, cases_list, limit=None):
    """Findings against history, newest first, one row per kind, run and
    configuration (a drop usually hits many sizes at once: one row saying
    which sizes and how far, every size's line beneath it), drops with what
    changed since the last passing run (``cases_list``: the store, or case
    rows); the newest ``limit`` rows only (what changed is read for
    those)."""
    groups = {}
    for f in findings:
        groups.setdefault((f.kind, f.run_id, f.key), []).append(f)
    rows = []
    for (kind, run, key), fs in groups.items():
        fs.sort(key=lambda f: f.size)
        where = where_text(key)
        sizes = (format_size(fs[0].size) if len(fs) == 1 else
                 f'{len(fs)} sizes {format_size(fs[0].size)}..'
                 f'{format_size(fs[-1].size)}')
        if kind == 'drop':
            worst = max(fs, key=lambda f: 1 - f.value / f.baseline.median)
            pct = 100 * (1 - worst.value / worst.baseline.median)
            head = (f'DROP {where} at {sizes}: worst -{pct:.0f}% at '
                    f'{format_size(worst.size)} ({worst.value:.2f} vs '
                    f'baseline {worst.baseline.median:.2f} GB/s)')
        elif kind == 'drift':
            worst = min(fs, key=lambda f: f.shift)
            head = (f'DRIFT {where} at {sizes}: worst '
                    f'{100 * worst.shift:+.1f} % at '
                    f'{format_size(worst.size)} sustained over {worst.runs} '
                    f'runs (noise {100 * worst.noise:.1f} %)')
        else:
            head = f'{kind.upper()} {where} at {sizes}'
        rows.append({'kind': kind, 'time': max(f.time for f in fs),
                     'run': run, 'head': head,
                     'lines': [f.line() for f in fs], 'first': fs[0]})
    rows.sort(key=lambda r: (r['time'], r['run']), reverse=True)
    rows = rows[:limit] if limit is not None else rows
    for r in rows:
        first = r.pop('first')
        r['changed'] = ([_short(c) for c in windowfindings.changed(
            cases_list, first)]
                        if r['kind'] in ('drop', 'drift') else [])
    return rows


def newest_time(text):
    from ccl_health.db.keyhistory import when
    return when(text) if text else \
        datetime.datetime.now(datetime.timezone.utc)


def page_window(store, days=PAGE_DAYS):
    """(the first time shown, the newest recorded time as text or None):
    the page shows the last ``days`` days up to the newest record."""
    newest = store.query('SELECT max(time) AS t FROM cases')[0]['t']
    try:
        return newest_time(newest) - datetime.timedelta(days=days), newest
    except OverflowError:
        return datetime.datetime.min.replace(
            tzinfo=datetime.timezone.utc), newest


# long: the page's sections in page order
def build(store, outdir, title='ccl-health report', sizes=None, now=None,
          days=PAGE_DAYS, cache=None, inline=None, run_id=None):
    """Write ``outdir/index.html`` and its figures beside it (PNG files,
    :mod:`ccl_health.report.figures`: drawn only where their data changed
    since the figure in ``cache``, default ``outdir/.figures``; inline too
    on a small page, or as ``inline`` says); return (path of the page,
    terminal summary text).  ``sizes``: the trend sizes (``--sizes`` text,
    e.g. ``8,1M,1G`` or ``min,max``; default :data:`DEFAULT_TREND_SIZES`).
    The page is of the last ``days`` days recorded (:func:`page_window`),
    read bounded (:mod:`ccl_health.db.windowfindings`); a series with a finding, a
    failure or a change of version in it gets its own figures, the others
    one panel each in their group's figure (:func:`series_sections`).
    ``run_id``: the page of one night (the nightly's): its failures
    section lists that run's failures, not the window's."""
    from ccl_health.report import figures as figs_
    wanted = parse_trend_sizes(sizes)
    try:
        os.makedirs(outdir, exist_ok=True)
    except OSError as err:
        raise CclHealthError(f'--out {outdir}: cannot create the folder: '
                             f'{err.strerror or err}') from None
    if not os.access(outdir, os.W_OK | os.X_OK):
        raise CclHealthError(f'--out {outdir}: cannot write in the folder')
    since, newest = page_window(store, days)
    read = windowfindings.window_cases(store, since, kinds=CASE_KINDS)
    cases = case_rows(read)
    df = record_rows(windowfindings.window_cases(
        store, since, kinds=CASE_KINDS, records=True), cases)
    if sizes and df:
        measured = set(int(r['size']) for r in df if r['size'] is not None)
        missing = [w for w in wanted if w not in ('min', 'max')
                   and w not in measured]
        if missing:
            raise CclHealthError(
                f'trend size(s) {", ".join(map(format_size, missing))} never '
                f'recorded (recorded: '
                f'{", ".join(map(format_size, sorted(measured))) or "none"})')
    probes = probe_summary(store, since, now)
    table = summary_table(store, now=now, cases=cases, recs=df,
                          probes=probes)
    # the probes' findings: each node's of the last hours, its keys
    # counted in the database (never read probe by probe here)
    recent = max(since, newest_time(newest) - datetime.timedelta(
        hours=PROBE_FINDING_HOURS))
    how = {}
    findings = windowfindings.judge_keys(
        store, windowfindings.history_keys(read), since,
        {c['run_id'] for c in read}, standing=how)
    from ccl_health.db import keystate as state
    probe_findings = windowfindings.kept_findings(
        store, recent, runs=False, probes=True) if state.listed(store) \
        else windowfindings.judge_keys(store, {
            k for k in windowfindings.window_keys(store, recent)
            if k[7] == 'health probe'}, recent)
    findings += probe_findings
    failing = case_rows(windowfindings.window_cases(
        store, since, kinds=('health probe',), failing=True))
    everything = cases + failing
    figures = figs_.Figures(outdir, cache, inline)
    sections, healthy = series_sections(figures, df, cases, findings,
                                        wanted, sizes)
    health = health_sections(store, figures, since)
    nodes = node_trends(store, figures, node_rows(store, since,
                                                  probe_findings), since)
    figures.finish()
    from ccl_health.db import answers

    def shown(case):
        return answers.shown_reason(store, case)
    mine = everything
    if run_id is not None:
        mine = [c for c in everything if c['run_id'] == run_id]
    fails = failure_rows(mine, reason=shown, limit=FAILURES_LISTED)
    n_failures = sum(c['verdict'] not in GOOD for c in mine)
    # every finding of the series; the nodes' newest (every node with one
    # is in the nodes to look at)
    frows = finding_rows(
        [f for f in findings if f.key[7] != 'health probe'], store) + \
        finding_rows(probe_findings, store, limit=NODE_FINDINGS_LISTED)
    frows.sort(key=lambda r: (r['time'], r['run']), reverse=True)
    node_finding_rows = len({(f.kind, f.run_id, f.key)
                             for f in probe_findings})
    page = os.path.join(outdir, 'index.html')
    html = render_page(
        title=title, where=str(store.where),
        generated=(now or datetime.datetime.now(datetime.timezone.utc))
        .isoformat(timespec='seconds'),
        window=f'the {days:g} days to {newest}' if newest else 'nothing',
        summary=table, summary_columns=list(table[0]) if table else [],
        failure_counts=failure_counts(mine), night_run=run_id,
        failures=fails, n_failures=n_failures,
        skipped=failure_rows(cases, (Verdict.SKIPPED.value,), reason=shown),
        findings=frows, n_findings=len(findings), sections=sections,
        node_findings_left=max(0, node_finding_rows - NODE_FINDINGS_LISTED),
        healthy=healthy, health=health, nodes=nodes[:NODES_LISTED],
        n_nodes=len(nodes), probe_hours=PROBE_FINDING_HOURS,
        accepted=acceptance_rows(store.acceptances()),
        standing=list(how.values()),
        runs=len({c['run_id'] for c in cases}) +
        sum(p['runs'] for p in probes),
        trend_sizes=', '.join(w if isinstance(w, str) else format_size(w)
                              for w in wanted))
    try:
        # atomic, never through a link planted at the page's name
        safefile.write_atomic(page, html)
    except OSError as err:
        raise CclHealthError(f'{page}: cannot write the page: '
                             f'{err.strerror or err}') from None
    return page, terminal_summary(table, n_failures, findings)


#: what a series' figures are drawn from (the records' columns; their
#: time as a date too: :func:`ccl_health.report.plots.frame`)
FIGURE_COLUMNS = ('run_id', 'time', 'size', 'busbw', 'ref', 'tolerance',
                  'case_verdict', 'size_verdict', 'time_oop_us',
                  'time_ip_us')
#: what a trend is given of its series' cases (the broken runs)
TREND_CASE_COLUMNS = READ_ORDER + ('time', 'verdict')
#: the case columns a change of which makes a series need a look: its
#: versions (those of the "changed:" lines, less the node list, which
#: changes from job to job)
CHANGE_COLUMNS = tuple(k for k in ATTRIBUTION_FIELDS if k != 'nodelist')


def _series_of(finding):
    """The page's series (:data:`READ_ORDER`) of a finding's history key."""
    k = finding.key
    return (k[0] or '', k[1] or '', k[7], k[3] or '', k[2] or '',
            int(k[4] or 0), int(k[5] or 0), k[6] or '')


def needs_look(cases, findings):
    """The series (:data:`READ_ORDER` keys) of the window that need a look of
    their own: a finding against history, a case that is not good, or a
    change of version among its cases (:func:`case_rows`)."""
    out = {_series_of(f) for f in findings}
    for key, grp in _by_series(cases).items():
        if any(c['verdict'] not in GOOD for c in grp) or any(
                len({c[k] for c in grp}) > 1
                for k in CHANGE_COLUMNS if k in grp[0]):
            out.add(key)
    return out


def _panel_anchor(group, over):
    """The anchor (and figure name) of a group's small multiples."""
    return ('healthy_' if over == 'time' else 'once_') + _slug(
        f'{group[0]}:{group[1]} {group[2]}')


def _panel_size(grp):
    """The size a series is shown at in its group's figure: the largest
    with a reference, else the largest measured."""
    ref = [r['size'] for r in grp if r['ref'] is not None]
    return int(max(ref or [r['size'] for r in grp]))


def _columns(rows, columns):
    """``rows`` as tuples of ``columns``: what a figure is drawn from and
    its content hashed by (:mod:`ccl_health.report.figures`)."""
    return tuple(tuple(r[c] for c in columns) for r in rows)


# long: the sections of the series in page order
def series_sections(figures, df, cases, findings, wanted, sizes):
    """(one :class:`Section` per series measured, the :class:`Section` of
    each group's healthy series): a series that needs a look
    (:func:`needs_look`) gets its busbw and time per size and its trends
    at the ``wanted`` sizes; the others are a panel each of their group's
    (system, partition, kind) small multiples (:func:`plots.healthy`):
    over time, or per size where one run measured the series.  ``df``:
    :func:`record_rows`, ``cases``: :func:`case_rows`.  matplotlib and
    pandas are imported only to draw a figure whose content changed."""
    from ccl_health.report import plots
    sections, panels = [], {}
    if not df:
        return sections, []
    look = needs_look(cases, findings)
    measured = _by_series(r for r in df if r['busbw'] is not None and
                          r['kind'] not in NOT_PLOTTED)
    by_series = _by_series(cases)
    order = {k: i for i, k in enumerate(KINDS)}

    def sort_key(key):
        return (key[0], key[1], order[key[2]], key[3],
                transports.order(key[4]), key[5:])
    for key, grp in sorted(measured.items(), key=lambda kv: sort_key(kv[0])):
        title = series_name(key)
        slug = _slug(title)
        runs = len({r['run_id'] for r in grp})
        if key not in look:
            # over time at its largest referenced size; measured once:
            # its run per size
            over = 'time' if runs >= 2 else 'size'
            if over == 'time':
                size = _panel_size(grp)
                rows = _columns([r for r in grp if r['size'] == size],
                                ('time', 'busbw', 'ref', 'tolerance'))
                name = f'{series_name(key, group=False)} {format_size(size)}'
            else:
                rows = _columns(grp, ('size', 'busbw', 'ref', 'tolerance'))
                name = series_name(key, group=False)
            panels.setdefault((key[:3], over), []).append((name, rows))
            sections.append(Section(key, title, slug, (
                f'{runs} run(s): no finding, failure or change of version '
                f'in the window'), [], panel=_panel_anchor(key[:3], over)))
            continue
        data = _columns(sorted(grp, key=lambda r: (r['when'], r['size'])),
                        FIGURE_COLUMNS)
        figs = [figures.add(f'busbw_{slug}.png',
                            'busbw and time per message size',
                            lambda: plots.busbw_vs_size(plots.frame(
                                data, FIGURE_COLUMNS), None, key),
                            key, data)]
        ask = wanted if not sizes else [
            w for w in wanted if w in ('min', 'max') or
            w in {int(r['size']) for r in grp}]
        if runs >= 2:
            mine = _columns(by_series.get(key, []), TREND_CASE_COLUMNS)
            at = FIGURE_COLUMNS.index('size')
            for size in resolve_sizes(ask, [r['size'] for r in grp]):
                sub = tuple(r for r in data if r[at] == size)
                found = [f for f in findings if f.kind == 'drop' and
                         f.size == size and _series_of(f)[:7] == key[:7]]
                drops = sorted(f.run_id for f in found)
                figs.append(figures.add(
                    f'trend_{slug}_{format_size(size)}.png',
                    f'busbw at {format_size(size)} over time',
                    lambda sub=sub, size=size, found=found: plots.trend(
                        plots.frame(sub, FIGURE_COLUMNS), plots.frame(
                            mine, TREND_CASE_COLUMNS), key, size, found),
                    key, size, sub, mine, drops))
        note = (f'{runs} run(s) measured this series' +
                ('' if runs >= 2 else '; one run: no trend yet'))
        sections.append(Section(key, title, slug, note, figs))
    healthy = []
    for (group, over), items in sorted(
            panels.items(), key=lambda kv: (kv[0][0][:2],
                                            order[kv[0][0][2]], kv[0][1])):
        where = f'{group[0]}:{group[1]} {group[2]}'
        anchor = _panel_anchor(group, over)
        cols = (('time' if over == 'time' else 'size'), 'busbw', 'ref',
                'tolerance')
        figs = []
        for i in range(0, len(items), plots.PANELS):
            part = items[i:i + plots.PANELS]
            n = f'_{i // plots.PANELS + 1}' if len(items) > plots.PANELS \
                else ''
            figs.append(figures.add(
                f'{anchor}{n}.png', (
                    'busbw over time, one panel per series, at its largest '
                    'referenced size' if over == 'time' else
                    'busbw per message size of its one run, one panel per '
                    'series'), lambda part=part, over=over, cols=cols:
                plots.healthy([(t, plots.frame(r, cols)) for t, r in part],
                              over), over, [t for t, _ in part],
                *[r for _, r in part]))
        healthy.append(Section(group, (
            f'{where}: the series with nothing to look at' if over == 'time'
            else f'{where}: the series measured once, with nothing to look '
            f'at'), anchor, f'{len(items)} series: no finding, failure or '
            f'change of version in the window', figs))
    return sections, healthy


def acceptance_rows(rows):
    """The acceptances of new levels for the page, newest first."""
    out = []
    for a in reversed(rows):
        key = tuple(a[k] for k in KEY) + (a['kind'],)
        out.append({
            'id': a['id'], 'created': a['created'], 'who': a['who'],
            'what': where_text(key) + (f' at {format_size(a["size"])}'
                                       if a['size'] else ''),
            'run': a['run_id'], 'reason': a['reason'],
            'state': (f'undone by {a["undone_by"]} at {a["undone_at"]}'
                      if a['undone_at'] else 'in force')})
    return out


def render_page(**context):
    """The page from ``page.html.j2`` (jinja2, autoescaped)."""
    import jinja2
    env = jinja2.Environment(
        loader=jinja2.PackageLoader('ccl_health.report', '.'),
        autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True)
    env.filters['when'] = lambda t: str(t).replace('T', ' ')
    return env.get_template('page.html.j2').render(**context)


def terminal_summary(table, failures, findings):
    """The text printed by ``scripts/report``: the summary table, the
    ``failures`` counted, the newest findings (saying how many are left
    out)."""
    from tabulate import tabulate
    if not table:
        return 'no results yet'
    cols = ['system', 'partition', 'kind', 'collective', 'transport',
            'nodes x ranks', 'last verdict', 'last vs reference', 'runs',
            'failures', 'days since failure']
    text = tabulate([[r[c] for c in cols] for r in table], headers=cols,
                    tablefmt='simple')
    if failures:
        text += (f'\n\n{failures} failing or unjudged case(s) '
                 f'(all listed on the page, section Failures)')
    if findings:
        ordered = sorted(findings, key=lambda f: (f.time, f.run_id))
        shown = ordered[-TERMINAL_FINDINGS:]
        more = len(findings) - len(shown)
        text += (f'\n\nfindings against history: the newest {len(shown)} of '
                 f'{len(findings)}' + (f' ({more} older on the page)'
                                       if more else '') + '\n')
        text += '\n'.join(f.line() for f in shown)
    return text
