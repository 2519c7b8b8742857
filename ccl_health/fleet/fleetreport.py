"""What a fleet run leaves: ``fleet.json`` (the summary), ``fleet.html``
(the page: per-node busbw distribution with the outliers marked, the
node-pair matrix or, for many nodes, the list of failed pairs, the rounds
on a timeline; inline SVG, no plotting library), and one record per step
in the performance database (:mod:`ccl_health.db.store`).  A simulated
run (``summary['simulated']``) says so on the page and in the run id of
its records (:data:`ccl_health.db.store.SIMULATED`)."""

import html
import json
import os
from typing import List

from ccl_health import safefile
from ccl_health.judge import series
from ccl_health.fleet.hostlist import natural_key
from ccl_health.judge.verdicts import Verdict

PAGE = 'fleet.html'
SUMMARY = 'fleet.json'
#: above this many nodes the pair matrix becomes a list of failed pairs
MATRIX_MAX = 64
#: up to this many nodes each bar of the per-node chart is named under it
NAMED_BARS = 64

#: the head of both pages (the fleet run and the back-to-service run)
_HEAD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{{ 'SIMULATED ' if s.get('simulated') else '' }}ccl-health fleet {{ s.run_id }}</title>
<style>
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 1.5em 2em;
       color: #222; max-width: 1150px; }
h2 { border-bottom: 2px solid #ccc; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left;
         vertical-align: top; }
