"""nccl-tests (NVIDIA) or rccl-tests (AMD), as the partition's GPU vendor
says: Make, ``MPI=1`` where an MPI is present, device code for the detected
GPU architecture only.  A site that installs them itself says so with
``build.nccl_tests.prefix`` / ``build.rccl_tests.prefix``."""

from reframe.core.builtins import run_after, variable

from .source_build import SourceBuild


class CollectiveTestsBuild(SourceBuild):
    package = 'nccl-tests'
    site_key = 'nccl_tests'
    #: ``sm_90`` / ``gfx90a``; default: the partition's GPU (extras)
    gpu_arch = variable(str, value='')

    @run_after('setup')
    def pick_package(self):
        if self.extra('gpu_vendor') == 'amd':
            self.package, self.site_key = 'rccl-tests', 'rccl_tests'
            self.adopt_site_install()

    @property
    def json_output(self):
        """Whether the binaries write ``-J`` JSON (nccl-tests >= 2.17;
        rccl-tests has no ``-J``: its text table is parsed instead)."""
        return self.package == 'nccl-tests'

    def steps(self):
        arch = self.gpu_arch or self.extra('gpu_arch') or ''
        opts, prefix = [], ''
        if self.extra('mpi_home'):
            opts += ['MPI=1', f'MPI_HOME={self.extra("mpi_home")}']
        if self.package == 'rccl-tests':
            rocm = self.extra('rocm_home', '/opt/rocm')
            opts.append(f'ROCM_PATH={rocm}')
            # RCCL lives in <rocm>/rccl before ROCm 6.0, in <rocm>/lib since
            opts.append(f'NCCL_HOME={self.extra("rccl_home", rocm)}')
            if arch.startswith('gfx'):
                # hipcc builds for the targets named here (rccl-tests'
                # Makefile has no architecture variable)
                prefix = f'HCC_AMDGPU_TARGET={arch} '
        else:
            if self.extra('cuda_home'):
                opts.append(f'CUDA_HOME={self.extra("cuda_home")}')
            if self.extra('nccl_home'):
                opts.append(f'NCCL_HOME={self.extra("nccl_home")}')
            if arch.startswith('sm_'):
                cc = arch[3:]
                opts.append(f'NVCC_GENCODE="-gencode=arch=compute_{cc},'
                            f'code=sm_{cc}"')
        return [('build', prefix + 'make -j$JOBS ' + ' '.join(opts)),
                ('install', 'mkdir -p $PREFIX/bin && cp build/*_perf '
                            '$PREFIX/bin/')]
