"""The nightly's news: what a person is told, each change once.

The ledger (tables ``news_told`` and ``news_nights`` of the site database,
:mod:`ccl_health.db.store`) records what each mail told, per key and size:

* a case failing (its verdict; for a ``below-reference`` case, each size
  below with the band of its shortfall, :func:`band`),
* a history finding of a key and size (``drop``, ``drift``,
  ``intermittent``: :mod:`ccl_health.judge.history`),
* clear (told as recovered).

A night's news is the difference between what its run measured and what
the ledger says was told, never the last night's verdicts:

* a new failure (told clear or never told), a failure of another kind
  (``below-reference`` -> ``crash``), a worsening (a failing size whose
  shortfall moves to a worse band, a new failing size), a new finding or a
  finding of a graver kind (drift < drop < intermittent): told, and they
  need a person;
* a recovery (told failing or a finding, measured clear now): told once,
  as ``recovered:``, and needs nobody;
* the same or better than told: not told again (``still failing``); a key
  not measured tonight (skipped, aborted, not selected) keeps what was
  told.

Nightly runs (run ids ``nightly-...``) whose news was never told (a night
killed with ``kill -9``, a crash of the nightly, an aborted night) are told
first, in order, by the next night (:func:`untold_runs`); a killed night
that measured nothing (its cases aborted with it, or none recorded) is
said once (``nothing measured``), never lost silently.  The caller
prints the lines and only then records them as told (:func:`tell`): a mail
that was never printed is told again.

A night that measured nothing (every case skipped, nothing selected, no
GPUs), or fewer cases than the last complete night, is never an all-clear:
it names what was not measured and why, and exits 2 (unless news needs a
person: exit 1 wins, as a failure wins over could-not-check).

API (the nightly, its rehearsal and its soak test use these):
:func:`night` (the news of a night: :class:`Night`), :func:`tell` (record
it once printed), :func:`told_state`, :func:`untold_runs`,
:func:`last_complete`, :func:`band` / :func:`band_text`."""

import dataclasses
import json

from ccl_health.db import ledger
from ccl_health.db import answers
from ccl_health.db import windowfindings
from ccl_health.judge import series
from ccl_health.judge import verdicts as V
from ccl_health.judge.finding import where_text
from ccl_health.judge.series import PROBE_KIND
from ccl_health.units import format_size

EXIT_NOTHING_NEW = 0
EXIT_NEW = 1
EXIT_NOT_MEASURED = 2

FAILING, FINDING, CLEAR = 'failing', 'finding', 'clear'

#: the shortfall below the reference (``1 - busbw / ref``) of a failing
#: size falls in one band; the edges and what a mail calls each band.  A
#: failing size told in one band is told again only when it reaches a
#: worse one (-40 % then -95 %: from 25-50 % to >=90 %)
BAND_EDGES = (0.10, 0.25, 0.50, 0.90)
BAND_NAMES = ('<10 %', '10-25 %', '25-50 %', '50-90 %', '>=90 %')

#: the findings a person is told, graver last: a finding told is told
#: again only as a graver kind
FINDING_RANK = {'drift': 1, 'drop': 2, 'intermittent': 3}
NEEDS_A_PERSON = tuple(FINDING_RANK)

#: a case with one of these verdicts measured nothing
NOT_MEASURED = (V.Verdict.SKIPPED.value, V.Verdict.ABORTED.value)

#: the run ids of the nightly (:mod:`ccl_health.nightly`): the runs whose
#: news the ledger tells
RUN_PREFIX = 'nightly-'

#: a night's status in ``news_nights``: ``complete`` (its cases are the
#: measure of the next nights), ``partial`` (fewer than the last complete
#: night), ``nothing`` (nothing measured), ``aborted``, ``late`` (told by a
#: later night)
COMPLETE = 'complete'


def band(busbw, ref):
    """The band index (0 .. len(BAND_NAMES) - 1) of ``busbw`` below
    ``ref``; a value that is no number is the worst band."""
    if not V.finite(busbw) or not ref:
        return len(BAND_EDGES)
    short = round(1 - busbw / ref, 9)     # -10 % is in 10-25 %, exactly
    return sum(short >= e for e in BAND_EDGES)


def band_text(i):
    return f'{BAND_NAMES[i]} below' if i is not None else 'below'


