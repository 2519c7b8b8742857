"""What changed between the last passing run of a history key and a
flagged one (a drop, a drift): versions, node list, environment, one
short line each (the ``changed:`` lines of ``scripts/report detect``, the
nightly's mail and the report page)."""

import json

from ccl_health.evidence.nodestate.nodedata import NODE_STATE_KEY
from ccl_health.judge.series import series_key


#: what a change of names in a "changed:" line (case column -> label)
ATTRIBUTION_FIELDS = {
    'nccl_version': 'nccl', 'plugin_version': 'plugin',
    'libfabric_version': 'libfabric', 'provider': 'provider',
    'cuda_driver': 'cuda', 'driver': 'driver', 'tests_version': 'nccl-tests',
    'suite_revision': 'suite', 'nodelist': 'nodes'}
#: recorded environment variables that differ from job to job by design
#: (which GPUs, where the debug log goes, the run's id, the sweep's
#: node-state readings: :data:`ccl_health.evidence.nodestate.nodedata.NODE_STATE_KEY`): never
#: a cause
NOT_ATTRIBUTED = ('NCCL_DEBUG_FILE', 'CUDA_VISIBLE_DEVICES',
                  'HIP_VISIBLE_DEVICES', 'ROCR_VISIBLE_DEVICES',
                  'GPU_DEVICE_ORDINAL', 'NCCL_HOSTID', 'CCL_HEALTH_RUN_ID',
                  NODE_STATE_KEY)
#: a changed value is cut to this many characters
CHANGE_WIDTH = 60
UNSET = '(unset)'


def _cut(value, width=CHANGE_WIDTH):
    if value is None or value == '':
        return UNSET
    value = ' '.join(str(value).split())
    return value if len(value) <= width else value[:width - 3] + '...'


def _env(case):
    """The recorded environment of a case row (a flat dict of strings);
    the health hook's probe detail that older versions stored there is
    not environment."""
    try:
        env = json.loads(case.get('env_json') or '{}')
    except ValueError:
        return {}
    if not isinstance(env, dict):
        return {}
    return {k: v for k, v in env.items() if k != 'probes'}


def changes(good, bad):
    """One short line per recorded fact that differs between the case
    rows ``good`` and ``bad``: versions and node list
    (:data:`ATTRIBUTION_FIELDS`), then each environment variable
    (``NCCL_P2P_LEVEL: (unset) -> LOC``), values cut to
    :data:`CHANGE_WIDTH` characters."""
    out = [f'{label}: {_cut(good.get(f))} -> {_cut(bad.get(f))}'
           for f, label in ATTRIBUTION_FIELDS.items()
           if (good.get(f) or '') != (bad.get(f) or '')]
    genv, benv = _env(good), _env(bad)
    for var in sorted(set(genv) | set(benv)):
        if var in NOT_ATTRIBUTED:
            continue
        if genv.get(var) != benv.get(var):
            out.append(f'{var}: {_cut(genv.get(var))} -> '
                       f'{_cut(benv.get(var))}')
    return out


def attribute(cases, finding):
    """What changed between the last passing run of the finding's key
    before the finding (for a drift: before the shift began) and the
    flagged run: versions, node list, environment, one short line each.
    ``cases``: the store's case rows."""
    same = [c for c in cases if series_key(c) == finding.key]
    bad = next((c for c in same if c['run_id'] == finding.run_id), None)
    if bad is None:
        return []
    before = bad['time']
    if finding.since_run:
        first = next((c for c in same if c['run_id'] == finding.since_run),
                     None)
        before = first['time'] if first else finding.since_time or before
    good = [c for c in same if c['time'] < before and
            c['verdict'] == 'pass']
    if not good:
        return ['no earlier passing run of this configuration']
    good = good[-1]
    return changes(good, bad) or [
        f'nothing recorded changed since run {good["run_id"]} '
        f'({good["time"]})']
