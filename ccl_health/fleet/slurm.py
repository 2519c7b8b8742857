"""The Slurm scheduler of a fleet acceptance: every step a Slurm job step
(``srun``) inside one allocation, the steps of a round side by side, each
bounded twice (``srun --time`` on Slurm's side, and here: the srun is
stopped at its limit + grace, so a hang never waits), node lists expanded
by ``scontrol show hostnames``, a partition's usable nodes from ``sinfo``,
and ``--drain`` through ``scontrol update``."""

import json
import math
import os
import signal
import subprocess
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .. import CclHealthError
from .run import Raw, Step

#: sinfo's short states of a node that can take a step (a trailing ``*``,
#: ``~``, ``#``, ``!``, ``%``, ``$``, ``@``, ``^``, ``-`` is a flag:
#: not responding, powered down, ...; such nodes are reported)
USABLE = ('idle', 'mix', 'alloc', 'comp')

#: seconds to wait for an srun to end after SIGTERM before SIGKILL
TERM_WAIT = 5.0


def _run(cmd, timeout=60):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout)
    except FileNotFoundError:
        raise CclHealthError(f'{cmd[0]}: not found (is Slurm installed and on '
                             f'PATH?)') from None
    except subprocess.TimeoutExpired:
        raise CclHealthError(f'{" ".join(cmd)}: no answer within {timeout} s '
                             f'(is slurmctld up?)') from None
    if p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        raise CclHealthError(f'{" ".join(cmd)}: exit {p.returncode}: '
                             f'{err[-1] if err else "no output"}')
    return p.stdout


def hostnames(nodelist: str) -> List[str]:
    """``n[1-3],m7`` as names (``scontrol show hostnames``)."""
    if not nodelist:
        return []
    return [l.strip() for l in _run(['scontrol', 'show', 'hostnames',
                                     nodelist]).splitlines() if l.strip()]


