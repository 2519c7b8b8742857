"""Which transport did NCCL/RCCL really use?  Read it from the
``NCCL_DEBUG=INFO`` log (``NCCL_DEBUG_FILE``, one file per rank) and compare it
with the transport that was asked for.  Versions of everything involved are
read from the same lines."""

import dataclasses
import glob
import os
import re
from typing import Dict, List, Optional

from . import TRANSPORTS, CclHealthError

#: NCCL's built-in networks; any other name on a ``via NET/<name>`` line is a
#: plugin (aws-ofi-nccl calls itself "Libfabric", "AWS Libfabric" or "OFI").
BUILTIN_NETS = ('Socket', 'IB')

_VIA = re.compile(r'Channel \d+(?:/\d+)? : .*? via (NET|P2P|SHM|COLLNET)'
                  r'(?:/([^/\n]+?))?(?:/(\d+))?((?:/[A-Za-z]+)*)\s*$')
_PATTERNS = {
    'nccl_version': re.compile(r'NCCL version\s*:?\s*(\S+)'),
    'rccl_version': re.compile(r'RCCL version\s*:?\s*(\S+)'),
    'plugin_loaded': re.compile(r'NET/Plugin\s*:?\s*Loaded net plugin (.+?)'
                                r'(?: \(v\d+\))?\s*$'),
    'plugin_version': re.compile(r'NET/OFI (?:Initializing|Using) '
                                 r'aws-ofi-[nr]ccl (\S+)'),
    'libfabric_version': re.compile(r'NET/OFI Using Libfabric version (\S+)'),
    'provider': re.compile(r'NET/OFI Selected [Pp]rovider is ([^,\s]+)'),
    'using_network': re.compile(r'Using network (.+?)\s*$'),
    'cuda_driver': re.compile(r'cudaDriverVersion (\d+)'),
    'hip_driver': re.compile(r'(?:HIP|ROCm) (?:driver )?version (\S+)'),
}
_PLUGIN_FAIL = re.compile(r'NET/Plugin\s*:?\s*(.*(?:[Cc]ould not|[Ff]ailed|'
                          r'dlerror|No plugin found|cannot open).*)$')
_GDR_OFF = re.compile(r'(GDR not supported|GPUDirect RDMA .*disabled|'
                      r'NET/OFI.*[Nn]ot using GPUDirect)')
_WARN = re.compile(r'NCCL WARN (.*)$')


@dataclasses.dataclass
class Evidence:
    """What the debug logs of one run say."""
    files: List[str] = dataclasses.field(default_factory=list)
    via: Dict[str, int] = dataclasses.field(default_factory=dict)
    versions: Dict[str, str] = dataclasses.field(default_factory=dict)
    plugin_loaded: Optional[str] = None
    plugin_failure: Optional[str] = None
    using_network: Optional[str] = None
    gdr_off_reason: Optional[str] = None
    warnings: List[str] = dataclasses.field(default_factory=list)

    @property
    def plugin_name(self):
        """The plugin NCCL loaded: its "Loaded net plugin" line, or (NCCL
        before 2.12 printed none) a "Using network" that is not built in."""
        if self.plugin_loaded:
            return self.plugin_loaded
        if self.using_network and self.using_network not in BUILTIN_NETS:
            return self.using_network
        return None

    @property
    def net_paths(self):
        return {k: n for k, n in self.via.items() if k.startswith('NET/')}

    @property
    def intra_paths(self):
        return {k: n for k, n in self.via.items()
                if k.startswith(('P2P', 'SHM'))}

    def proven(self):
        """The transport these logs prove, in the suite's vocabulary, or
        None when no channel was connected."""
        nets = self.net_paths
        if nets:
            names = {k.split('/')[1] for k in nets}
            if names <= {'Socket'}:
                return 'net-socket'
            if names & {'IB'} and not names - set(BUILTIN_NETS):
                return 'net-ib'
            if all(k.endswith('/GDRDMA') for k in nets):
                return 'net-plugin-gdr'
            return 'net-plugin'
        if self.intra_paths:
            return 'intra'
        return None


def read_evidence(paths):
    """Read the debug log files ``paths`` (or a glob pattern)."""
    if isinstance(paths, str):
        paths = sorted(glob.glob(paths))
    ev = Evidence(files=list(paths))
    for path in paths:
        with open(path, errors='replace') as fp:
            feed_lines(ev, fp)
    return ev


