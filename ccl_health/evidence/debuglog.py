"""Which transport did NCCL/RCCL really use?  Read it from the
``NCCL_DEBUG=INFO`` log (``NCCL_DEBUG_FILE``, one file per rank) and compare it
with the transport that was asked for.  Versions of everything involved are
read from the same lines.

The lines read, as NCCL 2.3-2.30 and RCCL (ROCm 5.x-7.x) print them:

* the logger prefix ``host:pid:tid [dev] NCCL INFO`` (src/debug.cc), which
  tells the ranks (processes) of one combined log apart;
* channel connections (src/transport/{net,p2p,shm,coll_net}.cc):
  ``Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/<net>/<dev>[(proxy)]
  [/GDRDMA][(PCI)][/Shared]``, ``... via P2P/IPC|CUMEM|direct pointer|
  indirect/..[/read][/CE]``, ``Channel %02d : ... via SHM/direct/direct``,
  ``CollNet %02d/%d : %d [send] via COLLNET/...``; the older ``Ring %02d :``,
  ``Channel %02d :``, ``Coll %02d :`` and ``via direct shared memory`` forms;
  RCCL appends `` comm %p nRanks %02d``;
* net plugin loading (src/net.cc before 2.26, src/plugin/ since): a
  ``Failed to find ncclNetPlugin_vN symbol.`` followed by ``Loaded net plugin
  <name> (vM)`` is a load; ``No plugin found``, ``Could not find:``, ``Plugin
  load returned``, ``Failed to initialize NET plugin <name>`` are failures;
  ``Using network <name>`` names the network of the communicator;
* aws-ofi-nccl / aws-ofi-rccl (``NET/OFI ...``): versions, provider and the
  reasons GPUDirect RDMA is off.
"""

import dataclasses
import glob
import os
import re
from typing import Dict, List, Optional

from ccl_health import CclHealthError
from ccl_health.sitedata import transports
from ccl_health.sitedata.transports import BUILTIN_NETS  # noqa: F401 (part of this API)

#: ``host:pid:tid [dev]`` before ``NCCL INFO`` / ``<file>:<line> NCCL WARN``
#: / ``<time> <file>:<line> NCCL TRACE``; a launcher's prefix
#: (``[1,0]<stdout>:``, ``0: ``) or a timestamp may come before it.
_PREFIX = re.compile(r'([^\s:\[\]]+):(\d+):\d+ \[\d+\] (?:\S+ ){0,2}'
                     r'[NR]CCL (?:INFO|WARN|TRACE) ')
_CHANNEL = re.compile(r'\b(?:Channel|Ring|CollNet|Coll) \d+(?:/\d+)? : '
                      r'(?:.*?) via (.+?)(?: comm \S+ nRanks \d+)?\s*$')
_NET_PATH = re.compile(r'(NET|COLLNET)/(.+?)/(\d+)(?:\(\d+\))?'
                       r'((?:/[A-Za-z]\w*|\([A-Za-z]+\))*)$')
_P2P_PATH = re.compile(r'P2P/([^/]+)(?:/.*)?$')
_SHM_PATH = re.compile(r'SHM/(\w+)/\w+$|(direct) shared memory$')

_PATTERNS = {
    'nccl_version': re.compile(r'\bNCCL version\s*:?\s*(\d[^\s,]*)'),
    'rccl_version': re.compile(r'\bRCCL version\s*:?\s*(\d[^\s,]*)'),
    'hip_version': re.compile(r'\bHIP version\s*:?\s*(\d\S*)'),
    'rocm_version': re.compile(r'\bROCm version\s*:?\s*(\d\S*)'),
    'plugin_version': re.compile(r'NET/OFI (?:Initializing|Using) '
                                 r'aws-ofi-[nr]ccl (\S+)'),
    'plugin_package': re.compile(r'NET/OFI (?:Initializing|Using) '
                                 r'(aws-ofi-[nr]ccl) '),
    'libfabric_version': re.compile(r'NET/OFI Using Libfabric version (\S+)'),
    'provider': re.compile(r'NET/OFI Selected [Pp]rovider is ([^,\s]+)'),
    'cuda_driver': re.compile(r'(?:cudaDriverVersion |Using CUDA driver '
                              r'version )(\d+)'),
    'hip_driver': re.compile(r'(?:hipDriverVersion |HIP driver version )'
                             r'(\d+)'),
}
_USING_NETWORK = re.compile(r'\bUsing network (.+?)\s*$')
# a net plugin that loaded, by name (2.28+ also says "Initialized" and
# "Assigned NET plugin <name>", for the built-in nets as well)
_PLUGIN_LOADED = re.compile(
    r'NET/Plugin\s*:?\s*Loaded net plugin (.+?)(?: \(v\d+\))?\s*$'
    r'|(?:Initialized|Assigned) NET plugin (.+?)(?: to comm)?\s*$')
