"""Which system and partition this node is, found as ReFrame's
configuration finds them (:mod:`ccl_health.sitedata.sysconfig`): the
``hostnames`` patterns of each system in ``config/systems/<system>.py``,
``re.match``-ed against the host name, first match wins; the partition is
the one of the system's partitions with GPUs that Slurm's record of the
node names (:func:`slurm_matches`), else the system's only partition with
GPUs.  ``--system`` / ``--partition`` and their environment variables, and
the site file's ``health.partition``, override."""

import os
import re
import shlex

from ccl_health.hook.settings import CouldNotCheck


def config_system_names(config_dir):
    """The systems of the ReFrame configuration: the file names of
    ``<config_dir>/systems/*.py``, sorted."""
    from ccl_health.sitedata.sysconfig import SYSTEMS, system_files
    names = [name for name, _ in system_files(config_dir)]
    if not names:
        raise CouldNotCheck(f'{os.path.join(config_dir, SYSTEMS)}: no '
                            f'system files (<system>.py)')
    return names


def config_system_path(config_dir, name):
    from ccl_health.sitedata.sysconfig import SYSTEMS
    return os.path.join(config_dir, SYSTEMS, f'{name}.py')


def load_config_system(config_dir, name, gpus):
    """The ``system`` dict of ``config/systems/<name>.py`` (loaded as
    ReFrame's configuration loads it, without ReFrame; the GPUs it detects
    are ``gpus``, detected once)."""
    from ccl_health.evidence import nodefacts as node
    path = config_system_path(config_dir, name)
    try:
        system = node.load_system_file(path, gpus,
                                       'ccl_health_hook_config').system
        if not isinstance(system, dict) or not isinstance(
                system.get('hostnames'), list):
            raise TypeError('no system dict with a hostnames list')
    except Exception as err:
        raise CouldNotCheck(f'{path}: cannot load the system '
                            f'configuration: {type(err).__name__}: '
                            f'{err}') from None
    return system


def config_systems(config_dir, gpus):
    """``[(name, system dict)]`` of every system file, in the order ReFrame
    tries them (file names; a system matching any host last)."""
    from ccl_health.sitedata.sysconfig import in_reframe_order
    return in_reframe_order(
        [(name, load_config_system(config_dir, name, gpus))
         for name in config_system_names(config_dir)], lambda it: it[1])


def gpu_count(part):
    from ccl_health.sitedata.sysconfig import partition_gpus
    return partition_gpus(part)[0]


def find_system(settings, gpus):
    """``(system name, system dict or None, its file name)`` for this
    host; ``None``: a system named by --system that the ReFrame
    configuration does not have.

    Never another system's references: unnamed, the system is the one
    whose ``hostnames`` patterns match this host, when exactly one does;
    several matching (Perlmutter's and LUMI's compute nodes are both
    ``nid<N>``) or none is :class:`CouldNotCheck` naming the host and what
    matched.  A system matching any host (`local`, ``.*``) is a match only
    where no other system matches and the systems are the shipped ones:
    never on a node of a site's own configuration (the site pointer,
    ``CCL_HEALTH_CONFIG_DIR``, ``--config-dir``)."""
    from ccl_health.sitedata.sysconfig import matches_any_host
    cfg = settings.config_dir
    names = config_system_names(cfg)
    if settings.system:
        if settings.system in names:
            return settings.system, load_config_system(
                cfg, settings.system, gpus), settings.system
        return settings.system, None, settings.system
    hits, anyhost = [], []
    for fname, conf in config_systems(cfg, gpus):
        if matches_any_host(conf):
            anyhost.append((fname, conf))
            continue
        for patt in conf['hostnames']:
            try:
                hit = re.match(patt, settings.hostname)
            except re.error as err:
                raise CouldNotCheck(
                    f'{config_system_path(cfg, fname)}: hostnames '
                    f'pattern {patt!r}: {err}') from None
            if hit:
                hits.append((fname, conf, patt))
                break
    name_it = 'name the system: --system or CCL_HEALTH_SYSTEM'
    if len(hits) > 1:
        raise CouldNotCheck(
            f'ambiguous: host name {settings.hostname!r} matches '
            + ', '.join(f'{c["name"]} ({p!r})' for _, c, p in hits)
            + f' of {cfg}: {name_it}')
    if hits:
        fname, conf, _ = hits[0]
        return conf['name'], conf, fname
    if anyhost and not settings.site_configured:
        fname, conf = anyhost[0]
        return conf['name'], conf, fname
    every = (f'; {", ".join(c["name"] for _, c in anyhost)} matches any '
             f'host and is no match on a site\'s own configuration'
             if anyhost else '')
    raise CouldNotCheck(
        f'host name {settings.hostname!r} matches no system of {cfg} '
        f'(hostnames patterns of {", ".join(names)}{every}): {name_it}')


