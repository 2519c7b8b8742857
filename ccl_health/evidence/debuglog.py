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

from ccl_health.sitedata import transports
from ccl_health.sitedata.transports import BUILTIN_NETS

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
#: a line NCCL's logger wrote, with or without its ``host:pid:tid [dev]``
#: prefix (``[0] NCCL INFO``, a bare ``NCCL INFO`` as users paste them);
#: text that merely names NCCL ("RCCL Test Data", "Test NCCL failure") is
#: not one
_LOG_LINE = re.compile(r'\b[NR]CCL (?:INFO|WARN|TRACE|ERROR)\b')
#: the start of a channel line, to join one that a terminal wrapped
_CHANNEL_START = re.compile(r'\b(?:Channel|Ring|CollNet|Coll) \d+(?:/\d+)? :')
_CONTINUATION = re.compile(r'^[\w/().:\[\]\->, ]+$')
_TABLE_ROW = re.compile(r'^\s*\d+\s+\d+\s+[A-Za-z]')
#: which rank printed a channel line: the receiver of a ``[receive]``
#: line, else the sender
_CHANNEL_RANKS = re.compile(r' : (\d+)\[[^\]]*\] -> (\d+)\[[^\]]*\]'
                            r'(?: \[(send|receive)\])?')
#: "comm 0x.. rank 0 nranks 16 cudaDev 0 ... Init COMPLETE",
#: "ncclCommInitRank comm 0x.. rank 0 nranks 16", "rank 0 nRanks 16 nNodes 2"
_RANK_OF = re.compile(r'\brank (\d+) nranks (\d+)', re.IGNORECASE)
#: "comm %p rank %d nRanks %d nNodes %d localRanks %d" (src/init.cc, NCCL
#: 2.12 and later; RCCL alike): the nodes of the communicator
_NNODES = re.compile(r'\bnRanks (\d+) nNodes (\d+)')
#: "... busId %lx commId 0x%llx - Init START / COMPLETE" (src/init.cc,
#: NCCL 2.1x and later; RCCL alike): the communicator a rank joins
_COMM_ID = re.compile(r'\bcommId (0x[0-9a-fA-F]+)')
#: the environment NCCL echoes: "NCCL_NET set by environment to IB"
_ENV_ECHO = re.compile(r'\b((?:NCCL|RCCL)_\w+) set by environment to (.*?)\s*$')
#: the plugin named by the environment (NCCL 2.2x: "NET/Plugin: Plugin name
#: set by env to libnccl-net.so")
_PLUGIN_ENV = re.compile(r'Plugin name set by env to (\S+)')
#: the other plugin kinds NCCL 2.2x loads with the same messages
#: (src/plugin/plugin_open.cc: "%s/Plugin: Plugin name set by env to %s"
#: for TUNER, PROFILER, ENV, ...): not the net plugin
_OTHER_PLUGIN = re.compile(r'\b(?:TUNER|PROFILER|ENV|GIN)/Plugin\b')
#: a plugin looked for and not found, by the name NCCL tried
_PLUGIN_NOT_FOUND = re.compile(r'(?:No plugin found \(|Could not find:? ?|'
                               r'Plugin load \(|when loading )([^\s()]+)')
#: the names NCCL/RCCL try when nobody asked for a plugin
_DEFAULT_PLUGIN_NAMES = ('libnccl-net.so', 'librccl-net.so', 'nccl-net.so',
                         'libnccl-net-none.so')
#: a plugin that was found and failed to start: it was meant to be used
_PLUGIN_INIT_FAILED = re.compile(r'[Ii]nitiali[sz]ation failed|'
                                 r'Failed to initialize NET plugin|'
                                 r'aws-ofi-[nr]ccl initiali[sz]ation failed')
#: a plugin NCCL found where it looked and could not load: the dynamic
#: loader's error (dlerror, printed after "Plugin load (%s) returned %d :",
#: "dlerror=", "Plugin load returned %d : %s : when loading %s" or NCCL
#: 2.23's "NET/Plugin: %s") names a library the plugin needs ("libfabric.so.1:
#: cannot open shared object file"), a symbol or a glibc version it lacks,
#: or a file that is no loadable library
_LOAD_ERROR = re.compile(r'(\S+?): (?:undefined symbol|wrong ELF class|'
                         r'invalid ELF header|file too short)'
                         r"|version `[^']+' not found \(required by (\S+?)\)")
