"""The hook as a thin door to the one judge: each all_reduce probe's
attempts go into ONE :class:`ccl_health.judge.caseevidence.CaseEvidence`
(:func:`output_attempt`, :func:`probe_attempt`, :func:`probe_evidence`)
and :func:`ccl_health.judge.casejudge.judge` decides (a retry absorbs a
bandwidth shortfall only; any other fault in any attempt is the verdict,
naming the attempt); the copy matrix goes to the judge of the links
(:func:`ccl_health.judge.linkjudge.judge_links`).  What is left here is the
hook's line: its prefix, the node's state first (:func:`with_node_state`)
and the action (:func:`with_action`: isolate / reset / monitor)."""

import dataclasses
import time

from ccl_health.hook.probe import LinksProbe
from ccl_health.hook.settings import COULD_NOT_CHECK, PREFIX, UNHEALTHY
from ccl_health.oneline import clean


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
    #: what to do with the node (:mod:`ccl_health.judge.actions`:
    #: isolate / reset / monitor) after a failing verdict, else None
    action: object = None
    #: the cause named first (:data:`ccl_health.sitedata.nodeactions.CAUSES`)
    cause: object = None
    #: what the resource manager said of the node (:class:`ccl_health.
    #: evidence.nodestate.slurmnode.Reading`'s dict), and the PCI bus's GPUs
    role: dict = dataclasses.field(default_factory=dict)
    #: the folder keeping the probes' outputs and logs of a failing check
    #: (:mod:`ccl_health.hook.keep`), or why they were not kept
    evidence: str = ''
    #: how the probes ran: ``one process: <ccl-health-probe>``, or ``apart:
    #: <why>`` (all_reduce_perf and the copy matrix), '' where none ran
    probe_path: str = ''
    #: what became of the one probe process started ahead (:class:`ccl_
    #: health.hook.probes.EarlyProbe`): used, or ended and why; '' where
    #: none was started
    probe_ahead: str = ''
    #: where the time went, seconds by phase (:mod:`ccl_health.hook.
    #: timings`)
    timings: dict = dataclasses.field(default_factory=dict)


#: the line's word for a node that is not for this check (not a GPU node)
SKIPPED = 'SKIPPED'


def result(verdict, why, probes=(), seconds=0.0, attempts=1, system='',
           partition='', prefix=None):
    """The hook's result for a verdict and its one-line reason
    (``prefix``: the line's first word, default the exit code's)."""
    from ccl_health.judge.verdicts import exit_code
    code = exit_code([verdict])
    why = clean(why, None)
    return HookResult(code, f'{prefix or PREFIX[code]}: {why}', list(probes),
                      seconds, attempts, str(verdict), system, partition)


def unjudged(why, t0, found=('', '')):
    why = clean(why, None) or 'unknown error'
    return HookResult(COULD_NOT_CHECK, f'COULD-NOT-CHECK: {why}', [],
                      time.monotonic() - t0, 1, 'could-not-check',
                      *(found or ('', '')))


def _decided(probe, verdict_reason):
    verdict, probe.why = verdict_reason
    probe.verdict = verdict.value
    return probe


def not_started(probe, what, limit=None):
    """A probe the limit left no time to start
    (:func:`ccl_health.judge.nodejudge.no_time`)."""
    from ccl_health.judge import nodejudge as node
    return _decided(probe, node.no_time(what, limit))


def _timed_out(probe, got, what, limit):
    """Past its bound (:func:`ccl_health.judge.nodejudge.stopped`): a hang only
    where the program had started its timed work."""
    from ccl_health.judge import nodejudge as node
    return _decided(probe, node.stopped(what, got.started, probe.seconds,
                                        limit))


def output_attempt(text, logs, exit_status, *, parse=None, result=None):
    """One attempt of an all_reduce probe from what it left (the case
    assembler's :func:`ccl_health.judge.assemble.attempt`): its output
    ``text`` (``result``: already parsed), its exit status and its NCCL
    debug logs (``logs``; the NCCL lines of the output count too): the
    transport asked, ``intra``, proven on every rank of the output's
    header.  No GPU needed: the cross-door matrix calls it on
    captures."""
    from ccl_health.judge import assemble
    return assemble.attempt(text, logs, exit_status, result=result,
                            parse=parse, transport='intra', nodes=1)


