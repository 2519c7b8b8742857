"""The configuration a site writes, checked whole before anything runs:
``scripts/validate [--system SYSTEM | --all]``, and the same checks first
in ``scripts/run``, the node health hook and the nightly.

For each system it checks

* ``config/systems/<system>.py``: that it loads and defines ``system`` and
  ``environments``, that the system's ``name`` is the file's, and every key
  of the system, partition and environment dictionaries against ReFrame's
  own configuration schema (``reframe/schemas/config.json`` of the
  installed ReFrame), closed: where ReFrame's schema lists the keys of an
  object but lets others pass (a partition's ``devices``, ``processor``,
  ``sched_options``), an unknown key is an error too, since ReFrame
  ignores it silently (``'num_device'`` made jobs of 1 GPU per node);
  objects whose keys are free (``extras``, ``resources``) stay free;
* ``site/<system>.yaml`` against ``site.schema.json``, then as its loader
  reads it (:func:`ccl_health.sitedata.site.parse`: sizes, placeholders,
  ``benign_warns``, ``actions``, ``fleet``);
* ``reference/<system>.yaml`` against ``reference.schema.json`` (which
  names the known transports, :mod:`ccl_health.sitedata.transports`), then
  as its loader reads it (:func:`ccl_health.judge.reference.parse`);
* across the files: the partitions the site file names
  (``health.partition``) and the reference's partitions exist in the
  system file; ``fleet.reference_partition`` exists in the reference; no
  transport ceiling of the site is below a reference value
  (:func:`ccl_health.sitedata.overrides.check_ceilings`); a system file
  is named for its system; and what :mod:`ccl_health.sitedata.crosscheck`
  checks (environments, collectives, sizes, GPU counts, features,
  launchers and access options, the site's library variables).

Every error is one line naming the file and the key path
(``config/systems/local.py: partitions[gpu].devices[0].num_device: unknown
key ...``), never a traceback.  Nothing is cached across runs."""

import argparse
import copy
import dataclasses
import difflib
import functools
import importlib.util
import json
import os
import re
import sys
from typing import Dict, List

from ccl_health import CclHealthError, read_text, resources
from ccl_health.evidence import nodefacts as node_evidence
from ccl_health.judge import reference as reference_data
from ccl_health.sitedata import crosscheck, overrides, schemas, sysconfig
from ccl_health.evidence.benignwarns import check_benign
from ccl_health.sitedata import site as site_data

#: the GPUs a system file that counts the host's (``local``) is loaded
#: with: some, so that its ``devices`` entry is there to be checked
ASSUMED_GPUS = '2:sm_90'
#: the other count it is loaded with: a system whose GPUs per node change
#: with it counts the host's (no fixed count to check references against)
OTHER_GPUS = '3:sm_90'
#: the longest text of a value quoted in a line
_SHOWN = 80


@dataclasses.dataclass
class Checked:
    """What :func:`check` found: the error lines, notes for the summary
    (a file that is not there where none is needed) and what loaded."""
    systems: List[str]
    errors: List[str] = dataclasses.field(default_factory=list)
    notes: List[str] = dataclasses.field(default_factory=list)
    #: ``{name: system dict}`` of the system files that loaded
    configs: Dict[str, dict] = dataclasses.field(default_factory=dict)
    #: ``{name: environments}`` of the system files that loaded (None:
    #: given, not loaded: the hook's)
    environments: Dict[str, list] = dataclasses.field(default_factory=dict)
    #: the systems whose GPUs per node are the host's (``local``)
    counting: set = dataclasses.field(default_factory=set)
    #: the systems whose file has errors of its own: what it says is not
    #: checked against the other files (one line per mistake)
    broken: set = dataclasses.field(default_factory=set)
    sites: Dict[str, site_data.Site] = dataclasses.field(default_factory=dict)
    references: Dict[str, reference_data.SystemReference] = \
        dataclasses.field(default_factory=dict)

    def summary(self):
        """The one line of a configuration without errors."""
        names = ', '.join(self.systems) or 'none'
        counts = (f'{len(self.configs)} system file(s), {len(self.sites)} '
                  f'site file(s), {len(self.references)} reference file(s)')
        return (f'OK: {len(self.systems)} system(s) ({names}): {counts} '
                f'checked' + (f'; {"; ".join(self.notes)}'
                              if self.notes else ''))

    def one_line(self, how):
        """All errors in one line (the hook's), ``how`` saying the command
        that lists them all."""
        more = len(self.errors) - 1
        return self.errors[0] + (f' (and {more} more: {how})' if more > 0
                                 else '')


