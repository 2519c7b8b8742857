"""The transport proof: what the debug log shows (:mod:`ccl_health.evidence.
debuglog`) against what was asked for (given, or read from the log:
:func:`asked_from_log`), rank by rank."""

import dataclasses
from typing import List, Optional

from ccl_health import CclHealthError
from ccl_health.evidence import debuglog
from ccl_health.sitedata import transports
from ccl_health.sitedata.transports import BUILTIN_NETS


@dataclasses.dataclass
class Proof:
    asked: str
    proven: Optional[str]
    ok: bool
    reason: str
    #: where the log holds several runs: each one's :class:`RunProof`
    runs: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class RunProof:
    """One run of a log that holds several (communicators that share no
    rank): its processes (``host:pid``), hosts, the rank count NCCL printed
    (``nranks``; None where it printed none), whether the output's table is
    this run's, and its transport proven from its own lines alone
    (:func:`ccl_health.evidence.debuglog.run_evidence`)."""
    number: int
    processes: List[str]
    hosts: List[str]
    nranks: Optional[int]
    table: bool
    proof: Proof

    def as_dict(self):
        p = self.proof
        return {'run': self.number, 'processes': self.processes,
                'hosts': self.hosts, 'nranks': self.nranks,
                'table': self.table,
                'transport': {'asked': p.asked, 'proven': p.proven,
                              'ok': p.ok, 'reason': p.reason}}


def _describe(via):
    paths = ', '.join(f'{k} x{n}' for k, n in sorted(via.items()))
    return paths or 'no channel lines'


def _labels(ranks, most=3):
    names = [r.label for r in ranks]
    more = f', +{len(names) - most} more' if len(names) > most else ''
    return ', '.join(names[:most]) + more


def _mixed(ev):
    """One line naming which ranks used which network, or None when every
    rank that names a network names the same one."""
    groups = {}
    any_via = any(r.via for r in ev.ranks.values())
    for rank in ev.ranks.values():
        nets = rank.networks
        if any_via and not rank.via and not rank.using_network and \
                not nets & set(BUILTIN_NETS):
            # a plugin inferred from NET/OFI lines alone: it cannot
            # contradict the channels of the others (its name may differ)
            continue
        if nets:
            label = ' + '.join(f'NET/{n}' for n in sorted(nets))
            groups.setdefault(label, []).append(rank)
    if len(groups) < 2:
        return None
    total = sum(len(g) for g in groups.values())
    parts = [f'{net} on {len(rs)} of {total} ranks ({_labels(rs)})'
             for net, rs in sorted(groups.items(),
                                   key=lambda kv: (-len(kv[1]), kv[0]))]
    fails = [r for rs in groups.values() for r in rs if r.plugin_failure]
    why = (f'; the plugin did not load on {fails[0].label}: '
           f'{fails[0].plugin_failure}' if fails else '')
    return 'ranks used different networks: ' + '; '.join(parts) + why


def asked_from_log(ev):
    """The transport the log says was asked for (a name of
    :data:`ccl_health.sitedata.transports.NAMES`), or None when it does not say:
    the environment NCCL echoes, read by the suite's one rule
    (:func:`ccl_health.sitedata.transports.asked_from_env`: the ``NCCL_NET``
    echo, ``NCCL_NET_GDR_LEVEL``, the switches of a socket run), and a
    plugin named (``NCCL_NET_PLUGIN set by environment to``, ``Plugin name
    set by env to``), looked for by a name that is not the default (``No
    plugin found (libnccl-net-ofi.so)``, ``Could not find:``) or found and
    failed (``initialization failed``).  A default name not found (``No
    plugin found (libnccl-net.so), using internal implementation``, which
    every NCCL without a plugin prints) is not an ask."""
    return transports.asked_from_env(ev.env, complete=False,
                                     plugin=ev.plugin_asked)


def _asked_why(ev, name):
    if ev.env.get('NCCL_NET'):
        return f'NCCL_NET set by environment to {ev.env["NCCL_NET"]}'
    if ev.plugin_asked:
        return f'the log asks for the plugin: {ev.plugin_asked[:120]}'
    return f'the log\'s environment asks for {name}'


