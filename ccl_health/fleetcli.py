"""``scripts/fleet`` / ``python -m ccl_health.fleet``: accept a whole
partition through Slurm.

Outside an allocation it asks for ONE allocation of the usable nodes
(``salloc --exclusive``) and runs itself inside it with ``--inside``; inside
(``SLURM_JOB_ID`` set), every step is an ``srun`` job step.  ``--simulate
PLAN`` runs the same rounds on the simulated scheduler (a fault plan,
no Slurm) for a dry run of the procedure.

Exit 0: every node healthy; 1: a bad node, suspect link or group, or a
straggler; 2: the tool could not run, or nodes could not be checked (one
line on stderr)."""

import argparse
import json
import math
import os
import re
import subprocess
import sys
from typing import Dict

from ccl_health import (CclHealthError, argnumbers, identity, outputs,
                        read_text, resources, safefile, shell)
from ccl_health.evidence.benignwarns import check_benign
from ccl_health.sitedata import site as site_data
from ccl_health.fleet import plan
from ccl_health.fleet import fleetreport as report
from ccl_health.sitedata.fleetconfig import PROOF_ENV, FleetConfig
from ccl_health.fleet.hostlist import expand_hostlist
from ccl_health.fleet.rounds import Fleet, exit_code, summary_text

EXIT_ERROR = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise CclHealthError(f'{self.prog}: {message}')


def parser(prog='scripts/fleet'):
    p = _Parser(prog=prog, description=(
        'Check every node of a partition through Slurm: the node check on '
        'all nodes at once, the healthy ones in pairs (two pairings), '
        'all_reduce over growing groups with bisection of a failing one, '
        'stragglers against this run\'s median; one summary, fleet.json and '
        'fleet.html under <output>/fleet/<run-id>/.'))
    p.add_argument('--partition', '-p', help='the Slurm partition to check')
    p.add_argument('--nodelist', '-w', help='only these nodes (a Slurm node '
                   'list, e.g. "nid[00001-00128]")')
    p.add_argument('--drain', action='store_true', help='drain the nodes '
                   'named bad (scontrol update state=drain reason="ccl-health:'
                   ' ..."); never the ones that could not be checked')
    p.add_argument('--force', action='store_true', help='drain even when '
                   'the failure looks systemic (shared by more than '
                   'fleet.systemic_share of the nodes, or every node behind '
                   'one switch) or the drains exceed fleet.max_drain')
    p.add_argument('--resume', action='store_true', help='back to service: '
                   're-check only the nodes drained with a reason starting '
                   '"ccl-health:" (node check, then a pair with an idle '
                   'partner that passed its last check) and resume a node '
                   'after fleet.resume_passes consecutive passing checks; a '
                   'node that fails again stays drained with the count in '
                   'its reason; a stop drains the nodes under check again '
                   '(exit 128 + the signal); a second resume of the '
                   'partition is skipped (exit 3)')
    p.add_argument('--site', help='a site name (site/<name>.yaml) or a site '
                   'file; its fleet: block sets the commands and limits')
    p.add_argument('--system', help='the system name (default: the site\'s)')
    p.add_argument('--output', help='the output folder (default '
                   '$CCL_HEALTH_OUTPUT, else ./ccl-health-output)')
    p.add_argument('--json', help='also write the summary to this file')
    p.add_argument('--round-limit', type=argnumbers.SECONDS, metavar='SECONDS',
                   help='the bound of a step (srun --time and nccl-tests -T)')
    p.add_argument('--groups', metavar='16,64,256', help='group sizes before '
                   'the whole set')
    p.add_argument('--straggler-k', type=argnumbers.FACTOR, metavar='K',
                   help='stragglers: below median - K x 1.4826 x MAD')
    p.add_argument('--max-parallel', type=argnumbers.COUNT, metavar='N',
                   help='steps at once (default 512)')
    p.add_argument('--db', help='the performance database (default '
                   '$CCL_HEALTH_DB, else <output>/ccl-health.db; with '
                   '--simulate only this: a simulation records nothing '
                   'without it, and its rows are marked simulated)')
    p.add_argument('--no-record', action='store_true',
                   help='record nothing in the performance database')
    from ccl_health.fleet.faults import NODE_FAULTS
    p.add_argument('--simulate', metavar='PLAN', help='rehearse without '
                   'Slurm: the same rounds on a simulated cluster of the '
                   '--nodelist nodes with this fault plan, a JSON file: '
                   '"bad_nodes": {NODE: ' + '|'.join(NODE_FAULTS) + '}, '
                   '"bad_links": [[NODE, NODE]], "stragglers": {NODE: '
                   'busbw factor}, "drained": [NODE] (drained earlier, for '
                   '--resume); an example ships as '
                   'site/fleet-faults.example.json.  With --resume: a '
                   'rehearsal of back to service, its state kept under '
                   '<output>/simulated (run it again for the next check)')
    p.add_argument('--inside', action='store_true',
                   help=argparse.SUPPRESS)
    p.add_argument('--run-id', help=argparse.SUPPRESS)
    p.add_argument('--not-checked', help=argparse.SUPPRESS)
    return p


