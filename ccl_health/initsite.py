"""``scripts/init-site DIR [--from SYSTEM]``: a working copy of the files
a site keeps, to edit in its own repository: ``site/`` (environment per
transport, the health hook's and the fleet's settings), ``reference/``
(expected bandwidths with their sources) and ``config/systems/`` (the
ReFrame system: host names, partitions, launcher, modules).  With
``--from SYSTEM`` only that system's three files (and what every system
shares: the NHC and Slurm wrappers, the example fault plan, the
references' anchors).

It writes the site pointer (:func:`ccl_health.resources.site_pointer_path`:
``<checkout>/site.conf``), which names DIR and the build cache: every
command, the nightly, the health hook and the wrappers find the site
through it, with an empty environment too (NHC, slurmd, cron).  The copies
of the NHC and Slurm wrappers name this install (``CCL_HEALTH_HOME=`` /
``home=``), so they find the hook where they are copied to.  It also says
the three variables that override the pointer in a shell:
``CCL_HEALTH_SITE_DIR``, ``CCL_HEALTH_REFERENCE_DIR``,
``CCL_HEALTH_CONFIG_DIR``."""

import os
import shutil
import sys

from ccl_health import CclHealthError, resources, safefile, shell


def _sources():
    """``[(shipped folder, folder under DIR, per-system file suffix)]``."""
    return [(resources.shipped_site_dir(), 'site', '.yaml'),
             (resources.shipped_reference_dir(), 'reference', '.yaml'),
             (os.path.join(resources.path('config'), 'systems'),
              os.path.join('config', 'systems'), '.py')]


def shipped_systems():
    """The systems the suite ships (``config/systems/<name>.py``)."""
    folder = os.path.join(resources.path('config'), 'systems')
    return sorted(os.path.splitext(f)[0] for f in os.listdir(folder)
                  if f.endswith('.py') and not f.startswith('_'))


def files_to_copy(dest, system=None):
    """``[(source, target)]`` of the copy into ``dest``; with ``system``,
    the other systems' own files left out."""
    systems = shipped_systems()
    if system is not None and system not in systems:
        raise CclHealthError(f'--from {system}: no such system (shipped: '
                             f'{", ".join(systems)})')
    out = []
    for src, under, suffix in _sources():
        for top, dirs, files in os.walk(src):
            dirs[:] = sorted(d for d in dirs if d != '__pycache__')
            for f in sorted(files):
                if f.endswith(('.pyc', '.pyo')) or f == '__init__.py':
                    continue
                name, ext = os.path.splitext(f)
                if system is not None and top == src and ext == suffix \
                        and name in systems and name != system:
                    continue
                rel = os.path.relpath(os.path.join(top, f), src)
                out.append((os.path.join(top, f),
                            os.path.join(dest, under, rel)))
    return out


#: the wrappers that call the hook, and the line of each that names the
#: install (the checkout or virtual environment) in a copy
WRAPPERS = {os.path.join('site', 'slurm', 'healthcheck.sh'): 'home=',
            os.path.join('site', 'nhc', 'ccl_health.nhc'): 'CCL_HEALTH_HOME='}


def install_home():
    """What the wrappers' copies name: the checkout (its
    ``scripts/ccl-health-check``), else the virtual environment the
    package is installed in (its ``bin/ccl-health-check``)."""
    return resources.PACKAGE_PARENT if resources.in_checkout() \
        else sys.prefix


def _copy(src, target, dest):
    """Copy ``src`` to ``target``; a wrapper's copy names this install."""
    rel = os.path.relpath(target, dest)
    if rel not in WRAPPERS:
        shutil.copy2(src, target)
        return
    key = WRAPPERS[rel]
    with open(src) as fp:
        lines = fp.read().split('\n')
    hits = [i for i, ln in enumerate(lines) if ln == key]
    if len(hits) != 1:
        raise CclHealthError(f'{src}: no single line {key!r} to name the '
                             f'install in its copy')
    lines[hits[0]] = f'{key}{shell.quote(install_home())}'
    safefile.write_atomic(target, '\n'.join(lines),
                          mode=os.stat(src).st_mode & 0o777)


