"""Message sizes: parse ``8``, ``64K``, ``1MiB``, ``8G`` and print them back."""

import re

from ccl_health import CclHealthError

_FACTORS = {'': 1, 'b': 1, 'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30,
            't': 1 << 40}
_SIZE_RE = re.compile(r'^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$', re.IGNORECASE)


def parse_size(text):
    """Return the number of bytes in ``text`` (binary prefixes, as nccl-tests
    reads ``-b``/``-e``)."""
    if isinstance(text, bool):
        raise CclHealthError(f'not a message size: {text!r}')
    if isinstance(text, int):
        return text
    m = _SIZE_RE.match(str(text))
    if not m:
        raise CclHealthError(f'not a message size: {text!r} '
                             f'(use e.g. 8, 64K, 1MiB, 8G)')
    return int(m.group(1)) * _FACTORS[m.group(2).lower()]


def format_size(nbytes):
    """``1073741824`` -> ``'1GiB'``; sizes that are not a whole multiple of a
    unit keep the smaller unit."""
    for unit, factor in (('TiB', 1 << 40), ('GiB', 1 << 30),
                         ('MiB', 1 << 20), ('KiB', 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f'{nbytes // factor}{unit}'
    return f'{nbytes}B'


#: the night's sweep: ``(min_size, max_size, step_factor)`` of the
#: collective sweeps (``-S min_size=...`` changes a run, the site's
#: ``max_size`` caps a transport); what a reference size must be one of
SWEEP = ('8', '8G', 2)


def size_sweep(min_bytes, max_bytes, factor=2):
    """The sizes nccl-tests runs for ``-b min -e max -f factor``."""
    lo, hi = parse_size(min_bytes), parse_size(max_bytes)
    if lo <= 0 or hi < lo or factor < 2:
        raise CclHealthError(f'bad size sweep: {min_bytes}..{max_bytes} '
                             f'x{factor}')
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= factor
    return sizes
