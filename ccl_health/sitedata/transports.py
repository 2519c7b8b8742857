"""The transports the suite knows: one record each, read by every module
that needs to know what a transport is (the proof, the site environment,
the ideal bandwidth, the ReFrame parameters, the report order).  Adding a
transport is adding one record here, its site data and its tests.

A transport is a way NCCL / RCCL connects the ranks of a run:

* ``intra``: one node, GPUs connected directly (P2P over NVLink / xGMI /
  PCIe, or shared memory);
* ``net-socket``: NCCL's builtin TCP sockets (``NET/Socket``);
* ``net-ib``: NCCL's builtin InfiniBand / RoCE verbs network (``NET/IB``),
  no plugin; GPUDirect RDMA where the nodes allow it (``/GDRDMA``), not
  required;
* ``net-ib-gdr``: the same with GPUDirect RDMA on every network path (a
  node where it is lost, e.g. ``nvidia_peermem`` not loaded, falls back);
* ``net-plugin``: a network plugin (aws-ofi-nccl / aws-ofi-rccl over
  libfabric), GPUDirect RDMA off;
* ``net-plugin-gdr``: the plugin with GPUDirect RDMA on every network path.

On one node the network transports are forced through the network by
disabling P2P and SHM (:data:`ONE_NODE_NETWORK_ENV`); on several nodes NCCL
must find the network by itself.

A site runs the transports its site file lists (``transports:`` of
``site/<system>.yaml``); every other one is skipped with that reason in
every door (:meth:`ccl_health.sitedata.site.Site.unavailable`).

The bound of an impossible busbw is not a transport's constant: it is
derived per case from the links (:func:`ccl_health.judge.ceiling.bound`)."""

import dataclasses
from typing import Optional

from ccl_health import CclHealthError

#: NCCL's builtin networks, by the name on ``via NET/<name>/<dev>`` lines
#: and on ``Using network <name>`` (src/transport/net_socket.cc,
#: net_ib.cc); any other name is a plugin's (aws-ofi-nccl says "Libfabric",
#: "AWS Libfabric" or "OFI"; NCCL's external IB plugin "IBext_v8").
BUILTIN_NETS = ('Socket', 'IB')

#: ``network`` of the transports that go over a plugin: any network name
#: that is not one of :data:`BUILTIN_NETS`
PLUGIN = 'plugin'

#: what forces one node's ranks through the network: no P2P, no SHM
ONE_NODE_NETWORK_ENV = {'NCCL_P2P_DISABLE': '1', 'NCCL_SHM_DISABLE': '1'}

#: where the ideal bandwidth of a transport comes from
IDEAL_NVLINK = 'nvlink'       # the GPU's NVLink links x per-link rate
IDEAL_NIC = 'nic'             # the line rate of the NICs one GPU uses


@dataclasses.dataclass(frozen=True)
class Transport:
    """One transport.  The proof rule is ``network`` and ``needs_gdr``: a
    run is this transport when every network channel of every rank goes
    ``via NET/<network>`` (with ``/GDRDMA`` on each when ``needs_gdr``), or,
    for ``network=None``, when no channel uses a network and some use P2P
    or SHM."""
    name: str
    #: what it is, in the proof's reasons ("fell back to NET/Socket
    #: instead of NCCL's builtin NET/IB")
    title: str
    #: the proof's reason when it passes, before the channels seen
    #: (``{plugin}``: the plugin's name)
    passed: str
    #: the name on ``via NET/<name>`` lines (one of :data:`BUILTIN_NETS`),
    #: :data:`PLUGIN` for any plugin's, None for no network (intra-node)
    network: Optional[str]
    #: runs over the net plugin: needs its build (and libfabric's); the
    #: plugin's placeholders may appear in its site data
    uses_plugin: bool = False
    #: every network path must show ``/GDRDMA``
    needs_gdr: bool = False
    #: on one node, :data:`ONE_NODE_NETWORK_ENV` forces it through the
    #: network (on several nodes the network is used anyway)
    forces_network_on_one_node: bool = True
    #: :data:`IDEAL_NVLINK` or :data:`IDEAL_NIC`
    ideal_from: str = IDEAL_NIC

    def __str__(self):
        return self.name

    @property
    def uses_network(self):
        return self.network is not None

    @property
    def builtin(self):
        """Runs over one of NCCL's builtin networks."""
        return self.network in BUILTIN_NETS

    def one_node_env(self):
        """The switches that force this transport through the network on
        one node (empty for intra-node)."""
        return dict(ONE_NODE_NETWORK_ENV) if \
            self.forces_network_on_one_node else {}

    def accepts_path(self, key):
        """Whether the channel key ``key`` (``NET/<name>[/GDRDMA]``,
        ``P2P/<kind>``, ``SHM/<kind>``, from :mod:`ccl_health.evidence.debuglog`) is
        a path of this transport."""
        if self.network is None:
            return key.startswith(('P2P/', 'SHM/'))
        if not key.startswith('NET/'):
            return False
        name = key.split('/')[1]
        if self.network == PLUGIN:
            if name in BUILTIN_NETS:
                return False
        elif name != self.network:
            return False
        return not self.needs_gdr or key.endswith('/GDRDMA')


