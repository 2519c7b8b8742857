"""The base of every build fixture: fetch (upstream URL or mirror), verify
the sha256, unpack, configure/build/install into a prefix keyed by the
recipe, and skip all of it when that prefix is already complete.

The build script (:func:`ccl_health.buildcache.build_script`) exits nonzero
on any failure (the tarball's checksum, any step, a missing product) and
only then leaves no "installed" stamp; paths with spaces (output, stage,
cache, mirror, checkout) are quoted and built through space-free views, as
that module's notes say.  A site prefix is checked to exist, quoted."""

import os
import shutil
import subprocess

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (run_after, run_before, sanity_function,
                                   variable)

from ccl_health import buildcache, resources, shell
from ccl_health.sitedata import site as site_data
from ccl_health.sitedata import sysconfig

#: the checkout, or the installed copy of its folders
REPO = resources.root()
SOURCES = buildcache.load_sources(os.path.join(resources.builders_dir(),
                                               'sources.yaml'))


def _tool_version(cmd):
    if not shutil.which(cmd[0]):
        return ''
    try:
        return subprocess.run(cmd, capture_output=True, text=True,
                              timeout=30).stdout.strip()[-200:]
    except (OSError, subprocess.SubprocessError):
        return ''


class SourceBuild(rfm.CompileOnlyRegressionTest):
    """Build ``package`` from ``builders/sources.yaml``; subclasses give the
    steps.  After the build, :attr:`prefix` is the install prefix."""

    package = variable(str)
    #: Folder with the source tarballs (air-gapped nodes); None: download.
    mirror = variable(str, type(None),
                      value=os.environ.get('CCL_HEALTH_MIRROR') or None)
    #: Where built packages are cached across runs.
    cache_dir = variable(str, value=buildcache.cache_dir())
    build_jobs = variable(int, value=min(os.cpu_count() or 1, 32))
    site_dir = variable(str, value=resources.site_dir())

    valid_systems = ['*']
    valid_prog_environs = ['*']
    build_system = 'CustomBuild'
    sourcesdir = None
    maintainers = ['ccl-health']
    tags = {'build'}

    #: key of this package under ``build:`` in ``site/<system>.yaml``; a
    #: ``prefix:`` there adopts the site's installation instead of building
    site_key = None

    #: set before compile: the install prefix of this recipe
    prefix = None
    site_prefix = None
    #: files the install must leave under the prefix (checked before the
    #: stamp is written)
    products = []

    def steps(self):
        """[(step name, shell command)]; ``$PREFIX``, ``$CACHE`` and
        ``$JOBS`` are set (space-free, see :mod:`ccl_health.buildcache`);
        quote paths (:func:`ccl_health.buildcache.shell_value`)."""
        raise NotImplementedError

    def dependency_keys(self):
        return {}

    @property
    def site(self):
        return site_data.load(self.site_dir, self.current_system.name)

    def extra(self, key, default=None):
        return self.current_partition.extras.get(key, default)

    def gpu(self):
        """``(count, arch, vendor)`` of the partition's GPUs, from its
        ``devices``."""
        return sysconfig.partition_gpus(self.current_partition)

    def toolchain(self):
        env = self.current_environ
        return {'partition': self.current_partition.fullname,
                'environ': env.name, 'modules': list(env.modules),
                'cc': env.cc, 'cuda_home': self.extra('cuda_home') or '',
                'mpi_home': self.extra('mpi_home') or '',
                'nvcc': _tool_version(['nvcc', '--version']),
                'hipcc': _tool_version(['hipcc', '--version'])}

    def site_build(self):
        return (self.site.build.get(self.site_key) or {}) if self.site_key \
            else {}

    @run_after('setup')
    def adopt_site_install(self):
        self.site_prefix = self.site_build().get('prefix')

    @run_before('compile')
    def write_build_script(self):
        if self.site_prefix:
            self.prefix = self.site_prefix
            msg = (f'ccl-health: the site {self.package} prefix '
                   f'{self.site_prefix} does not exist '
                   f'(site/{self.current_system.name}.yaml)')
            self.build_system.commands = [
                f'test -d {buildcache.shell_value(self.site_prefix)} || '
                f'{{ echo {shell.quote(msg)} >&2; exit 1; }}'
            ]
            return
        mirror = buildcache.resolve_mirror(self.mirror)
        recipe = buildcache.Recipe(SOURCES[self.package], self.steps(),
                                   self.toolchain(), self.dependency_keys(),
                                   list(self.products))
        self.recipe_key = recipe.key()
        self.prefix = recipe.prefix(self.cache_dir)
        script = buildcache.build_script(recipe, self.cache_dir, mirror,
                                         self.build_jobs)
        with open(os.path.join(self.stagedir, 'ccl-build.sh'), 'w') as fp:
            fp.write(script)
        self.build_system.commands = ['bash ccl-build.sh']

    @sanity_function
    def installed(self):
        if self.site_prefix:
            return sn.assert_true(os.path.isdir(self.prefix))
        return sn.assert_true(buildcache.is_built(self.prefix),
                              msg=f'{self.package}: no complete install in '
                                  f'{self.prefix}')