_PLUGIN_FAILED = re.compile(
    r'Failed to initialize NET plugin (.+?)\s*$'
    r'|External network plugin (.+?) is unsupported')
_PLUGIN_LINE = re.compile(r'NET/Plugin\s*:?\s*(.*?)\s*$')
_PLUGIN_FAIL_WORDS = re.compile(
    r'[Ff]ail|[Cc]ould not|No plugin found|returned|dlerror|cannot|'
    r'internal (?:network plugin|implementation)|not supported|unsupported|'
    r'\.so\S*: ')
# the probe of one API version: not a failure when a load follows
_PROBE = re.compile(r'Failed to find ncclNet(?:Plugin)?_v\d+ symbol')
_COLLNET = re.compile(r'[Cc]oll(?:Net)?(?:Plugin| plugin)|collnet plugin')
_GDR_OFF = re.compile(r'(?:NET/OFI )?(.*(?:GDR not supported|disabling GDR|'
                      r'GPU ?Direct RDMA Disabled|[Nn]ot using GPUDirect).*?)'
                      r'\s*$')
# why NCCL's builtin IB network is not there (src/transport/net_ib.cc:
# "NET/IB : No device found.", WARN "NET/IB : No IP interface found.",
# "Unable to open/query device"; src/misc/param.cc for the switch)
_IB_OFF = re.compile(r'(NET/IB : (?:No device found|No IP interface found|'
                     r'Unable to (?:open|query) (?:device|port)).*?'
                     r'|NCCL_IB_DISABLE set by environment to 1)\.?\s*$')
_WARN = re.compile(r'[NR]CCL WARN (.*)$')
_INFO_TEXT = re.compile(r'[NR]CCL (?:INFO|WARN) (.*)$')


@dataclasses.dataclass
class RankEvidence:
    """What the lines of one rank say: one ``host:pid`` of the logger
    prefix, or one file (or text) whose lines carry no prefix."""
    key: str
    files: List[str] = dataclasses.field(default_factory=list)
    via: Dict[str, int] = dataclasses.field(default_factory=dict)
    plugin_loaded: Optional[str] = None
    plugin_failures: List[str] = dataclasses.field(default_factory=list)
    failures_since_load: List[str] = dataclasses.field(default_factory=list)
    using_network: Optional[str] = None
    gdr_off_reason: Optional[str] = None
    #: why NCCL's builtin IB network was not there ("NET/IB : No device
    #: found")
    ib_off_reason: Optional[str] = None

    @property
    def label(self):
        """The rank's files (base names), or its ``host:pid``."""
        if self.files:
            return ','.join(os.path.basename(f) for f in self.files)
        return self.key

    @property
    def plugin_failure(self):
        """Why the plugin did not load (None if it did and nothing failed
        after): the first failure that is not the probe of one API version,
        else the first failure."""
        fails = (self.failures_since_load if self.plugin_loaded
                 else self.plugin_failures)
        hard = [f for f in fails if not _PROBE.search(f)]
        return (hard or fails or [None])[0]

    @property
    def net_paths(self):
        return _net_paths(self.via)

    @property
    def networks(self):
        """The networks this rank used: the names on its ``via NET/`` lines,
        or (a rank without network channels) its "Using network"."""
        names = {k.split('/')[1] for k in self.net_paths}
        if not names and self.using_network:
            names = {self.using_network}
        return names


def _net_paths(via):
    return {k: n for k, n in via.items() if k.startswith('NET/')}


def _intra_paths(via):
    return {k: n for k, n in via.items() if k.startswith(('P2P', 'SHM'))}


def _proven(via):
    """The name of the transport the channel keys ``via`` prove (the
    registry's rule, :func:`ccl_health.sitedata.transports.proven_by`); where ranks
    or channels differ, the weakest of them (sockets < builtin IB < plugin
    < plugin with GPUDirect RDMA on every path)."""
    t = transports.proven_by(list(via))
    return t.name if t else None


