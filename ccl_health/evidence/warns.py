"""``NCCL WARN`` lines: read from debug logs and outputs, and sorted into
the classes that fail a case.

NCCL and RCCL print a warning through ``WARN(...)`` (``src/include/debug.h``;
the logger writes ``host:pid:tid [dev] NCCL WARN <text>``); aws-ofi-nccl /
aws-ofi-rccl through ``NCCL_OFI_WARN(...)``, which goes through NCCL's logger
with its ``NET/OFI`` prefix (``NCCL WARN NET/OFI <text>``).  Users strip the
``host:pid:tid`` prefix when they paste, so the prefix is optional here.

Whether a WARN is fatal is read from the upstream code, not its words:
the WARN table (:mod:`ccl_health.evidence.warntable`, ``warn_table.tsv``
shipped with the package) holds every format string read from NVIDIA/nccl
(2.4.7, 2.12.12, 2.18.6 and current), ROCm/rccl and aws-ofi-nccl 1.21.1,
per source and version, with what the code does right after it: an error
returned, propagated or an abort is ``fatal`` with its class; a
``continue``, a fall-through or a success return is ``advisory``.  A line
is matched against the formats (each printf conversion read as what it
prints); the most specific match decides.

InfiniBand async events are classified as the newest NCCL handles each
event type, and that applies to the older forms too (``NET/IB : Got async
event : %s`` of NCCL before 2.23 and RCCL, printed for every event but
COMM_EST): device fatal, CQ and QP errors are fatal; GID / LID / P_Key /
SM changes, client reregistration and ``port active`` are advisory;
``port error`` is a link going down (class ``link-down``): a node fault
unless ``port active`` follows for the same device later in the same log
(:func:`read_text`).

A line that matches no string of the table (an unknown WARN, an event
string the table does not know) keeps the old reading by its words: the
regex families of :data:`FATAL`, each written from the upstream format
strings, so nothing that failed before passes unless the upstream code
says it is advisory.  Plugin probing (``NET/Plugin: Could not find:
libnccl-net.so``, ``No plugin found (...)``) is not a failure here:
whether a plugin was asked for is the debug-log proof's question
(:mod:`ccl_health.evidence.debuglog`).  Whether a WARN could come from
the case's transport at all (an IB event on an intra-node probe) is the
judge's question: :attr:`Warn.network` says where it was printed.  A
site may declare patterns benign (site file ``benign_warns: [{pattern,
why, overrides}]``): those are named as benign and never fail a case; a
line of a fatal class only where the pattern names that class in
``overrides`` (checked when the site file is loaded:
:mod:`ccl_health.sitedata.overrides`)."""

import dataclasses
import re
from typing import List, Optional, Sequence

from ccl_health.evidence import warntable

#: a WARN line, with or without the ``host:pid:tid [dev]`` prefix
_WARN = re.compile(r'(?:^|\s|\])(?:NCCL|RCCL) WARN\s+(?P<text>.*?)\s*$')