# -- site ---------------------------------------------------------------------

def _check_ceilings(site, cfg):
    """The site's ceilings against the fleet's reference file
    (:func:`ccl_health.sitedata.overrides.check_ceilings`); a reference
    that does not load is left to the steps, which name it."""
    if site is None or not cfg.reference:
        return
    from ccl_health.judge import reference
    from ccl_health.sitedata import overrides
    try:
        ref = reference.load(cfg.reference)
    except CclHealthError:
        return
    overrides.check_ceilings(site, ref)


def load_site(args):
    """The site (or None) and its fleet configuration with the options'
    overrides."""
    site = None
    if args.site or args.system:
        name = args.site or args.system
        if os.path.sep in name or name.endswith(('.yaml', '.yml')):
            site = site_data.parse(read_text(name, 'site file'), name,
                                   args.system, benign_check=check_benign)
        else:
            site = site_data.load(resources.site_dir(), name,
                                  benign_check=check_benign)
    raw = site.fleet if site is not None else None
    cfg = FleetConfig.from_dict(raw, site.path if site else '<defaults>',
                                site.transports if site else None)
    from ccl_health.fleet import systemic
    systemic.switches(cfg)            # a bad topology stops us here
    _check_ceilings(site, cfg)
    if args.round_limit is not None:
        cfg.round_limit = args.round_limit
    if args.groups is not None:
        try:
            cfg.groups = [int(g) for g in args.groups.split(',') if g.strip()]
        except ValueError:
            raise CclHealthError(f'--groups {args.groups!r}: not a list of '
                                 f'whole numbers') from None
    if args.straggler_k is not None:
        cfg.straggler_k = args.straggler_k
    if args.max_parallel is not None:
        cfg.max_parallel = args.max_parallel
    return site, cfg


def _expand_refs(value):
    return shell.BRACED.sub(lambda m: os.environ.get(m.group(0)[2:-1], ''),
                            str(value))


def step_env(site, cfg: FleetConfig) -> Dict[str, str]:
    """The environment of pair and group steps: where the fleet proves the
    transport, NCCL's channel lines into the step's output
    (:data:`ccl_health.sitedata.fleetconfig.PROOF_ENV`); the site's common
    variables and the transport's (multi-node), then the fleet block's
    ``env``; ``${NAME}`` expanded from this environment."""
    env = dict(PROOF_ENV) if cfg.prove_transport else {}
    if site is not None:
        build = site.build or {}
        values = {
            'plugin_prefix': (build.get('plugin') or {}).get('prefix'),
            'plugin_library': (build.get('plugin') or {}).get('library') or
            'libnccl-net.so',
            'libfabric_prefix': (build.get('libfabric') or {}).get('prefix')}
        values = {k: v for k, v in values.items() if v}
        try:
            env.update(site.render_env(cfg.transport, values,
                                       single_node=False))
        except CclHealthError as err:
            raise CclHealthError(
                f'{err} (fleet.transport {cfg.transport} needs the site\'s '
                f'installation: set build.plugin.prefix and '
                f'build.libfabric.prefix in {site.path})') from None
    env.update(cfg.env)
    return {k: _expand_refs(v) for k, v in env.items()}


