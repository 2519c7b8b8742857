"""Collective sweeps over every transport (intra, net-socket, net-plugin,
net-plugin-gdr), checked against reference/<system>.yaml.

The plugin transports are checks of their own (``...PluginSweep``): only
they depend on the plugin and libfabric builds, so a plugin that does not
build fails them (build-failed) and leaves intra and net-socket running."""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ccl_health.rfm.base import PLUGIN_TRANSPORTS, PluginBuildMixin
from ccl_health.rfm.sweep import CollectiveSweepBase


@rfm.simple_test
class AllReduceSweep(CollectiveSweepBase):
    collective = 'all_reduce'


@rfm.simple_test
class AllReducePluginSweep(PluginBuildMixin, CollectiveSweepBase):
    collective = 'all_reduce'
    transport = parameter(PLUGIN_TRANSPORTS)


@rfm.simple_test
class AllReduceAlgoSweep(PluginBuildMixin, CollectiveSweepBase):
    """NCCL_ALGO default / Ring / Tree at scale over the plugin: where Ring
    collapses at mid sizes on many nodes (Frontier, 64 nodes)."""
    collective = 'all_reduce'
    transport = parameter(['net-plugin'])
    nccl_algo = parameter(['default', 'Ring', 'Tree'])
    num_nodes = 64
    tags = {'scale'}

    @run_after('init')
    def set_algo(self):
        self.algo = self.nccl_algo


@rfm.simple_test
class CollectiveSweep(CollectiveSweepBase):
    """Every other collective of nccl-tests, each with its own busbw factor
    (nccl-tests computes it; ccl_health.collectives says which), reference
    and transport proof.  ``collective`` is a variable of the base class,
    which ReFrame does not let a subclass turn into a parameter: the
    parameter is ``coll`` and sets it.

    Not in the nightly run, on purpose (``--mode collectives``,
    ``--tag=collectives`` or ``-n CollectiveSweep`` run it): the faults a
    night brings (a lost NVLink, a NIC down, a plugin falling back, GDR
    gone) show in the all_reduce sweep of every transport, which is
    nightly; a collective of its own goes wrong with a software change
    (NCCL, the plugin, libfabric), after which this runs.  Nightly it would
    add 24 full sweeps (6 collectives x 4 transports, 8 B to 8 GiB) per
    partition, most of them without a reference on the production sites
    (no-reference every night until calibrated)."""
    coll = parameter(['all_gather', 'reduce_scatter', 'broadcast', 'reduce',
                      'alltoall', 'sendrecv'])
    tags = {'sweep', 'collectives'}

    @run_after('init')
    def set_collective(self):
        self.collective = self.coll
        self.descr = f'{self.collective} sweep over {self.transport}'


@rfm.simple_test
class CollectivePluginSweep(PluginBuildMixin, CollectiveSweep):
    """:class:`CollectiveSweep` over the network plugin."""
    transport = parameter(PLUGIN_TRANSPORTS)
