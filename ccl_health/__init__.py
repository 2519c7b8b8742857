"""ccl-health: the pure logic of the suite (parsers, transport proof,
references, verdicts, build recipes).  Nothing here imports ReFrame; the
ReFrame base tests live in :mod:`ccl_health.rfm`."""

__version__ = '0.1.0'


class CclHealthError(Exception):
    """An error the user must fix (bad input, missing file); its message
    names the problem."""


#: The transports the suite knows, in the order they are reported: the
#: names of the records of :mod:`ccl_health.sitedata.transports`.
from ccl_health.sitedata.transports import NAMES as TRANSPORTS  # noqa: E402

__all__ = ['CclHealthError', 'TRANSPORTS', '__version__']
