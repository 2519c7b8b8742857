"""libfabric: built from source only where the site does not provide one
(``build.libfabric.prefix`` in ``site/<system>.yaml``)."""

from .source_build import SourceBuild


class LibfabricBuild(SourceBuild):
    package = 'libfabric'
    site_key = 'libfabric'

    def steps(self):
        opts = self.site_build().get('configure', [])
        return [('configure', './configure --prefix=$PREFIX ' +
                 ' '.join(opts)),
                ('build', 'make -j$JOBS'),
                ('install', 'make install')]
