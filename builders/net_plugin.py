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
    #: aws-ofi-rccl where no ROCm install provides ``rccl/rccl.h``: a built
    #: :class:`builders.rccl_header.RcclHeaderBuild` (its prefix is the
    #: ``--with-rccl``); None: the partition's ROCm provides it
    rccl_header = None

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
        deps = {'libfabric': self.libfabric.prefix}
        if self.rccl_header is not None:
            deps['rccl'] = self.rccl_header.prefix
        return deps

    def hip_prefix(self):
        """aws-ofi-rccl's ``--with-hip``, one shell word: the partition's
        ``hip_home`` (Debian's HIP: ``/usr``), else ``<rocm_home>/hip``."""
        rocm = self.extra('rocm_home', '/opt/rocm')
        return buildcache.shell_value(self.extra('hip_home') or
                                      f'{rocm}/hip')

    def rccl_prefix(self):
        """aws-ofi-rccl's ``--with-rccl`` (the folder with
        ``include/rccl/rccl.h``), one shell word: the partition's
        ``rocm_home``; where no ROCm provides the header, the prefix of
        :class:`builders.rccl_header.RcclHeaderBuild` (as
        ``"$CACHE"/<name>``)."""
        if self.rccl_header is not None:
            return buildcache.cache_path(self.rccl_header.prefix,
                                         self.cache_dir)
        return buildcache.shell_value(self.extra('rocm_home', '/opt/rocm'))

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
            opts += ['--with-hip=' + self.hip_prefix(),
                     '--with-rccl=' + self.rccl_prefix()]
            if self.extra('mpi_home'):
                opts.append(opt('--with-mpi', self.extra('mpi_home')))
        opts += [buildcache.shell_value(o) for o in conf.get('configure', [])]
        # the mirror's tarballs ship a generated configure
        return buildcache.autotools_steps(opts)
