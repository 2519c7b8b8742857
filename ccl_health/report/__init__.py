"""The report people look at, from the performance database: one
self-contained HTML page (``index.html``, PNGs inline and beside it) and a
short terminal summary.

Everything is grouped by what was measured, never mixed: a *series* is one
(system, partition, kind, collective, transport, nodes, ranks, algo), where
the kind is a ``sweep`` (nccl-tests / rccl-tests), a ``health probe`` (the
node health hook), a ``fleet`` step or a ``framework`` benchmark (torch_*).
Per series: busbw
and time per message size over every size measured (log axes: the latency
region too), with the reference band (reference down to reference x
(1 - tolerance)); and busbw over time at the chosen sizes, with dates, the
band, and each drop labelled with its run.  The page also lists every
failure (reasons, fallbacks, hangs, build failures, aborted, unjudged) and
every drop against history with what changed (:func:`ccl_health.judge.attribution.attribute`).
The health probes are plotted as the machine's distribution over nodes per
day (:mod:`ccl_health.db.health_days`, computed in the database), never as
one series of every node; a node's own drops are findings naming it.  The
fleet's steps are on the fleet's own page (``fleet.html``), not plotted
here.

The page is a jinja2 template (``page.html.j2``, autoescaped); terminal
tables are tabulate."""

import base64
import dataclasses
import datetime
import os
import re
from typing import List

from ccl_health import CclHealthError
from ccl_health.sitedata import transports
from ccl_health.db import reads
from ccl_health.judge.history import HEALTHY, KEY, kind_of, where_text
from ccl_health.units import format_size, parse_size
from ccl_health.judge.verdicts import Verdict
from ccl_health.report.series import SERIES

#: the verdicts that are not failures (summary table)
GOOD = tuple(v.value for v in Verdict if v.good)

#: the kinds of case, in page order
KINDS = ('sweep', 'health probe', 'fleet', 'framework', 'other')
#: kinds not plotted as a series: the health probes (every node's: the
#: distribution per day instead, :func:`health_sections`) and the fleet's
#: steps (compared within their run, on the fleet's page)
NOT_PLOTTED = ('health probe', 'fleet')
#: days of the health probes' distribution listed per group (newest
#: first; the figure has every day)
HEALTH_DAYS_LISTED = 31
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
#: each node's history is read for them (:mod:`ccl_health.db.reads`)
PROBE_FINDING_HOURS = 24
#: failing cases listed on the page (newest first; all are counted)
FAILURES_LISTED = 500
#: the kinds read case by case for the page: the health probes are counted
#: in the database (:func:`probe_summary`, :func:`health_sections`)
CASE_KINDS = tuple(k for k in KINDS if k != 'health probe')


def _cases_frame(store, rows=None):
    import pandas as pd
    cases = pd.DataFrame(store.cases() if rows is None else rows)
    if cases.empty:
        return cases
    cases['kind'] = [kind_of(c) for c in cases.to_dict('records')]
    cases['when'] = pd.to_datetime(cases['time'], utc=True, format='ISO8601')
    for c in ('collective', 'transport', 'system', 'partition', 'algo'):
        cases[c] = cases[c].fillna('')
    for c in ('nodes', 'ranks'):
        cases[c] = pd.to_numeric(cases[c], errors='coerce').fillna(0) \
            .astype(int)
    return cases


def _frame(store, cases=None, rows=None):
    """One row per case and size, numbers as floats (NULL: NaN), with the
    case's kind and time."""
    import pandas as pd
    df = pd.DataFrame(store.records() if rows is None else rows)
    if df.empty:
        return df
    for c in _NUMERIC:
        df[c] = pd.to_numeric(df[c], errors='coerce')
    for c in ('collective', 'transport', 'system', 'partition', 'algo'):
        df[c] = df[c].fillna('')
    for c in ('nodes', 'ranks'):
        df[c] = df[c].fillna(0).astype(int)
    cases = _cases_frame(store) if cases is None else cases
    kinds = {(r['run_id'], r['case_name']): r['kind']
             for r in cases[['run_id', 'case_name', 'kind']]
             .to_dict('records')}
    df['kind'] = [kinds.get((r, n), 'other')
                  for r, n in zip(df['run_id'], df['case_name'])]
    df['when'] = pd.to_datetime(df['time'], utc=True, format='ISO8601')
    return df


