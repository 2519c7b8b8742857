"""A node's role comes from the resource manager and the PCI bus, never
from its host name alone (issue 27, item 4).

* Slurm's record of the node (``scontrol -o show node``,
  ccl_health/evidence/nodestate/slurmnode.py) read on real captures of the
  Slurm 22.05 of tests/helpers/slurm_cluster.py and on lines built from
  them with the fields of Slurm's slurm_sprint_node_table;
* the PCI bus (ccl_health/evidence/nodestate/pci.py) on the stand-ins of
  tests/fixtures/sysfs;
* the hook's false-drain cases through every door a site uses: the hook,
  the real LBNL NHC 1.4.3 (NHC_RM=slurm) and the Slurm HealthCheckProgram
  wrapper (SLURMD_NODENAME), with a stand-in ``scontrol``: a CPU node under
  a GPU system's host pattern, a node allocated to a job with the job's
  process on a GPU, Slurm failing or hanging: none drains; the same
  process on an idle node drains as before;
* the node state from a real slurmctld (an allocated node: a running
  ``sbatch --exclusive --wrap 'sleep ...'``), marked ``slurm`` like the
  other tests that start a Slurm (root, Debian's slurm and munge)."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import REPO
from ccl_health.evidence.nodestate import pci
from ccl_health.evidence.nodestate import slurmnode as slurm
from ccl_health.judge import nodejudge as node_judge
from ccl_health.judge.verdicts import Verdict
from helpers.node import FAKE, REPLAY, environ
from helpers.hostile import FOREIGN_NVML, SLURM_WRAPPER, site_naming_replay
from helpers.nhc import nhc, run_nhc  # noqa: F401  (nhc: a fixture)
from helpers.slurmrecords import captured, record

HOOK = [sys.executable, '-m', 'ccl_health.hook']
STD = ['--tests-prefix', REPLAY, '--launcher', os.path.join(FAKE, 'launch')]
FIX = os.path.join(REPO, 'tests', 'fixtures')
SYSFS = os.path.join(FIX, 'sysfs')


# -- Slurm's record of the node -----------------------------------------------

def test_real_records_of_slurm_22_05():
    idle = slurm.parse_node(captured('n01-idle'), 'n01')
    assert (idle.name, idle.base, idle.flags, idle.has_job) == \
        ('n01', 'IDLE', (), False)
    assert idle.partitions == ('batch',) and idle.gpus == 0 and \
        not idle.gpu_gres and idle.features == ()
    mixed = slurm.parse_node(captured('n01-mixed-sbatch-sleep'), 'n01')
    assert mixed.base == 'MIXED' and mixed.has_job
    drained = slurm.parse_node(captured('n02-idle-drain-reason'), 'n02')
    # the reason holds "State=IDLE": text of the reason, not the state
    assert drained.state == 'IDLE+DRAIN' and drained.flags == ('DRAIN',)
    assert not drained.has_job
    # another node's record is not this node's
    assert slurm.parse_node(captured('n01-idle'), 'n02') is None


def test_records_built_with_slurms_fields():
    n = slurm.parse_node(record(
        'nid001234', 'ALLOCATED+DRAIN', 'gpu:a100:4(S:0-1)', 'gpu,gpu_ss11',
        'gpu,a100,hbm40g', reason='NHC: ECC State=IDLE Gres=(null)'),
        'nid001234')
    assert (n.base, n.flags, n.has_job) == ('ALLOCATED', ('DRAIN',), True)
    assert n.gres == 'gpu:a100:4(S:0-1)' and n.gpus == 4 and n.gpu_gres
    assert n.partitions == ('gpu', 'gpu_ss11')
    assert n.features == ('gpu', 'a100', 'hbm40g')


@pytest.mark.parametrize('state, base, job', [
    ('IDLE', 'IDLE', False), ('ALLOCATED', 'ALLOCATED', True),
    ('MIXED', 'MIXED', True), ('MIXED+COMPLETING+DRAIN', 'MIXED', True),
    ('IDLE+COMPLETING', 'IDLE', True), ('IDLE+DRAIN', 'IDLE', False),
    ('DOWN+NOT_RESPONDING', 'DOWN', False), ('IDLE+POWERED_DOWN', 'IDLE',
                                             False),
    # node_state_string / _compact forms (older releases, sinfo)
    ('ALLOCATED+', 'ALLOCATED', True), ('DRAINING', 'ALLOCATED', True),
    ('DRAINED', 'IDLE', False), ('COMPLETING', 'IDLE', True),
    ('MIX*', 'MIXED', True), ('alloc', 'ALLOCATED', True),
    ('COMP', 'IDLE', True), ('DRNG', 'ALLOCATED', True),
    ('FAILING', 'ALLOCATED', True), ('IDLE~', 'IDLE', False),
    ('MIX-', 'MIXED', True), ('DOWN*', 'DOWN', False)])
def test_states(state, base, job):
    b, flags = slurm.parse_state(state)
    assert b == base
    assert slurm.SlurmNode('n', state, b, flags).has_job is job


@pytest.mark.parametrize('gres, gpus, any_gpu', [
    ('(null)', 0, False), ('', 0, False), ('gpu:4', 4, True),
    ('gpu:a100:4(S:0-1)', 4, True),
    ('gpu:h100:8(S:0-1),nic:mlx5:2', 8, True),
    ('gpu:a100:2(S:0),gpu:v100:2(S:1)', 4, True),
    ('nic:mlx5:2,bandwidth:lustre:no_consume:4G', 0, False),
    ('shard:8', 0, True), ('gpu', 1, True)])
def test_gres(gres, gpus, any_gpu):
    assert slurm.parse_gres(gres) == (gpus, any_gpu)


def test_slurm_named_by_slurmd_or_nhc_and_the_own_job():
    assert slurm.named({'SLURMD_NODENAME': 'n1'}) == 'SLURMD_NODENAME=n1'
    assert slurm.named({'NHC_RM': 'slurm'}) == 'NHC_RM=slurm'
    assert slurm.named({'NHC_RM': 'pbs'}) == ''
    assert slurm.node_name({}, 'nid001234.chn.perlmutter.nersc.gov') == \
        'nid001234'
    assert slurm.own_job({'SLURM_JOB_ID': '7'}) == '7'
    assert slurm.own_job({'SLURM_JOB_ID': '7',
                          'SLURM_SCRIPT_CONTEXT': 'prolog_slurmd'}) == ''


# -- the PCI bus --------------------------------------------------------------

def test_pci_bus(tmp_path):
    assert pci.gpus(os.path.join(SYSFS, 'gpu-node')) == [
        ('0000:19:00.0', 'nvidia'), ('0000:3b:00.0', 'nvidia')]
    # the board's ASPEED VGA of a CPU node is no GPU
    assert pci.gpus(os.path.join(SYSFS, 'cpu-node')) == []
    assert pci.gpus(str(tmp_path / 'no-sysfs')) is None
    # an MI300X: a processing accelerator (0x1200) amdgpu binds
    dev = tmp_path / 'bus' / 'pci' / 'devices' / '0000:05:00.0'
    dev.mkdir(parents=True)
    (dev / 'vendor').write_text('0x1002\n')
    (dev / 'class').write_text('0x120000\n')
    assert pci.gpus(str(tmp_path)) == [('0000:05:00.0', 'amd')]


def test_the_judge_of_the_role():
    cpu = slurm.parse_node(record(gres='(null)'))
    gpu = slurm.parse_node(record(gres='gpu:4'))
    assert node_judge.not_a_gpu_node(cpu, [], 0)[0] is Verdict.SKIPPED
    assert node_judge.not_a_gpu_node(None, [], 0)[0] is Verdict.SKIPPED
    assert node_judge.not_a_gpu_node(gpu, [], 0) is None     # Slurm: GPUs
    assert node_judge.not_a_gpu_node(cpu, [('a', 'nvidia')], 0) is None
    assert node_judge.not_a_gpu_node(cpu, None, 0) is None   # bus unread
    assert node_judge.not_a_gpu_node(cpu, [], 2) is None     # driver: 2
    busy = slurm.parse_node(record(state='ALLOCATED'))
    assert node_judge.probe_allowed(busy) == (
        False, 'allocated to a job: Slurm State=ALLOCATED')
    assert node_judge.probe_allowed(busy, own_job='7') == (True, '')
    assert node_judge.probe_allowed(cpu) == (True, '')
    assert node_judge.probe_allowed(None) == (True, '')


def test_partition_from_slurm_where_the_configuration_matches():
    from ccl_health.evidence.nodefacts import Gpus
    from ccl_health.hook.where import load_config_system, slurm_matches
    cfg = os.path.join(REPO, 'config')
    gpus = Gpus('nvidia', 4)
    perl = load_config_system(cfg, 'perlmutter', gpus)['partitions'][0]
    lumi = load_config_system(cfg, 'lumi', gpus)['partitions'][0]
    # Perlmutter's GPU partition asks for the feature gpu (-C gpu)
    assert slurm_matches(perl, slurm.parse_node(record(
        partitions='regular_milan_ss11', features='gpu,a100,hbm40g')))
    assert not slurm_matches(perl, slurm.parse_node(record(
        partitions='regular_milan_ss11', features='cpu')))
    # LUMI's: --partition=standard-g
    assert slurm_matches(lumi, slurm.parse_node(record(
        partitions='standard-g,small-g')))
    assert not slurm_matches(lumi, slurm.parse_node(record(
        partitions='standard')))
    assert not slurm_matches(lumi, None)


# -- the doors: stand-ins -----------------------------------------------------

SCONTROL = '''#!/bin/sh
# stand-in scontrol: answers "-o show node NAME" with the record in
# $FAKE_SCONTROL_RECORD named NAME (FAKE_SCONTROL=fail / hang / notfound /
# noconfig for the failures), records every call
echo "scontrol $*" >> "${FAKE_SCONTROL_CALLS:-/dev/null}"
if [ "$1 $2 $3" = "-o show node" ]; then
    case "${FAKE_SCONTROL:-answer}" in
        fail) echo "slurm_load_node error: Unable to contact slurm controller (connect failure)" >&2
              exit 1 ;;
        hang) exec sleep 60 ;;
        notfound) echo "Node $4 not found"; exit 1 ;;
        noconfig) echo "scontrol: fatal: Could not establish a configuration source" >&2
                  exit 1 ;;
    esac
    sed "s/^NodeName=[^ ]*/NodeName=$4/" "$FAKE_SCONTROL_RECORD"
fi
exit 0
'''

#: a pynvml stand-in: FOREIGN_NVML (a foreign process on GPU 1 where
#: $FAKE_FOREIGN_PID is set) with the uncorrectable ECC errors of GPU 0 in
#: $FAKE_ECC
NVML = FOREIGN_NVML + '''

def nvmlDeviceGetMemoryInfo(h):
    held = os.environ.get('FAKE_FOREIGN_PID') and h[1] == 1
    return {'total': 80 << 30, 'used': (13 << 30) if held else 0}


def nvmlDeviceGetComputeRunningProcesses(h):
    pid = os.environ.get('FAKE_FOREIGN_PID')
    return [_P(int(pid))] if pid and h[1] == 1 else []


def nvmlDeviceGetTotalEccErrors(h, etype, counter):
    return int(os.environ.get('FAKE_ECC', '0')) if (h[1], etype) == (0, 1) \\
        else 0
'''

ROCMINFO = '''#!/bin/sh
# rocminfo on a node without a GPU (what the issue's CPU node answered)
echo "ROCk module is NOT loaded, possibly no GPU devices"
exit 1
'''


def stand_ins(tmp_path, state='IDLE', gres='gpu:2', partitions='gpu',
              name='ci-test-host', mode='answer', foreign=False, ecc=0,
              nvml=None):
    """The environment of a node: a stand-in scontrol answering with a
    record of ``state`` / ``gres`` / ``partitions`` (``mode``: fail, hang,
    notfound), a foreign process on GPU 1 (``foreign``), ``ecc``
    uncorrectable errors on GPU 0 (``nvml``: the NVML stand-in even with
    neither)."""
    b = tmp_path / 'slurmbin'
    b.mkdir(exist_ok=True)
    (b / 'scontrol').write_text(SCONTROL)
    (b / 'scontrol').chmod(0o755)
    rec = tmp_path / 'record.txt'
    rec.write_text(record(name, state, gres, partitions))
    env = {'PATH': f'{b}{os.pathsep}{FAKE}{os.pathsep}{os.environ["PATH"]}',
           'FAKE_SCONTROL_RECORD': str(rec), 'FAKE_SCONTROL': mode,
           'FAKE_SCONTROL_CALLS': str(tmp_path / 'calls')}
    if foreign or ecc or nvml:
        nv = tmp_path / 'nvml'
        nv.mkdir(exist_ok=True)
        (nv / 'pynvml.py').write_text(NVML)
        env.update(PYTHONPATH=f'{nv}{os.pathsep}{REPO}',
                   FAKE_FOREIGN_PID=str(os.getpid()) if foreign else '',
                   FAKE_ECC=str(ecc))
    return env


def cpu_node(tmp_path, slurm_gres='(null)'):
    """A CPU node of Perlmutter (its host name matches the GPU system's
    nid\\d+): rocminfo finds no GPU, no GPU on its PCI bus."""
    env = stand_ins(tmp_path, gres=slurm_gres, partitions='regular_milan_ss11',
                    name='nid001234')
    b = tmp_path / 'cpubin'
    b.mkdir()
    (b / 'rocminfo').write_text(ROCMINFO)
    (b / 'rocminfo').chmod(0o755)
    env['PATH'] = f'{tmp_path / "slurmbin"}{os.pathsep}{b}{os.pathsep}' \
        '/usr/bin:/bin'
    # nid<N> is LUMI's too: the shipped configuration names no single
    # system for it (tests/test_site_pointer.py), Perlmutter's site does
    env.update(CCL_HEALTH_HOSTNAME='nid001234', CCL_HEALTH_SYSTEM='perlmutter',
               CCL_HEALTH_SYSFS=os.path.join(SYSFS, 'cpu-node'))
    return env


def hook(tmp_path, env, *args, slurmd=True):
    """(exit, the one line, the --json document) of the hook; with
    ``slurmd``: run as slurmd runs it (SLURMD_NODENAME)."""
    env = dict(env)
    if slurmd:
        env.setdefault('SLURMD_NODENAME',
                       env.get('CCL_HEALTH_HOSTNAME') or 'n01')
    mark = tmp_path / 'probe-started'
    launch = tmp_path / 'launch'
    launch.write_text(f'#!/bin/sh\ntouch {mark}\nexec {FAKE}/launch "$@"\n')
    launch.chmod(0o755)
    p = subprocess.run(HOOK + ['--tests-prefix', REPLAY, '--launcher',
                               str(launch), '--json',
                               str(tmp_path / 'd.json')] + list(args),
                       env=environ(tmp_path, env), capture_output=True,
                       text=True, timeout=120, cwd=str(tmp_path))
    lines = p.stdout.splitlines()
    assert len(lines) == 1, (p.stdout, p.stderr)
    doc = json.loads((tmp_path / 'd.json').read_text()) if (
        tmp_path / 'd.json').exists() else {}
    doc['probe_started'] = mark.exists()
    return p.returncode, lines[0], doc


def test_cpu_node_under_a_gpu_host_pattern_is_skipped(tmp_path):
    rc, line, d = hook(tmp_path, cpu_node(tmp_path))
    assert rc == 0 and line == (
        'SKIPPED: not a GPU node (no GPU on its PCI bus; Slurm: '
        'Gres=(null) of node nid001234)'), line
    assert d['verdict'] == 'skipped' and not d['probe_started']
    assert d['role']['node']['partitions'] == ['regular_milan_ss11']
    assert d['role']['pci_gpus'] == []


def test_cpu_node_without_a_resource_manager_is_skipped(tmp_path):
    env = cpu_node(tmp_path)
    env['PATH'] = str(tmp_path / 'cpubin')          # no scontrol at all
    rc, line, d = hook(tmp_path, env, slurmd=False)
    assert rc == 0 and line.startswith('SKIPPED: not a GPU node (no GPU on '
                                       'its PCI bus; no resource manager)')
    assert 'no scontrol on PATH' in d['role']['why']


def test_gpus_slurm_or_the_bus_has_and_the_driver_does_not_are_missing(
        tmp_path):
    # Slurm's GRES says 4 GPUs, none answers: missing-gpu (as before)
    rc, line, _ = hook(tmp_path / 'a', cpu_node(_mk(tmp_path / 'a'),
                                                slurm_gres='gpu:a100:4'))
    assert rc == 1 and 'missing GPU: no GPU found (nvidia-smi: not ' \
        'installed; rocminfo: ' in line and \
        'perlmutter:gpu has 4 GPUs' in line, line
    # no GRES, but a GPU on the PCI bus the driver does not answer for
    env = cpu_node(_mk(tmp_path / 'b'))
    env['CCL_HEALTH_SYSFS'] = os.path.join(SYSFS, 'gpu-node')
    rc, line, _ = hook(tmp_path / 'b', env)
    assert rc == 1 and 'missing GPU' in line, line


def _mk(path):
    path.mkdir()
    return path


@pytest.mark.parametrize('state', ['ALLOCATED', 'MIXED',
                                   'MIXED+COMPLETING+DRAIN', 'IDLE+COMPLETING',
                                   'ALLOCATED+DRAIN'])
def test_a_jobs_process_on_an_allocated_node_never_drains(tmp_path, state):
    rc, line, d = hook(tmp_path, stand_ins(tmp_path, state, foreign=True))
    assert rc == 0, line
    assert line.startswith(
        'HEALTHY: node state only (allocated to a job: Slurm State='
        f'{state}: no probe): 2 GPUs read by nvml'), line
    assert f'GPU 1 in use by pid {os.getpid()} ' in line and \
        'allocated to a job' in line and 'leftover' not in line, line
    assert d['verdict'] == 'skipped' and d['probes'] == [] and \
        not d['probe_started']
    assert d['role']['node']['has_job'] and d['system'] == 'local' and \
        d['partition'] == 'gpu'


@pytest.mark.parametrize('state', ['IDLE', 'IDLE+DRAIN', 'DOWN+DRAIN'])
def test_the_same_process_on_an_idle_node_drains_as_before(tmp_path, state):
    rc, line, d = hook(tmp_path, stand_ins(tmp_path, state, foreign=True))
    assert rc == 1 and line.startswith(
        f'UNHEALTHY: reset (a reboot is expected to clear it): GPU 1 in use '
        f'by pid {os.getpid()} '), line
    assert 'leftover process on an idle node: drain' in line
    assert d['probe_started'] and d['verdict'] == 'contended'


def test_a_node_fault_drains_an_allocated_node_too(tmp_path):
    rc, line, d = hook(tmp_path, stand_ins(tmp_path, 'ALLOCATED',
                                           foreign=True, ecc=3))
    assert rc == 1 and 'GPU 0 3 uncorrectable ECC error(s)' in line, line
    assert 'leftover' not in line and not d['probe_started']
    # and a clean allocated node is healthy on its state alone
    rc, line, d = hook(tmp_path, stand_ins(tmp_path, 'ALLOCATED', nvml=True))
    assert rc == 0 and line == (
        'HEALTHY: node state only (allocated to a job: Slurm State=ALLOCATED: '
        'no probe): 2 GPUs read by nvml 13.580'), line


def test_the_hooks_own_job_is_probed(tmp_path):
    env = stand_ins(tmp_path, 'ALLOCATED', nvml=True)
    env['SLURM_JOB_ID'] = '4242'
    rc, line, d = hook(tmp_path, env)
    assert rc == 0 and line.startswith('HEALTHY: all_reduce 1GiB on 2 GPUs'), \
        line
    assert d['probe_started'] and d['role']['own_job'] == '4242'
    # in a prolog the job is not the hook's
    (tmp_path / 'd.json').unlink()
    (tmp_path / 'probe-started').unlink()
    env['SLURM_SCRIPT_CONTEXT'] = 'prolog_slurmd'
    rc, line, d = hook(tmp_path, env)
    assert rc == 0 and line.startswith('HEALTHY: node state only'), line
    assert not d['probe_started']


@pytest.mark.parametrize('mode, says', [
    ('fail', 'failed (exit 1): slurm_load_node error: Unable to contact '
             'slurm controller (connect failure)'),
    ('hang', 'gave no answer within 2.0 s'),
    ('notfound', 'failed (exit 1): Node n01 not found')])
def test_slurm_that_does_not_answer_could_not_check(tmp_path, mode, says):
    t0 = time.monotonic()
    rc, line, d = hook(tmp_path, stand_ins(tmp_path, mode=mode, foreign=True),
                       '--limit', '8')
    assert rc == 2 and line.startswith(
        'COULD-NOT-CHECK: Slurm runs this node (SLURMD_NODENAME=n01) but '
        f'`scontrol -o show node n01` {says}'), line
    # the process on the GPU is named, not drained: a job may run there (the
    # printed line is capped for Slurm and syslog: the whole one is --json's)
    assert f'pid {os.getpid()}' in d['line'] and 'Slurm did not answer' in \
        d['line'] and d['line'].startswith(line.rstrip('.'))
    assert not d['probe_started'] and time.monotonic() - t0 < 8


def test_scontrol_on_path_for_another_host_is_no_resource_manager(tmp_path):
    # a login node or a machine with Slurm's client: "Node x not found"
    rc, line, d = hook(tmp_path, stand_ins(tmp_path, mode='notfound'),
                       slurmd=False)
    assert rc == 0 and line.startswith('HEALTHY: all_reduce'), line
    assert d['role']['source'] == '' and 'Node ci-test-host not found' in \
        d['role']['why']


# -- the same cases through NHC and the Slurm wrapper -------------------------

#: name: (environment of the node, drains?, what the hook says)
def _case(name, tmp_path):
    if name == 'cpu-node':
        return cpu_node(tmp_path), False, 'SKIPPED: not a GPU node'
    if name == 'allocated-foreign':
        return stand_ins(tmp_path, 'ALLOCATED', foreign=True), False, \
            'HEALTHY: node state only'
    if name == 'idle-foreign':
        return stand_ins(tmp_path, 'IDLE', foreign=True), True, \
            'leftover process on an idle node'
    if name == 'scontrol-fails':
        return stand_ins(tmp_path, mode='fail', foreign=True), False, \
            'could not check'
    if name == 'scontrol-hangs':
        return stand_ins(tmp_path, mode='hang', foreign=True), False, \
            'could not check'
    raise KeyError(name)


DOOR_CASES = ['cpu-node', 'allocated-foreign', 'idle-foreign',
              'scontrol-fails', 'scontrol-hangs']


def _door_env(tmp_path, env):
    env = environ(tmp_path, env)
    env['CCL_HEALTH_CHECK_LAUNCHER'] = os.path.join(FAKE, 'launch')
    env['CCL_HEALTH_SITE_DIR'] = os.path.join(REPO, 'site')
    site_naming_replay(tmp_path / 'prefix-site', env)
    return env


@pytest.mark.parametrize('name', DOOR_CASES)
def test_nhc(nhc, tmp_path, name):      # noqa: F811 (the NHC fixture)
    env, drains, says = _case(name, tmp_path)
    env = _door_env(tmp_path, env)
    p, wall = run_nhc(nhc, tmp_path, env, limit='8', rm='slurm')
    log = (tmp_path / 'nhc.log').read_text() if (
        tmp_path / 'nhc.log').exists() else ''
    assert (p.returncode != 0) == drains, (name, p.returncode, p.stdout,
                                           log[-2000:])
    assert says in log + p.stdout, (name, log[-2000:])
    assert wall < 10, (name, wall)


@pytest.mark.parametrize('name', DOOR_CASES)
def test_slurm_wrapper(tmp_path, name):
    env, drains, _ = _case(name, tmp_path)
    env['SLURMD_NODENAME'] = 'n01'
    env = _door_env(tmp_path, env)
    env['CCL_HEALTH_CHECK_LIMIT'] = '8'
    if 'logger' not in os.listdir(tmp_path / 'slurmbin'):
        (tmp_path / 'slurmbin' / 'logger').write_text(
            f'#!/bin/sh\necho "logger $*" >> {tmp_path / "calls"}\n')
        (tmp_path / 'slurmbin' / 'logger').chmod(0o755)
    p = subprocess.run([SLURM_WRAPPER], env=env, capture_output=True,
                       text=True, timeout=120, cwd='/')
    assert p.returncode == 0
    calls = (tmp_path / 'calls').read_text()
    drained = [ln for ln in calls.splitlines() if 'state=drain' in ln]
    assert bool(drained) == drains, (name, calls)
    if drains:       # the node slurmd named, not this host's name
        assert drained[0].startswith('scontrol update nodename=n01 '), calls
    assert 'scontrol -o show node n01' in calls


# -- the real Slurm -----------------------------------------------------------

@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
    from helpers import slurm_cluster
    c = slurm_cluster.started(tmp_path_factory.mktemp('role-slurm'), nodes=2)
    try:
        p = c.run('sbatch', '--exclusive', '-w', c.nodes[0], '-o',
                  '/dev/null', '--wrap', 'sleep 600')
        assert p.returncode == 0, p.stderr
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and 'State=ALLOCATED' not in c.run(
                'scontrol', '-o', 'show', 'node', c.nodes[0]).stdout:
            time.sleep(0.3)
        yield c
    finally:
        left = c.stop()
        assert not left, left


def _door_settings(tmp_path):
    """The hook's settings of the NHC / wrapper doors (site copy naming
    the replayed nccl-tests, launcher), not its host name."""
    env = _door_env(tmp_path, {})
    return {k: v for k, v in env.items() if k.startswith('CCL_HEALTH_')
            and k != 'CCL_HEALTH_HOSTNAME'}


def _real_env(cluster, tmp_path, node, **extra):
    env = stand_ins(tmp_path, foreign=True)
    env.update(extra)
    env['CCL_HEALTH_HOSTNAME'] = node
    env['PATH'] = env['PATH'].split(os.pathsep, 1)[1]   # the real scontrol
    return cluster.env(environ(tmp_path, env))


@pytest.mark.slurm
def test_real_slurm_allocated_node_is_not_drained(cluster, tmp_path):
    busy, idle = cluster.nodes
    env = _real_env(cluster, tmp_path, busy, SLURMD_NODENAME=busy)
    p = subprocess.run(HOOK + STD + ['--json', str(tmp_path / 'd.json')],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith(
        'HEALTHY: node state only (allocated to a job: Slurm State='
        'ALLOCATED: no probe)'), (p.stdout, p.stderr)
    d = json.loads((tmp_path / 'd.json').read_text())
    assert d['role']['node']['name'] == busy and d['probes'] == []
    # the idle node with the same process: drained, by the real scontrol
    (tmp_path / 'idle').mkdir()
    env = _real_env(cluster, tmp_path / 'idle', idle, SLURMD_NODENAME=idle)
    p = subprocess.run(HOOK + STD, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1 and 'leftover process on an idle node' in \
        p.stdout, p.stdout


@pytest.mark.slurm
def test_real_slurm_through_the_wrapper_and_nhc(cluster, nhc, tmp_path):  # noqa: F811,E501
    busy, idle = cluster.nodes
    try:
        for node in (busy, idle):
            d = tmp_path / node
            d.mkdir()
            env = dict(_real_env(cluster, d, node, SLURMD_NODENAME=node),
                       **_door_settings(d))
            p = subprocess.run([SLURM_WRAPPER], env=env, capture_output=True,
                               text=True, timeout=120, cwd='/')
            assert p.returncode == 0, p.stderr
        reasons = cluster.node_reasons()
        assert busy not in reasons, reasons
        assert reasons[idle][1].startswith('ccl-health: reset'), reasons
        # NHC on the allocated node (NHC_RM=slurm, the real scontrol)
        d = tmp_path / 'nhc'
        d.mkdir()
        env = dict(_real_env(cluster, d, busy), **_door_settings(d))
        p, _ = run_nhc(nhc, d, env, limit='8', rm='slurm')
        log = (d / 'nhc.log').read_text()
        assert p.returncode == 0 and 'node state only' in log, log[-2000:]
    finally:
        cluster.resume([idle])


# -- the device script's stand-ins, without a GPU ------------------------------

DEVICE = os.path.join(REPO, 'benchmarks', 'device')


def test_device_script_is_valid_bash():
    for path in ('node_role_on_device.sh', 'node_role/warn-launch'):
        p = subprocess.run(['bash', '-n', os.path.join(DEVICE, path)],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, (path, p.stderr)


def test_device_script_stand_ins(tmp_path):
    """benchmarks/device/node_role/scontrol answers as Slurm 22.05 does (the
    hook reads its State), and warn-launch appends the WARN to every rank's
    debug log of a probe (here the replayed 2-rank all_reduce)."""
    env = stand_ins(tmp_path, nvml=True, foreign=True)
    env['PATH'] = os.pathsep.join([os.path.join(DEVICE, 'node_role'), FAKE,
                                   os.environ['PATH']])
    for state, code in (('ALLOCATED', 0), ('IDLE', 1)):
        env['FAKE_SLURM_STATE'] = state
        rc, line, d = hook(tmp_path, env)
        assert rc == code, line
        assert d['role']['node']['state'] == state and \
            d['role']['node']['gpus'] == 2, d['role']
    env.update(FAKE_FOREIGN_PID='', FAKE_SLURM_STATE='IDLE',
               NODE_ROLE_NOTE=str(tmp_path / 'note'),
               NODE_ROLE_LAUNCHER=os.path.join(FAKE, 'launch'))
    detail = tmp_path / 'warn.json'
    p = subprocess.run(HOOK + ['--tests-prefix', REPLAY, '--launcher',
                               os.path.join(DEVICE, 'node_role',
                                            'warn-launch'),
                               '--json', str(detail)],
                       env=environ(tmp_path, dict(env,
                                                  SLURMD_NODENAME='n01')),
                       capture_output=True, text=True, timeout=120)
    note = (tmp_path / 'note').read_text()
    assert 'the WARN appended to 2 debug log(s)' in note, (note, p.stdout)
    # the WARN is advisory in the WARN table (issue 27 item 2): seen,
    # named, and the node healthy
    assert p.returncode == 0 and p.stdout.startswith(
        'HEALTHY: all_reduce'), (p.stdout, p.stderr)
    probe, = json.loads(detail.read_text())['probes']
    assert probe['verdict'] == 'pass' and 'NCCL WARN NET/IB : Got async ' \
        'event : GID table change (not fatal)' in probe['why'], probe


@pytest.mark.parametrize('mode, says', [
    ('fail', 'failed (exit 1): slurm_load_node error: Unable to contact '
             'slurm controller (connect failure)'),
    ('hang', 'gave no answer within 2.0 s')])
def test_scontrol_on_path_that_fails_is_could_not_check(tmp_path, mode, says):
    # Slurm not named (no SLURMD_NODENAME, no NHC_RM) and its scontrol on
    # PATH failing or hanging: nothing is known of the node's role (a job
    # may run on it), never "no resource manager" and a drained leftover
    t0 = time.monotonic()
    rc, line, d = hook(tmp_path, stand_ins(tmp_path, 'ALLOCATED', mode=mode,
                                           foreign=True), '--limit', '8',
                       slurmd=False)
    assert rc == 2 and line.startswith(
        'COULD-NOT-CHECK: `scontrol -o show node ci-test-host` ('), line
    assert says in d['line'] and 'whether Slurm runs this node is not ' \
        'known' in d['line'], d['line']
    assert f'pid {os.getpid()}' in d['line'] and 'Slurm did not answer' in \
        d['line']
    assert not d['probe_started'] and time.monotonic() - t0 < 8


def _site_gpus_per_node(tmp_path, n):
    d = tmp_path / 'site'
    shutil.copytree(os.path.join(REPO, 'site'), d)
    y = d / 'perlmutter.yaml'
    y.write_text(y.read_text().replace(
        'health:\n  partition: gpu\n',
        f'health:\n  partition: gpu\n  gpus_per_node: {n}\n'))
    assert f'gpus_per_node: {n}' in y.read_text()
    return str(d)


@pytest.mark.parametrize('how', ['expect-gpus', 'site', 'slurm-partition'])
def test_gpus_that_left_the_bus_are_missing_not_a_cpu_node(tmp_path, how):
    # no GPU on the PCI bus, none answers, Slurm's GRES empty: yet the
    # node must have GPUs: missing-gpu (exit 1), never "not a GPU node"
    env = cpu_node(tmp_path)
    args = []
    if how == 'expect-gpus':
        args = ['--expect-gpus', '4']
    elif how == 'site':
        env['CCL_HEALTH_SITE_DIR'] = _site_gpus_per_node(tmp_path, 4)
    else:
        (tmp_path / 'record.txt').write_text(
            record('nid001234', 'IDLE', '(null)', 'gpu'))
    rc, line, d = hook(tmp_path, env, *args)
    assert rc == 1 and line.startswith('UNHEALTHY: ') and \
        'missing GPU: no GPU found' in line and \
        'perlmutter:gpu has 4 GPUs' in line, line
    assert d['verdict'] == 'missing-gpu' and not d['probe_started']
    said = d['role']['gpus_said']
    assert {'expect-gpus': '--expect-gpus 4',
            'site': 'health.gpus_per_node 4',
            'slurm-partition': 'Slurm puts it in partition gpu'}[how] in \
        said, said


def test_scontrol_without_a_slurm_configuration_is_no_resource_manager(
        tmp_path):
    # Slurm's client on a machine of no cluster (configless, no slurmd):
    # no job of Slurm's can run here
    rc, line, d = hook(tmp_path, stand_ins(tmp_path, mode='noconfig'),
                       slurmd=False)
    assert rc == 0 and line.startswith('HEALTHY: all_reduce'), line
    assert d['role']['source'] == '' and 'Could not establish a ' \
        'configuration source' in d['role']['why']