_CANNOT_OPEN = re.compile(r'(\S+?): cannot open shared object file')
#: a net plugin's own file name (``libnccl-net.so``, ``librccl-net-ofi.so``)
_NET_PLUGIN_FILE = re.compile(r'(?:^|[=/(])lib[nr]ccl-net(?:-[^/\s]*)?\.so'
                              r'(?:\.\d+)*$')
_DLOPEN = re.compile(r'ncclOsDlopen\((\S+?)\) failed: ')
_OFI = re.compile(r'NET/OFI ')
#: NCCL's builtin IB network found its devices
_IB_USING = re.compile(r'NET/IB ?: Using \[\d')
_INFO_TEXT = re.compile(r'[NR]CCL (?:INFO|WARN) (.*)$')
#: a logger prefix inside a line after its own: another process's output
#: written into it, as a launcher forwards each process's output in pieces
#: that need not end with a line ("... NCCL INFO Channhost:4138721:4138721
#: [3] NCCL INFO cudaDriverVersion 12020", "... Using eth0:172.20.91.177<0>
#: host:30486:30486 [3] NCCL INFO Bootstrap ...", "host:40515:40655 [6] NCCL
#: INFO host:40517:40631 [7] NCCL INFO Ring 04 : 7[7] -> 3[3] via P2P/IPC",
#: the first's "Ring 04 : 6[6] -> 5[5] via P2P/IPC" on a line of its own
#: after): what follows a prefix is the output of the process it names
_INNER_PREFIX = re.compile(r'([^\s:\[\]]+):\d+:\d+ \[\d+\] (?:\S+ ){0,2}'
                           r'[NR]CCL (?:INFO|WARN|TRACE) ')


