"""Per-site facts kept as data: ``site/<system>.yaml``.  What the site
provides (libfabric, the plugin, modules) and the environment of each
transport.  The checks never branch on the system name; they read this."""

import dataclasses
import os
import shlex
from typing import Dict, List, Optional

import yaml

from . import TRANSPORTS, CclHealthError


@dataclasses.dataclass
class TransportSite:
    env: Dict[str, str]
    ld_library_path: List[str]
    max_size: Optional[str]
    uses_plugin: bool
    #: only when the job spans several nodes (e.g. NCCL_NET, which makes
    #: NCCL fail instead of falling back: wrong on one node)
    multi_node_env: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: environment modules the run loads (e.g. a site's NCCL built with the
    #: plugin, ``nccl/2.19.4-ofi``)
    modules: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Site:
    system: str
    path: str
    env: Dict[str, str]
    transports: Dict[str, TransportSite]
    build: dict
    launcher_options: List[str]

    def transport(self, name):
        try:
            return self.transports[name]
        except KeyError:
            raise CclHealthError(f'{self.path}: transport {name!r} is not '
                                 f'configured for {self.system}') from None

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
        if single_node and transport != 'intra':
            env.update({'NCCL_P2P_DISABLE': '1', 'NCCL_SHM_DISABLE': '1'})
        if t.ld_library_path:
            paths = [_fill(p, values, self.path) for p in t.ld_library_path]
            env['LD_LIBRARY_PATH'] = ':'.join(paths + ['${LD_LIBRARY_PATH}'])
        return env


def shell_value(value):
    """``value`` as the right-hand side of ``export K=...`` in a job script:
    quoted (``tcp;ofi_rxm`` must not end the command), but with ``${VAR}``
    still expanded."""
    value = str(value)
    if '$' in value:
        return '"' + value.replace('"', '\\"') + '"'
    return shlex.quote(value)


def _fill(text, values, path):
    try:
        return str(text).format(**values)
    except KeyError as err:
        raise CclHealthError(f'{path}: unknown placeholder {err} in '
                             f'{text!r}') from None


def load(site_dir, system):
    path = os.path.join(site_dir, f'{system}.yaml')
    try:
        with open(path) as fp:
            doc = yaml.safe_load(fp)
    except FileNotFoundError:
        raise CclHealthError(f'{path}: no site file for system '
                             f'{system!r}') from None
    except yaml.YAMLError as err:
        raise CclHealthError(f'{path}: not valid YAML: {err}') from None
    if not isinstance(doc, dict) or not isinstance(doc.get('transports'),
                                                   dict):
        raise CclHealthError(f'{path}: needs a "transports" mapping')
    transports = {}
    for name, raw in doc['transports'].items():
        if name not in TRANSPORTS:
            raise CclHealthError(f'{path}: transports.{name}: unknown '
                                 f'transport (known: {", ".join(TRANSPORTS)})')
        raw = raw or {}
        unknown = set(raw) - {'env', 'multi_node_env', 'ld_library_path',
                              'max_size', 'modules'}
        if unknown:
            raise CclHealthError(f'{path}: transports.{name}: unknown key(s) '
                                 f'{", ".join(sorted(unknown))}')
        transports[name] = TransportSite(
            {k: str(v) for k, v in (raw.get('env') or {}).items()},
            list(raw.get('ld_library_path') or []),
            raw.get('max_size'), name.startswith('net-plugin'),
            {k: str(v) for k, v in (raw.get('multi_node_env') or {}).items()},
            list(raw.get('modules') or []))
    return Site(str(doc.get('system', system)), path,
                {k: str(v) for k, v in (doc.get('env') or {}).items()},
                transports, doc.get('build') or {},
                list(doc.get('launcher_options') or []))
