"""The judge of a node: what decides a node's verdict beyond each probe's
case (:func:`ccl_health.judge.judge.judge`, the copy matrix's
:func:`ccl_health.judge.links.judge_links`).

- the probes together: a failure over could-not-check over a pass (the
  first failing verdict), with the reasons of the probes that gave it
  (:func:`probes_verdict`);
- a program stopped at its bound: a ``hang`` only where it had started
  its timed work, else the limit was too short to start it and nothing
  was checked (:func:`stopped`, :func:`no_time`, :func:`killed`);
- a program that never ran: ``could-not-check`` (:func:`not_run`);
- a driver that answers with no GPU, or fewer GPUs than the node's
  partition has: ``missing-gpu`` (:func:`missing_gpus`);
- the node's state read before and after the probes
  (:mod:`ccl_health.evidence.nodestate.diagnose`): its first cause is
  named first; a cause that drains (a foreign process or memory held:
  ``contended``; a link down, uncorrectable ECC, a row-remap failure, a
  drain XID, a lost GPU: ``node-fault``) fails a node whose probes passed
  or could not be checked (:func:`with_state`).

The health hook and the fleet ask it; they build their lines from what
it returns and decide nothing themselves."""

import dataclasses
from typing import Optional, Sequence, Tuple

from ccl_health.judge.verdicts import Verdict, worst

#: node-state causes that mean another process shares the GPUs
SHARED = ('foreign-process', 'memory-held')

#: node-state cause kinds (:mod:`ccl_health.evidence.nodestate.diagnose`)
#: -> the causes of :data:`ccl_health.judge.actions.CAUSES`
KIND_CAUSE = {'foreign-process': 'leftover-process',
              'memory-held': 'leftover-process',
              'gpu-lost': 'gpu-off-bus',
              'row-remap-failure': 'row-remap',
              'ecc-uncorrected': 'ecc',
              'nvlink-down': 'link-down'}

#: what the line says after a foreign process on a node the hook runs on
#: (an idle node: nothing of a job should be there)
IDLE_NODE = 'leftover process on an idle node: drain'


def probes_verdict(found: Sequence[Tuple[Verdict, str]]):
    """``(verdict, reason)`` of a node from ``(verdict, reason)`` of each
    probe: the first failing verdict (else the first unjudged one:
    :func:`ccl_health.judge.verdicts.worst`) with the reasons of up to
    three probes that gave it; ``(PASS, None)`` when every probe
    passed (the caller words the pass); no probe at all: could not
    check."""
    bad = [f for f in found if f[0] is not Verdict.PASS]
    if bad:
        v = worst([f[0] for f in bad])
        return v, '; '.join([f[1] for f in bad if f[0] is v][:3])
    if not found:
        return Verdict.COULD_NOT_CHECK, 'no probe was run'
    return Verdict.PASS, None


def unfinished(what, seconds):
    """What a program that started and was stopped at its bound did not
    do (the hang's reason, and an :class:`~ccl_health.judge.evidence.
    Attempt`'s ``killed``)."""
    return f'{what} did not finish within the {seconds:.0f} s left'


def stopped(what, started, seconds, limit=None):
    """``(verdict, reason)`` of ``what`` stopped at its bound after
    ``seconds``: a ``hang`` where it had started its timed work (its
    header or first row printed, its progress seen), else could not
    check, naming the limit."""
    if started:
        return Verdict.HANG, f'hang: {unfinished(what, seconds)}'
    return Verdict.COULD_NOT_CHECK, (
        f'{what} did not start within the {seconds:.1f} s the limit left'
        + (f' (--limit {limit:g} s: raise it)' if limit else ''))


def no_time(what, limit=None):
    """``(verdict, reason)``: the limit left no time to start ``what``."""
    return Verdict.COULD_NOT_CHECK, (
        f'the limit left no time for {what} (--limit {limit:g} s: raise '
        f'it)' if limit else f'the limit left no time for {what} (raise '
        f'--limit)')


def killed(what, limit):
    """``(verdict, reason)`` of a step the fleet killed at its bound: the
    node check or collective gave nothing within ``limit`` s: a hang."""
    return Verdict.HANG, f'hang: {what} within {limit:g} s (killed)'


def not_run(why):
    """``(verdict, reason)`` of a program that never ran: nothing of the
    node was measured."""
    return Verdict.COULD_NOT_CHECK, why


def missing_gpus(why_none, expected, where, count=None, tool=''):
    """``(verdict, reason)`` of a node whose driver lists ``count`` GPUs
    (None: none answered, ``why_none`` says why) where its partition
    ``where`` has ``expected``; None when nothing is missing or the count
    is not known (could not check, not a fault)."""
    if not expected:
        return None
    if count is None:
        return Verdict.MISSING_GPU, (f'missing GPU: {why_none}; {where} has '
                                     f'{expected} GPUs')
    if count < expected:
        return Verdict.MISSING_GPU, (f'missing GPU: {tool} lists {count} of '
                                     f'the {expected} GPUs of {where}')
    return None


def cause_text(cause):
    """A node-state cause as the verdict line names it."""
    if cause.kind == 'foreign-process':
        return cause.text[:-1] + f'; {IDLE_NODE})' if \
            cause.text.endswith(')') else f'{cause.text} ({IDLE_NODE})'
    return cause.text


@dataclasses.dataclass
class NodeJudgement:
    verdict: Verdict
    reason: str
    #: the cause the verdict names first (:data:`KIND_CAUSE`, or read from
    #: its text by :func:`ccl_health.judge.actions.cause_of`); None: the
    #: node state did not decide
    cause: Optional[str] = None


def with_state(verdict, reason, causes) -> NodeJudgement:
    """The node's verdict ``verdict`` / ``reason`` with the causes its
    state shows (``causes``: :class:`ccl_health.evidence.nodestate.
    diagnose.Cause`, worst first) named first: a failing verdict starts
    with the first cause (``contended`` where it is another process); a
    cause that drains fails a pass (``although the probes passed``) and an
    unjudged verdict (the node state was read first: whatever else is
    missing, its fault is named); other causes are noted after the
    reason."""
    from ccl_health.judge.actions import cause_of
    if not causes:
        return NodeJudgement(verdict, reason)
    first = causes[0]
    named = cause_text(first)
    cause = KIND_CAUSE.get(first.kind) or cause_of(first.text)
    shared = first.kind in SHARED
    drained = Verdict.CONTENDED if shared else Verdict.NODE_FAULT
    if verdict.failed:
        return NodeJudgement(Verdict.CONTENDED if shared else verdict,
                             f'{named}: {reason}', cause)
    if verdict is Verdict.PASS and first.drain:
        return NodeJudgement(drained, f'{named}: although the probes '
                             f'passed: {reason}', cause)
    if verdict is Verdict.PASS:
        return NodeJudgement(verdict, reason + '; noted: ' + '; '.join(
            c.text for c in causes[:2]))
    if first.drain:
        return NodeJudgement(drained, f'{named} (also could not check: '
                             f'{reason})', cause)
    return NodeJudgement(verdict, f'{reason} (node state: {named})')
