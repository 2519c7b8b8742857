"""What may be done with a node, and which by default: the actions, the
action of each failing verdict, fleet finding and named cause, and a site
file's ``actions:`` block checked against them (what
:func:`ccl_health.judge.actions.action_for` applies).  Every failing
verdict has a default here (a test holds it), so a site may name any."""

from ccl_health import CclHealthError

ISOLATE, RESET, MONITOR = 'isolate', 'reset', 'monitor'
ACTIONS = (ISOLATE, RESET, MONITOR)
#: the actions that take a node out of service
DRAINING = (ISOLATE, RESET)

#: verdict (and fleet finding) -> action
DEFAULTS = {
    'missing-gpu': ISOLATE,
    'wrong-results': ISOLATE,
    'node-fault': ISOLATE,
    'crash': ISOLATE,
    'hang': ISOLATE,
    'below-reference': ISOLATE,
    'drop': ISOLATE,
    'fallback': ISOLATE,
    'incomplete': ISOLATE,
    'aborted': ISOLATE,
    'build-failed': ISOLATE,
    'contended': MONITOR,
    # findings of the fleet that are not verdicts of one probe
    'bad-node': ISOLATE,
    'link-down': ISOLATE,
    'straggler': MONITOR,
    'suspect-link': MONITOR,
    'suspect-group': MONITOR,
    'drift': MONITOR,
}

#: a named cause -> action (wins over the verdict's)
CAUSES = {
    'xid': ISOLATE,
    'ecc': ISOLATE,
    'row-remap': ISOLATE,
    'link-down': ISOLATE,
    'driver-not-answering': RESET,
    'leftover-process': RESET,
    'gpu-off-bus': RESET,
}


def check_site_actions(raw, path='<site>'):
    """The ``actions:`` block of a site file: ``{name: action}`` with a
    known verdict, finding or cause name and a known action."""
    known = set(DEFAULTS) | set(CAUSES)
    out = {}
    for k, v in (raw or {}).items():
        if k not in known:
            raise CclHealthError(f'{path}: actions.{k}: not a failing verdict'
                                 f', fleet finding or cause (known: '
                                 f'{", ".join(sorted(known))})')
        if v not in ACTIONS:
            raise CclHealthError(f'{path}: actions.{k}: {v!r} is not one of '
                                 f'{", ".join(ACTIONS)}')
        out[k] = v
    return out