# -- ReFrame's configuration schema ------------------------------------------

def _reframe_schema_path():
    """ReFrame's ``schemas/config.json`` (None: no ReFrame installed)."""
    spec = importlib.util.find_spec('reframe')
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], 'schemas',
                        'config.json')


def _reframe_checked(path, system, environments):
    """The lines of a system file's ``system`` and ``environments`` against
    ReFrame's closed schema (:func:`reframe_schema`); what passed before as
    it is now is not checked again (:func:`ccl_health.sitedata.schemas.
    passed_before`: the hook checks its system file on every run)."""
    try:
        with open(_reframe_schema_path() or '', 'rb') as fp:
            digest = schemas.passed_digest('reframe-config',
                                           [system, environments], fp.read())
    except OSError:
        digest = None
    if digest and schemas.passed_before(digest):
        return []
    rfm = reframe_schema()
    if rfm is None:
        return []
    errors = reframe_errors(path, system, 'system', rfm[1]['system'])
    for i, env in enumerate(environments or []):
        errors += reframe_errors(
            path, env, 'environment', rfm[1]['environment'],
            prefix=f'environments[{_label(env, i)}]')
    if digest and not errors:
        schemas.remember_passed(digest)
    return errors


@functools.lru_cache(maxsize=None)
def reframe_schema():
    """``(path, {'system': validator, 'environment': validator})`` from
    the installed ReFrame's ``schemas/config.json``, closed (see the module
    doc); None where ReFrame is not installed."""
    path = _reframe_schema_path()
    if path is None:
        return None
    try:
        with open(path) as fp:
            doc = json.load(fp)
    except (OSError, ValueError):
        return None         # not a ReFrame that ships its schema
    jsonschema = schemas._jsonschema()
    cls = jsonschema.validators.validator_for(doc)
    defs = copy.deepcopy(doc.get('defs', {}))
    closed = set()
    out = {}
    for key, what in (('systems', 'system'), ('environments', 'environment')):
        item = copy.deepcopy(doc['properties'][key]['items'])
        _close(item, defs, closed)
        out[what] = cls(dict(item, defs=defs))
    return path, out


def _close(node, defs, closed):
    """Every object of ``node`` that lists its ``properties`` and says
    nothing of others gets ``additionalProperties: false`` (a definition
    of ``defs`` it refers to, once)."""
    if isinstance(node, list):
        for item in node:
            _close(item, defs, closed)
        return
    if not isinstance(node, dict):
        return
    ref = node.get('$ref', '')
    if ref.startswith('#/defs/'):
        name = ref[len('#/defs/'):]
        if name not in closed and name in defs:
            closed.add(name)
            _close(defs[name], defs, closed)
    if 'properties' in node and 'additionalProperties' not in node and \
            'patternProperties' not in node:
        node['additionalProperties'] = False
    for key in ('properties',):
        for sub in (node.get(key) or {}).values():
            _close(sub, defs, closed)
    for key in ('items', 'additionalProperties', 'anyOf', 'oneOf', 'allOf'):
        if isinstance(node.get(key), (dict, list)):
            _close(node[key], defs, closed)


def _where(doc, parts):
    """The key path of ``parts`` in ``doc``, a list item by its ``name``
    where it has one: ``partitions[gpu].devices[0]``."""
    out, here = '', doc
    for p in parts:
        if isinstance(p, int) and not isinstance(p, bool):
            item = here[p] if isinstance(here, list) and \
                p < len(here) else None
            name = item.get('name') if isinstance(item, dict) else None
            out += f'[{name}]' if isinstance(name, str) and name else f'[{p}]'
        else:
            out += f'{"." if out else ""}{p}'
        try:
            here = here[p]
        except (KeyError, IndexError, TypeError):
            here = None
    return out


def _shown(value):
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + '...'