def evidence_from_text(text):
    ev = Evidence()
    feed_lines(ev, text.splitlines())
    return ev


def feed_lines(ev, lines):
    for line in lines:
        if 'NCCL' not in line:
            continue
        line = line.rstrip('\n')
        m = _VIA.search(line)
        if m:
            kind, name, _dev, suffix = m.groups()
            if kind == 'NET':
                key = f'NET/{name}' + ('/GDRDMA' if 'GDRDMA' in suffix
                                       else '')
            else:
                key = kind + (f'/{name}' if name else '')
            ev.via[key] = ev.via.get(key, 0) + 1
            continue
        for key, rx in _PATTERNS.items():
            m = rx.search(line)
            if not m:
                continue
            val = m.group(1).strip()
            if key == 'plugin_loaded':
                ev.plugin_loaded = val
            elif key == 'using_network':
                ev.using_network = val
            else:
                ev.versions.setdefault(key, val)
        m = _PLUGIN_FAIL.search(line)
        if m and ev.plugin_failure is None:
            ev.plugin_failure = m.group(1).strip()
        m = _GDR_OFF.search(line)
        if m and ev.gdr_off_reason is None:
            ev.gdr_off_reason = m.group(1)
        m = _WARN.search(line)
        if m and len(ev.warnings) < 20:
            ev.warnings.append(m.group(1).strip())


@dataclasses.dataclass
class Proof:
    asked: str
    proven: Optional[str]
    ok: bool
    reason: str


def _describe(ev):
    paths = ', '.join(f'{k} x{n}' for k, n in sorted(ev.via.items()))
    return paths or 'no channel lines'


def prove(asked, ev):
    """Compare the transport ``asked`` for with what the evidence shows.
    The reason is one line that a person can act on."""
    if asked not in TRANSPORTS:
        raise CclHealthError(f'unknown transport {asked!r}; '
                             f'known: {", ".join(TRANSPORTS)}')
    proven = ev.proven()
    if not ev.files and not ev.via and not ev.versions:
        return Proof(asked, None, False,
                     'no NCCL debug log was written (NCCL_DEBUG_FILE): '
                     'cannot prove the transport')
    if proven is None:
        return Proof(asked, None, False,
                     'no channel was connected (no "via" lines in the NCCL '
                     'debug log): the run stopped before NCCL set up its '
                     'transports')
    seen = _describe(ev)
    if asked == 'intra':
        if proven == 'intra':
            return Proof(asked, proven, True, f'intra-node only ({seen})')
        return Proof(asked, proven, False,
                     f'asked for intra-node but NCCL went over the network '
                     f'({seen})')
    if proven == 'intra':
        return Proof(asked, proven, False,
                     f'asked for {asked} but no channel used the network '
                     f'({seen}): P2P/SHM were not disabled')
    if asked == 'net-socket':
        if proven == 'net-socket':
            return Proof(asked, proven, True, f'NCCL socket transport ({seen})')
        return Proof(asked, proven, False,
                     f'asked for NCCL sockets but NCCL used {seen}')
    # plugin transports
    if proven == 'net-socket':
        why = (f'; the plugin did not load: {ev.plugin_failure}'
               if ev.plugin_failure else
               '' if ev.plugin_name else '; no "Loaded net plugin" line')
        return Proof(asked, proven, False,
                     f'fell back to NET/Socket instead of the plugin '
                     f'({seen}){why}')
    plugin = ev.plugin_name
    if not plugin:
        return Proof(asked, proven, False,
                     f'network {seen} used but no "Loaded net plugin" line '
                     f'in the log')
    if asked == 'net-plugin':
        return Proof(asked, proven, True, f'plugin {plugin} ({seen})')
    # net-plugin-gdr
    if proven == 'net-plugin-gdr':
        return Proof(asked, proven, True,
                     f'plugin {plugin} with GPUDirect RDMA ({seen})')
    why = f': {ev.gdr_off_reason}' if ev.gdr_off_reason else ''
    return Proof(asked, proven, False,
                 f'plugin {plugin} ran without GPUDirect RDMA ({seen}){why}')


def debug_log_files(directory, pattern='nccl-debug.*.log'):
    return sorted(glob.glob(os.path.join(directory, pattern)))
