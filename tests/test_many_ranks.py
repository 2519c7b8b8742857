"""What is right at 4, 8 and 16 ranks, checked where it can be without a
machine of that size: with 2 ranks the all_reduce factor 2(n-1)/n is 1, so
a wrong factor or rank count is invisible on the 2-GPU device.  Real
outputs of 8 and 16 ranks published by others (tests/fixtures/published)
and job scripts rendered for 4 and 8 GPUs."""

import os

import pytest

from ccl_health.evidence import collectives
from ccl_health.evidence import nccltests
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


# -- the 4-GPU run on the device (tests/fixtures/device/four-gpus) -----------
FOUR = os.path.join(REPO, 'tests', 'fixtures', 'device', 'four-gpus', 'keep')


def test_four_gpu_run_factor_ranks_and_binding():
    import glob
    import json
    [result] = glob.glob(os.path.join(FOUR, 'stage', '*', '*', '*',
                                      'AllReduceSweep_*', 'result.json'))
    doc = json.load(open(result))
    assert len(doc['config']['devices']) == 4
    assert sorted(d['device'] for d in doc['config']['devices']) == [0, 1,
                                                                     2, 3]
    checked = 0
    for row in doc['results']:
        for m in (row['out_of_place'], row['in_place']):
            if m['alg_bw'] > 1.0:
                assert m['bus_bw'] / m['alg_bw'] == pytest.approx(1.5,
                                                                  rel=1e-5)
                checked += 1
    assert checked > 30
    script = open(os.path.join(os.path.dirname(result), 'rfm_job.sh')).read()
    assert 'mpirun -np 4 ' in script and ' -g 1 ' in script


def test_four_gpu_health_hook_checked_every_pair():
    import json
    detail = json.load(open(os.path.join(FOUR, 'health.json')))
    assert detail['code'] == 0
    pairs = sorted(tuple(p['gpus']) for p in detail['probes'][1:])
    assert pairs == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert all(p['ok'] and p['proven'] == 'intra' for p in detail['probes'])
    assert detail['probes'][0]['gpus'] == [0, 1, 2, 3]


def test_four_gpu_records_in_the_database():
    from ccl_health.db import store
    import shutil
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, 'x4.db')
        shutil.copy(os.path.join(FOUR, 'x4.db'), db)
        with store.open_store(db) as s:
            recs = [r for r in s.records() if r['size'] is not None and
                    r['case_name'].startswith('AllReduceSweep')]
            assert recs and {r['ranks'] for r in recs} == {4}
            big = [r for r in recs if r['size'] == 8 << 30][0]
            assert big['busbw'] == pytest.approx(365.0, abs=0.01)