#: ``(class, regex)``: the fatal classes by their words, for lines that
#: match no string of the WARN table (first match names the class).  Each
#: family is written from the upstream format strings: NVIDIA/nccl
#: src/misc/socket.cc, src/transport/net_socket.cc, src/proxy.cc,
#: src/bootstrap.cc, src/transport/net_ib, src/include/checks.h,
#: src/plugin/net.cc, src/misc/ibvwrap.cc; ROCm/rccl the same;
#: aws-ofi-nccl src/nccl_ofi_*.cpp, src/platform-aws.cpp.
FATAL = (
    # src/misc/socket.cc, src/transport/net_socket.cc, src/proxy.cc,
    # src/bootstrap.cc, src/transport/net_ib (p2p.cc, common.cc), RCCL's
    # src/transport/net_ib.cc; aws-ofi-nccl nccl_ofi_rdma.cpp,
    # nccl_ofi_sendrecv.cpp, platform-aws.cpp (posting and completions)
    ('connection', re.compile(
        r'Error encountered progressing operation|Failed to execute '
        r'operation|Connect(ion)? to .* (failed|returned)|Connection closed by'
        r' remote peer|Connection reset by peer|Connection refused|Call to '
        r'(recv|send|connect|accept|poll)\b.*failed|socketProgress|'
        r'socket progress error|[Ss]ocket recv failed|Could not receive type'
        r'|Got completion (from peer .* )?with (status|error)|Got async event'
        r'|ibv_post_(send|recv)\(\) failed|Proxy Call to rank \d+ failed|'
        r'ncclProxyClientConvertFd call to'
        r'|async fatal event|communicator encountered a fatal error|Got CQE'
        r' with error|completed with error|complete with error|'
        r'exceeded (retries|timeouts)|Accept failed|[Mm]essage truncated|'
        r'\b[Pp]oll(\(\))? failed|WSAPoll failed|Error posting|Unable to post'
        r'|Could not send request|address vector|'
        r'\b(fi_sendmsg|fi_write\w*|fi_read|fi_send|fi_recv|fi_tsend|fi_trecv'
        r'|\w+)(\s\(\w+\))? failed; RC|fi_cq_readerr|completion queue '
        r'entries|Failed to issue eager read|Context progress failed|'
        r'CM connect failed|exception in plugin (connect|accept|listen)|'
        r'preparing for connection failed|remote process exited|'
        r'Unable to issue read operation|Failed call to (post_rx_buff|'
        r'process_pending)|Preparation of rx buffers failed|ncclProxy'
        r'(CallBlockingUDS|ClientGetFd|ClientQueryFdBlocking) call to '
        r'tpRank|peers\[\d+\]\.sock|socketFinalizeAccept: wrong magic|'
        r'Socket creation failed|mlx5dv_create_qp failed|Call to '
        r'ibv_(modify|create)_qp failed|'
        r'Timeout waiting|Broken pipe')),
    # src/transport/net_ib (reg.cc, p2p.cc), src/misc/ibvwrap.cc; aws-ofi-
    # nccl nccl_ofi_sendrecv.cpp, nccl_ofi_rdma.cpp, nccl_ofi_ofiutils.cpp
    ('memory-registration', re.compile(
        r'Unable to register memory|(ibv_reg_mr|ibv_reg_dmabuf_mr|fi_mr_reg'
        r'|fi_mr_regattr|fi_mr_bind|fi_mr_enable)\S*\s.*failed|'
        r'(Failed|Unable) to register|[Cc]ould not register|Couldn.t register'
        r'|register(ing)? (memory|buffer) failed|Unable to de-register memory'
        r'|Error de-registering|Failed call to (de)?reg_mr|Unable to (bind|'
        r'enable) MR|MR key allocation failed|registration request '
        r'attributes|could not find mr \S+ inside cache|Failed to delete MR '
        r'cache entry', re.I)),
    # src/include/checks.h (CUDACHECK: "Cuda failure"; RCCL's hipified
    # CUDACHECK, older RCCL "HIP failure"), src/proxy.cc ("Failed to set
    # CUDA device"); aws-ofi-nccl nccl_ofi_cuda.cpp / nccl_ofi_rocm.cpp
    ('cuda', re.compile(
        r'Cuda failure|CUDA error|HIP failure|hip error|Cuda driver error|'
        r'\bcu[A-Z]\w+ failed|Failed to (set|create) CUDA (device|context)|'
        r'Failed to (resolve|load) CUDA|Failed to query (CUDA|HIP) (driver|'
        r'runtime) version|failed to peer with device|Failed to (disable|'
        r'restore) stream capture mode')),
    # ncclGetErrorString ("internal error", "unhandled system/cuda error");
    # src/include/checks.h (SYSCHECK "Call to %s failed", NCCLCHECK of
    # allocations and threads), src/proxy.cc (op list consistency),
    # src/misc/socket.cc (socket state), aws-ofi-nccl nccl_ofi_api.cpp
    ('internal', re.compile(
        r'internal error|unhandled (system|cuda|hip) error|remote error|'
        r'invalid usage|^Allocation failed|Thread creation failed|'
        r'Proxy append (out of bounds|mismatch|on running)|Inactive op has '
        r'next set|List loop at element|Mismatched response size|doesn.t '
        r'match any expected response|ncclProxyConnect: \w+ -?\d+ out of '
        r'bounds|ncclSocket\w+: (file descriptor is -1|socket is invalid|wrong'
        r' socket state)|Call to \w+ failed ?: |Aborting due to call failure'
        r'|Mutex initialization failed|has no transport for .* peer|'
        # src/misc/ibvwrap.cc "Call to %s failed" (any verb: ibv_create_cq,
        # ibv_alloc_pd, ...; the qp ones are connection, ibv_reg_mr
        # memory-registration, both matched first), src/misc/shmutils.cc
        # "Error while %s shared memory segment %s (size %ld)..."
        r'Call to ibv_\w+ failed|Error while (creating|attaching to) '
        r'shared memory segment|'
        r'dequeue nonexistent async|Couldn.t find opId|already completed '
        r'opId|Could not find pool of op|neither send or recv|unexpected '
        r'socket state|socket state \(.*\) is not ready|ncclSocketSendRecv: '
        r'invalid socket|ncclSocket\w+: pass NULL socket|expected a '
        r"'(send|recv)' request but got|Unknown completion \(|could not "
        r'retreive a request|->events=\{|IBV_WC_RECV_RDMA_WITH_IMM and|'
        r'Unexpected (status|type) \(-?\d+\) for message|Invalid type in '
        r'msg buff|Duplicate request in message buffer', re.I)),
    # src/plugin/net.cc (src/net.cc before 2.19), src/transport/net_ib/
    # init.cc, src/transport/net_socket.cc, src/bootstrap.cc (no usable
    # interface); aws-ofi-nccl nccl_ofi_net.cpp, nccl_ofi_ofiutils.cpp,
    # nccl_ofi_rdma.cpp, nccl_ofi_sendrecv.cpp, nccl_ofi_api.cpp
    ('plugin-init', re.compile(
        r'initiali[sz]ation failed|Failed to initiali[sz]e|fi_getinfo\(\) '
        r'call failed|Unable to find a protocol that worked|Couldn.t '
        r'(initiali[sz]e|open|find) .*(plugin|provider|device|domain)|'
        r"Couldn.t (create|open) (fabric|domain|AV|completion queue)|"
        r"Couldn.t (allocate|enable) endpoint|Couldn.t bind EP-|Initializing "
        r'(a new domain|rail|control rail|plugin)\b.*failed|exception in '
        r'plugin init|Insufficient Libfabric devices|No IP interface found|'
        r'Unable to open device|no interface found|No usable listening '
        r'interface|no socket interface found|no device found (matching|'
        r'after excluding)|NET/IB : Unable to query|Couldn.t open CQ|Could '
        r'not create Libfabric endpoint|Creating new endpoint for domain|'
        r'Querying provider capabilities failed|fi_open_ops for EFA '
        r'features failed|exception in (rdma|sendrecv)_init|Failed to '
        r'create NCCL OFI topology|requires at least libfabric version|'
        r'Failed to find CUDA Runtime library|couldn.t be configured on an'
        r' endpoint|Failed to set FI_OPT_CUDA_API_PERMITTED|Error: network'
        r' .+? not found|NET/Plugin\s*:.*(\bfail|\berror\b)', re.I)),
)