@dataclasses.dataclass
class RankEvidence:
    """What the lines of one rank say: one ``host:pid`` of the logger
    prefix, or one file (or text) whose lines carry no prefix."""
    key: str
    #: the pid of its logger prefix (the process's ``getpid()``); None for
    #: a file whose lines carry no prefix
    pid: Optional[int] = None
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
    #: the rank ids its lines name (channel lines, "rank N nranks M")
    ids: set = dataclasses.field(default_factory=set)
    #: the communicators its init lines name ("commId 0x5ae77eb5ea4ec1ee")
    comm_ids: set = dataclasses.field(default_factory=set)
    #: the versions its own lines print ("NCCL version 2.21.5+cuda12.4")
    versions: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: aws-ofi-nccl / aws-ofi-rccl spoke for this rank ("NET/OFI ...")
    ofi_seen: bool = False
    #: NCCL's builtin IB found devices ("NET/IB : Using [0]mlx5_0:1/IB")
    ib_seen: bool = False
    #: a plugin failed to start here ("aws-ofi-nccl initialization
    #: failed")
    fell_back_line: Optional[str] = None
    #: no plugin was found here ("No plugin found (...), using internal
    #: implementation"): a fallback only where one was asked for
    not_found_line: Optional[str] = None

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
        or (a rank without network channels) its "Using network", else
        what its plugin lines say: a rank seen only through its ``NET/OFI``
        lines used the plugin.  A plugin that failed to start names no
        network by itself: what NCCL used then is unknown until a line says
        it (never sockets by default)."""
        names = {k.split('/')[1] for k in self.net_paths}
        if not names and self.using_network:
            names = {self.using_network}
        if not names and not self.via and not self.fell_back_line and \
                (self.ofi_seen or self.plugin_loaded):
            names = {self.plugin_loaded or 'OFI plugin'}
        return names


def _net_paths(via):
    return {k: n for k, n in via.items() if k.startswith('NET/')}


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
    #: the log's separate runs (:func:`_runs`): rank keys per run, where
    #: the log holds two or more communicators that share no rank
    runs: List[List[str]] = dataclasses.field(default_factory=list)
    warnings: List[str] = dataclasses.field(default_factory=list)
    ranks: Dict[str, RankEvidence] = dataclasses.field(default_factory=dict)
    #: channel lines ("... via ...") whose path was not understood
    unparsed: List[str] = dataclasses.field(default_factory=list)
    #: host names of the logger prefixes
    hosts: List[str] = dataclasses.field(default_factory=list)
    #: how many NCCL/RCCL log lines were read
    nccl_lines: int = 0
    #: the environment NCCL echoed ("NCCL_NET set by environment to IB")
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: the plugin the log says was asked for (the name, or the line that
    #: says so), None when it says none was
    plugin_asked: Optional[str] = None
    #: the rank count the lines name ("rank 0 nranks 16")
    nranks_seen: Optional[int] = None
    #: the node count the lines name ("rank 0 nRanks 16 nNodes 4"): a run
    #: of several nodes whatever channel lines the log happens to show
    nnodes_seen: Optional[int] = None
    #: what was read, in order: ``(source, line)`` of a text, ``(path,
    #: None)`` of a file (read again where needed, not kept): where the
    #: log holds several runs, each run's part is read again from them
    #: (:func:`run_evidence`, :func:`_lines_read`)
    lines: list = dataclasses.field(default_factory=list, repr=False,
                                    compare=False)

    @property
    def versions_by_rank(self):
        """{rank label: {'nccl_version': ..., ...}} for the ranks whose own
        lines print a version (ranks must agree)."""
        return {r.label: dict(r.versions) for r in self.ranks.values()
                if r.versions}

    @property
    def channel_rank_ids(self):
        """The rank ids that printed a channel line."""
        return set().union(*[r.ids for r in self.ranks.values() if r.via]) \
            if self.ranks else set()

    @property
    def plugin_name(self):
        """The plugin NCCL loaded: its "Loaded net plugin" line, or (NCCL
        before 2.12, and the newest plugin API of 2.18-2.23, printed none)
        a "Using network" that is not built in, else the network of its
        channel lines (``via NET/<name>/...`` with a name that is not
        built in: only a plugin prints one)."""
        if self.plugin_loaded:
            return self.plugin_loaded
        for rank in self.ranks.values():
            if rank.using_network and rank.using_network not in BUILTIN_NETS:
                return rank.using_network
        if self.using_network and self.using_network not in BUILTIN_NETS:
            return self.using_network
        return self.plugin_of_channels

    @property
    def plugin_of_channels(self):
        """The one non-builtin network name of the channel lines, else
        None."""
        names = {k.split('/')[1] for k in self.net_paths} - set(BUILTIN_NETS)
        return names.pop() if len(names) == 1 else None

    @property
    def net_paths(self):
        return _net_paths(self.via)

    def proven(self):
        """The transport these logs prove (a name of
        :data:`ccl_health.sitedata.transports.NAMES`), or None when no channel was
        connected."""
        return _proven(self.via)


def read_evidence(paths):
    """Read the debug log files ``paths`` (or a glob pattern)."""
    if isinstance(paths, str):
        paths = sorted(glob.glob(paths))
    ev = Evidence(files=list(paths))
    for path in paths:
        ev.lines.append((path, None))
        with open(path, errors='replace') as fp:
            feed_lines(ev, fp, source=path, keep=False, aggregate=False)
    _aggregate(ev)
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
        rank = ev.ranks[key] = RankEvidence(
            key, pid=int(m.group(2)) if m else None)
    if source and source not in rank.files:
        rank.files.append(source)
    if m and m.group(1) not in ev.hosts:
        ev.hosts.append(m.group(1))
    return rank


def _channel_key(path):
    """The key of a channel path (``NET/<name>[/GDRDMA]``, ``P2P/<kind>``,
    ``SHM/<kind>``, ``COLLNET/<name>[/GDRDMA]``), None if not understood:
    also a path holding another channel's words (`` via ``, `` -> ``: the
    rest of a line cut by a launcher's forwarding, joined to a channel as
    if a terminal had wrapped it), which no path of NCCL's holds."""
    if ' via ' in path or ' -> ' in path:
        return None
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


def _split_merged(line, hosts):
    """``line`` cut before every logger prefix after its first whose host
    name ends with a host of ``hosts`` (those of the lines read before; the
    text glued before it, "Chann" or "<0>", is another process's output):
    each piece the output of the process its prefix names.  A line's own
    host is added to ``hosts``."""
    if 'CCL' not in line:
        return [line]
    cuts = []
    for i, m in enumerate(_INNER_PREFIX.finditer(line)):
        host = m.group(1)
        if not i:
            hosts.add(host)
            continue
        known = [h for h in hosts if host.endswith(h)]
        if known:
            cuts.append(m.end(1) - len(max(known, key=len)))
    if not cuts:
        return [line]
    return [line[a:b] for a, b in zip([0] + cuts, cuts + [len(line)])]


