"""The judge: one function from a case's evidence
(:class:`ccl_health.judge.caseevidence.CaseEvidence`) to its verdict.

It is the only place that compares a busbw with a reference (``ref x (1 -
tolerance)``), builds a verdict's reason and names a verdict.  The doors
(the sweep ``rfm/sweep.py``, ``scripts/explain``, the fleet's
``judge_step`` and the health hook) gather the evidence through the one
case assembler (:mod:`ccl_health.judge.assemble`) and print or record what
:func:`judge` returns; ingest (``db/recorder.py``) records what they
judged.

The health hook calls it once per probe attempt, or once with every
attempt::

    from ccl_health.judge import assemble
    from ccl_health.judge.casejudge import judge
    att = assemble.attempt(output, debug_logs, proc.returncode,
                           transport='intra', nodes=1)
    j = judge(assemble.case(
        [att], what='all_reduce_perf', transport='intra',
        collective='all_reduce', nodes=1, gpus_per_node=8,
        expected_sizes=[probe.size], site=site, node=node_state,
        reference=entry, missing_reference=why))
    j.verdict, j.reason, j.findings, j.warns, j.attempt

With several attempts, a retry absorbs a bandwidth shortfall only: wrong
results, non-finite or impossible values, a crash, a hang or an
incomplete output in any attempt is the verdict, and the reason names the
attempt (``attempt 1 of 2: ...``).

The rules, in order, per attempt: a kill or the program's own timeout is a
``hang``; no output at all is ``could-not-check``, unless a fatal WARN of
its logs says what failed (then that WARN's verdict, as below); a
non-finite value, a busbw above the case's bound of an impossible value
(:func:`ccl_health.judge.ceiling.bound`) or a time <= 0 is
``wrong-results``; wrong elements or out-of-bounds values are
``wrong-results``; a nonzero exit status or an error line is a ``crash``;
a fatal ``NCCL WARN`` (:mod:`ccl_health.evidence.warns`) is a ``crash``
(``fallback`` when it is a plugin's initialisation failure, ``node-fault``
for a link that went down), except a WARN of the network code on a case
whose asked and proven transport is ``intra``: named, not fatal; an output
that stopped after a fatal WARN is that WARN's verdict (a ``hang`` where
it had measured sizes and then printed nothing more); no rows, no
closing summary, a rank printed by two processes (separate runs), a size
printed twice, a size asked (or in the header's
``minBytes..maxBytes``) that is missing is ``incomplete``; unchecked
results or an unknown exit status are ``could-not-check``; ranks with
different NCCL versions are ``node-fault`` naming the mismatch; then
the transport proof (``fallback`` / ``could-not-check``; only a pass
needs the transport proven: a size below the reference found for the key
is ``below-reference`` whatever the proof, naming the transport unknown;
a log alone that proves a fallback is ``fallback``), the reference
(``no-reference``, also when none of the measured sizes is in it), and
each size against it (``below-reference``).  Every WARN is named in the
reason; the node's state (another process on the GPUs) makes it
``contended``."""

import dataclasses
import re
from typing import List, Optional

from ccl_health.evidence.nccltests import signal_of as nccltests_signal
from ccl_health.judge import ceiling as bounds
from ccl_health.judge import stalled
from ccl_health.judge.caseevidence import Attempt, CaseEvidence
from ccl_health.judge.table import (
    header_sizes, impossible, missing_sizes, nonfinite_row, repeated_sizes,
    summary_said, swept_by)
from ccl_health.judge.verdicts import Verdict, finite
from ccl_health.units import format_size


@dataclasses.dataclass
class Finding:
    """One measured size against its reference."""
    size: int
    busbw: Optional[float]
    ref: Optional[float] = None
    tolerance: Optional[float] = None
    #: ``ref x (1 - tolerance)``
    allowed: Optional[float] = None
    #: 'pass', 'below-reference' or 'no-reference'
    verdict: str = 'no-reference'

    @property
    def below(self):
        return self.verdict == Verdict.BELOW_REFERENCE.value


