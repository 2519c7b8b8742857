"""The evidence of one fleet pair / group step
(:class:`ccl_health.judge.evidence.CaseEvidence`), for
:func:`ccl_health.fleet.run.judge_step`: what it ran (``fleet.transport``,
all_reduce over its nodes x ``tasks_per_node``, the step's one size), its
table and exit status, its debug log, its reference key."""

from typing import Any, Dict

from ccl_health.evidence import nccltests
from ccl_health.fleet.config import FleetConfig
from ccl_health.judge.evidence import Attempt, CaseEvidence


#: srun's own failures: the step never ran its program (no evidence
#: about the nodes: could-not-check, never a fault of theirs)
SRUN_FAILURES = ('srun: error: Unable to create step',
                 'srun: error: Unable to allocate resources',
                 'srun: error: Unable to confirm allocation',
                 'srun: error: Invalid job id',
                 'srun: error: Slurm job',
                 'srun: error: Unable to resolve',
                 'srun: error: Unable to create job step')


def srun_failure(raw):
    """The line of srun's own failure in a step's stderr (``raw``: a
    :class:`ccl_health.fleet.run.Raw`), or None."""
    for line in (raw.stderr or '').splitlines():
        if line.strip().startswith(SRUN_FAILURES):
            return line.strip()
    return None


#: reference files read by the fleet, by path
_REFERENCES: Dict[str, Any] = {}


def _reference_entry(cfg, nodes):
    """``(entry, why none)`` for the fleet's reference key of a step of
    ``nodes`` nodes; ``(None, '')`` where the fleet names no reference."""
    if not cfg.reference:
        return None, ''
    from ccl_health.judge import reference
    try:
        ref = _REFERENCES.get(cfg.reference) or reference.load(cfg.reference)
    except Exception as err:        # a broken file: nothing can pass
        return None, f'reference {cfg.reference}: {err}'
    _REFERENCES[cfg.reference] = ref
    part = cfg.reference_partition or (
        next(iter(ref.partitions)) if len(ref.partitions) == 1 else '')
    key = (part, cfg.transport, 'all_reduce', nodes, cfg.tasks_per_node)
    entry = ref.lookup(*key)
    if entry is None:
        return None, (ref.missing_reason(*key) or
                      f'no reference for {key} in {cfg.reference}')
    return entry, ''


def step_evidence(raw, size: int, cfg: FleetConfig, what: str):
    """The evidence of one pair / group step: its table, exit status, the
    transport proven from its debug log (``raw.debug_logs``, and the NCCL
    lines of its stdout) and its reference key for that many nodes.

    Without a debug log the transport is could-not-check only where the
    fleet asks for proof (``prove_transport``); without a reference
    (``reference``) the bandwidth is left to the relative rules."""
    from ccl_health.evidence import debuglog, warns
    from ccl_health.judge import ceiling as bounds
    result = raw.result
    if result is None:
        result = nccltests.parse_text(raw.stdout or '')
    logs = list(raw.debug_logs or [])
    ev = debuglog.read_evidence(logs) if logs else debuglog.Evidence()
    if raw.stdout:
        debuglog.feed_lines(ev, raw.stdout.splitlines(), source='stdout')
    proof = None
    if logs or ev.via:
        proof = debuglog.prove(cfg.transport, ev,
                               nodes=len(raw.step.nodes) or 1)
    warn_list, versions = warns.read_logs(logs, raw.stdout or '', 'stdout')
    entry, missing = _reference_entry(cfg, len(raw.step.nodes))
    ceiling, where = bounds.bound(cfg.transport,
                                  nodes=len(raw.step.nodes) or 1)
    return CaseEvidence(
        what=what, transport=cfg.transport, collective='all_reduce',
        nodes=len(raw.step.nodes), gpus_per_node=cfg.tasks_per_node,
        expected_sizes=[size],
        attempts=[Attempt(result, raw.code, None, proof, ev, warn_list,
                          srun_failure(raw), rank_versions=versions)],
        proof_required=bool(cfg.prove_transport),
        judge_bandwidth=bool(cfg.reference), reference=entry,
        missing_reference=missing, ceiling_gbps=ceiling,
        ceiling_source=where)
