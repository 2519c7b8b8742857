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
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ccl_health import CclHealthError, safefile
from ccl_health.oneline import clean
from ccl_health.fleet.rounds import Raw, Step
from ccl_health.stops import dies_with_parent

#: sinfo's short states of a node that can take a step (a trailing ``*``,
#: ``~``, ``#``, ``!``, ``%``, ``$``, ``@``, ``^``, ``-`` is a flag:
#: not responding, powered down, ...; such nodes are reported)
USABLE = ('idle', 'mix', 'alloc', 'comp')

#: seconds to wait for an srun to end after SIGTERM before SIGKILL
TERM_WAIT = 5.0
#: seconds, in all, to ask NCCL's RAS on a hung step's nodes before it is
#: stopped, and the most nodes asked (one RAS answers for the whole step)
RAS_BOUND = 20.0
RAS_NODES = 4

#: variables that shape a collective's transport: never taken from the
#: caller's environment (one exported NCCL_P2P_DISABLE=1 would fail every
#: node); they come only from the site file (its transport and fleet
#: blocks for the steps, its health block through the hook for the node
#: check)
TRANSPORT_PREFIXES = ('NCCL_', 'FI_', 'RCCL_', 'HSA_', 'UCX_', 'MSCCL_',
                      'NVSHMEM_')


def clean_environ(environ=None):
    """``(env, dropped)``: ``environ`` (default: this process's) without
    the transport-shaping variables, and their names."""
    environ = dict(os.environ if environ is None else environ)
    dropped = sorted(k for k in environ if k.startswith(TRANSPORT_PREFIXES))
    for k in dropped:
        del environ[k]
    return environ, dropped