@dataclasses.dataclass
class Judgement:
    verdict: Verdict
    reason: str
    findings: List[Finding] = dataclasses.field(default_factory=list)
    #: every WARN read (:class:`ccl_health.evidence.warns.Warn`)
    warns: List = dataclasses.field(default_factory=list)
    #: the attempt (1-based) that decided the verdict
    attempt: Optional[int] = None
    #: the proof of that attempt (None: not proven)
    proof: object = None


def below_reference(value, ref, tolerance):
    """The one rule of a size against its reference: below ``ref x (1 -
    tolerance)``, or not a finite number at all (a nan passes every
    comparison)."""
    return not finite(value) or value < allowed(ref, tolerance)


def allowed(ref, tolerance):
    return ref * (1 - (tolerance or 0.0))


def size_verdict(value, ref, tolerance):
    if not ref:
        return Verdict.NO_REFERENCE.value
    return (Verdict.BELOW_REFERENCE.value
            if below_reference(value, ref, tolerance or 0.0)
            else Verdict.PASS.value)


def findings(result, ref_entry) -> List[Finding]:
    """Every row of ``result`` against ``ref_entry`` (None: none)."""
    out = []
    for row in getattr(result, 'rows', None) or []:
        ref = ref_entry.busbw.get(row.size) if ref_entry else None
        tol = ref_entry.tolerance_at(row.size) if ref is not None else None
        out.append(Finding(row.size, row.busbw, ref, tol,
                           allowed(ref, tol) if ref is not None else None,
                           size_verdict(row.busbw, ref, tol)))
    return out


def shortfalls(result, ref_entry):
    """``[(size, busbw, ref, tolerance)]`` of sizes below the reference."""
    return [(f.size, f.busbw, f.ref, f.tolerance)
            for f in findings(result, ref_entry) if f.below]


def below_reason(short):
    return 'below-reference: ' + ', '.join(
        f'{format_size(s)} {b:.2f} vs {r:.2f} GB/s (allowed -{t:.0%})'
        for s, b, r, t in short)


def shortfall_pct(value, ref):
    """How far ``value`` is below ``ref``, in percent of ``ref``."""
    return 100.0 * (ref - value) / ref


def shortfall_sizes(short, allowed=False):
    """``1GiB 90.00 vs 100.00 GB/s (-10%)``, comma separated, for each
    ``(size, busbw, ref, tolerance)`` of ``short`` (with ``allowed``:
    ``(-10%, allowed -5%)``): the sizes below the reference as a stored
    case's reason or a summary line restates them."""
    return ', '.join(
        f'{format_size(s)} {b:.2f} vs {r:.2f} GB/s '
        f'(-{shortfall_pct(b, r):.0f}%'
        + (f', allowed -{t:.0%})' if allowed else ')')
        for s, b, r, t in short)


def case_verdict(verdict, sizes):
    """A recorded case's verdict from its checked verdict and its size
    records: ``below-reference`` when it passed and a size fell short."""
    if str(verdict) == 'pass' and any(
            getattr(s, 'verdict', None) == 'below-reference' for s in sizes):
        return 'below-reference'
    return str(verdict)


# -- the output ---------------------------------------------------------------