class Programs:
    """The node check's and the steps' command lines from the fleet block's
    templates: ``{suite}``, ``{tests}`` (the nccl-tests bin folder, found
    only when a template names it), ``{json}``, ``{size}``, ``{timeout}``."""

    def __init__(self, cfg: FleetConfig, run_dir: str, site=None):
        self.cfg = cfg
        self.run_dir = run_dir
        self.site = site
        self._tests = None

    def _tests_dir(self):
        if self._tests is None:
            from ccl_health.hook.probes import find_tests_prefix
            from ccl_health.hook.settings import CouldNotCheck
            try:
                self._tests = os.path.join(find_tests_prefix(site=self.site),
                                           'bin')
            except CouldNotCheck as err:
                raise CclHealthError(f'{{tests}}: {err}') from None
        return self._tests

    def fill(self, template, json_path=''):
        values = {'suite': resources.root(), 'json': json_path,
                  'size': self.cfg.size,
                  'timeout': str(int(math.ceil(self.cfg.round_limit)))}
        out = []
        for word in template:
            if '{tests}' in word:
                word = word.replace('{tests}', self._tests_dir())
            for k, v in values.items():
                word = word.replace('{%s}' % k, v)
            out.append(word)
        return out

    def node(self, node):
        path = os.path.join(self.run_dir, 'nodes', f'{node}.json')
        return self.fill(self.cfg.node_probe, path), path

    def step(self, nodes):
        return self.fill(self.cfg.step_probe)

    def nodes(self, nodes):
        """The node check of every node as one step: a shell line in which
        ``{json}`` is ``<run>/nodes/${SLURMD_NODENAME}.json`` (each task
        writes its own node's file; every other word quoted)."""
        folder = os.path.join(self.run_dir, 'nodes')
        words = self.fill(self.cfg.node_probe,
                          os.path.join(folder, '${SLURMD_NODENAME}.json'))
        line = 'exec ' + ' '.join(shell.word(w) for w in words)
        return ['sh', '-c', line], {
            n: os.path.join(folder, f'{n}.json') for n in nodes}


# -- the allocation -----------------------------------------------------------

def bound_seconds(cfg: FleetConfig, n: int) -> float:
    """An upper bound of a whole run: every round at its limit."""
    per = cfg.round_limit + cfg.grace
    total = cfg.node_limit + cfg.grace + (2 + cfg.retests) * per
    sizes = plan.group_sizes(cfg.groups, n)
    for s in sizes:
        lim = cfg.limit('group', s) + cfg.grace
        total += lim * (1 + 2 * plan.max_bisect_rounds(s))
    return total


