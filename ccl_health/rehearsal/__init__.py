"""Rehearse the nightly before wiring cron: ``scripts/nightly --rehearse
SCENARIO`` runs a real night (the lock, ``scripts/run`` with ReFrame, the
recording, the history findings, the page, the mail and the exit status:
:mod:`ccl_health.nightly`, unchanged) on this host without GPUs or Slurm.
The sweep's program is the replay stand-in (:mod:`.standin`), playing the
project's own captures of a net-socket all_reduce on one H100 (two ranks,
each its own ``NCCL_HOSTID``: ``captures/README.md``), as the scenario
makes them (:mod:`.scenarios`: ``healthy``, ``drift``, ``collapse``,
``crash``, ``hang``).

:func:`prepare` turns the nightly's options into a rehearsal: the `local`
system's `gpu` partition (the shipped one, whatever systems the site's
copy holds), jobs on this host (ReFrame's local scheduler,
no launcher), the rehearsal's own site file (the stand-in as the
nccl-tests installation) and reference (the medians of the healthy
captures, the shipped tolerance), the sweep narrowed to the captured case
and sizes under a short time limit (:data:`TIME_LIMIT_S`: a hang ends
there).  Everything goes under ``<output>/rehearsal``: the database
(``ccl-health.db``) and the published folder (``www``) unless ``--db`` /
``--publish`` name others (``CCL_HEALTH_DB`` / ``CCL_HEALTH_PUBLISH`` name
the site's real ones and are not used).  ``CCL_HEALTH_ASSUME_GPUS`` says
how many GPUs the node has (default: the captures' two ranks).  The
nights are numbered by the nights already published: night N replays
healthy capture N (in turn), so healthy nights differ as real ones do.
Every line of the mail and the page's title say ``rehearsal: SCENARIO``."""

import json
import os
import re
import shutil
import statistics
import sys

from ccl_health import CclHealthError, outputs, resources, shell
from ccl_health.rehearsal.scenarios import SCENARIOS, make

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.join(HERE, 'captures')
STANDIN = os.path.join(HERE, 'standin.py')

#: the job's time limit in a rehearsal (a replay takes well under a
#: second); the ``hang`` scenario stalls :data:`STALL_FACTOR` times longer
TIME_LIMIT_S = 10
STALL_FACTOR = 30

#: the case the captures are of (the sweep's transport and collective)
TRANSPORT = 'net-socket'
COLLECTIVE = 'all_reduce'
#: the name of the check that runs it (ReFrame ``-n``)
CHECK = f'AllReduceSweep%transport={TRANSPORT}'

#: nccl-tests' header: ``warmup iters: %d iters: %d`` (src/common.cu)
ITERS = re.compile(r'warmup iters: (\d+) iters: (\d+)')

__all__ = ['SCENARIOS', 'prepare', 'healthy_captures']


def healthy_captures():
    """The shipped healthy outputs, in order."""
    return sorted(os.path.join(CAPTURES, f) for f in os.listdir(CAPTURES)
                  if f.startswith('healthy-') and f.endswith('.out'))


def debug_logs():
    """The shipped debug logs of the captured case's ranks, in rank
    order (the stand-in writes them as the processes of the replayed
    output's rank lines)."""
    return [os.path.join(CAPTURES, f) for f in sorted(os.listdir(CAPTURES))
            if f.startswith('nccl-debug.') and f.endswith('.log')]


def node():
    """The captured node (``captures/node.json``)."""
    with open(os.path.join(CAPTURES, 'node.json')) as fp:
        return json.load(fp)


def _read(path):
    with open(path) as fp:
        return fp.read()