def probe_evidence(attempts, size, gpus, entry, missing_reference='',
                   site=None, judge_bandwidth=True, node=None):
    """The one case of a probe (an all_reduce on ``gpus``, every attempt
    of it) from the case assembler (:func:`ccl_health.judge.assemble.
    case`): intra-node, one node, ``len(gpus)`` GPUs, the one ``size``
    asked, the reference ``entry`` for that key (or why none), the site's
    benign WARNs and ceilings; the bound of an impossible busbw from the
    NVLink links of ``gpus`` in the node state ``node`` (NVML) where it
    has them (the node's state itself is the hook's to judge:
    :func:`with_node_state`)."""
    from ccl_health.judge import assemble
    if entry is not None and size in entry.busbw:
        # the key the hook asks for is the entry at its one size (a program
        # that prints more sizes is judged on them all for everything else)
        entry = dataclasses.replace(entry, busbw={size: entry.busbw[size]})
    return assemble.case(
        attempts, what=f'all_reduce on GPUs {gpus_text(gpus)}',
        transport='intra', collective='all_reduce', nodes=1,
        gpus_per_node=len(gpus), ranks=len(gpus), expected_sizes=[size],
        site=site, node=node, gpus=gpus, reference=entry,
        missing_reference=missing_reference, judge_bandwidth=judge_bandwidth)


def gpus_text(gpus):
    return '<->'.join(map(str, gpus)) if len(gpus) == 2 else \
        ','.join(map(str, gpus))


def probe_attempt(got, launcher, what, limit=None, program=None,
                  logs=(), ras_answer=None):
    """What one run of a probe left (``got``:
    :class:`ccl_health.hook.bounded.Outcome`) as an attempt: a launcher that
    could not start, a limit too short to start (``launch_error``:
    could not check), a program that started and stopped progressing
    (``killed``: a hang, with what NCCL's RAS said first: ``ras_answer``,
    :mod:`ccl_health.evidence.ras`), else its output, exit status and
    logs."""
    from ccl_health.judge import assemble
    if got.not_started:
        return assemble.unrun(launch_error=f'cannot start the launcher '
                                           f'{launcher[0]!r}: '
                                           f'{got.not_started}')
    if got.timed_out:
        from ccl_health.judge import nodejudge as node
        if got.started:     # the judge names the hang from the kill
            from ccl_health.evidence.ras import Answer
            return assemble.unrun(
                killed=node.unfinished(what, got.seconds),
                ras=ras_answer if isinstance(ras_answer, Answer) else None,
                logs=logs, stdout=got.output)
        return assemble.unrun(launch_error=node.stopped(
            what, False, got.seconds, limit)[1])
    res = program.parse(got.output) if program is not None else None
    lines = [ln.strip() for ln in got.output.strip().splitlines()
             if ln.strip()]
    last = (lines or ['no output'])[-1][:200]
    if got.returncode in (126, 127) or (
            res is not None and not res.rows and not res.errors and
            not got.started):
        # nothing of nccl-tests' own: the launcher or the program never ran
        return assemble.unrun(
            f'{" ".join(launcher)} could not start all_reduce_perf for '
            f'{what} (exit {got.returncode}): {last}', result=res,
            exit_status=got.returncode)
    return output_attempt(got.output, logs, got.returncode, result=res)


def not_started_attempt(what, limit=None):
    """The limit left no time to start a probe: could not check, naming
    the limit."""
    from ccl_health.judge import assemble
    from ccl_health.judge import nodejudge as node
    return assemble.unrun(launch_error=node.no_time(what, limit)[1])


def line_reason(reason, where=''):
    """The judge's reason as the hook's line says it: the GPUs first
    where the reason does not name them; no doubled "could not check"."""
    why = clean(reason, None)
    if why.startswith('could not check: '):
        why = why[len('could not check: '):]
    if where and where not in why:
        why = f'{where}: {why}'
    return why