def _unwrap(lines):
    """``lines`` with a channel line that a terminal or a slide wrapped over
    two or three lines joined back: the following lines that are not log
    lines themselves are tried as its continuation, with and without a
    space, and kept when the joined line is understood."""
    hosts = set()
    lines = [part for ln in lines
             for part in _split_merged(ln.rstrip('\n'), hosts)]
    i = 0
    while i < len(lines):
        line = lines[i]
        if _CHANNEL_START.search(line) and _LOG_LINE.search(line):
            best, used = None, 0
            joined = line
            for k in (1, 2):
                if i + k >= len(lines):
                    break
                nxt = lines[i + k].strip()
                if not nxt or 'CCL' in nxt or nxt.startswith('#') or \
                        _TABLE_ROW.match(nxt) or _CHANNEL_START.search(nxt) or \
                        not _CONTINUATION.match(nxt):
                    break
                for sep in ('', ' '):
                    cand = joined.rstrip() + sep + nxt
                    m = _CHANNEL.search(cand)
                    if m and _channel_key(m.group(1).strip()):
                        best, used = cand, k
                        break
                joined = joined.rstrip() + ' ' + nxt
            if best is not None:
                yield best
                i += used + 1
                continue
        yield line
        i += 1


def feed_lines(ev, lines, source=None, keep=True, aggregate=True):
    """Add ``lines`` (of the file ``source``, if any) to ``ev``;
    ``keep``: keep them in ``ev.lines`` (a file's are read again
    instead); ``aggregate``: sum up the ranks now (else the caller does,
    once all is read)."""
    for line in _unwrap(lines):
        if 'CCL' not in line and 'version' not in line:
            continue
        if keep:
            ev.lines.append((source, line))
        pm = _PREFIX.search(line)
        for key, rx in _PATTERNS.items():
            m = rx.search(line)
            if m:
                ev.versions.setdefault(key, m.group(1).strip())
                if pm:
                    _rank(ev, pm, source).versions.setdefault(
                        key, m.group(1).strip())
        if not _LOG_LINE.search(line):
            continue
        ev.nccl_lines += 1
        if pm:
            _rank(ev, pm, source)        # every rank that logged is seen
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
            cm = _CHANNEL_RANKS.search(line)
            if cm:
                rank.ids.add(int(cm.group(2) if cm.group(3) == 'receive'
                                 else cm.group(1)))
            continue
        tm = _INFO_TEXT.search(line)
        text = tm.group(1) if tm else line
        _feed_asked(ev, text, pm, source)
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
    if aggregate:
        _aggregate(ev)


def _feed_asked(ev, text, pm, source):
    """What ``text`` says was asked: the environment NCCL echoes, a plugin
    named, looked for, or found and failed; and what it says of the rank
    (its id, its plugin's ``NET/OFI`` lines, builtin IB devices)."""
    m = _RANK_OF.search(text)
    if m:
        if pm or source:
            _rank(ev, pm, source).ids.add(int(m.group(1)))
        ev.nranks_seen = max(ev.nranks_seen or 0, int(m.group(2)))
    m = _NNODES.search(text)
    if m:
        ev.nnodes_seen = max(ev.nnodes_seen or 0, int(m.group(2)))
    m = _COMM_ID.search(text)
    if m and (pm or source):
        _rank(ev, pm, source).comm_ids.add(m.group(1))
    m = _ENV_ECHO.search(text)
    if m:
        ev.env.setdefault(m.group(1), m.group(2).rstrip('.'))
        if m.group(1) == 'NCCL_NET_PLUGIN' and \
                m.group(2).lower() not in ('none', ''):
            ev.plugin_asked = ev.plugin_asked or m.group(2)
    m = _PLUGIN_ENV.search(text)
    if m and m.group(1).lower() != 'none' and not _OTHER_PLUGIN.search(text):
        ev.plugin_asked = ev.plugin_asked or m.group(1)
    m = _PLUGIN_NOT_FOUND.search(text)
    if m and 'NET/Plugin' in text and \
            not _default_name(m.group(1).rstrip(':,.')):
        ev.plugin_asked = ev.plugin_asked or m.group(1).rstrip(':,.')
    lost = _plugin_load_error(text)
    if lost:
        # the plugin is there and did not load: it was meant to be used
        ev.plugin_asked = ev.plugin_asked or lost
        rank = _rank(ev, pm, source)
        rank.fell_back_line = rank.fell_back_line or text.strip()
    fm = _PLUGIN_FAILED.search(text)
    builtin = fm is not None and (fm.group(1) or fm.group(2) or '').strip() \
        in BUILTIN_NETS        # 2.28: "Failed to initialize NET plugin IB"
    if _PLUGIN_INIT_FAILED.search(text) and not _COLLNET.search(text) and \
            not builtin:
        ev.plugin_asked = ev.plugin_asked or text.strip()
        rank = _rank(ev, pm, source)
        rank.fell_back_line = rank.fell_back_line or text.strip()
    elif ('No plugin found' in text or 'Could not find' in text) and \
            'NET/Plugin' in text and not _COLLNET.search(text):
        rank = _rank(ev, pm, source)
        rank.not_found_line = rank.not_found_line or text.strip()
    if _OFI.search(text):
        _rank(ev, pm, source).ofi_seen = True
    if _IB_USING.search(text):
        _rank(ev, pm, source).ib_seen = True


