"""Slurm's ``scrontab`` client for the tests, built from Debian's own source.

Debian 12's ``slurm-client`` (22.05.8) does not ship ``scrontab``: the
upstream build makes it, but ``debian/slurm-client.install`` leaves it out
(no other Debian package of bookworm carries it either).  Where it is
missing, :func:`ensure_scrontab` builds it from the source package of the
*installed* ``slurm-client`` version, from the Debian archive only:

1. ``apt-get update`` + ``apt-get source --download-only slurm-wlm=<version>``
   with a private ``deb-src`` list and private package lists (the system's
   apt configuration is not touched);
2. ``dpkg-source -x`` (Debian's patches applied), ``./configure`` with
   Debian's directories;
3. ``make -C src/scrontab scrontab`` linked against the installed
   ``libslurmfull.so`` (the in-tree library is not built), with the same
   RUNPATH as Debian's own clients.

The binary is kept under ``~/.cache/ccl-health/scrontab/<version>/``: a
second run costs nothing.  Measured on the 2-core development machine:
~30 s in all (apt-get update 2 s, download 0.2 s, unpack 1 s,
configure 24 s, make 1 s), ~10 MB downloaded.

Never raises: returns ``(path or None, a line saying what happened)`` so
that the caller can fall back (to sbatch) and say why."""

import os
import shutil
import subprocess
import tempfile
import time

SOURCE = 'slurm-wlm'
LIBDIR = '/usr/lib/x86_64-linux-gnu/slurm-wlm'
MIRROR = os.environ.get('CCL_HEALTH_DEBIAN_MIRROR', 'http://deb.debian.org')
#: the tools the build needs, and the Debian packages that bring them
TOOLS = {'gcc': 'gcc', 'make': 'make', 'ld': 'binutils',
         'objcopy': 'binutils', 'dpkg-source': 'dpkg-dev',
         'apt-get': None}


class Failed(Exception):
    pass


def cache_root():
    base = os.environ.get('XDG_CACHE_HOME') or \
        os.path.join(os.path.expanduser('~'), '.cache')
    return os.path.join(base, 'ccl-health', 'scrontab')


def installed_version():
    """The installed slurm-client's Debian version, or None."""
    try:
        p = subprocess.run(['dpkg-query', '-W', '-f=${Version}',
                            'slurm-client'], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() \
        else None


def codename():
    try:
        with open('/etc/os-release') as fp:
            for ln in fp:
                if ln.startswith('VERSION_CODENAME='):
                    return ln.split('=', 1)[1].strip().strip('"') or None
    except OSError:
        pass
    return None


def _run(cmd, cwd=None, timeout=600, env=None):
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                           timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise Failed(f'{cmd[0]}: {err}')
    if p.returncode != 0:
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-3:]
        name = ' '.join(w for w in cmd[:6] if not w.startswith(
            ('-', 'Dir', 'Debug', 'APT')))
        raise Failed(f'{name} (rc={p.returncode}): '
                     + ' | '.join(tail))
    return p


def _tools():
    """Install the build tools that are missing (root and apt-get)."""
    missing = sorted({pkg for tool, pkg in TOOLS.items()
                      if not shutil.which(tool)} - {None})
    if not shutil.which('apt-get'):
        raise Failed('no apt-get (not Debian)')
    if not missing:
        return
    if os.geteuid() != 0:
        raise Failed(f'build tools missing ({", ".join(missing)}), '
                     f'installing them needs root')
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    cmd = ['apt-get', 'install', '-y', '--no-install-recommends'] + missing
    try:
        _run(cmd, env=env, timeout=900)
    except Failed:
        # a stale package index: refresh it once and try again
        _run(['apt-get', 'update'], env=env, timeout=600)
        _run(cmd, env=env, timeout=900)


