"""The ``fleet`` block of a site file (``site/<system>.yaml``), with its
defaults; the schema (``ccl_health/sitedata/schemas/site.schema.json``) checks the
types, this fills the rest."""

import dataclasses
import math
from typing import Dict, List, Optional

from ccl_health import CclHealthError
from ccl_health.units import parse_size

DEFAULT_NODE_PROBE = ['{suite}/scripts/ccl-health-check', '--json', '{json}']
DEFAULT_STEP_PROBE = ['{tests}/all_reduce_perf', '-b', '{size}', '-e',
                      '{size}', '-g', '1', '-n', '20', '-w', '5', '-T',
                      '{timeout}']
#: srun options of every step.  Slurm >= 20.11: ``--exact`` gives a step
#: only what it asks for, so the steps of a round run side by side in one
#: allocation; ``--overlap`` lets a step start on a node where a killed
#: step of an earlier round has not been cleaned up yet (a late cleanup
#: must not turn into a wait, then a false hang).
DEFAULT_SRUN = ['--exact', '--overlap']
#: a group of this many ranks (512 Polaris nodes x 4, the largest figure in
#: reference/anchors/first_allreduce_seconds.tsv) starts within the
#: round limit; above it the limit grows with the square root of the ranks
#: (the anchor's start-up grows as ranks^0.53 from 256 to 512 nodes)
GROUP_LIMIT_RANKS = 2048
NODE_CHECKS = ('one-step', 'per-node')


#: the transport of the steps without a site file (with one: the site's,
#: :func:`ccl_health.sitedata.transports.fleet_default` of what it lists)
NO_SITE_TRANSPORT = 'net-plugin'
#: what a step's NCCL says where the fleet proves the transport
#: (``prove_transport``): its channel lines, into the step's output (the
#: site's ``env`` / ``fleet.env`` may set them otherwise)
PROOF_ENV = {'NCCL_DEBUG': 'INFO', 'NCCL_DEBUG_SUBSYS': 'INIT,NET'}


