"""The device proof of issue 46 (benchmarks/device/eight_gpus.sh) without a
GPU: its dry mode writes every command instead of running it (the first
week's through first_week.sh's own dry mode, which checks each against the
doc that shows it, word for word), it refuses on a machine of 4 GPUs, and
its checker (_eight_gpus_check.py) reads what the phases leave: the
8-GPU facts named right pass, named wrong fail."""

import io
import json
import os
import subprocess
import sys
import tarfile

import yaml

from conftest import REPO
from helpers import devicedry
from helpers.devicedry import CALIBRATE, NIGHTLY

CHECK = os.path.join(REPO, 'benchmarks', 'device', '_eight_gpus_check.py')


def dry(tmp_path, phase, gpus='8'):
    return devicedry.dry('eight_gpus.sh', tmp_path / 'out', phase,
                         'EIGHT_GPUS', gpus)


def commands(tmp_path):
    with open(tmp_path / 'out' / 'dry' / 'commands.txt') as fp:
        return fp.read().replace(str(tmp_path / 'out' / 'dry'), 'W') \
            .splitlines()


def doc_says(path, text):
    with open(os.path.join(REPO, path)) as fp:
        return text in fp.read()


def test_the_eight_gpu_run_phase_by_phase(tmp_path):
    p = dry(tmp_path, 'all')
    assert p.returncode == 0, (p.stdout, p.stderr)
    got = commands(tmp_path)
    py = '/tmp/first-week/clone/.venv/bin/python'
    week = ['bash benchmarks/device/first_week.sh nights W/week-nights'] + [
        '  first_week ' + c for c in
        [NIGHTLY.format('day01-first'), NIGHTLY.format('day02-first'),
         CALIBRATE] + [NIGHTLY.format(f'day0{i}-healthy')
                       for i in range(3, 8)]]
    assert got[:6] == [
        'RUNS=10 bash benchmarks/device/hook_timing.sh W/hook',
        'HOLD_GPU=5 SLOW_PAIR=3,6 bash benchmarks/device/hook_faults.sh '
        'W/faults',
        'bash benchmarks/device/first_week.sh main W/week-main',
        '  first_week scripts/run', '  first_week ' + CALIBRATE,
        f'timeout 300 {py} benchmarks/harness_overhead.py '
        f'/tmp/first-week/clone/ccl-health-output --json '
        f'W/main/overhead.json']
    assert got[6:6 + len(week)] == week
    # the commands a person types, as the docs write them (first_week.sh
    # stops, naming the doc, where one no longer says it)
    assert doc_says('README.md', 'scripts/run      # set up .venv, build, '
                                 'measure every transport')
    assert doc_says('docs/sites.md', CALIBRATE.replace(
        'local --partition gpu', '<system> --partition <partition>'))
    assert doc_says('README.md', NIGHTLY.split(' --night')[0])
    assert 'does not say' not in p.stdout + p.stderr
    for phase in ('week-step', 'week-crash', 'week-framework'):
        assert (f'bash benchmarks/device/first_week.sh {phase[5:]} '
                f'W/{phase}') in got
    assert '  first_week NCCL_NET=bogus ' + NIGHTLY.format(
        'day03-bogus-net') in got
    assert got[-2:] == [
        'python3 benchmarks/device/_eight_gpus_check.py reference '
        'reference/local.yaml W/ref/local.yaml',
        'RAS_NP=8 RAS_STOP_RANK=5 RAS_DEV_STOP=5 '
        'CCL_HEALTH_REFERENCE_DIR=W/ref bash '
        'benchmarks/device/ras_hang_on_device.sh W/hang']
    # what comes back: two files
    out = tmp_path / 'out'
    assert sorted(os.listdir(out)) == ['dry', 'eight-gpus-all.tgz',
                                       'eight-gpus-all.txt']
    assert (out / 'eight-gpus-all.txt').read_text().startswith(
        'eight_gpus all on 8 GPUs (dry: nothing run)\n')


def test_one_phase_runs_only_its_commands(tmp_path):
    p = dry(tmp_path, 'hang')
    assert p.returncode == 0, (p.stdout, p.stderr)
    got = commands(tmp_path)
    assert len(got) == 2 and got[1].endswith(
        'ras_hang_on_device.sh W/hang'), got
    p = dry(tmp_path, 'week-crash')
    got = commands(tmp_path)
    assert got[0] == 'bash benchmarks/device/first_week.sh crash ' \
        'W/week-crash' and all(c.startswith('  first_week ')
                               for c in got[1:]), got


def test_four_gpus_refuse_in_one_line(tmp_path):
    p = dry(tmp_path, 'hook', gpus='4')
    assert p.returncode == 2
    assert p.stdout.splitlines() == [
        "eight_gpus: this machine has 4 GPU(s); issue 46's proof needs 8 "
        "(one rank per GPU of a full node, 56 directed GPU pairs): run it "
        "on nvidia-h200-x8"]
    assert not (tmp_path / 'out' / 'dry').exists()


def test_an_unknown_phase_is_a_usage_error(tmp_path):
    p = dry(tmp_path, 'sweep')
    assert p.returncode == 2 and p.stderr.startswith('usage: ')


# -- the checker, on outputs in the formats the phases write ------------------

def _healthy(i):
    return (f'HEALTHY: all_reduce 1GiB on 8 GPUs 4{i}0.1 GB/s (reference '
            f'240.0) on local:gpu, ccl-health-links 256MiB: 56 GPU->GPU '
            f'385.2-387.0 GB/s (reference 193.0), 2.{i} s')


