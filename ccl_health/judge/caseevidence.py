"""One evidence object per case: what was asked, what each attempt left
(output, exit status, kill, per-rank debug-log proof, WARN lines), the
node's state, the reference found (or why none), the physical ceiling.

Plain data: the one case assembler (:mod:`ccl_health.judge.assemble`)
fills it for every door (the sweep, the health hook, ``scripts/explain``,
the fleet steps); :func:`ccl_health.judge.casejudge.judge` alone turns it into
a verdict.  Gather, then check (NHC,
azurehpc-health-checks)."""

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple


@dataclasses.dataclass
class Attempt:
    """One run of the program for the case (the hook retries; the others
    have one)."""
    #: the parsed output (:class:`ccl_health.evidence.nccltests.SweepResult`);
    #: None: no output at all
    result: Any = None
    #: the program's exit status; None: unknown (never positive evidence)
    exit_status: Optional[int] = None
    #: why it was stopped from outside (a scheduler's time limit, a kill at
    #: a fleet step's bound): a ``hang``; None: not killed
    killed: Optional[str] = None
    #: the transport proof (:class:`ccl_health.evidence.proof.Proof`);
    #: None: not proven (no debug log)
    proof: Any = None
    #: the debug-log evidence (:class:`ccl_health.evidence.debuglog.Evidence`):
    #: versions per rank come from it; None: none read
    debug: Any = None
    #: the WARN lines of its logs and output
    #: (:class:`ccl_health.evidence.warns.Warn`)
    warns: List[Any] = dataclasses.field(default_factory=list)
    #: the program never ran (srun could not create the step): no evidence
    #: about the nodes, ``could-not-check``
    launch_error: Optional[str] = None
    #: ``{rank: NCCL/RCCL version}`` read per rank (they must agree)
    rank_versions: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: what NCCL's RAS said before a killed run was stopped
    #: (:class:`ccl_health.evidence.ras.Answer`, its ``why`` where it could
    #: not be asked); None: not asked
    ras: Any = None
    #: the rank the outputs show stopped first (a hang) or exited first (a
    #: crash): :class:`ccl_health.evidence.stalls.Named`; None: none shown
    stalled: Any = None
    first_exit: Any = None


@dataclasses.dataclass
class CaseEvidence:
    """Everything one case's verdict rests on."""
    #: the program in reasons (``all_reduce_perf``, ``the pair step on a,b``)
    what: str = 'the run'
    # -- what was asked ------------------------------------------------------
    transport: Optional[str] = None
    collective: Optional[str] = None
    nodes: Optional[int] = None
    gpus_per_node: Optional[int] = None
    ranks: Optional[int] = None
    algo: str = 'default'
    #: the sizes asked for; None: from the run's own header (minBytes,
    #: maxBytes, step) when it has one
    expected_sizes: Optional[Sequence[int]] = None
    #: whether the program prints exactly the sizes asked (False for the
    #: collectives that round the size to the ranks: the count is checked)
    exact_sizes: bool = True
    # -- what happened -------------------------------------------------------
    attempts: List[Attempt] = dataclasses.field(default_factory=list)
    #: the node state sampler's readings: ``{'before', 'samples', 'after'}``
    node_states: Optional[dict] = None
    #: the transport must be proven from a debug log (False only where the
    #: caller cannot have one and says so: a fleet without proof asked)
    proof_required: bool = True
    #: the bandwidth is judged at all (False: a correctness-only door)
    judge_bandwidth: bool = True
    # -- what it is compared with --------------------------------------------
    #: the reference entry (:class:`ccl_health.judge.reference.Entry`) for
    #: the exact key; None: ``no-reference`` (never a pass)
    reference: Any = None
    #: why there is none (the key and the file), for the reason
    missing_reference: str = ''
    #: GB/s no busbw can exceed (links x link speed), and where it comes from
    ceiling_gbps: Optional[float] = None
    ceiling_source: str = ''
    #: ``[(regex, why, overrides)]``: WARN lines the site declares benign
    #: (the assembler has named them so in every attempt's ``warns``)
    benign_warns: Sequence[Tuple[Any, str]] = ()

    @property
    def last(self) -> Optional[Attempt]:
        return self.attempts[-1] if self.attempts else None

    def run_pids(self):
        """The pids of the case's own rank processes, as the run names
        them: the ``Pid`` of nccl-tests' rank lines (its JSON ``devices``)
        and the ``host:pid`` of NCCL's logger prefix (debug logs, the NCCL
        lines of the output).  A rank still alive on its GPU after another
        rank crashed is the run's, never a process sharing the GPUs.  Only
        on a case of one node (nodes unknown: every process on one host):
        the pids of other hosts say nothing of this node's processes."""
        seen = set()
        for att in self.attempts:
            res = att.result
            seen.update((h, p) for h, p in zip(
                getattr(res, 'rank_hosts', None) or (),
                getattr(res, 'rank_pids', None) or ()) if p is not None)
            for rank in (getattr(att.debug, 'ranks', None) or {}).values():
                pid = getattr(rank, 'pid', None)
                if pid is not None:
                    seen.add((str(rank.key).rsplit(':', 1)[0], pid))
        hosts = {str(h).split('.')[0] for h, _ in seen}
        if (self.nodes or 1) > 1 or (self.nodes is None and len(hosts) > 1):
            return set()
        return {p for _, p in seen}