#: every transport, in the order they are reported; among the network ones
#: also from the weakest to the strongest (a run whose ranks or channels
#: differ proves the weakest of them)
REGISTRY = (
    Transport('intra', 'intra-node', 'intra-node only', None,
              forces_network_on_one_node=False, ideal_from=IDEAL_NVLINK),
    Transport('net-socket', 'NET/Socket', 'NCCL socket transport', 'Socket'),
    Transport('net-ib', "NCCL's builtin NET/IB", "NCCL's builtin NET/IB",
              'IB'),
    Transport('net-ib-gdr', "NCCL's builtin NET/IB with GPUDirect RDMA",
              "NCCL's builtin NET/IB with GPUDirect RDMA", 'IB',
              needs_gdr=True),
    Transport('net-plugin', 'the net plugin', 'plugin {plugin}', PLUGIN,
              uses_plugin=True),
    Transport('net-plugin-gdr', 'the net plugin with GPUDirect RDMA',
              'plugin {plugin} with GPUDirect RDMA', PLUGIN,
              uses_plugin=True, needs_gdr=True),
)

_BY_NAME = {t.name: t for t in REGISTRY}

#: the names, in report order
NAMES = tuple(t.name for t in REGISTRY)


def get(name):
    """The record of transport ``name`` (a record is returned as is)."""
    if isinstance(name, Transport):
        return name
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise CclHealthError(f'unknown transport {name!r}; known: '
                             f'{", ".join(NAMES)}') from None


def find(name):
    """The record of ``name``, or None when it is not a transport."""
    return _BY_NAME.get(name) if isinstance(name, str) else name


def plugin_names():
    """The transports that run over the net plugin (need its build)."""
    return [t.name for t in REGISTRY if t.uses_plugin]


def builtin_names():
    """The transports that need no build of their own."""
    return [t.name for t in REGISTRY if not t.uses_plugin]


def fleet_default(listed):
    """The transport of the fleet's pair and group steps where the site
    file's ``fleet:`` block names none: of the transports ``listed`` (the
    site file's ``transports:``), the network one of the strongest network
    that does not require GPUDirect RDMA (``net-plugin``, else ``net-ib``,
    else ``net-socket``); None when none is listed."""
    fit = [t for t in REGISTRY if t.name in set(listed or ())
           and t.uses_network and not t.needs_gdr]
    return fit[-1].name if fit else None


def order(name):
    """The report position of ``name`` (unknown names last)."""
    return NAMES.index(name) if name in _BY_NAME else len(NAMES)


def proven_by(keys):
    """The transport the channel keys ``keys`` prove, or None when none is
    a path of any transport: the strongest network transport that accepts
    every network key; where none does (ranks or channels used different
    networks), the weakest that accepts any; without network keys,
    intra-node when there are P2P/SHM keys."""
    nets = [k for k in keys if k.startswith('NET/')]
    network = [t for t in REGISTRY if t.uses_network]
    if nets:
        every = [t for t in network if all(t.accepts_path(k) for k in nets)]
        if every:
            return every[-1]
        return next((t for t in network
                     if any(t.accepts_path(k) for k in nets)), None)
    return next((t for t in REGISTRY if not t.uses_network
                 and any(t.accepts_path(k) for k in keys)), None)


# -- the transport asked: one rule, read from an environment ----------------

#: the path types ``NCCL_NET_GDR_LEVEL`` may name, nearest first, exactly as
#: NCCL spells them (``topoPathTypeStr`` up to ``PATH_SYS``:
#: src/graph/topo.cc:34, src/include/graph.h:117-145 of NCCL 2.30.7)
GDR_LEVELS = ('LOC', 'NVL', 'NVB', 'C2C', 'PIX', 'PXB', 'P2C', 'PXN', 'PHB',
              'SYS')
