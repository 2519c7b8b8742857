"""The orchestration of a fleet acceptance: rounds of steps on a scheduler
(:mod:`ccl_health.fleet.slurmsteps` on a real machine,
:mod:`ccl_health.fleet.simulate` for the scale benchmark: the same code
drives both), each round's results judged, the next round planned by
:mod:`ccl_health.fleet.plan`.

The rounds: ``nodes`` (the node check on every node at once), ``pairs-1``
and ``pairs-2`` (two pairings of the healthy nodes), ``retest-*`` (third
partners, odd leftovers), ``groups-<size>`` (all_reduce over growing
groups, the last one the whole set) and ``bisect-*`` after a failing group.
"""

import dataclasses
import json
import math
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ccl_health import safefile
from ccl_health.units import format_size
from ccl_health.judge import nodejudge as node_judge
from ccl_health.judge import stalled
from ccl_health.judge.casejudge import judge
from ccl_health.judge.verdicts import Verdict
from ccl_health.fleet import plan
from ccl_health.sitedata.fleetconfig import FleetConfig
from ccl_health.fleet.stepevidence import srun_failure, step_evidence


@dataclasses.dataclass(frozen=True)
class Step:
    kind: str                    # node | pair | group
    nodes: Tuple[str, ...]
    limit: float                 # seconds: the step's bound


@dataclasses.dataclass
class Raw:
    """What a scheduler brings back from one step."""
    step: Step
    code: Optional[int]          # exit status; None: unknown / killed
    stdout: str = ''
    stderr: str = ''
    doc: Optional[dict] = None   # the node check's --json file
    killed: bool = False         # stopped at its bound: a hang
    started: float = 0.0
    seconds: float = 0.0
    #: a parsed nccl-tests result (the simulator's shortcut); else stdout
    #: is parsed
    result: Any = None
    #: the step's NCCL debug logs (NCCL_DEBUG_FILE), where it wrote any:
    #: the transport is proven from them (and from NCCL lines in stdout)
    debug_logs: List[str] = dataclasses.field(default_factory=list)
    #: what NCCL's RAS said before a killed step was stopped
    #: (:class:`ccl_health.evidence.ras.Answer`); None: not asked
    ras: Any = None


@dataclasses.dataclass
class Judged:
    step: Step
    verdict: Verdict
    reason: str
    busbw: Optional[float]
    started: float
    seconds: float
    #: ``(node, source)``: the one node of the step its hang names, and
    #: what named it (:func:`ccl_health.judge.stalled.node_named`)
    named: Optional[Tuple[str, str]] = None

    @property
    def ok(self):
        return self.verdict is Verdict.PASS

    def to_dict(self):
        out = {'nodes': list(self.step.nodes), 'verdict': str(self.verdict),
               'reason': self.reason, 'busbw': self.busbw,
               'started': round(self.started, 3),
               'seconds': round(self.seconds, 3)}
        if self.named is not None:
            out['named'] = {'node': self.named[0], 'by': self.named[1]}
        return out


def _last_line(text):
    lines = [l.strip() for l in (text or '').splitlines() if l.strip()]
    return lines[-1] if lines else ''


