"""``scripts/fleet --resume``: back to service (issue 24).

Only nodes whose Slurm reason starts with ``ccl-health:`` are touched
(never a node drained by a person or another tool).  Each is re-checked:
its node check, then a pair step with a healthy partner.  A drained node
takes no job, so the check runs inside a maintenance reservation of this
user (``scontrol create reservation ... Flags=MAINT,IGNORE_JOBS``) over the
nodes and the partner: the nodes are resumed into it (no other job can
land on them), checked with ``srun --reservation``, and drained again
unless this was their last required pass; the reservation is deleted at
the end whatever happens.

A node is resumed after ``fleet.resume_passes`` consecutive passing
checks (default 2: one per ``--resume`` run); before that it is drained
again with ``(passed k of N checks)``; a node that fails again stays
drained with ``(failed again, F of C checks)``; a node whose check could
not be judged keeps its reason and its count.  The counts and every
step (drain, check, resume) are kept in ``<output>/fleet/nodes.json``
(:func:`load_state`); every check is recorded in the database.
"""

import datetime
import json
import os
import re
import sys
import time
from typing import Dict, List, Optional, Tuple

from ccl_health import CclHealthError
from ccl_health.judge.verdicts import Verdict

PREFIX = 'ccl-health:'
STATE = 'nodes.json'
#: the suffix a resume run adds to a reason (taken off before adding it
#: again)
_SUFFIX = re.compile(r'\s*\((passed \d+ of \d+ checks|failed again, \d+ of '
                     r'\d+ checks?)\)\s*$')
#: seconds to wait for resumed nodes to answer (sinfo lists a node
#: ``idle*``, not responding, for about a second after state=resume)
READY_WAIT = 20.0


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def base_reason(reason: str) -> str:
    """A ccl-health reason without what an earlier resume run added."""
    return _SUFFIX.sub('', reason or '').strip()


def action_of(reason: str) -> str:
    """The action a drain reason names (``ccl-health: isolate: ...``)."""
    m = re.match(r'ccl-health:\s*(isolate|reset|monitor)\b', reason or '')
    return m.group(1) if m else ''


def parse_sinfo_reasons(text: str) -> Tuple[Dict[str, str], Dict[str, str]]:
    """``sinfo -h -N -o '%N|%t|%E'`` as (``{node: reason}`` of the nodes
    drained by ccl-health, ``{node: why left alone}`` of the other drained
    or draining nodes)."""
    ours, others = {}, {}
    for line in text.splitlines():
        parts = line.split('|', 2)
        if len(parts) < 3:
            continue
        node, state, reason = (p.strip() for p in parts)
        state = state.lower().rstrip('*~#!%$@^-')
        if not state.startswith(('drain', 'drng')):
            continue
        if not reason.startswith(PREFIX):
            others[node] = f'drained with another reason: {reason!r}'
        elif state != 'drain':
            others[node] = (f'{state}: still running a job (checked by a '
                            f'later --resume)')
        else:
            ours[node] = reason
    return ours, others


# -- the state file --------------------------------------------------------------

def state_path(output_dir: str) -> str:
    return os.path.join(output_dir, 'fleet', STATE)