def _default_name(name):
    """Whether ``name`` (a plugin name NCCL looked for) is one of the names
    NCCL / RCCL try when nobody asked for a plugin, or the start of one: a
    pasted line wrapped in the name (``when loading libnccl-`` / ``net.so``)
    asks for nothing."""
    return any(d.startswith(name) for d in _DEFAULT_PLUGIN_NAMES)


def _plugin_load_error(text):
    """The net plugin that NCCL found and could not load, as ``text`` names
    it (the name it tried, else the file the loader names), or None where
    the line shows no such failure: a plugin name not found is
    ``libnccl-net-ofi.so: cannot open shared object file``, the plugin's
    own name; a plugin found names another library or a symbol."""
    dl = _DLOPEN.search(text)
    if dl and not _NET_PLUGIN_FILE.search(dl.group(1)):
        return None       # NCCL 2.28 opening its env / tuner / GIN plugin
    if not dl and ('NET/Plugin' not in text or _COLLNET.search(text) or
                   _OTHER_PLUGIN.search(text)):
        return None
    tried = _PLUGIN_NOT_FOUND.search(text) or dl
    tried = tried.group(1).rstrip(':,.') if tried else None
    m = _LOAD_ERROR.search(text)
    if m:
        return tried or m.group(1) or m.group(2)
    for m in _CANNOT_OPEN.finditer(text):
        lib = m.group(1).lstrip('=(')
        if _NET_PLUGIN_FILE.search('/' + lib) or tried and \
                os.path.basename(lib) == os.path.basename(tried):
            continue          # the plugin's own file: not found
        return tried or 'the net plugin'
    return None


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


def _merged_hosts(ev):
    """The host names of the logger prefixes that are no host: the start of
    one host's line and the rest of another's, written at once by
    concurrent writers (``x3006c0s19b1`` + ``x3006c0s1b0n0``, or ``x`` +
    ``n0``): a name made of the start of a host's name and the end of a
    host's name, whose pids are all other hosts' too."""
    hosts = list(ev.hosts)
    pids = {}
    for rank in ev.ranks.values():
        host = rank.key.rsplit(':', 1)[0]
        pids.setdefault(host, set()).add(rank.pid)
    out = set()
    for h in hosts:
        others = [o for o in hosts if o != h]
        if not pids.get(h) or not pids[h] <= set().union(
                *[pids.get(o, set()) for o in others]):
            continue
        if any(h[:i] == o[:i] and any(x.endswith(h[i:]) for x in others)
               for o in others for i in range(1, min(len(h), len(o)))):
            out.add(h)
    return out


def _runs(ev):
    """The separate runs of the log: groups of rank keys whose
    communicators (``commId``) are joined by no rank (union of the ranks
    that share one), where there are two or more; else [].  Ranks whose
    lines name no communicator go with the run their lines are told to
    (:func:`_attach_lone`)."""
    parent = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for key, r in ev.ranks.items():
        for c in r.comm_ids:
            parent[root(('c', c))] = root(('r', key))
    groups = {}
    for key, r in ev.ranks.items():
        if r.comm_ids:
            groups.setdefault(root(('r', key)), []).append(key)
    runs = list(groups.values())
    if len(runs) < 2:
        return []
    _attach_lone(ev, runs)
    return runs


