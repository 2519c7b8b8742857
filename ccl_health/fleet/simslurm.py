"""The Slurm of a ``--resume`` rehearsal (``scripts/fleet --resume
--simulate PLAN --nodelist ...``): the node states and drain reasons that
``sinfo`` would list, the reservation, ``scontrol`` drains and resumes,
all kept in one file under ``<output>/simulated/`` so that a series of
rehearsals goes on where the last one stopped (a node needs
``fleet.resume_passes`` passing checks, one per run).  Nothing of the
real cluster is asked or touched, and the resume's own state (counts,
events, locks) lives in that folder too, never in the real one.

The first rehearsal starts from the fault plan: the nodes of its
``drained`` list and its ``bad_nodes`` are drained by ccl-health
(``ccl-health: isolate: ... (simulated)``), every other node of
``--nodelist`` is idle and passed its last check (a fleet run just
accepted it: it may be a partner).  The checks themselves run on the
simulated scheduler with the same plan: a bad node fails again, a
drained node the plan leaves healthy passes."""

import json
import os

from ccl_health import safefile
from ccl_health.fleet import resumestate

#: the folder of a rehearsal under the output folder
FOLDER = 'simulated'
STATE = 'slurm.json'


class SimSlurm:
    """``_run`` (sinfo, squeue, scontrol, scancel), ``drain`` and
    ``resume`` as :class:`ccl_health.fleet.resume.Resume` calls them."""

    def __init__(self, plan, nodes, folder):
        self.folder = folder
        self.path = os.path.join(folder, STATE)
        self.nodes = {}
        try:
            with open(self.path) as fp:
                self.nodes = {n: tuple(v) for n, v in json.load(fp).items()}
        except FileNotFoundError:
            pass
        except ValueError as err:
            raise ValueError(f'{self.path}: {err} (remove it to start the '
                             f'rehearsal again)') from None
        fresh = [n for n in nodes if n not in self.nodes]
        drained = set(plan.drained) | set(plan.bad_nodes)
        for n in fresh:
            if n in drained:
                why = plan.bad_nodes.get(n) or 'crash, since repaired'
                self.nodes[n] = ('drain', f'ccl-health: isolate: UNHEALTHY: '
                                 f'{why} (simulated)')
            else:
                self.nodes[n] = ('idle', 'none')
        healthy = [n for n in fresh if n not in drained]
        if healthy:
            # a fleet run passed them: they may be partners
            resumestate.update_state(folder, lambda st: [
                resumestate.last_check(st, n, 'pass', 'simulated fleet run')
                for n in healthy])
        self.save()

    def save(self):
        safefile.own_dir(self.folder, 'rehearsal folder')
        safefile.write_json(self.path, {n: list(v) for n, v in
                                        sorted(self.nodes.items())})

    def _run(self, cmd, timeout=60):
        if cmd[:1] == ['sinfo']:
            from ccl_health.fleet.hostlist import expand_hostlist
            only = expand_hostlist(cmd[cmd.index('-n') + 1]) if '-n' in cmd \
                else sorted(self.nodes)
            fmt = cmd[cmd.index('-o') + 1]
            rows = [(n,) + self.nodes[n] for n in only if n in self.nodes]
            if fmt == '%N|%t|%E':
                return ''.join(f'{n}|{s}|{r}\n' for n, s, r in rows)
            return ''.join(f'{n} {s}\n' for n, s, _ in rows)
        if cmd[:2] == ['scontrol', 'delete']:
            # the reservation ends: what is in it is idle again
            self.nodes.update({n: ('idle', 'none') for n, (s, _) in
                               self.nodes.items() if s == 'maint'})
            self.save()
        return ''                 # squeue (no jobs), scancel, reservation

    def resume(self, nodes):
        for n in nodes:
            self.nodes[n] = ('maint', 'none')     # inside the reservation
        self.save()
        return list(nodes), {}

    def drain(self, nodes, reasons):
        for n in nodes:
            self.nodes[n] = ('drain', reasons[n])
        self.save()
        return list(nodes), {}
