"""ReFrame base tests of ccl-health (the only part of the package that
imports ReFrame).  Site specifics come from ``site/`` and ``reference/``."""