@dataclasses.dataclass
class Evidence:
    """What the debug logs of one run say: the whole run, and per rank in
    ``ranks`` (keyed by ``host:pid``, or by file where lines carry no
    logger prefix)."""
    files: List[str] = dataclasses.field(default_factory=list)
    via: Dict[str, int] = dataclasses.field(default_factory=dict)
    versions: Dict[str, str] = dataclasses.field(default_factory=dict)
    plugin_loaded: Optional[str] = None
    plugin_failure: Optional[str] = None
    using_network: Optional[str] = None
    gdr_off_reason: Optional[str] = None
    ib_off_reason: Optional[str] = None
    warnings: List[str] = dataclasses.field(default_factory=list)
    ranks: Dict[str, RankEvidence] = dataclasses.field(default_factory=dict)
    #: channel lines ("... via ...") whose path was not understood
    unparsed: List[str] = dataclasses.field(default_factory=list)
    #: host names of the logger prefixes
    hosts: List[str] = dataclasses.field(default_factory=list)
    #: how many NCCL/RCCL log lines were read
    nccl_lines: int = 0

    @property
    def plugin_name(self):
        """The plugin NCCL loaded: its "Loaded net plugin" line, or (NCCL
        before 2.12, and the newest plugin API of 2.18-2.23, printed none)
        a "Using network" that is not built in."""
        if self.plugin_loaded:
            return self.plugin_loaded
        for rank in self.ranks.values():
            if rank.using_network and rank.using_network not in BUILTIN_NETS:
                return rank.using_network
        if self.using_network and self.using_network not in BUILTIN_NETS:
            return self.using_network
        return None

    @property
    def net_paths(self):
        return _net_paths(self.via)

    @property
    def intra_paths(self):
        return _intra_paths(self.via)

    def proven(self):
        """The transport these logs prove (a name of
        :data:`ccl_health.TRANSPORTS`), or None when no channel was
        connected."""
        return _proven(self.via)


def read_evidence(paths):
    """Read the debug log files ``paths`` (or a glob pattern)."""
    if isinstance(paths, str):
        paths = sorted(glob.glob(paths))
    ev = Evidence(files=list(paths))
    for path in paths:
        with open(path, errors='replace') as fp:
            feed_lines(ev, fp, source=path)
    return ev


def evidence_from_text(text):
    """Evidence from one text (a combined log, or a job's output with the
    debug lines in it); ranks are told apart by the logger prefix."""
    ev = Evidence()
    feed_lines(ev, text.splitlines())
    return ev


def _rank(ev, m, source):
    key = f'{m.group(1)}:{m.group(2)}' if m else (source or '(log)')
    rank = ev.ranks.get(key)
    if rank is None:
        rank = ev.ranks[key] = RankEvidence(key)
    if source and source not in rank.files:
        rank.files.append(source)
    if m and m.group(1) not in ev.hosts:
        ev.hosts.append(m.group(1))
    return rank


def _channel_key(path):
    """The key of a channel path (``NET/<name>[/GDRDMA]``, ``P2P/<kind>``,
    ``SHM/<kind>``, ``COLLNET/<name>[/GDRDMA]``), None if not understood."""
    m = _NET_PATH.match(path)
    if m:
        kind, name, _dev, flags = m.groups()
        return f'{kind}/{name}' + ('/GDRDMA' if '/GDRDMA' in flags else '')
    m = _P2P_PATH.match(path)
    if m:
        return f'P2P/{m.group(1)}'
    m = _SHM_PATH.match(path)
    if m:
        return f'SHM/{m.group(1) or m.group(2)}'
    return None


def feed_lines(ev, lines, source=None):
    """Add ``lines`` (of the file ``source``, if any) to ``ev``."""
    for line in lines:
        if 'CCL' not in line and 'version' not in line:
            continue
        line = line.rstrip('\n')
        for key, rx in _PATTERNS.items():
            m = rx.search(line)
            if m:
                ev.versions.setdefault(key, m.group(1).strip())
        if 'CCL' not in line:
            continue
        ev.nccl_lines += 1
        pm = _PREFIX.search(line)
        m = _CHANNEL.search(line)
        if m:
            rank = _rank(ev, pm, source)
            key = _channel_key(m.group(1).strip())
            if key is None:
                if len(ev.unparsed) < 20:
                    ev.unparsed.append(line.strip())
                continue
            ev.via[key] = ev.via.get(key, 0) + 1
            rank.via[key] = rank.via.get(key, 0) + 1
            continue
        tm = _INFO_TEXT.search(line)
        text = tm.group(1) if tm else line
        _feed_plugin(ev, text, pm, source)
        m = _USING_NETWORK.search(text)
        if m:
            ev.using_network = _rank(ev, pm, source).using_network = \
                m.group(1)
        m = _GDR_OFF.search(text)
        if m and not text.startswith('NET/Socket'):   # sockets never do GDR
            rank = _rank(ev, pm, source)
            if rank.gdr_off_reason is None:
                rank.gdr_off_reason = m.group(1)
        m = _IB_OFF.search(text)
        if m:
            rank = _rank(ev, pm, source)
            if rank.ib_off_reason is None:
                rank.ib_off_reason = m.group(1)
        m = _WARN.search(line)
        if m and len(ev.warnings) < 20:
            ev.warnings.append(m.group(1).strip())
    _aggregate(ev)


