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
