"""Frontier and Perlmutter: ReFrame dry runs render the job and build
scripts of every check x transport, with Lmod and stand-ins of the Cray PE
modules (tests/fixtures/modulefiles), PrgEnv-cray loaded as on a login
node.  The parts that matter are asserted."""

import os
import shutil

import pytest

from ccl_health.sitedata import transports
from conftest import REPO
from helpers.dryrun import dry_run

pytest.importorskip('reframe')


def job(cases, transport, test=None, collective='all_reduce',
        algo='default'):
    """The job script of the all_reduce sweep over ``transport`` (the
    plugin transports are AllReducePluginSweep's)."""
    tests = [test] if test else ['AllReduceSweep', 'AllReducePluginSweep']
    names = [f'{t} %transport={transport} %collective={collective} '
             f'%algo={algo}' for t in tests]
    for name in names:
        if name in cases:
            return cases[name][0]
    raise KeyError(f'none of {names} in {sorted(cases)}')


def builder(cases, name):
    return next(b for k, (_, b, _) in cases.items() if k.startswith(name))


def exports(script):
    return {ln[7:].split('=', 1)[0]: ln[7:].split('=', 1)[1]
            for ln in script.splitlines() if ln.startswith('export ')}


def module_lines(script):
    return [ln for ln in script.splitlines() if ln.startswith('module ')]


@pytest.fixture(scope='module')
def frontier(tmp_path_factory):
    return dry_run(tmp_path_factory.mktemp('f'), 'frontier')


@pytest.fixture(scope='module')
def perlmutter(tmp_path_factory):
    return dry_run(tmp_path_factory.mktemp('p'), 'perlmutter')


def test_frontier_nodes_ranks_and_binding(frontier):
    intra = job(frontier, 'intra')
    assert '#SBATCH --ntasks=8\n' in intra
    assert '#SBATCH --ntasks-per-node=8\n' in intra
    for t in ('net-socket', 'net-plugin', 'net-plugin-gdr'):
        s = job(frontier, t)
        assert '#SBATCH --ntasks=16\n' in s          # 2 nodes x 8 GCDs
        assert '#SBATCH --ntasks-per-node=8\n' in s
    srun = [ln for ln in intra.splitlines() if ln.startswith('srun')][0]
    assert srun.startswith('srun --gpus-per-task=1 --gpu-bind=closest ')
    assert '/rccl-tests-ae3e635-' in srun
    assert 'all_reduce_perf -g 1 -b 8 -e 8589934592 -f 2' in srun
    assert '-J' not in srun.split()                # rccl-tests has no -J


def test_frontier_modules_in_order_with_prgenv_swap(frontier):
    assert module_lines(job(frontier, 'intra')) == [
        'module unload PrgEnv-cray', 'module load PrgEnv-gnu',
        'module load rocm/5.7.1', 'module load craype-accel-amd-gfx90a',
        'module load gcc', 'module load cray-mpich/8.1.27',
        'module load libtool']


def _every_transports_environment(site, common):
    """The jobs of a site of several nodes: every transport's exports the
    site's ``common`` variables and a debug file per rank, and nothing
    forces the network path (no P2P / SHM off, no NCCL_NET); the socket
    job asks for no plugin and loads none (no LD_LIBRARY_PATH)."""
    for t in ('intra', 'net-socket', 'net-plugin', 'net-plugin-gdr'):
        env = exports(job(site, t))
        assert common.items() <= env.items(), t
        assert env['NCCL_DEBUG_FILE'].endswith('/nccl-debug.%h.%p.log')
        assert 'NCCL_P2P_DISABLE' not in env and 'NCCL_SHM_DISABLE' not in env
        assert 'NCCL_NET' not in env
    sock = exports(job(site, 'net-socket'))
    assert sock['NCCL_NET_PLUGIN'] == 'none'
    assert 'LD_LIBRARY_PATH' not in sock


def test_frontier_environment_per_transport(frontier):
    common = {'NCCL_CROSS_NIC': '1', 'FI_MR_CACHE_MONITOR': 'userfaultfd',
              'FI_CXI_DISABLE_HOST_REGISTER': '1',
              'FI_CXI_DEFAULT_CQ_SIZE': '131072', 'NCCL_DEBUG': 'INFO'}
    _every_transports_environment(frontier, common)
    assert 'ofi' not in job(frontier, 'net-socket').lower().replace(
        'fi_', '')
    plug = exports(job(frontier, 'net-plugin'))
    # quoted as site values are: all but ${NAME} (ccl_health.sitedata.site)
    assert plug['LD_LIBRARY_PATH'].startswith('/cache/aws-ofi-rccl-17d41cb-')
    assert plug['LD_LIBRARY_PATH'].endswith(
        ':/opt/cray/libfabric/1.15.2.0/lib64:"${LD_LIBRARY_PATH}"')
    assert plug['NCCL_NET_GDR_LEVEL'] == '0'
    assert exports(job(frontier, 'net-plugin-gdr'))['NCCL_NET_GDR_LEVEL'] \
        == '3'


