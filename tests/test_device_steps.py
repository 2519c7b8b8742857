"""benchmarks/device/_steps.sh: the steps the device scripts share, run
here on their CPU side (bash, a stand-in for nccl-tests, a process in a
session of its own).  The oracles: the exit status of the command each
step runs, the files it leaves, site/local.yaml as read by yaml, and the
signal a process was sent."""

import glob
import os
import re
import subprocess
import sys

import yaml

from conftest import REPO

STEPS = os.path.join(REPO, 'benchmarks', 'device', '_steps.sh')
DEVICE = os.path.dirname(STEPS)


def _bash(script, tmp_path, **env):
    """``script`` after the steps are sourced, in REPO, with K, L, S, SRC
    and note set as the device scripts set them; this Python first on
    PATH (yaml)."""
    k = tmp_path / 'keep'
    (k / 'logs').mkdir(parents=True, exist_ok=True)
    head = (f'set -u\nsource {STEPS}\nK={k}; L={k}/logs; S={tmp_path}/summary'
            f'.txt; SRC={tmp_path}/src\n'
            'note() { echo "$*" | tee -a "$S"; }\n')
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH']
    return subprocess.run(['bash', '-c', head + script], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, 'PATH': path, **env})


def test_every_device_script_that_uses_a_step_has_it():
    """A step is called only by a script that sources the steps (itself,
    or through _clean_copy.sh), and no script keeps its own copy of one."""
    steps = re.findall(r'^(\w+)\(\) \{', open(STEPS).read(), re.M)
    assert set(steps) == {'note', 'timed_step', 'wheels_to_site',
                          'pair_on_one_gpu', 'alarm_the_hook', 'keep_stages'}
    steps.remove('note')       # a default: a script's own replaces it
    used = set()
    for path in glob.glob(os.path.join(DEVICE, '*.sh')):
        if path == STEPS:
            continue
        text = open(path).read()
        sourced = '_steps.sh' in text or '_clean_copy.sh' in text
        for name in steps:
            if re.search(rf'(?<![\w-]){name}\b(?!\(\))', text):
                assert sourced, (path, name)
                used.add(name)
            assert not re.search(rf'^{name}\(\)', text, re.M), (path, name)
        # the copies the steps replace
        assert "print(f'wall {float(sys.argv[2])" not in text, path
        assert 'pip install -q --no-index --no-deps --no-compile ' \
            '--target /tmp/site "$SRC"' not in text, path
        assert 'kill -ALRM' not in text, path
    assert used == set(steps)
    assert '_steps.sh' in open(os.path.join(DEVICE, '_clean_copy.sh')).read()


def test_timed_step_returns_the_commands_status_and_logs_its_time(tmp_path):
    log = tmp_path / 'timings.txt'
    p = _bash(f'timed_step {log} bash -c "sleep 0.2; exit 3" > '
              f'{tmp_path}/out.txt; echo "rc=$?"', tmp_path)
    assert p.stdout.strip() == 'rc=3', p.stderr
    line = log.read_text()
    m = re.fullmatch(r'wall (\d+\.\d\d) s, rc 3: bash -c sleep 0\.2; exit 3'
                     r'\n', line)
    assert m and 0.2 <= float(m.group(1)) < 5, line
    assert (tmp_path / 'out.txt').read_text() == ''   # not in its output


def test_pair_on_one_gpu_wraps_nccl_tests_and_names_the_wrapper(tmp_path):
    real = tmp_path / 'real'
    real.mkdir()
    (real / 'all_reduce_perf').write_text(
        '#!/bin/bash\necho "$NCCL_HOSTID $NCCL_TESTS_DEVICE $*"\n')
    (real / 'all_reduce_perf').chmod(0o755)
    wrap, site = tmp_path / 'wrap', tmp_path / 'site'
    p = _bash(f'pair_on_one_gpu {real} {site} {sys.executable}', tmp_path,
              WRAP=str(wrap))
    assert p.returncode == 0, p.stderr
    for rank, want in ((None, 'ccl-health-rank-0'), ('1', 'ccl-health-rank-1')):
        env = {k: v for k, v in os.environ.items()
               if k != 'OMPI_COMM_WORLD_RANK'}
        if rank:
            env['OMPI_COMM_WORLD_RANK'] = rank
        out = subprocess.run([str(wrap / 'bin' / 'all_reduce_perf'), '-b',
                              '1M'], capture_output=True, text=True,
                             env=env).stdout
        assert out == f'{want} 0 -b 1M\n'
    with open(os.path.join(REPO, 'site', 'local.yaml')) as fp:
        want = yaml.safe_load(fp)
    want['build']['nccl_tests'] = {'prefix': str(wrap)}
    with open(site / 'local.yaml') as fp:
        assert yaml.safe_load(fp) == want


