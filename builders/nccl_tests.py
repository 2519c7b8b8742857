"""nccl-tests (NVIDIA) or rccl-tests (AMD), as the partition's GPU vendor
says: Make, ``MPI=1`` where an MPI is present, device code for the detected
GPU architecture only.  What each program is (its package, binaries,
command line) is its driver's (:mod:`ccl_health.evidence.programs`).  A site that
installs them itself says so with ``build.nccl_tests.prefix`` /
``build.rccl_tests.prefix``: the sweeps then run that installation and
never instantiate this build (:mod:`ccl_health.rfm.sweep`).

Paths: the Makefiles pass ``$(abspath build)`` and ``*_HOME`` unquoted, so
the build runs in a space-free folder (:mod:`ccl_health.buildcache`) and a
``*_HOME`` holding whitespace fails the ``check-paths`` step with one line
naming it; the install (``cp`` into ``"$PREFIX"``) takes any path.

The same prefix gets ``bin/ccl-health-links`` (step ``links``:
``builders/src/ccl_health_links.cu`` compiled by nvcc, or by hipcc as HIP
through ``builders/src/gpu_compat.h``): the health hook's copy matrix of
the GPU links (:mod:`ccl_health.evidence.copymatrix`); and
``bin/ccl-health-probe`` (step ``probe``: the same source with
``-DCCL_HEALTH_PROBE``, linked with NCCL, or RCCL as HIP): the hook's one
probe process, the copy matrix and then NCCL's all_reduce of every GPU
(:mod:`ccl_health.hook.probes`; where it is not built the hook runs
``all_reduce_perf`` and ``ccl-health-links`` apart, as before).

rccl-tests' Makefile runs ``hipify-perl`` (ROCm's ``bin``, on PATH once the
``rocm`` module is loaded) on every source, compiles with
``$(ROCM_PATH)/bin/hipcc`` for the targets in ``HCC_AMDGPU_TARGET`` and
links ``-lrccl`` from ``NCCL_HOME`` (``$NCCL_HOME/include/rccl/rccl.h`` is
the header).  The programs' own files hold no kernels: the device code is
in ``common.cu`` and ``verifiable.cu``; ``hypercube.cu`` is not built."""

from reframe.core.builtins import run_after, variable

import hashlib
import os

from ccl_health import buildcache, resources
from ccl_health.evidence import copymatrix as links
from ccl_health.evidence import programs

from .source_build import SourceBuild

#: the link check's program (:mod:`ccl_health.evidence.copymatrix`): one CUDA / HIP
#: source, built beside the test programs into the same prefix, where the
#: health hook finds it (``bin/ccl-health-links``)
LINKS_SOURCE = os.path.join(resources.builders_dir(), 'src',
                            'ccl_health_links.cu')
LINKS_PRODUCT = os.path.join('bin', links.PROGRAM)
#: the hook's one probe process, from the same source (and its header)
PROBE_PRODUCT = os.path.join('bin', links.PROBE_PROGRAM)
COMPAT_HEADER = os.path.join(resources.builders_dir(), 'src', 'gpu_compat.h')


def compiler(vendor_package, arch, extra):
    """nvcc (``cuda_home``'s, else the one on PATH), or ``hipcc -x hip``
    of ``rocm_home`` for the partition's gfx architecture."""
    if vendor_package == 'rccl-tests':
        rocm = buildcache.shell_value(extra('rocm_home', '/opt/rocm'))
        target = (f' --offload-arch={buildcache.shell_value(arch)}'
                  if arch.startswith('gfx') else '')
        return f'{rocm}/bin/hipcc -x hip{target}'
    return (f'{buildcache.shell_value(extra("cuda_home"))}/bin/nvcc'
            if extra('cuda_home') else 'nvcc')


def links_step(vendor_package, arch, extra):
    """The build step of ``ccl-health-links``: :func:`compiler`.  The
    source's sha256 is part of the command, so a changed source is a new
    recipe (a new prefix)."""
    with open(LINKS_SOURCE, 'rb') as fp:
        digest = hashlib.sha256(fp.read()).hexdigest()[:16]
    src = buildcache.shell_value(LINKS_SOURCE)
    out = f'"$PREFIX"/{LINKS_PRODUCT}'
    cc = compiler(vendor_package, arch, extra)
    return (f'{cc} -O2 -o {out} {src} '
            f'# ccl_health_links.cu sha256 {digest}')


