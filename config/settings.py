"""ReFrame configuration of ccl-health: the common settings plus one file
per system (config/<system>.py).  Output locations follow
``CCL_HEALTH_OUTPUT`` (default ``./ccl-health-output``)."""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)


def _load(name):
    spec = importlib.util.spec_from_file_location(
        f'ccl_health_config_{name}', os.path.join(_HERE, f'{name}.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_common = _load('common')
_systems = [_load(name) for name in ('frontier', 'perlmutter', 'local')]

for _s in _systems:
    _s.system.setdefault('stagedir', os.path.join(_common.OUTPUT, 'stage'))
    _s.system.setdefault('outputdir', os.path.join(_common.OUTPUT, 'output'))

site_configuration = {
    # the order matters: `local` matches any host, so it comes last
    'systems': [s.system for s in _systems],
    'environments': [env for s in _systems for env in s.environments],
    'modes': _common.modes,
    'logging': _common.logging,
    'general': _common.general,
    'storage': _common.storage,
}
