"""What the report's page and its plots both group by: the key of a series
(one system, partition, kind, collective, transport, nodes, ranks, algo) and
the verdicts of a case that is marked broken on a trend plot."""

from ccl_health.judge.history import HEALTHY
from ccl_health.judge.verdicts import FAILING, UNJUDGED

#: the key of a series (plots, summary rows)
SERIES = ('system', 'partition', 'kind', 'collective', 'transport', 'nodes',
          'ranks', 'algo')
#: verdicts marked on the trend plots: every failure or unjudged case that is
#: not a measured value (those are plotted as values)
BROKEN = tuple(v for v in FAILING + UNJUDGED if v not in HEALTHY + ('drop',))