# long: the verdict rules in their order of precedence, read top to bottom
def judge_output(result, exit_status, expected_sizes=None, what='the run',
                 *, ceiling=None, ceiling_source='', exact_sizes=True):
    """The program's output alone (no transport, no reference): None only
    when it exited 0, printed its closing summary, every size asked (or
    announced by its header) once with finite, possible values, nothing
    wrong and nothing out of bounds; else ``(verdict, reason)``."""
    errs = list(getattr(result, 'errors', []) or [])
    first_err = f': {errs[0][:200]}' if errs else ''
    rows = list(getattr(result, 'rows', []) or [])
    if getattr(result, 'timed_out', False):
        return Verdict.HANG, f'hang: {what} timed out an operation{first_err}'
    bad = [r.size for r in rows if nonfinite_row(r)]
    if bad:
        return Verdict.WRONG_RESULTS, (
            f'wrong-results: non-finite time or bandwidth (nan / inf) at '
            f'{len(bad)} size(s), first {bad[0]} B')
    if ceiling is None:         # nothing known of the case: the generous bound
        ceiling, ceiling_source = bounds.bound(None)
    imp = impossible(rows, ceiling)
    if imp:
        src = f' ({ceiling_source})' if 'most this case' in imp[1] and \
            ceiling_source else ''
        return Verdict.WRONG_RESULTS, (
            f'wrong-results: impossible value at {imp[0]} B: {imp[1]}{src}')
    wrong = [r.size for r in rows if r.wrong]
    deltas = [m.max_delta for r in rows for m in (r.out_of_place, r.in_place)
              if m is not None and m.wrong and
              getattr(m, 'max_delta', None) is not None]
    if deltas:       # nccl-tests < 2.12: the largest difference per result
        return Verdict.WRONG_RESULTS, (
            f'wrong-results: results beyond the tolerance at {len(wrong)} '
            f'size(s) (largest difference {max(deltas):g}), first '
            f'{wrong[0]} B')
    if wrong:
        return Verdict.WRONG_RESULTS, (
            f'wrong-results: {sum(r.wrong for r in rows if r.wrong)} wrong '
            f'elements at {len(wrong)} size(s), first {wrong[0]} B')
    oob = getattr(result, 'out_of_bounds', None)
    if oob:
        return Verdict.WRONG_RESULTS, (
            f'wrong-results: {what} reported {oob} out-of-bounds value(s) '
            f'("Out of bounds values : {oob} FAILED")')
    sig = getattr(result, 'signal', None)
    if sig:
        # announced by the launcher, the C library or the shell: whatever
        # exit status was given, a process of the run died
        said = next((e for e in errs if nccltests_signal(e)), errs[0] if
                    errs else '')
        return Verdict.CRASH, (f'crash: a process of {what} died of signal '
                               f'{sig}: {said[:200]}')
    if exit_status is not None and exit_status != 0:
        done = (' after a complete table' if getattr(result, 'complete',
                                                     False) else '')
        return Verdict.CRASH, (f'crash: {what} exited with status '
                               f'{exit_status}{done}{first_err}')
    if errs:
        return Verdict.CRASH, f'crash: {what} reported an error{first_err}'
    rep = list(getattr(result, 'repeated_ranks', None) or [])
    if rep:
        n = list(getattr(result, 'rank_ids', [])).count(rep[0])
        hosts = ', '.join(getattr(result, 'hosts', []) or []) or '?'
        return Verdict.INCOMPLETE, (
            f'incomplete: rank {rep[0]} is printed by {n} processes (on '
            f'{hosts}): separate runs, not one communicator (nccl-tests '
            f'built without MPI under a launcher, or several runs in one '
            f'text)')
    summary = summary_said(result)
    if not rows:
        if exit_status is None and getattr(result, 'closed', False) is None:
            return Verdict.COULD_NOT_CHECK, (
                f'could not check: no result rows from {what}')
        if summary:
            # the run reached its end; its rows are not in the text (left
            # out of a paste): what they say could not be checked
            return Verdict.COULD_NOT_CHECK, (
                f'could not check: the result rows of {what} are not in the '
                f'text, only its closing summary ({summary}): the sizes and '
                f'their bandwidth could not be checked')
        # what the output holds: a paste may have left the rows out, so
        # never "the run printed none"
        return Verdict.INCOMPLETE, (f'incomplete: the output of {what} holds '
                                    f'no result rows')
    if not getattr(result, 'complete', False):
        if getattr(result, 'closed', False) is None and \
                str(getattr(result, 'format', '')).endswith('json-lines'):
            return Verdict.COULD_NOT_CHECK, (
                f'could not check: rccl-tests JSON lines carry no closing '
                f'summary; give the stdout of {what} too')
        swept = header_sizes(result) or expected_sizes
        if swept and not repeated_sizes(rows) and \
                not missing_sizes(rows, expected_sizes, exact_sizes, result):
            # every size of the sweep is there; only the closing lines are
            # not (not pasted, or cut after the last row)
            return Verdict.COULD_NOT_CHECK, (
                f'could not check: every size {swept_by(result, expected_sizes)}'
                f' ({len(swept)}) is in the output of {what}, but not its '
                f'closing summary ("Out of bounds values" / "Avg bus '
                f'bandwidth" lines): its own check of the results could not '
                f'be read')
        twice = repeated_sizes(rows)
        return Verdict.INCOMPLETE, (
            f'incomplete: the output of {what} ends after {len(rows)} '
            f'size(s), without its closing summary ("Out of bounds values" / '
            f'"Avg bus bandwidth" lines)' + (
                f'; {len(twice)} size(s) printed twice with different values, '
                f'first {twice[0]} B: more than one table in the text'
                if twice else ''))
    twice = repeated_sizes(rows)
    if twice:
        return Verdict.INCOMPLETE, (
            f'incomplete: {len(twice)} size(s) printed twice with different '
            f'values, first {twice[0]} B: the table is ambiguous')
    missing = missing_sizes(rows, expected_sizes, exact_sizes, result)
    if missing:
        return Verdict.INCOMPLETE, missing.replace('{what}', what)
    if all(r.wrong is None for r in rows):
        return Verdict.COULD_NOT_CHECK, (
            f'could not check: {what} did not check its results (#wrong '
            f'N/A: its check was off, -c 0)')
    if getattr(result, 'avg_busbw_failed', False):
        return Verdict.BELOW_REFERENCE, (
            f'below-reference: {what}\'s own average bus bandwidth check '
            f'(NCCL_TESTS_MIN_BW) failed: {result.avg_busbw} GB/s')
    if exit_status is None:
        return Verdict.COULD_NOT_CHECK, (
            f'could not check: the exit status of {what} is unknown')
    return None


