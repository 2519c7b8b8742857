"""Per-site facts kept as data: ``site/<system>.yaml``.  What the site
provides (libfabric, the plugin, modules), the environment of each
transport, and how the node health hook checks its nodes (``health``:
partition, launcher, optionally GPUs per node, size, limit).  The checks
never branch on the system name; they read this.

The file is validated against ``ccl_health/sitedata/schemas/site.schema.json``: a
value of the wrong type (``ld_library_path: /opt/x`` where a list belongs,
``modules: x``, an empty ``FOO:`` that YAML reads as null) is an error naming
the file and the key, never a value quietly made of it.  Environment values
are literal text in the job script except ``${NAME}`` references, which the
job's shell expands (:func:`shell_value`); ``{plugin_prefix}``-style
placeholders are filled by the suite."""

import dataclasses
import os
import re
import shlex
from typing import Dict, List, Optional

from ccl_health import CclHealthError, read_text, shell
from ccl_health.sitedata import nodeactions, schemas
from ccl_health.sitedata import transports as registry
from ccl_health.units import parse_size


@dataclasses.dataclass
class TransportSite:
    """The site's data of one transport (what the transport is:
    :mod:`ccl_health.sitedata.transports`)."""
    env: Dict[str, str]
    ld_library_path: List[str]
    max_size: Optional[str]
    #: only when the job spans several nodes (e.g. NCCL_NET, which makes
    #: NCCL fail instead of falling back: wrong on one node)
    multi_node_env: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: environment modules the run loads (e.g. a site's NCCL built with the
    #: plugin, ``nccl/2.19.4-ofi``)
    modules: List[str] = dataclasses.field(default_factory=list)
    #: ``{links, link_gbps}``: replaces the derived bound of an impossible
    #: busbw (:func:`ccl_health.judge.ceiling.bound`); None: derived
    #: Never below a reference value of the transport
    #: (:func:`ccl_health.sitedata.overrides.check_ceilings`)
    ceiling: Optional[dict] = None


@dataclasses.dataclass
class HealthSite:
    """How the node health hook checks a node of this system (the
    ``health`` block): which partition's reference it judges against, how
    it starts its ranks, and optionally the node's GPU count, the probe
    size and the hard limit.  The hook's options and environment variables
    override each."""
    partition: str
    #: the command the hook appends the rank count and the program to
    launcher: List[str]
    #: ``None``: the partition's ``devices`` in the ReFrame configuration
    gpus_per_node: Optional[int] = None
    size: Optional[str] = None
    limit: Optional[float] = None
    #: a prebuilt ``ccl-health-links`` (default: the one in the tests'
    #: install prefix) and NVIDIA's ``nvbandwidth``: what measures the GPU
    #: links (:mod:`ccl_health.evidence.copymatrix`)
    links: Optional[str] = None
    nvbandwidth: Optional[str] = None
    #: text the GPU model must contain (:mod:`ccl_health.evidence.nodestate`)
    gpu_model: Optional[str] = None
    #: fraction of a GPU's memory held by no visible process that counts
    #: as held (:data:`ccl_health.evidence.nodestate.diagnose.MEMORY_HELD_FRACTION`)
    memory_held: Optional[float] = None
    #: the probes' environment: the only source of their transport
    #: settings (the caller's are dropped, :mod:`ccl_health.hook.settings`)
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: the performance database the hook records into; None: nothing
    db: Optional[str] = None


@dataclasses.dataclass
class Site:
    system: str
    path: str
    env: Dict[str, str]
    transports: Dict[str, TransportSite]
    build: dict
    #: the health hook's block; ``None`` where the file has none
    health: Optional[HealthSite] = None
    #: the ``fleet`` block as written (schema-checked; defaults and checks:
    #: :class:`ccl_health.sitedata.fleetconfig.FleetConfig`); ``None``: none
    fleet: Optional[dict] = None
    #: ``[{pattern, why, overrides}]``: NCCL WARN lines declared benign,
    #: checked against the fatal classes (:mod:`ccl_health.evidence.benignwarns`)
    benign_warns: List[dict] = dataclasses.field(default_factory=list)
    #: the ``actions`` block (:mod:`ccl_health.sitedata.nodeactions`): {name:
    #: action} overriding the defaults; empty: none
    actions: Dict[str, str] = dataclasses.field(default_factory=dict)

    def transport(self, name):
        try:
            return self.transports[name]
        except KeyError:
            raise CclHealthError(f'{self.path}: transport {name!r} is not '
                                 f'configured for {self.system}') from None

    def unavailable(self, name):
        """Why transport ``name`` does not run on this site, or None: the
        site file does not list it under ``transports:`` (``net-ib`` where
        there is no InfiniBand, the plugin's where the site has none).
        Every door skips such a transport with this reason; what needs
        its settings anyway (:meth:`transport`) is an error."""
        t = registry.get(name)
        if t.name in self.transports:
            return None
        listed = ', '.join(n for n in registry.NAMES if n in self.transports)
        return (f'{t.name} ({t.title}) is not configured for {self.system}: '
                f'{self.path} lists {listed or "no transport"} under '
                f'transports: (add it there to run it)')

    def render_env(self, transport, values, single_node):
        """The environment of one run: the site's common variables, the
        transport's, and on one node the switches that force the ``net-*``
        transports through the network path (on several nodes they are not
        forced: NCCL must find the network by itself)."""
        t = self.transport(transport)
        env = dict(self.env)
        env.update({k: _fill(v, values, self.path) for k, v in t.env.items()})
        if not single_node:
            env.update({k: _fill(v, values, self.path)
                        for k, v in t.multi_node_env.items()})
        if single_node:
            env.update(registry.get(transport).one_node_env())
        if t.ld_library_path:
            paths = [_fill(p, values, self.path) for p in t.ld_library_path]
            env['LD_LIBRARY_PATH'] = ':'.join(paths + ['${LD_LIBRARY_PATH}'])
        return env


#: the one form of expansion a site value may use: ``${NAME}``


def shell_value(value):
    """``value`` as the right-hand side of ``export K=...`` in a job script.

    Everything is literal text (``shlex.quote``: ``tcp;ofi_rxm`` does not end
    the command, ``$(cmd)``, backticks and ``"; cmd`` run nothing) except
    ``${NAME}`` references, which the job's shell expands: the value is cut
    into literal parts, each quoted, and ``"${NAME}"`` parts, concatenated.
    ``$NAME`` without braces and ``${NAME:-x}`` forms stay literal."""
    return shell.word(value, shell.BRACED, inert=True)


#: ``{plugin_prefix}``, filled by the suite; ``${NAME}`` is the shell's
_PLACEHOLDER = re.compile(r'(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}')


def _fill(text, values, path):
    def one(m):
        try:
            return str(values[m.group(1)])
        except KeyError:
            raise CclHealthError(f'{path}: unknown placeholder '
                                 f'{m.group(0)} in {text!r}') from None
    return _PLACEHOLDER.sub(one, str(text))


def load(site_dir, system, benign_check=None):
    """The site file ``<site_dir>/<system>.yaml``, validated against
    ``ccl_health/sitedata/schemas/site.schema.json``; an error names the file and the
    key.  ``benign_check(items, path)``: the check of its ``benign_warns``
    against the fatal WARN classes
    (:func:`ccl_health.evidence.benignwarns.check_benign`, of a layer above
    this one); without it a file that declares benign WARNs is refused,
    never taken unchecked."""
    path = os.path.join(site_dir, f'{system}.yaml')
    text = read_text(path, 'site file',
                     missing=f'no site file for system {system!r}')
    return parse(text, path, system, benign_check)


def parse(text, path='<site>', system=None, benign_check=None):
    """A :class:`Site` from the text of a site file (``benign_check``: as
    for :func:`load`)."""
    return from_doc(schemas.load_yaml(text, path), path, system,
                    benign_check)


def from_doc(doc, path='<site>', system=None, benign_check=None):
    """A :class:`Site` from the YAML document of a site file
    (``benign_check``: as for :func:`load`)."""
    if doc is None:
        raise CclHealthError(f'{path}: empty site file (needs a '
                             f'"transports" mapping)')
    schemas.validate(doc, 'site', path)
    transports = {}
    for name, raw in doc['transports'].items():
        cap = raw.get('max_size')
        if cap is not None:
            try:
                parse_size(cap)
            except CclHealthError as err:
                raise CclHealthError(f'{path}: transports.{name}.max_size: '
                                     f'{err}') from None
        transports[name] = TransportSite(
            dict(raw.get('env', {})), list(raw.get('ld_library_path', [])),
            None if cap is None else str(cap),
            dict(raw.get('multi_node_env', {})), list(raw.get('modules', [])),
            raw.get('ceiling'))
    for name, where, text_ in _placeholders(doc):
        _check_placeholders(path, name, where, text_)
    if system and doc.get('system', system) != system:
        raise CclHealthError(f'{path}: system: {doc["system"]!r}, but the '
                             f'file is for system {system!r}')
    return Site(str(doc.get('system', system or '')), path,
                dict(doc.get('env', {})), transports, doc.get('build', {}),
                _health(doc.get('health'), path),
                _fleet(doc.get('fleet'), path, doc['transports']),
                _benign(doc.get('benign_warns'), path, benign_check),
                _actions(doc.get('actions'), path))


def _benign(items, path, check):
    if not items:
        return []
    if check is None:
        raise CclHealthError(f'{path}: benign_warns: not checked against the '
                             f'fatal WARN classes here (this loader was '
                             f'given no check), so not taken')
    return check(items, path)


def _actions(raw, path):
    return nodeactions.check_site_actions(raw, path)


def _fleet(raw, path, listed):
    """The ``fleet`` block, checked whole now (a bad size, an unknown
    transport or one the file does not list is an error naming the file
    and the key, before any run)."""
    if raw is None:
        return None
    from ccl_health.sitedata.fleetconfig import FleetConfig
    FleetConfig.from_dict(raw, path, listed)
    return dict(raw)


def _health(raw, path):
    """The ``health`` block (already of the schema's types); what a schema
    cannot say (a launcher command line that does not split, a size that is
    none) is an error naming the file and the key."""
    if raw is None:
        return None
    try:
        launcher = shlex.split(raw['launcher'])
    except ValueError as err:
        raise CclHealthError(f'{path}: health.launcher: {raw["launcher"]!r}: '
                             f'{err}') from None
    if not launcher:
        raise CclHealthError(f'{path}: health.launcher: empty command')
    size = raw.get('size')
    if size is not None:
        try:
            if parse_size(size) <= 0:
                raise CclHealthError('must be positive')
        except CclHealthError as err:
            raise CclHealthError(f'{path}: health.size: {err}') from None
    limit = raw.get('limit')
    return HealthSite(raw['partition'], launcher, raw.get('gpus_per_node'),
                      None if size is None else str(size),
                      None if limit is None else float(limit),
                      raw.get('links'), raw.get('nvbandwidth'),
                      raw.get('gpu_model'), raw.get('memory_held'),
                      dict(raw.get('env') or {}), raw.get('db'))


#: what a plugin transport's values may name: ``{plugin_prefix}/lib``
PLACEHOLDERS = ('plugin_library', 'plugin_prefix', 'libfabric_prefix')


def _placeholders(doc):
    """``(transport, key path, text)`` of the transport values that are
    filled with ``str.format`` placeholders (``{plugin_prefix}``)."""
    for name, raw in doc['transports'].items():
        for key in ('env', 'multi_node_env'):
            for k, v in raw.get(key, {}).items():
                yield name, f'transports.{name}.{key}.{k}', v
        for i, p in enumerate(raw.get('ld_library_path', [])):
            yield name, f'transports.{name}.ld_library_path[{i}]', p


def _check_placeholders(path, transport, where, text):
    known = PLACEHOLDERS if registry.get(transport).uses_plugin else ()
    for m in _PLACEHOLDER.finditer(text):
        if m.group(1) not in known:
            raise CclHealthError(
                f'{path}: {where}: unknown placeholder {m.group(0)} in '
                f'{text!r} (known here: '
                f'{", ".join("{%s}" % k for k in known) or "none"}; '
                f'${{NAME}} is left to the shell)')
