"""``scripts/fleet --resume``: back to service (issue 24).

Only nodes whose Slurm reason starts with ``ccl-health:`` are touched
(never a node drained by a person or another tool).  Each is re-checked:
its node check, then a pair step with a partner: an idle node (sinfo
``idle``, never alloc / mix / comp / drain / down) whose last check
passed (``last_check`` in the state file: a fleet run's or a resume's).
With no such node the pair check is skipped and the node stays drained,
its reason saying so.  A drained node takes no job, so the check runs
inside a maintenance reservation of this user (``scontrol create
reservation ... Flags=MAINT``; no IGNORE_JOBS: a partner that took a job
meanwhile makes it fail, and it is made again without the partner) over
the nodes and the partner: the nodes are resumed into it (no other job can
land on them), checked with ``srun --reservation``, and drained again
unless this was their last required pass.  Before deciding, the run waits
for every job of its steps to leave the queue (Slurm's completing
included: a node drained while its job completes reads ``drng``, and the
next resume would leave it alone).

A node is back in service only after its checks passed.  A stop
(SIGTERM, SIGHUP, SIGINT; Slurm's time limit is SIGTERM, then SIGKILL
after KillWait, so it is acted on at once) drains the nodes under check
again at once, ``<reason> (resume stopped by SIGTERM before its checks
passed)``, writes the state, cancels the steps (``scancel
--reservation``; the sruns are stopped and waited for), waits for them,
deletes the reservation, and the command exits 128 + the signal.  A second
stop during that cleanup cuts nothing short.  The sruns get SIGTERM when
this process dies, even by SIGKILL.

One resume at a time per partition: a lock file ``<output>/fleet/
resume-<partition>.lock`` (never followed through a link, never another
user's); a second resume is skipped at once with one line, exit 3 (a
resume is minutes long and runs from cron or a job: waiting would pile
them up).  The state file is changed under its own lock, read again and
added to, so no run's events are lost to another's.

A node is resumed after ``fleet.resume_passes`` consecutive passing
checks (default 2: one per ``--resume`` run); before that it is drained
again with ``(passed k of N checks)``; a node that fails again stays
drained with ``(failed again, F of C checks)``; a node whose check could
not be judged keeps its reason and its count.  The counts and every
step (drain, check, resume) are kept in ``<output>/fleet/nodes.json``
(:func:`load_state`); every check is recorded in the database.
"""

import contextlib
import os
import re
import signal
import socket
import sys
import time
from typing import Dict, Optional, Tuple

from ccl_health import CclHealthError
from ccl_health.fleet.resumestate import (drop_intent, last_check,
                                          load_intent, load_state, lock_path,
                                          locked, note, save_intent,
                                          timeline, update_state)
from ccl_health.stops import Stopped, held

PREFIX = 'ccl-health:'
#: what a resume run adds to a reason (taken off before adding it again)
_SUFFIX = re.compile(r'\s*\((passed \d+ of \d+ checks|failed again, \d+ of '
                     r'\d+ checks?|resume stopped by SIG[A-Z]+ before its '
                     r'checks passed|resume killed before its checks '
                     r'passed|pair check skipped: [^()]*)\)\s*$')
#: the reason's addition for a node an earlier resume left in service
#: unchecked (it was killed: SIGKILL cannot be acted on)
KILLED_NOTE = 'resume killed before its checks passed'
#: Slurm's answer to deleting a reservation that is not there (any more)
_NO_RESERVATION = re.compile(r'invalid reservation|not found', re.I)
#: the reason's addition for a node whose pair check had no partner
NO_PARTNER = ('pair check skipped: no idle node that passed its last '
              'check')
#: seconds to wait for resumed nodes to answer (sinfo lists a node
#: ``idle*``, not responding, for about a second after state=resume)
READY_WAIT = 20.0
#: a bound on the wait for the jobs of the steps to leave the queue after
#: their sruns ended or were cancelled (Slurm's completing: the epilog and
#: KillWait, 30 s by default); what is still there is said
JOBS_WAIT = 60.0
#: ``exit_code`` of a resume skipped for another one (as the nightly's)
EXIT_SKIPPED = 3