def test_frontier_build_commands(frontier):
    tests = builder(frontier, 'CollectiveTestsBuild')
    assert ("step build 'cd rccl-tests-ae3e635 && HCC_AMDGPU_TARGET=gfx90a "
            "make -j$JOBS MPI=1 MPI_HOME=\"$MPICH_DIR\" ROCM_PATH=/opt/rocm-5.7.1 "
            "NCCL_HOME=/opt/rocm-5.7.1/rccl'") in tests
    assert '475252f9329a38b80330a1861e2d063b44921cd07b7b0701238902edcdc15c00' \
        in tests
    plugin = builder(frontier, 'NetPluginBuild')
    assert ('./configure --prefix="$PREFIX" '
            '--with-libfabric=/opt/cray/libfabric/1.15.2.0 '
            '--with-hip=/opt/rocm-5.7.1/hip --with-rccl=/opt/rocm-5.7.1 '
            '--with-mpi="$MPICH_DIR"') in plugin
    # Cray's libfabric is used, not built
    assert builder(frontier, 'LibfabricBuild') is None


def test_frontier_algo_comparison_at_64_nodes(tmp_path):
    cases = dry_run(tmp_path, 'frontier', '--mode', 'scale')
    algos = {}
    for name, (script, _, tc) in cases.items():
        if name.startswith('AllReduceAlgoSweep'):
            assert '#SBATCH --ntasks=512\n' in script
            algos[tc['algo']] = exports(script).get('NCCL_ALGO')
    assert algos == {'default': None, 'Ring': 'Ring', 'Tree': 'Tree'}


def test_scale_parameter(tmp_path):
    cases = dry_run(tmp_path, 'frontier', '-n',
                    'AllReducePluginSweep%transport=net-plugin-gdr',
                    '-S', 'num_nodes=300')
    assert '#SBATCH --ntasks=2400\n' in job(cases, 'net-plugin-gdr')


def test_perlmutter_job_scripts(perlmutter):
    intra = job(perlmutter, 'intra')
    assert '#SBATCH --ntasks=4\n' in intra and '#SBATCH -C gpu\n' in intra
    assert '#SBATCH --gpus-per-node=4\n' in intra
    assert module_lines(intra) == [
        'module unload PrgEnv-cray', 'module load PrgEnv-gnu',
        'module load cudatoolkit', 'module load craype-accel-nvidia80',
        'module load cray-mpich']
    srun = [ln for ln in intra.splitlines() if ln.startswith('srun')][0]
    assert srun.startswith('srun --gpus-per-task=1 /cache/nccl-tests-2.19.6-')
    assert '-J result.json' in srun
    for t in ('net-socket', 'net-plugin', 'net-plugin-gdr'):
        assert '#SBATCH --ntasks=8\n' in job(perlmutter, t)
    common = {'NCCL_CROSS_NIC': '1', 'FI_CXI_DISABLE_HOST_REGISTER': '1',
              'FI_MR_CACHE_MONITOR': 'userfaultfd',
              'MPICH_GPU_SUPPORT_ENABLED': '0'}
    assert common.items() <= exports(intra).items()
    sock = exports(job(perlmutter, 'net-socket'))
    assert sock['NCCL_NET_PLUGIN'] == 'none'
    assert 'NCCL_NET' not in sock and 'LD_LIBRARY_PATH' not in sock
    plug = exports(job(perlmutter, 'net-plugin'))
    assert plug['NCCL_NET'] == "'AWS Libfabric'"            # shell-quoted
    assert plug['NCCL_NET_PLUGIN'].endswith('/lib/libnccl-net-ofi.so')
    assert plug['NCCL_NET_GDR_LEVEL'] == 'LOC'
    gdr = exports(job(perlmutter, 'net-plugin-gdr'))
    assert gdr['NCCL_NET_GDR_LEVEL'] == 'PHB' and gdr['NCCL_NET'] == \
        "'AWS Libfabric'"


def test_perlmutter_build_commands(perlmutter):
    tests = builder(perlmutter, 'CollectiveTestsBuild')
    assert ('make -j$JOBS MPI=1 MPI_HOME="$MPICH_DIR" CUDA_HOME="$CUDA_HOME" '
            'NVCC_GENCODE=-gencode=arch=compute_80,code=sm_80') in tests
    plugin = builder(perlmutter, 'NetPluginBuild')
    assert ('./configure --prefix="$PREFIX" '
            '--with-libfabric=/opt/cray/libfabric/1.20.1 '
            '--with-cuda="$CUDA_HOME" --disable-tests') in plugin


