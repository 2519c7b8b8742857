"""The suite's real Slurm path on this host: a one-node Slurm cluster
(tests/slurm_harness.py: Debian's slurmctld, slurmd, munge, installed when
missing) takes the sweep check's job through sbatch; `srun` starts the
replay stand-in once per rank; a run past its time limit is ended by Slurm
itself and comes out as a hang.  Skipped, with the reason, where Slurm can
be neither installed nor started (no root, no apt-get); deselect with
``-m "not slurm"``."""

import os
import re

import pytest

import slurm_harness
from ccl_health import summary

pytest.importorskip('reframe')
from helpers.replay import cases, run_suite, verdict_lines  # noqa: E402

pytestmark = pytest.mark.slurm


@pytest.fixture(scope='module')
def slurm(tmp_path_factory):
    try:
        slurm_harness.ensure_installed()
    except slurm_harness.Unavailable as err:
        pytest.skip(f'no Slurm on this machine: {err}')
    cluster = slurm_harness.Cluster(tmp_path_factory.mktemp('slurm'))
    try:
        cluster.start()
    except (slurm_harness.Unavailable, OSError) as err:
        left = cluster.stop()
        pytest.skip(f'Slurm does not start here: {err}'
                    + (f' (left behind: {left})' if left else ''))
    yield cluster
    left = cluster.stop()
    assert not left, f'Slurm / munge daemons left behind: {left}'


def slurm_env(cluster, **extra):
    env = {'SLURM_CONF': cluster.conf,
           'PATH': cluster.env()['PATH'],
           # ReFrame's Slurm backend that polls with squeue: this Slurm
           # keeps no accounting (no sacct), like many test clusters
           'CCL_HEALTH_SCHEDULER': 'squeue',
           'CCL_HEALTH_SLURM_ACCESS': '-p gpu',
           'CCL_HEALTH_ASSUME_GPUS': '2:sm_90',
           # no override: the launcher follows the scheduler (srun)
           'CCL_HEALTH_LAUNCHER': ''}
    env.update(extra)
    return env


def slurm_job(cluster, jobid):
    out = cluster.run('scontrol', '-o', 'show', 'job', str(jobid)).stdout
    return dict(kv.split('=', 1) for kv in out.split() if '=' in kv)


def test_sweep_is_submitted_with_sbatch_and_passes(slurm, tmp_path):
    p, report, _ = run_suite(tmp_path, '-n', 'AllReduceSweep%transport=intra',
                             env=slurm_env(slurm))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    line = verdict_lines(p.stdout)['intra']
    assert 'PASS' in line and '346.5 GB/s at 8GiB' in line
    tc = cases(report)['intra']
    assert tc['scheduler'] == 'squeue' and tc['result'] == 'pass'
    assert re.fullmatch(r'\d+', str(tc['jobid'])), tc['jobid']
    # Slurm itself ran that job, in the partition asked for, on this host
    job = slurm_job(slurm, tc['jobid'])
    assert job['JobState'] == 'COMPLETED' and job['Partition'] == 'gpu'
    assert job['NodeList'] == slurm.node and job['NumTasks'] == '2'
    script = open(os.path.join(tc['stagedir'], 'rfm_job.sh')).read()
    sbatch = [ln for ln in script.splitlines() if ln.startswith('#SBATCH')]
    assert '#SBATCH -p gpu' in sbatch and '#SBATCH --ntasks=2' in sbatch
    assert any(ln.startswith('#SBATCH --time=') for ln in sbatch)
    assert any(ln.startswith('srun ') and 'all_reduce_perf -g 1' in ln
               for ln in script.splitlines()), script
    # two ranks, one output: only rank 0 of the stand-in writes
    out = open(os.path.join(tc['stagedir'], 'rfm_job.out')).read()
    assert out.count('# Avg bus bandwidth') == 1


def test_run_past_the_slurm_time_limit_is_a_hang(slurm, tmp_path):
    p, report, _ = run_suite(tmp_path, '-n', 'AllReduceSweep%transport=intra',
                             '-S', 'time_limit=1m',
                             env=slurm_env(slurm,
                                           CCL_HEALTH_REPLAY_SLEEP='100'))
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    tc = cases(report)['intra']
    print(f'\nSlurm time-out: fail_phase={tc["fail_phase"]!r} '
          f'fail_reason={tc["fail_reason"]!r}')
    line = verdict_lines(p.stdout)['intra']
    print(line)
    assert 'HANG' in line and 'DUE TO TIME LIMIT' in line
    assert tc['scheduler'] == 'squeue' and tc['result'] == 'fail'
    assert slurm_job(slurm, tc['jobid'])['JobState'] == 'TIMEOUT'
    # the check itself saw it, and the hang is in the performance database
    assert tc['verdict'] == 'hang'
    from ccl_health.db import store
    with store.open_store(str(tmp_path / 'out' / 'ccl-health.db')) as db:
        [case] = db.cases()
        assert case['verdict'] == 'hang' and 'DUE TO TIME LIMIT' in \
            case['reason']


def test_slurm_time_limit_wording_is_a_hang(tmp_path):
    """How Slurm reports a job it ended at its time limit: the job ends in
    state TIMEOUT (no ReFrame error in the run phase), the sanity check
    finds no output, and slurmstepd says why in the job's stderr."""
    (tmp_path / 'rfm_job.err').write_text(
        'srun: Job step aborted: Waiting up to 7 seconds for job step to '
        'finish.\nslurmstepd-vm: error: *** STEP 7.0 ON vm CANCELLED AT '
        '2026-01-01T00:01:30 DUE TO TIME LIMIT ***\n')
    tc = {'result': 'fail', 'fail_phase': 'sanity', 'verdict': 'crash',
          'fail_reason': 'sanity error: crash: the sweep did not complete '
                         '(0 of 31 sizes; no closing summary)',
          'stagedir': str(tmp_path), 'job_stderr': 'rfm_job.err'}
    verdict, reason = summary._classify(tc)
    assert verdict == 'hang'
    assert 'STEP 7.0 ON vm CANCELLED AT 2026-01-01T00:01:30 DUE TO TIME ' \
        'LIMIT' in reason
    # the same failure without Slurm's line stays a crash
    (tmp_path / 'rfm_job.err').write_text('Segmentation fault\n')
    assert summary._classify(tc)[0] == 'crash'
    # and the local scheduler's own wording is still a hang
    # (read from the report's numbers: it ran to its limit)
    assert summary._classify({
        'result': 'fail', 'fail_phase': 'run', 'fail_reason':
        'job error: [jobid=1] job timed out (3.1s > 3.0s)',
        'time_run': 3.1, 'time_limit': 3.0})[0] == 'hang'