def _run(cmd, timeout=60):
    """One Slurm command's output.  It runs in a session of its own: a
    stop sent to this process group (Ctrl-C) is this process's to act on,
    and never cuts the ``scontrol`` of its cleanup."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout, start_new_session=True)
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
              program: Sequence[str], kill_on_bad_exit=True) -> List[str]:
    """The srun command line of one step (the node check on every node
    as one step: a bad node's exit 1 must not stop the others, so without
    --kill-on-bad-exit)."""
    k = len(step.nodes)
    tpn = 1 if step.kind == 'node' else tasks_per_node
    return (['srun', f'--nodes={k}', f'--ntasks={k * tpn}',
             f'--ntasks-per-node={tpn}', f'--nodelist={",".join(step.nodes)}',
             f'--time={max(1, math.ceil(step.limit / 60))}',
             f'--kill-on-bad-exit={1 if kill_on_bad_exit else 0}',
             f'--job-name=ccl-health-{step.kind}']
            + list(options) + list(program))


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _read_json(path):
    """The node check's JSON document, read only when it is a regular
    file of this user, never through a link
    (:func:`ccl_health.safefile.read_own`): a document another user
    planted or swapped in is none (never a forged pass)."""
    try:
        text = safefile.read_own(path, 'node check\'s JSON')
        doc = json.loads(text) if text is not None else None
    except (OSError, ValueError, CclHealthError):
        return None
    return doc if isinstance(doc, dict) else None


def _read_back(fp):
    """What a step wrote into ``fp`` (:func:`ccl_health.safefile.
    open_new`), read through the same descriptor, then closed."""
    try:
        fp.flush()
        os.lseek(fp.fileno(), 0, os.SEEK_SET)
        data = b''
        while True:
            chunk = os.read(fp.fileno(), 1 << 20)
            if not chunk:
                break
            data += chunk
        return data.decode('utf-8', errors='replace')
    finally:
        fp.close()


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
                 poll: float = 0.2, nodes_program=None,
                 ras_program=lambda bound: [
                     sys.executable, '-m', 'ccl_health.evidence.ras',
                     '--bound', f'{bound:.1f}']):
        #: the caller's environment without its transport settings
        #: (:func:`clean_environ`); what was dropped goes in fleet.json
        self.base_env, self.env_dropped = clean_environ()
        self.workdir = workdir
        self.tpn = tasks_per_node
        self.node_program = node_program
        #: ``nodes_program(nodes) -> (argv, {node: json path})``: the node
        #: check of every node as one step (:meth:`run_nodes`)
        self.nodes_program = nodes_program
        self.step_program = step_program
        self.step_env = dict(step_env)
        self.options = list(srun_options)
        self.max_parallel = max(1, int(max_parallel))
        self.grace = grace
        self.poll = poll
        self.count = 0
        self.t0 = time.monotonic()
        #: called between polls (``Held.check`` of :mod:`ccl_health.stops`):
        #: what it raises stops the running steps (waited for) and goes on
        self.check_stop = None
        #: ``ras_program(bound) -> argv`` run by ``srun --overlap`` on a
        #: hung step's node (None: RAS is not asked)
        self.ras_program = ras_program

    def now(self):
        return time.monotonic() - self.t0

    def _launch(self, step: Step):
        env = dict(self.base_env)
        json_path = None
        if step.kind == 'node':
            program, json_path = self.node_program(step.nodes[0])
            _remove(json_path)
        else:
            program = self.step_program(step.nodes)
            env.update(self.step_env)
        argv = srun_argv(step, self.tpn, self.options, program)
        return self._start(step, argv, env, json_path)

    def _start(self, step: Step, argv, env, json_path):
        self.count += 1
        base = os.path.join(self.workdir, 'steps', f'{self.count:06d}-'
                            f'{step.kind}')
        # a run folder of this user only; each file made anew (never a
        # planted link), its output read back through its own descriptor
        safefile.own_dir(os.path.dirname(base), 'fleet run folder',
                         below=os.path.dirname(os.path.abspath(
                             self.workdir)))
        safefile.write_atomic(base + '.cmd', ' '.join(argv) + '\n')
        out = safefile.open_new(base + '.out')
        err = safefile.open_new(base + '.err')
        started = self.now()
        try:
            # its own session (a stop is passed on here, by us), and
            # SIGTERM (srun cancels its step) if this process dies first
            proc = subprocess.Popen(
                argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True,
                preexec_fn=dies_with_parent(signal.SIGTERM))
        except OSError as e:
            out.close()
            err.close()
            raise CclHealthError(f'srun: cannot start: {e}') from None
        return {'step': step, 'proc': proc, 'out': out, 'err': err,
                'base': base, 'json': json_path, 'started': started,
                'deadline': started + step.limit + self.grace,
                'killed': False, 'term_at': None}

    def _poll(self, run, now):
        """True when ``run`` has ended (stopping it at its bound)."""
        proc = run['proc']
        if proc.poll() is not None:
            return True
        if run['term_at'] is None and now >= run['deadline']:
            # which rank stopped, asked while it still runs; then srun
            # passes SIGTERM on to the step and ends it
            run['ras'] = self.ask_ras(run['step'])
            now = self.now()
            run['killed'] = True
            run['term_at'] = now
            self._signal(proc, signal.SIGTERM)
        elif run['term_at'] is not None and now >= run['term_at'] + TERM_WAIT:
            self._signal(proc, signal.SIGKILL)
            proc.wait()
            return True
        return False

    @staticmethod
    def _signal(proc, sig):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _finish(self, run) -> Raw:
        stdout, stderr = (_read_back(run['out']), _read_back(run['err']))
        doc = _read_json(run['json']) if run['json'] else None
        code = None if run['killed'] else run['proc'].returncode
        return Raw(run['step'], code, stdout, stderr, doc, run['killed'],
                   run['started'], self.now() - run['started'],
                   ras=run.get('ras'))

    def ask_ras(self, step: Step):
        """What NCCL's RAS says of a pair / group ``step`` that passed its
        bound (:class:`ccl_health.evidence.ras.Answer`), asked on its
        nodes in turn (``srun --overlap``: beside the step, in its
        environment) until one answers, :data:`RAS_BOUND` s in all; None
        for a node check (the hook asks its own)."""
        if step.kind == 'node' or self.ras_program is None:
            return None
        from ccl_health.evidence.ras import Answer
        env = dict(self.base_env)
        env.update(self.step_env)
        deadline = time.monotonic() + RAS_BOUND
        whys = []
        for node in step.nodes[:RAS_NODES]:
            left = deadline - time.monotonic()
            if left < 2:
                break
            argv = ['srun', '--overlap', '--nodes=1', '--ntasks=1',
                    f'--nodelist={node}', '--time=1',
                    '--job-name=ccl-health-ras'] + list(
                        self.ras_program(max(1.0, left - 1.5)))
            try:
                p = subprocess.run(argv, env=env, capture_output=True,
                                   text=True, errors='replace',
                                   timeout=left, start_new_session=True)
                got = Answer.from_dict(json.loads(p.stdout or 'null'))
            except subprocess.TimeoutExpired:
                whys.append(f'{node}: no answer within {left:.0f} s')
                continue
            except (OSError, ValueError) as err:
                whys.append(f'{node}: {clean(str(err), 120)}')
                continue
            if got is not None and got.ok:
                return got
            whys.append(f'{node}: ' + (got.why if got is not None else
                                       clean(p.stderr or 'no answer', 120)))
        return Answer(','.join(step.nodes[:RAS_NODES]),
                      why='; '.join(whys) or 'no time left to ask RAS')

    def run(self, steps: List[Step]) -> List[Raw]:
        queue = list(steps)
        running, done = [], {}
        try:
            while queue or running:
                while queue and len(running) < self.max_parallel:
                    running.append(self._launch(queue.pop(0)))
                time.sleep(self.poll)
                if self.check_stop:
                    self.check_stop()
                now = self.now()
                for run in list(running):
                    if self._poll(run, now):
                        running.remove(run)
                        done[id(run['step'])] = self._finish(run)
        finally:
            self._stop(running)
        return [done[id(s)] for s in steps]

    def _stop(self, running):
        """Interrupted: SIGTERM to every srun (it cancels its step),
        SIGKILL after :data:`TERM_WAIT`, each one waited for."""
        for run in running:
            self._signal(run['proc'], signal.SIGTERM)
        deadline = time.monotonic() + TERM_WAIT
        for run in running:
            try:
                run['proc'].wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._signal(run['proc'], signal.SIGKILL)
                run['proc'].wait()
            run['out'].close()
            run['err'].close()

    def run_nodes(self, steps: List[Step]) -> List[Raw]:
        """The node check of every node of ``steps`` as ONE srun step (one
        launch for the whole partition).  There is no exit status per node:
        each node's verdict is its JSON file (the hook's ``code``, ``line``
        and ``verdict``); no file after a step stopped at its bound is a
        hang of that node, no file otherwise is could-not-check."""
        if self.nodes_program is None:
            return self.run(steps)
        nodes = [s.nodes[0] for s in steps]
        program, paths = self.nodes_program(nodes)
        for p in paths.values():
            _remove(p)
        big = Step('node', tuple(nodes), max(s.limit for s in steps))
        argv = srun_argv(big, 1, self.options, program,
                         kill_on_bad_exit=False)
        run = self._start(big, argv, dict(self.base_env), None)
        try:
            while not self._poll(run, self.now()):
                time.sleep(self.poll)
                if self.check_stop:
                    self.check_stop()
        finally:
            if run['proc'].poll() is None:
                self._stop([run])
        whole = self._finish(run)
        out = []
        for step in steps:
            doc = _read_json(paths[step.nodes[0]])
            code = doc.get('code') if doc is not None else None
            line = str(doc.get('line', '')) if doc is not None else ''
            out.append(Raw(step, code, line + '\n' if line else '',
                           '' if doc is not None else whole.stderr, doc,
                           whole.killed and doc is None, whole.started,
                           whole.seconds))
        return out

    def drain(self, nodes: Sequence[str], reasons: Dict[str, str]):
        """``scontrol update nodename=N state=drain reason="ccl-health:
        <one line>"`` for each node; returns (drained, {node: error})."""
        return drain(nodes, reasons)

    def resume(self, nodes: Sequence[str]):
        return resume(nodes)


def drain(nodes: Sequence[str], reasons: Dict[str, str]):
    """``scontrol update nodename=N state=drain reason="ccl-health: ..."``
    (a reason without the prefix gets it), the reason one clean line of
    at most :data:`ccl_health.oneline.REASON_MAX` characters;
    ``(drained, {node: error})``."""
    drained, errors = [], {}
    for n in nodes:
        why = clean(reasons.get(n, 'bad'), None)
        if not why.startswith('ccl-health:'):
            why = f'ccl-health: {why}'
        try:
            _run(['scontrol', 'update', f'nodename={n}', 'state=drain',
                  f'reason={clean(why)}'])
            drained.append(n)
        except CclHealthError as err:
            errors[n] = str(err)
    return drained, errors


def resume(nodes: Sequence[str]):
    """``scontrol update nodename=N state=resume``; ``(resumed, {node:
    error})``."""
    done, errors = [], {}
    for n in nodes:
        try:
            _run(['scontrol', 'update', f'nodename={n}', 'state=resume'])
            done.append(n)
        except CclHealthError as err:
            errors[n] = str(err)
    return done, errors