def _default_probe_asked(t, ev):
    """Whether NCCL's probe of its default plugin name (``No plugin found
    (libnccl-net.so)``, ``Could not find: libnccl-net.so``, RCCL's
    ``Plugin load (librccl-net.so) returned 2``) is the plugin asked for:
    where the transport asked (``t``, given or the site's) is a plugin
    transport, the default name is where the plugin is looked for (Frontier
    installs aws-ofi-rccl as ``librccl-net.so``), so a rank that did not
    find it and loaded none (no "Loaded net plugin", no ``NET/OFI`` line,
    no plugin network named) ran without the plugin asked.  Where nothing
    asked for a plugin the probe is no request (:func:`asked_from_log`)."""
    if t is None or t.builtin or not t.uses_network:
        return False
    if ev.plugin_name or any(r.ofi_seen or r.plugin_loaded or
                             r.fell_back_line for r in ev.ranks.values()):
        return False
    return any(r.not_found_line for r in ev.ranks.values())


def _no_channel_fallback(asked, t, ev):
    """A proof from ranks that connected no channel but show where NCCL
    went (a plugin that failed to start, ``Using network Socket``,
    ``NET/OFI`` lines only), or None when none shows anything."""
    probe = _default_probe_asked(t, ev)
    if not ev.plugin_asked and not probe:
        # NCCL's "Using network IB" alone is its choice at init, not a
        # connection: a fallback without channels only where the log shows
        # the plugin asked for failing or not found
        return None
    one = ev.nranks_seen == 1
    if one and (t is not None and not t.uses_network or not any(
            r.not_found_line or r.fell_back_line for r in ev.ranks.values())):
        # one rank connects nothing: it needs no network, and only the
        # plugin it asks for not found or failing shows where NCCL went
        return None
    shown = [r for r in ev.ranks.values() if not r.via and r.networks]
    if ev.plugin_asked or probe:
        # the plugin asked for was not found: NCCL's own network instead
        for r in ev.ranks.values():
            if not r.via and not r.networks and r.not_found_line:
                r.fell_back_line = r.not_found_line
                shown.append(r)
    if not shown:
        return None
    mixed = _mixed(ev)
    fell = [r for r in shown if r.networks & set(BUILTIN_NETS)]
    if not fell:
        return None
    proven = 'net-ib' if all(r.networks == {'IB'} for r in fell) \
        else 'net-socket'
    if t is not None and t.network == transports.get(proven).network:
        # the network asked for (GPUDirect RDMA or not shows only on the
        # channel lines there are none of)
        return None
    line = next((r.fell_back_line or r.not_found_line for r in fell
                 if r.fell_back_line or r.not_found_line), None)
    if line is None and probe:
        # the probe printed by a rank whose "Using network" line the
        # window cut: still the line that shows no plugin was found
        line = next(r.not_found_line for r in ev.ranks.values()
                    if r.not_found_line)
    why = f': {line}' if line else ''
    named = sorted({r.using_network for r in fell if r.using_network})
    if probe and not ev.plugin_asked:
        why += (f' (no plugin was loaded: {t.name} is asked, and NCCL\'s '
                f'probe of its default plugin name, where a site installs '
                f'its plugin, found none)')
    head = (mixed + '; ' if mixed else
            f'fell back to {transports.get(proven).title} on '
            f'{len(fell)} rank(s) ({_labels(fell)}){why}; ')
    if named:
        head += f'the network in use is the one NCCL named at init ' \
            f'("Using network {", ".join(named)}"); '
    return Proof(asked, proven, False, head + (
        'no channel lines (one rank: it connected nothing)' if one else
        'no channel lines (the run stopped before its channels were '
        'connected, or the log was cut)'))


def _run_line(sub):
    """What one run shows, read from its own evidence ``sub``
    (:func:`ccl_health.evidence.debuglog.run_evidence`, the evidence its
    proof is made from): its channels, else the networks named."""
    via = sub.via
    nets = sorted({n for r in sub.ranks.values() for n in r.networks})
    return (_describe(via) if via else
            'network ' + ', '.join(nets) + ' named, no channel line'
            if nets else 'no channel line')