def allocate(args, argv, cfg, run_id, run_dir):
    """Outside an allocation: one ``salloc`` for the whole run, this
    command again inside it; the exit code comes from its fleet.json."""
    from ccl_health.fleet import slurmsteps as slurm
    nodes, other = slurm.partition_nodes(args.partition, args.nodelist)
    if not nodes:
        where = f'partition {args.partition}' if args.partition else \
            'the cluster'
        among = f' among {args.nodelist}' if args.nodelist else ''
        seen = '; '.join(f'{n}: {s}' for n, s in list(other.items())[:3])
        raise CclHealthError(f'no usable node in {where}{among}'
                             f'{f" ({seen})" if seen else ""}')
    safefile.own_dir(run_dir, 'fleet run folder',
                     below=outputs.output_dir())
    nodefile = os.path.join(run_dir, 'nodes.txt')
    safefile.write_atomic(nodefile, '\n'.join(nodes) + '\n')
    other_file = os.path.join(run_dir, 'not-checked.json')
    safefile.write_json(other_file, other)
    minutes = max(1, math.ceil(bound_seconds(cfg, len(nodes)) / 60))
    cmd = ['salloc', '--exclusive', f'--nodes={len(nodes)}',
           f'--nodefile={nodefile}', f'--time={minutes}',
           '--job-name=ccl-health-fleet']
    if args.partition:
        cmd.append(f'--partition={args.partition}')
    cmd += [sys.executable, '-m', 'ccl_health.fleet', '--inside',
            '--run-id', run_id, '--not-checked', other_file] + list(argv)
    print(f'fleet: {len(nodes)} nodes, one allocation: '
          f'{shell.join(cmd[:7])} ...',
          file=sys.stderr, flush=True)
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [resources.PACKAGE_PARENT] +
        ([env['PYTHONPATH']] if env.get('PYTHONPATH') else []))
    env['CCL_HEALTH_OUTPUT'] = outputs.output_dir()
    try:
        proc = subprocess.run(cmd, env=env)
    except FileNotFoundError:
        raise CclHealthError('salloc: not found (is Slurm installed and on '
                             'PATH?)') from None
    summary_path = os.path.join(run_dir, 'fleet.json')
    try:
        summary = json.loads(safefile.read_own(summary_path,
                                               'fleet run summary'))
    except (OSError, ValueError, TypeError):
        raise CclHealthError(f'the run inside the allocation left no '
                             f'{summary_path} (salloc exit {proc.returncode})'
                             ) from None
    return exit_code(summary)


# -- drains -------------------------------------------------------------------

def decide_drains(summary, cfg, sched, force=False, output_dir=None):
    """Drain the bad nodes whose action drains (isolate, reset; never
    monitor), with a reason that says the action; nothing when the
    failure is systemic or the count is above ``fleet.max_drain``, unless
    ``force``."""
    from ccl_health.fleet import systemic
    from ccl_health.judge import actions
    from ccl_health.sitedata import nodeactions
    acts = summary.get('actions') or {}
    to_drain = [n for n in sorted(summary['bad'])
                if actions.drains(acts.get(n, nodeactions.ISOLATE))]
    held = systemic.hold_reason(summary, cfg, to_drain)
    if held and not force:
        summary['drain_held'] = held
        return
    if held:
        summary['forced'] = held
    if not to_drain:
        return
    reasons = {n: actions.drain_reason(acts.get(n, nodeactions.ISOLATE),
                                       summary['bad'][n]) for n in to_drain}
    drained, errors = sched.drain(to_drain, reasons)
    summary['drained'] = drained
    summary['drain_reasons'] = {n: reasons[n] for n in drained}
    summary['drain_errors'] = errors
    if output_dir and drained:
        from ccl_health.fleet import resumestate
        resumestate.note_drains(output_dir, summary['drain_reasons'])


def record_to(args):
    """The database a run records into, or None: ``--no-record`` none; a
    simulation (``--simulate``) only the ``--db`` of its command line,
    never ``$CCL_HEALTH_DB`` or the output folder's (a rehearsal in the
    site's database reads as real failures); else ``--db``, then
    :func:`ccl_health.outputs.database`."""
    if args.no_record:
        return None
    if getattr(args, 'simulate', None):
        return args.db or None
    return args.db or outputs.database()


def _keep(summary, args, cfg):
    """The summary of a run into ``--json`` and the database of
    :func:`record_to` (a database that cannot take it is said, never an
    error: the run's verdict stands)."""
    if args.json:
        safefile.write_json(args.json, summary)
    db = record_to(args)
    if db is None:
        return
    try:
        report.record(summary, db, cfg)
    except Exception as err:
        print(f'fleet: (not recorded in the performance database: '
              f'{err})', file=sys.stderr)


