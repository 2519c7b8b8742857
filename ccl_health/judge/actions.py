"""What to do with a node after a failing verdict: one action per finding.

- ``isolate``: a fault of the node's hardware or its links (a missing GPU,
  wrong results, an XID / ECC / row-remap node fault, a link down, a bad
  node named by the fleet): drained until a person (or ``scripts/fleet
  --resume`` after passing checks) brings it back;
- ``reset``: what a reboot usually clears (a driver that no longer
  answers, a leftover process holding the GPUs, a GPU fallen off the
  bus): drained too, the reason says that a reboot is expected to clear it;
- ``monitor``: no drain (drift, a straggler, a suspect link or group, a
  contended run): named and recorded only.

The mapping is data, kept with the site data that overrides it
(:mod:`ccl_health.sitedata.nodeactions`): ``DEFAULTS`` (verdict names, see
:class:`ccl_health.judge.verdicts.Verdict`, and finding names of the
fleet) and ``CAUSES`` (a named cause, which wins over its verdict); a
site file's optional ``actions:`` block (``{name: action}``, a verdict or
a cause name) overrides either.

    >>> action_for('wrong-results')
    'isolate'
    >>> action_for('node-fault', cause='leftover-process')
    'reset'
"""

import re
from typing import Optional

from ccl_health.judge.verdicts import Verdict
from ccl_health.sitedata.nodeactions import (CAUSES, DEFAULTS, DRAINING,
                                             ISOLATE, RESET)

#: words of a reason that name a cause (first match wins): what the hook
#: and the node state write (ccl_health/evidence/nodestate)
_CAUSE_WORDS = (
    ('gpu-off-bus', re.compile(r'fallen off the bus|off the bus|XID 79\b',
                               re.I)),
    ('driver-not-answering', re.compile(
        r'driver (does not|no longer|did not) answer|nvidia-smi (failed|'
        r'timed out|did not answer)|driver.*not (answer|respond)', re.I)),
    ('leftover-process', re.compile(
        r'leftover process|foreign process|process(es)? (holding|hold|'
        r'computing on|using) (the )?GPU|memory held', re.I)),
    ('row-remap', re.compile(r'row[- ]remap', re.I)),
    ('ecc', re.compile(r'\bECC\b', re.I)),
    ('xid', re.compile(r'\bXID\b', re.I)),
    ('link-down', re.compile(r'link (is )?down', re.I)),
)

#: what a drain reason adds after a reset's action
RESET_NOTE = 'a reboot is expected to clear it'


def cause_of(reason: str) -> Optional[str]:
    """The cause a verdict line names (:data:`ccl_health.sitedata.nodeactions.CAUSES`), or ``None``."""
    for cause, rx in _CAUSE_WORDS:
        if rx.search(reason or ''):
            return cause
    return None


def _site_map(site):
    if site is None:
        return {}
    if isinstance(site, dict):
        return dict(site)
    return dict(getattr(site, 'actions', None) or {})


def action_for(verdict, cause=None, site=None) -> Optional[str]:
    """The action of a failing ``verdict`` (a :class:`Verdict`, its name,
    or a fleet finding of :data:`ccl_health.sitedata.nodeactions.DEFAULTS`), ``cause`` (a name of
    :data:`ccl_health.sitedata.nodeactions.CAUSES`) first; ``site``: a Site with ``actions`` or the
    ``actions:`` mapping itself, overriding the defaults.  ``None`` for a
    verdict that is not a failure (pass, skipped, could-not-check,
    no-reference: nothing to do with the node)."""
    name = str(verdict)
    try:
        v = Verdict(name)
    except ValueError:
        v = None
    if v is not None and not v.failed:
        return None
    over = _site_map(site)
    if cause:
        if cause in over:
            return over[cause]
        if cause in CAUSES:
            return CAUSES[cause]
    if name in over:
        return over[name]
    return DEFAULTS.get(name, ISOLATE)


def drains(action) -> bool:
    return action in DRAINING


def drain_reason(action, reason, limit=200):
    """The Slurm reason of a drain: ``ccl-health: <action>: <reason>``
    (one line, at most ``limit`` characters); a reset says a reboot is
    expected to clear it."""
    why = ' '.join(str(reason).split())
    head = f'ccl-health: {action}: '
    if action == RESET:
        head = f'ccl-health: {action} ({RESET_NOTE}): '
    return (head + why)[:limit]