def test_alarm_the_hook_signals_its_group_and_says_what_was_left(tmp_path):
    k = tmp_path / 'keep'
    # the stand-in's name is made at run time (this script's own command
    # line does not hold it), and is this run's alone
    script = (f'export TMPDIR={tmp_path}/tmp; mkdir -p $TMPDIR/ccl-health-x\n'
              f'echo "HEALTHY: the stand-in" > {k}/sigalrm.line\n'
              f'n=stand-in-$$; echo "sleep 60" > {tmp_path}/$n-hook.sh\n'
              's=$(date +%s.%N)\n'
              f'setsid bash {tmp_path}/$n-hook.sh > /dev/null &\n'
              'pid=$!; sleep 0.5\n'
              'alarm_the_hook $pid $s "$n-hoo[k]" "$n-hoo[k]"\n')
    p = _bash(script, tmp_path)
    assert p.returncode == 0, p.stderr
    summary = (tmp_path / 'summary.txt').read_text().splitlines()
    # SIGALRM (14): the shell's status 128 + 14
    assert re.fullmatch(r'sigalrm\texit 142\t\d+\.\d\d s\tHEALTHY: the '
                        r'stand-in', summary[0]), summary
    assert summary[1] == ('  processes before: 1, left after: 0; temporary '
                          'folders left: 1'), summary
    assert '-hook.sh' in (k / 'sigalrm-ps-before.txt').read_text()
    assert (k / 'sigalrm-ps-after.txt').read_text() == ''
    assert 'ccl-health-x' in (k / 'sigalrm-tmp-after.txt').read_text()


def test_keep_stages_keeps_the_evidence_and_not_the_builds(tmp_path):
    o = tmp_path / 'o-sweep'
    case = o / 'stage' / 'local' / 'gpu' / 'builtin' / 'AllReduceSweep_1'
    build = o / 'stage' / 'local' / 'gpu' / 'builtin' / 'Build_2'
    for d in (case, build, o / 'reports'):
        d.mkdir(parents=True)
    (o / 'reports' / 'run-1.json').write_text('{}')
    (case / 'rfm_job.sh').write_text('job')
    (case / 'ccl-health-case.json').write_text('{}')
    (case / 'big.out').write_text('left')
    (build / 'rfm_build.json').write_text('{}')
    (case / 'nccl-debug.h.1.log').write_text(
        'h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n'
        'h:1:1 [0] NCCL INFO Bootstrap : Using eth0\n'
        'h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n')
    (case / 'nccl-debug.h.2.log').write_text('second rank\n')
    p = _bash(f'keep_stages "{tmp_path}/o-*"', tmp_path)
    assert p.stderr == ''   # its status is its last test's: not checked
    k = tmp_path / 'keep' / 'o-sweep'
    kept = sorted(str(f.relative_to(k)) for f in k.rglob('*') if f.is_file())
    rel = 'stage/local/gpu/builtin/AllReduceSweep_1'
    assert kept == ['reports/run-1.json', f'{rel}/ccl-health-case.json',
                    f'{rel}/nccl-debug-excerpt.log', f'{rel}/rfm_job.sh']
    assert (k / rel / 'nccl-debug-excerpt.log').read_text() == (
        'h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n'
        'h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n')


def test_wheels_to_site_notes_what_did_not_install(tmp_path):
    (tmp_path / 'src' / '.whl').mkdir(parents=True)
    p = _bash('wheels_to_site; echo "PYTHONPATH=$PYTHONPATH"', tmp_path)
    assert f'pip: no wheels in {tmp_path}/src/.whl' in p.stdout
    # without a note of its own, a script's notes are printed
    q = subprocess.run(['bash', '-c', f'source {STEPS}; SRC={tmp_path}/src;'
                        f' L={tmp_path}; wheels_to_site'],
                       capture_output=True, text=True, cwd=REPO)
    assert q.stdout == f'pip: no wheels in {tmp_path}/src/.whl (carry ' \
        f'.whl)\n', q.stderr
    assert f'PYTHONPATH=/tmp/site:{REPO}' in p.stdout
    (tmp_path / 'src' / '.whl' / 'bad-1.0-py3-none-any.whl').write_text('x')
    (tmp_path / 'summary.txt').unlink()
    p = _bash('wheels_to_site', tmp_path)
    assert (tmp_path / 'summary.txt').read_text() == \
        'pip: the wheels did not install (see logs/pip.log)\n'
    assert (tmp_path / 'keep' / 'logs' / 'pip.log').read_text()
