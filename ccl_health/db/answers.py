"""The questions people ask of the performance database.

A question about something the database never recorded (a misspelt
transport, system or run id, a size never measured, a window with no runs)
is an error that lists what was recorded, never an empty answer that reads
as an all-clear."""

import datetime
import re

from ccl_health import CclHealthError
from ccl_health.db import changedcases, scopes, windowfindings
from ccl_health.db import inlists, keyhistory
from ccl_health.db import newestruns
from ccl_health.db.newestruns import of_cases
from ccl_health.db.keyhistory import when
from ccl_health.judge.series import simulated
from ccl_health.judge.finding import where_text
from ccl_health.judge.series import PROBE_KIND, STORED_ORDER
from ccl_health.units import format_size, parse_size
from ccl_health.judge import casejudge as judge
from ccl_health.judge.verdicts import NAMES, Verdict


def stored_verdict(name):
    """The :class:`Verdict` of a name read from the database; a name this
    version does not know (written by another tool) counts as
    could-not-check, never as good."""
    return Verdict.parse(name, default=Verdict.COULD_NOT_CHECK)


def _bad(name):
    return not stored_verdict(name).good


# -- what exists -------------------------------------------------------------
def recorded(store, column):
    """The distinct values of a case column (``transport``, ``system``,
    ``partition``, ...), sorted."""
    if column not in ('transport', 'system', 'partition', 'collective',
                      'run_id', 'verdict'):
        raise ValueError(column)
    if column in STORED_ORDER:          # a loose scan of an index
        return scopes.index_distinct(store, column)
    return sorted(r['v'] for r in store.query(
        f'SELECT DISTINCT {column} AS v FROM cases') if r['v'] is not None)


def check_name(store, what, value, column=None):
    """``value`` must be a recorded ``what`` (transport, system, partition):
    else an error listing the recorded ones."""
    if value is None:
        return
    values = recorded(store, column or what)
    if value not in values:
        raise CclHealthError(
            f'unknown {what} {value!r} (recorded: '
            f'{", ".join(map(str, values)) or "nothing"})')


#: the newest cases of each configuration whose sizes a size is checked
#: against (the sizes of a configuration rarely change)
SIZE_CASES = 5


def check_size(store, size, keys, transport=None, system=None,
               partition=None):
    """The size in bytes; an error listing the recorded sizes when the
    newest :data:`SIZE_CASES` cases of each series of ``keys`` never
    measured it (all of them: never recorded)."""
    if size is None:
        return None
    nbytes = parse_size(size)
    ids, complete = [], True
    for key in keys:
        got = keyhistory.key_cases_before(store, key, newestruns._LATEST,
                                          SIZE_CASES)
        ids += [c['id'] for c in got]
        complete = complete and len(got) < SIZE_CASES
    sizes = {r['size'] for r in inlists.query_in(
        store, 'SELECT DISTINCT size FROM measurements WHERE case_id IN '
        '(?...)', ids)}
    sizes = sorted(x for x in sizes if x is not None)
    if nbytes not in sizes:
        scope = ' '.join(x for x in (transport, system and f'on {system}',
                                     partition and f'partition {partition}')
                         if x)
        said = (' never recorded' if complete else
                f' not measured by the newest {SIZE_CASES} cases of any '
                f'configuration')
        raise CclHealthError(
            f'size {format_size(nbytes)}{said}'
            f'{" for " + scope if scope else ""} (recorded: '
            f'{", ".join(map(format_size, sizes)) or "no sizes"})')
    return nbytes


def check_runs(store, *run_ids):
    """Each run id must be recorded: else an error naming the newest."""
    for run in run_ids:
        if run is not None and not store.query(
                'SELECT 1 AS x FROM cases WHERE run_id = ? LIMIT 1', (run,)):
            newest = last_runs(store, 10)
            more = store.query('SELECT COUNT(DISTINCT run_id) AS n FROM '
                               'cases')[0]['n'] - len(newest)
            raise CclHealthError(
                f'unknown run {run!r} (recorded: '
                f'{", ".join(newest) or "no runs"}'
                f'{f" and {more} older" if more > 0 else ""}; '
                f'list them with: scripts/report runs)')


