"""What breaks a night that no single file shows: every name one file uses
exists where it is used, the sizes and GPU counts of the references are
ones a night measures, the checks' features are there, launchers and
access options are well formed, and every NCCL / RCCL / libfabric
variable a site sets is one those libraries read
(:mod:`ccl_health.sitedata.envvars`).  Part of ``scripts/validate``
(:mod:`ccl_health.judge.validate`); each error is one line naming the
file, the key and the fix."""

import ast
import difflib
import functools
import glob
import os
import re
import shlex

from ccl_health import resources
from ccl_health.sitedata import envvars, sysconfig
from ccl_health.units import SWEEP, format_size, parse_size, size_sweep

#: the sbatch options that pick the nodes of a job: an ``access`` of a
#: Slurm partition without one sends the jobs to the default partition
_SELECTS = ('-p', '--partition', '-C', '--constraint')
_SLURM = ('slurm', 'squeue')


def _near(word, known):
    near = difflib.get_close_matches(str(word), [str(k) for k in known],
                                     n=1)
    return f' (did you mean {near[0]!r}?)' if near else ''


def _has(names):
    return ', '.join(str(n) for n in names) or 'none'


# -- what the checks require -------------------------------------------------

@functools.lru_cache(maxsize=None)
def required_features():
    """``(partition features, environment features)`` every GPU check
    requires: the ``+feature`` words of ``valid_systems`` and
    ``valid_prog_environs`` in ``checks/*.py`` and the ReFrame bases
    (``ccl_health/rfm/*.py``), read from their source."""
    files = sorted(glob.glob(os.path.join(resources.checks_dir(), '*.py')) +
                   glob.glob(os.path.join(resources.PACKAGE, 'rfm', '*.py')))
    want = {'valid_systems': set(), 'valid_prog_environs': set()}
    for path in files:
        try:
            with open(path) as fp:
                tree = ast.parse(fp.read(), path)
        except (OSError, SyntaxError, ValueError):
            continue            # validate names broken check files elsewhere
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign) or \
                    not isinstance(node.value, (ast.List, ast.Tuple)):
                continue
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in want:
                    for item in node.value.elts:
                        if isinstance(item, ast.Constant) and \
                                isinstance(item.value, str):
                            want[target.id].update(
                                w[1:] for w in item.value.split()
                                if w.startswith('+'))
    return (sorted(want['valid_systems']),
            sorted(want['valid_prog_environs']))


# -- the system file ---------------------------------------------------------

def check_system(name, cpath, system, environments, all_environments,
                 counts_gpus=False):
    """Lines for the system dict of ``cpath``: its environs exist and are
    meant for it, its environments name systems that exist, its launcher
    and scheduler are ReFrame's, its access options pick nodes, and a
    partition has the features the checks select on.
    ``all_environments``: ``{system name: its environments}`` of every
    system file loaded (ReFrame loads them all into one configuration);
    ``environments`` None: not known (the hook's loaded system).
    ``counts_gpus``: the file counts this host's GPUs (``local``): its
    partition has the GPU features only where GPUs were found, so on a
    host without them nothing selected is its dry run, not a mistake."""
    errors = []
    parts = [p for p in system.get('partitions') or [] if isinstance(p, dict)]
    if environments is not None:
        errors += _environs(name, cpath, parts, environments,
                            all_environments)
    errors += _backends(cpath, parts)
    pfeat, efeat = required_features()
    envs = {e.get('name'): e for e in environments or []
            if isinstance(e, dict)}
    ok = []
    for part in parts:
        missing = [f for f in pfeat if f not in (part.get('features') or [])]
        if missing:
            continue
        known = [e for e in part.get('environs') or [] if e in envs]
        if environments is not None and known and not any(
                all(f in (envs.get(e, {}).get('features') or [])
                    for f in efeat) for e in known):
            errors.append(
                f'{cpath}: partitions[{part.get("name")}].environs: none of '
                f'{_has(part.get("environs") or [])} has the features '
                f'{", ".join(efeat)} the checks select on (valid_prog_'
                f'environs of checks/*.py): add \'features\': '
                f'{efeat!r} to its environment, or nothing runs there')
        ok.append(part)
    if parts and not ok and not counts_gpus:
        errors.append(
            f'{cpath}: partitions: no partition has the features '
            f'{", ".join(pfeat)} the checks select on (valid_systems of '
            f'checks/*.py; has: ' + '; '.join(
                f'{p.get("name")}: {p.get("features") or []}'
                for p in parts) + f'): add \'features\': {pfeat!r} to the '
            f'GPU partition, or ReFrame selects nothing')
    return errors