# -- the whole case -----------------------------------------------------------

def _exact(ev, result):
    if ev.collective is None and getattr(result, 'collective', None) is None:
        return ev.exact_sizes
    if not ev.exact_sizes:
        return False
    try:
        from ccl_health.evidence import collectives as C
        name = ev.collective or result.collective
        return C.COLLECTIVES[C.canonical(name)].exact_sizes
    except Exception:
        return ev.exact_sizes


def _version_groups(vers):
    """``2.28.3 on 3 ranks (a, b, c); 2.21.5 on 1 rank (d)``."""
    groups = {}
    for rank, v in sorted(vers.items()):
        groups.setdefault(v, []).append(rank)
    return '; '.join(
        f'{v} on {len(rs)} rank{"s" if len(rs) > 1 else ""} '
        f'({", ".join(rs[:3])}{", ..." if len(rs) > 3 else ""})'
        for v, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])))


def _warn_failure(warns, proof=None):
    """``(verdict, reason)`` of the first fatal WARN, or None.  A plugin
    that failed to start is a fallback; the same error where the plugin's
    own channels were connected (``proof`` proves the plugin) is no
    fallback: the plugin failed while it ran, a crash."""
    fatal = [w for w in warns if w.fatal and not w.benign]
    if not fatal:
        return None
    w = fatal[0]
    more = f' (+{len(fatal) - 1} more fatal)' if len(fatal) > 1 else ''
    v = {'plugin-init': Verdict.FALLBACK, 'link-down': Verdict.NODE_FAULT
         }.get(w.fatal, Verdict.CRASH)
    where = f' in {w.source}' if w.source else ''
    ran = str(getattr(proof, 'proven', None) or '')
    if v is Verdict.FALLBACK and ran.startswith('net-plugin'):
        return Verdict.CRASH, (
            f'crash: the net plugin failed after its channels were connected '
            f'({ran} proven): NCCL WARN of class {w.fatal}{where}: '
            f'{w.text[:200]}{more}')
    return v, (f'{v}: NCCL WARN of class {w.fatal}{where}: '
               f'{w.text[:200]}{more}')


