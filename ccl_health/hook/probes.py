"""The hook's probes: gather evidence, decide nothing (the verdicts are
:mod:`ccl_health.hook.judging`'s).

* the all_reduce of every GPU, and the NCCL pair rounds (:func:`run_probe`,
  :func:`pair_rounds`);
* the copy matrix of every GPU pair (``ccl-health-links`` or nvbandwidth,
  :func:`run_links`), which stands in for the pair rounds where installed;
* both from ONE process where ``ccl-health-probe`` is built
  (:func:`find_probe_program`, :func:`run_one_process`): CUDA and NCCL
  start once, the copy matrix and then the all_reduce of every GPU; its
  output is split into the two parts and each is read as its program's
  (the copy matrix's, nccl-tests' table) and judged as before.

Each runs through :func:`ccl_health.hook.bounded.bounded`, in the clean
environment of :func:`ccl_health.hook.settings.clean_environment`."""

import glob
import itertools
import os
import re
import time

from ccl_health.hook import judging
from ccl_health.hook import bounded as run
from ccl_health.hook.probe import LinksProbe
from ccl_health.hook.settings import CouldNotCheck


#: the copy size where no ``peer_copy`` reference gives one
LINKS_DEFAULT_SIZE = 256 << 20


def find_tests_prefix(explicit=None, site=None, program=None):
    """The install prefix of ``program`` (:mod:`ccl_health.evidence.programs`;
    default nccl-tests): given, the site's, or the newest build."""
    from ccl_health.evidence import programs
    from ccl_health.buildcache import STAMP, cache_dir
    program = program or programs.NCCL_TESTS
    if explicit:
        return explicit
    prefix = programs.site_prefix(site.build, program) if site else None
    if prefix:
        return prefix
    built = [p for p in glob.glob(os.path.join(cache_dir(),
                                               f'{program.name}-*'))
             if os.path.exists(os.path.join(p, STAMP))]
    if not built:
        raise CouldNotCheck(f'no {program.name} build in {cache_dir()} (run '
                            f'the suite once, or give --tests-prefix)')
    return max(built, key=lambda p: os.path.getmtime(os.path.join(p, STAMP)))


def probe_env(env, gpus, vis, probe):
    """The environment of one probe: its GPUs made visible by the tokens
    they were given by (UUIDs stay UUIDs), or by their indices."""
    from ccl_health.evidence import nodefacts as node
    penv = dict(env)
    if gpus.vendor == 'amd':
        # HIP indices count within ROCR_VISIBLE_DEVICES' list when it is set
        rocr = list(range(gpus.count))
        if env.get('ROCR_VISIBLE_DEVICES') is not None:
            rocr = node.visible_gpus(gpus, {
                'ROCR_VISIBLE_DEVICES': env['ROCR_VISIBLE_DEVICES']}).indices
        penv.pop('CUDA_VISIBLE_DEVICES', None)
        penv['HIP_VISIBLE_DEVICES'] = ','.join(str(rocr.index(g))
                                               for g in probe.gpus)
    else:
        penv['CUDA_VISIBLE_DEVICES'] = ','.join(probe.tokens)
        if not vis.variable:      # indices we chose: nvidia-smi's order
            penv.setdefault('CUDA_DEVICE_ORDER', 'PCI_BUS_ID')
    return penv


#: ccl-health-probe's line before it waits for NCCL's communicators made
#: before its go (-S): a hang after it is the all_reduce's, not the copies'
NCCL_WAIT = "# waiting for NCCL's communicators"
#: nccl-tests / rccl-tests' own header lines (a launcher may prefix them),
#: or the line above: the program started on the GPUs
STARTED = re.compile(r'#\s*(nccl-tests version|Collective test starting|'
                     r'nThread\s+\d+|Using devices)|rccl-tests:|'
                     r'^\s*\d+\s+\d+\s+\w+\s|^' + re.escape(NCCL_WAIT),
                     re.M)


gpus_text = judging.gpus_text