def _table_run(ev, table, table_source):
    """Which of ``ev.runs`` printed the output ``table`` (its rank lines'
    ``Pid``, host and pid or pid alone; else the run whose NCCL lines are
    in the output, ``table_source``): ``(index, how)``, or ``(None, why
    not)``."""
    runs = ev.runs
    procs = [(h, p) for h, p in zip(getattr(table, 'rank_hosts', None) or [],
                                    getattr(table, 'rank_pids', None) or [])
             if p is not None]
    if procs:
        keys = {f'{h}:{p}' for h, p in procs}
        hit = [i for i, ks in enumerate(runs) if keys & set(ks)]
        if not hit:
            pids = {p for _, p in procs}
            hit = [i for i, ks in enumerate(runs)
                   if pids & {ev.ranks[k].pid for k in ks}]
        if len(hit) == 1:
            return hit[0], (f'the output\'s rank lines name its processes '
                            f'(Pid {procs[0][1]} on {procs[0][0]})')
    if table_source:
        hit = [i for i, ks in enumerate(runs)
               if any(table_source in ev.ranks[k].files for k in ks)]
        if len(hit) == 1:
            return hit[0], 'its NCCL lines are the output\'s'
    if table is None or not (getattr(table, 'rows', None) or procs or
                             getattr(table, 'rank_hosts', None)):
        return None, ('nothing tells which run is the one judged (no '
                      'nccl-tests / rccl-tests table among the files)')
    return None, ('nothing tells which run the output\'s table belongs to '
                  '(its rank lines name no process of one run alone)')


def _prove_runs(asked, ev, nodes, expected_ranks, table, table_source):
    """The proof of a log that holds several runs: each run proven alone
    (the same :func:`prove` on its own lines); the paste's proof is the
    proof of the run the output's table belongs to where that can be told,
    else could-not-check naming what each run shows (never a pass from a
    mix)."""
    told, how = _table_run(ev, table, table_source)
    per, shown = [], []
    for i, keys in enumerate(ev.runs):
        sub = debuglog.run_evidence(ev, keys)
        shown.append(_run_line(sub))
        mine = i == told
        own_nodes = nodes if mine else \
            (len(sub.hosts) or sub.nnodes_seen or 1)
        proof = prove(asked, sub, nodes=own_nodes,
                      expected_ranks=expected_ranks if mine else None)
        per.append(RunProof(i + 1, sorted(keys), list(sub.hosts),
                            sub.nranks_seen, mine, proof))
    parts = []
    for r, keys, line in zip(per, ev.runs, shown):
        hosts = sorted({k.rsplit(':', 1)[0] for k in keys})
        p = r.proof
        said = (f'proven {p.proven}' if p.ok else
                f'{p.proven}, not {p.asked} as asked' if p.proven else
                'not proven')
        parts.append(f'run {r.number} on {", ".join(hosts[:3])}'
                     f'{", ..." if len(hosts) > 3 else ""} ({len(keys)} '
                     f'process(es)): {line}, {said}')
    held = (f'the log holds {len(per)} separate runs (communicators that '
            f'share no rank): ' + '; '.join(parts))
    if told is not None:
        p = per[told].proof
        return Proof(p.asked, p.proven, p.ok,
                     f'{p.reason} (run {told + 1} of {len(per)}, the '
                     f'output\'s: {how}; {held})', runs=per)
    asks = {r.proof.asked for r in per}
    return Proof(asked or (asks.pop() if len(asks) == 1 else None), None,
                 False, f'{held}: the transport is not proven for one run: '
                 f'{how}; give each run\'s log alone', runs=per)


def _gdr_off(t, ev):
    """Where GPUDirect RDMA was asked (``t``) and the log says it was
    turned off ("disabling GDR", "GPU Direct RDMA Disabled for HCA"), that
    line, as a clause; else ''."""
    if t is None or not t.needs_gdr or not ev.gdr_off_reason:
        return ''
    return f'; GPUDirect RDMA was turned off: {ev.gdr_off_reason}'