def _attach_lone(ev, runs):
    """Put the processes of ``ev`` that name no communicator (their init
    line was cut, or a merged line's host is no host) into ``runs``: a key
    whose pid is a process of one run alone (a merged line), that run;
    else the run of the lines around its first line (in its file): the
    run before and after it where they agree, else the run after it (a
    process logs its bootstrap and plugin lines before its init line),
    else the run before it."""
    of = {k: i for i, keys in enumerate(runs) for k in keys}
    lone = [k for k in ev.ranks if k not in of]
    if not lone:
        return
    by_pid = {}
    for k, i in of.items():
        by_pid.setdefault(ev.ranks[k].pid, set()).add(i)
    order = {}                      # source -> the keys of its lines
    for source, line in _lines_read(ev):
        pm = _PREFIX.search(line)
        if pm:
            order.setdefault(source, []).append(f'{pm.group(1)}:{pm.group(2)}')
    for key in lone:
        mine = by_pid.get(ev.ranks[key].pid, set())
        run = next(iter(mine)) if len(mine) == 1 else _run_around(
            key, order, of)
        if run is not None:
            runs[run].append(key)


def _run_around(key, order, of):
    """The run of the lines around the first line of ``key`` (see
    :func:`_attach_lone`), or None."""
    for keys in order.values():
        if key not in keys:
            continue
        at = keys.index(key)
        before = next((of[k] for k in reversed(keys[:at]) if k in of), None)
        after = next((of[k] for k in keys[at:] if k in of), None)
        return after if after is not None else before
    return None


def _lines_read(ev):
    """The lines ``ev`` read, ``(source, line)`` in order: a file's read
    again (as :func:`feed_lines` read them)."""
    for source, line in ev.lines:
        if line is not None:
            yield source, line
            continue
        try:
            with open(source, errors='replace') as fp:
                for ln in _unwrap(fp):
                    if 'CCL' in ln or 'version' in ln:
                        yield source, ln
        except OSError:
            continue


def run_evidence(ev, keys):
    """The evidence of one run of ``ev`` (``keys``: its rank keys, one
    list of :attr:`Evidence.runs`), read from that run's lines alone, as if
    they had been pasted alone: a line of another process is left out; a
    line without a logger prefix (``NCCL version ...`` that nccl-tests
    prints) goes with the process whose line came before it in the same
    file; a line of NCCL's logger whose prefix is not there (pasted
    without it) is its file's, as :func:`feed_lines` keys it: NCCL prints
    the prefix on every line it logs (src/debug.cc ``"%s:%d:%d [%d] NCCL
    INFO "``), so the process before it does not tell whose it is."""
    keys = set(keys)
    sub = Evidence(files=[f for f in ev.files
                          if any(f in ev.ranks[k].files for k in keys
                                 if k in ev.ranks)])
    last = {}                       # source -> the key of its last line
    part, part_source = [], None

    def flush():
        if part:
            feed_lines(sub, part, source=part_source, aggregate=False)
            part.clear()
    for source, line in _lines_read(ev):
        pm = _PREFIX.search(line)
        if pm:
            last[source] = f'{pm.group(1)}:{pm.group(2)}'
            owner = last[source]
        elif _LOG_LINE.search(line):
            owner = source or '(log)'   # as _rank keys a line without one
        else:
            # a file whose lines carry no prefix is one rank, keyed by the
            # file
            owner = last.get(source, source or '(log)')
        if owner not in keys:
            continue
        if source != part_source:
            flush()
            part_source = source
        part.append(line)
    flush()
    _aggregate(sub)
    return sub


def _aggregate(ev):
    ev.runs = _runs(ev)
    merged = _merged_hosts(ev)
    if merged:
        ev.hosts[:] = [h for h in ev.hosts if h not in merged]
    ranks = list(ev.ranks.values())
    ev.plugin_loaded = next((r.plugin_loaded for r in ranks
                             if r.plugin_loaded), None)
    ev.plugin_failure = next((r.plugin_failure for r in ranks
                              if r.plugin_failure), None)
    ev.gdr_off_reason = next((r.gdr_off_reason for r in ranks
                              if r.gdr_off_reason), None)
    ev.ib_off_reason = next((r.ib_off_reason for r in ranks
                             if r.ib_off_reason), None)


def debug_log_files(directory, pattern='nccl-debug.*.log'):
    return sorted(glob.glob(os.path.join(directory, pattern)))
