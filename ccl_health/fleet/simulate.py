"""A simulated scheduler for the scale benchmark
(``benchmarks/fleet_scale.py``) and the unit tests: the same
:class:`~ccl_health.fleet.rounds.Fleet` drives it as drives Slurm.  It
keeps a clock (nothing sleeps), takes what each step shows from the one
fault model (:class:`~ccl_health.fleet.faults.FaultPlan`) and how long it
takes from the constants below, each with its source.

``hidden`` names bad nodes whose fault the node check cannot see
(``'network'``: a NIC or cable; the node check runs inside the node and
passes): the pairs must find them; ``'group'``: neither the node check
nor a pair sees it, only a step of 3 nodes or more (a fault at scale):
the groups and the bisection must find them.  A bad link is found by a
pair that holds it or by a slow group and the bisection.

``ras``: what NCCL's RAS answers of a hung pair or group step, asked
before it is stopped (``ras(step, outcome) ->``
:class:`ccl_health.evidence.ras.Answer`, as
:meth:`ccl_health.fleet.slurmsteps.SlurmScheduler.ask_ras` returns it;
``outcome.node``: the node whose fault hung it); None: not asked (an
older NCCL, RAS off).
"""

import dataclasses
import functools
import heapq
import math
from typing import Any, Callable, Dict, List, Optional

from ccl_health.evidence import nccltests
from ccl_health.fleet.faults import FaultPlan
from ccl_health.fleet.rounds import Raw, Step

#: seconds of one node check (the health hook, 2 ranks, 1G): 2.3-2.6 s on
#: 2xH200 (issue 14)
HOOK_SECONDS = 2.4
#: seconds of a pair step beyond its all_reduce operations (launch of 2
#: ranks, NCCL init over the network path) and the number of operations
#: of the default step probe (-n 20 -w 5: warm-up, out-of-place,
#: in-place, checks): the fit of the device measurement wall = 1.8 s + 50
#: x one operation's time (2 ranks on an H100 with per-rank NCCL_HOSTID,
#: 1G: 30.4-31.0 s, 256M: 9.0 s at 1.86 GB/s;
#: measured by benchmarks/device/fleet_pair_step.sh, kept with the test fixtures)
PAIR_FIXED_SECONDS = 1.8
STEP_OPS = 50
#: seconds srun needs to create and launch one step (credential, slurmd
#: fork, task launch): the 'first' minus 'second' call of mpi4py in
#: first_allreduce_seconds.tsv is ~0.03 s, but srun adds its own RPCs; a
#: conservative 1 s
SRUN_SECONDS = 1.0
#: slurmd's message fan-out (slurm.conf TreeWidth, default 16 since Slurm
#: 23.02, 50 before): one step over N nodes is launched in
#: ceil(log_16 N) hops, each counted as one srun launch time
TREE_WIDTH = 16
#: steps slurmctld creates per second (assumption: step creation is a
#: serialised RPC of the controller; 50/s is conservative, the benchmark
#: also shows 20/s)
LAUNCH_RATE = 50.0
#: seconds of communicator start-up + first all_reduce by node count at 4
#: ranks per node (torch+NCCL on Polaris, reference/anchors/
#: first_allreduce_seconds.tsv, 'first' rows); between points log-log
#: interpolation, above 512 nodes the power law of the last two points
#: (x^0.535)
STARTUP_POLARIS = ((1, 8.21732), (2, 3.36613), (4, 2.98873), (8, 3.50520),
                   (16, 4.36747), (32, 5.56126), (64, 9.13785),
                   (128, 15.50395), (256, 28.77387), (512, 41.70092))
POLARIS_RANKS_PER_NODE = 4


def startup_seconds(ranks: int) -> float:
    """Modelled start-up of a group of ``ranks`` ranks (NCCL init + first
    all_reduce), from the Polaris figures by equivalent node count."""
    x = max(1.0, ranks / POLARIS_RANKS_PER_NODE)
    pts = STARTUP_POLARIS
    if x <= pts[0][0]:
        return pts[0][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x <= x1:
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))
    (x0, y0), (x1, y1) = pts[-2], pts[-1]
    p = math.log(y1 / y0) / math.log(x1 / x0)
    return y1 * (x / x1) ** p


def allreduce_seconds(size: int, busbw: float, ranks: int,
                      iters: int = STEP_OPS) -> float:
    """Time of ``iters`` all_reduce of ``size`` bytes at ``busbw`` GB/s
    (busbw = algbw x 2(n-1)/n)."""
    if busbw <= 0 or ranks < 2:
        return 0.0
    algbw = busbw * ranks / (2.0 * (ranks - 1))
    return iters * size / (algbw * 1e9)


_TABLE = """# nThread 1 nGpus 1 minBytes {size} maxBytes {size} step: 1048576(bytes) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
{size:>12d}  {count:>12d}     float     sum      -1  {time:8.1f}  {algbw:6.2f}  {busbw:6.2f}  {wrong:>5d}  {time:8.1f}  {algbw:6.2f}  {busbw:6.2f}  {wrong:>5d}
# Out of bounds values : 0 OK
# Avg bus bandwidth    : {busbw:.4f}
#
"""


@functools.lru_cache(maxsize=4096)
def table(size: int, busbw: float, ranks: int, wrong: int = 0) -> str:
    """An nccl-tests 2.x table of one size (the simulator's output)."""
    algbw = busbw * ranks / (2.0 * max(1, ranks - 1))
    time_us = size / (algbw * 1e3) if algbw > 0 else 0.0
    return _TABLE.format(size=size, count=size // 4, time=time_us,
                         algbw=algbw, busbw=busbw, wrong=wrong)