def reframe_errors(path, doc, what, validator, prefix=''):
    """Lines for ``doc`` (a system or environment dict) against ReFrame's
    closed schema: one per unknown key, one per other error."""
    out = []
    for err in sorted(validator.iter_errors(doc),
                      key=lambda e: [str(p) for p in e.absolute_path]):
        parts = list(err.absolute_path)
        where = prefix + _where(doc, parts)
        if err.validator == 'additionalProperties' and \
                isinstance(err.instance, dict):
            known = sorted(err.schema.get('properties', {}))
            for key in err.instance:
                if key in known:
                    continue
                near = difflib.get_close_matches(str(key), known, n=1)
                out.append(
                    f'{path}: {where + "." if where else ""}{key}: unknown '
                    f'key of a ReFrame {_kind(parts, what)}'
                    + (f' (did you mean {near[0]!r}?)' if near else '')
                    + f' (known: {", ".join(known)})')
            continue
        msg = err.message
        if len(msg) > 2 * _SHOWN:
            msg = f'{_shown(err.instance)} is not valid here ' \
                  f'({err.validator}: {_shown(err.validator_value)})'
        out.append(f'{path}: {where or "top level"}: {msg} (ReFrame\'s '
                   f'configuration schema)')
    return out


def _kind(parts, what):
    """``partition``, ``device``, ... : what the dict at ``parts`` of a
    system or environment dict is, for people."""
    names = [p for p in parts if isinstance(p, str)]
    last = names[-1] if names else ''
    return {'partitions': 'partition', 'devices': 'device',
            'processor': 'processor', 'sched_options': 'sched_options',
            'container_platforms': 'container platform',
            'modules': 'module', 'resources': 'resource',
            'topology': 'topology'}.get(last, what)


# -- one file each -----------------------------------------------------------

def config_path(config_dir, name):
    return os.path.join(config_dir, sysconfig.SYSTEMS, f'{name}.py')


def _assumed_gpus(assumed=ASSUMED_GPUS):
    return node_evidence.detect_gpus({'CCL_HEALTH_ASSUME_GPUS': assumed})


def counts_host_gpus(path, system):
    """Whether the system file ``path`` (loaded as ``system``) counts the
    host's GPUs: loaded with other GPUs, its partitions have others."""
    try:
        other = getattr(node_evidence.load_system_file(
            path, _assumed_gpus(OTHER_GPUS), 'ccl_health_validate'),
            'system', None)
        return [sysconfig.partition_gpus(p)[0]
                for p in other.get('partitions') or []] != \
            [sysconfig.partition_gpus(p)[0]
             for p in system.get('partitions') or []]
    except Exception:
        return True         # not checked: never an error from a guess


def check_config(path, system=None, environments=None):
    """``(system dict or None, error lines)`` of one system file; the file
    is loaded unless its ``system`` (and ``environments``) are given."""
    system, _, errors = load_config(path, system, environments)
    return system, environments, errors


def load_config(path, system=None, environments=None):
    """:func:`check_config`, with the environments: ``(system dict or
    None, environments or None, error lines)``."""
    if system is None:
        try:
            mod = node_evidence.load_system_file(
                path, _assumed_gpus(), 'ccl_health_validate')
        except SyntaxError as err:
            return None, None, [f'{path}: cannot load: line {err.lineno}: '
                          f'SyntaxError: {err.msg}']
        except Exception as err:
            return None, None, [f'{path}: cannot load: {_raised_at(err, path)}'
                          f'{type(err).__name__}: {err}']
        system = getattr(mod, 'system', None)
        environments = getattr(mod, 'environments', None)
        if not isinstance(environments, list):
            return None, None, [f'{path}: environments: '
                          + ('missing' if environments is None else
                             f'{_shown(environments)} is not a list')
                          + ' (the ReFrame environments of the system)']
    if not isinstance(system, dict):
        return None, None, [f'{path}: system: '
                      + ('missing' if system is None else
                         f'{_shown(system)} is not a dict')
                      + ' (the ReFrame system dict)']
    errors = _reframe_checked(path, system, environments)
    for i, patt in enumerate(system.get('hostnames') or []):
        try:
            re.compile(patt)
        except (re.error, TypeError) as err:
            errors.append(f'{path}: hostnames[{i}]: bad pattern '
                          f'{_shown(patt)}: {err}')
    return system, environments, errors


