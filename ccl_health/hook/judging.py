"""Every decision of the hook, in one place: what a probe's evidence
means (:func:`judge_all_reduce`, :func:`judge_copy_matrix`), what the tries
together mean (:func:`judge_attempts`: a retry absorbs a bandwidth
shortfall only), and how the node's state comes first
(:func:`with_node_state`, :func:`node_state_first`).  It uses
:mod:`ccl_health.judge.verdicts` (``judge_output``, ``judge_links``,
``below_reference``) and compares nothing by itself, so that the one judge
(``ccl_health.judge.judge``) can take its place."""

import dataclasses
import re
import time

from ccl_health.hook.settings import (COULD_NOT_CHECK, HEALTHY, PREFIX,
                                      UNHEALTHY)


@dataclasses.dataclass
class HookResult:
    code: int
    line: str
    probes: list
    seconds: float
    attempts: int = 1
    verdict: str = 'could-not-check'
    system: str = ''
    partition: str = ''
    #: the node's state before and after the probes and the causes read
    #: from it (:func:`with_node_state`)
    node_state: dict = dataclasses.field(default_factory=dict)
    #: one line per try that failed: ``attempt 1 of 2: wrong-results: ...``
    attempt_notes: list = dataclasses.field(default_factory=list)


def result(verdict, why, probes=(), seconds=0.0, attempts=1, system='',
           partition=''):
    """The hook's result for a verdict and its one-line reason."""
    from ccl_health.judge.verdicts import exit_code
    code = exit_code([verdict])
    why = ' '.join(str(why).split())
    return HookResult(code, f'{PREFIX[code]}: {why}', list(probes), seconds,
                      attempts, str(verdict), system, partition)


def unjudged(why, t0, found=('', '')):
    why = ' '.join(str(why).split()) or 'unknown error'
    return HookResult(COULD_NOT_CHECK, f'COULD-NOT-CHECK: {why}', [],
                      time.monotonic() - t0, 1, 'could-not-check',
                      *(found or ('', '')))


def not_started(probe, what, limit=None):
    """A probe the limit left no time to start: could not check, naming
    the limit."""
    from ccl_health.judge.verdicts import Verdict
    probe.verdict = Verdict.COULD_NOT_CHECK.value
    probe.why = (f'the limit left no time for {what} (--limit '
                 f'{limit:g} s: raise it)' if limit else
                 f'the limit left no time for {what} (raise --limit)')
    return probe


def _timed_out(probe, got, what, limit):
    """Past its bound: a hang only where the program had started its
    timed work; else the limit was too short to start it."""
    from ccl_health.judge.verdicts import Verdict
    if got.started:
        probe.verdict = Verdict.HANG.value
        probe.why = (f'hang: {what} did not finish within the '
                     f'{probe.seconds:.0f} s left')
    else:
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = (f'{what} did not start within the {probe.seconds:.1f} '
                     f's the limit left' + (f' (--limit {limit:g} s: raise '
                                              f'it)' if limit else ''))
    return probe


def judge_all_reduce(probe, got, res, ev, launcher, where, limit=None):
    """The verdict of one all_reduce probe from its evidence: ``got``
    (:class:`ccl_health.hook.run.Outcome`), ``res`` the parsed output,
    ``ev`` the debug-log evidence (read only after a clean exit)."""
    from ccl_health.evidence import debuglog
    from ccl_health.judge.verdicts import (Verdict, below_reference,
                                           judge_output)
    from ccl_health.units import format_size
    what = f'all_reduce on {where}'
    if got.not_started:
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = (f'cannot start the launcher {launcher[0]!r}: '
                     f'{got.not_started}')
        return probe
    if got.timed_out:
        return _timed_out(probe, got, what, limit)
    probe.exit_status = got.returncode
    out = got.output
    lines = [ln.strip() for ln in out.strip().splitlines() if ln.strip()]
    last = (lines or ['no output'])[-1][:200]
    if got.returncode in (126, 127) or (
            not res.rows and not res.errors and not got.started):
        # nothing of nccl-tests' own: the launcher or the program never ran
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = (f'{" ".join(launcher)} could not start all_reduce_perf '
                     f'on {where} (exit {got.returncode}): {last}')
        return probe
    bad = judge_output(res, got.returncode, expected_sizes=[probe.size],
                       what=what)
    if bad:
        probe.verdict, probe.why = bad[0].value, bad[1]
        # the launcher's last words, where nccl-tests named no error
        said = [ln for ln in lines if not ln.startswith('#') and
                not re.match(r'^\d+\s', ln)]
        if bad[0] is Verdict.CRASH and not res.errors and said:
            probe.why += f': {said[-1][:200]}'
        return probe
    probe.versions = ev.versions
    proof = debuglog.prove('intra', ev)
    probe.proven = proof.proven or 'none'
    probe.paths = ', '.join(sorted(ev.via)) or 'no channels'
    if proof.proven is None:
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = f'{where}: {proof.reason}'
        return probe
    if not proof.ok:
        probe.verdict = Verdict.FALLBACK.value
        probe.why = f'fallback: {where}: {proof.reason}'
        return probe
    probe.busbw = res.by_size()[probe.size].busbw
    if probe.ref and below_reference(probe.busbw, probe.ref,
                                     probe.tolerance):
        probe.verdict = Verdict.BELOW_REFERENCE.value
        probe.why = (f'{where} all_reduce {format_size(probe.size)}: '
                     f'{probe.busbw:.1f} GB/s < {probe.expected:.1f} '
                     f'(reference {probe.ref:.1f} GB/s; channels '
                     f'{probe.paths})')
        return probe
    probe.ok = True
    probe.verdict = Verdict.PASS.value
    return probe


