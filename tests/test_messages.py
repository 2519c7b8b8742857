"""Every line says what happened, in the user's words, and names the next
step (issue 32.3-4): the line of a machine without GPUs carries no vendor
tool's noise and cuts no word; a dry run counts only the job scripts it
rendered; the commands' options come in any order and their --help is
plain text that exits 0."""

import os
import re
import subprocess
import sys

import pytest

from ccl_health.evidence import nodefacts as node
from conftest import REPO

SCRIPTS = os.path.join(REPO, 'scripts')
HIST = os.path.join(REPO, 'tests', 'fixtures', 'device', 'history-health',
                    'keep', 'hist.db')

#: rocminfo 5.x of Debian's ROCm packages in a container without a GPU
#: (this project's CI machine, captured): stdout in colour, stderr from
#: libkmod, exit 1
ROCMINFO_OUT = '\x1b[31mROCk module is NOT loaded, possibly no GPU devices' \
    '\x1b[0m\n'
ROCMINFO_ERR = ('libkmod: ERROR ../libkmod/libkmod-module.c:1725 '
                'kmod_module_new_from_loaded: could not open /proc/modules: '
                'No such file or directory\nError: could not get list of '
                'modules: No such file or directory\n')
#: nvidia-smi where the driver is not loaded (its message, on stdout)
NVSMI_OUT = ("NVIDIA-SMI has failed because it couldn't communicate with the "
             "NVIDIA driver. Make sure that the latest NVIDIA driver is "
             "installed and running.\n\n")


def _tool(folder, name, out, err, code):
    folder.mkdir(exist_ok=True)
    path = folder / name
    (folder / f'{name}.out').write_text(out)
    (folder / f'{name}.err').write_text(err)
    path.write_text(f'#!/bin/sh\n/bin/cat "{path}.out"\n'
                    f'/bin/cat "{path}.err" >&2\nexit {code}\n')
    path.chmod(0o755)
    return folder


def _detect(path):
    env = {'PATH': str(path)}
    old = os.environ.get('PATH')
    os.environ['PATH'] = str(path)
    try:
        return node.detect_gpus(env)
    finally:
        os.environ['PATH'] = old


def test_no_gpu_line_names_each_tool_without_its_noise(tmp_path):
    amd = _detect(_tool(tmp_path / 'amd', 'rocminfo', ROCMINFO_OUT,
                        ROCMINFO_ERR, 1))
    assert amd.count == 0 and amd.tool == 'rocminfo'
    assert amd.why_none == ('no GPU found (nvidia-smi: not installed; '
                            'rocminfo: no AMD GPU driver loaded)')
    nv = _detect(_tool(tmp_path / 'nv', 'nvidia-smi', NVSMI_OUT, '', 9))
    assert nv.tool == 'nvidia-smi'
    assert nv.why_none == 'no GPU found (nvidia-smi: no NVIDIA driver ' \
        'answered)'
    none = _detect(tmp_path / 'empty')
    assert none.tool == '' and none.why_none == (
        'no GPU found (nvidia-smi: not installed; rocminfo: not installed)')
    for line in (amd.why_none, nv.why_none, none.why_none):
        assert not re.search(r'libkmod|\x1b|/proc/modules|ROCk', line)


def test_an_unknown_answer_is_cut_between_words(tmp_path):
    said = ' '.join(f'word{i}' for i in range(60))
    got = _detect(_tool(tmp_path / 'x', 'rocminfo', '',
                        'libkmod: ERROR noise\n' + said, 3))
    m = re.fullmatch(r'no GPU found \(nvidia-smi: not installed; rocminfo: '
                     r'exit 3, (.*) \.\.\.\)', got.why_none)
    assert m, got.why_none
    words = m.group(1).split()
    assert words == said.split()[:len(words)] and len(words) > 5


def test_dry_run_counts_only_its_own_job_scripts(tmp_path):
    """A reused output folder: the second run's count and example are its
    own, not the first run's scripts beside them."""
    out = tmp_path / 'out'
    env = dict(os.environ, CCL_HEALTH_MODULES_SYSTEM='nomod',
               CCL_HEALTH_ACCOUNT='abc123', RFM_COLORIZE='n')
    env.pop('CCL_HEALTH_ASSUME_GPUS', None)
    said = []
    for system in ('local', 'frontier'):
        p = subprocess.run([os.path.join(SCRIPTS, 'run'), '--dry-run',
                            '--output', str(out), '--', '--system', system],
                           env=dict(env, CCL_HEALTH_ASSUME_GPUS='2:sm_90')
                           if system == 'local' else env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        m = re.search(r'dry run rendered (\d+) job scripts: (.*), e\.g\. '
                      r'(\S+)\.  Nothing was run or measured', p.stdout)
        assert m, p.stdout[-2000:]
        shapes = sum(int(n) for n in re.findall(r'(?:^|; )(\d+) x ',
                                                m.group(2)))
        assert int(m.group(1)) == shapes, m.group(0)
        assert f'/stage/{system}/' in m.group(3)
        said.append(int(m.group(1)))
    assert len(list(out.glob('stage/**/rfm_job.sh'))) > said[1]


def test_db_before_or_after_the_question():
    for argv in (['--db', HIST, 'runs', '--last', '1'],
                 ['runs', '--db', HIST, '--last', '1'],
                 ['runs', '--last', '1', '--db', HIST]):
        p = subprocess.run([os.path.join(SCRIPTS, 'report')] + argv,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, (argv, p.stderr)
        assert 'degraded-proto-ll' in p.stdout, argv


def test_python_m_ccl_health_report_is_scripts_report():
    p = subprocess.run([sys.executable, '-m', 'ccl_health.report', 'runs',
                        '--db', HIST, '--last', '1'], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and 'degraded-proto-ll' in p.stdout, p.stderr
    p = subprocess.run([sys.executable, '-m', 'ccl_health.report', '--help'],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0
    assert p.stdout.startswith('usage: python -m ccl_health.report ')


@pytest.mark.parametrize('script', ['run', 'report', 'calibrate', 'explain',
                                    'fleet', 'nightly', 'ccl-health-check',
                                    'init-site'])
def test_help_is_plain_text_and_exits_0(script):
    p = subprocess.run([os.path.join(SCRIPTS, script), '--help'],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (script, p.stdout[-500:], p.stderr[-500:])
    assert p.stdout.startswith('usage: ')
    markup = re.findall(r':(?:mod|data|func|class|meth|attr):`|``',
                        p.stdout)
    assert not markup, (script, markup)