def judged_probe(probe, att, judgement, launcher_words=''):
    """``probe`` filled from its attempt ``att`` and the judge's
    ``judgement``: verdict, reason, what was measured and proven."""
    from ccl_health.judge.verdicts import Verdict
    where = f'GPUs {gpus_text(probe.gpus)}'
    probe.verdict = str(judgement.verdict)
    probe.why = line_reason(judgement.reason, where)
    if judgement.verdict is Verdict.CRASH and launcher_words and \
            att.result is not None and not att.result.errors:
        probe.why += f': {launcher_words}'
    probe.ok = judgement.verdict is Verdict.PASS
    probe.exit_status = att.exit_status
    if att.debug is not None:
        probe.versions = dict(att.debug.versions)
        probe.paths = ', '.join(sorted(att.debug.via)) or 'no channels'
    if att.proof is not None:
        probe.proven = att.proof.proven or 'none'
    row = (att.result.by_size().get(probe.size)
           if att.result is not None and att.result.rows else None)
    from ccl_health.judge.verdicts import finite
    if row is not None and finite(row.busbw):
        probe.busbw = row.busbw
    for f in judgement.findings:
        if f.size == probe.size and f.allowed is not None:
            probe.expected = f.allowed
    return probe


def launcher_words(output):
    """The launcher's last line that is not nccl-tests' own (named after
    a crash where nccl-tests named no error)."""
    import re
    said = [ln.strip() for ln in (output or '').splitlines()
            if ln.strip() and not ln.strip().startswith('#') and
            not re.match(r'^\d+\s', ln.strip()) and 'NCCL' not in ln]
    return said[-1][:200] if said else ''


def judge_copy_matrix(probe, got, res, peer_copy, limit=None):
    """The verdict of the copy matrix: the judge of the links
    (:func:`ccl_health.judge.linkjudge.judge_links`)."""
    from ccl_health.judge import nodejudge as node
    from ccl_health.judge.linkjudge import judge_links
    from ccl_health.judge.verdicts import Verdict
    what = f'{probe.tool} (the copy matrix of the GPU links)'
    if got.not_started:
        return _decided(probe, node.not_run(
            f'cannot start {probe.path}: {got.not_started}'))
    if got.timed_out:
        return _timed_out(probe, got, what, limit)
    probe.exit_status = got.returncode
    if res is None:
        lines = [ln.strip() for ln in got.output.splitlines() if ln.strip()]
        last = (lines or ['no output'])[-1][:200]
        return _decided(probe, node.not_run(
            f'{probe.path} did not start (exit {got.returncode}): {last}'))
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


#: what a later try may absorb: a bandwidth shortfall, nothing else (the
#: judge's rule, :data:`ccl_health.judge.casejudge.ABSORBED`)
def _absorbable():
    from ccl_health.judge.casejudge import ABSORBED
    return tuple(v.value for v in ABSORBED)


def attempt_over(probes):
    """After one try: ``'pass'`` (stop, healthy), ``'retry'`` (only a
    bandwidth shortfall: another try may absorb it) or ``'stop'`` (a
    fault no retry may hide, or could not check)."""
    verdicts = [q.verdict for q in probes]
    if verdicts and all(v == 'pass' for v in verdicts):
        return 'pass'
    if all(v in ('pass',) + _absorbable() for v in verdicts):
        return 'retry'
    return 'stop'


