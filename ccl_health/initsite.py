"""``scripts/init-site DIR [--from SYSTEM]``: a working copy of the files
a site keeps, to edit in its own repository: ``site/`` (environment per
transport, the health hook's and the fleet's settings), ``reference/``
(expected bandwidths with their sources) and ``config/systems/`` (the
ReFrame system: host names, partitions, launcher, modules).  With
``--from SYSTEM`` only that system's three files (and what every system
shares: the NHC and Slurm wrappers, the example fault plan, the
references' anchors).  It says the three variables that point the suite
at the copy: ``CCL_HEALTH_SITE_DIR``, ``CCL_HEALTH_REFERENCE_DIR``,
``CCL_HEALTH_CONFIG_DIR``."""

import os
import shutil

from ccl_health import CclHealthError, resources, shell


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


def command(args):
    dest = os.path.abspath(args.dir)
    pairs = files_to_copy(dest, args.from_system)
    clash = [t for _, t in pairs if os.path.exists(t)]
    if clash and not args.force:
        raise CclHealthError(
            f'{dest}: {len(clash)} file(s) there already (e.g. {clash[0]}); '
            f'nothing copied (--force overwrites them)')
    for src, target in pairs:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(src, target)
    site, ref = os.path.join(dest, 'site'), os.path.join(dest, 'reference')
    conf = os.path.join(dest, 'config')
    which = args.from_system or 'local'
    print(f'ccl-health: copied {len(pairs)} file(s) into {dest}: site/ '
          f'(environment per transport, the health hook\'s and the fleet\'s '
          f'settings), reference/ (expected bandwidth per size, with its '
          f'source), config/systems/ (the ReFrame system: host names, '
          f'partitions, launcher).\n'
          f'Edit them, then point the suite at them (scripts/*, the health '
          f'hook and reframe -C config/settings.py all read these three):\n'
          f'  export CCL_HEALTH_SITE_DIR={shell.quote(site)}\n'
          f'  export CCL_HEALTH_REFERENCE_DIR={shell.quote(ref)}\n'
          f'  export CCL_HEALTH_CONFIG_DIR={shell.quote(conf)}\n'
          f'Then see what a night would run: scripts/run --dry-run -- '
          f'--system {which}')
    return 0


def add_arguments(p):
    p.add_argument('dir', help='a new or empty folder (site/, reference/ '
                   'and config/systems/ go under it)')
    p.add_argument('--from', dest='from_system', metavar='SYSTEM',
                   help='copy only this system\'s files (e.g. frontier; '
                   'default: every shipped system)')
    p.add_argument('--force', action='store_true', help='overwrite files '
                   'that are there already')


if __name__ == '__main__':       # python -m ccl_health.initsite DIR ...
    import argparse
    import sys
    from ccl_health import entry
    parser = argparse.ArgumentParser(
        prog='scripts/init-site',
        description=__doc__.split('\n\n')[0].replace('``', ''))
    add_arguments(parser)
    sys.exit(entry.run(command, parser.parse_args()))
