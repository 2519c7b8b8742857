"""The CPU parts of benchmarks/device/hook_faults.sh (issue 42: the hook's
faults on the device, run by the lead): the script parses, the Python it
writes out compiles, every file it uses is in the repository, and its
summary helper reads what the hook's ``--json`` holds (the PCIe links seen
under load, the GPUs a process holds)."""

import os
import re
import subprocess
import sys

from conftest import REPO

SCRIPT = os.path.join(REPO, 'benchmarks', 'device', 'hook_faults.sh')
DETAIL = os.path.join(REPO, 'benchmarks', 'device', '_hook_detail.py')


def test_the_script_parses_and_its_python_compiles():
    p = subprocess.run(['bash', '-n', SCRIPT], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    text = open(SCRIPT).read()
    blocks = re.findall(r"<<'PY'\n(.*?)\nPY\n", text, re.S)
    # the site file's edit, the holder, the copy loop
    assert len(blocks) == 3
    for b in blocks:
        compile(b, SCRIPT, 'exec')
    for path in ('benchmarks/device/_clean_copy.sh',
                 'benchmarks/device/_hook_timing_ref.py',
                 'builders/src/ccl_health_links.cu',
                 'scripts/ccl-health-check', 'site/nhc/ccl_health.nhc',
                 'benchmarks/device/_hook_detail.py'):
        assert path in text or os.path.basename(path) in text, path
        assert os.path.exists(os.path.join(REPO, path)), path
    # one tarball comes back
    assert re.findall(r'\$OUT1/[\w.-]+\.tgz', text) == [
        '$OUT1/hook-faults.tgz']


def test_summary_helper_reads_the_hooks_json(tmp_path):
    from ccl_health.evidence.nodestate.nodedata import (
        GIB, GpuState, NodeState, Process)
    from ccl_health.hook import judging
    from ccl_health.judge.verdicts import Verdict
    import dataclasses
    import json
    p = Process(4242, 'python3', 100 * GIB)
    q = Process(4242, 'python3', GIB // 2)
    s = NodeState(vendor='nvidia', time=1.0, gpus=[
        GpuState(0, processes=[q], memory_used=GIB, memory_total=80 * GIB),
        GpuState(1, processes=[p], memory_used=101 * GIB,
                 memory_total=141 * GIB)],
        pci={'0000:18:00.0': {'role': 'gpu', 'speed': 2.5, 'width': 16,
                              'max_speed': 32.0, 'max_width': 16}})
    loaded = NodeState(vendor='nvidia', gpus=[GpuState(
        0, pcie_gen=5, pcie_width=16, utilization=100,
        processes=[Process(9, 'x', GIB, True)])])
    res = judging.with_node_state(judging.result(Verdict.PASS, 'x'), s, s,
                                  under_load=[loaded])
    doc = tmp_path / 'hook.json'
    doc.write_text(json.dumps(dataclasses.asdict(res)))
    out = subprocess.run([sys.executable, DETAIL, str(doc)],
                         capture_output=True, text=True).stdout
    assert '  under load: {"readings": 1, "gpus": {"0": {"gen": 5, ' \
        '"width": 16, "busy": 100}}}' in out
    assert '0000:18:00.0 gpu 2.5/32.0 GT/s x16/x16' in out
    assert 'foreign-process (drain): GPU 1 in use by pid 4242 (python3, ' \
        '100.0 GiB; also on GPU 0 0.5 GiB)' in out
    assert f"held per GPU: {{'0': {GIB // 2}, '1': {100 * GIB}}}" in out


def test_the_site_edit_gives_the_hook_its_prefix_and_launcher(tmp_path):
    """The script's edit of the clone's site file, run on a copy of the
    real one: the site loader reads the tests' prefix and the launcher
    allowed to run as root (what the hook under env -i goes by)."""
    import shutil
    from ccl_health.evidence import programs
    from ccl_health.evidence.benignwarns import check_benign
    from ccl_health.sitedata import site as site_data
    text = open(SCRIPT).read()
    edit = re.findall(r"python3 - \"\$P\" <<'PY'\n(.*?)\nPY\n", text,
                      re.S)[0]
    shutil.copytree(os.path.join(REPO, 'site'), tmp_path / 'site')
    p = subprocess.run([sys.executable, '-', '/tmp/hf-prefix'], input=edit,
                       text=True, cwd=tmp_path, capture_output=True)
    assert p.returncode == 0, p.stderr
    site = site_data.load(str(tmp_path / 'site'), 'local',
                          benign_check=check_benign)
    assert programs.site_prefix(site.build, programs.NCCL_TESTS) == \
        '/tmp/hf-prefix'
    assert site.health.env == {'NCCL_NVLS_ENABLE': '0'}
    assert site.health.launcher == [
        'mpirun', '--allow-run-as-root', '--bind-to', 'none', '-np'] or \
        site.health.launcher == 'mpirun --allow-run-as-root --bind-to none ' \
                                '-np'
