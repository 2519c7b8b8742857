"""What is right at 4, 8 and 16 ranks, checked where it can be without a
machine of that size: with 2 ranks the all_reduce factor 2(n-1)/n is 1, so
a wrong factor or rank count is invisible on the 2-GPU device.  Real
outputs of 8 and 16 ranks published by others (tests/fixtures/published)
and job scripts rendered for 4 and 8 GPUs."""

import os

import pytest

from ccl_health import collectives, nccltests
from conftest import REPO, read

PUB = os.path.join(REPO, 'tests', 'fixtures', 'published')


@pytest.mark.parametrize('name, nranks', [
    ('rccl-tests_all_reduce_mi300x_aac8_1node.txt', 8),
    ('rccl-tests_all_reduce_mi300x_aac10_2node.txt', 16),
    ('nccl-debug_aws-libfabric_gdrdma_efa-p4d-2node.log', 16)])
def test_busbw_is_algbw_times_2n_minus_1_over_n(name, nranks):
    res = nccltests.parse_text(read(PUB, name))
    assert res.nranks == nranks
    factor = collectives.busbw_factor('all_reduce', nranks)
    assert factor == pytest.approx(2 * (nranks - 1) / nranks)
    checked = 0
    for row in res.rows:
        for m in (row.out_of_place, row.in_place):
            if m and m.algbw >= 1.0:      # printed to 2 decimals
                # both printed to 2 decimals: algbw rounding is scaled too
                assert m.busbw == pytest.approx(m.algbw * factor,
                                                abs=0.005 * factor + 0.0051)
                checked += 1
    assert checked > 10


@pytest.mark.parametrize('gpus', [4, 8])
def test_job_script_ranks_match_the_gpus(tmp_path, gpus):
    pytest.importorskip('reframe')
    import subprocess
    import sys
    out = tmp_path / 'out'
    env = dict(os.environ, CCL_HEALTH_ASSUME_GPUS=f'{gpus}:sm_90',
               CCL_HEALTH_OUTPUT=str(out))
    p = subprocess.run([os.path.join(os.path.dirname(sys.executable),
                                     'reframe'), '-C', 'config/settings.py',
                        '-c', 'checks/collective_sweep.py', '-n',
                        'AllReduceSweep%transport=intra', '--dry-run'],
                       env=env, cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-2000:]
    [script] = list((out / 'stage').rglob('AllReduceSweep_*/rfm_job.sh'))
    assert f'mpirun -np {gpus} ' in script.read_text()
    assert ' -g 1 ' in script.read_text()      # one rank per GPU
