"""The drift recordings of the device (tests/fixtures/device/drift and
drift-graded: raw nccl-tests outputs of a series of runs), read with the
suite's parser."""

import os

from ccl_health.evidence import nccltests
from conftest import REPO

DRIFT = os.path.join(REPO, 'tests', 'fixtures', 'device', 'drift')
GRADED = os.path.join(REPO, 'tests', 'fixtures', 'device', 'drift-graded')


def device_runs(folder=DRIFT):
    """[(label, {size: busbw})] of the recorded runs, in order, read with
    the suite's parser from the raw nccl-tests outputs."""
    out = []
    raw = os.path.join(folder, 'raw')
    for name in sorted(os.listdir(raw)):
        with open(os.path.join(raw, name)) as fp:
            res = nccltests.parse_text(fp.read())
        assert res.closed and res.wrong_total == 0, name
        out.append((name[4:-4], {r.size: r.busbw for r in res.rows}))
    return out