def _write(path, text, mode=None):
    """Write atomically (a rehearsal running beside never reads half)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f'{path}.{os.getpid()}.tmp'
    with open(tmp, 'w') as fp:
        fp.write(text)
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)


def medians():
    """``{size: median busbw}`` of the healthy captures (the better of
    out-of- and in-place per run, as the suite's parser takes it)."""
    from ccl_health.evidence import nccltests
    per = {}
    for path in healthy_captures():
        for row in nccltests.parse_text(_read(path)).rows:
            per.setdefault(row.size, []).append(row.busbw)
    return {s: round(statistics.median(v), 2) for s, v in sorted(per.items())}


def _sizes_text(size):
    from ccl_health.units import format_size
    return format_size(size)


def _calibrated_entry(path, key):
    """The entry of ``key`` (transport, collective, nodes, GPUs per node)
    in the reference file ``path`` when ``scripts/calibrate`` wrote it (it
    carries ``calibrated``), else None."""
    import yaml
    try:
        doc = yaml.safe_load(_read(path))
        entries = doc['partitions']['gpu']['entries']
    except (OSError, TypeError, KeyError, yaml.YAMLError):
        return None
    for e in entries or []:
        if isinstance(e, dict) and e.get('calibrated') and (
                e.get('transport'), e.get('collective'), e.get('nodes'),
                e.get('gpus_per_node')) == key:
            return e
    return None


def write_reference(folder):
    """``reference/local.yaml`` of the rehearsal: the shipped one, its
    entry of the captured case replaced by the medians of the healthy
    captures (the shipped tolerance kept), or by the entry a calibration
    of the rehearsal wrote (``scripts/calibrate --reference-dir
    <output>/rehearsal/world/reference``): a calibration holds in a
    rehearsal as at a site."""
    import yaml
    path = os.path.join(folder, 'local.yaml')
    doc = yaml.safe_load(_read(os.path.join(
        resources.shipped_reference_dir(), 'local.yaml')))
    n = node()
    calibrated = _calibrated_entry(path, (TRANSPORT, COLLECTIVE, 1,
                                          n['ranks']))
    entry = {'transport': TRANSPORT, 'collective': COLLECTIVE, 'nodes': 1,
             'gpus_per_node': n['ranks'], 'tolerance': None,
             'source': f'rehearsal: the median per size of the '
                       f'{len(healthy_captures())} healthy captures in '
                       f'ccl_health/rehearsal/captures ({n["source"]})',
             'busbw': {_sizes_text(s): b for s, b in medians().items()}}
    entries = doc['partitions']['gpu']['entries']
    for i, e in enumerate(entries):
        if (e.get('transport'), e.get('collective'), e.get('nodes'),
                e.get('gpus_per_node')) == (TRANSPORT, COLLECTIVE, 1,
                                            n['ranks']):
            entry['tolerance'] = e['tolerance']
            entries[i] = calibrated or entry
            break
    else:
        raise CclHealthError(f'the shipped reference has no {TRANSPORT} '
                             f'{COLLECTIVE} entry to rehearse against')
    _write(path,
           '# ccl-health reference of the nightly\'s rehearsal (written by '
           'ccl_health.rehearsal)\n' + yaml.safe_dump(doc, sort_keys=False))


def write_site(folder, tests_prefix, world):
    """``site/local.yaml`` of the rehearsal: the shipped one with the
    stand-in as the nccl-tests installation, and empty installations of
    libfabric and the plugin (nothing is built)."""
    import yaml
    doc = yaml.safe_load(_read(os.path.join(resources.shipped_site_dir(),
                                            'local.yaml')))
    doc.pop('database', None)
    for key in ('libfabric', 'plugin'):
        prefix = os.path.join(world, f'no-{key}')
        os.makedirs(os.path.join(prefix, 'lib'), exist_ok=True)
        doc['build'][key]['prefix'] = prefix
    doc['build']['nccl_tests'] = {'prefix': tests_prefix}
    _write(os.path.join(folder, 'local.yaml'),
           '# ccl-health site file of the nightly\'s rehearsal (written by '
           'ccl_health.rehearsal)\n' + yaml.safe_dump(doc, sort_keys=False))


def write_standin(prefix):
    """``<prefix>/bin/all_reduce_perf``: the stand-in, run by this
    Python.  Its first lines start that Python through ``/bin/sh``: a
    ``#!`` line ends at its first space (a checkout in ``/home/me/my
    checkout`` made the kernel look for ``/home/me/my``: exit 127, a
    CRASH every night) and older kernels cut it at 127 bytes.  The second
    line is a command to the shell and a string to Python."""
    text = _read(STANDIN).split('\n', 1)[1]
    start = ("#!/bin/sh\n''''exec " + shell.quote(sys.executable) +
             ' "$0" "$@" # ' + "'''\n")
    _write(os.path.join(prefix, 'bin', 'all_reduce_perf'), start + text,
           mode=0o755)


def write_capture(folder, scenario, healthy):
    """The capture the night replays: ``scenario`` made of the healthy
    output ``healthy`` and the shipped debug logs."""
    out, rc, logs, stall = make(scenario, _read(healthy),
                                [_read(p) for p in debug_logs()],
                                TIME_LIMIT_S * STALL_FACTOR)
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    _write(os.path.join(folder, 'stdout.txt'), out)
    _write(os.path.join(folder, 'rc.txt'), f'rc={rc} wall=\n')
    for path, body in zip(debug_logs(), logs):
        _write(os.path.join(folder, os.path.basename(path)), body)
    if stall:
        _write(os.path.join(folder, 'stall.txt'), f'{stall}\n')


def _published_nights(publish):
    root = os.path.join(publish, 'nights')
    return len(os.listdir(root)) if os.path.isdir(root) else 0


def narrowing(healthy):
    """ReFrame's options of a rehearsal night: the captured case, its
    sizes, step and iterations (its header's), the short time limit."""
    from ccl_health.evidence import nccltests
    text = _read(healthy)
    res = nccltests.parse_text(text)
    sizes = [r.size for r in res.rows]
    opts = ['-n', CHECK, '-S', f'min_size={min(sizes)}',
            '-S', f'max_size={max(sizes)}',
            '-S', f'time_limit={TIME_LIMIT_S}s']
    if res.step_factor:
        opts += ['-S', f'step_factor={res.step_factor}']
    m = ITERS.search(text)
    if m:
        opts += ['-S', f'warmup_iters={m.group(1)}', '-S',
                 f'iters={m.group(2)}']
    return opts


def prepare(args, environ=None):
    """Make the nightly's ``args`` (and ``environ``, default this
    process's: the night's child inherits it) a rehearsal of
    ``args.rehearse``.  Raises :class:`CclHealthError` for a system other
    than `local`."""
    environ = os.environ if environ is None else environ
    scenario = args.rehearse
    if scenario not in SCENARIOS:
        raise CclHealthError(f'--rehearse {scenario}: no such scenario '
                             f'(known: {", ".join(SCENARIOS)})')
    if args.system not in (None, 'local') or \
            args.partition not in (None, 'gpu'):
        raise CclHealthError(
            f'--rehearse replays its captures on this host (--system local '
            f'--partition gpu), not on {args.system}:{args.partition or ""}'
            .rstrip(':'))
    args.system, args.partition = 'local', 'gpu'
    out = os.path.abspath(args.output or outputs.output_dir())
    root = os.path.join(out, outputs.REHEARSAL)
    args.output = root
    args.db = args.db or outputs.rehearsal_database(out)
    args.publish = os.path.abspath(args.publish or os.path.join(root, 'www'))
    world = os.path.join(root, 'world')
    prefix = os.path.join(world, 'nccl-tests')
    write_standin(prefix)
    write_site(os.path.join(world, 'site'), prefix, world)
    write_reference(os.path.join(world, 'reference'))
    healthy = healthy_captures()
    number = _published_nights(args.publish)
    chosen = healthy[number % len(healthy)]
    name = f'{scenario}-{os.path.basename(chosen)[:-len(".out")]}'
    write_capture(os.path.join(world, 'captures', name), scenario, chosen)
    for k in [k for k in environ if k.startswith('CCL_HEALTH_REPLAY_')]:
        del environ[k]
    environ.pop('CCL_HEALTH_SLURM_ACCESS', None)
    n = node()
    environ.update(
        # the shipped `local` system, whatever site's systems the profile
        # (CCL_HEALTH_CONFIG_DIR) or the site pointer (site.conf) names
        CCL_HEALTH_CONFIG_DIR=resources.path('config'),
        CCL_HEALTH_SITE_DIR=os.path.join(world, 'site'),
        CCL_HEALTH_REFERENCE_DIR=os.path.join(world, 'reference'),
        CCL_HEALTH_REPLAY_DIR=os.path.join(world, 'captures'),
        CCL_HEALTH_REPLAY_NET_SOCKET=name,
        CCL_HEALTH_SCHEDULER='local', CCL_HEALTH_LAUNCHER='local',
        CCL_HEALTH_CACHE=os.path.join(world, 'cache'))
    environ.setdefault('CCL_HEALTH_ASSUME_GPUS', f'{n["ranks"]}:{n["arch"]}')
    args.reframe_args = narrowing(chosen) + list(args.reframe_args or [])
    return args
