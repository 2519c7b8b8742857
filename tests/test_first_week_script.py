"""The device proof of issue 40 (benchmarks/device/first_week.sh) without a
GPU: its dry mode writes every command instead of running it, so what is
checked here is what the device would run: each command quoted word for
word from the doc that shows it (the script stops, naming the doc, where
one no longer says it), the order of the week, and the choice of the step
from bare nccl-tests outputs (_first_week_step.py)."""

import os
import subprocess
import sys
import tarfile

from conftest import REPO
from helpers import devicedry
from helpers.devicedry import NIGHTLY

PICK = os.path.join(REPO, 'benchmarks', 'device', '_first_week_step.py')


def dry(tmp_path, phase, gpus='4'):
    return devicedry.dry('first_week.sh', tmp_path / 'out', phase,
                         'FIRST_WEEK', gpus, timeout=300)


def commands(tmp_path):
    with open(tmp_path / 'out' / 'dry' / 'keep' / 'commands.txt') as fp:
        return [ln.split('] ', 1)[1].split('   > ')[0] for ln in fp
                if ln.startswith('[') and '] bare ' not in ln]


def test_the_week_as_the_docs_write_it(tmp_path):
    p = dry(tmp_path, 'all')
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert 'does not say' not in p.stdout + p.stderr
    calibrate = ('scripts/calibrate --db ccl-health-output/ccl-health.db '
                 '--system local --partition gpu')
    want = (['scripts/run', calibrate] +
            [NIGHTLY.format(f'day0{i}-first') for i in (1, 2)] +
            [calibrate] +
            [NIGHTLY.format(f'day0{i}-healthy') for i in range(3, 8)] +
            [f'NCCL_NTHREADS=352 ' + NIGHTLY.format(
                f'day{i:02d}-step-NCCL_NTHREADS') for i in (8, 9, 10)] +
            ['scripts/report detect',
             'scripts/report accept nightly-dry-day10-step-NCCL_NTHREADS'
             ' --reason "first_week.sh: NCCL_NTHREADS=352 accepted as '
             'the new level"', 'scripts/report detect',
             'NCCL_NTHREADS=352 ' + NIGHTLY.format(
                 'day11-after-accept-NCCL_NTHREADS'),
             'NCCL_NET=bogus ' + NIGHTLY.format('day12-bogus-net'),
             NIGHTLY.format('day13-healthy-again'),
             NIGHTLY.format('day14-healthy-again'),
             "scripts/run --checks checks/framework_checks.py -- -n "
             "'TorchBandwidth%transport=intra' -n FirstCall",
             "scripts/run --checks checks/framework_checks.py -- -n "
             "'TorchTrainingStep%transport=intra' -n "
             "'TorchTrainingStepPlugin%transport=net-plugin%'"])
    assert commands(tmp_path) == want
    # what comes back: one tarball and its summary
    out = tmp_path / 'out'
    assert sorted(os.listdir(out)) == ['dry', 'first-week-all.tgz',
                                       'first-week-all.txt']
    with tarfile.open(out / 'first-week-all.tgz') as tf:
        names = tf.getnames()
    assert 'keep/nights/day12-bogus-net.out' in names
    assert 'keep/bare/choice.txt' in names


def test_a_phase_makes_the_history_it_needs(tmp_path):
    p = dry(tmp_path, 'crash')
    assert p.returncode == 0, (p.stdout, p.stderr)
    got = commands(tmp_path)
    assert got[:2] == [NIGHTLY.format('day01-first'),
                       NIGHTLY.format('day02-first')]
    assert got[2].startswith('scripts/calibrate --db ')
    assert got[3] == 'NCCL_NET=bogus ' + NIGHTLY.format('day03-bogus-net')


def test_one_gpu_says_why_and_stops(tmp_path):
    p = dry(tmp_path, 'nights', gpus='1')
    assert p.returncode == 2
    assert 'the proof needs 2 or more' in p.stdout
    assert not (tmp_path / 'out' / 'dry').exists()


def _output(path, factor):
    rows = []
    for i, bw in enumerate((313.0, 329.0, 340.0, 347.0, 355.0)):
        size = (64 << 20) << i
        b = bw * factor[i] if isinstance(factor, tuple) else bw * factor
        rows.append(f'{size:>12} {size // 4:>12} float sum -1 1.0 1.0 '
                    f'{b:.2f} 0 1.0 1.0 {b - 0.5:.2f} 0')
    path.write_text('# nccl-tests\n' + '\n'.join(rows) + '\n')


def test_the_step_is_the_setting_nearest_four_percent(tmp_path):
    _output(tmp_path / 'base-1.out', 1.0)
    _output(tmp_path / 'base-2.out', 0.998)
    for label, setting, f in (
            ('a', 'NCCL_A=1', 0.99),                      # -1 %: too small
            ('b', 'NCCL_B=1', 0.955),                     # -4.5 %
            ('c', 'NCCL_C=1', 0.962),                     # -3.8 %: nearest
            ('d', 'NCCL_D=1', (0.93, 0.997, 0.96, 0.96, 0.96)),  # 1 size -0.3 %
            ('e', 'NCCL_E=1', 0.80)):                     # -20 %
        _output(tmp_path / f'cand-{label}.out', f)
        (tmp_path / f'cand-{label}.env').write_text(setting + '\n')
    p = subprocess.run([sys.executable, PICK, str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout
    assert (tmp_path / 'choice.env').read_text() == 'NCCL_C=1\n'
    assert 'chosen: NCCL_C=1' in p.stdout
    # nothing in range: no choice, exit 3
    (tmp_path / 'choice.env').unlink()
    for label in 'bcd':
        (tmp_path / f'cand-{label}.out').unlink()
    p = subprocess.run([sys.executable, PICK, str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 3 and not (tmp_path / 'choice.env').exists()
