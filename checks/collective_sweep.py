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


@rfm.simple_test
class CollectiveSweep(CollectiveSweepBase):
    """Every other collective of nccl-tests, each with its own busbw factor
    (nccl-tests computes it; ccl_health.collectives says which), reference
    and transport proof.  ``collective`` is a variable of the base class,
    which ReFrame does not let a subclass turn into a parameter: the
    parameter is ``coll`` and sets it (as AllReduceAlgoSweep does for
    ``algo``).

    Not tagged 'nightly' (yet): the default ``scripts/run`` would then run
    6 x 4 more cases, and the replay test of the healthy node counts the
    nightly cases.  Run it with ``--tag=collectives`` or ``-n
    CollectiveSweep``."""
    coll = parameter(['all_gather', 'reduce_scatter', 'broadcast', 'reduce',
                      'alltoall', 'sendrecv'])
    tags = {'sweep', 'collectives'}

    @run_after('init')
    def set_collective(self):
        self.collective = self.coll
        self.descr = f'{self.collective} sweep over {self.transport}'