def _possible(ev, att):
    """The attempt's WARNs as they bear on this case: one printed by the
    network code (IB transport, verbs wrapper, net plugin:
    :attr:`ccl_health.evidence.warns.Warn.network`) on a case whose asked
    and proven transport is ``intra`` (one node, no network) cannot be of
    its transport: named, not fatal."""
    proof = att.proof
    if ev.transport not in (None, 'intra') or proof is None or \
            getattr(proof, 'asked', None) != 'intra' or \
            getattr(proof, 'proven', None) != 'intra':
        return list(att.warns)
    return [dataclasses.replace(
        w, fatal=None, note=f'{w.fatal}, but from the network code on an '
        f'intra-node case') if w.fatal and getattr(w, 'network', False)
        else w for w in att.warns]


def _warn_note(warns):
    if not warns:
        return ''
    parts = [w.describe() for w in warns[:3]]
    more = f' (+{len(warns) - 3} more)' if len(warns) > 3 else ''
    return f'; {len(warns)} NCCL WARN line(s): ' + '; '.join(parts) + more


def judge_attempt(ev: CaseEvidence, att: Attempt):
    """``(verdict, reason, findings)`` of one attempt; a hang and a crash
    name their rank (:mod:`ccl_health.judge.stalled`)."""
    if att.killed:
        return Verdict.HANG, f'hang: {att.killed}{stalled.hang(att)}', []
    v, reason, found = _judge_attempt(ev, att)
    if v is Verdict.CRASH:
        reason += stalled.crash(att)
    return v, reason, found


def _judge_attempt(ev: CaseEvidence, att: Attempt):
    res = att.result
    if att.launch_error and not getattr(res, 'rows', None):
        return Verdict.COULD_NOT_CHECK, (f'could not check: '
                                         f'{att.launch_error}'), []
    warns = _possible(ev, att)
    if res is None:
        # no output, but a log saying an operation failed: that failure;
        # or a log proving another transport than asked: a fallback
        warn = _warn_failure(warns, att.proof)
        if warn:
            return warn[0], f'{warn[1]} (no output of {ev.what})', []
        verdict, why = _proven(ev, att)
        if verdict is Verdict.FALLBACK:
            return verdict, f'{why} (no output of {ev.what})', []
        return Verdict.COULD_NOT_CHECK, (f'could not check: no output of '
                                         f'{ev.what}'), []
    exact = _exact(ev, res)
    bad = judge_output(res, att.exit_status, ev.expected_sizes, ev.what,
                       ceiling=ev.ceiling_gbps,
                       ceiling_source=ev.ceiling_source, exact_sizes=exact)
    found = findings(res, ev.reference)
    if bad and bad[0] in (Verdict.HANG, Verdict.WRONG_RESULTS):
        return bad[0], bad[1], found
    warn = _warn_failure(warns, att.proof)
    if warn and bad is not None and bad[0] is Verdict.INCOMPLETE and \
            not getattr(res, 'closed', False):
        # the output stopped after a fatal WARN: the run failed there
        return _stopped_after(warn, res, att, ev.what) + (found,)
    if warn and (bad is None or not bad[0].failed or
                 bad[0] is Verdict.BELOW_REFERENCE):
        return warn[0], warn[1], found
    if warn and bad is not None and bad[0] is Verdict.CRASH:
        return Verdict.CRASH, _crash_after(bad[1], warns, res), found
    # the ranks' library versions, where known (each rank's log's line)
    vers = dict(getattr(att, 'rank_versions', None) or {})
    if bad is None and len(set(vers.values())) > 1:
        return Verdict.NODE_FAULT, (
            'node-fault: ranks run different NCCL versions: ' +
            _version_groups(vers)), found
    if bad is not None:
        return _measured_too(bad, ev, att, found)
    verdict, why = _proven(ev, att)
    # an output of other ranks than the case's: its bandwidth is not the
    # case's, neither a pass nor a shortfall (another transport than asked
    # stays the failure it is; no reference at all stays no-reference)
    other = _other_ranks(ev, res) if (
        ev.reference is not None or not ev.judge_bandwidth) else None
    if other and (verdict is None or verdict is Verdict.COULD_NOT_CHECK):
        return Verdict.COULD_NOT_CHECK, other, found
    if verdict is Verdict.COULD_NOT_CHECK:
        # only a pass needs the transport proven: a measured shortfall
        # against the reference of the key is a failure whatever the proof
        short = _measured_short(ev, att, found)
        if short:
            return Verdict.BELOW_REFERENCE, short, found
    if verdict is not None:
        return verdict, why, found
    proof_reason = why
    if not ev.judge_bandwidth:
        return Verdict.PASS, proof_reason, found
    if ev.reference is None:
        return Verdict.NO_REFERENCE, (
            f'no-reference: {ev.missing_reference}' if ev.missing_reference
            else 'no-reference: no reference entry'), found
    short = [f for f in found if f.below]
    if short:
        return Verdict.BELOW_REFERENCE, below_reason(
            [(f.size, f.busbw, f.ref, f.tolerance) for f in short]), found
    n = sum(1 for f in found if f.ref is not None)
    if n == 0:
        key = ev.missing_reference or _key(ev)
        return Verdict.NO_REFERENCE, (
            f'no-reference: none of the sizes of the output is in the '
            f'reference for {key}'), found
    big = max(res.rows, key=lambda r: r.size)
    return Verdict.PASS, (
        f'{n} sizes within reference; {big.busbw:.1f} GB/s at '
        f'{format_size(big.size)}; {proof_reason}'), found