#: the levels of NCCL's old numbering, by number (``levelsOldToNew``,
#: src/graph/paths.cc:243): 0 is LOC, 5 and above are SYS
_GDR_OLD_LEVELS = ('LOC', 'PIX', 'PXB', 'PHB', 'SYS', 'SYS')


def _strtol(text):
    """The number C's ``strtol(text, NULL, 0)`` reads from ``text`` that
    starts with a digit (``0x`` hexadecimal, a leading ``0`` octal, else
    decimal; the digits up to the first that does not fit)."""
    for prefix, digits, base in (('0x', '0123456789abcdef', 16),
                                 ('0', '01234567', 8), ('', '0123456789', 10)):
        if text.lower().startswith(prefix):
            body = text[len(prefix):]
            n = 0
            while n < len(body) and body[n].lower() in digits:
                n += 1
            if n:
                return int(body[:n], base)
            if prefix:          # "0x" alone, "0" alone: strtol reads the 0
                return 0
    return 0


def gdr_level(value):
    """The level NCCL reads from ``NCCL_NET_GDR_LEVEL=value`` (a name of
    :data:`GDR_LEVELS`), or None where it keeps its default (unset, empty,
    or a value it does not read: a name in another case, a leading sign or
    space).  NCCL's ``ncclGetLevel`` (src/graph/paths.cc:244-279): an exact
    name, else the old numbering from a leading digit (``strtol``, clamped
    to 5)."""
    if value is None:
        return None
    value = str(value)
    if value in GDR_LEVELS:
        return value
    if value[:1].isdigit() and value[:1].isascii():
        return _GDR_OLD_LEVELS[min(_strtol(value), len(_GDR_OLD_LEVELS) - 1)]
    return None


def asked_from_env(env, complete=True, plugin=None):
    """The transport the environment ``env`` asks for (a name of
    :data:`NAMES`), or None where it does not say.  The one rule of the
    suite: the sweep's programs, the framework tool, the rehearsal's
    stand-in and the transport proof of a debug log all read it here.

    ``complete``: ``env`` is the whole environment of the run, as the
    site's rows set it up (a variable not in it is unset); False: it is
    what NCCL's debug log echoes (``<VAR> set by environment to <value>``),
    where a variable not echoed says nothing.  ``plugin``: a plugin the
    log shows asked for besides the environment (named, looked for, or
    found and failed).

    * complete, and ``NCCL_P2P_DISABLE`` is not 1: ``intra`` (the one-node
      rows of the network transports disable P2P and SHM,
      :data:`ONE_NODE_NETWORK_ENV`);
    * ``NCCL_NET`` naming one of NCCL's builtin networks (any case): that
      transport; naming another network: the plugin;
    * ``NCCL_NET_PLUGIN`` set to a plugin (not ``none``), or ``plugin``:
      the plugin;
    * the plugin is ``net-plugin-gdr`` when ``NCCL_NET_GDR_LEVEL`` is a
      level NCCL reads (:func:`gdr_level`) other than ``LOC``: any other
      level lets GPUDirect RDMA be used on the paths it covers; ``LOC``
      (``0``) never uses it, and unset or unread it is NCCL's default
      (``PXB``, ``P2C`` on C2C systems, by topology: no ask);
    * otherwise NCCL's own sockets: in a complete environment always (no
      plugin, no network named); from a log when it echoes
      ``NCCL_IB_DISABLE``, ``NCCL_P2P_DISABLE`` and ``NCCL_SHM_DISABLE``
      all 1."""
    if complete and env.get('NCCL_P2P_DISABLE') != '1':
        return 'intra'
    level = gdr_level(env.get('NCCL_NET_GDR_LEVEL'))
    on_plugin = 'net-plugin-gdr' if level not in (None, 'LOC') else \
        'net-plugin'
    net = env.get('NCCL_NET')
    if net:
        for t in REGISTRY:
            if t.builtin and t.network.lower() == net.lower():
                return t.name
        return on_plugin
    named = env.get('NCCL_NET_PLUGIN', '')
    if plugin or (named and named.lower() != 'none'):
        return on_plugin
    if complete or all(env.get(k) == '1' for k in (
            'NCCL_IB_DISABLE', 'NCCL_P2P_DISABLE', 'NCCL_SHM_DISABLE')):
        return 'net-socket'
    return None