def run_probe(probe, binary, launcher, env, deadline, iters, workdir,
              program=None, limit=None, judge_probe=None):
    """Run one all_reduce (bounded by ``deadline``): its attempt
    (:func:`ccl_health.hook.judging.probe_attempt`), judged alone by
    ``judge_probe(probe, attempt)`` (the try's verdict: retry or not).
    Returns ``(probe, attempt)``."""
    from ccl_health.evidence import programs
    from ccl_health.evidence import debuglog
    program = program or programs.NCCL_TESTS
    what = f'all_reduce on GPUs {gpus_text(probe.gpus)}'
    remaining = deadline - time.monotonic()
    if remaining < 1:
        att = judging.not_started_attempt(what, limit)
        return judge_probe(probe, att, ''), att
    from ccl_health.evidence import ras
    logdir = run.temporary_folder('probe-', workdir)
    penv = dict(env, NCCL_DEBUG='INFO', NCCL_DEBUG_SUBSYS='INIT,NET',
                NCCL_DEBUG_FILE=os.path.join(logdir, 'nccl-debug.%h.%p.log'))
    # its own RAS port (probes run side by side); a share of the bound to
    # ask it which rank stopped, before the probe is killed
    penv.setdefault('NCCL_RAS_ADDR', ras.free_address())
    asking = 0.0 if ras.disabled(penv) else ras.share(remaining)
    cmd = list(launcher) + [str(len(probe.gpus)), binary] + program.options(
        probe.size, probe.size, 2, iters, 2, max(1, int(remaining) - 1),
        json_file=None)
    got = run.bounded(cmd, penv, remaining - asking, started=STARTED,
                      before_kill=lambda: ras.ask(penv, bound=asking))
    probe.seconds = got.seconds
    _keep_output(logdir, cmd, got)
    att = judging.probe_attempt(
        got, launcher, what, limit, program,
        logs=debuglog.debug_log_files(logdir), ras_answer=got.asked)
    return judge_probe(probe, att, judging.launcher_words(got.output)), att


def _keep_output(logdir, cmd, got):
    """The probe's command and output beside its debug logs (kept with them
    when the check fails, :mod:`ccl_health.hook.keep`), and what RAS said
    of a probe past its bound (``ras.txt``)."""
    asked = getattr(got.asked, 'address', None)
    texts = [('output.txt', f'$ {" ".join(cmd)}\n{got.output or ""}')]
    if asked:
        texts.append(('ras.txt', f'# NCCL RAS at {asked}: '
                      f'{got.asked.why or "answered"} in '
                      f'{got.asked.seconds:g} s\n{got.asked.text}'))
    for name, text in texts:
        try:
            with open(os.path.join(logdir, name), 'x',
                      errors='replace') as fp:
                fp.write(text)
        except OSError:
            pass


def pair_rounds(gpus):
    """Every pair of GPUs, in rounds of disjoint pairs (run together)."""
    pairs = list(itertools.combinations(gpus, 2))
    rounds = []
    while pairs:
        used, this = set(), []
        for p in list(pairs):
            if not used & set(p):
                this.append(p)
                used |= set(p)
                pairs.remove(p)
        rounds.append(this)
    return rounds


def find_links_tool(prefix, site):
    """``(tool, path)`` of what measures the GPU links, or None (then the
    hook runs the NCCL pair rounds): the site's ``health.links``, else
    ``bin/ccl-health-links`` of the tests' install prefix (the builders put
    it there), else the site's ``health.nvbandwidth``.  A path the site
    names that is not executable cannot be checked with (exit 2)."""
    from ccl_health.evidence import copymatrix as links
    health = site.health if site is not None else None
    named = [(links.PROGRAM, getattr(health, 'links', None)),
             (links.NVBANDWIDTH, getattr(health, 'nvbandwidth', None))]
    for tool, path in named:
        if path and not os.access(path, os.X_OK):
            key = 'links' if tool == links.PROGRAM else tool
            raise CouldNotCheck(f'{site.path}: health.{key}: {path} is '
                                f'missing or not executable')
    if named[0][1]:
        return named[0]
    built = os.path.join(prefix, 'bin', links.PROGRAM)
    if os.access(built, os.X_OK):
        return links.PROGRAM, built
    if named[1][1]:
        return named[1]
    return None