def judge_node(raw: Raw, limit: float):
    """``(verdict, reason, busbw)`` of one node check.  Healthy only on
    exit 0 with the hook's JSON saying so too; bad on exit 1 with the
    hook's JSON saying so, or, where its JSON could not be written, with
    its ``UNHEALTHY:`` line (an exit 1 of srun itself is not the hook's);
    a kill at the bound is a hang (bad)."""
    node = raw.step.nodes[0]
    if raw.killed:
        return (*node_judge.killed('the node check gave no verdict',
                                   limit), None)
    line = _last_line(raw.stdout)
    doc = raw.doc if isinstance(raw.doc, dict) else None
    if raw.code == 0 and doc is not None and doc.get('code') == 0:
        probes = doc.get('probes') or []
        bw = probes[0].get('busbw') if probes and isinstance(
            probes[0], dict) else None
        bw = float(bw) if isinstance(bw, (int, float)) and \
            math.isfinite(bw) and bw > 0 else None
        return Verdict.PASS, line or 'HEALTHY', bw
    if raw.code == 1 and doc is not None and doc.get('code') == 1:
        v = Verdict.parse(doc.get('verdict'), default=Verdict.CRASH)
        if not v.failed:
            v = Verdict.CRASH
        return v, doc.get('line') or line or 'UNHEALTHY', None
    srun_said = srun_failure(raw)
    if raw.code == 1 and doc is None and not srun_said and \
            line.startswith('UNHEALTHY: '):
        # the hook measured a fault and said so, but its --json could not
        # be written (a full shared folder, issue 41): its line is its
        # verdict, never lost to the tool's own trouble
        return Verdict.NODE_FAULT, line, None
    why = srun_said or line or _last_line(raw.stderr)
    if raw.code in (0, 1) and doc is None:
        why = (f'exit status {raw.code} but no --json file from the node '
               f'check ({why or "no output"})')
    elif raw.code in (0, 1):
        why = (f'exit status {raw.code} but the node check\'s JSON says '
               f'code {doc.get("code")!r} ({why or "no output"})')
    elif raw.code is None:
        why = (f'no verdict: no JSON file from the node check '
               f'({why or "no output"})')
    else:
        why = f'exit status {raw.code}: {why or "no output"}'
    return (*node_judge.not_run(f'could not check {node}: {why}'), None)


def judge_step(raw: Raw, size: int, limit: float,
               cfg: Optional[FleetConfig] = None, site=None):
    """``(verdict, reason, busbw)`` of one pair or group step: its evidence
    (:func:`step_evidence`, with the ``site``'s benign WARNs and ceilings)
    judged by :func:`ccl_health.judge.casejudge.judge`.
    The fleet's relative rules (stragglers, isolation) come after, on the
    steps that passed."""
    return step_judgement(raw, size, limit, cfg, site)[:3]


def step_judgement(raw: Raw, size: int, limit: float,
                   cfg: Optional[FleetConfig] = None, site=None):
    """:func:`judge_step`'s ``(verdict, reason, busbw)`` and ``named``:
    the one node of the step its hang names, with what named it
    (:func:`ccl_health.judge.stalled.node_named`), or None."""
    what = f'the {raw.step.kind} step on {",".join(raw.step.nodes[:4])}' + (
        f' (+{len(raw.step.nodes) - 4})' if len(raw.step.nodes) > 4 else '')
    killed = node_judge.killed_at(f'{what} did not finish', limit) \
        if raw.killed else None
    # a hang through the judge too: it names the rank and node RAS named
    ev = step_evidence(raw, size, cfg or FleetConfig(), what, site,
                       killed=killed)
    j = judge(ev)
    if j.verdict is not Verdict.PASS:
        named = stalled.node_named(ev.attempts[-1], raw.step.nodes) \
            if j.verdict is Verdict.HANG else None
        return j.verdict, j.reason, None, named
    row = j.attempt and [f for f in j.findings if f.size == size]
    return Verdict.PASS, j.reason, row[0].busbw if row else None, None