def test_perlmutter_single_node_does_not_force_nccl_net(tmp_path):
    cases = dry_run(tmp_path, 'perlmutter', '-n',
                    'AllReducePluginSweep%transport=net-plugin%',
                    '-S', 'num_nodes=1')
    env = exports(job(cases, 'net-plugin'))
    assert 'NCCL_NET' not in env
    assert env['NCCL_P2P_DISABLE'] == '1' and env['NCCL_SHM_DISABLE'] == '1'


def test_acceptance_mode_is_strict(tmp_path):
    cases = dry_run(tmp_path, 'perlmutter', '--mode', 'acceptance')
    sweeps = [tc for name, (_, _, tc) in cases.items()
              if name.startswith(('AllReduceSweep ', 'AllReducePluginSweep '))]
    assert sorted(tc['transport'] for tc in sweeps) == sorted(
        transports.NAMES)
    assert all(tc['acceptance'] for tc in sweeps)
    # no InfiniBand on Perlmutter: net-ib is skipped, not failed
    ib = [tc for tc in sweeps if tc['transport'] == 'net-ib'][0]
    assert ib['result'] == 'skip' and 'not configured for perlmutter' in \
        ib['skip_reason']


# -- LUMI: a site added by data only (config/systems/lumi.py, site/lumi.yaml,
# reference/lumi.yaml) ------------------------------------------------------

LUMI_ACCOUNT = 'project_465000000'
LUMI_BIND = ('--cpu-bind=mask_cpu:0xfe000000000000,0xfe00000000000000,'
             '0xfe0000,0xfe000000,0xfe,0xfe00,0xfe00000000,0xfe0000000000')


@pytest.fixture(scope='module')
def lumi(tmp_path_factory):
    return dry_run(tmp_path_factory.mktemp('l'), 'lumi',
                   env={'CCL_HEALTH_ACCOUNT': LUMI_ACCOUNT})


def test_lumi_renders_every_check_and_transport(lumi):
    from ccl_health.sitedata.transports import NAMES as TRANSPORTS
    by_check = {}
    for name, (script, build, tc) in lumi.items():
        # a job script for every test; a build script for every build but
        # the site's libfabric (adopted, not built)
        assert script is not None or build is not None or \
            name == 'LibfabricBuild' or tc['result'] == 'skip', name
        if '%transport=' in name:
            check = name.split()[0].replace('Plugin', '')
            by_check.setdefault(check, set()).add(
                name.split('%transport=')[1].split()[0])
    assert {'AllReduceSweep', 'CollectiveSweep', 'TorchBandwidth',
            'TorchFirstCall', 'TorchPatternReplay', 'TorchTrainingStep'} <= \
        set(by_check)
    for check, transports in by_check.items():
        if check != 'AllReduceAlgoSweep':
            assert transports == set(TRANSPORTS), check
    assert {'NodeHealthCheck', 'MpiFirstCall', 'CollectiveTestsBuild',
            'NetPluginBuild'} <= set(lumi)


def test_lumi_nodes_ranks_account_and_binding(lumi):
    intra = job(lumi, 'intra')
    assert '#SBATCH --ntasks=8\n' in intra
    assert '#SBATCH --ntasks-per-node=8\n' in intra
    assert '#SBATCH --partition=standard-g\n' in intra
    assert '#SBATCH --gpus-per-node=8\n' in intra
    assert f'#SBATCH -A {LUMI_ACCOUNT}\n' in intra
    for t in ('net-socket', 'net-plugin', 'net-plugin-gdr'):
        s = job(lumi, t)
        assert '#SBATCH --ntasks=16\n' in s          # 2 nodes x 8 GCDs
        assert '#SBATCH --ntasks-per-node=8\n' in s
        assert s.count('#SBATCH ') == intra.count('#SBATCH ')
    srun = [ln for ln in intra.splitlines() if ln.startswith('srun')]
    assert len(srun) == 1
    assert srun[0].startswith(f'srun {LUMI_BIND} /cache/rccl-tests-ae3e635-')
    assert 'all_reduce_perf -g 1 -b 8 -e 8589934592 -f 2' in srun[0]
    assert '-J' not in srun[0].split()             # rccl-tests has no -J


def test_lumi_modules_in_order(lumi):
    for t in ('intra', 'net-plugin-gdr'):
        assert module_lines(job(lumi, t)) == [
            'module load LUMI/23.09', 'module load partition/G',
            'module load PrgEnv-cray', 'module load craype-accel-amd-gfx90a',
            'module load rocm/5.2.3', 'module load cray-mpich/8.1.27',
            'module load buildtools/23.09']


