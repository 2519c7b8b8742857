"""RCCL's public header ``rccl/rccl.h``, made from RCCL's source where no
RCCL install provides one (a machine without ROCm, such as CI; a site with
ROCm has ``<rocm>/include/rccl/rccl.h``).

The header is not written by hand: ``src/nccl.h.in`` is filled in by RCCL's
own CMake code, the block of its ``CMakeLists.txt`` that reads
``makefiles/version.mk`` (``NCCL_MAJOR``, ``NCCL_MINOR``, ``NCCL_PATCH``,
``NCCL_SUFFIX``, ``NCCL_VERSION``) and calls ``configure_file``.  That
block is cut out of the unpacked ``CMakeLists.txt`` (from its comment
``# Determine version from makefiles/version.mk`` to the
``configure_file(... include/nccl.h)`` line) and run with ``cmake -P``
with ``PROJECT_BINARY_DIR`` set to the install prefix.  Its one call into
rocm-cmake, ``rocm_setup_version`` (the package version of RCCL's own
packaging), has no part in the header and is defined empty.  A release
whose ``CMakeLists.txt`` lacks that block fails the step with one line
saying so; a header that still holds a ``${...}`` placeholder fails too.

The prefix then holds ``include/rccl/rccl.h`` and ``include/nccl.h`` (as
RCCL's build tree does): a ``--with-rccl=<prefix>`` for aws-ofi-rccl, a
``NCCL_HOME=<prefix>`` for compiling rccl-tests' sources.  There is no
``librccl``: nothing here links or runs RCCL."""

from ccl_health import shell

from .source_build import SourceBuild, _tool_version

#: the first and last line of RCCL's CMake block that makes the header
BLOCK_START = '# Determine version from makefiles/version.mk'
BLOCK_END = 'include/nccl.h)'


def header_steps():
    """The steps that make the header (run in the unpacked source)."""
    start = BLOCK_START.replace('/', r'\/')
    end = BLOCK_END.replace('/', r'\/')
    script = 'ccl-rccl-header.cmake'
    missing = ('ccl-health: CMakeLists.txt has no block from '
               f'"{BLOCK_START}" to "{BLOCK_END}" (configure_file of '
               'src/nccl.h.in): this RCCL release makes its header '
               'otherwise')
    cut = (f"{{ printf 'function(rocm_setup_version)\\nendfunction()\\n'; "
           f"sed -n '/^{start}/,/{end}/p' CMakeLists.txt; }} > {script}"
           f" && grep -q 'configure_file(src/nccl.h.in' {script}"
           f" || {{ echo {shell.quote(missing)} >&2; exit 1; }}")
    left = ('ccl-health: "$PREFIX"/include/rccl/rccl.h still holds a ${...} '
            'placeholder')
    check = ('! grep -n \'\\${\' "$PREFIX"/include/rccl/rccl.h || '
             f'{{ echo "{left}" >&2; exit 1; }}')
    return [('cut-version-block', cut),
            ('configure-header',
             f'cmake -DPROJECT_BINARY_DIR="$PREFIX" -P {script}'),
            ('check-header', check)]


class RcclHeaderBuild(SourceBuild):
    """``include/rccl/rccl.h`` from RCCL's pinned source; ``build.rccl.
    prefix`` in the site file names an RCCL install to use instead."""

    package = 'rccl'
    site_key = 'rccl'
    products = ['include/rccl/rccl.h', 'include/nccl.h']

    def toolchain(self):
        return dict(super().toolchain(),
                    cmake=_tool_version(['cmake', '--version']))

    def steps(self):
        return header_steps()