def series_name(key):
    """``local:gpu sweep all_reduce intra 1n x 2r`` (+ algo when not the
    default)."""
    k = dict(zip(SERIES, key))
    algo = '' if k['algo'] in ('', 'default') else f' algo={k["algo"]}'
    return (f'{k["system"]}:{k["partition"]} {k["kind"]} '
            f'{k["collective"] or "-"} {k["transport"] or "-"} '
            f'{k["nodes"] or "?"}n x {k["ranks"] or "?"}r{algo}')


def _slug(text):
    return re.sub(r'[^A-Za-z0-9._-]+', '_', text).strip('_')


def summary_table(store, now=None, cases=None, recs=None, probes=()):
    """One row per series (system, partition, kind, collective, transport,
    nodes, ranks, algo): last verdict, last value vs reference at the
    largest referenced size, runs, failures, days since the last failure
    (of ``cases`` and their records ``recs``, default every case; and the
    rows of ``probes``: :func:`probe_summary`)."""
    import pandas as pd
    cases = _cases_frame(store) if cases is None else cases
    if cases.empty and not probes:
        return cases
    now = now or datetime.datetime.now(datetime.timezone.utc)
    recs = _frame(store, cases) if recs is None else recs
    rows = [dict(p) for p in probes]
    if cases.empty:
        cases = pd.DataFrame(columns=list(SERIES) + ['when'])
    for key, grp in cases.groupby(list(SERIES), sort=True):
        k = dict(zip(SERIES, key))
        grp = grp.sort_values('when')
        last = grp.iloc[-1]
        fails = grp[~grp['verdict'].isin(GOOD)]
        days = ((now - fails['when'].max()).days if not fails.empty
                else None)
        value = ''
        if not recs.empty:
            lastrec = recs[(recs['run_id'] == last['run_id']) &
                           (recs['case_name'] == last['case_name']) &
                           recs['ref'].notna() & recs['busbw'].notna()]
            if not lastrec.empty:
                big = lastrec.sort_values('size').iloc[-1]
                value = (f'{big["busbw"]:.2f} / {big["ref"]:.2f} GB/s at '
                         f'{format_size(int(big["size"]))}')
        rows.append({'system': k['system'], 'partition': k['partition'],
                     'kind': k['kind'], 'collective': k['collective'],
                     'transport': k['transport'],
                     'nodes x ranks': f'{k["nodes"] or "?"} x '
                                      f'{k["ranks"] or "?"}',
                     'algo': k['algo'],
                     'last run': str(last['time'])[:16].replace('T', ' '),
                     'last verdict': last['verdict'],
                     'last vs reference': value,
                     'runs': grp['run_id'].nunique(),
                     'failures': len(fails),
                     'days since failure': ('never failed' if days is None
                                            else days)})
    rows.sort(key=lambda r: (r['system'], r['partition'],
                             KINDS.index(r['kind']), r['collective'],
                             transports.order(r['transport'])))
    return pd.DataFrame(rows)


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
class Figure:
    name: str             # file name of the PNG
    caption: str
    png: bytes

    @property
    def b64(self):
        return base64.b64encode(self.png).decode()


@dataclasses.dataclass
class Section:
    """The plots of one series."""
    key: tuple
    title: str
    anchor: str
    note: str
    figures: List[Figure]


