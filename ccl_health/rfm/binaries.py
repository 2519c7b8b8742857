"""Where a check's collective test program comes from: the site's own
installation (:class:`SiteBinariesMixin`, as hpctestlib's ``osu_run``) or a
build from the pinned sources (:class:`BuildAndRunMixin`, its
``osu_build_run``).  The program itself (nccl-tests / rccl-tests) follows
the partition's GPU vendor (:mod:`ccl_health.evidence.programs`).

Which of the two a system runs is site data: a ``prefix:`` under
``build.nccl_tests`` / ``build.rccl_tests`` of ``site/<system>.yaml``
(:func:`site_installs_tests`, :func:`variant`); the checks' names are the
same either way.  The choice is made when the check files load, from the
site folder of ``CCL_HEALTH_SITE_DIR`` (else ``site/``); ``-S
tests_prefix=DIR`` runs the binaries in ``DIR`` in either variant."""

import reframe as rfm
from reframe.core.builtins import fixture, variable

from ccl_health import resources
resources.importable()      # the build recipes: the checkout's or shipped
from builders.nccl_tests import CollectiveTestsBuild  # noqa: E402
from ccl_health.evidence import programs  # noqa: E402
from ccl_health.evidence.benignwarns import check_benign
from ccl_health.rfm.base import runtime_site
from ccl_health.sitedata import site as site_data
from ccl_health.sitedata.sysconfig import partition_gpus

REPO = resources.PACKAGE_PARENT


def default_site_dir():
    return resources.site_dir()


class SiteBinariesMixin(rfm.RegressionTestPlugin):
    """The test program as the site installed it."""

    #: where ``bin/<collective>_perf`` is; empty: the site's
    #: ``build.<program>.prefix``
    tests_prefix = variable(str, value='')

    @property
    def program(self):
        """The :class:`~ccl_health.evidence.programs.TestProgram` of this
        partition's GPUs."""
        return programs.for_vendor(partition_gpus(self.current_partition)[2])

    def binaries_prefix(self):
        """The program's install prefix; '' when there is none."""
        if self.tests_prefix:
            return self.tests_prefix
        site = getattr(self, '_site', None) or site_data.load(
            getattr(self, 'site_dir', None) or default_site_dir(),
            self.current_system.name, benign_check=check_benign)
        return programs.site_prefix(site.build, self.program) or ''


class BuildAndRunMixin(rfm.RegressionTestPlugin):
    """The test program built from the pinned sources
    (:class:`builders.nccl_tests.CollectiveTestsBuild`), for a site that
    installs none; put before a :class:`SiteBinariesMixin` test (its
    ``tests_prefix`` still wins)."""

    tests = fixture(CollectiveTestsBuild, scope='environment')

    def binaries_prefix(self):
        return self.tests_prefix or self.tests.prefix


def site_installs_tests(system=None, site_dir=None):
    """Whether the site file of ``system`` (default: the system ReFrame
    runs on) names its own installation of nccl-tests / rccl-tests.  A
    site file that cannot be read says no: the checks then report its
    error."""
    site = runtime_site(system, site_dir or default_site_dir())
    return site is not None and programs.site_prefix(site.build) is not None


class BuiltBinariesMixin(BuildAndRunMixin, SiteBinariesMixin):
    """:class:`SiteBinariesMixin` with the program built here."""


def variant(system=None, site_dir=None):
    """The mixin this system's site file asks for."""
    return SiteBinariesMixin if site_installs_tests(system, site_dir) \
        else BuiltBinariesMixin
