"""A common cause before any drain: a failure shared by the whole machine
(or by every node behind one switch) is not a fault of each node.

- **share**: more than ``fleet.systemic_share`` of the checked nodes fail
  the same way (the same verdict and the same reason once node names and
  numbers are blanked out): ``systemic: <reason>``;
- **switch**: every node behind one leaf switch (the site file's
  ``fleet.topology``, or Slurm's ``topology.conf``: ``SwitchName=s1
  Nodes=n[01-04]``) is named: ``systemic: switch s1: <reason>``.

A node "fails" when its node check failed, or when it passed its node
check and was then named (bad, in a suspect link or group, undecided)
after every network step it took part in failed.  A systemic finding
makes the run exit 1 and holds every drain back unless ``--force``; so
does a drain count above ``fleet.max_drain``.
"""

import collections
import re
from typing import Dict, List, Optional, Sequence

from ccl_health import CclHealthError
from ccl_health.fleet.hostlist import expand_hostlist

_NUMBER = re.compile(r'\d+(\.\d+)?')
#: a word that may be a node name (names hold letters, digits, - _ .)
_WORD = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.-]*[A-Za-z0-9_]|[A-Za-z0-9_]')


def shape(reason: str, nodes: Sequence[str] = ()) -> str:
    """``reason`` with every node name and every number blanked: two
    nodes failing "the same way" have the same shape."""
    text = ' '.join(str(reason or '').split())
    names = nodes if isinstance(nodes, (set, frozenset)) else set(nodes)
    text = _WORD.sub(lambda m: '<node>' if m.group(0) in names
                     else m.group(0), text)
    return _NUMBER.sub('#', text)


# -- topology -----------------------------------------------------------------

def parse_topology_conf(text: str) -> Dict[str, List[str]]:
    """Slurm's ``topology.conf`` (tree plugin) as ``{leaf switch: [node
    list expressions]}``: the lines with ``Nodes=`` (switches of switches
    name no nodes and are left out); ``#`` comments, case-insensitive
    keys."""
    out = {}
    for raw in text.splitlines():
        line = raw.split('#', 1)[0].strip()
        if not line:
            continue
        fields = {}
        for word in line.split():
            key, sep, value = word.partition('=')
            if not sep:
                continue
            fields[key.lower()] = value
        name, nodes = fields.get('switchname'), fields.get('nodes')
        if name and nodes:
            out.setdefault(name, []).append(nodes)
    return out


def switches(cfg) -> Dict[str, List[str]]:
    """``{switch: [node names]}`` from the fleet block's ``topology`` and
    ``topology_conf`` (node lists expanded without Slurm)."""
    raw = {k: list(v) for k, v in (cfg.topology or {}).items()}
    if cfg.topology_conf:
        try:
            with open(cfg.topology_conf) as fp:
                text = fp.read()
        except OSError as err:
            raise CclHealthError(f'fleet.topology_conf: {cfg.topology_conf}:'
                                 f' {err.strerror}') from None
        for k, v in parse_topology_conf(text).items():
            raw.setdefault(k, []).extend(v)
    out = {}
    for sw, exprs in raw.items():
        names = []
        for e in exprs:
            for n in expand_hostlist(e):
                if n not in names:
                    names.append(n)
        out[sw] = names
    return out


# -- the finding --------------------------------------------------------------

def node_failures(fleet) -> Dict[str, str]:
    """``{node: failure shape}`` of the nodes of a finished
    :class:`~ccl_health.fleet.rounds.Fleet` run that failed (see the module
    text)."""
    nodes = set(fleet.nodes)
    out = {}
    named = set(fleet.bad) | set(fleet.could_not_check) | {
        n for l in fleet.links for n in l} | {
        n for g, _ in fleet.suspect_groups for n in g}
    net = collections.defaultdict(list)     # node -> [(failed, shape)]
    obs = {(o.a, o.b): o for o in fleet.pair_obs()}
    for rnd, j in fleet.judged:
        if j.step.kind == 'node':
            if j.verdict.failed:
                out[j.step.nodes[0]] = (f'{j.verdict}: '
                                        f'{shape(j.reason, nodes)}')
            continue
        if j.verdict.unjudged:
            continue
        if j.step.kind == 'pair':
            o = obs.get(tuple(j.step.nodes[:2]))
            failed = (not o.ok) if o is not None else j.verdict.failed
            why = o.reason if o is not None and not o.ok else j.reason
        else:
            failed, why = j.verdict.failed, j.reason
        for n in j.step.nodes:
            net[n].append((failed, f'{j.verdict}: {shape(why, nodes)}'))
    for n in fleet.nodes:
        if n in out or n not in named or not net.get(n):
            continue
        if all(f for f, _ in net[n]):
            common = collections.Counter(s for _, s in net[n])
            out[n] = 'network: ' + common.most_common(1)[0][0]
    return out


def find(fleet, share: float, switch_map: Optional[Dict[str, List[str]]]
         = None) -> List[dict]:
    """The systemic findings of a finished run: ``[{'scope', 'reason',
    'nodes'}]`` (empty: none)."""
    fails = node_failures(fleet)
    checked = len(fleet.nodes)
    out = []
    by_shape = collections.defaultdict(list)
    for n, s in fails.items():
        by_shape[s].append(n)
    for s, ns in sorted(by_shape.items(), key=lambda kv: -len(kv[1])):
        if len(ns) >= 2 and len(ns) > share * checked:
            out.append({'scope': 'share', 'nodes': sorted(ns),
                        'reason': (f'{len(ns)} of {checked} nodes failed '
                                   f'the same way: {s}')})
    named = set(fleet.bad) | set(fleet.could_not_check) | set(fails) | {
        n for l in fleet.links for n in l} | {
        n for g, _ in fleet.suspect_groups for n in g}
    for sw, members in sorted((switch_map or {}).items()):
        here = [n for n in members if n in set(fleet.nodes)]
        if len(here) < 2 or not all(n in named for n in here):
            continue
        if any(set(here) <= set(f['nodes']) for f in out):
            continue
        common = collections.Counter(
            fails.get(n) or shape(fleet.bad.get(n) or
                                  fleet.could_not_check.get(n) or
                                  'named in a suspect link or group',
                                  set(fleet.nodes)) for n in here)
        out.append({'scope': f'switch {sw}', 'nodes': sorted(here),
                    'reason': (f'switch {sw}: every node behind it '
                               f'({len(here)}) failed: '
                               f'{common.most_common(1)[0][0]}')})
    return out


def hold_reason(summary, cfg, to_drain: Sequence[str]) -> str:
    """Why the drains of this run are held back ('' when they are not):
    a systemic finding, or more drains than ``fleet.max_drain``."""
    sysf = summary.get('systemic') or []
    if sysf:
        return (f'systemic: {sysf[0]["reason"]}: nothing drained without '
                f'--force')
    ceiling = cfg.drain_ceiling(summary.get('nodes_checked') or 0)
    if len(to_drain) > ceiling:
        return (f'{len(to_drain)} nodes to drain, above the ceiling of '
                f'{ceiling} per run (fleet.max_drain {cfg.max_drain}): '
                f'nothing drained without --force')
    return ''
