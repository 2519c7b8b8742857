"""What the tests of the hook's trust share (issue 11): a replay case
made of the real capture with one mutation, the cases a hook recorded."""

import os
import shutil

from ccl_health.db import store
from helpers.node import CAP


def recorded(tmp_path):
    with store.open_store(str(tmp_path / 'db.sqlite')) as db:
        return db.cases()


def mutated(tmp_path, stdout=None, rc=None, logs=True):
    """A replay case: the real 2x H200 intra capture, its stdout and exit
    code changed."""
    src = os.path.join(CAP, 'intra')
    dst = tmp_path / 'replay' / 'mut'
    dst.mkdir(parents=True)
    for f in os.listdir(src):
        if f.startswith('nccl-debug') and logs:
            shutil.copy(os.path.join(src, f), dst)
    text = open(os.path.join(src, 'stdout.txt')).read()
    (dst / 'stdout.txt').write_text(stdout(text) if stdout else text)
    (dst / 'rc.txt').write_text(f'rc={rc or 0} wall=\n')
    return {'CCL_HEALTH_REPLAY_DIR': str(tmp_path / 'replay'),
            'CCL_HEALTH_REPLAY_INTRA': 'mut'}