@dataclasses.dataclass(frozen=True)
class State:
    """What was told (or is now) of one item (system, partition, key,
    size)."""
    state: str
    verdict: str = None
    band: int = None
    finding: str = None
    run_id: str = ''


def case_key(case):
    return 'case ' + case['case_name']


def history_key(key):
    return 'history ' + json.dumps(list(key))


def told_state(db, system):
    """{(system, partition, key, size): :class:`State`}: the last told of
    each item of ``system``."""
    out = {}
    for r in ledger.told(db, system):
        out[(r['system'], r['partition'], r['key'], r['size'])] = State(
            r['state'], r['verdict'], r['band'], r['finding'], r['run_id'])
    return out


def _row(item, st):
    return dict(zip(('system', 'partition', 'key', 'size'), item),
                state=st.state, verdict=st.verdict, band=st.band,
                finding=st.finding, run_id=st.run_id)


def _bad(verdict):
    return not answers.stored_verdict(verdict).good


def failure_line(c, was=None):
    reason = ' '.join((c['reason'] or '').split())
    if len(reason) > 160:
        reason = reason[:157] + '...'
    told = f' (told as {was.verdict} in run {was.run_id})' if was else ''
    return f'{c["verdict"].upper()} {c["case_name"]}: {reason}{told}'


# -- one run against what was told --------------------------------------

@dataclasses.dataclass
class Changes:
    """What one run changed against what was told."""
    lines: list = dataclasses.field(default_factory=list)
    rows: list = dataclasses.field(default_factory=list)
    failures: int = 0        # new failures and failures of another kind
    worse: int = 0
    findings: int = 0
    recovered: int = 0
    still_failing: int = 0
    still_findings: int = 0

    @property
    def needs_a_person(self):
        return bool(self.failures or self.worse or self.findings)


def run_changes(db, run_id, told, all_cases=None):
    """The :class:`Changes` of the run ``run_id`` against ``told``
    (:func:`told_state`), which is updated as if they were told."""
    from ccl_health.findings import run_findings, finding_lines
    if all_cases is None:       # the run's cases; "changed:" read per line
        cases, all_cases = windowfindings.run_cases(db, run_id), db
    else:
        cases = [c for c in all_cases if c['run_id'] == run_id]
    records = db.records('WHERE run_id = ?', (run_id,))
    ch = Changes()
    for c in cases:
        _case_changes(c, [r for r in records
                          if r['case_name'] == c['case_name']], told, ch,
                      db)
    found, _, _ = run_findings(db, run_id)
    _finding_changes(run_id, found, records, told, ch, all_cases,
                     finding_lines)
    return ch


def _tell(told, ch, item, st):
    told[item] = st
    ch.rows.append(_row(item, st))


def _case_changes(c, records, told, ch, db):
    if c['verdict'] in NOT_MEASURED:
        return
    sp = (c['system'] or '', c['partition'] or '')
    key = case_key(c)
    item = sp + (key, None)
    was = told.get(item)
    was_failing = was is not None and was.state == FAILING
    sizes = {k: v for k, v in told.items() if k[:3] == sp + (key,)
             and k[3] is not None and v.state == FAILING}
    run = c['run_id']
    if not _bad(c['verdict']):
        if was_failing:
            ch.recovered += 1
            ch.lines.append(f'recovered: {c["case_name"]}: {c["verdict"]} in '
                            f'run {run} (told {was.verdict} in run '
                            f'{was.run_id})')
            _tell(told, ch, item, State(CLEAR, c['verdict'], run_id=run))
            for k in sizes:
                _tell(told, ch, k, State(CLEAR, run_id=run))
        return
    now = {}
    if c['verdict'] == V.Verdict.BELOW_REFERENCE.value:
        for r in records:
            if r['size'] is not None and r['size_verdict'] == \
                    V.Verdict.BELOW_REFERENCE.value and r['ref']:
                now[sp + (key, r['size'])] = (State(
                    FAILING, r['size_verdict'], band(r['busbw'], r['ref']),
                    run_id=run), r)
    if not was_failing or was.verdict != c['verdict']:
        ch.failures += 1
        ch.lines.append(failure_line(c, was if was_failing else None))
        # what differs from its last passing run (versions, environment)
        good = answers.last_good_before(db, c)
        ch.lines += [f'    changed: {ln}' for ln in answers.changed_between(
            db, good, c, only_changes=True)]
        _tell(told, ch, item, State(FAILING, c['verdict'], run_id=run))
        for k in sizes:
            if k not in now:
                _tell(told, ch, k, State(CLEAR, run_id=run))
        for k, (st, _) in now.items():
            _tell(told, ch, k, st)
        return
    worse = []
    for k, (st, r) in sorted(now.items(), key=lambda kv: kv[0][3]):
        old = sizes.get(k)
        if old is not None and old.band is not None and \
                st.band <= old.band:
            continue
        value = r['busbw'] if V.finite(r['busbw']) else 0.0
        worse.append(
            f'{format_size(k[3])} -{100 * (1 - value / r["ref"]):.0f} % '
            f'({value:.2f} vs reference '
            f'{r["ref"]:.2f} GB/s; ' +
            (f'told {band_text(old.band)} in run {old.run_id})' if old
             else 'newly below)'))
        _tell(told, ch, k, st)
    if worse:
        ch.worse += 1
        ch.lines.append(f'WORSE {c["verdict"].upper()} {c["case_name"]}: '
                        + '; '.join(worse))
    else:
        ch.still_failing += 1


