"""The pure logic of a fleet acceptance: who is paired with whom, who is to
blame, which groups to test, and who is slow.  No Slurm, no clock: the
orchestration (:mod:`ccl_health.fleet.rounds`) feeds it the results of each
round and asks for the next.

Rules (the first rule of the project: never a false drain):

- **Pairs.**  The healthy nodes are sorted and paired twice: neighbours
  (``0-1, 2-3, ...``: nodes that likely share a switch) and half the fleet
  apart (``i - i+n/2``: across the fabric), so each node meets two
  different partners.  An odd leftover, and every node that has met fewer
  than two partners, gets a known-good partner in a re-test round.
- **A bad node** failed with two different *proven* partners (a proven node
  passed a pair step with someone: a truly broken node never does), so a
  healthy node that happens to meet two broken ones is never named.
- **A suspect link** is a failed pair whose two members are both proven and
  neither is bad.  A member that failed with one partner and passed with
  only one other is first tested with a third partner (re-test round).
- A node that never passed and did not fail with two proven partners,
  after every partner there is to try, is **could-not-check**.
- **Groups** of growing size (the site's, then the whole set); a group that
  fails or hangs is **bisected**: both halves of every failing set are
  tested in one round, failing halves recursed into; a set of at most
  three nodes is settled by pairing each member with a proven partner.  A
  set that fails while both its halves pass is an **interaction fault**:
  the group is named, nobody is drained.
- **Stragglers**: below ``median - k * 1.4826 * MAD`` of this run's node
  busbw *and* more than ``floor`` (default 5 %) below the median.  The
  scaled MAD estimates the standard deviation of a normal sample and is
  not moved by the outliers themselves; the floor keeps a perfectly
  uniform fleet (MAD about 0) from flagging 0.1 % wiggles.
"""

import dataclasses
import math
import statistics
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

#: MAD x this estimates sigma for normal data
MAD_SCALE = 1.4826
#: default floor: a node (or pair) must also be this share below the median
FLOOR = 0.05


def sort_nodes(nodes: Iterable[str]) -> List[str]:
    """Natural order (``n2`` before ``n10``): neighbours in the list are
    neighbours in the machine's numbering."""
    import re

    def key(name):
        return [int(t) if t.isdigit() else t
                for t in re.split(r'(\d+)', name)]
    return sorted(set(nodes), key=key)


# -- pairs --------------------------------------------------------------------

def pairings(nodes: Sequence[str]) -> List[List[Tuple[str, str]]]:
    """Two pairings of ``nodes`` (sorted first) in which no node has the
    same partner twice: neighbours, then half the fleet apart.  With an odd
    count a different node is left out of each (the re-test round gives it
    its second partner).  Two nodes: one pairing (there is no other
    partner); fewer: none."""
    order = sort_nodes(nodes)
    n = len(order)
    if n < 2:
        return []
    first = [(order[i], order[i + 1]) for i in range(0, n - 1, 2)]
    if n == 2:
        return [first]
    rot = order[-1:] + order[:-1] if n % 2 else order
    h = len(rot) // 2
    second = [(rot[i], rot[i + h]) for i in range(h)]
    return [first, second]


@dataclasses.dataclass(frozen=True)
class PairObs:
    """One pair (or bisection leaf) step: its members, whether it passed,
    and the one-line reason of a failure."""
    a: str
    b: str
    ok: bool
    reason: str = ''


@dataclasses.dataclass
class Isolation:
    bad: Dict[str, str]                      # node -> reason
    links: Dict[Tuple[str, str], str]        # (a, b) sorted -> reason
    retest: Set[str]                         # nodes that need another partner
    proven: Set[str]                         # passed a pair step
    undecided: Dict[str, str]                # node -> why, no partner left


def _partners(obs: Iterable[PairObs]):
    passes: Dict[str, Set[str]] = {}
    fails: Dict[str, Dict[str, str]] = {}
    for o in obs:
        for x, y in ((o.a, o.b), (o.b, o.a)):
            passes.setdefault(x, set())
            fails.setdefault(x, {})
            if o.ok:
                passes[x].add(y)
            else:
                fails[x].setdefault(y, o.reason)
    return passes, fails


def isolate(nodes: Iterable[str], obs: Sequence[PairObs],
            final: bool = False) -> Isolation:
    """Who is bad, which links are suspect, who needs another partner.

    ``final``: no more rounds will come: a node still needing a partner is
    undecided (could-not-check) or, when it passed with someone, its failed
    pairs with proven partners become suspect links."""
    nodes = sort_nodes(nodes)
    passes, fails = _partners(obs)
    proven = {n for n in nodes if passes.get(n)}
    bad: Dict[str, str] = {}
    for n in nodes:
        against = {p: r for p, r in fails.get(n, {}).items() if p in proven}
        if len(against) >= 2:
            first = sorted(against)[:2]
            bad[n] = 'failed with %d healthy partners: %s' % (
                len(against), '; '.join('%s (%s)' % (p, against[p])
                                        for p in first))
    retest: Set[str] = set()
    undecided: Dict[str, str] = {}
    for n in nodes:
        if n in bad:
            continue
        met = set(passes.get(n, ())) | set(fails.get(n, {}))
        against = [p for p in fails.get(n, {}) if p in proven and
                   p not in bad]
        if not passes.get(n):
            retest.add(n)              # never passed: needs a proven partner
        elif len(met) < 2:
            retest.add(n)              # met one partner only (odd leftover)
        elif against and len(passes[n]) < 2:
            retest.add(n)              # one failure, one pass: a third one
    links: Dict[Tuple[str, str], str] = {}
    for o in obs:
        if o.ok:
            continue
        a, b = sorted((o.a, o.b))
        if a in bad or b in bad or a not in proven or b not in proven:
            continue
        if not final and (a in retest or b in retest):
            continue
        links.setdefault((a, b), 'pair %s-%s failed while both passed with '
                         'other partners: %s' % (a, b, o.reason))
    if final:
        for n in sorted(retest):
            if passes.get(n):
                continue
            fl = fails.get(n, {})
            undecided[n] = ('no healthy partner to judge it with' if not fl
                            else 'failed only with %s; no second healthy '
                            'partner to tell its fault from theirs'
                            % ', '.join('%s (%s)' % (p, r)
                                        for p, r in sorted(fl.items())))
        retest = set()
    return Isolation(bad, links, retest, proven, undecided)


