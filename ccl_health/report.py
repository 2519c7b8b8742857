"""Pictures and tables people look at, from the performance database:
busbw vs message size per transport (reference band shown), the nightly
trend per key size (drops and hangs marked), and a summary table; written as
one self-contained HTML page plus a short terminal summary."""

import base64
import datetime
import html
import io
import os

from . import transports
from .history import HEALTHY, detect
from .units import format_size
from .verdict import FAILING, UNJUDGED, Verdict

#: verdicts marked on the trend plots: every failure or unjudged case that is
#: not a measured value (those are plotted as values)
BROKEN = tuple(v for v in FAILING + UNJUDGED if v not in HEALTHY + ('drop',))
#: the verdicts that are not failures (summary table)
GOOD = tuple(v.value for v in Verdict if v.good)


def _frame(store):
    import pandas as pd
    df = pd.DataFrame(store.records())
    if df.empty:
        return df
    df['when'] = pd.to_datetime(df['time'], utc=True, format='ISO8601')
    return df


def summary_table(store, now=None):
    """Per system/partition/transport: last verdict, last value vs reference
    at the largest referenced size, days since the last failure."""
    import pandas as pd
    cases = pd.DataFrame(store.cases())
    if cases.empty:
        return cases
    cases['when'] = pd.to_datetime(cases['time'], utc=True, format='ISO8601')
    now = now or datetime.datetime.now(datetime.timezone.utc)
    recs = _frame(store)
    rows = []
    for (system, part, transport), grp in cases.groupby(
            ['system', 'partition', 'transport'], sort=True):
        grp = grp.sort_values('when')
        last = grp.iloc[-1]
        fails = grp[~grp['verdict'].isin(GOOD)]
        days = ((now - fails['when'].max()).days if not fails.empty
                else None)
        lastrec = recs[(recs['run_id'] == last['run_id']) &
                       (recs['case_name'] == last['case_name']) &
                       recs['ref'].notna()]
        value = ''
        if not lastrec.empty:
            big = lastrec.sort_values('size').iloc[-1]
            value = (f'{big["busbw"]:.2f} / {big["ref"]:.2f} GB/s at '
                     f'{format_size(int(big["size"]))}')
        rows.append({'system': system, 'partition': part,
                     'transport': transport, 'last run': last['time'],
                     'last verdict': last['verdict'],
                     'last vs reference': value,
                     'runs': len(grp), 'failures': len(fails),
                     'days since failure': ('never failed' if days is None
                                            else days)})
    # transports in the report order of the registry, not alphabetical
    rows.sort(key=lambda r: (r['system'], r['partition'],
                             transports.order(r['transport'])))
    return pd.DataFrame(rows)


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=100, bbox_inches='tight')
    return buf.getvalue()


def plot_busbw_vs_size(df, system, partition, transport):
    """The latest run of one transport: busbw per size, log x, with the
    reference band (reference down to its tolerance) and the history's
    median."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401
    sub = df[(df['system'] == system) & (df['partition'] == partition) &
             (df['transport'] == transport) & df['busbw'].notna()]
    fig, ax = plt.subplots(figsize=(7, 4))
    last_run = sub.sort_values('when')['run_id'].iloc[-1]
    last = sub[sub['run_id'] == last_run].sort_values('size')
    hist = sub[sub['case_verdict'] == 'pass'].groupby('size')['busbw'] \
        .median()
    if len(hist):
        ax.plot(hist.index, hist.values, color='0.6', ls='--',
                label=f'median of {sub["run_id"].nunique()} runs')
    ref = last[last['ref'].notna()]
    if not ref.empty:
        ax.fill_between(ref['size'], ref['ref'] * (1 - ref['tolerance']),
                        ref['ref'], color='tab:green', alpha=0.2,
                        label='reference band')
    bad = last[last['size_verdict'] == 'below-reference']
    ax.plot(last['size'], last['busbw'], 'o-', color='tab:blue', ms=3,
            label=f'last run ({last["time"].iloc[0][:16]})')
    if not bad.empty:
        ax.plot(bad['size'], bad['busbw'], 'x', color='tab:red', ms=9,
                label='below reference')
    ax.set_xscale('log', base=2)
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=2 ** 5))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
        lambda x, _: format_size(int(x)) if x >= 1 else ''))
    ax.set_xlabel('message size')
    ax.set_ylabel('busbw (GB/s)')
    ax.set_title(f'{system}:{partition} {transport} '
                 f'{last["collective"].iloc[0]} ({last["case_verdict"].iloc[0]})')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend(fontsize=8)
    data = _png(fig)
    plt.close(fig)
    return data


def plot_trend(df, cases, system, partition, transport, size, findings):
    """busbw at one size over the runs, drops marked, hangs and other broken
    runs marked on the time axis."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import pandas as pd
    sub = df[(df['system'] == system) & (df['partition'] == partition) &
             (df['transport'] == transport) & (df['size'] == size)] \
        .sort_values('when')
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.plot(sub['when'], sub['busbw'], 'o-', ms=3, color='tab:blue',
            label='busbw')
    drops = {f.run_id for f in findings if f.kind == 'drop' and
             f.size == size and f.key[2] == transport}
    d = sub[sub['run_id'].isin(drops)]
    if not d.empty:
        ax.plot(d['when'], d['busbw'], 'x', color='tab:red', ms=10, mew=2,
                label='drop')
    if sub['ref'].notna().any():
        ax.axhline(sub['ref'].dropna().iloc[-1], color='tab:green', ls=':',
                   label='reference')
    broken = cases[(cases['system'] == system) &
                   (cases['partition'] == partition) &
                   (cases['transport'] == transport) &
                   cases['verdict'].isin(BROKEN)]
    if not broken.empty:
        when = pd.to_datetime(broken['time'], utc=True, format='ISO8601')
        ax.plot(when, [0] * len(when), 'v', color='black', ms=8,
                label='failed or not judged')
        for w, v in zip(when, broken['verdict']):
            ax.annotate(v, (w, 0), textcoords='offset points', xytext=(0, 6),
                        fontsize=7, ha='center')
    ax.set_ylim(bottom=0)
    ax.set_ylabel('busbw (GB/s)')
    ax.set_title(f'{system}:{partition} {transport} at {format_size(size)}')
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    data = _png(fig)
    plt.close(fig)
    return data