def judge_attempts(tries, repeats, result_of, pair_entry, size, n, system,
                   partition, t0, links_tool=None, links_only=False,
                   cases=None):
    """The result of every try (``tries``: the probes of each, in order).
    ``cases``: ``{gpus: CaseEvidence}``, every attempt of each all_reduce
    probe, judged by :func:`ccl_health.judge.casejudge.judge` (a retry absorbs
    a bandwidth shortfall only; any other fault in any attempt is the
    verdict, naming the attempt); the copy matrix by its own judge (its
    first fault no retry absorbs, else its last try)."""
    from ccl_health.judge.casejudge import judge
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
    found = []           # (verdict, line reason) of every case
    for gpus, ev in (cases or {}).items():
        j = judge(ev)
        found.append((j.verdict, line_reason(
            j.reason, f'GPUs {gpus_text(gpus)}'), j))
    lps = [q for q in probes if isinstance(q, LinksProbe)]
    if lps:
        firm = [q for q in lps if q.verdict and q.verdict not in
                ('pass',) + _absorbable()]
        lp = firm[0] if firm else lps[-1]
        found.append((Verdict.parse(lp.verdict or 'could-not-check'),
                      lp.why, None))
    from ccl_health.judge import nodejudge as node
    verdict, why = node.probes_verdict([f[:2] for f in found])
    if verdict is not Verdict.PASS:
        res = result_of(verdict, why, probes, len(tries))
    elif links_tool is not None:
        res = result_of(Verdict.PASS, _links_pass_line(
            tries[-1], links_only, system, partition, n, size, t0), probes,
            len(tries))
    else:
        res = result_of(Verdict.PASS, _pass_line(
            tries[-1], pair_entry, size, n, system, partition, t0), probes,
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

def causes_of(before, after, site=None, expected_gpus=None, job='',
              ours=(), under_load=()):
    """The causes the node's state shows; ``job``: why a job may use the
    GPUs (:func:`ccl_health.judge.nodejudge.job_causes`); ``ours``: the
    pids the probes' ranks printed (the rule of the sweep's
    ``contended``: a rank still on its GPU is the probe's, never a
    foreign process); ``under_load``: readings taken while the probes ran
    (their PCIe links)."""
    from ccl_health.evidence.nodestate.diagnose import (MEMORY_HELD_FRACTION,
                                                        diagnose)
    from ccl_health.judge import nodejudge as node
    health = getattr(site, 'health', None)
    causes = diagnose(before, after,
                      expected_model=getattr(health, 'gpu_model', None),
                      expected_count=expected_gpus,
                      memory_held=getattr(health, 'memory_held', None) or
                      MEMORY_HELD_FRACTION, ours=ours,
                      under_load=under_load)
    return node.job_causes(causes, job) if job else causes


def node_state_detail(before, after, causes):
    return {
        'before': before.to_dict() if before else None,
        'after': after.to_dict() if after else None,
        'causes': [dataclasses.asdict(c) for c in causes],
        'not_checked': {**(before.not_checked if before else {}),
                        **(after.not_checked if after else {})},
        'seconds': round((before.seconds if before else 0) +
                         (after.seconds if after else 0), 3)}


def with_node_state(res, before, after, site=None, expected_gpus=None,
                    job='', ours=(), under_load=()):
    """The probes' result ``res`` with the causes the node's state shows
    (read before and after) judged by :func:`ccl_health.judge.nodejudge.
    with_state`: the first cause named first, a cause that drains fails a
    pass or an unjudged result.  ``job``: why a job may use the GPUs (it
    runs one, or the resource manager could not be asked): its processes
    are named, never drained.  ``ours``: the pids the probes' ranks
    printed (:func:`causes_of`).  ``under_load``: readings taken while the
    probes ran (the PCIe links judged under load; their count and the
    widest, fastest link seen are kept).  The readings and causes go into
    ``res.node_state``."""
    from ccl_health.judge import nodejudge as node
    from ccl_health.judge.verdicts import Verdict, exit_code
    from ccl_health.evidence.nodestate.diagnose import counter_rises
    causes = causes_of(before, after, site, expected_gpus, job, ours,
                       under_load)
    res.node_state = node_state_detail(before, after, causes)
    if under_load:
        res.node_state['under_load'] = loaded_links(under_load)
    rises = counter_rises(before, after)
    if rises:
        res.node_state['rises'] = rises
    if not causes:
        return res
    why = res.line.split(': ', 1)[1] if ': ' in res.line else res.line
    j = node.with_state(Verdict.parse(res.verdict, Verdict.COULD_NOT_CHECK),
                        why, causes)
    res.verdict = j.verdict.value
    code = exit_code([j.verdict])
    head = res.line.split(': ', 1)[0] if code == res.code else PREFIX[code]
    res.code = code
    res.line = f'{head}: {j.reason}'
    res.cause = j.cause or res.cause
    return res


def loaded_links(readings):
    """What the readings taken under load saw of each GPU's PCIe link:
    ``{'readings': n, 'gpus': {index: {'gen', 'width', 'busy'}}}`` (the
    highest of each among the readings under load)."""
    from ccl_health.evidence.nodestate.diagnose import under_load
    gpus = {}
    for s in readings:
        for g in s.gpus:
            if not under_load(g):
                continue
            seen = gpus.setdefault(str(g.index), {'gen': 0, 'width': 0,
                                                  'busy': 0})
            seen['gen'] = max(seen['gen'], g.pcie_gen or 0)
            seen['width'] = max(seen['width'], g.pcie_width or 0)
            seen['busy'] = max(seen['busy'], g.utilization or 0)
    return {'readings': len(readings), 'gpus': gpus}


def with_action(res, site=None):
    """The action of an UNHEALTHY result (:func:`ccl_health.judge.actions.
    action_for` of its verdict and the cause it names first; a site's
    ``actions:`` block overrides) in its line: ``UNHEALTHY: isolate:
    ...``, ``UNHEALTHY: reset (a reboot is expected to clear it): ...``.
    ``monitor`` never drains: exit 2, ``COULD-NOT-CHECK: monitor (not
    drained): ...`` (the measurement shared the node or drifted: no pass
    either)."""
    from ccl_health.judge import actions
    from ccl_health.sitedata import nodeactions
    if res.code != UNHEALTHY:
        return res
    why = res.line.split(': ', 1)[1] if ': ' in res.line else res.line
    res.cause = res.cause or actions.cause_of(why)
    res.action = actions.action_for(res.verdict, cause=res.cause,
                                    site=site)
    if res.action is None:
        return res
    if actions.drains(res.action):
        head = (f'{res.action} ({actions.RESET_NOTE})'
                if res.action == nodeactions.RESET else res.action)
        res.line = f'{PREFIX[UNHEALTHY]}: {head}: {why}'
    else:
        res.code = COULD_NOT_CHECK
        res.line = (f'{PREFIX[COULD_NOT_CHECK]}: {res.action} (not '
                    f'drained): {why}')
    return res


def node_without_gpus(gpus, expected, system, partition):
    """No GPU answered the driver (``gpus.why_none``): where the node's
    partition has a known GPU count, a node fault
    (:func:`ccl_health.judge.nodejudge.missing_gpus`); else None (could not
    check)."""
    from ccl_health.judge import nodejudge as node
    return node.missing_gpus(gpus.why_none, expected, f'{system}:{partition}')


def links_summary(probe, where):
    """What a passed copy matrix says in the HEALTHY line: its directions
    by kind with their range, and whether they were judged."""
    from ccl_health.units import format_size
    kinds = {}
    for ln in probe.links:
        kinds.setdefault(_kind_label(ln), []).append(ln)
    parts = []
    for label_, lns in kinds.items():
        vals = [ln['gbps'] for ln in lns]
        refs = sorted({ln['ref'] for ln in lns if ln['ref'] is not None})
        rng = (f'{min(vals):.1f}' if min(vals) == max(vals) or len(vals) == 1
               else f'{min(vals):.1f}-{max(vals):.1f}')
        parts.append(f'{len(lns)} {label_} {rng} GB/s' + (
            f' (reference {", ".join(f"{r:.1f}" for r in refs)})' if refs
            else ''))
    txt = f'{probe.tool} {format_size(probe.size)}: ' + ', '.join(parts)
    if probe.no_peer:
        txt += '; ' + ', '.join(f'GPU {a}->{b} cannot peer'
                                for a, b in probe.no_peer)
    if not probe.judged:
        txt += f' (not judged: no peer_copy reference for {where})'
    elif any(ln['ref'] is None for ln in probe.links):
        txt += ' (the others not judged: no reference for their kind)'
    return txt


def _kind_label(ln):
    if ln['src'] == 'host':
        return 'host->GPU'
    if ln['dst'] == 'host':
        return 'GPU->host'
    return 'in-GPU' if ln['src'] == ln['dst'] else 'GPU->GPU'
