"""The judge of a node: what decides a node's verdict beyond each probe's
case (:func:`ccl_health.judge.casejudge.judge`, the copy matrix's
:func:`ccl_health.judge.linkjudge.judge_links`).

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
  drain XID, a lost GPU, NVLink replay / recovery errors or CRC errors at
  DCGM's rate, a GPU's PCIe link trained down under load, fatal AER
  errors: ``node-fault``, isolated: lasting faults of the hardware) fails
  a node whose probes passed or could not be checked (:func:`with_state`);
  a cause that may be benign or is not proven by the check (non-fatal AER
  errors, a NIC's link the check did not load) is only noted;
- the node's role, from the resource manager (Slurm's record of the node:
  :mod:`ccl_health.evidence.nodestate.slurmnode`) and the PCI bus
  (:mod:`ccl_health.evidence.nodestate.pci`), host names only without
  either: a node with no GPU in its GRES and none on its bus is not a GPU
  node, ``skipped`` (:func:`not_a_gpu_node`); a node that runs a job gets
  no probe (:func:`probe_allowed`), its state alone is judged
  (:func:`node_state_only`), and a process or memory on its GPUs is the
  job's, named, never drained (:func:`job_causes`).

The health hook and the fleet ask it; they build their lines from what
it returns and decide nothing themselves."""

import dataclasses
from typing import Optional, Sequence, Tuple

from ccl_health.judge.verdicts import Verdict, worst

#: node-state causes that mean another process shares the GPUs
SHARED = ('foreign-process', 'memory-held')

#: node-state cause kinds (:mod:`ccl_health.evidence.nodestate.diagnose`)
#: -> the causes of :data:`ccl_health.sitedata.nodeactions.CAUSES`
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
    do (the hang's reason, and an :class:`~ccl_health.judge.caseevidence.
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


def killed_at(what, limit):
    """Why a step the fleet killed at its bound was stopped (an
    :class:`~ccl_health.judge.caseevidence.Attempt`'s ``killed``)."""
    return f'{what} within {limit:g} s (killed)'


def killed(what, limit):
    """``(verdict, reason)`` of a step the fleet killed at its bound: the
    node check or collective gave nothing within ``limit`` s: a hang."""
    return Verdict.HANG, f'hang: {killed_at(what, limit)}'


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
    if verdict is Verdict.SKIPPED and first.drain:
        return NodeJudgement(drained, f'{named}: {reason}', cause)
    if verdict.good:
        return NodeJudgement(verdict, reason + '; noted: ' + '; '.join(
            c.text for c in causes[:2]))
    if first.drain:
        return NodeJudgement(drained, f'{named} (also could not check: '
                             f'{reason})', cause)
    return NodeJudgement(verdict, f'{reason} (node state: {named})')


# -- the node's role ----------------------------------------------------------

#: the node state kinds of another process on the GPUs, and what they are
#: called on a node that runs a job (named, never drained)
JOB_KINDS = {'foreign-process': 'job-process', 'memory-held': 'job-memory'}


def not_a_gpu_node(rm_node, pci_gpus, driver_count):
    """``(SKIPPED, reason)`` of a node that is not a GPU node: the driver
    lists no GPU, Slurm's record of it (``rm_node``; None: no resource
    manager) has no GPU in its GRES, and its PCI bus (``pci_gpus``:
    :func:`ccl_health.evidence.nodestate.pci.gpus`; None: unreadable) has
    none.  None otherwise: a GPU the bus or Slurm has and the driver does
    not answer for is ``missing-gpu`` (:func:`missing_gpus`)."""
    if driver_count or pci_gpus is None or pci_gpus:
        return None
    if rm_node is not None and (rm_node.gpu_gres or rm_node.gpus):
        return None
    said = (f'Slurm: Gres={rm_node.gres or "(null)"} of node '
            f'{rm_node.name}' if rm_node is not None else
            'no resource manager')
    return Verdict.SKIPPED, (f'not a GPU node (no GPU on its PCI bus; '
                             f'{said})')


def probe_allowed(rm_node, own_job=''):
    """``(True, '')`` where the GPUs may be probed; ``(False, why)`` where
    Slurm says a job runs on the node and it is not the hook's own
    (``own_job``: the id of the job the hook runs in)."""
    if rm_node is None or not rm_node.has_job:
        return True, ''
    if own_job:
        return True, ''
    return False, f'allocated to a job: Slurm State={rm_node.state}'


def job_causes(causes, why):
    """The node-state causes of a node whose GPUs a job may use (``why``:
    it runs one, or its role could not be asked): a process on a GPU or
    memory held is the job's, named and never drained; every other cause
    (ECC, XID, a lost GPU, a link down) stays as it is."""
    out = []
    for c in causes:
        if c.kind in JOB_KINDS:
            text = c.text[:-1] + f'; {why})' if c.text.endswith(')') \
                else f'{c.text} ({why})'
            c = dataclasses.replace(c, kind=JOB_KINDS[c.kind], drain=False,
                                    text=text)
        out.append(c)
    # what still drains is named first
    return sorted(out, key=lambda c: not c.drain)


def node_state_only(state, why):
    """``(verdict, reason)`` of a node that got no probe (``why``:
    :func:`probe_allowed`): ``skipped`` (a good verdict: the line is
    HEALTHY) where its state was read, could not check where the vendor
    library could not read it; what the state shows is judged after
    (:func:`with_state`, with :func:`job_causes`)."""
    head = f'node state only ({why}: no probe)'
    if state is None or not getattr(state, 'checked', False):
        missing = '; '.join(f'{k}: {v}' for k, v in (
            getattr(state, 'not_checked', None) or {}).items()) or \
            'not read'
        return Verdict.COULD_NOT_CHECK, (f'{head}, and the node state could '
                                         f'not be read ({missing})')
    return Verdict.SKIPPED, (f'{head}: {len(state.gpus)} GPUs read by '
                             f'{state.library or state.vendor}')