@dataclasses.dataclass(frozen=True)
class Warn:
    """One WARN line: its text after ``NCCL WARN``, where it was read, its
    fatal class (None: not fatal) and, when a site declared it benign,
    why.  ``origin``: the upstream call that printed it (the WARN table's
    row, ``NVIDIA/nccl@v2.4.7-1 src/transport/net_ib.cc:80``), empty when
    no string of the table matched; ``evidence``: what the upstream code
    does next; ``network``: printed by the network code (IB transport,
    verbs wrapper, net plugin); ``note``: why it is not fatal here (a
    ``port active`` that followed, a transport that cannot print it)."""
    text: str
    source: str = ''
    fatal: Optional[str] = None
    benign: Optional[str] = None
    origin: str = ''
    evidence: str = ''
    network: bool = False
    note: str = ''

    def describe(self):
        tag = (f'benign: {self.benign}' if self.benign else
               f'fatal: {self.fatal}' if self.fatal else
               f'not fatal: {self.note}' if self.note else 'not fatal')
        return f'NCCL WARN {self.text[:160]} ({tag})'


def warn_text(line):
    """The text after ``NCCL WARN`` (or ``RCCL WARN``) of ``line``, else
    None."""
    m = _WARN.search(line)
    return m.group('text') if m else None


def fatal_class(text):
    """The fatal class of an unknown WARN ``text`` by its words."""
    for name, rx in FATAL:
        if rx.search(text):
            return name
    return None