def counts_what_is_there(config_dir, fname, gpus, partition):
    """Whether the partition's ``devices`` in the configuration are the
    GPUs detected at start-up (``config/systems/local.py``), not a fixed
    count: loaded again with one GPU more, its count changes."""
    import dataclasses
    try:
        more = dataclasses.replace(gpus, count=gpus.count + 1)
        again = load_config_system(config_dir, fname, more)
    except (CouldNotCheck, TypeError, ValueError):
        return False
    parts = {p.get('name'): p for p in again.get('partitions') or []}
    return partition in parts and gpu_count(parts[partition]) == \
        gpus.count + 1


def _access_names(access):
    """``(Slurm partitions, features)`` the ``access`` options of a
    ReFrame partition ask for (``-p X`` / ``--partition=X``, ``-C X`` /
    ``--constraint=X``; a constraint with ``|`` or brackets is not read)."""
    words = []
    for item in access or []:
        try:
            words += shlex.split(str(item))
        except ValueError:
            continue
    parts, feats = [], []
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ''
        for short, long_, into in (('-p', '--partition', parts),
                                   ('-C', '--constraint', feats)):
            if w in (short, long_):
                into.append(nxt)
            elif w.startswith(long_ + '='):
                into.append(w.split('=', 1)[1])
            elif w.startswith(short) and len(w) > 2 and \
                    not w.startswith('--'):
                into.append(w[2:])
    parts = [p for v in parts for p in v.split(',') if p]
    feats = [f for v in feats if not re.search(r'[|\[\]]', v)
             for f in v.split('&') if f]
    return parts, feats


def slurm_matches(part, rm_node):
    """Whether Slurm's record of this node (``rm_node``: :class:`ccl_health.
    evidence.nodestate.slurmnode.SlurmNode`) is a node of the ReFrame partition
    ``part``: its name is one of the node's Partitions, or what its
    ``access`` asks for (``-p`` partitions, ``-C`` features) is the
    node's."""
    if rm_node is None:
        return False
    if part.get('name') in rm_node.partitions:
        return True
    parts, feats = _access_names(part.get('access'))
    if not parts and not feats:
        return False
    return all(p in rm_node.partitions for p in parts) and \
        all(f in rm_node.features for f in feats)


def find_partition(settings, name, system, site, fname=None, gpus=None,
                   rm_node=None):
    """``(partition, GPUs per node or 0)``: --partition (and
    CCL_HEALTH_PARTITION), else the site file's ``health.partition``, else
    the one partition with GPUs Slurm's record of the node (``rm_node``)
    matches (:func:`slurm_matches`), else the system's only partition with
    GPUs; the GPUs are the partition's
    ``devices`` and the site file's ``health.gpus_per_node``, which must
    agree where both are given."""
    cfg = settings.config_dir
    health = site.health if site is not None else None
    wanted, src = settings.partition, '--partition / CCL_HEALTH_PARTITION'
    if not wanted and health:
        wanted, src = health.partition, f'{site.path}: health.partition'
    told = health.gpus_per_node if health else None
    if system is None:          # a system the ReFrame config does not know
        if not wanted:
            raise CouldNotCheck(
                f'system {name!r} is not in {cfg} (has: '
                f'{", ".join(config_system_names(cfg))}): give --partition '
                f'or health.partition in {site.path}')
        return wanted, told or 0
    parts = {p.get('name'): p for p in system.get('partitions') or []}
    origin = config_system_path(cfg, fname or name)
    if wanted:
        if wanted not in parts:
            raise CouldNotCheck(f'{src}: no partition {wanted!r} in system '
                                f'{name!r} of {origin} (has: '
                                f'{", ".join(sorted(map(str, parts)))})')
        partition = wanted
    else:
        with_gpus = [p for p, conf in parts.items() if gpu_count(conf)]
        how = ('named by --system / CCL_HEALTH_SYSTEM' if settings.system
               else f'matched by host name {settings.hostname!r}')
        told_by_slurm = [p for p in with_gpus
                         if slurm_matches(parts[p], rm_node)]
        if len(told_by_slurm) == 1:
            with_gpus = told_by_slurm
        if not with_gpus:
            raise CouldNotCheck(f'system {name!r} ({how}) has no partition '
                                f'with GPUs in {origin}')
        if len(with_gpus) > 1:
            raise CouldNotCheck(
                f'ambiguous: system {name!r} ({how}) has several partitions '
                f'with GPUs in {origin} ({", ".join(with_gpus)}): give '
                f'--partition, CCL_HEALTH_PARTITION or health.partition in '
                f'{site.path}')
        partition = with_gpus[0]
    devices = gpu_count(parts[partition])
    if told and devices and told > devices and gpus is not None and \
            counts_what_is_there(cfg, fname or name, gpus, partition):
        # the configuration counted the GPUs that answered: the site
        # file's count is what the node must have (fewer answering: GPUs
        # lost; more answering than the site says: the site file is wrong,
        # could not check, below)
        return partition, told
    if told and devices and told != devices:
        raise CouldNotCheck(
            f'{site.path}: health.gpus_per_node: {told}, but partition '
            f'{partition!r} of {origin} has {devices} GPUs (devices): one '
            f'of them is wrong')
    return partition, told or devices