def _raised_at(err, path):
    """``line N: `` of the file ``path`` where ``err`` was raised, or ''."""
    tb, line = err.__traceback__, None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == \
                os.path.abspath(path):
            line = tb.tb_lineno
        tb = tb.tb_next
    return f'line {line}: ' if line else ''


def _label(item, i):
    name = item.get('name') if isinstance(item, dict) else None
    return name if isinstance(name, str) and name else i


def check_site(path, name):
    """``(Site or None, error lines)``: the schema's errors one line each,
    else what the loader refuses."""
    try:
        text = read_text(path, 'site file')
        doc = schemas.load_yaml(text, path)
        if doc is None:
            return None, [f'{path}: top level: empty site file (needs a '
                          f'"transports" mapping)']
        found = schemas.errors(doc, 'site')
        if found:
            return None, [f'{path}: {w}: {m}' for w, m in found]
        return site_data.from_doc(doc, path, name,
                                  benign_check=check_benign), []
    except CclHealthError as err:
        return None, [_line(err)]


def check_reference(path, name):
    """``(SystemReference or None, error lines)``, as :func:`check_site`."""
    try:
        text = read_text(path, 'reference file', reference_data.ReferenceError)
        doc = schemas.load_yaml(text, path, reference_data.ReferenceError)
        if doc is None:
            return None, [f'{path}: top level: empty file']
        found = schemas.errors(doc, 'reference')
        if found:
            return None, [f'{path}: {w}: {m}' for w, m in found]
        ref = reference_data.from_doc(doc, path)
    except CclHealthError as err:
        return None, [_line(err)]
    if ref.system != name:
        return None, [f'{path}: system: {ref.system!r}, but the file is for '
                      f'system {name!r}']
    return ref, []


def _line(err):
    return ' '.join(str(err).split())


# -- across the files --------------------------------------------------------

def check_across(name, cpath, system, site, ref):
    """Lines for what one file says of another."""
    errors = []
    parts = [p.get('name') for p in system.get('partitions') or []
             if isinstance(p, dict)] if system is not None else None
    has = ', '.join(str(p) for p in parts or []) or 'none'
    if site is not None and site.health is not None and parts is not None \
            and site.health.partition not in parts:
        errors.append(f'{site.path}: health.partition: no partition '
                      f'{site.health.partition!r} in system {name!r} of '
                      f'{cpath} (has: {has})')
    if ref is not None and parts is not None:
        for pname in ref.partitions:
            if pname not in parts:
                errors.append(f'{ref.path}: partitions.{pname}: no partition '
                              f'{pname!r} in system {name!r} of {cpath} '
                              f'(has: {has})')
    wanted = (site.fleet or {}).get('reference_partition') \
        if site is not None else None
    if wanted and ref is not None and wanted not in ref.partitions:
        errors.append(f'{site.path}: fleet.reference_partition: {wanted!r} '
                      f'is not a partition of {ref.path} (has: '
                      f'{", ".join(sorted(ref.partitions)) or "none"})')
    try:
        overrides.check_ceilings(site, ref)
    except CclHealthError as err:
        errors.append(_line(err))
    return errors


# -- the whole ---------------------------------------------------------------

def _names(folder, suffix):
    try:
        return [f[:-len(suffix)] for f in os.listdir(folder)
                if f.endswith(suffix) and not f.startswith(('.', '_'))]
    except OSError:
        return []


