"""ccl-health: the pure logic of the suite (parsers, transport proof,
references, verdicts, build recipes).  Nothing here imports ReFrame; the
ReFrame base tests live in :mod:`ccl_health.rfm`."""

__version__ = '0.1.0'


class CclHealthError(Exception):
    """An error the user must fix (bad input, missing file); its message
    names the problem."""


def read_text(path, what, error=CclHealthError, missing=None,
              encoding=None):
    """The text of the file at ``path``, a ``what`` (``'site file'``); a
    file that cannot be read or is not text (in ``encoding``, default the
    locale's) is one ``error`` naming it (``missing``: the message of one
    that does not exist, when it says more than "cannot read")."""
    try:
        with open(path, encoding=encoding) as fp:
            return fp.read()
    except FileNotFoundError as err:
        if missing is None:
            raise error(f'{path}: cannot read the {what}: '
                        f'{err.strerror or err}') from None
        raise error(f'{path}: {missing}') from None
    except OSError as err:
        raise error(f'{path}: cannot read the {what}: '
                    f'{err.strerror or err}') from None
    except UnicodeDecodeError:
        raise error(f'{path}: not a {what} (not text: a binary '
                    f'file?)') from None


__all__ = ['CclHealthError', '__version__', 'read_text']
