"""What the ReFrame configuration says, read the same way by ReFrame
(``config/settings.py``) and by the node health hook (which must work
without ReFrame): the system files and their order, and the GPUs of a
partition.

One file per system, ``config/systems/<name>.py``, defining ``system`` (a
ReFrame system dict) and ``environments``; adding a system is adding a file
(as CSCS's ``config/cscs.py`` globs its ``systems/``).  ReFrame picks the
first system whose ``hostnames`` pattern matches the host, so the order is
that of the file names, except that a system with a pattern matching every
host name (``.*``: `local`) comes last, after the real sites.

A partition's GPUs are its ``devices`` entry of type ``gpu``
(``num_devices``, ``arch``): the one place they are written."""

import glob
import importlib.util
import os
import re

SYSTEMS = 'systems'


def system_files(config_dir):
    """``[(name, path)]`` of ``<config_dir>/systems/*.py``, by file name."""
    paths = sorted(glob.glob(os.path.join(config_dir, SYSTEMS, '*.py')))
    return [(os.path.splitext(os.path.basename(p))[0], p) for p in paths
            if not os.path.basename(p).startswith('_')]


def load_file(path, prefix='ccl_health_config'):
    """The module of one configuration file, loaded without importing it
    as a package (``config/`` is no package)."""
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f'{prefix}_{name}', path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def matches_any_host(system):
    """Whether one of the system's ``hostnames`` patterns matches every
    host name (it matches the empty name: ``.*``)."""
    for patt in system.get('hostnames') or []:
        try:
            if re.match(patt, ''):
                return True
        except re.error:
            pass
    return False


def in_reframe_order(items, system_of=lambda s: s):
    """``items`` in the order ReFrame must try their systems: as given
    (by file name), those matching any host last.  ``system_of`` gives an
    item's system dict."""
    return sorted(items, key=lambda s: matches_any_host(system_of(s)))


def system_of_host(items, hostname, system_of=lambda s: s):
    """The first of ``items`` (in :func:`in_reframe_order`) whose system's
    ``hostnames`` pattern ``re.match``-es ``hostname``, as ReFrame picks
    it; None when none does.  A bad pattern raises :class:`re.error`."""
    for item in in_reframe_order(items, system_of):
        for patt in system_of(item).get('hostnames') or []:
            if re.match(patt, hostname):
                return item
    return None


def vendor_of(arch):
    """``'nvidia'`` for ``sm_*``, ``'amd'`` for ``gfx*``, else ``''``."""
    arch = str(arch or '')
    if arch.startswith('sm_'):
        return 'nvidia'
    if arch.startswith('gfx'):
        return 'amd'
    return ''


def partition_gpus(partition):
    """``(count, arch, vendor)`` of a partition's GPUs per node, from its
    ``devices``: a ReFrame partition (``select_devices('gpu')``) or the
    partition dict of a configuration file.  ``(0, '', '')`` without
    GPUs."""
    if isinstance(partition, dict):
        devs = [(int(d.get('num_devices', 1) or 0), d.get('arch') or '')
                for d in partition.get('devices') or []
                if d.get('type') == 'gpu']
    else:
        devs = [(int(d.num_devices or 0), d.arch or '')
                for d in partition.select_devices('gpu')]
    count = sum(n for n, _ in devs)
    arch = next((a for _, a in devs if a), '')
    return count, arch, vendor_of(arch)


#: ReFrame's schedulers that run a job on this host, not through a batch
#: system
HERE_SCHEDULERS = ('local',)
#: the command each batch scheduler of ReFrame submits a job with
SUBMIT_COMMAND = {'slurm': 'sbatch', 'squeue': 'sbatch', 'pbs': 'qsub',
                  'torque': 'qsub', 'sge': 'qsub', 'lsf': 'bsub',
                  'oar': 'oarsub', 'flux': 'flux'}