def probe_step(vendor_package, arch, extra):
    """The build step of ``ccl-health-probe``: the links source compiled
    with ``-DCCL_HEALTH_PROBE`` as in :func:`links_step`, linked with NCCL
    (``nccl_home``'s, else the system's) or RCCL (``rccl_home``, default
    ``rocm_home``).  The sha256 of the source and of ``gpu_compat.h`` is
    part of the command (a changed source is a new recipe)."""
    digest = hashlib.sha256()
    for path in (LINKS_SOURCE, COMPAT_HEADER):
        with open(path, 'rb') as fp:
            digest.update(fp.read())
    cc = compiler(vendor_package, arch, extra)
    if vendor_package != 'rccl-tests' and arch.startswith('sm_'):
        # its kernels for this GPU (no PTX compiled at each start)
        cc += (f' -gencode=arch=compute_{arch[3:]},code=sm_{arch[3:]}')
    if vendor_package == 'rccl-tests':
        home = extra('rccl_home', extra('rocm_home', '/opt/rocm'))
        lib = 'rccl'
    else:
        home, lib = extra('nccl_home'), 'nccl'
    where = ''
    if home:
        h = buildcache.shell_value(home)
        where = f' -I{h}/include -L{h}/lib -Wl,-rpath,{h}/lib'
    src = buildcache.shell_value(LINKS_SOURCE)
    return (f'{cc} -O2 -DCCL_HEALTH_PROBE -o "$PREFIX"/{PROBE_PRODUCT} {src}'
            f'{where} -l{lib} # ccl_health_links.cu + gpu_compat.h sha256 '
            f'{digest.hexdigest()[:16]}')


class CollectiveTestsBuild(SourceBuild):
    package = programs.NCCL_TESTS.name
    #: ``sm_90`` / ``gfx90a``; default: the partition's GPU (devices)
    gpu_arch = variable(str, value='')

    @run_after('setup')
    def pick_package(self):
        self.package = self.program.name

    @property
    def program(self):
        """The driver of the partition's test program."""
        return programs.for_vendor(self.gpu()[2])

    @property
    def products(self):
        return self.program.products + [LINKS_PRODUCT, PROBE_PRODUCT]

    def steps(self):
        arch = self.gpu_arch or self.gpu()[1]
        homes, opts, prefix = {}, [], ''
        if self.extra('mpi_home'):
            homes['MPI_HOME'] = self.extra('mpi_home')
            opts.append('MPI=1')
        if self.package == 'rccl-tests':
            rocm = self.extra('rocm_home', '/opt/rocm')
            homes['ROCM_PATH'] = rocm
            # RCCL lives in <rocm>/rccl before ROCm 6.0, in <rocm>/lib since
            homes['NCCL_HOME'] = self.extra('rccl_home', rocm)
            if arch.startswith('gfx'):
                # hipcc builds for the targets named here (rccl-tests'
                # Makefile has no architecture variable)
                prefix = f'HCC_AMDGPU_TARGET={buildcache.shell_value(arch)} '
        else:
            if self.extra('cuda_home'):
                homes['CUDA_HOME'] = self.extra('cuda_home')
            if self.extra('nccl_home'):
                homes['NCCL_HOME'] = self.extra('nccl_home')
        opts += [buildcache.shell_option(k, v) for k, v in homes.items()]
        if self.package == 'nccl-tests' and arch.startswith('sm_'):
            cc = arch[3:]
            opts.append(buildcache.shell_option(
                'NVCC_GENCODE', f'-gencode=arch=compute_{cc},code=sm_{cc}'))
        steps = [('check-paths', buildcache.no_space_check(homes))] \
            if homes else []
        return steps + [
            ('build', prefix + 'make -j$JOBS ' + ' '.join(opts)),
            ('install', 'mkdir -p "$PREFIX/bin" && cp build/*_perf '
                        '"$PREFIX/bin/"'),
            ('links', links_step(self.package, arch, self.extra)),
            ('probe', probe_step(self.package, arch, self.extra))]