def failure_rows(cases, verdicts=None, reason=None):
    """Every case that is not good (failures and unjudged; or whose verdict
    is in ``verdicts``), grouped by kind then collective, newest first
    within a group; ``reason(case)`` says each one's reason (the page
    passes :func:`ccl_health.db.queries.shown_reason`, as ``scripts/report
    failed`` says it)."""
    if cases.empty:
        return []
    bad = cases[cases['verdict'].isin(verdicts) if verdicts else
                ~cases['verdict'].isin(GOOD)].copy()
    bad['_k'] = bad['kind'].map(KINDS.index)
    bad = bad.sort_values(['_k', 'collective', 'transport', 'when'],
                          ascending=[True, True, True, False])
    return [{'kind': r['kind'], 'collective': r['collective'] or '-',
             'transport': r['transport'] or '-', 'time': r['time'],
             'run': r['run_id'], 'where': f'{r["system"]}:{r["partition"]}',
             'case': r['case_name'], 'verdict': r['verdict'],
             'reason': (reason(r) if reason else r['reason']) or
             '(no reason recorded)'}
            for r in bad.to_dict('records')]


def failure_counts(cases):
    """Per kind and collective: how many cases per verdict (failing and
    unjudged only), for the failures section's overview."""
    rows = []
    if cases.empty:
        return rows
    bad = cases[~cases['verdict'].isin(GOOD)]
    for (kind, coll), grp in bad.groupby(['kind', 'collective'], sort=False):
        counts = grp['verdict'].value_counts()
        rows.append({'kind': kind, 'collective': coll or '-',
                     'cases': len(grp),
                     'verdicts': ', '.join(f'{n} {v}' for v, n in
                                           counts.items())})
    rows.sort(key=lambda r: (KINDS.index(r['kind']), r['collective']))
    return rows


def _short(text, limit=240):
    """A change as shown on the page: long values (an environment variable
    holding JSON) cut, the full text is in ``scripts/report detect``."""
    text = str(text)
    return text if len(text) <= limit else \
        text[:limit] + ' ... (in full: scripts/report detect)'


def finding_rows(findings, cases_list):
    """Findings against history, newest first, one row per kind, run and
    configuration (a drop usually hits many sizes at once: one row saying
    which sizes and how far, every size's line beneath it), drops with what
    changed since the last passing run (``cases_list``: the store, or case
    rows)."""
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
                     'lines': [f.line() for f in fs],
                     'changed': [_short(c) for c in
                                 reads.changed(cases_list, fs[0])]
                     if kind in ('drop', 'drift') else []})
    rows.sort(key=lambda r: (r['time'], r['run']), reverse=True)
    return rows


def newest_time(text):
    from ccl_health.db.queries import when
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


def probe_summary(store, since, now=None):
    """The summary rows of the health probes since ``since``, one per
    system, partition, collective, transport, nodes, ranks and algo over
    every node, counted in the database (never read probe by probe)."""
    from ccl_health.db.health_days import _is_probe
    from ccl_health.db.store import GOOD_SQL
    probe, params = _is_probe()
    g = ('system', 'partition', 'collective', 'transport', 'nodes',
         'ranks', 'algo')
    cols = ', '.join(f'c.{k}' for k in g)
    rows = store.query(
        f"""SELECT {cols}, COUNT(*) AS checks, MAX(c.time) AS last,
                   SUM(CASE WHEN c.verdict NOT IN {GOOD_SQL} THEN 1 ELSE 0
                       END) AS failures,
                   MAX(CASE WHEN c.verdict NOT IN {GOOD_SQL} THEN c.time
                       END) AS last_failure
            FROM cases c WHERE c.time >= ? AND {probe}
            GROUP BY {cols}""", (reads.sql_time(since),) + params)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    out = []
    for r in rows:
        last = store.query(
            f'SELECT c.id, c.verdict FROM cases c WHERE c.time = ? AND '
            f'{probe} AND ' + ' AND '.join(
                f'c.{k} IS NULL' if r[k] is None else f'c.{k} = ?'
                for k in g) + ' ORDER BY c.id DESC LIMIT 1',
            (r['last'],) + params + tuple(r[k] for k in g
                                          if r[k] is not None))[0]
        m = store.query('SELECT size, busbw, ref FROM measurements WHERE '
                        'case_id = ? AND ref IS NOT NULL AND busbw IS NOT '
                        'NULL ORDER BY size DESC LIMIT 1', (last['id'],))
        failed = newest_time(r['last_failure']) if r['last_failure'] \
            else None
        out.append({
            'system': r['system'] or '', 'partition': r['partition'] or '',
            'kind': 'health probe', 'collective': r['collective'] or '',
            'transport': r['transport'] or '',
            'nodes x ranks': f'{r["nodes"] or "?"} x {r["ranks"] or "?"}',
            'algo': r['algo'] or '',
            'last run': str(r['last'])[:16].replace('T', ' '),
            'last verdict': last['verdict'],
            'last vs reference': (f'{m[0]["busbw"]:.2f} / '
                                  f'{m[0]["ref"]:.2f} GB/s at '
                                  f'{format_size(int(m[0]["size"]))}'
                                  if m else ''),
            'runs': int(r['checks']), 'failures': int(r['failures'] or 0),
            'days since failure': ((now - failed).days if failed else
                                   'never failed')})
    return out