def run_links(tool, gpu_ids, tokens, env, deadline, peer_copy, limit=None):
    """Run the copy matrix on ``gpu_ids`` (made visible by ``env``), alone
    (nothing else runs on the GPUs meanwhile), and have it judged."""
    from ccl_health.evidence import copymatrix as links
    name, path = tool
    size = peer_copy.size if peer_copy is not None else LINKS_DEFAULT_SIZE
    probe = LinksProbe(tuple(gpu_ids), name, path, size, tuple(tokens))
    remaining = deadline - time.monotonic()
    if remaining < 1:
        return judging.not_started(
            probe, 'the copy matrix of the GPU links', limit)
    opts = (links.links_options(size) if name == links.PROGRAM else
            links.nvbandwidth_options(size))
    # its own lines: the header, or an error it names (before the header)
    ours = (f'# {links.PROGRAM} ', '# error:', '# usage error:') \
        if name == links.PROGRAM else ('nvbandwidth Version',)
    started = re.compile('|'.join('^' + re.escape(o) for o in ours), re.M)
    got = run.bounded([path] + opts, env, remaining, started=started)
    probe.seconds = got.seconds
    res = None
    if not (got.not_started or got.timed_out or not got.started or
            got.returncode in (126, 127)):
        res = links.parse_links(got.output) if name == links.PROGRAM else \
            links.parse_nvbandwidth(got.output, nbytes=size)
    return judging.judge_copy_matrix(probe, got, res, peer_copy, limit)


def find_probe_program(prefix, site, links_tool):
    """``(path, '')`` of ``bin/ccl-health-probe`` in the tests' install
    prefix (the builders put it beside ``ccl-health-links``), else ``(None,
    why)``: not built there, or the site names its own links program
    (``health.links`` / ``health.nvbandwidth``: that one is run, apart)."""
    from ccl_health.evidence import copymatrix as links
    path = os.path.join(prefix, 'bin', links.PROBE_PROGRAM)
    if not os.access(path, os.X_OK):
        return None, (f'{links.PROBE_PROGRAM} is not built in {prefix}: '
                      f'all_reduce_perf and the copy matrix run apart')
    if links_tool is not None and links_tool[1] != os.path.join(
            prefix, 'bin', links.PROGRAM):
        return None, (f'the site names {links_tool[1]} for the links: '
                      f'all_reduce_perf and it run apart')
    return path, ''


#: the one probe process's own time, its last line (builders/src/
#: ccl_health_links.cu)
PROGRAM_TOTAL = re.compile(r'^# probe total ([0-9.]+) s$', re.M)
NCCL_INIT = re.compile(r'^# nccl init ([0-9.]+) s', re.M)


def _part(got, output, started, returncode, timed_out):
    """One part of the one probe process's run, as if its program had run
    alone (what :func:`run_probe` and :func:`run_links` judge)."""
    return run.Outcome(output=output, returncode=returncode,
                       seconds=got.seconds, timed_out=timed_out,
                       started=bool(started.search(output)),
                       not_started=got.not_started, asked=got.asked)


def one_process_env(env, logdir, ras_address=None):
    """The one probe process's environment: ``env`` with NCCL's debug log
    into ``logdir`` (the transport proof) and its own RAS address."""
    from ccl_health.evidence import ras
    penv = dict(env, NCCL_DEBUG='INFO', NCCL_DEBUG_SUBSYS='INIT,NET',
                NCCL_DEBUG_FILE=os.path.join(logdir, 'nccl-debug.%h.%p.log'))
    penv.setdefault('NCCL_RAS_ADDR', ras_address or ras.free_address())
    return penv


#: what may differ between the environment the probe was started with
#: ahead and the one its plan gives (sent before its go,
#: builders/src/ccl_health_links.cu -S): variables nothing in the program
#: reads before then: NCCL's / RCCL's (read as they start), those of
#: libfabric and UCX (loaded by NCCL's network plugin as NCCL starts) and
#: Open MPI's (the program does not use MPI).  Anything else (CUDA's,
#: HIP's, the loader's, PATH) is read as CUDA starts: a fresh process.
LATE_PREFIXES = ('NCCL_', 'RCCL_', 'FI_', 'UCX_', 'OMPI_')


