"""The libfabric network plugin: aws-ofi-nccl (``--with-cuda``) on NVIDIA,
aws-ofi-rccl or aws-ofi-nccl ``--with-rocm`` on AMD, as the site file says."""

import os

from reframe.core.builtins import fixture, run_after

from .libfabric import LibfabricBuild
from .source_build import SourceBuild


class NetPluginBuild(SourceBuild):
    package = 'aws-ofi-nccl'
    site_key = 'plugin'
    libfabric = fixture(LibfabricBuild, scope='environment')

    @run_after('setup')
    def pick_plugin(self):
        self.package = self.site_build().get('package', self.package)

    @property
    def library(self):
        return os.path.join(self.prefix, 'lib', self.site_build().get(
            'library', 'libnccl-net-ofi.so'))

    def dependency_keys(self):
        return {'libfabric': self.libfabric.prefix}

    def steps(self):
        conf = self.site_build()
        opts = [f'--with-libfabric={self.libfabric.prefix}']
        if self.package == 'aws-ofi-nccl':
            if self.extra('gpu_vendor') == 'amd':
                opts.append(f'--with-rocm={self.extra("rocm_home", "/opt/rocm")}')
            else:
                opts.append(f'--with-cuda={self.extra("cuda_home")}')
        else:   # aws-ofi-rccl
            rocm = self.extra('rocm_home', '/opt/rocm')
            opts += [f'--with-hip={rocm}/hip', f'--with-rccl={rocm}']
            if self.extra('mpi_home'):
                opts.append(f'--with-mpi={self.extra("mpi_home")}')
        opts += conf.get('configure', [])
        # the mirror's tarballs ship a generated configure
        return [('configure', './configure --prefix=$PREFIX ' +
                 ' '.join(opts)),
                ('build', 'make -j$JOBS'),
                ('install', 'make install')]