def judge_copy_matrix(probe, got, res, peer_copy, limit=None):
    """The verdict of the copy matrix (``judge_links``)."""
    from ccl_health.judge.verdicts import Verdict, judge_links
    what = f'{probe.tool} (the copy matrix of the GPU links)'
    if got.not_started:
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = f'cannot start {probe.path}: {got.not_started}'
        return probe
    if got.timed_out:
        return _timed_out(probe, got, what, limit)
    probe.exit_status = got.returncode
    if res is None:
        lines = [ln.strip() for ln in got.output.splitlines() if ln.strip()]
        last = (lines or ['no output'])[-1][:200]
        probe.verdict = Verdict.COULD_NOT_CHECK.value
        probe.why = (f'{probe.path} did not start (exit {got.returncode}): '
                     f'{last}')
        return probe
    label = {i: g for i, g in enumerate(probe.gpus)}.get
    probe.init_s, probe.copy_s = res.init_s, res.copy_s
    probe.no_peer = [(label(a), label(b)) for a, b in sorted(set(
        res.no_peer))]
    verdict, why, judged = judge_links(res, got.returncode, peer_copy,
                                       label, expect_gpus=len(probe.gpus))
    probe.judged = any(ref is not None for _, ref, _, _ in judged)
    probe.links = [{'name': ln.name(label), 'src': ln.src, 'dst': ln.dst,
                    'bytes': ln.bytes, 'seconds': ln.seconds,
                    'gbps': ln.gbps, 'ref': ref, 'lower': lo, 'ok': ok}
                   for ln, ref, lo, ok in judged]
    probe.verdict, probe.why = verdict.value, why
    probe.ok = verdict is Verdict.PASS
    return probe


#: what a later try may absorb: a bandwidth shortfall, nothing else
ABSORBABLE = ('below-reference', 'drop')


def attempt_over(probes):
    """After one try: ``'pass'`` (stop, healthy), ``'retry'`` (only a
    bandwidth shortfall: another try may absorb it) or ``'stop'`` (a
    fault no retry may hide, or could not check)."""
    verdicts = [q.verdict for q in probes]
    if verdicts and all(v == 'pass' for v in verdicts):
        return 'pass'
    if all(v in ('pass',) + ABSORBABLE for v in verdicts):
        return 'retry'
    return 'stop'


def judge_attempts(tries, repeats, result_of, pair_entry, size, n, system,
                   partition, t0, links_tool=None, links_only=False):
    """The result of every try (``tries``: the probes of each, in order).
    A try that passed after tries with a bandwidth shortfall only is
    healthy; a try with any other fault is the verdict, named with its
    number (``attempt 1 of 2``)."""
    from ccl_health.judge.verdicts import Verdict, worst
    notes = []
    for k, probes in enumerate(tries, 1):
        bad = [q for q in probes if not q.ok]
        if bad:
            v = worst([q.verdict for q in bad])
            same = [q for q in bad if q.verdict == v.value]
            notes.append(f'attempt {k} of {repeats}: {v.value}: ' +
                         '; '.join(q.why for q in same[:3]))
    probes = [q for ps in tries for q in ps]
    last = tries[-1] if tries else []
    bad = [q for q in last if not q.ok]
    if bad:
        v = worst([q.verdict for q in bad])
        same = [q for q in bad if q.verdict == v.value]
        why = '; '.join(q.why for q in same[:3])
        res = result_of(v, why, probes, len(tries))
    elif links_tool is not None:
        res = result_of(Verdict.PASS, _links_pass_line(
            last, links_only, system, partition, n, size, t0), probes,
            len(tries))
    else:
        res = result_of(Verdict.PASS, _pass_line(
            last, pair_entry, size, n, system, partition, t0), probes,
            len(tries))
    res.attempt_notes = notes
    return res