def _work(tmp_path, hold=5, pair=(3, 6), stopped=5, sizes=8):
    w = tmp_path / 'w'
    (w / 'hook').mkdir(parents=True)
    rows = ''.join(f'one-process\tall\t{i}\t0\t{2 + i / 10:.3f}\t'
                   f'{_healthy(i)}\n' for i in range(1, 11))
    rows += 'one-process\t0\t1\t0\t1.000\tHEALTHY: x\n'
    with tarfile.open(w / 'hook' / 'hook-timing.tgz', 'w:gz') as tf:
        data = rows.encode()
        info = tarfile.TarInfo('keep/runs.tsv')
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    (w / 'faults').mkdir()
    a, b = pair
    (w / 'faults' / 'hook-faults-summary.txt').write_text(
        ''.join(f'idle-{i}\texit 0\t2.1 s\t{_healthy(i)}\n'
                for i in (1, 2, 3)) +
        f'memory-held\texit 1\t2.3 s\tUNHEALTHY: reset (a reboot is expected'
        f' to clear it): GPU {hold} in use by pid 7156 (python3, 70.9 GiB; '
        f'also on GPU 0 0.5 GiB)...\n'
        f'slow-pair\texit 1\t2.4 s\tUNHEALTHY: isolate: GPU {a}->{b} copy '
        f'150.0 GB/s < 154.4 (reference 193.0)\n'
        'sigalrm\texit 2\t0.47 s\tCOULD-NOT-CHECK: stopped by SIGALRM '
        'before the check finished\n')
    (w / 'hang').mkdir()
    (w / 'hang' / 'ras-summary.txt').write_text(
        'build rc=0 31 s\n'
        f'stop\tOK\tHANG hang: ...: rank {stopped} (192.0.2.2 GPU '
        f'{stopped}, pid 3157) unresponsive\n'
        f'hook\tNOT OK\t(stopped rank {stopped} pid 3548)\n')
    (w / 'main').mkdir()
    (w / 'main' / 'overhead.json').write_text(json.dumps({'intra': {
        'sizes': [{'size': (64 << 20) << i, 'suite': 400.0, 'bare': 401.0,
                   'ratio': 0.9975} for i in range(sizes)]}}))
    (w / 'week-crash').mkdir()
    (w / 'week-crash' / 'first-week-crash.txt').write_text(
        'first_week crash on 8 GPU(s), 400 s\nok    crash: told as a CRASH\n'
        'FAIL  crash: with its WARN\n')
    return w


def summary(w):
    p = subprocess.run([sys.executable, CHECK, 'summary', str(w)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_the_checker_names_each_8_gpu_fact(tmp_path):
    got = summary(_work(tmp_path))
    assert got[:4] == [
        'ok    hook: 10 runs on all 8 GPUs (one probe process), want 10',
        'ok    hook: every 8-GPU run HEALTHY, exit 0 (0 not)',
        'ok    hook: every line names the 56 directed pairs (0 not)',
        '      hook: 8 GPUs median 2.55 s, max 3.00 s, 10 runs: the goal '
        '(<= 3 s) met']
    assert 'ok    faults: the foreign process named by GPU 5 (exit 1)' in got
    assert 'ok    faults: the slow pair named GPU 3->6 or 6->3 (exit 1)' \
        in got
    assert 'ok    faults: SIGALRM a could-not-check, exit 2 (exit 2)' in got
    assert 'ok    main: intra suite/bare at every size 64MiB-8GiB ' \
        '(missing: none)' in got
    assert any(ln.startswith('      main: intra suite/bare: 64MiB 0.998, '
                             '128MiB 0.998') and ln.endswith('8GiB 0.998')
               for ln in got), got
    assert 'FAIL  week-crash: first_week.sh expectations (1 FAIL)' in got
    assert any(ln.startswith('ok    hang: stop: ') for ln in got)
    assert any(ln.startswith('FAIL  hang: hook: ') for ln in got)


def test_the_checker_fails_what_names_the_wrong_gpu(tmp_path):
    got = summary(_work(tmp_path, hold=7, pair=(0, 1), sizes=5))
    assert 'FAIL  faults: the foreign process named by GPU 5 (exit 1)' in got
    assert 'FAIL  faults: the slow pair named GPU 3->6 or 6->3 (exit 1)' \
        in got
    assert 'FAIL  main: intra suite/bare at every size 64MiB-8GiB ' \
        '(missing: 2GiB, 4GiB, 8GiB)' in got


def test_the_hang_phase_reference_is_found_for_8_gpus(tmp_path):
    """The reference the hang phase gives the hook: the shipped file with a
    1 node x 8 GPUs entry, found by the suite's own lookup."""
    from ccl_health.judge import reference
    out = tmp_path / 'ref' / 'local.yaml'
    p = subprocess.run([sys.executable, CHECK, 'reference',
                        os.path.join(REPO, 'reference', 'local.yaml'),
                        str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    ref = reference.load_for_system(str(tmp_path / 'ref'), 'local')
    shipped = reference.load_for_system(os.path.join(REPO, 'reference'),
                                        'local')
    doc = yaml.safe_load(out.read_text())
    [eight] = [e for e in doc['partitions']['gpu']['entries']
               if e['gpus_per_node'] == 8]
    assert 'only so that the hook starts its probe' in eight['source']
    assert eight['busbw']['1GiB'] == round(355.37 / 2, 2)
    assert shipped.lookup('gpu', 'intra', 'all_reduce', 1, 8) is None
    assert ref.lookup('gpu', 'intra', 'all_reduce', 1, 8) is not None
    assert len(ref.partition('gpu').entries) == \
        len(shipped.partition('gpu').entries) + 1