def _finding_changes(run_id, found, records, told, ch, all_cases,
                     finding_lines):
    by_item = {}
    for f in found:
        if f.kind in FINDING_RANK:
            item = (f.key[0] or '', f.key[1] or '', history_key(f.key),
                    f.size)
            by_item.setdefault(item, []).append(f)
    measured = {}
    for r in records:
        if r['size'] is not None and V.finite(r['busbw']) and \
                r['case_verdict'] in V.IN_BASELINE:
            k = series.series_key(r)
            measured[(k[0] or '', k[1] or '', history_key(k), r['size'])] = \
                (k, r)
    new = []
    for item, fs in by_item.items():
        was = told.get(item)
        have = FINDING_RANK.get(was.finding, 0) if was is not None and \
            was.state == FINDING else 0
        graver = [f for f in fs if FINDING_RANK[f.kind] > have]
        if not graver:
            ch.still_findings += 1
            continue
        new += graver
        worst = max(graver, key=lambda f: FINDING_RANK[f.kind])
        _tell(told, ch, item, State(FINDING, finding=worst.kind,
                                    run_id=run_id))
    ch.findings += len(new)
    ch.lines += finding_lines(new, all_cases)
    for item, (k, r) in sorted(measured.items(), key=lambda kv: kv[0][3]):
        was = told.get(item)
        if item in by_item or was is None or was.state != FINDING:
            continue
        ch.recovered += 1
        ch.lines.append(
            f'recovered: {was.finding.upper()} {where_text(k)} '
            f'{format_size(item[3])}: {r["busbw"]:.2f} GB/s in run {run_id} '
            f'(told in run {was.run_id})')
        _tell(told, ch, item, State(CLEAR, run_id=run_id))


# -- the nights -----------------------------------------------------------

def _starts(db, system, partition):
    """{run id: its first case's time} of the nightly runs of ``system``
    (and ``partition``)."""
    sql = ('SELECT run_id, min(time) AS start FROM cases WHERE run_id LIKE ?'
           ' AND system = ?')
    params = [RUN_PREFIX + '%', system]
    if db.schema_version() >= 6:
        # the nightly's cases only, searched by the index of the kind and
        # time (never every health check of the system: `system || ''`
        # keeps the planners off the series index)
        sql = sql.replace('system = ?', "system || '' = ?") + \
            " AND kind IN ('sweep', 'framework', 'other')" \
            f" AND kind <> '{PROBE_KIND}'"
    if partition:
        sql += " AND partition || '' = ?"
        params.append(partition)
    return {r['run_id']: r['start'] for r in
            db.query(sql + ' GROUP BY run_id', tuple(params))}


def untold_runs(db, system, partition, run_id):
    """The nightly runs of ``system`` / ``partition`` recorded after the
    ledger began and before ``run_id`` (tonight), never told (killed,
    crashed, aborted nights), oldest first.  None before the first told
    night (an existing database: its old runs are not news)."""
    nights = ledger.told_nights(db, system, partition or '')
    starts = _starts(db, system, partition)
    began = [starts[n['run_id']] for n in nights if n['run_id'] in starts]
    if not began:
        return []
    told = {n['run_id'] for n in nights}
    mine = starts.get(run_id)
    return sorted((r for r, t in starts.items() if t > min(began)
                   and (mine is None or t < mine)
                   and r not in told and r != run_id),
                  key=lambda r: starts[r])