th { background: #eee; }
.bad { color: #b00020; font-weight: bold; } .ok { color: #1a7f37; }
.unj { color: #9a6700; font-weight: bold; }
.note { color: #555; font-size: 0.9em; }
</style></head><body>
"""

_TEMPLATE = _HEAD + """<h1>{{ 'SIMULATED ' if s.get('simulated') else '' }}Fleet acceptance {{ s.run_id }}</h1>
{% if s.get('simulated') %}<p class="bad">SIMULATED: scripts/fleet --simulate
rehearsed the procedure on the simulated scheduler with a fault plan; no node
was measured and nothing here is a finding about the machine (recorded:
{{ s.get('recorded') or 'nothing' }}).</p>{% endif %}
<p class="note">{{ where + ': ' if where }}{{ s.nodes_checked }} nodes
checked in {{ '%.0f' % s.seconds }} s over {{ s.rounds|length }} rounds.</p>
<table>
<tr><th>healthy</th><td class="ok">{{ s.healthy|length }}</td></tr>
<tr><th>bad</th><td class="bad">{{ s.bad|length }}</td></tr>
<tr><th>suspect links</th><td>{{ s.suspect_links|length }}</td></tr>
<tr><th>suspect groups</th><td>{{ s.suspect_groups|length }}</td></tr>
<tr><th>stragglers</th><td>{{ s.stragglers|length }}</td></tr>
<tr><th>could not be checked</th><td class="unj">{{ s.could_not_check|length }}</td></tr>
<tr><th>not checked (Slurm state)</th><td>{{ s.not_checked|length }}</td></tr>
<tr><th>drained</th><td>{{ s.drained|join(', ') or '-' }}</td></tr>
{% if s.get('drain_held') %}<tr><th>not drained</th><td class="bad">{{ s.drain_held }}</td></tr>{% endif %}
{% if s.get('env_dropped') %}<tr><th>dropped from the caller's environment</th><td>{{ s.env_dropped|join(', ') }}</td></tr>{% endif %}
</table>
{% if s.get('systemic') %}<h2>Systemic</h2>
<p class="note">A failure shared by many nodes (or every node behind one
switch) is a common cause, not a fault of each node: nothing is drained
without --force.</p>
<table><tr><th>scope</th><th>nodes</th><th>finding</th></tr>
{% for f in s.systemic %}<tr><td class="bad">{{ f.scope }}</td><td>{{ f.nodes|length }}: {{ f.nodes[:16]|join(', ') }}</td><td>systemic: {{ f.reason }}</td></tr>
{% endfor %}</table>{% endif %}
<h2>Named</h2>
{% if named %}<table><tr><th>what</th><th>who</th><th>action</th><th>why</th></tr>
{% for what, who, act, why in named %}<tr><td class="{{ 'unj' if what == 'could not check' else 'bad' }}">{{ what }}</td><td>{{ who }}</td><td>{{ act }}</td><td>{{ why }}</td></tr>
{% endfor %}</table>{% else %}<p class="ok">nothing: every node healthy</p>{% endif %}
{% if s.get("skipped") %}<h2>Steps not run</h2>
<p class="note">A hung step whose NCCL RAS answer (or, without one, the
debug log that stopped first) named one of its nodes: that node is bad,
named by that source, and the bisection did not re-test it; the rest of the
step ran again as one step.</p>
<table><tr><th>round</th><th>node</th><th>named by</th><th>not run</th></tr>
{% for k in s.skipped %}<tr><td>{{ k.round }}</td><td class="bad">{{ k.node }}</td><td>{{ k.by }}</td><td>{{ k.reason }}</td></tr>
{% endfor %}</table>{% endif %}
{{ timeline_nodes }}
<h2>Per-node busbw (node check)</h2>
<p class="note">Each node's busbw from its node check; red: stragglers (below
median - k x 1.4826 x MAD and the floor), the dashed line: that baseline.</p>
{{ dist }}
<h2>Node pairs</h2>
{{ pairs }}
<h2>Rounds</h2>
{{ timeline }}
<table><tr><th>#</th><th>round</th><th>kind</th><th>steps</th><th>passed</th><th>started (s)</th><th>seconds</th></tr>
{% for r in s.rounds %}<tr><td>{{ loop.index }}</td><td>{{ r.name }}</td><td>{{ r.kind }}</td><td>{{ r.steps }}</td><td>{{ r.results|selectattr('verdict', 'equalto', 'pass')|list|length }}</td><td>{{ '%.1f' % r.started }}</td><td>{{ '%.1f' % r.seconds }}</td></tr>
{% endfor %}</table>
</body></html>
"""


def _e(text):
    return html.escape(str(text), quote=True)


def distribution_svg(busbw, marked, threshold=None, width=900, height=220):
    """A strip of per-node busbw (sorted), outliers in red; each bar
    named by its node under it (up to :data:`NAMED_BARS` nodes; more: in
    each bar's tooltip)."""
    items = sorted(busbw.items(), key=lambda kv: kv[1])
    if not items:
        return '<p class="note">no node busbw (no node check reported one)</p>'
    top = max(v for _, v in items) * 1.1 or 1.0
    n = len(items)
    pad = 40
    w = (width - 2 * pad) / max(1, n)
    base = height - 20                    # the bars' baseline
    named = n <= NAMED_BARS
    room = 6 + 5 * max(len(str(k)) for k, _ in items) if named else 0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height + room}" role="img" aria-label="per-node busbw">',
           f'<text x="4" y="14" font-size="11">GB/s (max {top / 1.1:.1f})'
           f'</text>']
    for i, (node, v) in enumerate(items):
        h = (height - 40) * v / top
        x = pad + i * w
        colour = '#b00020' if node in marked else '#4a7ab5'
        out.append(f'<rect x="{x:.2f}" y="{base - h:.2f}" '
                   f'width="{max(w - 0.5, 0.5):.2f}" height="{h:.2f}" '
                   f'fill="{colour}"><title>{_e(node)}: {v:.2f} GB/s'
                   f'</title></rect>')
        if named:            # the bar's node, under it
            cx, cy = x + w / 2, base + 4
            out.append(f'<text x="{cx:.2f}" y="{cy:.2f}" font-size="9" '
                       f'text-anchor="end" transform="rotate(-60 {cx:.2f} '
                       f'{cy:.2f})">{_e(node)}</text>')
    if threshold:
        y = base - (height - 40) * threshold / top
        out.append(f'<line x1="{pad}" x2="{width - pad}" y1="{y:.2f}" '
                   f'y2="{y:.2f}" stroke="#b00020" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{pad if not named else 4}" y="{height + room - 4}" '
               f'font-size="11">{n} nodes, slowest left</text></svg>')
    return '\n'.join(out)


def pair_steps(summary):
    """``[(a, b, verdict, busbw, reason, round)]`` of every 2-node step."""
    out = []
    for r in summary['rounds']:
        for res in r['results']:
            if len(res['nodes']) == 2:
                out.append((res['nodes'][0], res['nodes'][1],
                            res['verdict'], res['busbw'], res['reason'],
                            r['name']))
    return out


def pairs_html(summary):
    steps = pair_steps(summary)
    if not steps:
        return '<p class="note">no pair steps</p>'
    nodes = sorted({n for a, b, *_ in steps for n in (a, b)},
                   key=natural_key)
    links = {frozenset((a, b)) for a, b, _ in summary['suspect_links']}
    if len(nodes) > MATRIX_MAX:
        bad = [s for s in steps if s[2] != 'pass' or
               frozenset(s[:2]) in links]
        rows = ''.join(f'<tr><td>{_e(a)}</td><td>{_e(b)}</td>'
                       f'<td>{_e(rnd)}</td><td>{_e(v)}</td><td>{_e(why)}</td>'
                       f'</tr>' for a, b, v, bw, why, rnd in bad)
        return (f'<p class="note">{len(steps)} pair steps over {len(nodes)} '
                f'nodes; the failed ones:</p><table><tr><th>a</th><th>b</th>'
                f'<th>round</th><th>verdict</th><th>why</th></tr>{rows}'
                f'</table>')
    idx = {n: i for i, n in enumerate(nodes)}
    cell = 12
    pad = 70
    size = pad + cell * len(nodes) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" '
           f'height="{size}" role="img" aria-label="node-pair matrix">']
    for n, i in idx.items():
        out.append(f'<text x="{pad - 4}" y="{pad + i * cell + 9}" '
                   f'font-size="9" text-anchor="end">{_e(n)}</text>')
        out.append(f'<text x="{pad + i * cell + 9}" y="{pad - 4}" '
                   f'font-size="9" transform="rotate(-90 {pad + i * cell + 9}'
                   f' {pad - 4})">{_e(n)}</text>')
    for a, b, v, bw, why, rnd in steps:
        bad = v != 'pass' or frozenset((a, b)) in links
        colour = '#b00020' if bad else '#1a7f37'
        tip = f'{a}-{b} {rnd}: {v}' + (f' {bw:.1f} GB/s' if bw else '') + (
            f' {why}' if why else '')
        for x, y in ((idx[a], idx[b]), (idx[b], idx[a])):
            out.append(f'<rect x="{pad + x * cell}" y="{pad + y * cell}" '
                       f'width="{cell - 1}" height="{cell - 1}" '
                       f'fill="{colour}"><title>{_e(tip)}</title></rect>')
    out.append('</svg>')
    return '\n'.join(out)


def timeline_svg(rounds, width=900):
    if not rounds:
        return ''
    end = max(r['started'] + r['seconds'] for r in rounds) or 1.0
    row = 16
    pad = 120
    height = row * len(rounds) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" role="img" aria-label="rounds">']
    for i, r in enumerate(rounds):
        x = pad + (width - pad - 10) * r['started'] / end
        w = max(1.0, (width - pad - 10) * r['seconds'] / end)
        bad = any(res['verdict'] != 'pass' for res in r['results'])
        out.append(f'<text x="{pad - 4}" y="{i * row + 12}" font-size="10" '
                   f'text-anchor="end">{_e(r["name"])}</text>')
        out.append(f'<rect x="{x:.1f}" y="{i * row + 2}" width="{w:.1f}" '
                   f'height="{row - 4}" fill="'
                   f'{"#d9822b" if bad else "#4a7ab5"}"><title>'
                   f'{_e(r["name"])}: {r["steps"]} steps, '
                   f'{r["seconds"]:.1f} s</title></rect>')
    out.append(f'<text x="{pad}" y="{height - 6}" font-size="10">0 s</text>'
               f'<text x="{width - 60}" y="{height - 6}" font-size="10">'
               f'{end:.0f} s</text></svg>')
    return '\n'.join(out)


def named_rows(s):
    acts = s.get('actions') or {}
    rows = [('bad', n, acts.get(n, ''), why) for n, why in s['bad'].items()]
    rows += [('suspect link', f'{a} - {b}', acts.get(f'{a}-{b}', ''), why)
             for a, b, why in s['suspect_links']]
    rows += [('suspect group', ', '.join(g['nodes']),
              acts.get(','.join(g['nodes']), ''), g['reason'])
             for g in s.get('suspect_groups', [])]
    rows += [('straggler', n, acts.get(n, ''), why)
             for n, why in s['stragglers'].items()]
    rows += [('could not check', n, '', why)
             for n, why in s['could_not_check'].items()]
    return rows


def node_timeline_html(timeline):
    """Each node's drain / check / resume steps (the state of
    ``scripts/fleet --resume``, :mod:`ccl_health.fleet.resume`)."""
    if not timeline:
        return ''
    rows = []
    for node, events in sorted(timeline.items()):
        for i, e in enumerate(events):
            cls = {'drain': 'bad', 'fail': 'bad', 'resume': 'ok',
                   'pass': 'ok', 'could-not-check': 'unj'}.get(
                       e.get('event'), '')
            rows.append(f'<tr><td>{_e(node) if i == 0 else ""}</td>'
                        f'<td>{_e(e.get("time", ""))}</td>'
                        f'<td class="{cls}">{_e(e.get("event", ""))}</td>'
                        f'<td>{_e(e.get("reason", ""))}</td></tr>')
    return ('<h2>Drain / resume timeline</h2><p class="note">Every drain '
            'by ccl-health, every re-check of scripts/fleet --resume and '
            'every resume, per node.</p><table><tr><th>node</th><th>time'
            '</th><th>step</th><th>reason</th></tr>' + ''.join(rows) +
            '</table>')


def render(summary):
    import jinja2
    from markupsafe import Markup
    from ccl_health.fleet import plan
    cfg = summary.get('config', {})
    b = plan.baseline(list(summary.get('node_busbw', {}).values()),
                      cfg.get('straggler_k', 3.0),
                      cfg.get('straggler_floor', plan.FLOOR))
    env = jinja2.Environment(autoescape=True,
                             undefined=jinja2.StrictUndefined)
    s = dict(summary)
    s.setdefault('run_id', '')
    s.setdefault('system', '')
    s.setdefault('partition', '')
    where = ':'.join(x for x in (s['system'], s['partition']) if x)
    return env.from_string(_TEMPLATE).render(
        s=s, named=named_rows(s), where=where,
        dist=Markup(distribution_svg(s.get('node_busbw', {}),
                                     set(s['stragglers']),
                                     b.threshold if b else None)),
        pairs=Markup(pairs_html(s)), timeline=Markup(timeline_svg(
            s['rounds'])),
        timeline_nodes=Markup(node_timeline_html(s.get('timeline'))))


_RESUME = _HEAD + """<h1>{{ 'SIMULATED ' if s.get('simulated') else '' }}Back to service {{ s.run_id }}</h1>
<p class="note">scripts/fleet --resume: only nodes drained with a reason
starting "ccl-health:" are re-checked (node check, then a pair with a
healthy partner); {{ s.system }} {{ s.partition }}, {{ '%.0f' % s.seconds }} s.</p>
<table><tr><th>node</th><th>result</th><th>reason now</th></tr>
{% for n in s.resumed %}<tr><td>{{ n }}</td><td class="ok">resumed</td><td>-</td></tr>
{% endfor %}{% for n, why in s.kept.items() %}<tr><td>{{ n }}</td><td class="{{ 'bad' if n in s.bad else ('unj' if n in s.could_not_check else 'ok') }}">{{ 'failed again' if n in s.bad else ('could not check' if n in s.could_not_check else 'passed, drained until the next check') }}</td><td>{{ why }}</td></tr>
{% endfor %}{% for n, why in s.left_alone.items() %}<tr><td>{{ n }}</td><td>left alone</td><td>{{ why }}</td></tr>
{% endfor %}</table>
{{ timeline_nodes }}
</body></html>
"""


def write_resume(summary, run_dir):
    """``fleet.json`` and ``fleet.html`` of a ``--resume`` run."""
    os.makedirs(run_dir, exist_ok=True)
    try:
        import jinja2
        from markupsafe import Markup
    except ImportError as err:
        summary['page'] = f'not written: {err}'
    else:
        env = jinja2.Environment(autoescape=True,
                                 undefined=jinja2.StrictUndefined)
        s = dict(summary)
        page = env.from_string(_RESUME).render(
            s=s, timeline_nodes=Markup(node_timeline_html(
                s.get('timeline'))))
        safefile.write_atomic(os.path.join(run_dir, PAGE), page)
        summary['page'] = os.path.join(run_dir, PAGE)
    safefile.write_json(os.path.join(run_dir, SUMMARY), summary)


def write(summary, run_dir):
    """``fleet.json`` and ``fleet.html`` in ``run_dir``; the page is left
    out (with a note in the summary) when jinja2 is missing."""
    os.makedirs(run_dir, exist_ok=True)
    try:
        page = render(summary)
    except ImportError as err:
        summary['page'] = f'not written: {err}'
    else:
        safefile.write_atomic(os.path.join(run_dir, PAGE), page)
        summary['page'] = os.path.join(run_dir, PAGE)
    safefile.write_json(os.path.join(run_dir, SUMMARY), summary)


def cases(summary, cfg) -> List:
    """One :class:`~ccl_health.db.store.CaseRecord` per step of the run."""
    from ccl_health.db import store
    run_id = (series.SIMULATED if summary.get('simulated') else '') + \
        f'fleet-{summary.get("run_id", "")}'
    out = []
    for r in summary['rounds']:
        for i, res in enumerate(r['results']):
            nodes = res['nodes']
            kind = 'node' if r['kind'] == 'node' and len(nodes) == 1 else (
                'pair' if len(nodes) == 2 else 'group')
            name = (f'fleet-{kind} {r["name"]} {nodes[0]}' if len(nodes) < 3
                    else f'fleet-{kind} {r["name"]} #{i} {nodes[0]}..'
                    f'{nodes[-1]}')
            if len(nodes) == 2:
                name = f'fleet-pair {r["name"]} {nodes[0]}-{nodes[1]}'
            verdict = str(Verdict.parse(res['verdict']))
            sizes = []
            if res.get('busbw') is not None and kind != 'node':
                sizes.append(store.SizeRecord(cfg.size_bytes, res['busbw'],
                                              verdict=verdict))
            out.append(store.CaseRecord(
                run_id=run_id, case_name=name, verdict=verdict,
                system=summary.get('system', ''),
                partition=summary.get('partition', ''),
                nodelist=','.join(nodes), nodes=len(nodes),
                ranks=len(nodes) * (1 if kind == 'node' else
                                    cfg.tasks_per_node),
                collective='all_reduce',
                transport='intra' if kind == 'node' else cfg.transport,
                reason=_with_action(summary, res, kind), source='fleet',
                sizes=sizes))
    if summary.get('mode') == 'resume':
        out += resume_cases(summary, run_id)
    return out


def _with_action(summary, res, kind):
    """A failed node step of a bad node: its reason with the action
    first (``isolate: ...``); a hung step that named a node: with the node
    and what named it."""
    why = res.get('reason', '')
    named = res.get('named')
    if isinstance(named, dict) and named.get('node'):
        why += f'; names {named["node"]} (by {named.get("by", "")})'
    acts = summary.get('actions') or {}
    node = res['nodes'][0]
    if kind == 'node' and node in summary.get('bad', {}) and \
            node in acts and res.get('verdict') != 'pass':
        return f'{acts[node]}: {why}'
    return why


def resume_cases(summary, run_id):
    """One record per node of a ``--resume`` run: resumed, kept drained
    (with its reason now) or left as it was."""
    from ccl_health.db import store
    out = []
    for n in summary['candidates']:
        if n in summary['resumed']:
            v, why = 'pass', 'resumed: ' + next(
                (e['reason'] for e in reversed(summary['timeline'].get(n, []))
                 if e['event'] == 'resume'), '')
        elif n in summary['bad']:
            v = 'crash'
            why = f'kept drained: {summary["kept"].get(n, "")}: ' \
                  f'{summary["bad"][n]}'
        elif n in summary['could_not_check']:
            v, why = 'could-not-check', (f'kept drained: '
                                         f'{summary["could_not_check"][n]}')
        else:
            v, why = 'pass', f'kept drained: {summary["kept"].get(n, "")}'
        out.append(store.CaseRecord(
            run_id=run_id, case_name=f'fleet-resume {n}', verdict=v,
            system=summary.get('system', ''),
            partition=summary.get('partition', ''), nodelist=n, nodes=1,
            reason=why, source='fleet'))
    return out


def record(summary, db, cfg):
    from ccl_health.db import store
    with store.open_store(db) as st:
        st.add_cases(cases(summary, cfg))     # one transaction
