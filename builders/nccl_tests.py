"""nccl-tests (NVIDIA) and rccl-tests (AMD): Make, ``MPI=1`` where an MPI
is present, device code for the detected GPU architecture only."""

from reframe.core.builtins import variable

from .source_build import SourceBuild


class NcclTestsBuild(SourceBuild):
    package = 'nccl-tests'
    site_key = 'nccl_tests'
    #: ``sm_90``-style architecture; default: the partition's GPU (extras)
    gpu_arch = variable(str, value='')

    def steps(self):
        arch = self.gpu_arch or self.extra('gpu_arch') or ''
        opts = []
        mpi_home = self.extra('mpi_home')
        if mpi_home:
            opts += ['MPI=1', f'MPI_HOME={mpi_home}']
        if self.extra('cuda_home'):
            opts.append(f'CUDA_HOME={self.extra("cuda_home")}')
        if self.extra('nccl_home'):
            opts.append(f'NCCL_HOME={self.extra("nccl_home")}')
        if arch.startswith('sm_'):
            cc = arch[3:]
            opts.append(f'NVCC_GENCODE="-gencode=arch=compute_{cc},'
                        f'code=sm_{cc}"')
        return [('build', 'make -j$JOBS ' + ' '.join(opts)),
                ('install', 'mkdir -p $PREFIX/bin && cp build/*_perf '
                            '$PREFIX/bin/')]


class RcclTestsBuild(SourceBuild):
    package = 'rccl-tests'
    site_key = 'rccl_tests'

    def steps(self):
        opts = [f'ROCM_HOME={self.extra("rocm_home", "/opt/rocm")}']
        if self.extra('mpi_home'):
            opts += ['MPI=1', f'MPI_HOME={self.extra("mpi_home")}']
        if self.extra('rccl_home'):
            opts.append(f'NCCL_HOME={self.extra("rccl_home")}')
        if self.extra('gpu_arch', '').startswith('gfx'):
            opts.append(f'GPU_TARGETS={self.extra("gpu_arch")}')
        return [('build', 'make -j$JOBS ' + ' '.join(opts)),
                ('install', 'mkdir -p $PREFIX/bin && cp build/*_perf '
                            '$PREFIX/bin/')]