def last_complete(db, system, partition):
    """The run id of the last told night whose cases were all measured
    (the measure of the next nights), or None."""
    done = [n for n in ledger.told_nights(db, system, partition or '')
            if n['status'] == COMPLETE]
    return done[-1]['run_id'] if done else None


@dataclasses.dataclass
class Night:
    """A night's mail and what to record once it was printed."""
    lines: list
    status: str            # new | not-measured | still | clear
    code: int
    rows: list = dataclasses.field(default_factory=list)
    nights: list = dataclasses.field(default_factory=list)


def _missing(mine, before):
    """[(why, [case names])]: the cases measured in ``before`` (case rows
    of the last complete night) that ``mine`` (tonight's) did not
    measure, by why."""
    now = {c['case_name']: c for c in mine}
    measured = {c['case_name'] for c in mine
                if c['verdict'] not in NOT_MEASURED}
    why = {}
    for c in before:
        name = c['case_name']
        if c['verdict'] in NOT_MEASURED or name in measured:
            continue
        if name not in now:
            reason = 'not selected'
        else:
            reason = ' '.join((now[name]['reason'] or '').split()) or \
                '(no reason recorded)'
            reason = f'{now[name]["verdict"]}: {reason}'
        why.setdefault(reason, []).append(name)
    return sorted(why.items())


# long: one night's news, each kind of change in the order it is told
def night(db, run_id, system, partition, head, cause='', labels=None):
    """The news of the night ``run_id`` (:class:`Night`): first the news of
    the nightly runs never told (:func:`untold_runs`; ``labels``: {run id:
    what befell it, e.g. ``killed``}), then tonight's, each against what
    was told; then what tonight did not measure.  ``head``: the mail's
    first words (``ccl-health nightly SYSTEM:PART NIGHT``); ``cause``: why
    the run may have recorded nothing (no GPUs, its exit code)."""
    labels = labels or {}
    told = told_state(db, system) if db is not None else {}

    def cases_of(rid):
        return (windowfindings.run_cases(db, rid) if db is not None and rid
                else [])
    lines, rows, nights, total = [], [], [], Changes()
    sp = (system, partition or '')
    earlier = untold_runs(db, system, partition, run_id) if db else []
    for rid in earlier:
        ch = run_changes(db, rid, told)
        aborted = any(c['verdict'] == V.Verdict.ABORTED.value
                      for c in cases_of(rid))
        what = labels.get(rid) or ('aborted' if aborted else
                                   'ended before its mail')
        theirs = cases_of(rid)
        if ch.lines:
            lines.append(f'never told, from run {rid} ({what}):')
            lines += ['  ' + ln for ln in ch.lines]
        elif (rid in labels or not aborted) and not any(
                c['verdict'] not in NOT_MEASURED for c in theirs):
            # a night that measured nothing and never mailed (killed: its
            # cases aborted with it): said once, never silently lost
            lines.append(f'never told, from run {rid} ({what}): nothing '
                         f'measured ({_why_not(theirs)})')
        _add(total, ch)
        rows += ch.rows
        nights.append(dict(zip(('system', 'partition'), sp), run_id=rid,
                           status='aborted' if aborted else 'late'))
    told_ids = {n['run_id'] for n in (ledger.told_nights(db, system, partition or '')
                                      if db else [])}
    for rid, what in labels.items():
        if rid != run_id and rid not in told_ids and not cases_of(rid):
            # killed before its run recorded a case
            lines.append(f'never told, from run {rid} ({what}): nothing '
                         f'recorded')
    mine = cases_of(run_id)
    ch = run_changes(db, run_id, told) if mine else Changes()
    _add(total, ch)
    # still failing: tonight's, not an earlier night's
    total.still_failing, total.still_findings = \
        ch.still_failing, ch.still_findings
    lines += ch.lines
    rows += ch.rows
    measured = [c for c in mine if c['verdict'] not in NOT_MEASURED]
    prev = last_complete(db, system, partition) if db else None
    missing = _missing(mine, cases_of(prev))
    skipped = {}
    for c in mine:
        if c['verdict'] in NOT_MEASURED and not any(
                c['case_name'] in names for _, names in missing):
            why = ' '.join((c['reason'] or '').split()) or \
                '(no reason recorded)'
            skipped.setdefault(f'{c["verdict"]}: {why}', []).append(
                c['case_name'])
    for why, names in missing + (sorted(skipped.items()) if not measured
                                 else []):
        lines.append(f'not measured ({why}): {", ".join(names)}')
    status = COMPLETE if measured and not missing else \
        ('partial' if measured else 'nothing')
    nights.append(dict(zip(('system', 'partition'), sp), run_id=run_id,
                       status=status, measured=len(measured)))
    told_nights = ledger.told_nights(db, system, partition or '') if db else []
    vs = f'vs run {told_nights[-1]["run_id"]}' if told_nights else \
        'nothing told before'
    counts = {}
    for c in mine:
        counts[c['verdict']] = counts.get(c['verdict'], 0) + 1
    tally = f'{len(mine)} case{"" if len(mine) == 1 else "s"}' + (
        ': ' if counts else '') + ', '.join(
        f'{n} {v}' for v, n in sorted(counts.items()))
    n_missing = sum(len(names) for _, names in missing)
    if total.needs_a_person:
        text = (f'NEW: {total.failures} new failure(s), {total.findings} '
                f'new finding(s)' +
                (f', {total.worse} worse' if total.worse else '') +
                (f', {total.recovered} recovered' if total.recovered
                 else '') +
                (f'; {n_missing} case(s) not measured' if n_missing else ''))
        status, code = 'new', EXIT_NEW
    elif not measured:
        text = 'NOTHING MEASURED: ' + (
            cause or ('every case skipped' if mine else 'no case recorded'))
        status, code = 'not-measured', EXIT_NOT_MEASURED
    elif missing:
        text = (f'NOT ALL MEASURED: {n_missing} case(s) of run {prev} not '
                f'measured; nothing new among the {len(measured)} measured' +
                _still(total))
        status, code = 'not-measured', EXIT_NOT_MEASURED
    elif total.still_failing or total.still_findings:
        # never "all clear" while something is still wrong
        text = (f'nothing new, still failing from earlier nights: '
                f'{total.still_failing} failure(s), {total.still_findings} '
                f'finding(s)' + (f'; {total.recovered} recovered'
                                 if total.recovered else ''))
        status, code = 'still', EXIT_NOTHING_NEW
    else:
        text = (f'all clear, {total.recovered} recovered' if total.recovered
                else 'all clear, nothing new')
        status, code = 'clear', EXIT_NOTHING_NEW
    return Night([f'{head}: {text} ({tally}; {vs})'] + lines, status, code,
                 rows, nights)


