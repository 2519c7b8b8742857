"""The evidence of one fleet pair / group step
(:class:`ccl_health.judge.caseevidence.CaseEvidence`), for
:func:`ccl_health.fleet.rounds.judge_step`: what it ran (``fleet.transport``,
all_reduce over its nodes x ``tasks_per_node``, the step's one size), its
table and exit status, its debug log, its reference key."""

from typing import Any, Dict

from ccl_health import CclHealthError
from ccl_health.evidence import collectives, nccltests
from ccl_health.sitedata.fleetconfig import FleetConfig


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
    :class:`ccl_health.fleet.rounds.Raw`), or None."""
    for line in (raw.stderr or '').splitlines():
        if line.strip().startswith(SRUN_FAILURES):
            return line.strip()
    return None


#: reference files read by the fleet, by path
_REFERENCES: Dict[str, Any] = {}


def step_collective(cfg):
    """The collective a step runs: the program of the fleet's
    ``step_probe`` (``{tests}/all_gather_perf ...``: ``all_gather``), where
    it names one nccl-tests knows; else ``all_reduce`` (the default
    probe's).  A site that points the steps at another program is judged
    as that program, never as all_reduce (its busbw factor, the sizes it
    must print and its reference key are the program's)."""
    prog = (cfg.step_probe or [''])[0]
    try:
        return collectives.canonical(prog)
    except CclHealthError:  # not an nccl-tests program: the default's
        return 'all_reduce'


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
    key = (part, cfg.transport, step_collective(cfg), nodes,
           cfg.tasks_per_node)
    entry = ref.lookup(*key)
    if entry is None:
        return None, (ref.missing_reason(*key) or
                      f'no reference for {key} in {cfg.reference}')
    return entry, ''


def step_evidence(raw, size: int, cfg: FleetConfig, what: str, site=None,
                  killed=None):
    """The fleet step's adapter to the case assembler
    (:mod:`ccl_health.judge.assemble`): the step's table (stdout), exit
    status, debug logs (``raw.debug_logs``, and the NCCL lines of its
    stdout), srun's own failure, the fleet's transport and reference key
    for that many nodes, and the site (its ``benign_warns`` and ceilings,
    as in every other door).

    Without a debug log the transport is could-not-check only where the
    fleet asks for proof (``prove_transport``); without a reference
    (``reference``) the bandwidth is left to the relative rules.
    ``killed``: why it was stopped at its bound (a hang), with what NCCL's
    RAS said first (``raw.ras``) and srun's stderr (the first rank that
    exited, for a crash)."""
    from ccl_health.judge import assemble
    nodes = len(raw.step.nodes)
    att = assemble.attempt(
        raw.stdout or '', raw.debug_logs, raw.code, result=raw.result,
        parse=nccltests.parse_text, transport=cfg.transport,
        nodes=nodes or 1, proof_required=bool(cfg.prove_transport),
        launch_error=srun_failure(raw), killed=killed,
        ras=getattr(raw, 'ras', None),
        launcher_text=(raw.stdout or '') + '\n' + (raw.stderr or ''))
    entry, missing = _reference_entry(cfg, nodes)
    return assemble.case(
        [att], what=what, transport=cfg.transport,
        collective=step_collective(cfg),
        nodes=nodes, gpus_per_node=cfg.tasks_per_node,
        expected_sizes=[size], site=site,
        proof_required=bool(cfg.prove_transport),
        judge_bandwidth=bool(cfg.reference), reference=entry,
        missing_reference=missing)