def check_not_empty(store):
    """A database that holds no run answers no question."""
    if not store.query('SELECT 1 AS x FROM cases LIMIT 1'):
        raise CclHealthError(f'{store.where}: the database holds no runs')


# -- the questions -----------------------------------------------------------
def last_runs(store, n=1):
    return [r.run_id for r in runs(store, n)]


def runs(store, last=None, cases=None, kinds=None):
    """One :class:`Run` per run, newest first (``last``: only that many,
    read from the newest case back; ``cases``: of these case rows;
    ``kinds``: the runs with a case of these stored kinds)."""
    import itertools
    if cases is not None:
        return of_cases(cases)[:last] if last else of_cases(cases)
    return list(itertools.islice(newestruns.newest_first(store, kinds), last))


def window_start(hours, now=None):
    """The time ``hours`` before ``now`` (default: now)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now - datetime.timedelta(hours=hours)


#: the most older runs ``failed`` counts when its window holds none
#: (:func:`_nothing_in_window`): beyond it, "more than" it
OLDER_RUNS_COUNTED = 1000


def _nothing_in_window(store, since_hours, now=None):
    """Why ``failed`` has nothing to say for the window: how many older
    runs there are (at most :data:`OLDER_RUNS_COUNTED` counted), and the
    command that shows them."""
    import math
    from ccl_health.judge.series import SIMULATED
    # counted in the database up to the bound (the run ids in the order of
    # their index, one more than the bound at most), the newest read from
    # the newest case back: never every run of the history (each health
    # check is a run: 2.9 M at a month of Frontier)
    bound = OLDER_RUNS_COUNTED
    count = store.query('SELECT COUNT(*) AS n FROM (SELECT DISTINCT run_id '
                        'FROM cases WHERE substr(run_id, 1, ?) <> ? ORDER '
                        'BY run_id LIMIT ?) r',
                        (len(SIMULATED), SIMULATED, bound + 1))[0]['n']
    older = (f'more than {bound:,} older runs' if count > bound else
             f'{count} older run(s)')
    newest = next((r for r in newestruns.newest_first(store)
                   if not simulated(r.run_id)), None) if count else None
    sims = simulated_runs(store, since_hours, now)
    line = f'{store.where}: nothing recorded in the last {since_hours:g} h'
    if sims:
        line += (f' but {sum(sims.values())} case(s) of simulated run(s) '
                 f'{", ".join(sorted(sims))}')
    if newest is None:
        return line + (' (the database holds no measured runs)' if sims
                       else ' (the database holds no runs)')
    now = now or datetime.datetime.now(datetime.timezone.utc)
    hours = max(1, math.ceil((now - when(newest.last_time)).total_seconds()
                             / 3600) + 1)
    return (f'{line}; {older}, the newest {newest.run_id} '
            f'at {newest.last_time}: see them with '
            f'scripts/report failed --hours {hours} (or scripts/report '
            f'runs)')


def failures(store, since_hours=24, now=None):
    """What failed or could not be judged in the last ``since_hours`` (last
    night): ``[(Verdict, line)]``, broken cases first, then drops against
    history.  Nothing recorded in that window is an error, not an
    all-clear.  The cases of simulated runs (:func:`simulated_runs`) are
    left out: a rehearsal is neither a failure nor an all-clear."""
    from ccl_health.db import keystate as state
    since = window_start(since_hours, now)
    kept = state.listed(store)
    # schema 10: the window's failing cases by their index and its
    # findings as kept (the stale keys judged); before, every case of it
    window = [c for c in windowfindings.window_cases(store, since,
                                                     failing=kept)
              if not simulated(c)]
    if not (window or kept and _measured_since(store, since)):
        raise CclHealthError(_nothing_in_window(store, since_hours, now))
    out = []
    for c in window:
        if _bad(c['verdict']):
            v = stored_verdict(c['verdict'])
            name = c['verdict'] if c['verdict'] in NAMES else \
                f'{v.value} (unknown verdict {c["verdict"]!r})'
            out.append((v, f'{c["time"]}  {c["system"]}:{c["partition"]}  '
                           f'{c["case_name"]}: {name.upper()}: '
                           f'{shown_reason(store, c, name.upper())}'))
    # each key measured in the window judged from its recent history
    found = [f for f in (windowfindings.kept_findings(store, since) if kept
                         else windowfindings.window_findings(store, window,
                                                             since))
             if f.kind != 'recovery']
    out += [(Verdict.DROP, line) for line in drop_lines(found, store)]
    return out


def _measured_since(store, since):
    """Is a case (not simulated) recorded from ``since`` on?  Read from
    the newest case back, by the time index."""
    bound = keyhistory.sql_time(since)
    for c in newestruns.newest_case_rows(store, None, ('time', 'run_id')):
        if str(c['time']) < bound:
            return False
        if when(c['time']) >= since and not simulated(c):
            return True
    return False


def window_runs(store, since_hours=24, now=None):
    """The :class:`Run` s of the cases of the last ``since_hours`` (not
    simulated), newest first."""
    since = window_start(since_hours, now)
    return runs(store, cases=[c for c in windowfindings.window_cases(
        store, since) if not simulated(c)])


def simulated_runs(store, since_hours=24, now=None):
    """``{run id: cases}`` of the simulated runs (``scripts/fleet
    --simulate --db``) in the last ``since_hours``: left out of
    :func:`failures`, named beside it."""
    from ccl_health.judge.series import SIMULATED
    since = window_start(since_hours, now)
    out = {}
    for c in windowfindings.window_cases(store, since,
                                         columns=('run_id', 'time'),
                                         run_prefix=SIMULATED):
        if simulated(c):
            out[c['run_id']] = out.get(c['run_id'], 0) + 1
    return out


def shown_reason(store, case, prefix=None):
    """The reason of a case as people read it, the same in ``scripts/report
    failed`` and on the report page: never the verdict's name twice
    (``COULD-NOT-CHECK: COULD-NOT-CHECK: ...``), never empty, numbers
    rounded.  A below-reference case recorded with ReFrame's ``performance
    error: ...`` gets its sizes from its records (else from ReFrame's
    message, rounded)."""
    prefix = prefix or str(case['verdict']).upper()
    reason = (case['reason'] or '').strip()
    while reason.startswith(prefix + ':'):
        reason = reason[len(prefix) + 1:].strip()
    perf = reason.lower().startswith('performance error')
    if perf and case['verdict'] == Verdict.BELOW_REFERENCE.value:
        below = [r for r in store.records(
            'WHERE run_id = ? AND case_name = ?',
            (case['run_id'], case['case_name']))
            if r['size_verdict'] == Verdict.BELOW_REFERENCE.value and
            r['busbw'] is not None and r['ref']]
        if below:
            return 'below reference at ' + judge.shortfall_sizes(
                (r['size'], r['busbw'], r['ref'], r['tolerance'])
                for r in sorted(below, key=lambda r: r['size']))
        said = reframe_perf_error(reason)
        if said:
            return said
        return 'below reference (no size recorded as below: see the ' \
            'run report\'s perflog)'
    return round_numbers(reason) or '(no reason recorded)'


#: one value of ReFrame's performance error (``_fmtperf`` of
#: reframe/core/pipeline.py 4.x: ``{tag}={val} {unit}, expected {ref}
#: (l={lower}, u={upper})``)
_RFM_PERF = re.compile(r'(\w+)=(\S+) (\S+), expected (\S+) '
                       r'\(l=([^,]+), u=([^)]+)\)')


def reframe_perf_error(text):
    """ReFrame's ``performance error: failed to meet reference(s): ...``
    in people's words (``below reference at 1MiB 63.27 vs 70.91 GB/s
    (-11%)``), or '' when it holds none of its values."""
    short, other = [], []
    for tag, val, unit, ref, low, _ in _RFM_PERF.findall(text or ''):
        try:
            val, ref, low = float(val), float(ref), float(low)
        except ValueError:
            continue
        m = re.fullmatch(r'busbw_(\w+)', tag)
        size = None
        if m and unit == 'GB/s' and ref > 0:
            try:
                size = parse_size(m.group(1))
            except (ValueError, CclHealthError):
                size = None
        if size is not None:
            short.append((size, val, ref, 1 - low / ref))
        else:
            other.append(f'{tag} {val:.4g} {unit}, expected {ref:.4g} '
                         f'(at least {low:.4g})')
    if not short and not other:
        return ''
    return '; '.join(([f'below reference at '
                       f'{judge.shortfall_sizes(sorted(short))}']
                      if short else []) + other)


def round_numbers(text):
    """Long decimals (``63.818999999999996``) rounded for people: 4
    significant digits, never fewer decimals than two."""
    def one(m):
        v = float(m.group(0))
        return f'{v:.2f}' if abs(v) >= 100 else f'{v:.4g}'
    return re.sub(r'(?<![\w.])\d+\.\d{5,}(?![\d.])', one, text or '')


def drop_lines(findings, cases):
    """The lines of history findings, the drops of one run and
    configuration (system, partition, transport, collective, nodes, ranks,
    algo) grouped into one line with the sizes, its worst and what changed
    (once), in the order the findings came.  ``cases``: the store (what
    changed as kept with each finding, schema 12, else read for it:
    :func:`windowfindings.changed`) or case rows."""
    groups = {}
    for f in findings:
        k = (f.kind, f.run_id, f.key) if f.kind in ('drop', 'drift') else \
            (None, id(f))
        groups.setdefault(k, []).append(f)
    lines = []
    store = hasattr(cases, 'query')
    if store:     # what changed: as kept, else read for all at once
        firsts = [fs[0] for k, fs in groups.items() if k[0] is not None and
                  fs[0].changed is None]
        read = dict(zip(map(id, firsts), changedcases.attribution_many(
            cases, firsts)))
    for k, fs in groups.items():
        if k[0] is None:
            lines.append(fs[0].line())
            continue
        if len(fs) == 1 or k[0] == 'drift':
            lines += [f.line() for f in sorted(fs, key=lambda f: f.size)]
        else:
            fs = sorted(fs, key=lambda f: f.size)
            worst = max(fs, key=lambda f: 1 - f.value / f.baseline.median)
            pct = 100 * (1 - worst.value / worst.baseline.median)
            where = where_text(worst.key)
            lines.append(
                f'DROP {where} in run {worst.run_id}: {len(fs)} sizes below '
                f'history ({format_size(fs[0].size)}..'
                f'{format_size(fs[-1].size)}); worst '
                f'{format_size(worst.size)} {worst.value:.2f} GB/s vs '
                f'baseline {worst.baseline.median:.2f} (-{pct:.0f}%, '
                f'threshold {worst.threshold:.2f}, n={worst.baseline.n})')
        lines += [f'    changed: {c}' for c in (
            fs[0].changed if store and fs[0].changed is not None else
            windowfindings.changed(read[id(fs[0])] if store else cases,
                                   fs[0]))]
    return lines


def failed(store, since_hours=24, now=None):
    """The lines of :func:`failures`."""
    return [line for _, line in failures(store, since_hours, now)]


def _check_scope(store, transport, system, partition):
    check_name(store, 'transport', transport)
    check_name(store, 'system', system)
    check_name(store, 'partition', partition)


#: the stored kinds of case ``since`` and ``history`` are about unless a
#: node is named: the sweeps (a node's health probes are its own series)
SWEEP_KINDS = newestruns.KINDS['sweep']
PROBE = PROBE_KIND


def scope_keys(store, transport, system=None, partition=None, node=None):
    """The series keys of the sweeps of ``transport`` (any: None) on
    ``system`` / ``partition``, or, with ``node``, of that node's health
    probes: read from the table of the series (schema 9; before it, by
    the ``cases_series`` index).  None recorded is an error
    that says what is."""
    _check_scope(store, transport, system, partition)
    fixed = {c: v for c, v in (('transport', transport), ('system', system),
                               ('partition', partition)) if v is not None}
    keys = scopes.series_keys(store, **fixed, **(
        {'kind': SWEEP_KINDS} if node is None else
        {'kind': PROBE, 'node': node}))
    if keys:
        return keys
    where = ' '.join(x for x in (system and f'system {system}', partition
                                 and f'partition {partition}') if x)
    if node is not None:
        there = scopes.index_distinct(
            store, 'node', **{'kind': PROBE, **fixed})
        raise CclHealthError(
            f'no health probes of {transport or "any transport"} on node '
            f'{node!r}{" on " + where if where else ""} (recorded: '
            f'{len(there)} node(s){": " if there else ""}'
            f'{", ".join(there[:10])}{", ..." if len(there) > 10 else ""})')
    if scopes.series_keys(store, **fixed, kind=PROBE):
        raise CclHealthError(
            f'no sweeps of {transport or "any transport"}'
            f'{" on " + where if where else ""}: only health probes, each '
            f'node its own series (give --node NODE)')
    there = scopes.index_distinct(store, 'transport', **{
        k: v for k, v in fixed.items() if k != 'transport'})
    if transport is None:
        raise CclHealthError(f'no records{" on " + where if where else ""}')
    raise CclHealthError(
        f'no cases of transport {transport!r} on {where} (recorded '
        f'there: {", ".join(there) or "nothing"})')


def probes_left_out(store, transport, system=None, partition=None):
    """The line that says the health probes of ``transport`` were left out
    (``since`` and ``history`` without ``--node``), or '' when there are
    none."""
    fixed = {c: v for c, v in (('transport', transport), ('system', system),
                               ('partition', partition)) if v is not None}
    if not keyhistory.indexed(store) or not scopes._walk(
            store, STORED_ORDER[:4], {**fixed, 'kind': PROBE}):
        return ''
    return (f'(the sweeps of {transport}; its health probes are each '
            f'node\'s own: --node NODE)')


def history(store, transport=None, size=None, system=None, partition=None,
            last=30, node=None):
    """The records of the newest ``last`` cases of ``transport`` (its
    sweeps, or ``node``'s health probes: :func:`scope_keys`), at ``size``
    or every size, oldest first."""
    keys = scope_keys(store, transport, system, partition, node)
    size = check_size(store, size, keys, transport, system, partition)
    cases, _ = newestruns.newest_cases(store, keys, last, ('id',))
    ids = [c['id'] for c in cases]
    recs = inlists.query_in(
        store, f'{windowfindings._RECORDS_FULL} WHERE c.id IN (?...)' +
        (' AND m.size = ?' if size is not None else ''), ids,
        after=(size,) if size is not None else ())
    if not recs:
        raise CclHealthError(
            f'no records of {transport or "any transport"}'
            f'{f" on {system}" if system else ""}'
            f'{f" partition {partition}" if partition else ""}')
    recs.sort(key=lambda r: (when(r['time']), r['size'] or 0,
                             r['case_id']))
    return recs


def latest(store, transport, system=None, partition=None, node=None):
    """The newest case of a transport (on a system / partition; its
    sweeps, or ``node``'s health probes)."""
    keys = scope_keys(store, transport, system, partition, node)
    return newestruns.newest_cases(store, keys, 1)[0][0]


#: the cases ``since`` reads first (then 4 times as many, until a good one)
SINCE_PAGE = 64


def since_when(store, transport, size=None, system=None, partition=None,
               node=None):
    """When did the current bad streak of this transport (at this size;
    its sweeps, or ``node``'s health probes) start?  Returns (first bad run
    time, run id, streak length) or None.  A bad case is any that is not
    good: failed or could not be judged, or (at ``size``) below its
    reference or with a drop or drift there (the findings kept with it:
    :func:`ccl_health.db.windowfindings.judge_keys`).  Read from the newest case
    back until a good one."""
    streak, _ = bad_streak(store, transport, size, system, partition, node)
    if not streak:
        return None
    first = streak[-1]
    return first['time'], first['run_id'], len(streak)


def bad_streak(store, transport, size=None, system=None, partition=None,
               node=None):
    """``(streak, good)`` of :func:`since_when`: the bad cases, newest
    first, and the good case just before them (None: none recorded)."""
    keys = scope_keys(store, transport, system, partition, node)
    size = check_size(store, size, keys, transport, system, partition)
    n = SINCE_PAGE
    while True:
        cases, complete = newestruns.newest_cases(store, keys, n)
        bad_runs = set() if size is None else \
            _bad_runs_at(store, cases, transport, size)
        streak = []
        for c in cases:
            if _bad(c['verdict']) or c['run_id'] in bad_runs:
                streak.append(c)
            else:
                break
        if len(streak) < len(cases) or complete:
            break
        n *= 4
    good = cases[len(streak)] if len(streak) < len(cases) else None
    return streak, good


def last_good_before(store, case):
    """The newest passing case of ``case``'s configuration (its name,
    system, partition and node list) recorded before it, or None: what a
    new failure is compared with (:func:`changed_between`)."""
    conds = [('case_name', case['case_name']), ('system', case['system']),
             ('partition', case['partition']),
             ('nodelist', case.get('nodelist'))]
    where, params = scopes._equal(conds)
    rows = store.query(
        f"SELECT id, run_id, time FROM cases WHERE {' AND '.join(where)} "
        f"AND verdict = 'pass' AND time < ? ORDER BY time DESC LIMIT 1",
        tuple(params) + (case['time'],))
    return rows[0] if rows else None


def changed_between(store, good, bad, only_changes=False):
    """The ``changed:`` lines (:func:`ccl_health.judge.attribution.
    changes`: versions, node list, environment) between the case rows
    ``good`` and ``bad`` (read in full by their ids), for a failure as for
    a drift; None ``good``: no earlier passing run.  ``only_changes``: the
    changes alone (a mail's failure line is followed by what changed, and
    by nothing when nothing did)."""
    from ccl_health.judge.attribution import changes
    if good is None:
        return [] if only_changes else \
            ['no earlier passing run of this configuration']
    rows = {c['id']: c for c in store.cases('WHERE id IN (?, ?)',
                                            (good['id'], bad['id']))}
    g, b = rows.get(good['id']), rows.get(bad['id'])
    if g is None or b is None:
        return []
    return changes(g, b) or ([] if only_changes else [
        f'nothing recorded changed since run {g["run_id"]} ({g["time"]})'])


def _bad_runs_at(store, cases, transport, size):
    """The runs of ``cases`` below the reference at ``size``, or with a
    drop or drift there."""
    bad = {f.run_id for f in windowfindings.judge_keys(
        store, windowfindings.history_keys(cases),
        min(when(c['time']) for c in cases), {c['run_id'] for c in cases})
        if f.kind in ('drop', 'drift') and f.key[2] == transport and
        f.size == size}
    ids = [c['id'] for c in cases]
    bad |= {r['run_id'] for r in inlists.query_in(
        store, 'SELECT c.run_id FROM measurements m JOIN cases c ON c.id = '
        "m.case_id WHERE m.case_id IN (?...) AND m.size = ? AND m.verdict = "
        "'below-reference'", ids, after=(size,))}
    return bad


def compare(store, run_a, run_b):
    """Per case and size: busbw in run A, in run B, ratio B/A."""
    check_runs(store, run_a, run_b)

    def by(run):
        return {(r['case_name'], r['size']): r for r in store.records(
            'WHERE run_id = ?', (run,)) if r['size'] is not None}
    a, b = by(run_a), by(run_b)
    common = sorted(set(a) & set(b))
    if not common and run_changes(store, run_a, run_b):
        return []           # nothing measured in both: what changed says
    if not common:
        raise CclHealthError(
            f'runs {run_a!r} and {run_b!r} have no measured case and size in '
            f'common ({len(a)} and {len(b)} measurements)')
    rows = []
    for key in common:
        va, vb = a[key]['busbw'], b[key]['busbw']
        rows.append((key[0], format_size(key[1]), va, vb,
                     vb / va if va and vb is not None else None))
    return rows


def run_changes(store, run_a, run_b):
    """``[(case name, changed lines)]``: per case the two runs both hold,
    the versions and environment that differ from run A to run B
    (:func:`ccl_health.judge.attribution.changes`), a crash's case too
    (it measured nothing); the cases where nothing differs left out."""
    from ccl_health.judge.attribution import changes
    a = {c['case_name']: c for c in store.cases('WHERE run_id = ?',
                                                (run_a,))}
    out = []
    for c in store.cases('WHERE run_id = ?', (run_b,)):
        if c['case_name'] in a:
            lines = changes(a[c['case_name']], c)
            if lines:
                out.append((c['case_name'], lines))
    return out