def check(systems=None, config_dir=None, site_dir=None, reference_dir=None,
          *, every_config=False, missing_ok=False, loaded=None):
    """Check ``systems`` (names; None: every system that has a system,
    site or reference file) in the folders given (default: those in use,
    :mod:`ccl_health.resources`).  ``every_config``: also every other
    system file (ReFrame loads them all into one configuration).
    ``missing_ok``: a named system without a site file (or without any
    file) is a note, not an error (every system without a reference is:
    calibration records one).  ``loaded``: ``{name: (path, system dict)}``
    of system files loaded already (the hook's: the file that matched)."""
    config_dir = config_dir or resources.config_dir()
    site_dir = site_dir or resources.site_dir()
    reference_dir = reference_dir or resources.reference_dir()
    in_config = [n for n, _ in sysconfig.system_files(config_dir)]
    everything = systems is None
    if everything:
        systems = sorted(set(in_config) | set(_names(site_dir, '.yaml')) |
                         set(_names(reference_dir, '.yaml')))
    out = Checked(list(systems))
    if not os.path.isdir(os.path.join(config_dir, sysconfig.SYSTEMS)):
        out.errors.append(f'{os.path.join(config_dir, sysconfig.SYSTEMS)}: '
                          f'no such folder (the ReFrame system files)')
    loaded = loaded or {}
    configs = set(in_config) if every_config else \
        set(in_config) & set(systems)
    for name in sorted(configs | set(loaded)):
        path, given = loaded.get(name, (config_path(config_dir, name), None))
        system, envs, errors = load_config(path, given,
                                           [] if given else None)
        out.errors += errors
        if system is None:
            continue
        if errors:
            out.broken.add(name)
        out.configs[name] = system
        if given is None:
            out.environments[name] = envs
            if system.get('name') != name:
                out.errors.append(
                    f'{path}: name: {system.get("name")!r}, but the file is '
                    f'that of system {name!r} (its site/{name}.yaml and '
                    f'reference/{name}.yaml): write \'name\': {name!r}')
            if counts_host_gpus(path, system):
                out.counting.add(name)
        else:
            out.counting.add(name)      # the host's count: not checked
    paths = {name: path for name, (path, _) in loaded.items()}
    for name in systems:
        out.errors += _check_system(name, out, paths.get(name) or
                                    config_path(config_dir, name), site_dir,
                                    reference_dir, in_config,
                                    missing_ok or everything)
    return out


def _check_system(name, out, cpath, site_dir, reference_dir, in_config,
                  missing_ok):
    spath = os.path.join(site_dir, f'{name}.yaml')
    rpath = os.path.join(reference_dir, f'{name}.yaml')
    errors = []
    if not os.path.exists(spath) and not os.path.exists(rpath) and \
            name not in out.configs:
        if missing_ok:
            return []       # the caller names it
        return [f'{cpath}: no system {name!r}: no system file, site file '
                f'({spath}) or reference file ({rpath}) (systems: '
                f'{", ".join(in_config) or "none"})']
    if name not in out.configs and name not in in_config:
        out.notes.append(f'{name} has no system file ({cpath})')
    site = ref = None
    if os.path.exists(spath):
        site, found = check_site(spath, name)
        errors += found
    elif missing_ok:
        out.notes.append(f'{name} has no site file')
    else:
        errors.append(f'{spath}: no site file for system {name!r} (the '
                      f'checks and the health hook read it)')
    if os.path.exists(rpath):
        ref, found = check_reference(rpath, name)
        errors += found
    else:
        out.notes.append(f'{name} has no reference file (calibrate records '
                         f'one)')
    if site is not None:
        out.sites[name] = site
    if ref is not None:
        out.references[name] = ref
    errors += check_across(name, cpath, out.configs.get(name), site, ref)
    system = None if name in out.broken else out.configs.get(name)
    if system is not None:
        errors += crosscheck.check_system(
            name, cpath, system, out.environments.get(name),
            out.environments, counts_gpus=name in out.counting)
    if ref is not None:
        from ccl_health.evidence import collectives
        errors += crosscheck.check_reference(
            name, cpath, system, site, ref, name in out.counting,
            list(collectives.COLLECTIVES), collectives.canonical)
    if site is not None:
        errors += crosscheck.check_env(site)
    out.notes += crosscheck.unlisted(site, ref)
    return errors