@dataclasses.dataclass
class FleetConfig:
    #: the network transport of pair and group steps; from a site file:
    #: its ``fleet.transport``, else the strongest network it lists
    #: without GPUDirect RDMA required (:meth:`from_dict`)
    transport: str = NO_SITE_TRANSPORT
    #: ranks per node in pair and group steps (1: one GPU and its NIC per
    #: node; a node's GPU count checks every GPU's path)
    tasks_per_node: int = 1
    size: str = '1G'
    round_limit: float = 120.0
    #: seconds: the node check's bound (the hook stops itself after its own
    #: limit, 20 s by default: site health.limit; this catches a hook that
    #: hangs anyway)
    node_limit: float = 60.0
    #: ``one-step``: the node check on every node as ONE srun step (one
    #: launch for the whole partition; each node's verdict from its JSON
    #: file); ``per-node``: one step per node (each with its exit status)
    node_check: str = 'one-step'
    groups: List[int] = dataclasses.field(
        default_factory=lambda: [16, 64, 256])
    straggler_k: float = 3.0
    straggler_floor: float = 0.05
    node_probe: List[str] = dataclasses.field(
        default_factory=lambda: list(DEFAULT_NODE_PROBE))
    step_probe: List[str] = dataclasses.field(
        default_factory=lambda: list(DEFAULT_STEP_PROBE))
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    srun: List[str] = dataclasses.field(
        default_factory=lambda: list(DEFAULT_SRUN))
    #: at most this many steps at once (sruns of one launch host); the
    #: rest of a round starts as steps end
    max_parallel: int = 512
    #: seconds after a step's limit before the client kills its srun
    grace: float = 10.0
    #: re-test rounds at most (odd leftovers, one-failure nodes)
    retests: int = 3
    #: a reference file: every pair / group step's busbw is judged against
    #: its key for that many nodes (a step without one: no-reference,
    #: never a pass); unset: the relative rules only
    reference: Optional[str] = None
    #: the partition of ``reference`` (default: its only one)
    reference_partition: Optional[str] = None
    #: every step must prove ``transport`` from its NCCL debug log (a step
    #: without one: could-not-check)
    prove_transport: bool = False
    #: a failure shared by more than this share of the checked nodes is
    #: systemic (a cause common to the machine): nothing drained without
    #: --force (:mod:`ccl_health.fleet.systemic`)
    systemic_share: float = 0.25
    #: drains per run at most: a count or a share (``"10%"``, rounded up,
    #: at least 1); above it nothing is drained without --force
    max_drain: object = '10%'
    #: leaf switches: {switch: [nodes or node lists]}
    topology: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
    #: a Slurm topology.conf read for more leaf switches
    topology_conf: str = ''
    #: --resume: consecutive passing checks before a node is resumed
    resume_passes: int = 2

    @property
    def size_bytes(self):
        return parse_size(self.size)

    def limit(self, kind, nodes):
        """The wall bound of one step: the round limit; a large group
        more (its start-up grows with the ranks)."""
        if kind == 'node':
            return self.node_limit
        if kind != 'group':
            return self.round_limit
        ranks = nodes * self.tasks_per_node
        return self.round_limit * max(1.0, math.sqrt(
            ranks / GROUP_LIMIT_RANKS))

    def drain_ceiling(self, nodes: int) -> int:
        """The most nodes one run may drain out of ``nodes`` checked."""
        text = str(self.max_drain).strip()
        if text.endswith('%'):
            share = float(text[:-1]) / 100
            if not 0 < share <= 1:
                raise ValueError(text)
            return max(1, math.ceil(share * nodes - 1e-9))
        n = int(text)
        if n < 0:
            raise ValueError(text)
        return n

    @classmethod
    def from_dict(cls, raw: Optional[dict], path='<site>', listed=None):
        """The configuration of the ``fleet`` block ``raw`` of the site
        file ``path``, checked; ``listed``: the transports that site file
        lists (None: no site file).  With a site file the transport is
        one it lists: ``fleet.transport``, else
        :func:`ccl_health.sitedata.transports.fleet_default`."""
        from ccl_health.sitedata import transports
        raw = dict(raw or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise CclHealthError(f'{path}: fleet.{unknown[0]}: unknown key '
                                 f'(known: {", ".join(sorted(names))})')
        if listed is not None:
            listed = [n for n in transports.NAMES if n in set(listed)]
            has = ', '.join(listed) or 'none'
            if 'transport' not in raw:
                raw['transport'] = transports.fleet_default(listed)
                if raw['transport'] is None:
                    raise CclHealthError(
                        f'{path}: fleet.transport: the site file lists no '
                        f'network transport (transports: {has}), and the '
                        f'fleet\'s pairs and groups need one')
            elif raw['transport'] not in listed:
                raise CclHealthError(
                    f'{path}: fleet.transport: {raw["transport"]} is not '
                    f'listed under transports: (it lists {has})')
        cfg = cls(**raw)
        try:
            if cfg.size_bytes <= 0:
                raise CclHealthError('must be positive')
        except CclHealthError as err:
            raise CclHealthError(f'{path}: fleet.size: {err}') from None
        try:
            transports.get(cfg.transport)
        except CclHealthError as err:
            raise CclHealthError(f'{path}: fleet.transport: {err}') from None
        for key in ('round_limit', 'node_limit', 'straggler_k',
                    'tasks_per_node', 'max_parallel'):
            if not getattr(cfg, key) > 0:
                raise CclHealthError(f'{path}: fleet.{key}: must be positive')
        if cfg.node_check not in NODE_CHECKS:
            raise CclHealthError(f'{path}: fleet.node_check: '
                                 f'{cfg.node_check!r} is not one of '
                                 f'{", ".join(NODE_CHECKS)}')
        if not 0 <= cfg.straggler_floor < 1:
            raise CclHealthError(f'{path}: fleet.straggler_floor: must be in '
                                 f'[0, 1)')
        if not 0 < cfg.systemic_share <= 1:
            raise CclHealthError(f'{path}: fleet.systemic_share: must be in '
                                 f'(0, 1]')
        try:
            cfg.drain_ceiling(1)
        except (ValueError, TypeError):
            raise CclHealthError(f'{path}: fleet.max_drain: '
                                 f'{cfg.max_drain!r} is not a count or a '
                                 f'share like "10%"') from None
        if not int(cfg.resume_passes) >= 1:
            raise CclHealthError(f'{path}: fleet.resume_passes: must be at '
                                 f'least 1')
        for key in ('node_probe', 'step_probe'):
            if not getattr(cfg, key):
                raise CclHealthError(f'{path}: fleet.{key}: empty command')
        return cfg