def base_reason(reason: str) -> str:
    """A ccl-health reason without what an earlier resume run added."""
    return _SUFFIX.sub('', reason or '').strip()


def finish_unfinished(output_dir, partition, slurm, log) -> dict:
    """An earlier resume of ``partition`` that was killed
    (:func:`ccl_health.fleet.resumestate.load_intent`): each node it had
    put back into service and not decided is drained again (``<reason>
    (resume killed before its checks passed)``), its reservation deleted,
    the intent removed.  Call it holding the partition's resume lock (a
    live resume holds it, so what is found is unfinished).  Returns
    ``{'drained': [...], 'reservation': name, 'errors': {...}}`` or {}."""
    intent = load_intent(output_dir, partition)
    if not intent:
        return {}
    nodes = dict(intent.get('nodes') or {}) if intent.get('resumed') else {}
    out = {'drained': [], 'reservation': intent.get('reservation') or '',
           'errors': {}}
    if nodes:
        why = {n: f'{base_reason(r)} ({KILLED_NOTE})' for n, r in
               nodes.items()}
        drained, errors = slurm.drain(sorted(nodes), why)
        out['drained'], out['errors'] = sorted(drained), dict(errors)

        def change(state):
            for n in drained:
                note(state, n, 'could-not-check', KILLED_NOTE)
                last_check(state, n, 'could-not-check', KILLED_NOTE)
        update_state(output_dir, change)
        left = {n: r for n, r in nodes.items() if n in errors}
        save_intent(output_dir, partition, dict(intent, nodes=left))
        if left:
            log(f'fleet --resume: an earlier resume was killed; could not '
                f'drain again: {errors}')
            return out
    resv = intent.get('reservation')
    if resv:
        try:
            slurm._run(['scontrol', 'delete', f'ReservationName={resv}'])
        except CclHealthError as err:
            if not _NO_RESERVATION.search(str(err)):
                out['errors'][resv] = str(err)
                log(f'fleet --resume: the reservation {resv} of a killed '
                    f'resume was not deleted: {err}')
                return out
    drop_intent(output_dir, partition)
    log(f'fleet --resume: an earlier resume (pid {intent.get("pid")} on '
        f'{intent.get("host")}, {intent.get("started")}) was killed before '
        f'it finished: drained again {", ".join(out["drained"]) or "none"}'
        f'{"; its reservation " + resv + " removed" if resv else ""}')
    return out


def stopped_note(signame: str) -> str:
    return f'resume stopped by {signame} before its checks passed'


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