#: a line of the network code where the table knows none
_NETWORK_WORDS = re.compile(r'^(NET/IB\b|NET/OFI\b|NET/IB:)')


def classify(text, source='', benign: Sequence = ()):
    """A :class:`Warn` for the WARN ``text``; ``benign``: ``[(regex or
    pattern text, why[, overrides])]`` of the site
    (:func:`benign_patterns`).  A benign pattern silences a line of a
    fatal class only where it names that class in ``overrides``: a pattern
    that names none (or another) leaves the line fatal."""
    row = warntable.match(text)
    origin = row.origin if row else ''
    network = row.network if row else bool(_NETWORK_WORDS.match(text))
    evidence = row.evidence if row else ''
    if row is not None and row.disposition == 'fatal':
        # a format whose %s carries the verb (``Call to %s failed``) is
        # named by the line's words where they name a class; a link down
        # stays what the table says
        fatal = row.cls if row.cls == 'link-down' else (
            fatal_class(text) or row.cls)
    elif row is not None and row.disposition == 'advisory':
        fatal = None
    else:               # unknown to the table: by its words, as before
        fatal = fatal_class(text)
    for pattern, why, *rest in benign or ():
        rx = pattern if hasattr(pattern, 'search') else re.compile(pattern)
        if rx.search(text) and (fatal is None or fatal in (rest[0] if rest
                                                            else ())):
            return Warn(text, source, None, why or 'declared benign', origin,
                        evidence, network)
    return Warn(text, source, fatal, None, origin, evidence, network)


#: the device of an async event line of newer NCCL / RCCL
#: (``NET/IB : mlx5_2:1 Got ...``); older NCCL names none
_EVENT_DEVICE = re.compile(r'^NET/IB\s*:\s*(\S+:\d+)\s')
_PORT_ACTIVE = re.compile(r'async event\s*:?\s*port active', re.I)


def _device(text):
    m = _EVENT_DEVICE.match(text)
    return m.group(1) if m else ''


def read_text(text, source='', benign: Sequence = ()) -> List[Warn]:
    """Every WARN line of ``text``, in order; a line repeated by many ranks
    is kept once per (text, source).  A ``port error`` (class
    ``link-down``) that a ``port active`` of the same device follows later
    in ``text`` is not fatal: the link came back."""
    out, seen, down = [], {}, {}
    for line in (text or '').splitlines():
        t = warn_text(line)
        if t is None:
            continue
        if _PORT_ACTIVE.search(t):
            down.pop(_device(t), None)
        if t in seen:
            w = out[seen[t]]
        else:
            seen[t] = len(out)
            w = classify(t, source, benign)
            out.append(w)
        if w.fatal == 'link-down':
            down[_device(t)] = t
    for i, w in enumerate(out):
        if w.fatal == 'link-down' and down.get(_device(w.text)) != w.text:
            out[i] = dataclasses.replace(
                w, fatal=None, note='"port active" followed for '
                f'{_device(w.text) or "the port"}: the link came back')
    return out


def benign_patterns(site_list):
    """``[(compiled regex, why, overrides)]`` from a site file's
    ``benign_warns`` (``[{pattern, why, overrides}]``, checked when the
    site file is loaded: :mod:`ccl_health.sitedata.overrides`);
    ``overrides``: the fatal classes (:data:`FATAL`) the pattern may
    silence, a tuple."""
    return [(re.compile(d['pattern']), d.get('why', ''),
             override_classes(d.get('overrides')))
            for d in site_list or () if d.get('pattern')]


