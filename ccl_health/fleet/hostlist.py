"""Slurm node lists (``n[1-3,7],m[01-02]``) as node names, without Slurm:
for ``--simulate`` and the fleet block's ``topology`` / ``topology_conf``
(with Slurm, ``scontrol show hostnames`` does it)."""

import re
from typing import List

from ccl_health import CclHealthError


def expand_hostlist(text: str) -> List[str]:
    """``n[1-3,7],m[01-02]`` as names, as Slurm writes them (for
    ``--simulate``; with Slurm, ``scontrol show hostnames`` does it)."""
    out, depth, cur = [], 0, ''
    parts = []
    for ch in text:
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
            continue
        depth += ch == '['
        depth -= ch == ']'
        cur += ch
    parts.append(cur)
    for part in (p.strip() for p in parts):
        if not part:
            continue
        m = re.fullmatch(r'([^\[]*)\[([^\]]+)\](.*)', part)
        if not m:
            out.append(part)
            continue
        pre, body, post = m.groups()
        for rng in body.split(','):
            lo, _, hi = rng.partition('-')
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise CclHealthError(f'node list {text!r}: bad range {rng!r}')
            for i in range(int(lo), int(hi or lo) + 1):
                for tail in expand_hostlist(post) if post else ['']:
                    out.append(f'{pre}{str(i).zfill(len(lo))}{tail}')
    return out


def natural_key(name):
    """The sort key of a node name as people count: ``n2`` before ``n10``
    (its digit runs compared as numbers)."""
    import re
    return [(0, int(part), '') if part.isdigit() else (1, 0, part)
            for part in re.split(r'(\d+)', str(name)) if part]