def _other_ranks(ev, res):
    """The reason where the output's communicator is not the case's: it
    ran on another number of ranks than the case asked (``ev.ranks``: its
    nodes x GPUs), so its busbw is not that of the key it would be judged
    by (an 8-GPU node whose probe ran on 2 GPUs is not checked); None where
    either is unknown or they agree."""
    seen = getattr(res, 'nranks', None)
    if not ev.ranks or not seen or seen == ev.ranks:
        return None
    asked = (f': {ev.nodes} node{"s" if ev.nodes != 1 else ""} x '
             f'{ev.gpus_per_node} GPUs' if ev.nodes and ev.gpus_per_node
             else '')
    return (f'could not check: the output of {ev.what} is of {seen} ranks, '
            f'the case asked {ev.ranks}{asked} (its bandwidth is not that '
            f'of the case)')


def _measured_too(bad, ev, att, found):
    """The output's own failing verdict ``bad`` with what its rows measured
    against the reference: below it where only the exit status was unknown
    (the numbers were measured whatever it was), and a cut table's
    shortfall named with its incomplete verdict (it still shows its
    collapse)."""
    v, reason = bad
    short = _measured_short(ev, att, found)
    if short and v is Verdict.COULD_NOT_CHECK and att.exit_status is None \
            and 'exit status' in reason:
        return Verdict.BELOW_REFERENCE, short, found
    if short and v is Verdict.INCOMPLETE:
        reason += f'; the sizes it shows: {short}'
    return v, reason, found


def _measured_short(ev, att, found):
    """The reason of a measured shortfall (sizes below the reference
    found for the case's key), naming the transport as unknown where the
    proof does not prove it; None without a shortfall, or where the proof
    shows a fallback (that verdict says more)."""
    if not ev.judge_bandwidth or ev.reference is None:
        return None
    short = [f for f in found if f.below]
    if not short:
        return None
    verdict, why = _proven(ev, att)
    if verdict is Verdict.FALLBACK:
        return None
    reason = below_reason([(f.size, f.busbw, f.ref, f.tolerance)
                           for f in short])
    if verdict is not None:
        reason += f'; transport not proven: {_unproven_why(att, why)}'
    return reason


def _unproven_why(att, why):
    """Why the transport is unknown, without the verdict's words."""
    if att.proof is None:
        return 'no debug log'
    text = str(why if getattr(att.proof, 'ok', False) else
               getattr(att.proof, 'reason', '') or why)
    for head in ('could not check: ', 'the transport is not proven: ',
                 'the transport was not proven '):
        if text.startswith(head):
            text = text[len(head):]
    return text


