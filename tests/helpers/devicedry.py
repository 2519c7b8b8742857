"""The device scripts' dry mode (benchmarks/device/first_week.sh,
eight_gpus.sh): each script run with its own dry variables, and the
documented commands their weeks are checked against."""

import os
import subprocess
import sys

from conftest import REPO

#: README.md's nightly line with docs/run.md's short selection
NIGHTLY = ("scripts/nightly --system local --partition gpu --publish "
           "~/ccl-health-www --night {} -- -n "
           "'AllReduceSweep%transport=intra' -S max_size=1G")
#: docs/sites.md's calibration from the nights' database
CALIBRATE = ('scripts/calibrate --db ccl-health-output/ccl-health.db '
             '--system local --partition gpu')


def dry(script, out, phase, prefix, gpus, timeout=600):
    """``benchmarks/device/<script> PHASE OUT`` with ``<prefix>_DRY=1`` and
    ``<prefix>_GPUS=gpus``: every command written, none run."""
    env = dict(os.environ, FIRST_WEEK_PYTHON=sys.executable,
               **{f'{prefix}_DRY': '1', f'{prefix}_GPUS': gpus})
    return subprocess.run(
        ['bash', os.path.join(REPO, 'benchmarks', 'device', script), phase,
         str(out)], env=env, capture_output=True, text=True,
        timeout=timeout, cwd=REPO)