def pointer_text(dest, cache):
    return (f'# ccl-health site pointer, written by scripts/init-site: the '
            f'site directory\n# (site/, reference/, config/systems/ under '
            f'it) and the build cache every\n# entry point uses, with an '
            f'empty environment too (NHC, slurmd, cron).\n'
            f'# CCL_HEALTH_SITE_DIR / _REFERENCE_DIR / _CONFIG_DIR / _CACHE '
            f'override.\ndir = {dest}\ncache = {cache}\n')


def command(args):
    dest = os.path.abspath(args.dir)
    pairs = files_to_copy(dest, args.from_system)
    pointer = resources.site_pointer_path()
    clash = [t for _, t in pairs if os.path.exists(t)]
    if clash and not args.force:
        raise CclHealthError(
            f'{dest}: {len(clash)} file(s) there already (e.g. {clash[0]}); '
            f'nothing copied (--force overwrites them)')
    try:
        before = resources.site_pointer().get('dir')
    except CclHealthError:
        before = '(unreadable)'
    if before and before != dest and not args.force:
        raise CclHealthError(
            f'{pointer} names the site directory {before} already; nothing '
            f'copied (--force points this install at {dest} instead)')
    try:
        cache = os.path.abspath(args.cache or resources.cache_dir())
    except CclHealthError:      # an unreadable pointer, replaced (--force)
        cache = resources.cache_dir({**os.environ,
                                     'CCL_HEALTH_SITE_CONF': os.devnull})
    for src, target in pairs:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        _copy(src, target, dest)
    os.makedirs(os.path.dirname(pointer), exist_ok=True)
    safefile.write_atomic(pointer, pointer_text(dest, cache))
    site, ref = os.path.join(dest, 'site'), os.path.join(dest, 'reference')
    conf = os.path.join(dest, 'config')
    which = args.from_system or 'local'
    print(f'ccl-health: copied {len(pairs)} file(s) into {dest}: site/ '
          f'(environment per transport, the health hook\'s and the fleet\'s '
          f'settings), reference/ (expected bandwidth per size, with its '
          f'source), config/systems/ (the ReFrame system: host names, '
          f'partitions, launcher).\n'
          f'This install now uses them: {pointer} names {dest} and the '
          f'build cache {cache}; every command, the nightly, the health hook '
          f'and the NHC / Slurm wrappers read it, with an empty environment '
          f'too (NHC, slurmd, cron).\n'
          f'Edit them.  In a shell these still override the pointer '
          f'(optional):\n'
          f'  export CCL_HEALTH_SITE_DIR={shell.quote(site)}\n'
          f'  export CCL_HEALTH_REFERENCE_DIR={shell.quote(ref)}\n'
          f'  export CCL_HEALTH_CONFIG_DIR={shell.quote(conf)}\n'
          f'Then see what a night would run: scripts/run --dry-run -- '
          f'--system {which}')
    return 0


def add_arguments(p):
    p.add_argument('dir', help='a new or empty folder (site/, reference/ '
                   'and config/systems/ go under it); the site pointer '
                   '(site.conf of this checkout, $CCL_HEALTH_SITE_CONF) '
                   'names it')
    p.add_argument('--from', dest='from_system', metavar='SYSTEM',
                   help='copy only this system\'s files (e.g. frontier; '
                   'default: every shipped system)')
    p.add_argument('--cache', metavar='FOLDER', help='the build cache '
                   'the site pointer names (the jobs build into it, the '
                   'hook runs what is there; on a filesystem the compute '
                   'nodes share; default: $CCL_HEALTH_CACHE, else '
                   '~/.cache/ccl-health/builds of whoever runs init-site)')
    p.add_argument('--force', action='store_true', help='overwrite files '
                   'that are there already, and a site pointer naming '
                   'another folder')


if __name__ == '__main__':       # python -m ccl_health.initsite DIR ...
    import argparse
    import sys
    from ccl_health import entry
    parser = argparse.ArgumentParser(
        prog='scripts/init-site',
        description=__doc__.split('\n\n')[0].replace('``', ''))
    add_arguments(parser)
    sys.exit(entry.run(command, parser.parse_args()))
