"""A fault plan: which nodes and links of a fleet are broken, and how.

One model of injected faults, read by two things that must agree: the
simulated scheduler of the scale benchmark (:mod:`ccl_health.fleet.simulate`)
and the stand-in probe that the real-Slurm test runs on each node in place
of nccl-tests.  A plan is a JSON file::

    {"busbw": 40.0,                       # healthy busbw of a step, GB/s
     "bad_nodes": {"n3": "crash"},        # crash | slow | wrong | hang
     "bad_links": [["n5", "n9"]],         # a step holding both is slow
     "stragglers": {"n7": 0.85},          # busbw factor of that node
     "all_nodes": "crash",                # every node, the same way
     "switches": {"s1": ["n1", "n2"]},    # leaf switches ...
     "down_switches": ["s1"],             # ... whose uplinks are down
     "broken_fabric": 0.8,                # share of broken node pairs
     "drained": ["n11"]}                  # drained earlier (--resume)

Systemic faults (issue 20, class 5): ``all_nodes`` makes every node
check fail the same way (a shared cause: a broken driver or library
installed everywhere); a switch of ``down_switches`` has its uplinks down
(a step over nodes inside and outside it crashes; inside it works);
``broken_fabric`` breaks that share of node pairs (chosen by a hash of the
two names: the same pairs every time), a step holding a broken pair
crashes.

``drained`` names nodes that Slurm lists as drained by ccl-health when a
``--resume`` rehearsal starts (:mod:`ccl_health.fleet.simslurm`; the bad
nodes are drained too): a drained node the plan leaves healthy passes its
checks again.  ``site/fleet-faults.example.json`` is a plan to start
from.

``outcome(nodes)`` says what one step over ``nodes`` (one node: the node
check; two: a pair; more: a group) shows: the worst fault among its
nodes and links, else ``ok`` at the busbw of its slowest member.
"""

import dataclasses
import hashlib
import itertools
import json
from typing import Dict, FrozenSet, List, Sequence

from ccl_health import safefile

#: what a broken node does to every step it is part of
NODE_FAULTS = ('crash', 'slow', 'wrong', 'hang')
#: a step's outcome, worst first (a hang hides everything else)
OUTCOMES = ('hang', 'crash', 'wrong', 'slow', 'ok')
#: busbw of a step through a slow node or a bad link, as a share of healthy
SLOW_FACTOR = 0.3


@dataclasses.dataclass(frozen=True)
class Outcome:
    kind: str              # one of OUTCOMES
    busbw: float           # GB/s; 0.0 for hang / crash
    why: str = ''          # the injected cause, for the stand-in's message
    #: the node whose fault it is ('' for a link, a switch, the fabric, a
    #: straggler): the one a stopped rank's RAS would name in a hang
    node: str = ''


@dataclasses.dataclass
class FaultPlan:
    busbw: float = 40.0
    bad_nodes: Dict[str, str] = dataclasses.field(default_factory=dict)
    bad_links: List[FrozenSet[str]] = dataclasses.field(default_factory=list)
    stragglers: Dict[str, float] = dataclasses.field(default_factory=dict)
    all_nodes: str = ''
    switches: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
    down_switches: List[str] = dataclasses.field(default_factory=list)
    broken_fabric: float = 0.0
    drained: List[str] = dataclasses.field(default_factory=list)

    def __post_init__(self):
        if self.all_nodes and self.all_nodes not in NODE_FAULTS:
            raise ValueError('all_nodes: %r is not one of %s'
                             % (self.all_nodes, ', '.join(NODE_FAULTS)))
        for sw in self.down_switches:
            if sw not in self.switches:
                raise ValueError('down_switches: %r is not in switches' % sw)
        if not 0 <= float(self.broken_fabric) <= 1:
            raise ValueError('broken_fabric: %r is not in [0, 1]'
                             % self.broken_fabric)
        for node, fault in self.bad_nodes.items():
            if fault not in NODE_FAULTS:
                raise ValueError('bad_nodes.%s: %r is not one of %s'
                                 % (node, fault, ', '.join(NODE_FAULTS)))
        links = []
        for link in self.bad_links:
            link = frozenset(link)
            if len(link) != 2:
                raise ValueError('bad_links: %r is not two nodes'
                                 % sorted(link))
            links.append(link)
        self.bad_links = links
        if not isinstance(self.drained, list) or not all(
                isinstance(n, str) for n in self.drained):
            raise ValueError('drained: %r is not a list of node names'
                             % (self.drained,))
        for node, factor in self.stragglers.items():
            if not 0 < float(factor) <= 1:
                raise ValueError('stragglers.%s: %r is not in (0, 1]'
                                 % (node, factor))

    @classmethod
    def from_dict(cls, data):
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError('unknown keys in fault plan: %s'
                             % ', '.join(sorted(unknown)))
        return cls(**data)

    @classmethod
    def load(cls, path):
        with open(path) as fp:
            try:
                return cls.from_dict(json.load(fp))
            except ValueError as err:
                raise ValueError('%s: %s' % (path, err)) from None

    def to_dict(self):
        out = {'busbw': self.busbw, 'bad_nodes': dict(self.bad_nodes),
               'bad_links': [sorted(l) for l in self.bad_links],
               'stragglers': dict(self.stragglers)}
        if self.all_nodes:
            out['all_nodes'] = self.all_nodes
        if self.switches:
            out['switches'] = {k: list(v) for k, v in self.switches.items()}
            out['down_switches'] = list(self.down_switches)
        if self.broken_fabric:
            out['broken_fabric'] = self.broken_fabric
        if self.drained:
            out['drained'] = list(self.drained)
        return out

    def pair_broken(self, a, b) -> bool:
        """A pair of the broken fabric (a hash of the names, stable)."""
        if not self.broken_fabric:
            return False
        key = '-'.join(sorted((a, b))).encode()
        h = int.from_bytes(hashlib.sha256(key).digest()[:4], 'big')
        return h / 2 ** 32 < self.broken_fabric

    def save(self, path):
        safefile.write_atomic(path, json.dumps(self.to_dict(), indent=1,
                                               sort_keys=True))

    def outcome(self, nodes: Sequence[str]) -> Outcome:
        nodes = list(nodes)
        found = []
        if self.all_nodes and len(nodes) == 1:
            found.append((self.all_nodes, 'every node: %s (a shared cause)'
                          % self.all_nodes))
        if len(nodes) > 1:
            for sw in self.down_switches:
                inside = set(self.switches[sw])
                if set(nodes) & inside and set(nodes) - inside:
                    found.append(('crash', 'switch %s: uplinks down' % sw))
            for a, b in itertools.combinations(sorted(set(nodes)), 2):
                if self.pair_broken(a, b):
                    found.append(('crash', 'fabric: broken path'))
                    break
        for node in nodes:
            fault = self.bad_nodes.get(node)
            if fault:
                found.append((fault, 'node %s: %s' % (node, fault), node))
        for a, b in itertools.combinations(sorted(set(nodes)), 2):
            if frozenset((a, b)) in self.bad_links:
                found.append(('slow', 'link %s-%s' % (a, b)))
        if found:
            kind, why, *node = min(found,
                                   key=lambda f: OUTCOMES.index(f[0]))
            busbw = {'slow': self.busbw * SLOW_FACTOR,
                     'wrong': self.busbw}.get(kind, 0.0)
            return Outcome(kind, busbw, why, node[0] if node else '')
        factor = min([float(self.stragglers.get(n, 1.0)) for n in nodes]
                     or [1.0])
        why = '' if factor == 1.0 else 'straggler x%.2f' % factor
        return Outcome('ok', self.busbw * factor, why)