def key_sizes(sizes):
    """The sizes worth a trend: those nearest 64 MiB and 1 GiB, and the
    largest."""
    sizes = sorted(set(int(s) for s in sizes))
    if not sizes:
        return []
    near = {min(sizes, key=lambda s: abs(s - target))
            for target in (64 << 20, 1 << 30)}
    return sorted(near | {sizes[-1]})


def build(store, outdir, title='ccl-health report'):
    """Write ``outdir/index.html`` (PNG images inline) and the PNG files;
    return (path of the page, terminal summary text)."""
    import pandas as pd
    os.makedirs(outdir, exist_ok=True)
    df = _frame(store)
    cases = pd.DataFrame(store.cases())
    table = summary_table(store)
    findings = detect(store.records())
    parts = [f'<h1>{html.escape(title)}</h1>',
             f'<p>generated {datetime.datetime.now().isoformat(timespec="seconds")}'
             f' from {html.escape(str(store.where))}</p>',
             '<h2>Summary</h2>',
             table.to_html(index=False) if not table.empty else
             '<p>no results yet</p>']
    if findings:
        parts.append('<h2>Findings against history</h2><ul>' + ''.join(
            f'<li>{html.escape(f.line())}</li>' for f in findings[-50:]) +
            '</ul>')
    images = []
    if not df.empty:
        for (system, part, transport), grp in df[df['busbw'].notna()] \
                .groupby(['system', 'partition', 'transport'], sort=True):
            images.append((f'busbw_{system}_{part}_{transport}.png',
                           plot_busbw_vs_size(df, system, part, transport)))
            for size in key_sizes(grp['size']):
                images.append((f'trend_{system}_{part}_{transport}_'
                               f'{format_size(size)}.png',
                               plot_trend(df, cases, system, part, transport,
                                          size, findings)))
    parts.append('<h2>Plots</h2>')
    for name, data in images:
        with open(os.path.join(outdir, name), 'wb') as fp:
            fp.write(data)
        b64 = base64.b64encode(data).decode()
        parts.append(f'<figure><img alt="{name}" src="data:image/png;base64,'
                     f'{b64}"><figcaption>{name}</figcaption></figure>')
    page = os.path.join(outdir, 'index.html')
    with open(page, 'w') as fp:
        fp.write('<!doctype html><html><head><meta charset="utf-8"><title>'
                 f'{html.escape(title)}</title><style>body{{font-family:'
                 'sans-serif;margin:2em}}table{{border-collapse:collapse}}'
                 'td,th{{border:1px solid #ccc;padding:2px 6px}}</style>'
                 '</head><body>' + '\n'.join(parts) + '</body></html>\n')
    text = table.to_string(index=False) if not table.empty else \
        'no results yet'
    if findings:
        text += '\n' + '\n'.join(f.line() for f in findings[-20:])
    return page, text
