"""The report's pictures (matplotlib, Agg), one series at a time: a series
is one (system, partition, kind, collective, transport, nodes, ranks, algo)
so that nothing measured differently is mixed into a line or a median.

Drawn cheaply, since a page may have many: the Agg canvas without pyplot,
one figure object per shape reused (cleared) from one picture to the next,
fixed margins instead of a layout pass, plain-text tick labels (no
mathtext) and a modest resolution (:data:`DPI`)."""

import io

from ccl_health.judge.series import READ_ORDER
from ccl_health.judge.verdicts import BROKEN, LOW
from ccl_health.units import format_size

_BAND = dict(color='tab:green', alpha=0.18)
#: resolution of the PNGs (the page shows them about 800 pixels wide)
DPI = 72
#: the figures, one per size in inches, reused (:func:`_figure`)
_FIGURES = {}


def _figure(width, height, **margins):
    """An empty figure of ``width`` x ``height`` inches on the Agg canvas,
    the same object each time for one size (cleared), with fixed margins
    (``left``, ``right``, ``bottom``, ``top``, ``wspace``, ``hspace``: no
    layout pass)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = _FIGURES.get((width, height))
    if fig is None:
        fig = Figure(figsize=(width, height), dpi=DPI)
        FigureCanvasAgg(fig)
        _FIGURES[(width, height)] = fig
    fig.clear()
    fig.subplots_adjust(**margins)
    return fig


#: the columns of a figure's rows that are numbers (None: NaN)
NUMBERS = ('size', 'busbw', 'ref', 'tolerance', 'time_oop_us', 'time_ip_us',
           'nodes', 'ranks')


def frame(rows, columns):
    """The frame (pandas) a figure is drawn from: ``rows`` (tuples of
    ``columns``, as the page hands them over and hashes them), numbers
    as numbers (None: NaN) and, beside a ``time``, its ``when`` (UTC).
    Only a figure that is drawn imports pandas."""
    import pandas as pd
    df = pd.DataFrame(list(rows), columns=list(columns))
    for c in NUMBERS:
        if c in df:
            df[c] = pd.to_numeric(df[c], errors='coerce')
    if 'time' in df:
        df['when'] = pd.to_datetime(df['time'], utc=True, format='ISO8601')
    return df


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=DPI)
    return buf.getvalue()


def _log_labels(axis):
    """Plain-text labels on a log axis (the default ones are mathtext,
    which costs more than the rest of a figure)."""
    import matplotlib.ticker as mt
    axis.set_major_formatter(mt.LogFormatter())
    axis.set_minor_formatter(mt.LogFormatter(labelOnlyBase=False,
                                             minor_thresholds=(1, 0.4)))


def _size_axis(ax):
    import matplotlib.ticker as mt
    ax.set_xscale('log', base=2)
    ax.xaxis.set_major_locator(mt.LogLocator(base=4))
    ax.xaxis.set_minor_locator(mt.NullLocator())
    ax.xaxis.set_major_formatter(mt.FuncFormatter(
        lambda x, _: format_size(int(round(x))) if x >= 1 else ''))
    for lab in ax.get_xticklabels():
        lab.set_rotation(45)
    ax.set_xlabel('message size')
    ax.grid(True, which='major', alpha=0.3)


def _band_rows(rows):
    """Rows with a reference; the band's low edge where a tolerance is
    recorded (NaN where not)."""
    ref = rows[rows['ref'].notna()]
    return ref, ref['ref'] * (1 - ref['tolerance'])


def busbw_vs_size(grp, cases, key):
    """:func:`busbw_figure` as PNG."""
    return _png(busbw_figure(grp, cases, key))


def busbw_figure(grp, cases, key):
    """The latest run of one series over every size it measured: busbw
    (log-log, the latency region included) with the reference band and
    the median of the earlier passing runs, and the time per call."""
    grp = grp.sort_values(['when', 'size'])
    last_run = grp['run_id'].iloc[-1]
    last = grp[grp['run_id'] == last_run].sort_values('size')
    earlier = grp[(grp['run_id'] != last_run) &
                  (grp['case_verdict'] == 'pass')]
    fig = _figure(11, 3.8, left=0.07, right=0.98, bottom=0.22, top=0.92,
                  wspace=0.22)
    ax, at = fig.subplots(1, 2)
    n_hist = earlier['run_id'].nunique()
    if n_hist:
        med = earlier.groupby('size')['busbw'].median()
        ax.plot(med.index, med.values, color='0.5', ls='--', lw=1,
                marker='.' if len(med) < 3 else None,
                label=f'median of {n_hist} earlier passing run'
                      f'{"s" if n_hist > 1 else ""}')
    ref, low = _band_rows(last)
    if not ref.empty:
        ax.plot(ref['size'], ref['ref'], color='tab:green', lw=1,
                marker='_' if len(ref) == 1 else None, ms=30,
                label='reference')
        if low.notna().any():
            if len(ref) == 1:
                ax.plot(ref['size'], low, color='tab:green', marker='_',
                        ms=30, ls='none', alpha=0.5,
                        label='ref x (1 - tolerance)')
            else:
                ax.fill_between(ref['size'], low, ref['ref'], **_BAND,
                                label='reference band (ref x (1 - '
                                      'tolerance))')
        else:
            ax.plot([], [], ' ', label='no tolerance recorded: no band')
    if ref.empty:
        ax.plot([], [], ' ', label='no reference recorded')
    verdict = last['case_verdict'].iloc[0]
    ax.plot(last['size'], last['busbw'], 'o-', color='tab:blue', ms=3,
            label=f'run {last_run} ({last["time"].iloc[0][:16]}, {verdict})')
    bad = last[last['size_verdict'].isin(LOW)]
    if not bad.empty:
        ax.plot(bad['size'], bad['busbw'], 'x', color='tab:red', ms=9,
                mew=2, label='below reference')
    _size_axis(ax)
    pos = last.loc[last['busbw'] > 0, 'busbw']
    if len(pos) and pos.max() > 20 * pos.min():
        ax.set_yscale('log')     # the latency region's small values too
        _log_labels(ax.yaxis)
    ax.set_ylabel('busbw (GB/s)')
    ax.set_title('bus bandwidth', fontsize=10)
    ax.legend(fontsize=7, loc='best')
    tcol = 'time_oop_us' if last['time_oop_us'].notna().any() else \
        'time_ip_us'
    t = last[last[tcol].notna() & (last[tcol] > 0)]
    if not t.empty:
        at.plot(t['size'], t[tcol], 'o-', color='tab:purple', ms=3,
                label=f'run {last_run}')
        at.set_yscale('log')
        _log_labels(at.yaxis)
        at.legend(fontsize=7, loc='upper left')
        _size_axis(at)
        at.set_ylabel('time per call (µs)')
        at.set_title('latency (time per call)', fontsize=10)
    else:
        at.axis('off')
        at.text(0.5, 0.5, 'no time per call recorded', ha='center',
                va='center', transform=at.transAxes, color='0.4')
    return fig


def trend(grp, cases, key, size, findings):
    """:func:`trend_figure` as PNG."""
    return _png(trend_figure(grp, cases, key, size, findings))


def trend_figure(grp, cases, key, size, findings):
    """busbw at one size over the runs of one series, dated; the reference
    band; drops labelled with their run; broken runs of the series (no
    value: hang, crash, build failure, ...) marked on the time axis."""
    import matplotlib.dates as mdates
    import pandas as pd
    k = dict(zip(READ_ORDER, key))
    sub = grp[grp['size'] == size].sort_values('when')
    fig = _figure(11, 3.0, left=0.07, right=0.8, bottom=0.2, top=0.9)
    ax = fig.subplots()
    refs = sub['ref'].ffill()
    if refs.notna().any():
        low = refs * (1 - sub['tolerance'].ffill())
        ax.plot(sub['when'], refs, color='tab:green', lw=1,
                drawstyle='steps-post', label='reference')
        if low.notna().any():
            ax.fill_between(sub['when'], low, refs, step='post', **_BAND,
                            label='reference band\n(ref x (1 - tolerance))')
        else:
            ax.plot([], [], ' ', label='no tolerance recorded: no band')
    ax.plot(sub['when'], sub['busbw'], 'o-', ms=3, color='tab:blue',
            label='busbw')
    keyf = (k['system'], k['partition'], k['transport'], k['collective'])
    drops = {f.run_id for f in findings if f.kind == 'drop' and
             f.size == size and tuple(f.key[:4]) == keyf and
             f.key[4] == k['nodes'] and f.key[5] == k['ranks'] and
             f.key[7] == k['kind']}
    below = sub[sub['size_verdict'] == 'below-reference']
    if not below.empty:
        ax.plot(below['when'], below['busbw'], 's', mfc='none',
                color='tab:orange', ms=8, label='below reference')
    d = sub[sub['run_id'].isin(drops)]
    pending = []
    if not d.empty:
        ax.plot(d['when'], d['busbw'], 'x', color='tab:red', ms=10, mew=2,
                label='drop against history')
        pending.append((list(zip(d['when'], d['busbw'], d['run_id'])),
                        'tab:red'))
    mine = cases
    for col in READ_ORDER:
        mine = mine[mine[col] == k[col]]
    broken = mine[mine['verdict'].isin(BROKEN)]
    if not broken.empty:
        when = pd.to_datetime(broken['time'], utc=True, format='ISO8601')
        ax.plot(when, [0] * len(when), 'v', color='black', ms=8,
                label='failed or not judged (no value)')
        pending.append(([(w, 0, v) for w, v in zip(when,
                                                   broken['verdict'])],
                        'black'))
    ax.set_ylim(bottom=0)
    levels = max([_labels(ax, pts, color) for pts, color in pending] or [0])
    if pending:
        # room above the highest point for its label's lines
        ax.set_ylim(top=ax.get_ylim()[1] * (1.1 + 0.12 * levels))
    ax.set_ylabel('busbw (GB/s)')
    ax.set_xlabel('run time (UTC)')
    loc = mdates.AutoDateLocator(tz='UTC')
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc, tz='UTC'))
    ax.set_title(f'busbw at {format_size(size)} over time', fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.01, 1))
    return fig


def _labels(ax, points, color):
    """Label each ``(when, value, text)`` of ``points`` above its point;
    labels whose points lie closer on the time axis than a label is wide
    are stacked one line higher each, with a leader line, so that no two
    labels overlap.  Returns the highest level used (0: one line)."""
    import matplotlib.dates as mdates
    lo, hi = ax.get_xlim()
    span = max(hi - lo, 1e-9)
    # the axes hold about 110 characters of 7 pt text across (11 in wide
    # figure, the legend beside it); a label is taken a little wider
    placed, top = [], 0
    for x, (w, v, text) in sorted(
            ((mdates.date2num(p[0]), p) for p in points), key=lambda p: p[0]):
        width = (len(str(text)) + 3) / 110 * span
        level = 0
        while any(lv == level and abs(x - px) < (width + pw) / 2
                  for px, pw, lv in placed):
            level += 1
        placed.append((x, width, level))
        top = max(top, level)
        ax.annotate(text, (w, v), textcoords='offset points',
                    xytext=(0, 8 + 10 * level), fontsize=7, color=color,
                    ha='center', va='bottom',
                    bbox=dict(boxstyle='round,pad=0.15', fc='white',
                              ec='none', alpha=0.85),
                    arrowprops=dict(arrowstyle='-', color=color, lw=0.5,
                                    alpha=0.6) if level else None)
    return top


def health_days(rows):
    """:func:`health_days_figure` as PNG."""
    return _png(health_days_figure(rows))


def health_days_figure(rows):
    """The health probes of the whole machine per day (rows of
    :func:`ccl_health.db.health_days.health_days`, one group): the median,
    the 10th percentile and the slowest node's busbw, and how many nodes
    were checked."""
    import pandas as pd
    import matplotlib.dates as mdates
    df = pd.DataFrame(rows)
    df['when'] = pd.to_datetime(df['day'], utc=True)
    fig = _figure(11, 3.0, left=0.07, right=0.72, bottom=0.2, top=0.9)
    ax = fig.subplots()
    # the median last: on top where the nodes agree (one node, one day)
    for col, style, colour, label in (
            ('min', 'v:', 'tab:red', 'slowest node'),
            ('p10', 's--', 'tab:orange', '10th percentile node'),
            ('median', 'o-', 'tab:blue', 'median node')):
        ax.plot(df['when'], df[col].astype(float), style, color=colour,
                ms=4 if len(df) > 30 else 7, label=label)
    ax.set_ylim(bottom=0)
    ax.set_ylabel('busbw (GB/s)')
    ax.set_xlabel('day (UTC)')
    nodes = ax.twinx()
    nodes.bar(df['when'], df['nodes'].astype(int), width=0.6, alpha=0.15,
              color='0.3', label='nodes checked')
    nodes.set_ylabel('nodes checked')
    nodes.yaxis.get_major_locator().set_params(integer=True)
    day = pd.Timedelta(days=1)
    ax.set_xlim(df['when'].min() - day, df['when'].max() + day)
    loc = mdates.AutoDateLocator(tz='UTC', minticks=3)
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc, tz='UTC'))
    ax.set_zorder(nodes.get_zorder() + 1)
    ax.patch.set_visible(False)
    ax.grid(True, alpha=0.3)
    lines, labels = ax.get_legend_handles_labels()
    bars, blabels = nodes.get_legend_handles_labels()
    ax.legend(lines + bars, labels + blabels, fontsize=7, loc='upper left',
              bbox_to_anchor=(1.08, 1))
    ax.set_title('health probe busbw over the nodes, per day', fontsize=10)
    return fig


#: panels a row of :func:`healthy_figure`, and at most per figure
PANEL_COLUMNS = 4
PANELS = 24


def healthy(panels, over='time'):
    """:func:`healthy_figure` as PNG."""
    return _png(healthy_figure(panels, over))


def healthy_figure(panels, over='time'):
    """Small multiples of the series that need no look of their own (no
    finding, failure or change in the window): one panel per series,
    ``panels`` a list of ``(title, rows)`` (at most :data:`PANELS`).
    ``over`` ``'time'``: ``rows`` are a series' values at one size
    (``when``, ``busbw``, ``ref``, ``tolerance``), busbw over time with
    the reference band, one time axis shared by every panel; ``'size'``:
    the one run of a series measured once (``size``, ``busbw``, ``ref``,
    ``tolerance``), busbw per message size with the reference band."""
    import math
    import matplotlib.dates as mdates
    import matplotlib.ticker as mt
    cols = max(1, min(PANEL_COLUMNS, len(panels)))
    nrows = max(1, math.ceil(len(panels) / cols))
    width, height = 0.3 + 2.7 * cols, 0.35 + 1.55 * nrows
    fig = _figure(width, height, left=0.45 / width, right=1 - 0.1 / width,
                  bottom=0.45 / height, top=1 - 0.3 / height, wspace=0.25,
                  hspace=0.55)
    axes = fig.subplots(nrows, cols, sharex=True, squeeze=False).ravel()
    x = 'when' if over == 'time' else 'size'
    for ax, (title, rows) in zip(axes, panels):
        rows = rows.sort_values(x)
        refs = rows['ref'].ffill() if over == 'time' else rows['ref']
        if refs.notna().any():
            low = refs * (1 - (rows['tolerance'].ffill() if over == 'time'
                               else rows['tolerance']))
            ax.plot(rows[x], refs, color='tab:green', lw=0.8,
                    drawstyle='steps-post' if over == 'time' else 'default',
                    marker='_' if refs.notna().sum() == 1 else None)
            if low.notna().sum() > 1:
                ax.fill_between(rows[x], low, refs, step='post' if
                                over == 'time' else None, **_BAND)
        ax.plot(rows[x], rows['busbw'], '.-', ms=3, lw=1.2,
                color='tab:blue')
        ax.set_title(title, fontsize=7)
        ax.tick_params(labelsize=6)
        pos = rows.loc[rows['busbw'] > 0, 'busbw']
        if over == 'size' and len(pos) and pos.max() > 20 * pos.min():
            ax.set_yscale('log')
            _log_labels(ax.yaxis)
        else:
            ax.set_ylim(bottom=0)
            ax.yaxis.set_major_locator(mt.MaxNLocator(3))
        ax.grid(True, alpha=0.3)
    for ax in axes[len(panels):]:
        ax.axis('off')
    for ax in axes[max(0, len(panels) - cols):len(panels)]:
        ax.xaxis.set_tick_params(labelbottom=True)   # each column's last
    if over == 'time':
        loc = mdates.AutoDateLocator(tz='UTC', maxticks=4)
        axes[0].xaxis.set_major_locator(loc)
        axes[0].xaxis.set_major_formatter(mdates.ConciseDateFormatter(
            loc, tz='UTC'))
    else:
        axes[0].set_xscale('log', base=2)
        axes[0].xaxis.set_major_locator(mt.LogLocator(base=1024))
        axes[0].xaxis.set_minor_locator(mt.NullLocator())
        axes[0].xaxis.set_major_formatter(mt.FuncFormatter(
            lambda v, _: format_size(int(round(v))) if v >= 1 else ''))
    return fig


def node_trend(rows, node):
    """One node's health probes over time as PNG: ``rows`` of
    :func:`ccl_health.report.health.node_trend_rows` (time, transport,
    size, busbw, verdict); one line per transport and size, a probe that
    was not good marked in red (at 0 where it measured nothing)."""
    import pandas as pd
    import matplotlib.dates as mdates
    df = pd.DataFrame(rows, columns=['time', 'transport', 'size', 'busbw',
                                     'verdict'])
    df['when'] = pd.to_datetime(df['time'], utc=True, format='ISO8601')
    fig = _figure(11, 2.6, left=0.07, right=0.72, bottom=0.22, top=0.88)
    ax = fig.subplots()
    for (transport, size), grp in df.groupby(['transport', 'size']):
        got = grp[grp['busbw'].notna()]
        ax.plot(got['when'], got['busbw'].astype(float), 'o-', ms=4,
                label=f'{transport} {format_size(int(size)) if size else ""}'
                .strip())
    bad = df[df['verdict'] != 'pass']
    if not bad.empty:
        ax.plot(bad['when'], bad['busbw'].fillna(0).astype(float), 'x',
                color='tab:red', ms=8, mew=2, label='not good')
    ax.set_ylim(bottom=0)
    ax.set_ylabel('busbw (GB/s)')
    ax.set_xlabel('probe time (UTC)')
    loc = mdates.AutoDateLocator(tz='UTC')
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc, tz='UTC'))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.01, 1))
    ax.set_title(f'{node}: health probes', fontsize=10)
    return _png(fig)
