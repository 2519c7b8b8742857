"""ccl-health: the pure logic of the suite (parsers, transport proof,
references, verdicts, build recipes).  Nothing here imports ReFrame; the
ReFrame base tests live in :mod:`ccl_health.rfm`."""

__version__ = '0.1.0'

#: The transports the suite knows, in the order they are reported.
TRANSPORTS = ('intra', 'net-socket', 'net-plugin', 'net-plugin-gdr')


class CclHealthError(Exception):
    """An error the user must fix (bad input, missing file); its message
    names the problem."""