def _crash_after(reason, warns, res):
    """A crash's reason: its first fatal WARN (the cause), then the
    program's first error line (:func:`judge_output`'s tail)."""
    first = (list(getattr(res, 'errors', []) or []) or [''])[0][:200]
    reason = reason.removesuffix(f': {first}') if first else reason
    w = next(w for w in warns if w.fatal and not w.benign)
    where = f', in {w.source.rsplit("/", 1)[-1]}' if w.source else ''
    return f'{reason} after NCCL WARN {w.text[:200]} (fatal: {w.fatal}' \
        f'{where})' + (f'; {first}' if first else '')


def _stopped_after(warn, res, att, what):
    """``(verdict, reason)`` of an output that stopped, without its
    closing summary, after a fatal WARN: a ``hang`` where the program had
    started measuring and then printed nothing more (no error line, no exit
    status), else the WARN's verdict (a crash: the run failed before or
    while measuring)."""
    rows = list(getattr(res, 'rows', None) or [])
    if rows and att.exit_status is None and \
            not getattr(res, 'errors', None) and \
            warn[0] is Verdict.CRASH:
        return Verdict.HANG, (
            f'hang: {what} stopped after {len(rows)} size(s), after a fatal '
            f'WARN, without its closing summary: '
            f'{warn[1].split(": ", 1)[1]}')
    done = (f'after {len(rows)} size(s)' if rows else 'before any result '
            'row')
    return warn[0], f'{warn[1]} ({what} stopped {done})'


def _key(ev):
    return f'{ev.transport or "?"} {ev.collective or "?"} {ev.nodes or "?"}' \
        f' node(s) x {ev.gpus_per_node or "?"} GPUs'


def _logs_of_other_processes(att):
    """``(COULD_NOT_CHECK, reason)`` where the output names its ranks'
    processes (the ``Pid`` of nccl-tests' rank lines, of its JSON
    ``devices``) and the debug logs (``host:pid`` of NCCL's logger
    prefix, the same ``getpid()``) do not cover them all: a log of
    another run proves nothing of this one, and a rank whose process left
    no log is not proven.  None when either side does not name
    processes."""
    want = {p for p in getattr(att.result, 'rank_pids', None) or ()
            if p is not None}
    ranks = getattr(att.debug, 'ranks', None) or {}
    have = {r.pid for r in ranks.values()
            if getattr(r, 'pid', None) is not None}
    missing = sorted(want - have)
    if not want or not have or not missing:
        return None

    def pids(ps):
        ps = sorted(ps)
        return ', '.join(map(str, ps[:6])) + (
            f' and {len(ps) - 6} more' if len(ps) > 6 else '')
    if not want & have:
        return Verdict.COULD_NOT_CHECK, (
            f'could not check: the debug logs are not of this run: they '
            f'name process(es) {pids(have)}, the output\'s ranks ran as '
            f'{pids(want)}')
    return Verdict.COULD_NOT_CHECK, (
        f'could not check: no debug log of the rank process(es) '
        f'{pids(missing)} (the logs name {pids(have)})')


def version_of_code(code):
    """``2.28.3`` of NCCL's ``NCCL_VERSION_CODE`` 22803 (``2.8.4`` of 2804:
    before 2.9 the code was X*1000 + Y*100 + Z); None for no code."""
    if not isinstance(code, int) or isinstance(code, bool) or code <= 0:
        return None
    if code >= 10000:
        return f'{code // 10000}.{code // 100 % 100}.{code % 100}'
    return f'{code // 1000}.{code // 100 % 10}.{code % 100}'


_BASE_VERSION = re.compile(r'^(\d+\.\d+\.\d+)')