def _why_not(cases):
    """``N aborted: reason`` of cases that measured nothing."""
    why = {}
    for c in cases:
        reason = ' '.join((c['reason'] or '').split())
        if reason.startswith(c['verdict'] + ': '):
            reason = reason[len(c['verdict']) + 2:]
        k = f'{c["verdict"]}: {reason}' if reason else c['verdict']
        why[k] = why.get(k, 0) + 1
    return '; '.join(f'{n} {k}' for k, n in sorted(why.items()))


def _still(total):
    if not (total.still_failing or total.still_findings):
        return ''
    return (f', still failing from earlier nights: {total.still_failing} '
            f'failure(s), {total.still_findings} finding(s)')


def _add(total, ch):
    for f in ('failures', 'worse', 'findings', 'recovered', 'still_failing',
              'still_findings'):
        setattr(total, f, getattr(total, f) + getattr(ch, f))


def tell(db, night_, told_in, scope=None, show=None, read_again=None,
         mark=None):
    """Record ``night_`` (:class:`Night`) as told by the nightly run
    ``told_in``, once for every nightly of the database: under
    :func:`ccl_health.db.ledger.held` of ``scope`` ((system,
    partition); another nightly of the database waits, whatever its
    publish folder), the news read again (``read_again()``) where the
    ledger moved since ``mark`` (:func:`ccl_health.db.ledger.mark` before
    ``night_`` was read), appended, shown (``show(night)`` prints the
    mail), then committed.  A nightly killed before its mail was shown
    recorded nothing: the next night tells it.  Returns the night told."""
    if scope is None:
        ledger.record(db, night_.rows, night_.nights, told_in)
        if show:
            show(night_)
        return night_
    with ledger.held(db, *scope):
        if read_again is not None and ledger.mark(db) != mark:
            night_ = read_again()
        ledger.append(db, night_.rows, night_.nights, told_in)
        if show:
            show(night_)
    return night_