def build(version, dest, work):
    """Build scrontab of Debian's slurm-wlm ``version`` into ``dest``;
    returns the timings of the steps."""
    code = codename()
    if not code:
        raise Failed('no VERSION_CODENAME in /etc/os-release')
    if not os.path.exists(os.path.join(LIBDIR, 'libslurmfull.so')):
        raise Failed(f'no {LIBDIR}/libslurmfull.so (slurm-client?)')
    times = {}
    t = time.monotonic()
    _tools()
    times['tools'] = time.monotonic() - t
    apt = os.path.join(work, 'apt')
    os.makedirs(os.path.join(apt, 'lists', 'partial'))
    with open(os.path.join(apt, 'sources.list'), 'w') as fp:
        fp.write(f'deb-src {MIRROR}/debian {code} main\n'
                 f'deb-src {MIRROR}/debian {code}-updates main\n'
                 f'deb-src {MIRROR}/debian-security {code}-security main\n')
    opts = ['-o', f'Dir::Etc::SourceList={apt}/sources.list',
            '-o', 'Dir::Etc::SourceParts=/nonexistent',
            '-o', f'Dir::State::Lists={apt}/lists',
            '-o', 'Debug::NoLocking=1', '-o', 'APT::Sandbox::User=root']
    t = time.monotonic()
    p = _run(['apt-get'] + opts + ['update'], timeout=300)
    times['apt-get update'] = time.monotonic() - t
    if not any(f.endswith('_Sources') or '_Sources.' in f
               for f in os.listdir(os.path.join(apt, 'lists'))):
        # apt-get update exits 0 when no mirror answers: say so plainly
        why = [ln for ln in (p.stdout + p.stderr).splitlines()
               if ln.startswith(('W:', 'E:', 'Err:'))][:1]
        raise Failed(f'apt-get update fetched no Sources index from '
                     f'{MIRROR} (no network to the Debian archive?)'
                     + (f': {why[0]}' if why else ''))
    src = os.path.join(work, 'src')
    os.makedirs(src)
    t = time.monotonic()
    _run(['apt-get'] + opts + ['source', '--download-only',
                               f'{SOURCE}={version}'], cwd=src, timeout=300)
    times['download'] = time.monotonic() - t
    [dsc] = [f for f in os.listdir(src) if f.endswith('.dsc')]
    t = time.monotonic()
    _run(['dpkg-source', '-x', dsc, 'slurm'], cwd=src, timeout=300)
    times['unpack'] = time.monotonic() - t
    top = os.path.join(src, 'slurm')
    t = time.monotonic()
    _run(['./configure', '--prefix=/usr', '--sysconfdir=/etc/slurm',
          '--libdir=/usr/lib/x86_64-linux-gnu', '--without-rpath',
          '--disable-debug'], cwd=top, timeout=600)
    times['configure'] = time.monotonic() - t
    t = time.monotonic()
    # only the client, linked against the installed libslurmfull with
    # the RUNPATH of Debian's own clients (the in-tree library is not built)
    _run(['make', '-C', 'src/scrontab', 'scrontab', 'convenience_libs=',
          'scrontab_DEPENDENCIES=libscrontab_ref.la',
          f'scrontab_LDADD=libscrontab_ref.la {LIBDIR}/libslurmfull.so -ldl',
          f'scrontab_LDFLAGS=-export-dynamic -Wl,-rpath,{LIBDIR}'],
         cwd=top, timeout=600)
    times['make'] = time.monotonic() - t
    os.makedirs(dest, exist_ok=True)
    tmp = os.path.join(dest, '.scrontab.tmp')
    shutil.copy2(os.path.join(top, 'src', 'scrontab', 'scrontab'), tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, os.path.join(dest, 'scrontab'))
    return times


def ensure_scrontab(path=None):
    """A usable ``scrontab``: the one on ``path`` (default $PATH), else the
    cached build, else a fresh build.  Returns (path or None, note)."""
    found = shutil.which('scrontab', path=path)
    if found:
        return found, f'scrontab on PATH: {found}'
    version = installed_version()
    if not version:
        return None, 'scrontab missing and no Debian slurm-client ' \
                     'installed to build it for'
    dest = os.path.join(cache_root(), version)
    binary = os.path.join(dest, 'scrontab')
    if os.access(binary, os.X_OK):
        return binary, f'scrontab built earlier from Debian source ' \
                       f'{SOURCE} {version}: {binary}'
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix='ccl-health-scrontab-')
    try:
        times = build(version, dest, work)
    except (Failed, OSError, ValueError) as err:
        return None, f'scrontab missing; building it from Debian source ' \
                     f'{SOURCE} {version} failed: {err}'
    finally:
        shutil.rmtree(work, ignore_errors=True)
    steps = ', '.join(f'{k} {v:.1f} s' for k, v in times.items())
    return binary, f'scrontab built from Debian source {SOURCE} ' \
                   f'{version} in {time.monotonic() - t0:.0f} s ' \
                   f'({steps}): {binary}'


if __name__ == '__main__':
    import sys
    where, note = ensure_scrontab()
    print(note)
    sys.exit(0 if where else 1)