def _environs(name, cpath, parts, environments, all_environments):
    """Each environ of a partition is an environment of the system files
    whose ``target_systems`` take this system (ReFrame: ``*``, the system
    or ``system:partition``); the line names the environment's
    ``target_systems`` where the environment is in this file."""
    errors = []
    here = {e.get('name'): i for i, e in enumerate(environments)
            if isinstance(e, dict)}
    mine = {}
    for owner, envs in all_environments.items():
        for env in envs or []:
            if isinstance(env, dict):
                mine.setdefault(env.get('name'), []).append(
                    (owner, [str(t) for t in
                             env.get('target_systems') or ['*']]))
    told = set()
    for part in parts:
        pname = part.get('name')
        for ename in part.get('environs') or []:
            if ename not in mine:
                errors.append(
                    f'{cpath}: partitions[{pname}].environs: no environment '
                    f'{ename!r} in the system files (environments of this '
                    f'file: {_has(here)})' + _near(ename, mine))
                continue
            if any(t in ('*', name, f'{name}:{pname}')
                   for _, targets in mine[ename] for t in targets):
                continue
            where = '; '.join(f'{owner}: {targets}'
                              for owner, targets in mine[ename])
            if ename in here:
                if ename not in told:
                    told.add(ename)
                    errors.append(
                        f'{cpath}: environments[{ename}].target_systems: '
                        f'{environments[here[ename]].get("target_systems")!r} does not name this '
                        f'file\'s system {name!r}, whose partition {pname} '
                        f'uses it: ReFrame finds no environment {ename!r} '
                        f'for {name}:{pname}; write [{name!r}]')
            else:
                errors.append(
                    f'{cpath}: partitions[{pname}].environs: environment '
                    f'{ename!r} is not for system {name!r} (its '
                    f'target_systems: {where}): ReFrame finds no environment '
                    f'{ename!r} for {name}:{pname}')
    return errors


@functools.lru_cache(maxsize=None)
def reframe_backends():
    """``(launchers, schedulers)``: the names ReFrame registers; None
    where ReFrame is not installed.  Read from the installed ReFrame's
    source (:func:`_backends_from_source`: importing ReFrame costs about a
    second, every run of the hook); imported where the source does not
    show them."""
    found = _backends_from_source()
    if found is not None:
        return found
    try:
        import importlib
        from reframe.core import backends
        for mod in (backends._launcher_backend_modules +
                    backends._scheduler_backend_modules):
            importlib.import_module(mod)
        return sorted(backends._launchers), sorted(backends._schedulers)
    except Exception:           # not installed, or another ReFrame
        return None


#: ``reframe/core/backends.py``: the modules that register the backends
_BACKEND_MODULE = re.compile(r"'reframe\.core\.(launchers|schedulers)\.(\w+)'")
#: in those modules: ``@register_launcher('srun')``,
#: ``@register_scheduler('local', local=True)``
_REGISTER = re.compile(r"^@register_(launcher|scheduler)\(\s*['\"]([^'\"]+)",
                       re.M)


def _backends_from_source():
    """ReFrame's launcher and scheduler names as its source registers
    them (the modules its ``core/backends.py`` lists), without importing
    it; None where that source is not there or shows none of either."""
    import importlib.util
    try:
        spec = importlib.util.find_spec('reframe')
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    core = os.path.join(list(spec.submodule_search_locations)[0], 'core')
    names = {'launcher': set(), 'scheduler': set()}
    try:
        with open(os.path.join(core, 'backends.py')) as fp:
            modules = set(_BACKEND_MODULE.findall(fp.read()))
        for folder, mod in modules:
            with open(os.path.join(core, folder, f'{mod}.py')) as fp:
                for kind, name in _REGISTER.findall(fp.read()):
                    names[kind].add(name)
    except OSError:
        return None
    if not (names['launcher'] and names['scheduler']):
        return None
    return sorted(names['launcher']), sorted(names['scheduler'])


def _backends(cpath, parts):
    errors = []
    known = reframe_backends()
    for part in parts:
        pname = part.get('name')
        for key, names in (('launcher', known and known[0]),
                           ('scheduler', known and known[1])):
            value = part.get(key)
            if not isinstance(value, str):
                continue
            if value != value.strip() or not value or \
                    (names and value not in names):
                errors.append(
                    f'{cpath}: partitions[{pname}].{key}: {value!r} is not '
                    f'a ReFrame {key}' + _near(value.strip(), names or [])
                    + (f' (known: {", ".join(names)})' if names else ''))
        if part.get('scheduler') in _SLURM:
            errors += _access(cpath, pname, part.get('access') or [])
    return errors


def _access(cpath, pname, access):
    """An ``access`` of a Slurm partition: each entry one option with its
    value, and, where options are given, one that picks the nodes."""
    errors, words = [], []
    for i, opt in enumerate(access):
        try:
            split = shlex.split(str(opt))
        except ValueError as err:
            split = []
            errors.append(f'{cpath}: partitions[{pname}].access[{i}]: '
                          f'{opt!r}: {err}')
        if split and not split[0].startswith('-'):
            errors.append(
                f'{cpath}: partitions[{pname}].access[{i}]: {opt!r} is not '
                f'an sbatch option (one "-x value" or "--xx=value" an entry)')
        if split and split[0] in _SELECTS and len(split) < 2:
            errors.append(
                f'{cpath}: partitions[{pname}].access[{i}]: {opt!r} has no '
                f'value (write e.g. "{split[0]} {pname}")')
        words += split
    picks = any(w.split('=')[0] in _SELECTS or
                (w.startswith(('-p', '-C')) and len(w) > 2 and
                 not w.startswith('--')) for w in words)
    if access and not picks and not errors:
        errors.append(
            f'{cpath}: partitions[{pname}].access: {list(access)!r} picks '
            f'no nodes (no -p / --partition or -C / --constraint): the jobs '
            f'go to the default partition; add e.g. "-p {pname}"')
    return errors