def test_lumi_environment_per_transport(lumi):
    common = {'NCCL_SOCKET_IFNAME': 'hsn0,hsn1,hsn2,hsn3',
              'CXI_FORK_SAFE': '1', 'CXI_FORK_SAFE_HP': '1',
              'FI_CXI_DISABLE_CQ_HUGETLB': '1', 'NCCL_DEBUG': 'INFO'}
    _every_transports_environment(lumi, common)
    for t, gdr in (('net-plugin', '0'), ('net-plugin-gdr', '3')):
        plug = exports(job(lumi, t))
        assert plug['NCCL_NET_GDR_LEVEL'] == gdr
        assert plug['LD_LIBRARY_PATH'].startswith(
            '/cache/aws-ofi-rccl-17d41cb-')
        assert plug['LD_LIBRARY_PATH'].endswith(
            '/opt/cray/libfabric/1.15.2.0/lib64:"${LD_LIBRARY_PATH}"')


def test_lumi_build_commands(lumi):
    tests = builder(lumi, 'CollectiveTestsBuild')
    assert ("step build 'cd rccl-tests-ae3e635 && HCC_AMDGPU_TARGET=gfx90a "
            "make -j$JOBS MPI=1 MPI_HOME=\"$MPICH_DIR\" "
            "ROCM_PATH=/opt/rocm-5.2.3 NCCL_HOME=/opt/rocm-5.2.3'") in tests
    plugin = builder(lumi, 'NetPluginBuild')
    assert ('./configure --prefix="$PREFIX" '
            '--with-libfabric=/opt/cray/libfabric/1.15.2.0 '
            '--with-hip=/opt/rocm-5.2.3/hip --with-rccl=/opt/rocm-5.2.3 '
            '--with-mpi="$MPICH_DIR"') in plugin
    assert builder(lumi, 'LibfabricBuild') is None  # Cray's libfabric


def test_lumi_published_reference_is_the_gdr_sweeps(lumi):
    """LUMI's published figure (85 GB/s at 128 MiB, 2 nodes x 8 GCDs) is
    the reference of the GPUDirect all_reduce sweep, nothing else."""
    from ccl_health.judge import reference
    ref = reference.load_for_system(os.path.join(REPO, 'reference'), 'lumi')
    e = ref.lookup('gpu', 'net-plugin-gdr', 'all_reduce', 2, 8)
    assert e.busbw == {128 << 20: 85.0} and e.tolerance == 0.05
    assert 'e708cc43552c29e48ac5b4b01a3b8d60ca5a593c line 24' in e.source
    assert ref.lookup('gpu', 'net-plugin', 'all_reduce', 2, 8) is None
    tc = lumi['AllReducePluginSweep %transport=net-plugin-gdr '
              '%collective=all_reduce %algo=default'][2]
    assert (tc['system'], tc['partition'], tc['num_tasks']) == \
        ('lumi', 'gpu', 16)


def test_node_health_job_uses_the_site_health_launcher(tmp_path):
    """The ReFrame NodeHealthCheck starts the hook's ranks with the site
    file's ``health.launcher``, as NHC's hook does on that system."""
    site = tmp_path / 'site'
    shutil.copytree(os.path.join(REPO, 'site'), site)
    path = site / 'frontier.yaml'
    text = path.read_text()
    assert '  launcher: srun --overlap --ntasks\n' in text
    path.write_text(text.replace(
        '  launcher: srun --overlap --ntasks\n',
        '  launcher: srun --overlap --cpu-bind=none --ntasks\n'))
    cases = dry_run(tmp_path, 'frontier', '-n', '^NodeHealthCheck',
                    env={'CCL_HEALTH_SITE_DIR': str(site)})
    script = cases['NodeHealthCheck'][0]
    assert "--launcher 'srun --overlap --cpu-bind=none --ntasks'" in script


def test_fleet_acceptance_job_runs_the_fleet_inside_one_allocation(tmp_path):
    """--mode acceptance: one exclusive job over the partition runs the
    fleet procedure with its steps inside that job's allocation."""
    cases = dry_run(tmp_path, 'frontier', '--mode', 'acceptance', '-n',
                    '^FleetAcceptance', '-S', 'fleet_nodes=16')
    script = cases['FleetAcceptance'][0]
    assert '#SBATCH --exclusive' in script
    assert '#SBATCH --ntasks=16\n' in script
    assert '#SBATCH --ntasks-per-node=1\n' in script
    run = [ln for ln in script.splitlines() if 'ccl_health.fleet' in ln]
    assert len(run) == 1 and not run[0].startswith('srun')
    assert run[0].endswith('-m ccl_health.fleet --inside --site frontier '
                           '--partition batch --json fleet-summary.json')


def test_fleet_acceptance_dry_run_needs_no_slurm(frontier):
    """The whole dry run of a site renders FleetAcceptance without asking
    Slurm for the partition's nodes (its flexible allocation would)."""
    script = frontier['FleetAcceptance'][0]
    assert '#SBATCH --ntasks=2\n' in script
    assert '-m ccl_health.fleet --inside --site frontier' in script