class Fleet:
    """One acceptance run over ``nodes`` on ``scheduler`` (an object with
    ``run(steps) -> [Raw]`` and ``now() -> seconds``)."""

    def __init__(self, nodes: Sequence[str], scheduler, cfg: FleetConfig,
                 log: Optional[Callable[[str], None]] = None,
                 unavailable: Optional[Dict[str, str]] = None,
                 actions: Optional[Dict[str, str]] = None, site=None):
        #: the site's ``actions:`` block (:mod:`ccl_health.judge.actions`)
        self.site_actions = dict(actions or {})
        #: the site (:class:`ccl_health.sitedata.site.Site`, or None): its
        #: benign WARNs and ceilings judge every step
        self.site = site
        #: the verdict of a bad node's node check (fleet-named: none)
        self.bad_verdict: Dict[str, Verdict] = {}
        self.nodes = plan.sort_nodes(nodes)
        self.sched = scheduler
        self.cfg = cfg
        self.log = log or (lambda text: print(text, file=sys.stderr,
                                              flush=True))
        self.unavailable = dict(unavailable or {})
        self.rounds: List[dict] = []
        self.judged: List[Tuple[str, Judged]] = []   # (round, result)
        self.node_bw: Dict[str, float] = {}
        self.pairs: List[Judged] = []
        self.bad: Dict[str, str] = {}
        self.could_not_check: Dict[str, str] = {}
        self.links: Dict[Tuple[str, str], str] = {}
        self.suspect_groups: List[Tuple[List[str], str]] = []
        self.named_round: Dict[str, int] = {}
        #: the bisections a named node made needless: ``{round, nodes,
        #: node, by, reason}`` each
        self.skipped: List[dict] = []
        self.t0 = 0.0

    # -- rounds ---------------------------------------------------------------

    def _round(self, name, kind, node_sets, extra=()):
        """Run one round: every step at once.  ``extra``: steps of another
        kind in the same round (leaf pairs of a bisection)."""
        steps = [Step(kind, tuple(ns), self.cfg.limit(kind, len(ns)))
                 for ns in node_sets]
        steps += [Step(k, tuple(ns), self.cfg.limit(k, len(ns)))
                  for k, ns in extra]
        if not steps:
            return []
        start = self.sched.now()
        one = kind == 'node' and self.cfg.node_check == 'one-step' and \
            hasattr(self.sched, 'run_nodes')
        raws = self.sched.run_nodes(steps) if one else self.sched.run(steps)
        out = []
        for raw in raws:
            named = None
            if raw.step.kind == 'node':
                v, why, bw = judge_node(raw, raw.step.limit)
            else:
                v, why, bw, named = step_judgement(
                    raw, self.cfg.size_bytes, raw.step.limit, self.cfg,
                    self.site)
            j = Judged(raw.step, v, why, bw, raw.started - self.t0,
                       raw.seconds, named)
            out.append(j)
            self.judged.append((name, j))
        seconds = self.sched.now() - start
        ok = sum(j.ok for j in out)
        hung = sum(j.verdict is Verdict.HANG for j in out)
        unj = sum(j.verdict.unjudged for j in out)
        self.rounds.append({
            'name': name, 'kind': kind, 'steps': 1 if one else len(steps),
            'started': round(start - self.t0, 3),
            'seconds': round(seconds, 3),
            'results': [j.to_dict() for j in out]})
        self.log(f'fleet: round {len(self.rounds)} {name}: '
                 f'{"1 step on " if one else ""}{len(steps)} '
                 f'{"nodes" if one else "steps"}, {ok} ran without error, '
                 f'{len(out) - ok - unj} failed'
                 f'{f" ({hung} hung)" if hung else ""}'
                 f'{f", {unj} could not check" if unj else ""}, '
                 f'{seconds:.1f} s')
        return out

    def _name_bad(self, node, reason, verdict=None):
        if node not in self.bad:
            self.bad[node] = reason
            if verdict is not None:
                self.bad_verdict[node] = verdict
            self.named_round.setdefault(node, len(self.rounds))

    # -- pairs ----------------------------------------------------------------

    def _node_factor(self):
        b = plan.baseline(list(self.node_bw.values()), self.cfg.straggler_k,
                          self.cfg.straggler_floor)
        if b is None or b.median <= 0:
            return {}
        return {n: v / b.median for n, v in self.node_bw.items()}

    def pair_obs(self):
        """Every pair step so far as :class:`~plan.PairObs`: passed ones
        slower than the pairs' robust baseline become failed ('slow');
        unjudged ones say nothing and are left out."""
        bws = {}
        for j in self.pairs:
            if j.ok and j.busbw is not None:
                bws[j.step.nodes] = j.busbw
        slow = plan.slow_pairs(bws, self._node_factor(),
                               self.cfg.straggler_k, self.cfg.straggler_floor)
        obs = []
        for j in self.pairs:
            if j.verdict.unjudged:
                continue
            a, b = j.step.nodes[:2]
            if j.ok and j.step.nodes in slow:
                obs.append(plan.PairObs(a, b, False, slow[j.step.nodes]))
            else:
                obs.append(plan.PairObs(a, b, j.ok, j.reason))
        return obs

    def _pair_round(self, name, pairs, extra_groups=()):
        out = self._round(name, 'pair', pairs,
                          extra=[('group', g) for g in extra_groups])
        self.pairs.extend(j for j in out if j.step.kind == 'pair')
        self._log_slow(out, None)
        return out

    def _pairs(self, healthy):
        for i, pairing in enumerate(plan.pairings(healthy)):
            self._pair_round(f'pairs-{i + 1}', pairing)
        iso = plan.isolate(healthy, self.pair_obs())
        for i in range(self.cfg.retests):
            if not iso.retest:
                break
            partners = iso.proven - set(iso.bad) - iso.retest
            pairs = plan.retest_pairs(iso.retest, partners, self.pair_obs())
            if not pairs:
                break
            for n in iso.bad:
                self._name_bad(n, iso.bad[n])
            self._pair_round(f'retest-{i + 1}', pairs)
            iso = plan.isolate(healthy, self.pair_obs())
        iso = plan.isolate(healthy, self.pair_obs(), final=True)
        for n, why in iso.bad.items():
            self._name_bad(n, why)
        for n, why in iso.undecided.items():
            self.could_not_check[n] = why
        for link, why in iso.links.items():
            self.links.setdefault(link, why)
            self.named_round.setdefault('-'.join(link), len(self.rounds))
        return iso

    # -- groups and bisection -------------------------------------------------

    def _slow_allowance(self, nodes):
        f = self._node_factor()
        return min([min(1.0, f.get(n, 1.0)) for n in nodes] or [1.0])

    def _group_failed(self, j, base):
        """``(failed, reason)`` of a group step: a failed verdict, or
        slower than ``base`` (the robust baseline of the groups of its
        round) beyond what a straggler member explains."""
        if j.verdict.failed:
            return True, j.reason
        if j.ok and base is not None and j.busbw is not None:
            thr = base.threshold * self._slow_allowance(j.step.nodes)
            if j.busbw < thr:
                return True, (f'slow: busbw {j.busbw:.1f} GB/s, '
                              f'{100 * (1 - j.busbw / base.median):.0f} % '
                              f'below the median {base.median:.1f} GB/s of '
                              f'its round\'s groups (baseline {thr:.1f})')
        return False, ''

    def _log_slow(self, out, base):
        """The progress line counts verdicts; say how many of the steps
        that ran without error were then judged too slow (a failure all
        the same)."""
        obs = {(o.a, o.b): o for o in self.pair_obs()} if any(
            j.step.kind == 'pair' for j in out) else {}
        slow = sum(1 for j in out if j.ok and (
            self._group_failed(j, base)[0] if j.step.kind == 'group' else
            not obs.get(j.step.nodes[:2], plan.PairObs('', '', True)).ok))
        if slow:
            self.log(f'fleet: round {len(self.rounds)} '
                     f'{self.rounds[-1]["name"]}: {slow} of the steps '
                     f'that ran without error were slower than the '
                     f'baseline of the run: judged slow (a failure)')

    def _pair_failed(self, j):
        """``(failed, reason)`` of a pair step, the pairs' slow rule
        included."""
        a, b = j.step.nodes[:2]
        for o in self.pair_obs():
            if (o.a, o.b) == (a, b):
                return not o.ok, o.reason
        return j.verdict.failed, j.reason

    def _step_baseline(self, out):
        """The robust baseline a group is judged against: the groups of
        its round when there are 3 or more, else every passed network step
        of this run so far (pairs and groups: with one rank per node an
        all_reduce's busbw hardly depends on the node count)."""
        cfg = self.cfg
        vals = [j.busbw for j in out if j.ok and j.busbw is not None]
        if len(vals) < 3:
            vals += [j.busbw for _, j in self.judged
                     if j.step.kind != 'node' and j not in out and j.ok and
                     j.busbw is not None]
        return plan.baseline(vals, cfg.straggler_k, cfg.straggler_floor)

    def _groups(self, members, proven):
        cfg = self.cfg
        for size in plan.group_sizes(cfg.groups, len(members)):
            # a named culprit would fail every larger group again
            out_ = set(self.bad) | {n for l in self.links for n in l} | {
                n for g, _ in self.suspect_groups for n in g}
            members = [n for n in members if n not in out_]
            if len(members) < 3:
                break
            sets = plan.groups(members, min(size, len(members)))
            label = 'all' if size >= len(members) else str(size)
            out = self._round(f'groups-{label}', 'group', sets)
            base = self._step_baseline(out)
            failing = []
            for j in out:
                bad, why = self._group_failed(j, base)
                if bad:
                    failing.append((list(j.step.nodes), why, j.named))
                elif j.verdict.unjudged:
                    self.log(f'fleet: group {",".join(j.step.nodes[:3])}...'
                             f' could not be judged: {j.reason}')
            self._log_slow(out, base)
            if failing:
                self._bisect(failing, proven, base, label)

    def _bisect(self, failing, proven, base, label=''):
        """Narrow failing groups down, every failing set at once:

        - a set whose hang names one of its nodes (NCCL's RAS, or the
          outputs: :func:`ccl_health.judge.stalled.node_named`): that node
          is bad, named by that source, and is not re-tested; the rest of
          the set runs again as one step (failing, it is searched on);
        - a set of 4 or more: both halves; failing halves go on; when both
          pass, the fault lies *between* them (a link): a cross search
          halves both sides and tests A1+B1 and A2+B2 side by side (then
          A1+B2 and A2+B1 when neither failed), down to one node on each
          side (with one node left on a side, the other side is halved
          alone), then that pair alone confirms;
        - a set of 3: its first two as a pair, the third with a healthy
          partner; a set of 2 (or 1): each member with a healthy partner.

        A member failing in the set and with a healthy partner is bad (two
        different partners); a pair that failed together while each member
        passed with others is a suspect link; what cannot be narrowed is a
        suspect group (named, never drained).  ``failing``: ``[(nodes,
        why, named)]``, ``named`` the step's :attr:`Judged.named`."""
        pending = [('set', s, None, why, named) for s, why, named in failing]
        r = 0
        while pending:
            r += 1
            busy = {n for it in pending for n in it[1] + (it[2] or [])}
            partners = [p for p in plan.sort_nodes(proven)
                        if p not in busy and p not in self.bad]
            name = f'bisect-{label}-{r}'
            groups, pairs, todo = [], [], []
            for item in pending:
                self._bisect_plan(item, partners, name, groups, pairs, todo)
            if not todo:
                break
            out = self._round(name, 'group', groups,
                              extra=[('pair', p) for p in pairs])
            res = {j.step.nodes: j for j in out}
            self.pairs.extend(j for j in out if j.step.kind == 'pair')
            self._log_slow(out, base)
            after = {'rest': self._after_rest, 'halves': self._after_halves,
                     'leaf': self._after_leaf, 'cross': self._after_cross,
                     'cross2': self._after_cross2,
                     'cross1': self._after_cross1,
                     'confirm': self._after_confirm}
            pending = []
            for how, s, why, keys in todo:
                pending += after[how](s, why, keys, [res[k] for k in keys],
                                      base)

    def _bisect_plan(self, item, partners, name, groups, pairs, todo):
        """The steps of one search ``item`` in the next round: appended to
        ``groups`` and ``pairs``, with ``(how, what, why, keys)`` to
        ``todo`` (``keys``: its steps' nodes, read back by the
        ``_after_<how>`` of its kind)."""
        how, s, other, why, named = item
        if how in ('cross', 'cross2'):
            self._cross_plan(how, s, other, why, groups, pairs, todo)
            return
        if named is not None and named[0] in s:
            rest = self._skip_named(s, why, named, name)
            if len(rest) >= 2:
                (groups if len(rest) > 2 else pairs).append(rest)
                todo.append(('rest', (rest, named), why, [tuple(rest)]))
            return
        if len(s) >= 4:
            h1, h2 = plan.halves(s)
            groups += [h1, h2]
            todo.append(('halves', s, why, [tuple(h1), tuple(h2)]))
            return
        solo = s[2:] if len(s) == 3 else s
        steps = [tuple(s[:2])] if len(s) == 3 else []
        if len(partners) < len(solo):
            self.suspect_groups.append((s, (
                f'failed ({why}); no healthy partner left to narrow '
                f'it down')))
            return
        steps += [(n, partners.pop(0)) for n in solo]
        pairs += steps
        todo.append(('leaf', s, why, steps))

    @staticmethod
    def _cross_plan(how, s, other, why, groups, pairs, todo):
        """The steps of a cross search between sides ``s`` and ``other``."""
        if len(s) == 1 and len(other) == 1:
            k = (s[0], other[0])
            pairs.append(k)
            todo.append(('confirm', s + other, why, [k]))
            return
        if len(s) == 1 or len(other) == 1:
            side, fixed = (s, other) if len(s) > 1 else (other, s)
            h1, h2 = plan.halves(side)
            test = plan.sort_nodes(h1 + fixed)
            groups.append(test)
            todo.append(('cross1', (h1, h2, fixed), why, [tuple(test)]))
            return
        # both sides halved at once: A1+B1 and A2+B2 side by side
        # (disjoint), then A1+B2 and A2+B1
        a1, a2 = plan.halves(s)
        b1, b2 = plan.halves(other)
        if how == 'cross2':
            b1, b2 = b2, b1
        tests = [plan.sort_nodes(a1 + b1), plan.sort_nodes(a2 + b2)]
        groups += tests
        todo.append((how, ((a1, b1), (a2, b2), (s, other)), why,
                     [tuple(t) for t in tests]))

    def _skip_named(self, s, why, named, round_name):
        """The node ``named`` (``(node, source)``) by a failing set ``s``'s
        hang is bad, named by that source; the steps that would only
        re-test it are not run (recorded in :attr:`skipped`).  The rest of
        the set, to run again as one step."""
        node, source = named
        self._name_bad(node, (
            f'hung in a step of {len(s)} nodes ({why}); named by {source}: '
            f'the bisection did not re-test it'))
        rest = plan.sort_nodes([n for n in s if n != node and
                                n not in self.bad])
        self.skipped.append({
            'round': round_name, 'nodes': list(s), 'node': node,
            'by': source, 'reason': (
                f'{node} named by {source} in a hung step of {len(s)} '
                f'nodes: its halving down to {node} and the re-test of '
                f'{node} with a healthy partner not run' + (
                    f'; the other {len(rest)} re-tested as one step'
                    if len(rest) >= 2 else ''))})
        self.log(f'fleet: {node} named by {source} in a hung step of '
                 f'{len(s)} nodes: the bisection skips re-testing it')
        return rest

    # -- what each search learns from its steps (``_after_<how>``: the next
    # searches) ---------------------------------------------------------------

    def _after_rest(self, s, why, keys, js, base):
        """The rest of a set after its named node: failing, searched on."""
        rest, (node, source) = s
        j = js[0]
        bad, w = (self._group_failed(j, base) if j.step.kind == 'group'
                  else self._pair_failed(j))
        if bad:
            return [('set', rest, None, w, j.named)]
        if not j.ok:
            self.suspect_groups.append((rest, (
                f'failed with {node} ({why}); {node} named by {source}, the '
                f'others could not be judged without it: {j.reason}')))
        return []

    def _after_cross1(self, s, why, keys, js, base):
        h1, h2, fixed = s
        j = js[0]
        bad, w = self._group_failed(j, base)
        if not bad and not j.ok:
            self.suspect_groups.append((h1 + h2 + fixed, (
                f'failed ({why}); a narrowing step could not be '
                f'judged: {j.reason}')))
            return []
        # the fault lies between `fixed` and h1 (this step failed) or h2
        # (it passed)
        side = h1 if bad else h2
        return [('cross', side, fixed, w if bad else why, None)]

    def _after_cross(self, s, why, keys, js, base, how='cross'):
        (a1, b1), (a2, b2), (a, b) = s
        nxt = []
        for (x, y), j in zip(((a1, b1), (a2, b2)), js):
            bad, w = self._group_failed(j, base)
            if bad:
                nxt.append(('cross', x, y, w, None))
        if nxt:
            return nxt
        if how == 'cross' and all(j.ok for j in js):
            return [('cross2', a, b, why, None)]
        what = ('every cross test passed' if all(j.ok for j in js)
                else 'a narrowing step could not be judged')
        self.suspect_groups.append((plan.sort_nodes(a + b), (
            f'interaction fault: failed ({why}) while {what}')))
        return []

    def _after_cross2(self, s, why, keys, js, base):
        return self._after_cross(s, why, keys, js, base, how='cross2')

    def _after_confirm(self, s, why, keys, js, base):
        bad, w = self._pair_failed(js[0])
        a, b = sorted(s)
        if bad:
            self.links.setdefault((a, b), (
                f'pair {a}-{b} failed ({w}) inside a failing group ({why}) '
                f'while each passed with other partners'))
            self.named_round.setdefault(f'{a}-{b}', len(self.rounds))
        else:
            self.suspect_groups.append((s, (
                f'interaction fault: a group failed ({why}); narrowed to '
                f'{a}-{b}, which passed alone')))
        return []

    def _after_halves(self, s, why, keys, js, base):
        fails = [(list(j.step.nodes), w, j.named) for j in js
                 for bad, w in [self._group_failed(j, base)] if bad]
        if fails:
            return [('set', f, None, w, named) for f, w, named in fails]
        if all(j.ok for j in js):
            h1, h2 = (list(k) for k in keys)
            return [('cross', h1, h2, why, None)]
        self.suspect_groups.append((s, (
            f'failed ({why}); a half could not be judged: '
            + next(j.reason for j in js if not j.ok))))
        return []

    def _after_leaf(self, s, why, keys, js, base):
        nxt, named = [], False
        for k, j in zip(keys, js):
            bad, w = self._pair_failed(j)
            if not bad:
                continue
            named = True
            if set(k) <= set(s):
                nxt.append(('set', list(k), None, w, j.named))
            else:
                self._name_bad(k[0], (
                    f'failed in a group ({why}) and with healthy partner '
                    f'{k[1]} ({w})'))
        if named:
            return nxt
        if not all(j.ok for j in js):
            self.suspect_groups.append((s, (
                f'failed ({why}); a narrowing step could not be judged')))
        elif len(s) == 2:
            a, b = sorted(s)
            self.links.setdefault((a, b), (
                f'pair {a}-{b} failed together ({why}) while each passed '
                f'with a healthy partner'))
            self.named_round.setdefault(f'{a}-{b}', len(self.rounds))
        else:
            self.suspect_groups.append((s, (
                f'interaction fault: {"-".join(s)} failed together ({why}) '
                f'while each passed with others')))
        return []

    # -- the whole run --------------------------------------------------------

    def run(self) -> dict:
        self.t0 = self.sched.now()
        cfg = self.cfg
        self.log(f'fleet: {len(self.nodes)} nodes, transport '
                 f'{cfg.transport}, {format_size(cfg.size_bytes)}, round '
                 f'limit {cfg.round_limit:g} s')
        healthy = []
        for j in self._round('nodes', 'node', [[n] for n in self.nodes]):
            n = j.step.nodes[0]
            if j.ok:
                healthy.append(n)
                if j.busbw is not None:
                    self.node_bw[n] = j.busbw
            elif j.verdict.failed:
                self._name_bad(n, j.reason, j.verdict)
            else:
                self.could_not_check[n] = j.reason
        strag = plan.stragglers(self.node_bw, cfg.straggler_k,
                                cfg.straggler_floor)
        iso = self._pairs(healthy)
        link_nodes = {n for l in self.links for n in l}
        members = [n for n in healthy if n not in self.bad and
                   n not in self.could_not_check and n not in link_nodes]
        proven = [n for n in iso.proven if n not in self.bad and
                  n not in link_nodes]
        self._groups(members, proven)
        return self.summary(strag)

    def actions(self, strag):
        """``{name: action}`` of every finding (:mod:`ccl_health.judge.
        actions`): a bad node by its node check's verdict and cause, or
        ``bad-node`` when the fleet named it; links, groups and stragglers
        ``monitor`` by default."""
        from ccl_health.judge import actions
        site = self.site_actions
        out = {}
        for n, why in self.bad.items():
            v = self.bad_verdict.get(n)
            out[n] = actions.action_for(v if v is not None else 'bad-node',
                                        actions.cause_of(why), site)
        for a, b in self.links:
            out[f'{a}-{b}'] = actions.action_for('suspect-link', None, site)
        for g, _ in self.suspect_groups:
            out[','.join(g)] = actions.action_for('suspect-group', None,
                                                  site)
        for n in strag:
            out.setdefault(n, actions.action_for('straggler', None, site))
        return dict(sorted(out.items()))

    def summary(self, strag):
        from ccl_health.fleet import systemic
        named = set(self.bad) | set(self.could_not_check)
        healthy = [n for n in self.nodes if n not in named]
        strag = {n: w for n, w in strag.items() if n not in self.bad}
        return {
            'actions': self.actions(strag),
            'systemic': systemic.find(self, self.cfg.systemic_share,
                                      systemic.switches(self.cfg)),
            'nodes_checked': len(self.nodes),
            'healthy': healthy,
            'bad': dict(sorted(self.bad.items())),
            'suspect_links': [[a, b, why] for (a, b), why in
                              sorted(self.links.items())],
            'suspect_groups': [{'nodes': s, 'reason': why}
                               for s, why in self.suspect_groups],
            'stragglers': dict(sorted(strag.items())),
            'could_not_check': dict(sorted(self.could_not_check.items())),
            'not_checked': dict(sorted(self.unavailable.items())),
            'drained': [],
            'named_round': dict(sorted(self.named_round.items())),
            'skipped': list(self.skipped),
            'node_busbw': dict(sorted(self.node_bw.items())),
            'rounds': self.rounds,
            'seconds': round(self.sched.now() - self.t0, 3),
            'config': dataclasses.asdict(self.cfg),
        }


