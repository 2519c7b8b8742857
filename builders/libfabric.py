"""libfabric: built from source only where the site does not provide one
(``build.libfabric.prefix`` in ``site/<system>.yaml``)."""

from reframe.core.builtins import run_after

from .source_build import SourceBuild


class LibfabricBuild(SourceBuild):
    package = 'libfabric'

    @run_after('setup')
    def adopt_site_libfabric(self):
        self.site_prefix = (self.site.build.get('libfabric') or {}).get(
            'prefix')

    def steps(self):
        opts = (self.site.build.get('libfabric') or {}).get('configure', [])
        return [('configure', './configure --prefix=$PREFIX ' +
                 ' '.join(opts)),
                ('build', 'make -j$JOBS'),
                ('install', 'make install')]
