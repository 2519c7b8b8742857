"""Collective sweeps over every transport (intra, net-socket, net-plugin,
net-plugin-gdr), checked against reference/<system>.yaml."""

import reframe as rfm

from ccl_health.rfm.sweep import CollectiveSweepBase


@rfm.simple_test
class AllReduceSweep(CollectiveSweepBase):
    collective = 'all_reduce'