def exit_code(summary):
    """0: every node healthy, nothing suspect; 1: a bad node, a suspect
    link or group, a straggler; 2: nothing bad but something could not be
    checked (never an all-clear)."""
    if summary['bad'] or summary['suspect_links'] or \
            summary.get('suspect_groups') or summary['stragglers'] or \
            summary.get('systemic'):
        return 1
    if summary['could_not_check'] or summary.get('not_checked') or \
            not summary['nodes_checked']:
        return 2
    return 0


def summary_text(summary, path=None):
    s = summary
    lines = [f'fleet: {s["nodes_checked"]} nodes checked in '
             f'{s["seconds"]:.0f} s, {len(s["rounds"])} rounds: '
             f'{len(s["healthy"])} healthy, {len(s["bad"])} bad, '
             f'{len(s["suspect_links"])} suspect links, '
             f'{len(s.get("suspect_groups", []))} suspect groups, '
             f'{len(s["stragglers"])} stragglers, '
             f'{len(s["could_not_check"])} could not be checked']
    if s.get('simulated'):
        lines.insert(0, f'fleet: SIMULATED (scripts/fleet --simulate: a '
                        f'rehearsal on the simulated scheduler, no node was '
                        f'measured); recorded: '
                        f'{s.get("recorded") or "nothing"}')
    acts = s.get('actions') or {}
    for f in s.get('systemic') or []:
        lines.append(f'  SYSTEMIC: {f["reason"]}')
    for n, why in s['bad'].items():
        act = f'{acts[n]}: ' if n in acts else ''
        lines.append(f'  BAD {n}: {act}{why}')
    for sk in s.get('skipped') or []:
        lines.append(f'  NOT RUN ({sk["round"]}): {sk["reason"]}')
    for a, b, why in s['suspect_links']:
        lines.append(f'  SUSPECT LINK {a} - {b}: {why}')
    for g in s.get('suspect_groups', []):
        lines.append(f'  SUSPECT GROUP {",".join(g["nodes"][:8])}'
                     f'{"..." if len(g["nodes"]) > 8 else ""}: {g["reason"]}')
    for n, why in s['stragglers'].items():
        lines.append(f'  STRAGGLER {n}: {why}')
    for n, why in s['could_not_check'].items():
        lines.append(f'  COULD-NOT-CHECK {n}: {why}')
    for n, why in s.get('not_checked', {}).items():
        lines.append(f'  NOT CHECKED {n}: {why}')
    if s['drained']:
        lines.append(f'  drained: {", ".join(s["drained"])}')
    if s.get('drain_held'):
        lines.append(f'  not drained: {s["drain_held"]}')
    if s.get('env_dropped'):
        lines.append(f'  dropped from the caller\'s environment: '
                     f'{", ".join(s["env_dropped"])}')
    if path:
        lines.append(f'  summary: {path}')
    return '\n'.join(lines)


def dump(summary, path):
    safefile.write_json(path, summary)