def _pass_line(probes, pair_entry, size, n, system, partition, t0):
    from ccl_health.units import format_size
    main_probe = probes[0]
    pairs = len(probes) - 1
    pair_txt = ''
    if pairs:
        pair_txt = (f', {pairs} GPU pairs ok' if pair_entry else
                    f', {pairs} GPU pairs ran clean (bandwidth not judged: '
                    f'no reference for 1 node x 2 GPUs at '
                    f'{format_size(size)})')
    return (f'all_reduce {format_size(size)} on {n} GPUs '
            f'{main_probe.busbw:.1f} GB/s (reference {main_probe.ref:.1f}) '
            f'on {system}:{partition}{pair_txt}, '
            f'{time.monotonic() - t0:.1f} s')


def _links_pass_line(probes, links_only, system, partition, n, size, t0):
    """The HEALTHY line where the copy matrix checked the links."""
    from ccl_health.hook.probes import links_summary
    from ccl_health.units import format_size
    where = f'{system}:{partition}'
    links_txt = links_summary(probes[-1], where)
    if links_only:
        head = f'{links_txt} on {where} (1 GPU: no all_reduce)'
    else:
        main_probe = probes[0]
        head = (f'all_reduce {format_size(size)} on {n} GPUs '
                f'{main_probe.busbw:.1f} GB/s (reference '
                f'{main_probe.ref:.1f}) on {where}, {links_txt}')
    return f'{head}, {time.monotonic() - t0:.1f} s'


# -- the node's state ---------------------------------------------------------

#: what the line says after a foreign process on a node the hook runs on
#: (an idle node: nothing of a job should be there)
IDLE_NODE = 'leftover process on an idle node: drain'


def cause_text(cause):
    """A cause as the verdict line names it."""
    if cause.kind == 'foreign-process':
        return cause.text[:-1] + f'; {IDLE_NODE})' if \
            cause.text.endswith(')') else f'{cause.text} ({IDLE_NODE})'
    return cause.text


def causes_of(before, after, site=None, expected_gpus=None):
    from ccl_health.evidence.nodestate.diagnose import (MEMORY_HELD_FRACTION,
                                                        diagnose)
    health = getattr(site, 'health', None)
    return diagnose(before, after,
                    expected_model=getattr(health, 'gpu_model', None),
                    expected_count=expected_gpus,
                    memory_held=getattr(health, 'memory_held', None) or
                    MEMORY_HELD_FRACTION)


def node_state_detail(before, after, causes):
    return {
        'before': before.to_dict() if before else None,
        'after': after.to_dict() if after else None,
        'causes': [dataclasses.asdict(c) for c in causes],
        'not_checked': {**(before.not_checked if before else {}),
                        **(after.not_checked if after else {})},
        'seconds': round((before.seconds if before else 0) +
                         (after.seconds if after else 0), 3)}


def with_node_state(res, before, after, site=None, expected_gpus=None):
    """The probes' result ``res`` with the causes the node's state shows
    named first: a failed probe's line starts with the first cause; a
    cause that drains (a foreign process or memory held: ``contended``; an
    NVLink link down, uncorrectable ECC, a row-remap failure, a drain XID,
    a lost GPU: ``node-fault``) makes passing probes UNHEALTHY, and an
    unjudged result too (the node state was read first: whatever else is
    missing, its fault is named); other causes are noted after the
    line.  The readings and causes go into ``res.node_state``."""
    from ccl_health.judge.verdicts import Verdict
    causes = causes_of(before, after, site, expected_gpus)
    res.node_state = node_state_detail(before, after, causes)
    if not causes:
        return res
    first = causes[0]
    named = cause_text(first)
    why = res.line.split(': ', 1)[1] if ': ' in res.line else res.line
    shared = first.kind in ('foreign-process', 'memory-held')
    if res.code == UNHEALTHY:
        if shared:
            res.verdict = Verdict.CONTENDED.value
        res.line = f'{PREFIX[UNHEALTHY]}: {named}: {why}'
    elif res.code == HEALTHY and first.drain:
        res.code = UNHEALTHY
        res.verdict = (Verdict.CONTENDED if shared else
                       Verdict.NODE_FAULT).value
        res.line = (f'{PREFIX[UNHEALTHY]}: {named}: although the probes '
                    f'passed: {why}')
    elif res.code == HEALTHY:
        res.line += '; noted: ' + '; '.join(c.text for c in causes[:2])
    elif first.drain:
        res.code = UNHEALTHY
        res.verdict = (Verdict.CONTENDED if shared else
                       Verdict.NODE_FAULT).value
        res.line = (f'{PREFIX[UNHEALTHY]}: {named} (also could not check: '
                    f'{why})')
    else:
        res.line += f' (node state: {named})'
    return res


def node_without_gpus(gpus, expected, system, partition):
    """No GPU answered the driver (``gpus.why_none``): where the node's
    partition has a known GPU count, a node fault (``missing-gpu``: a dead
    driver or lost GPUs); else could not check (``None``)."""
    from ccl_health.judge.verdicts import Verdict
    if not expected:
        return None
    return Verdict.MISSING_GPU, (
        f'missing GPU: {gpus.why_none}; {system}:{partition} has '
        f'{expected} GPUs')