def _feed_plugin(ev, text, pm, source):
    """Net plugin loads and failures of one line ``text``."""
    if _COLLNET.search(text):
        return           # the CollNet half of a plugin is optional
    m = _PLUGIN_LOADED.search(text)
    if m:
        name = (m.group(1) or m.group(2)).strip()
        if name not in BUILTIN_NETS:
            rank = _rank(ev, pm, source)
            rank.plugin_loaded = name
            rank.failures_since_load = []
        return
    m = _PLUGIN_FAILED.search(text)
    if m:
        name = (m.group(1) or m.group(2)).strip()
        if name not in BUILTIN_NETS:
            rank = _rank(ev, pm, source)
            rank.plugin_failures.append(text.strip())
            rank.failures_since_load.append(text.strip())
        return
    m = _PLUGIN_LINE.search(text)
    if m and _PLUGIN_FAIL_WORDS.search(m.group(1)) \
            and 'Plugin name set by env' not in text:
        rank = _rank(ev, pm, source)
        rank.plugin_failures.append(m.group(1))
        rank.failures_since_load.append(m.group(1))


def _aggregate(ev):
    ranks = list(ev.ranks.values())
    ev.plugin_loaded = next((r.plugin_loaded for r in ranks
                             if r.plugin_loaded), None)
    ev.plugin_failure = next((r.plugin_failure for r in ranks
                              if r.plugin_failure), None)
    ev.gdr_off_reason = next((r.gdr_off_reason for r in ranks
                              if r.gdr_off_reason), None)
    ev.ib_off_reason = next((r.ib_off_reason for r in ranks
                             if r.ib_off_reason), None)


@dataclasses.dataclass
class Proof:
    asked: str
    proven: Optional[str]
    ok: bool
    reason: str


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
    for rank in ev.ranks.values():
        nets = rank.networks
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


def prove(asked, ev, nodes=1):
    """Compare the transport ``asked`` for (a name of
    :data:`ccl_health.TRANSPORTS`, or its record) on a run of ``nodes``
    nodes with what the evidence shows, by the rule of its record in
    :mod:`ccl_health.sitedata.transports`.  The reason is one line that a person can
    act on."""
    t = transports.get(asked)
    asked = t.name
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise CclHealthError(f'nodes: expected a whole number >= 1, '
                             f'got {nodes!r}')
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
        return Proof(asked, None, False,
                     'no channel was connected (no "via" lines in the NCCL '
                     'debug log): the run stopped before NCCL set up its '
                     'transports')
    if nodes > 1 and not ev.net_paths:
        return Proof(asked, None, False,
                     f'{nodes}-node run but no network channel understood '
                     f'in the log ({seen})')
    if nodes > 1 and ev.hosts and len(ev.hosts) < nodes:
        return Proof(asked, proven, False,
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
    if p is t:
        gdr = (', GPUDirect RDMA on every path' if
               all(k.endswith('/GDRDMA') for k in ev.net_paths) else '')
        return Proof(t.name, p.name, True, f'{t.passed}{gdr} ({seen})')
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
                     f'({seen}){why}')
    plugin = ev.plugin_name
    if not plugin:
        return Proof(t.name, p.name, False,
                     f'network {seen} used but no "Loaded net plugin" line '
                     f'in the log')
    if not t.needs_gdr or p.needs_gdr:
        return Proof(t.name, p.name, True,
                     f'{t.passed.format(plugin=plugin)} ({seen})')
    nets = ev.net_paths
    off = sum(n for k, n in nets.items() if not k.endswith('/GDRDMA'))
    why = f': {ev.gdr_off_reason}' if ev.gdr_off_reason else ''
    return Proof(t.name, p.name, False,
                 f'plugin {plugin} ran without GPUDirect RDMA on {off} of '
                 f'{sum(nets.values())} network channels ({seen}){why}')


def debug_log_files(directory, pattern='nccl-debug.*.log'):
    return sorted(glob.glob(os.path.join(directory, pattern)))