def load_state(output_dir: str) -> dict:
    """``{node: {'passes', 'checks', 'fails', 'events': [{time, event,
    reason}]}}`` (events: drain, pass, fail, could-not-check, resume)."""
    try:
        with open(state_path(output_dir)) as fp:
            doc = json.load(fp)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def save_state(output_dir: str, state: dict):
    path = state_path(output_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as fp:
        json.dump(state, fp, indent=1, sort_keys=True)
    os.replace(tmp, path)


def note(state: dict, node: str, event: str, reason: str = '',
         when: Optional[str] = None):
    ent = state.setdefault(node, {'passes': 0, 'checks': 0, 'fails': 0,
                                  'events': []})
    ent['events'].append({'time': when or _now(), 'event': event,
                          'reason': reason})
    return ent


def note_drains(output_dir: str, reasons: Dict[str, str]):
    """A fleet run drained these nodes: a new drain starts a new count."""
    state = load_state(output_dir)
    for n, why in reasons.items():
        ent = note(state, n, 'drain', why)
        ent.update(passes=0, checks=0, fails=0)
    save_state(output_dir, state)


# -- the run ---------------------------------------------------------------------

def _outcome(node_j, pair_j):
    """``(event, why)`` of one node's re-check."""
    if node_j.verdict.failed:
        return 'fail', f'node check: {node_j.reason}'
    if not node_j.ok:
        return 'could-not-check', f'node check: {node_j.reason}'
    if pair_j is None:
        return 'could-not-check', 'no healthy partner for the pair step'
    if pair_j.verdict.failed:
        return 'fail', f'pair with {pair_j.step.nodes[1]}: {pair_j.reason}'
    if not pair_j.ok:
        return 'could-not-check', (f'pair with {pair_j.step.nodes[1]}: '
                                   f'{pair_j.reason}')
    return 'pass', (f'node check and pair with {pair_j.step.nodes[1]} '
                    f'passed')


class Resume:
    """One ``--resume`` run.  ``slurm``: the module (or a stand-in) with
    ``_run``, ``partition_nodes``, ``drain`` and ``resume``;
    ``make_scheduler(reservation)`` gives the step scheduler."""

    def __init__(self, cfg, output_dir, partition=None, nodelist=None,
                 slurm=None, make_scheduler=None, log=None):
        if slurm is None:
            from ccl_health.fleet import slurm
        self.slurm = slurm
        self.cfg = cfg
        self.output_dir = output_dir
        self.partition = partition
        self.nodelist = nodelist
        self.make_scheduler = make_scheduler
        self.log = log or (lambda t: print(t, file=sys.stderr, flush=True))

    def candidates(self):
        cmd = ['sinfo', '-h', '-N', '-o', '%N|%t|%E']
        if self.partition:
            cmd += ['-p', self.partition]
        if self.nodelist:
            cmd += ['-n', self.nodelist]
        return parse_sinfo_reasons(self.slurm._run(cmd))

    def _wait_ready(self, nodes):
        deadline = time.monotonic() + READY_WAIT
        while True:
            text = self.slurm._run(['sinfo', '-h', '-N', '-o', '%N %t',
                                    '-n', ','.join(nodes)])
            states = dict(l.split()[:2] for l in text.splitlines()
                          if len(l.split()) >= 2)
            ready = [n for n in nodes
                     if states.get(n, '') in ('maint', 'resv', 'idle',
                                              'mix', 'alloc')]
            if len(ready) == len(nodes) or time.monotonic() > deadline:
                return ready
            time.sleep(0.3)

    def run(self) -> dict:
        from ccl_health.fleet.run import Judged, judge_node, judge_step, Step
        cfg = self.cfg
        ours, others = self.candidates()
        state = load_state(self.output_dir)
        summary = {'mode': 'resume', 'candidates': dict(sorted(ours.items())),
                   'left_alone': dict(sorted(others.items())),
                   'resumed': [], 'kept': {}, 'rounds': [],
                   'nodes_checked': len(ours), 'healthy': [], 'bad': {},
                   'suspect_links': [], 'suspect_groups': [],
                   'stragglers': {}, 'could_not_check': {},
                   'not_checked': {}, 'drained': [], 'seconds': 0.0}
        t0 = time.monotonic()
        if not ours:
            self.log('fleet --resume: no node drained by ccl-health')
            return summary
        usable, _ = self.slurm.partition_nodes(self.partition, None)
        partners = [n for n in usable if n not in ours]
        partner = partners[0] if partners else None
        nodes = sorted(ours)
        resv = f'ccl-health-resume-{os.getpid()}'
        user = os.environ.get('USER') or os.environ.get('LOGNAME') or 'root'
        minutes = max(2, int((cfg.node_limit + cfg.round_limit * len(nodes)
                              + 4 * cfg.grace) / 60) + 2)
        self.log(f'fleet --resume: {len(nodes)} node(s) drained by '
                 f'ccl-health: {", ".join(nodes)}; partner '
                 f'{partner or "none"}; {len(others)} other drained node(s) '
                 f'left alone')
        self.slurm._run(['scontrol', 'create', 'reservation',
                         f'ReservationName={resv}', 'StartTime=now',
                         f'Duration={minutes}',
                         f'Nodes={",".join(nodes + ([partner] if partner else []))}',
                         f'Users={user}', 'Flags=MAINT,IGNORE_JOBS'])
        results = {}
        try:
            self.slurm.resume(nodes)
            ready = self._wait_ready(nodes + ([partner] if partner else []))
            if partner and partner not in ready:
                partner = None
            sched = self.make_scheduler(resv)
            check = [n for n in nodes if n in ready]
            for n in nodes:
                if n not in ready:
                    results[n] = ('could-not-check', 'did not answer after '
                                  'state=resume')
            node_js = {}
            if check:
                steps = [Step('node', (n,), cfg.limit('node', 1))
                         for n in check]
                raws = sched.run(steps)
                js = []
                for raw in raws:
                    v, why, bw = judge_node(raw, raw.step.limit)
                    j = Judged(raw.step, v, why, bw, raw.started, raw.seconds)
                    node_js[raw.step.nodes[0]] = j
                    js.append(j)
                summary['rounds'].append(self._round('resume-nodes', 'node',
                                                     js))
            for n in check:
                pair_j = None
                if node_js[n].ok and partner:
                    step = Step('pair', (n, partner), cfg.limit('pair', 2))
                    raw = sched.run([step])[0]
                    v, why, bw = judge_step(raw, cfg.size_bytes, step.limit)
                    pair_j = Judged(step, v, why, bw, raw.started,
                                    raw.seconds)
                    summary['rounds'].append(self._round(
                        f'resume-pair-{n}', 'pair', [pair_j]))
                results[n] = _outcome(node_js[n], pair_j)
        finally:
            self._settle(ours, results, state, summary)
            try:
                self.slurm._run(['scontrol', 'delete',
                                 f'ReservationName={resv}'])
            except CclHealthError as err:
                self.log(f'fleet --resume: (reservation {resv} not deleted: '
                         f'{err})')
            save_state(self.output_dir, state)
        summary['seconds'] = round(time.monotonic() - t0, 3)
        summary['timeline'] = {n: state[n]['events'] for n in sorted(state)}
        return summary

    @staticmethod
    def _round(name, kind, js):
        return {'name': name, 'kind': kind, 'steps': len(js),
                'started': 0.0, 'seconds': round(max(
                    [j.seconds for j in js] or [0.0]), 3),
                'results': [j.to_dict() for j in js]}

    def _settle(self, ours, results, state, summary):
        """Resume the nodes at their last required pass; drain the others
        again with the count (a node never checked keeps its reason)."""
        need = int(self.cfg.resume_passes)
        keep = {}
        for n in sorted(ours):
            base = base_reason(ours[n])
            event, why = results.get(n, ('could-not-check',
                                         'the run stopped before its check'))
            ent = note(state, n, event, why)
            if not any(e['event'] == 'drain' for e in ent['events']):
                ent['events'].insert(0, {'time': '', 'event': 'drain',
                                         'reason': ours[n]})
            if event == 'pass':
                ent['passes'] += 1
                ent['checks'] += 1
                if ent['passes'] >= need:
                    note(state, n, 'resume', f'{ent["passes"]} of {need} '
                         f'consecutive checks passed')
                    summary['resumed'].append(n)
                    summary['healthy'].append(n)
                    ent.update(passes=0, checks=0, fails=0)
                    continue
                keep[n] = f'{base} (passed {ent["passes"]} of {need} checks)'
                summary['healthy'].append(n)
            elif event == 'fail':
                ent['passes'] = 0
                ent['checks'] += 1
                ent['fails'] += 1
                keep[n] = (f'{base} (failed again, {ent["fails"]} of '
                           f'{ent["checks"]} checks)')
                summary['bad'][n] = why
            else:
                keep[n] = ours[n]
                summary['could_not_check'][n] = why
        if keep:
            drained, errors = self.slurm.drain(sorted(keep), keep)
            summary['kept'] = {n: keep[n] for n in drained}
            if errors:
                summary['drain_errors'] = errors
                self.log(f'fleet --resume: could not drain again: {errors}')


def exit_code(summary) -> int:
    """0: every node checked passed (resumed or one pass nearer); 1: a
    node failed again; 2: a node could not be checked."""
    if summary['bad']:
        return 1
    if summary['could_not_check']:
        return 2
    return 0


def summary_text(summary, path=None) -> str:
    s = summary
    lines = [f'fleet --resume: {len(s["candidates"])} node(s) drained by '
             f'ccl-health, {len(s["resumed"])} resumed, {len(s["kept"])} '
             f'kept drained, {len(s["left_alone"])} other drained node(s) '
             f'left alone']
    for n in s['resumed']:
        lines.append(f'  RESUMED {n}')
    for n, why in s['kept'].items():
        lines.append(f'  KEPT {n}: {why}')
    for n, why in s['bad'].items():
        lines.append(f'  FAILED AGAIN {n}: {why}')
    for n, why in s['could_not_check'].items():
        lines.append(f'  COULD-NOT-CHECK {n}: {why}')
    for n, why in s['left_alone'].items():
        lines.append(f'  LEFT ALONE {n}: {why}')
    if path:
        lines.append(f'  summary: {path}')
    return '\n'.join(lines)
