"""What the report's page and its plots both group by: a history series
(:data:`ccl_health.judge.series.STORED_ORDER`) over all its nodes."""

from ccl_health.judge.series import NODE, STORED_ORDER

#: the key of a series on the page (plots, summary rows): the history key
#: without its node (a health probe's nodes together)
SERIES = tuple(c for c in STORED_ORDER if c != NODE)