def build(store, outdir, title='ccl-health report', sizes=None, now=None,
          days=PAGE_DAYS):
    """Write ``outdir/index.html`` (PNG images inline) and the PNG files;
    return (path of the page, terminal summary text).  ``sizes``: the trend
    sizes (``--sizes`` text, e.g. ``8,1M,1G`` or ``min,max``; default
    :data:`DEFAULT_TREND_SIZES`).  The page is of the last ``days`` days
    recorded (:func:`page_window`), read bounded
    (:mod:`ccl_health.db.reads`)."""
    from ccl_health.report import plots
    wanted = parse_trend_sizes(sizes)
    try:
        os.makedirs(outdir, exist_ok=True)
    except OSError as err:
        raise CclHealthError(f'--out {outdir}: cannot create the folder: '
                             f'{err.strerror or err}') from None
    if not os.access(outdir, os.W_OK | os.X_OK):
        raise CclHealthError(f'--out {outdir}: cannot write in the folder')
    import pandas as pd
    since, newest = page_window(store, days)
    case_rows = reads.window_cases(store, since, kinds=CASE_KINDS)
    cases = _cases_frame(store, case_rows)
    df = _frame(store, cases, reads.window_cases(store, since,
                                                 kinds=CASE_KINDS,
                                                 records=True))
    if sizes and not df.empty:
        measured = set(int(s) for s in df['size'].dropna())
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
    # the probes' findings: each node's of the last hours
    recent = newest_time(newest) - datetime.timedelta(
        hours=PROBE_FINDING_HOURS)
    probe_rows = reads.window_cases(store, max(since, recent),
                                    kinds=('health probe',))
    how = {}
    findings = reads.judge_keys(
        store, reads.history_keys(case_rows), since,
        {c['run_id'] for c in case_rows}, standing=how) + reads.judge_keys(
        store, reads.history_keys(probe_rows), max(since, recent),
        {c['run_id'] for c in probe_rows}, standing=how)
    failing = _cases_frame(store, reads.window_cases(
        store, since, kinds=('health probe',), failing=True))
    everything = pd.concat([x for x in (cases, failing) if not x.empty]) \
        if not (cases.empty and failing.empty) else cases
    sections = []
    if not df.empty:
        measured = df[df['busbw'].notna() & ~df['kind'].isin(NOT_PLOTTED)]
        for key, grp in measured.groupby(list(SERIES), sort=False):
            title_ = series_name(key)
            slug = _slug(title_)
            figs = [Figure(f'busbw_{slug}.png',
                           'busbw and time per message size',
                           plots.busbw_vs_size(grp, cases, key))]
            runs = grp['run_id'].nunique()
            ask = wanted if not sizes else [
                w for w in wanted if w in ('min', 'max') or
                w in set(grp['size'].astype(int))]
            chosen = resolve_sizes(ask, grp['size'])
            if runs >= 2:
                for size in chosen:
                    figs.append(Figure(
                        f'trend_{slug}_{format_size(size)}.png',
                        f'busbw at {format_size(size)} over time',
                        plots.trend(grp, cases, key, size, findings)))
            note = (f'{runs} run(s) measured this series' +
                    ('' if runs >= 2 else '; one run: no trend yet'))
            sections.append(Section(key, title_, slug, note, figs))
        order = {k: i for i, k in enumerate(KINDS)}
        sections.sort(key=lambda s: (s.key[0], s.key[1], order[s.key[2]],
                                     s.key[3], transports.order(s.key[4]),
                                     s.key[5:]))
    health = health_sections(store, since)
    for sec in sections + health:
        for fig in sec.figures:
            with open(os.path.join(outdir, fig.name), 'wb') as fp:
                fp.write(fig.png)
    from ccl_health.db import queries

    def shown(case):
        return queries.shown_reason(store, case)
    fails = failure_rows(everything, reason=shown)
    frows = finding_rows(findings, store)
    page = os.path.join(outdir, 'index.html')
    html = render_page(
        title=title, where=str(store.where),
        generated=(now or datetime.datetime.now(datetime.timezone.utc))
        .isoformat(timespec='seconds'),
        window=f'the {days:g} days to {newest}' if newest else 'nothing',
        summary=table.to_dict('records') if not table.empty else [],
        summary_columns=list(table.columns),
        failure_counts=failure_counts(everything),
        failures=fails[:FAILURES_LISTED], n_failures=len(fails),
        skipped=failure_rows(cases, ('skipped',), reason=shown),
        findings=frows, n_findings=len(findings), sections=sections,
        health=health,
        accepted=acceptance_rows(store.acceptances()),
        standing=list(how.values()),
        runs=(int(cases['run_id'].nunique()) if not cases.empty else 0) +
        sum(p['runs'] for p in probes),
        trend_sizes=', '.join(w if isinstance(w, str) else format_size(w)
                              for w in wanted))
    try:
        with open(page, 'w', encoding='utf-8') as fp:
            fp.write(html)
    except OSError as err:
        raise CclHealthError(f'{page}: cannot write the page: '
                             f'{err.strerror or err}') from None
    return page, terminal_summary(table, fails, findings)