class EarlyProbe:
    """``ccl-health-probe -S`` started ahead of the plan (issue 42: CUDA's
    driver starts while the hook reads its site), waiting on standard
    input.  Once the plan is made and the node's first reading complete
    it is started (:meth:`begin`: every GPU's context, and NCCL's
    communicators where an all_reduce is planned) where the plan runs the
    same program with the same environment (NCCL / RCCL ... variables
    aside, :data:`LATE_PREFIXES`: they are sent before the start), else
    cancelled and a fresh process started; the probe's run sends its go
    (:meth:`go`).  Every one started ends: used, :meth:`cancel`, or a
    signal (:func:`ccl_health.hook.bounded.stop_all`)."""

    def __init__(self, path, env, logdir, proc):
        self.path, self.env, self.logdir, self.proc = path, env, logdir, proc
        self.t0 = time.monotonic()
        self.used = False
        #: the environment it was started with (:meth:`begin`), else None
        self.begun = None
        #: what became of it (``--json``'s ``probe_ahead``)
        self.said = 'started ahead'

    @property
    def ras_address(self):
        return self.env.get('NCCL_RAS_ADDR')

    def env_lines(self, path, env):
        """``(lines, why)``: the ``env`` / ``unset`` lines that make this
        process's environment ``env`` for a run of ``path``; lines None
        (and why) where they cannot (another program, another variable
        that differs, a value no line can carry)."""
        if self.used:
            return None, 'used already'
        if path != self.path:
            return None, f'the plan runs {path}'
        lines = []
        for k in sorted(set(env) | set(self.env)):
            if env.get(k) == self.env.get(k):
                continue
            if not k.startswith(LATE_PREFIXES):
                return None, f'{k} differs (read as the program starts)'
            if any(c in k for c in '=\n\0 ') or \
                    any(c in env.get(k, '') for c in '\n\0'):
                return None, f'{k}: a value no line can carry'
            lines.append(f'env {k}={env[k]}' if k in env else f'unset {k}')
        return lines, ''

    def begin(self, path, env, nccl):
        """Start its work for a run of ``path`` with ``env`` (its contexts;
        ``nccl``: NCCL's communicators too), or cancel it where it cannot
        be that run.  True where it was started."""
        lines, why = self.env_lines(path, env)
        if lines is not None:
            try:
                self.proc.stdin.write(''.join(f'{ln}\n' for ln in lines) +
                                      ('start nccl\n' if nccl else
                                       'start\n'))
                self.proc.stdin.flush()
                self.begun = dict(env)
                return True
            except (OSError, ValueError) as err:
                why = f'it could not be told to start ({err})'
        self.cancel(why)
        return False

    def go(self, path, env, options, timeout, started=None,
           before_kill=None):
        """Its go for the run of ``path`` with ``env`` and ``options``
        (:func:`ccl_health.hook.bounded.finish`'s outcome), or None where
        it was not started for exactly that run (then it is cancelled)."""
        if self.begun is None or path != self.path or env != self.begun:
            self.cancel('the run is not the one it was started for'
                        if self.begun is not None else
                        'it was not started for the run')
            return None
        if any(' ' in o or '\n' in o for o in options):
            self.cancel('an option no line can carry')
            return None
        self.used = True
        self.said = (f'started ahead, used: its go '
                     f'{time.monotonic() - self.t0:.3f} s after its start')
        return run.finish(self.proc, timeout, started, before_kill,
                          text=' '.join(['go'] + list(options)) + '\n')

    def cancel(self, why):
        """Kill it (never used, or not wanted: ``why``)."""
        if not self.used:
            self.used = True
            self.said = f'started ahead, ended: {why}'
            run.cancel(self.proc)


def start_early(path, env, workdir):
    """:class:`EarlyProbe`: ``path`` (``ccl-health-probe``) started with
    ``-S`` in ``env`` (:func:`probe_env`'s) and the debug log's folder of
    its run; None where it could not start (the plan's run then starts
    it, and names why)."""
    logdir = run.temporary_folder('probe-', workdir)
    penv = one_process_env(env, logdir)
    proc = run.start([path, '-S'], penv, stdin=True)
    if isinstance(proc, run.Outcome):
        run.remove_folder(logdir)
        return None
    return EarlyProbe(path, penv, logdir, proc)


#: its line when it was started ahead: "# early S s before the go,
#: contexts T s after it"
EARLY = re.compile(r'^# early ([0-9.]+) s before the go', re.M)


def _split(got, with_links):
    """The one process's output as ``(copy matrix, all_reduce)``
    (:func:`ccl_health.evidence.copymatrix.split_probe_output`); the copy
    matrix None where its copies never began because NCCL's communicators,
    made before them (started ahead), did not end: the all_reduce's
    hang."""
    from ccl_health.evidence import copymatrix as links
    links_text, ar_text = links.split_probe_output(got.output or '')
    if with_links and got.timed_out and ar_text is None and \
            links_text.rstrip().rsplit('\n', 1)[-1].startswith(NCCL_WAIT):
        return None, links_text
    return links_text, ar_text