@functools.lru_cache(maxsize=4096)
def _parsed(size, busbw, ranks, wrong):
    return nccltests.parse_text(table(size, busbw, ranks, wrong))


def _without(plan: FaultPlan, nodes) -> FaultPlan:
    return dataclasses.replace(
        plan, bad_nodes={n: f for n, f in plan.bad_nodes.items()
                         if n not in nodes})


@dataclasses.dataclass
class SimScheduler:
    plan: FaultPlan
    size: int = 1 << 30
    tasks_per_node: int = 1
    hidden: Dict[str, str] = dataclasses.field(default_factory=dict)
    hook_seconds: float = HOOK_SECONDS
    pair_fixed: float = PAIR_FIXED_SECONDS
    srun_seconds: float = SRUN_SECONDS
    launch_rate: float = LAUNCH_RATE
    max_parallel: int = 512
    grace: float = 10.0
    #: node busbw of the node check (intra-node), GB/s
    node_busbw: float = 300.0
    clock: float = 0.0
    drained: List[str] = dataclasses.field(default_factory=list)
    steps_run: int = 0
    #: the stand-in of NCCL's RAS (see above); None: not asked
    ras: Optional[Callable[[Step, Any], Any]] = None

    def __post_init__(self):
        for n, how in self.hidden.items():
            if how not in ('network', 'group'):
                raise ValueError(f'hidden.{n}: {how!r} is not network or '
                                 f'group')
        self._node_plan = _without(self.plan, set(self.hidden))
        self._pair_plan = _without(self.plan, {
            n for n, how in self.hidden.items() if how == 'group'})

    def now(self):
        return self.clock

    def _outcome(self, step: Step):
        if step.kind == 'node':
            return self._node_plan.outcome(step.nodes)
        if len(step.nodes) < 3:
            return self._pair_plan.outcome(step.nodes)
        return self.plan.outcome(step.nodes)

    def _duration(self, step: Step, kind: str, busbw: float) -> float:
        if kind == 'hang':
            return step.limit + self.grace
        ranks = len(step.nodes) * self.tasks_per_node
        if step.kind == 'node':
            return self.srun_seconds + self.hook_seconds
        start = self.pair_fixed if len(step.nodes) == 2 else \
            startup_seconds(ranks)
        ops = allreduce_seconds(self.size, busbw or self.plan.busbw, ranks)
        return self.srun_seconds + min(start + ops, step.limit)

    def run(self, steps: List[Step]) -> List[Raw]:
        start = self.clock
        slots = [start] * min(self.max_parallel, max(1, len(steps)))
        heapq.heapify(slots)
        out, end = [], start
        for i, step in enumerate(steps):
            launch = start + i / self.launch_rate
            free = heapq.heappop(slots)
            t0 = max(launch, free)
            o = self._outcome(step)
            dur = self._duration(step, o.kind, o.busbw)
            heapq.heappush(slots, t0 + dur)
            end = max(end, t0 + dur)
            out.append(self._raw(step, o, t0, dur))
            self.steps_run += 1
        self.clock = end
        return out

    def run_nodes(self, steps: List[Step]) -> List[Raw]:
        """The node check of every node as ONE step: one launch through
        the fan-out tree; the step lasts until its slowest node (a hanging
        node: until the bound)."""
        start = self.clock
        n = len(steps)
        launch = self.srun_seconds * max(1, math.ceil(
            math.log(max(n, 2)) / math.log(TREE_WIDTH)))
        outs = [self._node_plan.outcome(s.nodes) for s in steps]
        limit = max(s.limit for s in steps)
        hang = any(o.kind == 'hang' for o in outs)
        end = start + (limit + self.grace if hang else
                       launch + self.hook_seconds)
        raws = []
        for step, o in zip(steps, outs):
            self.steps_run += 1
            if o.kind == 'hang':
                raws.append(Raw(step, None, killed=True, started=start,
                                seconds=end - start))
            else:
                raws.append(self._raw(step, o, start, end - start))
        self.clock = end
        return raws

    def _raw(self, step, o, t0, dur):
        if o.kind == 'hang':
            asked = self.ras(step, o) if self.ras is not None and \
                step.kind != 'node' else None
            return Raw(step, None, killed=True, started=t0, seconds=dur,
                       ras=asked)
        if step.kind == 'node':
            if o.kind == 'ok':
                bw = self.node_busbw * o.busbw / self.plan.busbw
                line = f'HEALTHY: all_reduce 1G {bw:.1f} GB/s (simulated)'
                doc = {'code': 0, 'verdict': 'pass', 'line': line,
                       'probes': [{'busbw': bw}]}
                return Raw(step, 0, line + '\n', doc=doc, started=t0,
                           seconds=dur)
            verdict = {'crash': 'crash', 'wrong': 'wrong-results',
                       'slow': 'below-reference'}[o.kind]
            line = f'UNHEALTHY: {verdict}: {o.why} (simulated)'
            doc = {'code': 1, 'verdict': verdict, 'line': line, 'probes': []}
            return Raw(step, 1, line + '\n', doc=doc, started=t0,
                       seconds=dur)
        ranks = len(step.nodes) * self.tasks_per_node
        if o.kind == 'crash':
            return Raw(step, 1, '', stderr=f'NCCL error: {o.why}\n',
                       started=t0, seconds=dur,
                       result=nccltests.parse_text(
                           f'# NCCL error: remote process exited ({o.why})'
                           f'\n'))
        wrong = 1024 if o.kind == 'wrong' else 0
        res = _parsed(self.size, round(o.busbw, 2), ranks, wrong)
        return Raw(step, 0, '', started=t0, seconds=dur, result=res)

    def drain(self, nodes, reasons):
        self.drained.extend(nodes)
        return list(nodes), {}