def _missing_ranks(ev, expected):
    """The ranks of ``expected`` (a count, or rank ids) that printed no
    channel line, as a sorted list; None when the log names no rank ids
    (the count of ranks with channels is then compared)."""
    want = set(range(expected)) if isinstance(expected, int) else \
        {int(x) for x in expected}
    seen = ev.channel_rank_ids
    if seen:
        return sorted(want - seen)
    with_via = [r for r in ev.ranks.values() if r.via]
    if len(with_via) >= len(want):
        return []
    return sorted(want)[len(with_via):]


def prove(asked, ev, nodes=1, expected_ranks=None, table=None,
          table_source=None):
    """Compare the transport ``asked`` for (a name of
    :data:`ccl_health.sitedata.transports.NAMES`, or its record; None: what the log says
    was asked, :func:`asked_from_log`, else what it proves) on a run of
    ``nodes`` nodes with what the evidence shows, by the rule of its record
    in :mod:`ccl_health.sitedata.transports`.  ``expected_ranks`` (a count,
    or rank ids): every one of them must show channel lines, else the proof
    is not complete (could-not-check) unless it shows a fallback.  The
    reason is one line that a person can act on.

    A log that holds several runs (:attr:`ccl_health.evidence.debuglog.
    Evidence.runs`) is proven run by run (:func:`_prove_runs`): ``table``
    (the output's parsed result: its rank lines' hosts and pids) and
    ``table_source`` (the output's name, where its NCCL lines were read)
    tell which run the output is."""
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise CclHealthError(f'nodes: expected a whole number >= 1, '
                             f'got {nodes!r}')
    if len(getattr(ev, 'runs', None) or []) > 1:
        return _prove_runs(asked, ev, nodes, expected_ranks, table,
                           table_source)
    from_log = None
    if asked is None:
        asked = from_log = asked_from_log(ev)
    if asked is None:
        asked = ev.proven()
        if asked == 'intra' and _nodes(ev, nodes) > 1:
            return Proof(None, None, False, _no_net_lines(ev, nodes))
        if asked is None:
            said = sorted({n for r in ev.ranks.values() for n in r.networks})
            shown = (f' (they name {", ".join(said)}, but show no '
                     f'connection)' if said else '')
            return Proof(None, None, False,
                         'the transport is not proven: no channel lines in '
                         'the debug logs, and they do not say what was '
                         'asked' + shown)
    kept_on = not any(ev.env.get(k) == '1' for k in ('NCCL_P2P_DISABLE',
                                                      'NCCL_SHM_DISABLE'))
    if from_log and nodes == 1 and kept_on and ev.proven() == 'intra':
        # a plugin in the environment of a one-node run that kept P2P/SHM
        # on: NCCL needs no network there, and that is no fallback
        proof = _prove(transports.get('intra'), ev, nodes)
        proof.reason += (f' (the log asks for {from_log}: '
                         f'{_asked_why(ev, from_log)}; this one-node run '
                         f'kept P2P/SHM on, so no network was needed)')
        return _every_rank(proof, ev, expected_ranks)
    proof = _prove(transports.get(asked), ev, nodes)
    if from_log:
        proof.reason += f' (asked {from_log}: {_asked_why(ev, from_log)})'
    return _every_rank(proof, ev, expected_ranks)


def _nodes(ev, nodes):
    """The nodes of the run: those given, or more where the log's own
    init lines say so ("nRanks 16 nNodes 4", NCCL's count of host hashes):
    a run of several nodes whatever channel lines the log happens to show,
    never intra-node by their absence."""
    return max(nodes, getattr(ev, 'nnodes_seen', None) or 1)


def _no_net_lines(ev, nodes):
    return (f'{_nodes(ev, nodes)}-node run but no network channel understood '
            f'in the log ({_describe(ev.via)}): the network transport is not '
            f'proven')


