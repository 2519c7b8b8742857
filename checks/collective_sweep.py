"""Collective sweeps over every transport (intra, net-socket, net-ib,
net-ib-gdr, net-plugin, net-plugin-gdr), checked against
reference/<system>.yaml.  A transport the site file does not list is
skipped with that reason.

The plugin transports are checks of their own (``...PluginSweep``): only
they depend on the plugin and libfabric builds, so a plugin that does not
build fails them (build-failed) and leaves intra and net-socket running;
on a site that lists no plugin transport nothing is built for them.

The binaries are the site's own where ``site/<system>.yaml`` names them
(``build.nccl_tests.prefix`` / ``build.rccl_tests.prefix``: the sweep as
is, hpctestlib's ``osu_run``), else they are built from the pinned sources
first (:class:`~ccl_health.rfm.sweep.BuildAndRunSweepBase`,
``osu_build_run``):
two variants of one test, the same names either way."""

import reframe as rfm
from reframe.core.builtins import parameter

from ccl_health.evidence.collectives import SWEPT
from ccl_health.rfm.base import PLUGIN_TRANSPORTS, plugin_mixin
from ccl_health.rfm.sweep import sweep_base

#: the variant this system's site file asks for
SweepBase = sweep_base()
#: the plugin build where the site lists a plugin transport, else none
PluginMixin = plugin_mixin()


@rfm.simple_test
class AllReduceSweep(SweepBase):
    collective = parameter(['all_reduce'])


@rfm.simple_test
class AllReducePluginSweep(PluginMixin, SweepBase):
    collective = parameter(['all_reduce'])
    transport = parameter(PLUGIN_TRANSPORTS)


@rfm.simple_test
class AllReduceAlgoSweep(PluginMixin, SweepBase):
    """NCCL_ALGO default / Ring / Tree at scale over the plugin: where Ring
    collapses at mid sizes on many nodes (Frontier, 64 nodes)."""
    collective = parameter(['all_reduce'])
    transport = parameter(['net-plugin'])
    algo = parameter(['default', 'Ring', 'Tree'])
    num_nodes = 64
    tags = {'scale'}


@rfm.simple_test
class CollectiveSweep(SweepBase):
    """Every other collective of nccl-tests / rccl-tests, each with its own
    busbw factor (the program computes it; ccl_health.evidence.collectives says
    which), reference and transport proof.

    Not in the nightly run, on purpose (``--mode collectives``,
    ``--tag=collectives`` or ``-n CollectiveSweep`` run it): the faults a
    night brings (a lost NVLink, a NIC down, a plugin falling back, GDR
    gone) show in the all_reduce sweep of every transport, which is
    nightly; a collective of its own goes wrong with a software change
    (NCCL, the plugin, libfabric), after which this runs.  Nightly it would
    add 24 full sweeps (6 collectives x 4 transports, 8 B to 8 GiB) per
    partition, most of them without a reference on the production sites
    (no-reference every night until calibrated)."""
    collective = parameter([c for c in SWEPT if c != 'all_reduce'])
    tags = {'sweep', 'collectives'}


@rfm.simple_test
class CollectivePluginSweep(PluginMixin, CollectiveSweep):
    """:class:`CollectiveSweep` over the network plugin."""
    transport = parameter(PLUGIN_TRANSPORTS)
