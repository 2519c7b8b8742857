"""The libfabric network plugin: aws-ofi-nccl (``--with-cuda``) on NVIDIA,
aws-ofi-rccl or aws-ofi-nccl ``--with-rocm`` on AMD, as the site file says.
Every path is one quoted shell word (site values: only ``$NAME`` expands);
a libfabric built in the cache is named through the space-free view of the
cache (``"$CACHE"/<prefix>``, see :mod:`ccl_health.buildcache`)."""

import os

from reframe.core.builtins import fixture, run_after

from ccl_health import buildcache

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

    @property
    def products(self):
        return [os.path.join('lib', self.site_build().get(
            'library', 'libnccl-net-ofi.so'))]

    def dependency_keys(self):
        return {'libfabric': self.libfabric.prefix}

    def steps(self):
        conf = self.site_build()
        opt = buildcache.shell_option
        opts = ['--with-libfabric=' + buildcache.cache_path(
            self.libfabric.prefix, self.cache_dir)]
        if self.package == 'aws-ofi-nccl':
            if self.gpu()[2] == 'amd':
                opts.append(opt('--with-rocm',
                                self.extra('rocm_home', '/opt/rocm')))
            else:
                opts.append(opt('--with-cuda', self.extra('cuda_home') or ''))
        else:   # aws-ofi-rccl
            rocm = self.extra('rocm_home', '/opt/rocm')
            opts += [opt('--with-hip', f'{rocm}/hip'),
                     opt('--with-rccl', rocm)]
            if self.extra('mpi_home'):
                opts.append(opt('--with-mpi', self.extra('mpi_home')))
        opts += [buildcache.shell_value(o) for o in conf.get('configure', [])]
        # the mirror's tarballs ship a generated configure
        return buildcache.autotools_steps(opts)