def _logs_of_another_library(att):
    """``(COULD_NOT_CHECK, reason)`` where the output names the library
    its process loaded (nccl-tests' ``nccl-library=22803``, from
    ``ncclGetVersion``) and every debug log that prints ``NCCL version``
    / ``RCCL version`` prints another: the same process cannot print two,
    the logs are not of this run.  (Ranks that disagree among themselves
    are the version rule's ``node-fault``.)"""
    want = version_of_code(getattr(att.result, 'nccl_version', None))
    ranks = getattr(att.debug, 'ranks', None) or {}
    seen = set()
    for rank in ranks.values():
        vers = getattr(rank, 'versions', None) or {}
        v = vers.get('nccl_version') or vers.get('rccl_version')
        m = _BASE_VERSION.match(v or '')
        if m:
            seen.add(m.group(1))
    if want is None or not seen or want in seen:
        return None
    return Verdict.COULD_NOT_CHECK, (
        f'could not check: the debug logs are not of this run: they print '
        f'NCCL {", ".join(sorted(seen))}, the output\'s library is {want}')


def _proven(ev, att):
    """``(failure verdict or None, reason)`` of the transport proof."""
    proof = att.proof
    other = (_logs_of_other_processes(att) or _logs_of_another_library(att)
             if proof is not None else None)
    if other is not None and (proof.ok or
                              getattr(proof, 'proven', None) is None):
        return other
    if proof is None:
        if not ev.proof_required:
            return None, 'transport not proven (no debug log; not required)'
        return Verdict.COULD_NOT_CHECK, ('could not check: the transport '
                                         'was not proven (no debug log)')
    if not proof.ok:
        if getattr(proof, 'proven', None) is None:
            return Verdict.COULD_NOT_CHECK, f'could not check: {proof.reason}'
        beyond = _beyond_proven(ev, att, proof)
        if beyond:
            return Verdict.COULD_NOT_CHECK, f'could not check: {beyond}'
        return Verdict.FALLBACK, f'fallback: {proof.reason}'
    return None, proof.reason


def _beyond_proven(ev, att, proof):
    """Why a fallback the log shows cannot be the run's transport (its
    output measured more than that transport can carry: a debug log cut
    by a full disk, or not of this run), or None."""
    if proof.proven != 'net-socket':
        return None
    bound = bounds.socket_bound(ev.nodes, ev.gpus_per_node)
    rows = getattr(att.result, 'rows', None) or []
    best = max((m.busbw for r in rows for m in (r.out_of_place, r.in_place)
                if m is not None and finite(m.busbw)), default=None)
    if bound is None or best is None or best <= bound.gbps:
        return None
    return (f'the transport is not proven: {best:.4g} GB/s measured, '
            f'above what NET/Socket can carry ({bound.reason}), yet the '
            f'debug log shows: {proof.reason} (the log is not all of this '
            f'run\'s)')


def _contended(ev, verdict, reason):
    states = ev.node_states or {}
    if not (states.get('before') or states.get('after') or
            states.get('samples')):
        return verdict, reason
    from ccl_health.evidence.nodestate.diagnose import contention
    found = contention([states.get('before'), *states.get('samples', []),
                        states.get('after')], ours=ev.run_pids())
    if found is None:
        return verdict, reason
    return Verdict.CONTENDED, (f'contended: {found.text} while the run ran; '
                               f'measured: {reason}')


#: what a retry may absorb: a bandwidth shortfall only
ABSORBED = (Verdict.BELOW_REFERENCE, Verdict.DROP)


def judge(ev: CaseEvidence) -> Judgement:
    """The verdict of one case from all its evidence."""
    if not ev.attempts:
        return Judgement(Verdict.COULD_NOT_CHECK,
                         f'could not check: {ev.what} was not run')
    judged = [judge_attempt(ev, a) for a in ev.attempts]
    pick = len(judged) - 1
    for i, (v, _, _) in enumerate(judged[:-1]):
        # a try that could not be checked is not absorbed either: only a
        # shortfall is
        if (v.failed or v is Verdict.COULD_NOT_CHECK) and v not in ABSORBED:
            pick = i
            break
    v, reason, found = judged[pick]
    if len(judged) > 1:
        reason = f'attempt {pick + 1} of {len(judged)}: {reason}'
    warns = [w for a in ev.attempts for w in _possible(ev, a)]
    reason += _warn_note(warns)
    v, reason = _contended(ev, v, reason)
    return Judgement(v, reason, found, warns, pick + 1,
                     ev.attempts[pick].proof)