def finish_killed_resume(partition):
    """A ``--resume`` of ``partition`` killed before it finished (its
    intent left behind: :mod:`ccl_health.fleet.resumestate`) is finished
    by whichever fleet run comes next: its nodes drained again, its
    reservation deleted.  Nothing while a resume of the partition runs
    (it holds the lock)."""
    from ccl_health.fleet import resume, resumestate
    from ccl_health.fleet import slurmsteps as slurm
    out = outputs.output_dir()
    with resumestate.locked(resumestate.lock_path(out, partition),
                            wait=False) as mine:
        if mine:
            return resume.finish_unfinished(
                out, partition, slurm,
                lambda t: print(t, file=sys.stderr, flush=True))
    return {}


def run_resume(args, site, cfg, run_id):
    """``--resume``: re-check the nodes drained by ccl-health
    (:mod:`ccl_health.fleet.resume`); its own fleet.json and page.  Stops
    are held from here on: the run drains what it has under check again
    and ends with 128 + the signal; a second resume of the partition is
    skipped with one line, exit 3."""
    from ccl_health.fleet import resume
    from ccl_health.fleet import slurmsteps as slurm
    from ccl_health.stops import held
    out_dir = outputs.output_dir()
    sim = None
    if args.simulate:
        out_dir, sim, make_scheduler = _rehearsal(args, cfg, out_dir)
    run_dir = os.path.join(out_dir, 'fleet', f'resume-{run_id}')
    progs = Programs(cfg, run_dir, site)
    env = step_env(site, cfg) if sim is None else {}

    def make_slurm_scheduler(reservation):
        safefile.own_dir(os.path.join(run_dir, 'nodes'), 'fleet run folder',
                         below=out_dir)
        sched = slurm.SlurmScheduler(
            run_dir, cfg.tasks_per_node, progs.node, progs.step, env,
            list(cfg.srun) + [f'--reservation={reservation}'],
            cfg.max_parallel, cfg.grace)
        # each step its own job in the reservation, even when this runs
        # inside a job (FleetAcceptance): no job variables passed on
        sched.base_env = {k: v for k, v in sched.base_env.items()
                          if not k.startswith('SLURM_') or k == 'SLURM_CONF'}
        return sched

    if sim is None:
        make_scheduler = make_slurm_scheduler
    with held() as stops:
        r = resume.Resume(cfg, out_dir, args.partition, args.nodelist,
                          slurm=sim, make_scheduler=make_scheduler,
                          stops=stops, site=site)
        summary = r.run()
        summary['run_id'] = f'resume-{run_id}'
        summary['simulated'] = sim is not None
        summary['system'] = site.system if site else (args.system or '')
        summary['partition'] = args.partition or ''
        summary['env_dropped'] = slurm.clean_environ()[1]
        if summary.get('skipped'):
            if args.json:
                safefile.write_json(args.json, summary)
            print(resume.summary_text(summary), flush=True)
            return resume.exit_code(summary)
        report.write_resume(summary, run_dir)
        _keep(summary, args, cfg)
        text = resume.summary_text(summary, os.path.join(run_dir,
                                                        report.SUMMARY))
        if sim is not None:
            text = text.replace('fleet --resume:', 'fleet --resume '
                                '(SIMULATED: no Slurm asked or touched):', 1)
            text += (f'\n  rehearsal state: {out_dir} (the same command '
                     f'again runs the next check; remove the folder to '
                     f'start over)')
        print(text, flush=True)
        return resume.exit_code(summary)


def _simulated_proof(cfg):
    """A simulated step prints a table, no NCCL line: the site's
    ``prove_transport`` is said and not applied (else every step would be
    could-not-check)."""
    if cfg.prove_transport:
        cfg.prove_transport = False
        print(f'fleet: simulated steps print no NCCL channel lines: '
              f'fleet.prove_transport (true) not applied; on the cluster '
              f'every step proves {cfg.transport}', file=sys.stderr,
              flush=True)


