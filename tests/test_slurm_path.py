"""The suite's real Slurm path on this host: a one-node Slurm cluster
(tests/helpers/slurm_harness.py: Debian's slurmctld, slurmd, munge,
installed when missing) takes the sweep check's job through sbatch;
`srun` starts the
replay stand-in once per rank; a run past its time limit is ended by Slurm
itself and comes out as a hang.  Skipped, with the reason, where Slurm can
be neither installed nor started (no root, no apt-get); deselect with
``-m "not slurm"``."""

import json
import os
import re
import subprocess

import pytest

from helpers import slurm_harness
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


#: a site's own system scheduled by Slurm (this test's cluster: partition
#: gpu, squeue: no accounting), two GPUs per node
MYCLUSTER = '''system = {
    'name': 'mycluster', 'descr': 'a Slurm cluster of the tests',
    'hostnames': [r'gpu\\d+$'], 'modules_system': 'nomod',
    'partitions': [{
        'name': 'gpu', 'descr': 'two GPUs per node', 'scheduler': 'squeue',
        'launcher': 'srun', 'access': ['-p gpu'], 'environs': ['builtin'],
        'max_jobs': 1, 'features': ['gpu', 'nvidia'],
        'devices': [{'type': 'gpu', 'arch': 'sm_90', 'num_devices': 2}],
        'extras': {'max_nodes': 1}}],
}
environments = [{'name': 'builtin', 'target_systems': ['mycluster'],
                 'cc': 'gcc', 'cxx': 'g++', 'ftn': '', 'features': ['ccl']}]
'''


def test_the_nightly_from_cron_without_gpus_submits_to_slurm(slurm,
                                                              tmp_path):
    """cron on a host without GPUs (issue 38, item 1): a site made by
    init-site outside the checkout (its own system `mycluster`, scheduled
    by Slurm), the nightly started with an empty environment (cron's PATH
    with Slurm's commands; SLURM_CONF only because this test's Slurm keeps
    its slurm.conf in the test's folder): its sweep is a job of the real
    Slurm, the night is recorded and published (it said NOTHING MEASURED:
    ... scripts/run made a dry run)."""
    import yaml
    from helpers.checkout import init_site, make_checkout
    tree = make_checkout(tmp_path)
    site = tmp_path / 'mysite'
    init_site(tree, site, '--from', 'local')
    for sub, ext in (('config/systems', 'py'), ('site', 'yaml'),
                     ('reference', 'yaml')):
        os.rename(site / sub / f'local.{ext}', site / sub / f'mycluster.{ext}')
    (site / 'config' / 'systems' / 'mycluster.py').write_text(MYCLUSTER)
    ref = site / 'reference' / 'mycluster.yaml'
    ref.write_text(ref.read_text().replace('system: local', 'system: '
                                           'mycluster', 1))
    # its partition has 2 GPUs a node: the entries of other counts are
    # ones it never runs (scripts/validate says so, and stops the night)
    rdoc = yaml.safe_load(ref.read_text())
    for part in rdoc['partitions'].values():
        part['entries'] = [e for e in part['entries']
                           if e.get('gpus_per_node', 2) == 2]
    ref.write_text(yaml.safe_dump(rdoc))
    doc = yaml.safe_load((site / 'site' / 'mycluster.yaml').read_text())
    doc['system'] = 'mycluster'
    for key in ('libfabric', 'plugin'):
        (tmp_path / f'no-{key}' / 'lib').mkdir(parents=True)
        doc['build'][key]['prefix'] = str(tmp_path / f'no-{key}')
    doc['build']['nccl_tests'] = {'prefix': os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'replay')}
    (site / 'site' / 'mycluster.yaml').write_text(yaml.safe_dump(doc))
    env = {'PATH': slurm.env()['PATH'], 'HOME': str(tmp_path),
           'SLURM_CONF': slurm.conf}
    p = subprocess.run(
        [str(tree / '.venv' / 'bin' / 'python'), '-m', 'ccl_health.nightly',
         '--system', 'mycluster', '--partition', 'gpu', '--publish',
         str(tmp_path / 'www'), '--output', str(tmp_path / 'out'),
         '--night', 'n1', '--', '-n', 'AllReduceSweep%transport=intra'],
        env=env, cwd=str(tree), capture_output=True, text=True, timeout=600)
    run_log = tmp_path / 'www' / 'nights' / 'n1' / 'run.log'
    assert run_log.exists(), p.stdout + p.stderr
    log = run_log.read_text()
    assert re.search(r'^ccl-health: this host has no GPU \(.*\); submitting '
                     r'to mycluster:gpu ', log, re.M), log[-3000:]
    assert p.returncode == 0, p.stdout + p.stderr + log[-3000:]
    assert re.match(r'ccl-health nightly mycluster:gpu n1: all clear, '
                    r'nothing new \(1 cases?: 1 pass', p.stdout), p.stdout
    report = json.loads(sorted((tmp_path / 'out' / 'reports').glob(
        'run-*.json'))[-1].read_text())
    [tc] = [t for t in report['runs'][-1]['testcases'] if not t['fixture']]
    assert tc['system'] == 'mycluster' and tc['scheduler'] == 'squeue'
    job = slurm_job(slurm, tc['jobid'])
    assert job['JobState'] == 'COMPLETED' and job['Partition'] == 'gpu'
    assert (tmp_path / 'www' / 'latest').resolve() == \
        tmp_path / 'www' / 'nights' / 'n1'
