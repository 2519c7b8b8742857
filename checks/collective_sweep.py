"""Collective sweeps over every transport (intra, net-socket, net-plugin,
net-plugin-gdr), checked against reference/<system>.yaml."""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ccl_health.rfm.sweep import CollectiveSweepBase


@rfm.simple_test
class AllReduceSweep(CollectiveSweepBase):
    collective = 'all_reduce'


@rfm.simple_test
class AllReduceAlgoSweep(CollectiveSweepBase):
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