def _every_rank(proof, ev, expected_ranks):
    """``proof``, or could-not-check where a rank of ``expected_ranks``
    shows no channel line."""
    if expected_ranks is not None and proof.ok:
        missing = _missing_ranks(ev, expected_ranks)
        if missing:
            n = expected_ranks if isinstance(expected_ranks, int) else \
                len(expected_ranks)
            ids = ', '.join(map(str, missing[:8])) + \
                (', ...' if len(missing) > 8 else '')
            return Proof(proof.asked, None, False,
                         f'{len(missing)} of {n} ranks show no channel line '
                         f'(rank {ids}): their transport is not proven '
                         f'(every rank must show it; {proof.reason})')
    return proof


def _prove(t, ev, nodes):
    asked = t.name
    proven = ev.proven()
    if not ev.files and not ev.nccl_lines and not ev.versions:
        return Proof(asked, None, False,
                     'no NCCL debug log was written (NCCL_DEBUG_FILE): '
                     'cannot prove the transport')
    seen = _describe(ev.via)
    if not t.uses_network and nodes > 1:
        return Proof(asked, proven, False,
                     f'intra-node transport asked for a {nodes}-node run: '
                     f'ranks on different nodes cannot be connected '
                     f'without a network ({seen})')
    if ev.unparsed:
        return Proof(asked, proven, False,
                     f'{len(ev.unparsed)} channel line(s) not understood, '
                     f'cannot prove the transport: {ev.unparsed[0][:200]}')
    if proven is None:
        fb = _no_channel_fallback(asked, t, ev)
        if fb is not None:
            return fb
        named = sorted({r.using_network for r in ev.ranks.values()
                        if r.using_network} | ({ev.using_network} if
                                               ev.using_network else set()))
        if named:
            return Proof(asked, None, False,
                         f'no channel line in the log (NCCL named network '
                         f'{", ".join(named)} at init, and no connection is '
                         f'shown): the transport is not proven'
                         f'{_gdr_off(t, ev)}')
        # a pasted window may end before the channels: say both
        return Proof(asked, None, False,
                     'no channel was connected in the log (no "via" lines in '
                     'the NCCL debug log): the run stopped before NCCL set up '
                     'its transports, or the log was cut before them' +
                     _gdr_off(t, ev))
    if _nodes(ev, nodes) > 1 and not ev.net_paths and t.uses_network:
        return Proof(asked, None, False, _no_net_lines(ev, nodes))
    if nodes > 1 and ev.hosts and len(ev.hosts) < nodes:
        return Proof(asked, None, False,
                     f'{nodes}-node run but debug logs from only '
                     f'{len(ev.hosts)} host(s) ({", ".join(ev.hosts[:4])}): '
                     f'the other nodes\' ranks are not proven')
    p = transports.get(proven)
    if not t.uses_network:
        if p is t:
            return Proof(asked, proven, True, f'{t.passed} ({seen})')
        return Proof(asked, proven, False,
                     f'asked for intra-node but NCCL went over the network '
                     f'({seen})')
    if not p.uses_network:
        return Proof(asked, proven, False,
                     f'asked for {asked} but no channel used the network '
                     f'({seen}): P2P/SHM were not disabled')
    mixed = _mixed(ev)
    if mixed:
        return Proof(asked, proven, False, mixed)
    if t.builtin:
        return _prove_builtin(t, p, ev, seen)
    return _prove_plugin(t, p, ev, seen)