# -- the reference and the site against the system ---------------------------

def _framework_key(collective, collectives):
    """A collective the framework checks record (``ccl_health/rfm/
    framework.py``): ``torch_<collective>``, ``torch_first_call``,
    ``torch_replay``, ``torch_train_<model>``."""
    rest = collective[len('torch_'):] if collective.startswith('torch_') \
        else None
    return rest is not None and (rest in collectives or rest in (
        'first_call', 'replay') or rest.startswith('train_'))


def check_reference(name, cpath, system, site, ref, counts_gpus,
                    collectives, canonical):
    """Lines for what ``ref`` names: collectives the suite knows
    (``collectives``, the names; ``canonical``: a name's known form, or
    an error), transports the site lists, sizes the night's sweep
    measures, GPUs per node the partition has (unless the system file
    counts the host's GPUs: ``counts_gpus``)."""
    errors = []
    parts = {p.get('name'): p for p in (system or {}).get('partitions') or []
             if isinstance(p, dict)}
    for pname, pref in ref.partitions.items():
        for i, e in enumerate(pref.entries):
            where = f'{ref.path}: partitions.{pname}.entries[{i}]'
            if e.collective not in collectives and \
                    not _framework_key(e.collective, collectives):
                try:
                    near = f' (did you mean {canonical(e.collective)!r}?)'
                except Exception:
                    near = _near(e.collective, collectives)
                errors.append(
                    f'{where}.collective: {e.collective!r} is no collective '
                    f'the suite runs, never matched{near} (known: '
                    f'{", ".join(collectives)})')
            if site is not None and e.transport not in site.transports:
                continue            # a note: :func:`unlisted`
            errors += _sizes(where, e, site)
            part = parts.get(pname)
            gpus = sysconfig.partition_gpus(part)[0] if part else 0
            if part and not counts_gpus and gpus and \
                    e.gpus_per_node != gpus:
                errors.append(
                    f'{where}.gpus_per_node: {e.gpus_per_node}, but partition '
                    f'{pname!r} of {cpath} has {gpus} GPU(s) per node '
                    f'(devices): the night runs {gpus} per node and never '
                    f'finds this entry; write {gpus}')
    return errors


def unlisted(site, ref):
    """Notes for the reference entries of transports the site file does
    not list: their checks are skipped (with that reason), so the entry is
    never compared: one note per transport and partition."""
    if site is None or ref is None:
        return []
    out = {}
    for pname, pref in ref.partitions.items():
        for i, e in enumerate(pref.entries):
            if e.transport not in site.transports:
                out.setdefault((pname, e.transport), []).append(i)
    return [f'{ref.path}: partitions.{pname}.entries{at}: {t} is not listed '
            f'in {site.path} (transports: {_has(site.transports)}): its '
            f'checks are skipped and the entries never compared; list it '
            f'there where the nodes have its network'
            for (pname, t), at in sorted(out.items())]


def _sizes(where, entry, site):
    lo, hi, factor = SWEEP
    cap = None
    if site is not None and entry.transport in site.transports:
        cap = site.transports[entry.transport].max_size
    top = min(parse_size(hi), parse_size(cap)) if cap else parse_size(hi)
    sweep = set(size_sweep(lo, top, factor))
    out = []
    for size in sorted(entry.busbw):
        if size in sweep:
            continue
        capped = (f'{site.path}: transports.{entry.transport}.max_size: '
                  f'{cap}' if cap and parse_size(cap) < parse_size(hi) else
                  'the sweep\'s max_size')
        why = (f'above {format_size(top)} ({capped})' if size > top else
               f'not one of the sweep\'s sizes ({format_size(parse_size(lo))}'
               f' to {format_size(top)}, x{factor})')
        out.append(f'{where}.busbw.{format_size(size)}: never measured: '
                   f'{why}; remove it or use a measured size')
    return out


def check_env(site):
    """Lines for every NCCL / RCCL / aws-ofi-nccl / libfabric variable the
    site file sets that those libraries do not read."""
    errors = []
    blocks = [('env', site.env)]
    for tname, t in site.transports.items():
        blocks += [(f'transports.{tname}.env', t.env),
                   (f'transports.{tname}.multi_node_env', t.multi_node_env)]
    for where, env in blocks:
        for key in env or {}:
            why = envvars.unknown(key)
            if why:
                errors.append(f'{site.path}: {where}.{key}: {why}')
    return errors