def for_run(system=None, config_dir=None, site_dir=None,
            reference_dir=None, hostname=None):
    """What ``scripts/run`` and the nightly check before ReFrame starts:
    every system file (ReFrame loads them all) and the site and reference
    files of ``system`` (``--system SYSTEM[:PARTITION]``), else of the
    system ReFrame picks for this host."""
    import socket
    name, _, part = (system or '').partition(':')
    out = check([name] if name else [], config_dir, site_dir, reference_dir,
                every_config=True)
    if name or out.errors:
        if part and name in out.configs:
            out.errors += _partition_asked(name, part, out.configs[name],
                                           config_dir)
        return out
    host = hostname or socket.gethostname()
    mine = sysconfig.system_of_host(list(out.configs.items()), host,
                                    lambda it: it[1])
    if mine is None:
        # ReFrame would fall back to its `generic` system and select nothing
        known = '; '.join(f'{n}: {c.get("hostnames") or []}'
                          for n, c in sorted(out.configs.items()))
        out.errors.append(
            f'{os.path.join(config_dir or resources.config_dir(), sysconfig.SYSTEMS)}: '
            f'no system matches this host {host!r} (hostnames of each: '
            f'{known or "no system file"}): give --system SYSTEM, or add a '
            f'pattern of this host to its system\'s hostnames')
        return out
    fname, conf = mine
    name = conf.get('name') or fname
    return check([name], config_dir, site_dir, reference_dir, loaded={
        name: (config_path(config_dir or resources.config_dir(), fname),
               conf)})


def _partition_asked(name, part, system, config_dir):
    """The line for a partition asked (``--system SYSTEM:PART``,
    ``scripts/nightly --partition``) that the system does not have."""
    parts = [p.get('name') for p in system.get('partitions') or []
             if isinstance(p, dict)]
    if part in parts:
        return []
    near = difflib.get_close_matches(part, [str(p) for p in parts], n=1)
    return [f'{config_path(config_dir or resources.config_dir(), name)}: '
            f'partitions: no partition {part!r} in system {name!r} (has: '
            f'{", ".join(str(p) for p in parts) or "none"})'
            + (f'; did you mean {near[0]!r}?' if near else '')
            + f' (asked: {name}:{part})']


def before_run(system=None):
    """:func:`for_run`, for ``scripts/run`` and the nightly: each error on
    one line of stderr, then a :class:`CclHealthError` saying how many."""
    found = for_run(system)
    if found.errors:
        for line in found.errors:
            print(line, file=sys.stderr, flush=True)
        raise CclHealthError(
            f'{len(found.errors)} error(s) in the configuration above '
            f'(scripts/validate checks it); nothing was run')
    return found


# -- scripts/validate ---------------------------------------------------------

HELP = """\
Check the configuration a site writes before anything runs: for one system
or all of them, config/systems/<system>.py (loads; every key of its system,
partition and environment dicts against ReFrame's own configuration schema,
unknown keys included), site/<system>.yaml and reference/<system>.yaml
(their schemas and loaders), and across them (the partitions, environments
and transports named exist where they are used; reference collectives,
sizes and GPU counts are ones a night measures; the checks' features are
there; launchers and access options are well formed; every NCCL, RCCL,
aws-ofi-nccl and libfabric variable set is one they read; no transport
ceiling below a reference).  One line per error naming the file
and the key; exit 0 with one OK line, 1 with errors, 2 when it could not
check.  scripts/run, the health hook and the nightly run the same checks
first."""


def main(argv=None):
    ap = argparse.ArgumentParser(prog='scripts/validate', description=HELP)
    which = ap.add_mutually_exclusive_group()
    which.add_argument('--system', help='check this system only')
    which.add_argument('--all', action='store_true', help='check every '
                       'system with a system, site or reference file (the '
                       'default)')
    ap.add_argument('--config-dir', help='the ReFrame configuration, with '
                    'systems/ (default $CCL_HEALTH_CONFIG_DIR, else config/)')
    ap.add_argument('--site-dir', help='the site files (default '
                    '$CCL_HEALTH_SITE_DIR, else site/)')
    ap.add_argument('--reference-dir', help='the reference files (default '
                    '$CCL_HEALTH_REFERENCE_DIR, else reference/)')
    args = ap.parse_args(argv)
    try:
        out = check([args.system] if args.system else None, args.config_dir,
                    args.site_dir, args.reference_dir)
    except (CclHealthError, OSError) as err:
        print(f'{ap.prog}: error: {err}', file=sys.stderr)
        return 2
    for line in out.errors:
        print(line)
    if out.errors:
        return 1
    line = out.summary()
    if reframe_schema() is None:
        line += ('; ReFrame is not installed: its configuration schema was '
                 'not checked')
    print(line)
    return 0


if __name__ == '__main__':
    sys.exit(main())