def _rehearsal(args, cfg, out_dir):
    """``--resume --simulate PLAN``: the folder of the rehearsal (its
    state, never the real one's), its simulated Slurm and the simulated
    scheduler of its checks."""
    from ccl_health.fleet.faults import FaultPlan
    from ccl_health.fleet.simslurm import FOLDER, SimSlurm
    from ccl_health.fleet.simulate import SimScheduler
    try:
        fplan = FaultPlan.load(args.simulate)
    except (OSError, ValueError) as err:
        raise CclHealthError(f'--simulate: {err}') from None
    folder = os.path.join(out_dir, FOLDER)
    _simulated_proof(cfg)
    try:
        sim = SimSlurm(fplan, expand_hostlist(args.nodelist), folder)
    except ValueError as err:
        raise CclHealthError(str(err)) from None

    def make_scheduler(reservation):
        return SimScheduler(fplan, size=cfg.size_bytes,
                            tasks_per_node=cfg.tasks_per_node,
                            max_parallel=cfg.max_parallel, grace=cfg.grace)
    return folder, sim, make_scheduler


# -- main ---------------------------------------------------------------------

def next_step(s, again=''):
    """What to do after a fleet run, in one line; ``again``: the options
    of this run that the next command needs too (``--site X``)."""
    part = f'--partition {s["partition"]}' if s.get('partition') else \
        '--partition PART'
    part += f' {again}' if again else ''
    if s.get('simulated'):
        return (f'the same on the cluster: scripts/fleet {part} (add --drain '
                f'to drain the bad nodes)')
    found = s['bad'] or s['suspect_links'] or s.get('suspect_groups') or \
        s['stragglers']
    if s['drained']:
        return (f'repair the drained nodes, then scripts/fleet --resume '
                f'{part} checks them and brings them back')
    if s['bad'] and not s.get('drain_held'):
        return (f'drain the bad nodes (scripts/fleet {part} --drain, or by '
                f'hand); links, groups and stragglers are in fleet.html')
    if found or s.get('drain_held'):
        return 'look at the findings above and in fleet.html'
    if s['could_not_check']:
        return 'fix what the COULD-NOT-CHECK lines name, then run it again'
    return 'nothing: every node is healthy'


def new_run_id():
    """A fleet run's identity (:func:`ccl_health.identity.new`): its
    folder's name; its records' run id is ``fleet-`` and this."""
    return identity.new()