def override_classes(value):
    """The fatal classes a ``benign_warns`` item's ``overrides`` names (a
    class name or a list of them) as a tuple; ``()`` for none."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


#: the names of the fatal classes, in :data:`FATAL`'s order
#: a link going down (an IB ``port error`` that no ``port active``
#: follows): fatal by the WARN table, named by no words of :data:`FATAL`
LINK_DOWN = 'link-down'
FATAL_CLASSES = tuple(name for name, _ in FATAL) + (LINK_DOWN,)

#: ``(class, WARN text)``: lines of each fatal class, each built from an
#: upstream format string (the file that prints it is named), the text
#: after ``NCCL WARN`` as :func:`classify` sees it.  What a site's
#: ``benign_warns`` pattern is tried on (:func:`fatal_samples`).
#: TODO: read these from the package's table of upstream WARN strings once
#: it is there, instead of this short list.
_FATAL_SAMPLES = (
    # src/include/checks.h (CUDACHECK, CUCHECK), RCCL's older HIP form
    ('cuda', "Cuda failure 'an illegal memory access was encountered'"),
    ('cuda', "Cuda failure 'unspecified launch failure'"),
    ('cuda', "HIP failure 'an illegal memory access was encountered'"),
    ('cuda', "Cuda failure 2 'out of memory'"),
    # src/proxy.cc; RCCL src/proxy.cc; NVIDIA/nccl src/transport/net.cc
    ('cuda', 'failed to peer with device 3: 217 peer access is not '
             'supported between these two devices'),
    # aws-ofi-nccl src/nccl_ofi_cuda.cpp
    ('cuda', 'NET/OFI cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY'),
    ('cuda', 'NET/OFI Failed to query CUDA driver version.'),
    # src/transport/net_ib.cc (2.18), net_ib/p2p.cc, net_ib/common.cc
    ('connection', 'NET/IB : Got completion from peer 10.1.2.3<51234> with '
                   'error 12, opcode 0, len 0, vendor err 129'),
    ('connection', 'NET/IB: Got completion from peer 10.1.2.3<51234> with '
                   'status=transport retry counter exceeded(12) opcode=Send'
                   '(0) vendor_err=129 hca mlx5_0'),
    ('connection', 'NET/IB : mlx5_0:1 async fatal event: local '
                   'catastrophic error'),
    # src/proxy.cc, src/misc/socket.cc, src/transport/net_socket.cc
    ('connection', '[Service thread] Error encountered progressing '
                   'operation=Connect, res=3, closing connection'),
    ('connection', 'Proxy Call to rank 3 failed (Connect)'),
    ('connection', 'Net : Connection closed by remote peer '
                   'nid001234<41234>'),
    ('connection', 'socketProgress: Connection closed by remote peer '
                   'nid001234<41234>'),
    ('connection', 'NET/Socket : socket progress error'),
    ('connection', 'socketStartConnect: exceeded retries (35)'),
    # aws-ofi-nccl src/platform-aws.cpp, src/nccl_ofi_rdma.cpp
    ('connection', 'NET/OFI Request 0x7f3a2c000b80 (send) completed with '
                   'error: err: 5, flags: 4096, prov_errno: 15, strerror: '
                   'Input/output error, len: 4096'),
    ('connection', 'NET/OFI fi_sendmsg (eager) failed; RC: -5, Error: '
                   'Input/output error'),
    # src/misc/ibvwrap.cc, src/transport/net_ib/reg.cc; aws-ofi-nccl
    # src/nccl_ofi_sendrecv.cpp, src/nccl_ofi_rdma.cpp
    ('memory-registration', 'Call to ibv_reg_mr failed with error Cannot '
                            'allocate memory'),
    ('memory-registration', 'NET/IB: could not find mr 0x7f3a2c000b80 '
                            'inside cache of 12 entries'),
    ('memory-registration', 'NET/OFI Unable to register memory (type = 1) '
                            'for device 0. RC: -22, Error: Invalid '
                            'argument'),
    ('memory-registration', 'NET/OFI Could not register memory on data '
                            'rail 0 with flag 2'),
    ('memory-registration', 'NET/OFI Failed call to reg_mr: -12'),
    ('memory-registration', 'NET/OFI MR key allocation failed'),
    ('memory-registration', 'NET/OFI Error de-registering MR'),
    # src/include/checks.h, src/proxy.cc, src/misc/socket.cc,
    # src/misc/shmutils.cc; aws-ofi-nccl src/nccl_ofi_rdma.cpp
    ('internal', 'Allocation failed'),
    ('internal', 'Call to posix_memalign failed: Cannot allocate memory'),
    ('internal', 'Thread creation failed: Resource temporarily '
                 'unavailable'),
    ('internal', 'Proxy append out of bounds'),
    ('internal', 'ncclSocketConnect: wrong socket state 3'),
    ('internal', 'Rank 3 has no transport for Send peer 5 on channel 2/4'),
    ('internal', 'Error while creating shared memory segment '
                 '/dev/shm/nccl-Xk2Lq1 (size 9637888)'),
    ('internal', 'NET/OFI Unexpected type (3) for message 5'),
    # src/plugin/net.cc, src/bootstrap.cc, src/transport/net_socket.cc;
    # aws-ofi-nccl src/nccl_ofi_net.cpp, src/nccl_ofi_rdma.cpp,
    # src/nccl_ofi_api.cpp, src/nccl_ofi_sendrecv.cpp
    ('plugin-init', 'Failed to initialize any NET plugin'),
    ('plugin-init', 'Bootstrap : no socket interface found'),
    ('plugin-init', 'NET/Socket : no interface found'),
    ('plugin-init', 'NET/OFI OFI fi_getinfo() call failed: No data '
                    'available'),
    ('plugin-init', "NET/OFI Couldn't open a fabric provider. RC: -61, "
                    'ERROR: No data available'),
    ('plugin-init', 'NET/OFI Failed to initialize rdma protocol'),
    ('plugin-init', 'NET/OFI Initializing plugin failed'),
    ('plugin-init', 'NET/OFI Insufficient Libfabric devices found'),
)


def fatal_samples():
    """``[(class, WARN text)]``: a line of every fatal format string of the
    WARN table (:mod:`ccl_health.evidence.warntable`, a plausible value in
    each conversion) and the real fatal lines above, for checking what a
    site's ``benign_warns`` pattern would silence
    (:mod:`ccl_health.sitedata.overrides`)."""
    out = list(_FATAL_SAMPLES)
    for row in warntable.rows():
        if row.disposition == 'fatal':
            line = warntable.sample(row.format)
            cls = classify(line).fatal
            if cls:
                out.append((cls, line))
    return out


#: NCCL / RCCL print their version once per rank at init
#: (``host:pid:tid [dev] NCCL INFO NCCL version 2.21.5+cuda12.4``)
_RANK_VERSION = re.compile(r'(?:(?P<prefix>\S+:\d+):\d+ \[\d+\] )?(?:NCCL|RCCL)'
                           r' INFO (?:NCCL|RCCL) version\s+(?P<v>[\w.]+)')


def rank_versions(text, source=''):
    """``{rank: library version}`` of the version lines of ``text``: the
    rank is the line's ``host:pid``, else ``source``.  Not a WARN, but
    read from the same lines, for the judge's version agreement."""
    out = {}
    for line in (text or '').splitlines():
        m = _RANK_VERSION.search(line)
        if m:
            out.setdefault(m.group('prefix') or source or '?', m.group('v'))
    return out


def read_logs(paths, text='', source='', benign: Sequence = ()):
    """``(warns, rank_versions)`` of the debug logs ``paths`` and of
    ``text`` (a program's stdout with NCCL lines in it, named ``source``)."""
    warns, versions = [], {}
    for path in paths or ():
        try:
            with open(path, errors='replace') as fp:
                body = fp.read()
        except OSError:
            continue
        warns.extend(read_text(body, str(path), benign))
        versions.update(rank_versions(body, str(path)))
    if text:
        warns.extend(read_text(text, source, benign))
        for k, v in rank_versions(text, source).items():
            versions.setdefault(k, v)
    return warns, versions