def parse_sinfo(text: str) -> Tuple[List[str], Dict[str, str]]:
    """``sinfo -h -N -o '%N %t'`` as (usable nodes, {node: state} of the
    others).  A node listed twice (in two partitions) counts once."""
    usable, other = [], {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        node, state = parts[0], parts[1].lower()
        if state in USABLE:
            if node not in usable:
                usable.append(node)
        else:
            other[node] = (f'not checked: Slurm state {state} (drained, '
                           f'down or not responding nodes are left out)')
    other = {n: s for n, s in other.items() if n not in usable}
    return usable, other


def partition_nodes(partition: Optional[str], nodelist: Optional[str]):
    """The nodes to check: of ``partition`` (and/or ``nodelist``) those in
    state idle / mixed / allocated; the others with their state."""
    cmd = ['sinfo', '-h', '-N', '-o', '%N %t']
    if partition:
        cmd += ['-p', partition]
    if nodelist:
        cmd += ['-n', nodelist]
    usable, other = parse_sinfo(_run(cmd))
    if nodelist:
        wanted = hostnames(nodelist)
        missing = [n for n in wanted if n not in usable and n not in other]
        for n in missing:
            other[n] = ('not checked: not a node of partition '
                        f'{partition}' if partition else
                        'not checked: Slurm does not know it')
    return usable, other


def srun_argv(step: Step, tasks_per_node: int, options: Sequence[str],
              program: Sequence[str]) -> List[str]:
    """The srun command line of one step."""
    k = len(step.nodes)
    tpn = 1 if step.kind == 'node' else tasks_per_node
    return (['srun', f'--nodes={k}', f'--ntasks={k * tpn}',
             f'--ntasks-per-node={tpn}', f'--nodelist={",".join(step.nodes)}',
             f'--time={max(1, math.ceil(step.limit / 60))}',
             '--kill-on-bad-exit=1', f'--job-name=ccl-health-{step.kind}']
            + list(options) + list(program))


class SlurmScheduler:
    """Runs the steps of a round as srun job steps, at most
    ``max_parallel`` at once; ``node_program(node)`` gives the node check's
    command and its JSON path, ``step_program(nodes)`` a pair or group
    step's command; ``step_env`` the environment of pair and group steps
    (the node check gets the caller's)."""

    def __init__(self, workdir: str, tasks_per_node: int,
                 node_program: Callable[[str], Tuple[List[str], str]],
                 step_program: Callable[[Sequence[str]], List[str]],
                 step_env: Dict[str, str], srun_options=(),
                 max_parallel: int = 512, grace: float = 10.0,
                 poll: float = 0.2):
        self.workdir = workdir
        self.tpn = tasks_per_node
        self.node_program = node_program
        self.step_program = step_program
        self.step_env = dict(step_env)
        self.options = list(srun_options)
        self.max_parallel = max(1, int(max_parallel))
        self.grace = grace
        self.poll = poll
        self.count = 0
        self.t0 = time.monotonic()

    def now(self):
        return time.monotonic() - self.t0

    def _launch(self, step: Step):
        self.count += 1
        base = os.path.join(self.workdir, 'steps', f'{self.count:06d}-'
                            f'{step.kind}')
        os.makedirs(os.path.dirname(base), exist_ok=True)
        env = dict(os.environ)
        json_path = None
        if step.kind == 'node':
            program, json_path = self.node_program(step.nodes[0])
            try:
                os.unlink(json_path)
            except FileNotFoundError:
                pass
        else:
            program = self.step_program(step.nodes)
            env.update(self.step_env)
        argv = srun_argv(step, self.tpn, self.options, program)
        with open(base + '.cmd', 'w') as fp:
            fp.write(' '.join(argv) + '\n')
        out = open(base + '.out', 'w')
        err = open(base + '.err', 'w')
        started = self.now()
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        except OSError as e:
            out.close()
            err.close()
            raise CclHealthError(f'srun: cannot start: {e}') from None
        return {'step': step, 'proc': proc, 'out': out, 'err': err,
                'base': base, 'json': json_path, 'started': started,
                'deadline': started + step.limit + self.grace,
                'killed': False, 'term_at': None}

    @staticmethod
    def _signal(proc, sig):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _finish(self, run) -> Raw:
        run['out'].close()
        run['err'].close()
        with open(run['base'] + '.out', errors='replace') as fp:
            stdout = fp.read()
        with open(run['base'] + '.err', errors='replace') as fp:
            stderr = fp.read()
        doc = None
        if run['json']:
            try:
                with open(run['json']) as fp:
                    doc = json.load(fp)
            except (OSError, ValueError):
                doc = None
        code = None if run['killed'] else run['proc'].returncode
        return Raw(run['step'], code, stdout, stderr, doc, run['killed'],
                   run['started'], self.now() - run['started'])

    def run(self, steps: List[Step]) -> List[Raw]:
        queue = list(steps)
        running, done = [], {}
        try:
            while queue or running:
                while queue and len(running) < self.max_parallel:
                    running.append(self._launch(queue.pop(0)))
                time.sleep(self.poll)
                now = self.now()
                for run in list(running):
                    proc = run['proc']
                    if proc.poll() is not None:
                        running.remove(run)
                        done[id(run['step'])] = self._finish(run)
                        continue
                    if run['term_at'] is None and now >= run['deadline']:
                        # srun passes SIGTERM on to the step and ends it
                        run['killed'] = True
                        run['term_at'] = now
                        self._signal(proc, signal.SIGTERM)
                    elif run['term_at'] is not None and \
                            now >= run['term_at'] + TERM_WAIT:
                        self._signal(proc, signal.SIGKILL)
                        proc.wait()
                        running.remove(run)
                        done[id(run['step'])] = self._finish(run)
        finally:
            for run in running:       # interrupted: leave nothing behind
                self._signal(run['proc'], signal.SIGTERM)
            for run in running:
                try:
                    run['proc'].wait(TERM_WAIT)
                except subprocess.TimeoutExpired:
                    self._signal(run['proc'], signal.SIGKILL)
        return [done[id(s)] for s in steps]

    def drain(self, nodes: Sequence[str], reasons: Dict[str, str]):
        """``scontrol update nodename=N state=drain reason="ccl-health:
        <one line>"`` for each node; returns (drained, {node: error})."""
        drained, errors = [], {}
        for n in nodes:
            why = ' '.join(str(reasons.get(n, 'bad')).split())[:200]
            try:
                _run(['scontrol', 'update', f'nodename={n}', 'state=drain',
                      f'reason=ccl-health: {why}'])
                drained.append(n)
            except CclHealthError as err:
                errors[n] = str(err)
        return drained, errors
