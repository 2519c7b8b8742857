"""The framework-level checks (checks/framework_checks.py) without a GPU:

* dry runs render their job scripts on the `local` system with 2 assumed
  GPUs, and the command lines and environment are asserted;
* full runs through ReFrame with a stand-in for ``python3 -m
  ccl_health.torch_bench`` (tests/replay/torch-python: SYNTHETIC numbers
  derived from the nccl-tests captures, the captured NCCL debug logs), so
  that sanity, transport proof, perf variables, references and verdicts are
  exercised."""

import json
import os
import subprocess

import pytest

from ccl_health import patterns
from ccl_health.sitedata.site import shell_value
from conftest import REPO
from helpers.replay import run_suite

pytest.importorskip('reframe')

CHECKS = os.path.join(REPO, 'checks', 'framework_checks.py')
STANDIN = os.path.join(REPO, 'tests', 'replay', 'torch-python')
EXAMPLE = patterns.EXAMPLE          # the pattern the suite ships


def run(tmp_path, *reframe_args, dry=True, gpus='2:sm_90', env=None):
    return run_suite(
        tmp_path, *reframe_args, checks=CHECKS,
        options=['--dry-run'] if dry else [],
        env={'CCL_HEALTH_ASSUME_GPUS': gpus,
             'CCL_HEALTH_LAUNCHER': 'mpirun' if dry else 'local',
             'CCL_HEALTH_SCHEDULER': 'local',
             'CCL_HEALTH_REFERENCE_DIR': None, **(env or {})})


def cases(report):
    return {tc['display_name'].split(' /')[0]: tc
            for tc in report['runs'][-1]['testcases'] if not tc['fixture']}


def script(out, tc):
    path = (out / 'stage' / 'local' / 'gpu' / 'builtin' / tc['short_name']
            / 'rfm_job.sh')
    return path.read_text() if path.exists() else None    # skipped


def launch_line(text):
    return [ln for ln in text.splitlines() if ln.startswith('mpirun')][0]


def exports(text):
    return {ln[7:].split('=', 1)[0]: ln[7:].split('=', 1)[1]
            for ln in text.splitlines() if ln.startswith('export ')}


def test_checks_are_thin():
    """The first-call, replay and training checks are a class with its
    parameters and a docstring: their command lines, judging and
    performance variables live in the bases (ccl_health/rfm/framework.py),
    and no check reads the tests' files."""
    import ast
    with open(CHECKS) as fp:
        text = fp.read()
    assert 'tests/' not in text and "'tests'" not in text
    thin = {'TorchFirstCall', 'MpiFirstCall', 'TorchPatternReplay',
            'TorchTrainingStep'}
    classes = {n.name: n for n in ast.parse(text).body
               if isinstance(n, ast.ClassDef)}
    assert thin <= set(classes)
    for name in thin:
        body = classes[name].body
        assert ast.get_docstring(classes[name]), name
        extra = [n for n in body[1:] if not (
            isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and
            getattr(n.value.func, 'id', '') == 'parameter')]
        assert not extra, (name, [ast.dump(n)[:60] for n in extra])