@dataclasses.dataclass
class HealthSection:
    """The health probes of one group (system, partition, transport,
    collective, ranks, size) over the nodes, per day."""
    title: str
    anchor: str
    rows: List[dict]          # newest day first, HEALTH_DAYS_LISTED at most
    days: int
    figures: List[Figure]


def health_sections(store, since=None):
    """The machine-wide view of the health probes: per group, the
    distribution of the nodes' busbw per day
    (:func:`ccl_health.db.health_days.health_days`, from the day of
    ``since``) as a table and a figure."""
    from ccl_health.db.health_days import GROUP, health_days
    from ccl_health.report import plots
    groups = {}
    for r in health_days(store, since.date().isoformat() if since
                         else None):
        groups.setdefault(tuple(r[k] for k in GROUP), []).append(r)
    out = []
    for key, rows in sorted(groups.items(),
                            key=lambda kv: tuple(map(str, kv[0]))):
        k = dict(zip(GROUP, key))
        title = (f'{k["system"]}:{k["partition"]} health probe '
                 f'{k["collective"] or "-"} {k["transport"] or "-"} '
                 f'{k["ranks"] or "?"}r {format_size(int(k["size"]))}')
        slug = _slug(title)
        out.append(HealthSection(
            title, f'nodes_{slug}',
            list(reversed(rows))[:HEALTH_DAYS_LISTED], len(rows),
            [Figure(f'nodes_{slug}.png', 'busbw over the nodes per day',
                    plots.health_days(rows))]))
    return out


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


def terminal_summary(table, fails, findings):
    """The text printed by ``scripts/report``: the summary table, the
    failures counted, the newest findings (saying how many are left
    out)."""
    from tabulate import tabulate
    if table.empty:
        return 'no results yet'
    cols = ['system', 'partition', 'kind', 'collective', 'transport',
            'nodes x ranks', 'last verdict', 'last vs reference', 'runs',
            'failures', 'days since failure']
    text = tabulate(table[cols].values.tolist(), headers=cols,
                    tablefmt='simple')
    if fails:
        text += (f'\n\n{len(fails)} failing or unjudged case(s) '
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