def _run_once(early, cmd, env, workdir, remaining, ask_ras, started):
    """``(outcome, its folder, its command as kept)`` of the one process:
    ``early`` given its go where it was started for exactly this run
    (its environment, its folder for NCCL's debug log), else (cancelled)
    a fresh process with a folder of its own (nothing of another process
    in the logs its transport is proven from); ``ask_ras``: NCCL's RAS
    asked which rank stopped before a run past its bound is killed."""
    from ccl_health.evidence import ras

    def bounds(penv):
        asking = 0.0 if ras.disabled(penv) or not ask_ras else \
            ras.share(remaining)
        return remaining - asking, (lambda: ras.ask(penv, bound=asking)) \
            if ask_ras else None
    if early is not None and early.begun is not None:
        penv = one_process_env(env, early.logdir, early.ras_address)
        timeout, before_kill = bounds(penv)
        got = early.go(cmd[0], penv, cmd[1:], timeout, started, before_kill)
        if got is not None:
            return got, early.logdir, [cmd[0], '-S', '< go'] + cmd[1:]
    if early is not None:
        early.cancel('it was not started for the run')
    logdir = run.temporary_folder('probe-', workdir)
    penv = one_process_env(env, logdir)
    timeout, before_kill = bounds(penv)
    return run.bounded(cmd, penv, timeout, started=started,
                       before_kill=before_kill), logdir, cmd


def run_one_process(path, with_links, probe, gpu_ids, tokens, env, deadline,
                    peer_copy, iters, workdir, program=None, limit=None,
                    early=None):
    """Run ``ccl-health-probe`` once (bounded by ``deadline``): the copy
    matrix of ``gpu_ids`` (``with_links``), then the all_reduce of
    ``probe`` (None: none) over them all, NCCL's debug log kept for the
    transport proof.  Returns ``(links_probe, (attempt, launcher words))``:
    the copy matrix judged (None where not run), the all_reduce's attempt
    (:func:`ccl_health.hook.judging.probe_attempt`; None where it never
    ran: the copy matrix did not complete, its fault is the verdict).
    ``early``: an :class:`EarlyProbe` to use where it can be this run
    (else it is cancelled)."""
    from ccl_health.evidence import copymatrix as links
    from ccl_health.evidence import debuglog, programs
    program = program or programs.NCCL_TESTS
    size = peer_copy.size if peer_copy is not None else LINKS_DEFAULT_SIZE
    lp = LinksProbe(tuple(gpu_ids), links.PROGRAM, path, size,
                    tuple(tokens)) if with_links else None
    what = (f'all_reduce on GPUs {gpus_text(probe.gpus)}' if probe else
            'the copy matrix of the GPU links')
    remaining = deadline - time.monotonic()
    if remaining < 1:
        if early is not None:
            early.cancel('no time left for the probe')
        if lp is not None:
            return judging.not_started(lp, 'the copy matrix of the GPU '
                                           'links', limit), None
        return None, (judging.not_started_attempt(what, limit), '')
    cmd = [path] + (links.links_options(size) if with_links else
                    ['-b', '0']) + \
        ['-a', str(probe.size if probe else 0), '-i', str(int(iters)),
         '-W', '2']
    ours = re.compile(r'^# (ccl-health-links |error:|usage error:)', re.M)
    got, logdir, cmd = _run_once(
        early, cmd, env, workdir, remaining, probe is not None,
        re.compile(f'{ours.pattern}|{STARTED.pattern}', re.M))
    _keep_output(logdir, cmd, got)
    head = EARLY.search(got.output or '')
    early_s = float(head[1]) if head else None
    links_text, ar_text = _split(got, lp is not None)
    if links_text is None:
        lp, links_text = None, ''
    done = True
    if lp is not None:
        lp.seconds = got.seconds
        lp.early_s = early_s
        res = links.parse_links(links_text)
        done = res.complete and not res.errors
        part = _part(got, links_text, ours, 0 if done else got.returncode,
                     got.timed_out and not done)
        if part.not_started or part.timed_out or not part.started or \
                part.returncode in (126, 127):
            res = None
        judging.judge_copy_matrix(lp, part, res, peer_copy, limit)
    if probe is None or not done:
        return lp, None
    probe.seconds = got.seconds
    probe.early_s = early_s
    total = PROGRAM_TOTAL.search(ar_text or '')
    probe.program_s = float(total[1]) if total else None
    init = NCCL_INIT.search(ar_text or '')
    probe.nccl_init_s = float(init[1]) if init else None
    part = _part(got, ar_text or '', STARTED, got.returncode, got.timed_out)
    att = judging.probe_attempt(
        part, [path], what, limit, program,
        logs=debuglog.debug_log_files(logdir), ras_answer=got.asked)
    return lp, (att, judging.launcher_words(part.output))
