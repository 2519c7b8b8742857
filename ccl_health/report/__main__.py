"""``python -m ccl_health.report``: the same as ``scripts/report`` (the
report page when no question is asked; ``failed``, ``runs``, ``detect``,
... otherwise)."""
import sys

from ccl_health.console import report

sys.exit(report(prog='python -m ccl_health.report'))