@pytest.fixture(scope='module')
def dry(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('dry')
    p, report, out = run(tmp, '-n', 'TorchBandwidth', '-n', 'FirstCall',
                         '-n', 'TorchPatternReplay', '-n', 'TorchTrainingStep')
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return {name: (script(out, tc), tc) for name, tc in
            cases(report).items()}


def test_bandwidth_command_lines(dry):
    names = [n for n in dry if n.startswith('TorchBandwidth')]
    assert len(names) == 24                   # 6 transports x 4 collectives
    # net-ib needs an InfiniBand / RoCE network: local's site file has none
    text, tc = dry['TorchBandwidth %transport=net-ib '
                   '%torch_collective=all_reduce']
    assert text is None and tc['result'] == 'skip'
    assert 'net-ib' in tc['skip_reason'] and \
        'not configured for local' in tc['skip_reason']
    text, tc = dry['TorchBandwidth %transport=intra '
                   '%torch_collective=all_reduce']
    assert launch_line(text) == (
        'mpirun -np 2 python3 -m ccl_health.torch_bench bandwidth '
        '--transport intra --sizes 1MiB:1GiB --step-factor 2 --collectives '
        'all_reduce --iters 20 --warmup 5 --json torch-bench.json')
    assert tc['collective'] == 'torch_all_reduce'
    assert tc['num_tasks'] == 2 and tc['num_tasks_per_node'] == 2
    env = exports(text)
    assert env['PYTHONPATH'] == shell_value(REPO + ':${PYTHONPATH}')
    assert env['NCCL_DEBUG'] == 'INFO'
    assert env['NCCL_DEBUG_FILE'].endswith('/nccl-debug.%h.%p.log')
    assert env['NCCL_NVLS_ENABLE'] == '0'
    assert 'NCCL_P2P_DISABLE' not in env
    # a rendezvous port of the job's own, picked free on the node as the
    # job starts (before the launch), its fixed block where none is found
    lines = text.splitlines()
    pick = [i for i, ln in enumerate(lines)
            if ln.startswith('export MASTER_PORT=$(python3 -m '
                             'ccl_health.torch_bench.port --count 10')]
    assert pick and pick[0] < lines.index(launch_line(text)), text
    fixed = lines[pick[0]].rsplit('echo ', 1)[1].rstrip(')')
    assert fixed.isdigit() and f'--default {fixed}' in lines[pick[0]]
    text, _ = dry['TorchBandwidth %transport=net-socket '
                  '%torch_collective=reduce_scatter']
    assert '--transport net-socket --sizes 1MiB:1GiB' in launch_line(text)
    assert '--collectives reduce_scatter' in launch_line(text)
    env = exports(text)
    assert env['NCCL_P2P_DISABLE'] == '1' and env['NCCL_SHM_DISABLE'] == '1'
    assert env['NCCL_NET_PLUGIN'] == 'none'
    text, _ = dry['TorchBandwidthPlugin %transport=net-plugin '
                  '%torch_collective=broadcast']
    assert exports(text)['NCCL_NET_PLUGIN'].endswith(
        '/lib/libnccl-net-ofi.so')
    assert exports(text)['FI_PROVIDER'] == "'tcp;ofi_rxm'"


def test_first_call_command_lines(dry):
    text, tc = dry['TorchFirstCall %transport=intra']
    assert launch_line(text) == (
        'mpirun -np 2 python3 -m ccl_health.torch_bench first-call '
        '--transport intra --loops 5 --json torch-bench.json')
    text, tc = dry['MpiFirstCall']
    assert launch_line(text) == (
        'mpirun -np 2 python3 -m ccl_health.torch_bench first-call '
        '--backend mpi4py --loops 5 --json torch-bench.json')
    env = exports(text)
    assert 'NCCL_DEBUG' not in env and \
        env['PYTHONPATH'] == shell_value(REPO + ':${PYTHONPATH}')


def test_replay_command_line(dry):
    text, _ = dry['TorchPatternReplay %transport=intra']
    assert launch_line(text) == (
        f'mpirun -np 2 python3 -m ccl_health.torch_bench replay --transport '
        f'intra --pattern {EXAMPLE} --iters 20 --warmup 5 --csv replay.csv '
        f'--json torch-bench.json')


def test_training_step_command_lines(dry):
    names = sorted(n for n in dry if n.startswith('TorchTrainingStep'))
    assert names == [f'TorchTrainingStep{p} %transport={t} %model={m}'
                     for p, t in (('', 'intra'), ('', 'net-ib'),
                                  ('', 'net-ib-gdr'), ('', 'net-socket'),
                                  ('Plugin', 'net-plugin'),
                                  ('Plugin', 'net-plugin-gdr'))
                     for m in ('comm', 'compute')]
    text, tc = dry['TorchTrainingStep %transport=intra %model=comm']
    assert launch_line(text) == (
        'mpirun -np 2 python3 -m ccl_health.torch_bench train --transport '
        'intra --model comm --steps 20 --warmup 5 --profile-steps 5 '
        '--json torch-bench.json')
    assert tc['collective'] == 'torch_train_comm'
    assert tc['num_tasks'] == 2
    env = exports(text)
    assert env['NCCL_DEBUG'] == 'INFO' and 'NCCL_P2P_DISABLE' not in env
    # with and without the plugin: the same model over the transports
    text, tc = dry['TorchTrainingStep %transport=net-socket %model=compute']
    assert '--transport net-socket --model compute ' in launch_line(text)
    assert exports(text)['NCCL_NET_PLUGIN'] == 'none'
    assert tc['collective'] == 'torch_train_compute'
    text, _ = dry['TorchTrainingStepPlugin %transport=net-plugin %model=comm']
    assert exports(text)['NCCL_NET_PLUGIN'].endswith(
        '/lib/libnccl-net-ofi.so')
    _, tc = dry['TorchTrainingStepPlugin %transport=net-plugin-gdr %model=comm']
    assert tc['result'] == 'skip'


def test_training_step_filters_of_the_device_script(tmp_path):
    # benchmarks/device/training_on_device.sh selects the plugin's case
    # without GDR by 'net-plugin%' (the model follows the transport)
    p, report, out = run(
        tmp_path, '-n', 'TorchTrainingStepPlugin%transport=net-plugin%',
        '-n', 'TorchTrainingStep%transport=intra', '-S', 'steps=3',
        '-S', 'TorchTrainingStep.batch=8', '-S', 'profile_steps=0')
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    c = cases(report)
    assert sorted(c) == ['TorchTrainingStep %transport=intra %model=comm',
                         'TorchTrainingStep %transport=intra %model=compute',
                         'TorchTrainingStepPlugin %transport=net-plugin '
                         '%model=comm',
                         'TorchTrainingStepPlugin %transport=net-plugin '
                         '%model=compute']
    line = launch_line(script(out, c['TorchTrainingStep %transport=intra '
                                     '%model=compute']))
    assert ('--model compute --steps 3 --warmup 5 --profile-steps 0 '
            '--batch 8 --json') in line


def test_gdr_is_skipped_with_the_reference_reason(dry):
    _, tc = dry['TorchFirstCallPlugin %transport=net-plugin-gdr']
    assert tc['result'] == 'skip' and 'GDR not supported' in \
        tc['skip_reason']


def test_variables_on_the_command_line(tmp_path):
    p, report, out = run(
        tmp_path, '-n', 'TorchBandwidth%transport=intra%torch_collective='
        'all_gather', '-n', 'TorchFirstCall%transport=intra',
        '-S', 'python=/opt/torch/bin/python', '-S', 'max_size=64M',
        '-S', 'ideal_busbw=450', '-S', 'TorchFirstCall.loops=3')
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    c = cases(report)
    line = launch_line(script(out, c['TorchBandwidth %transport=intra '
                                     '%torch_collective=all_gather']))
    assert line.startswith('mpirun -np 2 /opt/torch/bin/python -m '
                           'ccl_health.torch_bench bandwidth ')
    assert '--sizes 1MiB:64MiB' in line and '--ideal-busbw 450.0' in line
    line = launch_line(script(out, c['TorchFirstCall %transport=intra']))
    assert '--loops 3' in line


def test_one_gpu_is_skipped_with_a_reason(tmp_path):
    p, report, _ = run(tmp_path, '-n', 'MpiFirstCall', '-n',
                       'TorchFirstCall%transport=intra', gpus='1:sm_90')
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for tc in cases(report).values():
        assert tc['result'] == 'skip'
        assert 'needs at least 2 GPUs; this partition has 1 per node x 1' \
            in tc['skip_reason']


# -- the whole path, with the stand-in -----------------------------------------

def verdicts(stdout):
    return stdout.split('== ccl-health verdict ==')[1].strip().splitlines()


def reference_with_torch_all_gather(tmp_path):
    """The shipped reference + an entry for the torch all_gather that the
    stand-in replays (none is shipped: without one the case is
    no-reference, never a pass)."""
    from ccl_health.judge import reference, reference_file
    refdir = tmp_path / 'reference'
    refdir.mkdir()
    text = open(os.path.join(REPO, 'reference', 'local.yaml')).read()
    (refdir / 'local.yaml').write_text(text)
    reference_file.upsert(str(refdir / 'local.yaml'), 'local', 'gpu',
                     reference.Entry('intra', 'torch_all_gather', 1, 2, 0.2,
                                     'test: the stand-in\'s values',
                                     {4 << 20: 40.0, 32 << 20: 150.0,
                                      256 << 20: 200.0}))
    return str(refdir)


def test_stand_in_runs_pass_with_perf_variables(tmp_path):
    p, report, out = run(
        tmp_path, '-n', 'TorchBandwidth%transport=intra%torch_collective='
        'all_gather', '-n', 'FirstCall', '-n',
        'TorchPatternReplay%transport=intra', '-x', 'TorchFirstCall%'
        'transport=net', '-x', 'TorchFirstCallPlugin', '-S',
        f'python={STANDIN}', dry=False,
        env={'CCL_HEALTH_REFERENCE_DIR':
             reference_with_torch_all_gather(tmp_path)})
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    c = cases(report)
    assert set(c) == {'TorchBandwidth %transport=intra '
                      '%torch_collective=all_gather',
                      'TorchFirstCall %transport=intra', 'MpiFirstCall',
                      'TorchPatternReplay %transport=intra'}
    bw = c['TorchBandwidth %transport=intra %torch_collective=all_gather']
    assert bw['result'] == 'pass' and bw['proven_transport'] == 'intra'
    perf = bw['perfvalues']
    assert set(perf) == {'local:gpu:busbw_4MiB', 'local:gpu:busbw_32MiB',
                         'local:gpu:busbw_256MiB'}
    # the stand-in is 5 % slower than the nccl-tests capture
    assert perf['local:gpu:busbw_256MiB'][0] == pytest.approx(
        245.04 / 1.05 * 1.0, rel=0.05)
    assert bw['framework_gap'] == {'4MiB': pytest.approx(-4.8, abs=0.3),
                                   '32MiB': pytest.approx(-4.8, abs=0.3),
                                   '256MiB': pytest.approx(-4.8, abs=0.3)}
    fc = c['TorchFirstCall %transport=intra']
    assert fc['result'] == 'pass'
    assert fc['perfvalues']['local:gpu:first_call_s'][0] == \
        pytest.approx(0.47)
    assert fc['perfvalues']['local:gpu:first_call_max_s'][0] == \
        pytest.approx(2.92)
    assert fc['perfvalues']['local:gpu:second_call_s'][0] == \
        pytest.approx(0.00012)
    assert c['MpiFirstCall']['result'] == 'pass'
    rp = c['TorchPatternReplay %transport=intra']
    assert rp['result'] == 'pass'
    assert 'local:gpu:line3_all_reduce_busbw' in rp['perfvalues']
    assert any('cannot be forced per call' in n for n in rp['replay_notes'])
    assert (out / 'perflogs').exists()


@pytest.mark.parametrize('fail, verdict, words, code', [
    ('crash', 'CRASH', 'NCCL error: unhandled system error', 1),
    # the failing rank's own error, not the launcher's banner after it
    ('rendezvous', 'CRASH', 'DistNetworkError: The server socket has '
     'failed to listen', 1),
    ('wrong', 'WRONG-RESULTS', '7 wrong elements after one all_reduce', 1),
    # no log, no proof: the tool cannot judge the transport (exit 2)
    ('nolog', 'COULD-NOT-CHECK', 'no NCCL debug log was written', 2),
])
def test_stand_in_failures_get_verdicts(tmp_path, fail, verdict, words,
                                        code):
    p, _, _ = run(tmp_path, '-n', 'TorchBandwidth%transport=intra%'
                  'torch_collective=all_reduce', '-S', f'python={STANDIN}',
                  dry=False, env={'CCL_HEALTH_STANDIN_FAIL': fail})
    assert p.returncode == code
    line = verdicts(p.stdout)[0]
    assert line.split()[:3] == ['torch_all_reduce', 'intra', verdict], line
    assert words in line


def test_first_call_limit_is_an_upper_bound(tmp_path):
    p, report, _ = run(tmp_path, '-n', 'TorchFirstCall%transport=intra',
                       '-S', f'python={STANDIN}',
                       '-S', 'first_call_limit_s=0.1', dry=False)
    assert p.returncode == 1
    tc = cases(report)['TorchFirstCall %transport=intra']
    assert tc['fail_phase'] == 'performance'
    assert 'first_call_s' in tc['fail_reason']


def test_stand_in_training_steps_pass_with_perf_variables(tmp_path):
    p, report, out = run(
        tmp_path, '-n', 'TorchTrainingStep%transport=intra',
        '-n', 'TorchTrainingStep%transport=net-socket%model=comm',
        '-S', f'python={STANDIN}', dry=False)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    c = cases(report)
    comm = c['TorchTrainingStep %transport=intra %model=comm']
    assert comm['result'] == 'pass' and comm['proven_transport'] == 'intra'
    perf = comm['perfvalues']
    assert set(perf) == {'local:gpu:samples_per_s', 'local:gpu:step_ms',
                         'local:gpu:nccl_fraction'}
    # the stand-in's synthetic 2.5 ms steps (median 2.525 ms), 32 x 2
    assert perf['local:gpu:step_ms'][0] == pytest.approx(2.525)
    assert perf['local:gpu:step_ms'][-2] == 'ms'
    assert perf['local:gpu:samples_per_s'][0] == \
        pytest.approx(64 / 2.525e-3, rel=1e-3)
    assert perf['local:gpu:samples_per_s'][-2] == 'samples/s'
    assert perf['local:gpu:nccl_fraction'][0] == pytest.approx(64.0)
    assert perf['local:gpu:nccl_fraction'][-2] == '%'
    assert comm['train_summary']['params'] == 71222248
    assert comm['collective'] == 'torch_train_comm'
    compute = c['TorchTrainingStep %transport=intra %model=compute']
    assert compute['result'] == 'pass'
    assert compute['perfvalues']['local:gpu:nccl_fraction'][0] < 5
    sock = c['TorchTrainingStep %transport=net-socket %model=comm']
    assert sock['result'] == 'pass'
    assert sock['proven_transport'] == 'net-socket'
    assert sock['perfvalues']['local:gpu:samples_per_s'][0] < \
        perf['local:gpu:samples_per_s'][0] / 100
    lines = verdicts(p.stdout)
    assert any(ln.split()[:3] == ['torch_train_comm', 'intra', 'PASS']
               for ln in lines), lines
    stage = out / 'stage' / 'local' / 'gpu' / 'builtin' / comm['short_name']
    doc = json.loads((stage / 'torch-bench.json').read_text())
    assert doc['mode'] == 'train' and doc['complete']
    assert doc['profile'][0]['top_nccl_kernels'][0]['name'] == \
        'ncclDevKernel_AllReduce_Sum_f32_RING_LL'


def test_stand_in_training_without_kernels_could_not_check(tmp_path):
    p, report, _ = run(tmp_path, '-n', 'TorchTrainingStep%transport=intra%'
                       'model=comm', '-S', f'python={STANDIN}', dry=False,
                       env={'CCL_HEALTH_STANDIN_FAIL': 'nokernels'})
    assert p.returncode == 2            # could not check: not a failure
    line = verdicts(p.stdout)[0]
    assert line.split()[:3] == ['torch_train_comm', 'intra',
                                'COULD-NOT-CHECK'], line
    assert 'the profiler recorded no CUDA kernel' in line


def test_training_lower_bound_of_samples_per_s(tmp_path):
    p, report, _ = run(tmp_path, '-n', 'TorchTrainingStep%transport=intra%'
                       'model=compute', '-S', f'python={STANDIN}',
                       '-S', 'min_samples_per_s=1e6', dry=False)
    assert p.returncode == 1
    tc = cases(report)['TorchTrainingStep %transport=intra %model=compute']
    assert tc['fail_phase'] == 'performance'
    assert 'samples_per_s' in tc['fail_reason']


# -- issue 44: a framework check that passes its time limit asks NCCL's RAS
# which rank stopped, as the sweep does ---------------------------------------

def _framework_hang(stagedir, mode):
    """:meth:`FrameworkBase._hang` of a job whose stage is ``stagedir``
    (its ``rfm_job.out`` / ``rfm_job.err`` and the RAS file its script
    left)."""
    import types
    from ccl_health.rfm.base import PlacedTest
    from ccl_health.rfm.framework import FrameworkBase
    me = types.SimpleNamespace(stagedir=str(stagedir), stdout='rfm_job.out',
                               stderr='rfm_job.err', bench_mode=mode)
    me.ras_answer = types.MethodType(PlacedTest.ras_answer, me)
    # no transport's evidence: MPI's first call has none
    return FrameworkBase._hang(me)


@pytest.fixture(scope='module')
def short_limit_script(tmp_path_factory):
    """The job script of a torch all_reduce check rendered with a 4 s
    time limit."""
    tmp = tmp_path_factory.mktemp('limit')
    p, report, out = run(tmp, '-n', 'TorchBandwidth%transport=intra%'
                         'torch_collective=all_reduce', '-S',
                         'time_limit=4s')
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    [(text, _)] = [(script(out, tc), tc) for tc in cases(report).values()]
    return text


@pytest.mark.parametrize('mode', ['incomplete', 'silent'])
def test_a_framework_check_past_its_limit_names_the_rank_ras_named(
        tmp_path, short_limit_script, mode):
    """The check's own job script asks RAS shortly before its time limit
    (the program replaced by one that outlives it: a hang); Slurm's line
    of the time limit in its stderr; the one judge's hang names the rank
    RAS named, or says why none was."""
    from helpers.ras import Standin
    text = short_limit_script
    # asked 1 s before the limit, its bound within that second
    assert 'ccl_health.evidence.ras --watch ccl-health-ras.json --at 3 ' \
        '--bound 0.5 ' in text
    job = '\n'.join('sleep 5' if ln.startswith('mpirun ') else ln
                    for ln in text.splitlines())
    stage = tmp_path / 'stage'
    stage.mkdir()
    (stage / 'rfm_job.out').write_text('')
    (stage / 'rfm_job.err').write_text(
        'slurmstepd: error: *** JOB 78 ON nid1 CANCELLED AT 2026-11-28T23:'
        '00:00 DUE TO TIME LIMIT ***\n')
    with Standin(mode) as s:
        subprocess.run(['bash', '-c', job], cwd=stage, timeout=60,
                       env=dict(os.environ, NCCL_RAS_ADDR=s.addr))
        assert s.connections == 1
    verdict, reason = _framework_hang(stage, 'first-call')
    assert verdict == 'hang'
    assert reason.startswith('hang: the job exceeded its time limit '
                             '(slurmstepd: error: *** JOB 78 ')
    if mode == 'incomplete':
        assert reason.endswith(f': rank 2 (node1 GPU 2, pid 1746) '
                               f'unresponsive (NCCL RAS at {s.addr})'), \
            reason
    else:
        assert f'; no rank named: RAS at {s.addr} did not answer within ' \
            f'0.5 s; the outputs do not show which rank stopped' in reason, \
            reason