def _prove_builtin(t, p, ev, seen):
    """``t`` one of NCCL's builtin networks, ``p`` what the channels
    prove."""
    paths = ev.net_paths
    if p.network == t.network and all(t.accepts_path(k) for k in paths):
        total = sum(paths.values())
        on = sum(n for k, n in paths.items() if k.endswith('/GDRDMA'))
        if total and on == total:
            gdr = ', GPUDirect RDMA on every path'
        elif t.network != 'IB' or not total:
            gdr = ''
        elif on == 0:
            # said, not judged: the site's transport decides what it needs
            gdr = ', without GPUDirect RDMA on any path'
        else:
            gdr = (f', GPUDirect RDMA on {on} of {total} network channel '
                   f'lines')
        return Proof(t.name, p.name, True, f'{t.passed}{gdr} ({seen})')
    if p.network == t.network:
        # the network asked for, without GPUDirect RDMA on every channel
        return _gdr_lost(t, p, ev, seen, f'{p.title} ran')
    if p.builtin and transports.order(p.name) < transports.order(t.name):
        # a weaker builtin network: sockets instead of IB
        why = (f': {ev.ib_off_reason}' if t.network == 'IB' and
               ev.ib_off_reason else '')
        return Proof(t.name, p.name, False,
                     f'fell back to {p.title} instead of {t.title} '
                     f'({seen}){why}')
    if p.builtin:
        # a stronger one: NCCL prefers IB to sockets where there is IB
        return Proof(t.name, p.name, False,
                     f'asked for {t.title} but NCCL used {p.title} ({seen}):'
                     f' the site\'s environment of {t.name} does not keep '
                     f'NCCL off {p.title}')
    plugin = ev.plugin_name
    return Proof(t.name, p.name, False,
                 f'asked for {t.title} but NCCL used '
                 f'{f"the plugin {plugin}" if plugin else "a plugin"} '
                 f'({seen}): a plugin was loaded (NCCL_NET_PLUGIN)')


#: why NCCL's builtin IB finds no GPUDirect RDMA for an HCA
#: (src/transport/net_ib: ncclIbGdrSupport() looks for the kernel module,
#: /sys/module/nvidia_peermem or the older nv_peer_mem's
#: /sys/kernel/mm/memory_peers/nv_mem; ncclIbDmaBufSupport() for DMA-BUF;
#: src/graph/topo.cc then logs "NET/IB : GPU Direct RDMA Disabled for HCA")
IB_GDR_HINT = ('NCCL found no GPUDirect RDMA support for the HCA: is the '
               'nvidia_peermem module loaded (/sys/module/nvidia_peermem), '
               'or DMA-BUF available?')


def _gdr_lost(t, p, ev, seen, what):
    """A transport that needs GPUDirect RDMA on every network channel
    (``t``) that ran without it on some (``p``): a fallback, with the
    log's reason (and, for NET/IB, what to look at)."""
    nets = ev.net_paths
    off = sum(n for k, n in nets.items() if not k.endswith('/GDRDMA'))
    why = f': {ev.gdr_off_reason}' if ev.gdr_off_reason else ''
    if t.network == 'IB' and (not ev.gdr_off_reason or
                              'for HCA' in ev.gdr_off_reason):
        why += f'{"; " if why else ": "}{IB_GDR_HINT}'
    return Proof(t.name, p.name, False,
                 f'{what} without GPUDirect RDMA on {off} of '
                 f'{sum(nets.values())} network channels ({seen}){why}')


def _prove_plugin(t, p, ev, seen):
    """``t`` a transport over the net plugin, ``p`` what the channels
    prove."""
    if p.builtin:
        why = (f'; the plugin did not load: {ev.plugin_failure}'
               if ev.plugin_failure else
               f'; plugin {ev.plugin_loaded} loaded but NCCL did not use it'
               if ev.plugin_loaded else
               '' if ev.plugin_name else '; no "Loaded net plugin" line')
        return Proof(t.name, p.name, False,
                     f'fell back to {p.title} instead of the plugin '
                     f'({seen}){why}{_gdr_off(t, ev)}')
    plugin = ev.plugin_name
    if not plugin:
        return Proof(t.name, p.name, False,
                     f'network {seen} used but no "Loaded net plugin" line '
                     f'in the log')
    said = {r.using_network for r in ev.ranks.values()} | {ev.using_network}
    named = ('' if ev.plugin_loaded or said - {None, *BUILTIN_NETS} else
             '; the plugin is named by its channel lines (no "Loaded net '
             'plugin" line in this part of the log)')
    if not t.needs_gdr or p.needs_gdr:
        return Proof(t.name, p.name, True,
                     f'{t.passed.format(plugin=plugin)} ({seen}){named}')
    return _gdr_lost(t, p, ev, seen, f'plugin {plugin} ran')