def retest_pairs(need: Iterable[str], proven: Iterable[str],
                 obs: Sequence[PairObs], busy: Iterable[str] = ()
                 ) -> List[Tuple[str, str]]:
    """One re-test round: each node of ``need`` with a proven partner it
    has not met yet, every partner used once (steps of a round run at
    once).  Partners that passed most often are taken first."""
    passes, fails = _partners(obs)
    used = set(busy) | set(need)
    pool = [p for p in sort_nodes(proven) if p not in used]
    pool.sort(key=lambda p: -len(passes.get(p, ())))
    out = []
    for n in sort_nodes(need):
        met = set(passes.get(n, ())) | set(fails.get(n, {}))
        for i, p in enumerate(pool):
            if p not in met:
                out.append((n, p))
                pool.pop(i)
                break
    return out


# -- groups and bisection -----------------------------------------------------

def groups(nodes: Sequence[str], size: int) -> List[List[str]]:
    """Consecutive groups of ``size`` (sorted order); a remainder smaller
    than half a group joins the last one."""
    order = sort_nodes(nodes)
    if size >= len(order):
        return [order] if order else []
    out = [order[i:i + size] for i in range(0, len(order), size)]
    if len(out) > 1 and len(out[-1]) < size / 2:
        out[-2].extend(out.pop())
    return out


def group_sizes(sizes: Sequence[int], count: int) -> List[int]:
    """The site's group sizes below ``count`` (and above 2: pairs did
    those), then the whole set."""
    out = sorted({int(s) for s in sizes if 2 < int(s) < count})
    if count > 2:
        out.append(count)
    return out


def halves(nodes: Sequence[str]) -> Tuple[List[str], List[str]]:
    order = sort_nodes(nodes)
    h = (len(order) + 1) // 2
    return order[:h], order[h:]


#: a failing set this small is settled by pairs with proven partners
LEAF = 3


def max_bisect_rounds(n: int) -> int:
    """Rounds a bisection of ``n`` nodes takes at most: halvings down to a
    leaf, then the leaf's pair round."""
    rounds, size = 0, n
    while size > LEAF:
        size = (size + 1) // 2
        rounds += 1
    return rounds + 1


# -- stragglers ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Baseline:
    median: float
    mad: float
    threshold: float        # below this: an outlier
    count: int


def baseline(values: Sequence[float], k: float = 3.0,
             floor: float = FLOOR) -> Optional[Baseline]:
    """``median - k * 1.4826 * MAD``, and at least ``floor`` below the
    median; None with fewer than 3 finite values (no robust baseline)."""
    vals = [float(v) for v in values
            if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(vals) < 3:
        return None
    med = statistics.median(vals)
    mad = statistics.median([abs(v - med) for v in vals])
    thr = min(med - k * MAD_SCALE * mad, med * (1 - floor))
    return Baseline(med, mad, thr, len(vals))


def stragglers(busbw: Dict[str, float], k: float = 3.0,
               floor: float = FLOOR) -> Dict[str, str]:
    """Nodes whose busbw lies below this run's robust baseline."""
    b = baseline(list(busbw.values()), k, floor)
    if b is None:
        return {}
    out = {}
    for node, v in busbw.items():
        if v < b.threshold:
            out[node] = ('busbw %.1f GB/s is %.0f %% below the fleet median '
                         '%.1f GB/s (baseline: median - %g x 1.4826 x MAD, '
                         'at least %.0f %% below: %.1f GB/s, %d nodes)'
                         % (v, 100 * (1 - v / b.median), b.median, k,
                            100 * floor, b.threshold, b.count))
    return out


def slow_pairs(busbw: Dict[Tuple[str, str], float],
               node_factor: Dict[str, float], k: float = 3.0,
               floor: float = FLOOR) -> Dict[Tuple[str, str], str]:
    """Pairs slower than the pairs' robust baseline of this run, beyond
    what a straggler member explains: a pair with a node at 85 % of the
    node median may run at 85 % of the pair median (that node is named a
    straggler; the pair is not failed for it)."""
    b = baseline(list(busbw.values()), k, floor)
    if b is None:
        return {}
    out = {}
    for pair, v in busbw.items():
        allow = min([min(1.0, node_factor.get(n, 1.0)) for n in pair])
        if v < b.threshold * allow:
            out[pair] = ('slow: busbw %.1f GB/s, %.0f %% below the pairs\' '
                         'median %.1f GB/s (baseline %.1f GB/s over %d pairs)'
                         % (v, 100 * (1 - v / b.median), b.median,
                            b.threshold * allow, b.count))
    return out