def parse_states(text: str) -> Dict[str, str]:
    """``sinfo -h -N -o '%N %t'`` as ``{node: state}`` (as sinfo writes
    it, flags included: ``idle*`` is an idle node not responding)."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out.setdefault(parts[0], parts[1].lower())
    return out


def choose_partner(states: Dict[str, str], state: dict, ours) -> \
        Tuple[Optional[str], str]:
    """``(partner, '')`` or ``(None, why)``: the first node (by name) that
    sinfo lists plain ``idle`` (a user's job is never reserved over; a
    completing, drained, down or unresponding node never checks another)
    and whose last check passed."""
    idle = sorted(n for n, s in states.items() if s == 'idle'
                  and n not in ours)
    passed = [n for n in idle
              if (state.get(n, {}).get('last_check') or {}).get('outcome')
              == 'pass']
    if passed:
        return passed[0], ''
    if idle:
        return None, (f'no partner for the pair check: no idle node passed '
                      f'its last check ({len(idle)} idle, none with a '
                      f'passing check on record)')
    return None, 'no partner for the pair check: no other node is idle'


# -- the run -----------------------------------------------------------------

def _outcome(node_j, pair_j, no_pair=''):
    """``(event, why, addition to the reason or None)`` of one node's
    re-check."""
    if node_j.verdict.failed:
        return 'fail', f'node check: {node_j.reason}', None
    if not node_j.ok:
        return 'could-not-check', f'node check: {node_j.reason}', None
    if pair_j is None:
        return 'could-not-check', no_pair or 'no partner for the pair step', \
            NO_PARTNER
    if pair_j.verdict.failed:
        return 'fail', f'pair with {pair_j.step.nodes[1]}: {pair_j.reason}', \
            None
    if not pair_j.ok:
        return 'could-not-check', (f'pair with {pair_j.step.nodes[1]}: '
                                   f'{pair_j.reason}'), None
    return 'pass', (f'node check and pair with {pair_j.step.nodes[1]} '
                    f'passed'), None


class Resume:
    """One ``--resume`` run.  ``slurm``: the module (or a stand-in) with
    ``_run``, ``drain`` and ``resume``; ``make_scheduler(reservation)``
    gives the step scheduler; ``stops``: a :class:`ccl_health.stops.Held`
    of the caller (else the run holds the stops itself)."""

    def __init__(self, cfg, output_dir, partition=None, nodelist=None,
                 slurm=None, make_scheduler=None, log=None, stops=None,
                 site=None):
        if slurm is None:
            from ccl_health.fleet import slurmsteps as slurm
        self.slurm = slurm
        self.cfg = cfg
        self.output_dir = output_dir
        self.partition = partition
        self.nodelist = nodelist
        self.make_scheduler = make_scheduler
        self.log = log or (lambda t: print(t, file=sys.stderr, flush=True))
        self.stops = stops
        #: the site: its benign WARNs and ceilings judge the pair check
        self.site = site
        #: the nodes resumed into the reservation (drained again on a stop)
        self.under_check = set()
        #: what this run is doing, kept durably (resumestate.save_intent)
        self.intent = {}
        #: nodes put back into service and neither resumed for good nor
        #: drained again yet: a later run drains them if this one dies
        self._undecided = {}

    def _sinfo(self, fmt):
        cmd = ['sinfo', '-h', '-N', '-o', fmt]
        if self.partition:
            cmd += ['-p', self.partition]
        if self.nodelist and '%E' in fmt:
            cmd += ['-n', self.nodelist]
        return self.slurm._run(cmd)

    def candidates(self):
        return parse_sinfo_reasons(self._sinfo('%N|%t|%E'))

    def _wait_ready(self, nodes, stops):
        deadline = time.monotonic() + READY_WAIT
        while True:
            text = self.slurm._run(['sinfo', '-h', '-N', '-o', '%N %t',
                                    '-n', ','.join(nodes)])
            states = parse_states(text)
            ready = [n for n in nodes
                     if states.get(n, '') in ('maint', 'resv', 'idle',
                                              'mix', 'alloc')]
            if len(ready) == len(nodes) or time.monotonic() > deadline:
                return ready
            time.sleep(0.3)
            stops.check()

    def _jobs(self, resv):
        """The job ids in the reservation (running or completing)."""
        try:
            text = self.slurm._run(['squeue', '-h', '-R', resv, '-o', '%i'])
        except CclHealthError as err:
            self.log(f'fleet --resume: (squeue: {err})')
            return []
        return text.split()

    def _wait_jobs(self, resv, stops=None):
        """Until no job of ours is in the reservation (bounded by
        :data:`JOBS_WAIT`; a stop ends the wait early when ``stops``)."""
        deadline = time.monotonic() + JOBS_WAIT
        while True:
            jobs = self._jobs(resv)
            if not jobs:
                return True
            if time.monotonic() > deadline:
                self.log(f'fleet --resume: jobs still in {resv} after '
                         f'{JOBS_WAIT:.0f} s: {" ".join(jobs)}')
                return False
            if stops:
                return False
            time.sleep(0.3)

    def _reserve(self, resv, nodes, partner, minutes):
        """The reservation over ``nodes`` and ``partner``; the partner
        that is in it (None when a job took it meanwhile: made again
        without)."""
        user = os.environ.get('USER') or os.environ.get('LOGNAME') or 'root'
        for p in ([partner, None] if partner else [None]):
            names = ','.join(nodes + ([p] if p else []))
            try:
                self.slurm._run(['scontrol', 'create', 'reservation',
                                 f'ReservationName={resv}', 'StartTime=now',
                                 f'Duration={minutes}', f'Nodes={names}',
                                 f'Users={user}', 'Flags=MAINT'])
                return p
            except CclHealthError as err:
                if p is None:
                    raise
                self.log(f'fleet --resume: partner {p} not reserved ({err}); '
                         f'without a partner')
        return None

    def run(self) -> dict:
        summary = {'mode': 'resume', 'candidates': {}, 'left_alone': {},
                   'resumed': [], 'kept': {}, 'rounds': [],
                   'nodes_checked': 0, 'healthy': [], 'bad': {},
                   'suspect_links': [], 'suspect_groups': [],
                   'stragglers': {}, 'could_not_check': {},
                   'not_checked': {}, 'drained': [], 'seconds': 0.0}
        t0 = time.monotonic()
        with contextlib.ExitStack() as stack:
            stops = self.stops if self.stops is not None else \
                stack.enter_context(held())
            path = lock_path(self.output_dir, self.partition)
            if not stack.enter_context(locked(path, wait=False)):
                summary['skipped'] = (f'another --resume of '
                                      f'{self.partition or "all partitions"}'
                                      f' holds {path}')
                return summary
            try:
                self._run(summary, stops)
            except Stopped as s:
                summary['stopped'] = s.name
            except CclHealthError as err:
                if not stops:
                    raise
                # a Slurm command that the stop reached too: the stop
                # was cleaned up after all the same
                summary['error'] = str(err)
            if stops and 'stopped' not in summary:
                summary['stopped'] = Stopped(stops.first).name
        summary['seconds'] = round(time.monotonic() - t0, 3)
        return summary

    # long: one resume: its checks, their state and locks, in the order they
    # run
    def _run(self, summary, stops):
        from ccl_health.fleet.rounds import Judged, judge_node, judge_step, Step
        cfg = self.cfg
        stops.check()
        found = finish_unfinished(self.output_dir, self.partition,
                                  self.slurm, self.log)
        if found:
            summary['unfinished'] = found
        ours, others = self.candidates()
        summary.update(candidates=dict(sorted(ours.items())),
                       left_alone=dict(sorted(others.items())),
                       nodes_checked=len(ours))
        if not ours:
            self.log('fleet --resume: no node drained by ccl-health')
            return
        partner, no_pair = choose_partner(parse_states(self._sinfo('%N %t')),
                                          load_state(self.output_dir), ours)
        nodes = sorted(ours)
        resv = f'ccl-health-resume-{os.getpid()}'
        minutes = max(2, int((cfg.node_limit + cfg.round_limit * len(nodes)
                              + 4 * cfg.grace) / 60) + 2)
        self.log(f'fleet --resume: {len(nodes)} node(s) drained by '
                 f'ccl-health: {", ".join(nodes)}; partner '
                 f'{partner or "none (" + no_pair + ")"}; {len(others)} '
                 f'other drained node(s) left alone')
        results = {}
        stops.check()
        intent = {'reservation': resv, 'nodes': dict(ours), 'resumed': False,
                  'pid': os.getpid(), 'host': socket.gethostname(),
                  'started': time.strftime('%Y-%m-%dT%H:%M:%S%z')}
        save_intent(self.output_dir, self.partition, intent)
        self.intent = intent
        reserved = self._reserve(resv, nodes, partner, minutes)
        if partner and not reserved:
            no_pair = f'no partner for the pair check: {partner} took a job'
        partner = reserved
        try:
            stops.check()
            save_intent(self.output_dir, self.partition,
                        dict(intent, resumed=True))
            self.intent = dict(intent, resumed=True)
            self.under_check.update(nodes)
            self.slurm.resume(nodes)
            stops.check()
            ready = self._wait_ready(nodes + ([partner] if partner else []),
                                     stops)
            if partner and partner not in ready:
                no_pair = (f'no partner for the pair check: {partner} did not '
                           f'answer')
                partner = None
            sched = self.make_scheduler(resv)
            sched.check_stop = stops.check
            check = [n for n in nodes if n in ready]
            for n in nodes:
                if n not in ready:
                    results[n] = ('could-not-check', 'did not answer after '
                                  'state=resume', None)
            node_js = {}
            if check:
                steps = [Step('node', (n,), cfg.limit('node', 1))
                         for n in check]
                js = []
                for raw in sched.run(steps):
                    v, why, bw = judge_node(raw, raw.step.limit)
                    j = Judged(raw.step, v, why, bw, raw.started, raw.seconds)
                    node_js[raw.step.nodes[0]] = j
                    js.append(j)
                summary['rounds'].append(self._round('resume-nodes', 'node',
                                                     js))
            for n in check:
                stops.check()
                pair_j = None
                if node_js[n].ok and partner:
                    step = Step('pair', (n, partner), cfg.limit('pair', 2))
                    raw = sched.run([step])[0]
                    v, why, bw = judge_step(raw, cfg.size_bytes, step.limit,
                                            cfg, self.site)
                    pair_j = Judged(step, v, why, bw, raw.started,
                                    raw.seconds)
                    summary['rounds'].append(self._round(
                        f'resume-pair-{n}', 'pair', [pair_j]))
                results[n] = _outcome(node_js[n], pair_j, no_pair)
        finally:
            self._end(ours, results, summary, resv, partner, stops)

    def _end(self, ours, results, summary, resv, partner, stops):
        """The steps end before anything is decided; on a stop the nodes
        under check are drained first (Slurm's SIGKILL may follow), then
        the steps are cancelled and waited for; the reservation goes."""
        if not stops:
            self._wait_jobs(resv, stops)
        self._settle(ours, results, summary, partner, stops)
        if stops:
            try:
                self.slurm._run(['scancel', '-R', resv])
            except CclHealthError as err:
                self.log(f'fleet --resume: ({err})')
        self._wait_jobs(resv)
        try:
            self.slurm._run(['scontrol', 'delete', f'ReservationName={resv}'])
        except CclHealthError as err:
            self.log(f'fleet --resume: (reservation {resv} not deleted: '
                     f'{err})')
            summary['reservation_left'] = f'{resv}: {err}'
            return          # the intent keeps it: the next run deletes it
        if self._undecided:     # not drained again: the next run tries
            save_intent(self.output_dir, self.partition,
                        dict(self.intent, nodes=self._undecided,
                             reservation=''))
        else:
            drop_intent(self.output_dir, self.partition)

    @staticmethod
    def _round(name, kind, js):
        return {'name': name, 'kind': kind, 'steps': len(js),
                'started': 0.0, 'seconds': round(max(
                    [j.seconds for j in js] or [0.0]), 3),
                'results': [j.to_dict() for j in js]}

    def _settle(self, ours, results, summary, partner, stops):
        """Resume the nodes at their last required pass; drain the others
        again with the count (a node never checked keeps its reason; one
        under check when a stop came says so).  The state is changed under
        its lock, read again (another run's events are kept)."""
        if stops:
            why = stopped_note(Stopped(stops.first).name)
            missing = ('could-not-check', why, why)
        else:
            missing = ('could-not-check', 'the run stopped before its check',
                       None)
        decided = {}

        def change(state):
            decided.update(self._decide(ours, results, state, missing))
            if partner and any(r[0] == 'pass' for r in results.values()):
                last_check(state, partner, 'pass', 'partner of a passing '
                           'pair check')
        update_state(self.output_dir, change)
        keep = {}
        for n, (kind, why) in decided.items():
            if kind == 'resume':
                summary['resumed'].append(n)
                summary['healthy'].append(n)
                continue
            if kind == 'pass':
                summary['healthy'].append(n)
            elif kind == 'fail':
                summary['bad'][n] = results[n][1]
            else:
                summary['could_not_check'][n] = results.get(n, missing)[1]
            if n in self.under_check:
                keep[n] = why
            else:                       # never resumed: drained as it was
                summary['kept'][n] = ours[n]
        if keep:
            drained, errors = self.slurm.drain(sorted(keep), keep)
            if errors:                  # once more: each is in service now
                again, errors = self.slurm.drain(sorted(errors), keep)
                drained += again
            summary['kept'].update({n: keep[n] for n in drained})
            if errors:
                summary['drain_errors'] = errors
                self.log(f'fleet --resume: could not drain again: {errors}')
        self._undecided = {n: ours[n] for n in sorted(self.under_check)
                           if n not in summary['resumed']
                           and n not in summary['kept']}
        if self.intent:
            save_intent(self.output_dir, self.partition,
                        dict(self.intent, nodes=self._undecided))
        summary['timeline'] = timeline(load_state(self.output_dir))

    def _decide(self, ours, results, state, missing):
        """``{node: (kind, reason now)}``: kind resume, pass (one pass
        nearer), fail or could-not-check; the events into ``state``."""
        need = int(self.cfg.resume_passes)
        out = {}
        for n in sorted(ours):
            base = base_reason(ours[n])
            event, why, addition = results.get(n, missing)
            ent = note(state, n, event, why)
            if not any(e['event'] == 'drain' for e in ent['events']):
                ent['events'].insert(0, {'time': '', 'event': 'drain',
                                         'reason': ours[n]})
            if n in self.under_check:
                last_check(state, n, event, why)
            if event == 'pass':
                ent['passes'] += 1
                ent['checks'] += 1
                if ent['passes'] >= need:
                    note(state, n, 'resume', f'{ent["passes"]} of {need} '
                         f'consecutive checks passed')
                    ent.update(passes=0, checks=0, fails=0)
                    out[n] = ('resume', '')
                    continue
                out[n] = ('pass',
                          f'{base} (passed {ent["passes"]} of {need} checks)')
            elif event == 'fail':
                ent['passes'] = 0
                ent['checks'] += 1
                ent['fails'] += 1
                out[n] = ('fail', f'{base} (failed again, {ent["fails"]} of '
                                  f'{ent["checks"]} checks)')
            else:
                out[n] = ('could-not-check',
                          f'{base} ({addition})' if addition else ours[n])
        return out


def exit_code(summary) -> int:
    """128 + the signal: the run was stopped (the nodes under check drained
    again); 3: skipped, another resume runs; 1: a node failed again; 2: a
    node could not be checked, or could not be drained again."""
    if summary.get('stopped'):
        return 128 + int(signal.Signals[summary['stopped']])
    if summary.get('skipped'):
        return EXIT_SKIPPED
    if summary['bad']:
        return 1
    if summary['could_not_check'] or summary.get('drain_errors') or \
            summary.get('reservation_left'):
        return 2
    return 0


def summary_text(summary, path=None) -> str:
    s = summary
    if s.get('skipped'):
        return f'fleet --resume: skipped: {s["skipped"]}'
    lines = [f'fleet --resume: {len(s["candidates"])} node(s) drained by '
             f'ccl-health, {len(s["resumed"])} resumed, {len(s["kept"])} '
             f'kept drained, {len(s["left_alone"])} other drained node(s) '
             f'left alone']
    if s.get('stopped'):
        lines.append(f'  STOPPED by {s["stopped"]}: every node under check '
                     f'that had not passed is drained again')
    for n, err in (s.get('drain_errors') or {}).items():
        lines.append(f'  NOT DRAINED AGAIN {n}: {err}')
    if s.get('reservation_left'):
        lines.append(f'  RESERVATION LEFT {s["reservation_left"]}')
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
