"""libfabric: built from source only where the site does not provide one
(``build.libfabric.prefix`` in ``site/<system>.yaml``).  Paths are quoted
and built as :mod:`ccl_health.buildcache` says (space-free views of the
cache and build folders)."""

from ccl_health import buildcache

from .source_build import SourceBuild


class LibfabricBuild(SourceBuild):
    package = 'libfabric'
    site_key = 'libfabric'
    products = ['lib/libfabric.so']

    def steps(self):
        return buildcache.autotools_steps(
            buildcache.shell_value(o)
            for o in self.site_build().get('configure', []))