def main(argv=None, prog='scripts/fleet'):
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv, prog)
    except CclHealthError as err:
        text = ' '.join(str(err).split())
        if re.match(r'(sinfo|salloc|scontrol|squeue)\b', text) and re.search(
                r'not found|configuration source|Unable to contact', text):
            plan = os.path.join(resources.shipped_site_dir(),
                                'fleet-faults.example.json')
            text += (f' (no Slurm cluster answered; to rehearse without one: '
                     f'{prog} --simulate {shell.quote(plan)} --nodelist '
                     f'"n[1-16]"'
                     f'{" --resume" if "--resume" in argv else ""})')
        print(f'fleet: error: {text}', file=sys.stderr)
        return EXIT_ERROR
    except OSError as err:            # a path given: one line, exit 2
        print(f'fleet: error: {err.filename or ""}'
              f'{": " if err.filename else ""}{err.strerror or err}',
              file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print('fleet: error: interrupted', file=sys.stderr)
        return EXIT_ERROR


# long: scripts/fleet's steps in the order they run
def _main(argv, prog):
    try:
        args = parser(prog).parse_args(argv)
    except SystemExit as e:          # --help
        return 0 if not e.code else EXIT_ERROR
    if args.output:
        os.environ['CCL_HEALTH_OUTPUT'] = os.path.abspath(args.output)
    site, cfg = load_site(args)
    run_id = args.run_id or new_run_id()
    if args.resume:
        if args.drain:
            raise CclHealthError('--resume: not with --drain (a resume '
                                 'drains again what fails by itself)')
        if args.simulate and not args.nodelist:
            raise CclHealthError('--simulate needs --nodelist (the nodes)')
        return run_resume(args, site, cfg, run_id)
    run_dir = os.path.join(outputs.output_dir(), 'fleet', run_id)
    # a run folder of this user only (another user's could hold planted
    # links, or swap a step's files before they are read back)
    safefile.own_dir(os.path.join(run_dir, 'nodes'), 'fleet run folder',
                     below=outputs.output_dir())
    sched = None
    unavailable = {}
    if args.not_checked:
        try:
            with open(args.not_checked) as fp:
                unavailable = json.load(fp)
        except (OSError, ValueError) as err:
            raise CclHealthError(f'{args.not_checked}: {err}') from None
    if args.simulate:
        from ccl_health.fleet.faults import FaultPlan
        from ccl_health.fleet.simulate import SimScheduler
        if not args.nodelist:
            raise CclHealthError('--simulate needs --nodelist (the nodes)')
        try:
            fplan = FaultPlan.load(args.simulate)
        except (OSError, ValueError) as err:
            raise CclHealthError(f'--simulate: {err}') from None
        nodes = expand_hostlist(args.nodelist)
        _simulated_proof(cfg)
        sched = SimScheduler(fplan, size=cfg.size_bytes,
                             tasks_per_node=cfg.tasks_per_node,
                             max_parallel=cfg.max_parallel, grace=cfg.grace)
    elif args.inside or os.environ.get('SLURM_JOB_ID'):
        from ccl_health.fleet import slurmsteps as slurm
        nodes = slurm.hostnames(os.environ.get('SLURM_JOB_NODELIST', ''))
        if args.nodelist:
            wanted = set(slurm.hostnames(args.nodelist))
            nodes = [n for n in nodes if n in wanted]
        if not nodes:
            raise CclHealthError('no nodes: SLURM_JOB_NODELIST is empty or '
                                 'holds none of --nodelist')
        finish_killed_resume(args.partition or os.environ.get(
            'SLURM_JOB_PARTITION'))
        progs = Programs(cfg, run_dir, site)
        env = step_env(site, cfg)
        progs.step(nodes[:2])            # a template error stops us here
        sched = slurm.SlurmScheduler(
            run_dir, cfg.tasks_per_node, progs.node, progs.step, env,
            cfg.srun, cfg.max_parallel, cfg.grace,
            nodes_program=progs.nodes)
    else:
        return allocate(args, argv, cfg, run_id, run_dir)
    summary = Fleet(nodes, sched, cfg, unavailable=unavailable,
                    actions=site.actions if site else None,
                    site=site).run()
    summary['run_id'] = run_id
    summary['simulated'] = bool(args.simulate)
    summary['system'] = site.system if site else (args.system or '')
    summary['partition'] = args.partition or os.environ.get(
        'SLURM_JOB_PARTITION', '')
    summary['env_dropped'] = list(getattr(sched, 'env_dropped', []))
    if args.drain:
        decide_drains(summary, cfg, sched, args.force,
                      None if args.simulate else outputs.output_dir())
    if not args.simulate:
        from ccl_health.fleet import resumestate
        # each node's last check: a later resume's partner passed its own
        resumestate.note_fleet_checks(outputs.output_dir(), summary)
        state = resumestate.load_state(outputs.output_dir())
        summary['timeline'] = resumestate.timeline(
            state, set(nodes) | set(summary['drained']))
    path = os.path.join(run_dir, 'fleet.json')
    db = record_to(args)
    summary['recorded'] = db or ('nothing: a simulation records only with '
                                 '--db' if args.simulate else 'nothing')
    report.write(summary, run_dir)
    _keep(summary, args, cfg)
    again = ' '.join(f'--{k} {shell.quote(v)}' for k, v in (
        ('site', args.site), ('system', args.system)) if v)
    print(summary_text(summary, path) +
          f'\n  next: {next_step(summary, again)}', flush=True)
    return exit_code(summary)


if __name__ == '__main__':       # python -m ccl_health.fleetcli ...
    sys.exit(main(prog='python -m ccl_health.fleet'))
