"""ReFrame configuration of ccl-health: the common settings
(``config/common.py``) plus one file per system, ``config/systems/*.py``
(or ``$CCL_HEALTH_CONFIG_DIR/systems/*.py``, else those of the site
pointer's site directory: a site's own copy, made by ``scripts/init-site``), each defining ``system`` and ``environments``: a
new site is a new file.
ReFrame tries the systems in file-name order, a system matching any host
(``local``) last (:mod:`ccl_health.sitedata.sysconfig`).  Output locations follow
``CCL_HEALTH_OUTPUT`` (default ``./ccl-health-output`` in the directory
``reframe`` was started in, not ``config/``: :mod:`ccl_health.outputs`);
loading this file creates nothing."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from ccl_health import resources  # noqa: E402
from ccl_health.sitedata import sysconfig  # noqa: E402

_common = sysconfig.load_file(os.path.join(_HERE, 'common.py'))
# the site's systems: $CCL_HEALTH_CONFIG_DIR, else the site pointer's
# (site.conf, scripts/init-site), else these shipped ones
_SYSTEMS_IN = resources.config_dir() if (
    os.environ.get('CCL_HEALTH_CONFIG_DIR') or resources.site_pointer()
    .get('dir')) else _HERE
_files = sysconfig.system_files(_SYSTEMS_IN)
if not _files:
    raise ValueError(f'{_SYSTEMS_IN}: no system file '
                     f'in {os.path.join(_SYSTEMS_IN, sysconfig.SYSTEMS)} '
                     f'(scripts/init-site DIR makes DIR/config/systems/)')
_systems = [sysconfig.load_file(path) for _, path in _files]
_systems = sysconfig.in_reframe_order(_systems, lambda s: s.system)

for _s in _systems:
    _s.system.setdefault('stagedir', os.path.join(_common.OUTPUT, 'stage'))
    _s.system.setdefault('outputdir', os.path.join(_common.OUTPUT, 'output'))

site_configuration = {
    'systems': [s.system for s in _systems],
    'environments': [env for s in _systems for env in s.environments],
    'modes': _common.modes,
    'logging': _common.logging,
    'general': _common.general,
    'storage': _common.storage,
}
