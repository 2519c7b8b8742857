"""``NCCL WARN`` lines: read from debug logs and outputs, and sorted into
the classes that fail a case.

NCCL and RCCL print a warning through ``WARN(...)`` (``src/include/debug.h``;
the logger writes ``host:pid:tid [dev] NCCL WARN <text>``); aws-ofi-nccl /
aws-ofi-rccl through ``NCCL_OFI_WARN(...)``, which goes through NCCL's logger
with its ``NET/OFI`` prefix (``NCCL WARN NET/OFI <text>``).  Users strip the
``host:pid:tid`` prefix when they paste, so the prefix is optional here.

The fatal classes (:data:`FATAL`) are the ones whose text says an operation
failed: connection and proxy progress errors (``[Service thread] Error
encountered progressing operation=Connect``, ``Connect to ... failed``,
``Connection closed by remote peer``, ``Net : Call to recv ... failed``),
memory registration failures (aws-ofi-nccl's ``Unable to register memory
... RC: -22``, verbs' ``ibv_reg_mr failed``), ``Cuda failure`` / RCCL's
``HIP failure``, NCCL's ``internal error`` and ``unhandled system/cuda
error`` (``ncclGetErrorString``), and a network plugin that failed its
initialisation (``aws-ofi-nccl initialization failed``, ``OFI fi_getinfo()
call failed``).  Every other WARN (RCCL's advice ``Missing "iommu=pt" from
kernel command line``) is kept and named, not fatal.  A site may declare
patterns benign (site file ``benign_warns: [{pattern, why}]``): those are
named as benign and never fail a case."""

import dataclasses
import re
from typing import List, Optional, Sequence

#: a WARN line, with or without the ``host:pid:tid [dev]`` prefix
_WARN = re.compile(r'(?:^|\s|\])(?:NCCL|RCCL) WARN\s+(?P<text>.*?)\s*$')

#: ``(class, regex)``: the fatal classes, first match names the class
FATAL = (
    ('connection', re.compile(
        r'Error encountered progressing operation|Failed to execute '
        r'operation|Connect(ion)? to .* failed|Connection closed by remote'
        r' peer|Connection reset by peer|Connection refused|Call to '
        r'(recv|send|connect|accept|poll)\b.*failed|socketProgress|'
        r'Got completion from peer .* with (status|error)|Got async event'
        r'|remote process exited|Timeout waiting|Broken pipe', re.I)),
    ('memory-registration', re.compile(
        r'Unable to register memory|(ibv_reg_mr|ibv_reg_dmabuf_mr|fi_mr_reg'
        r'|fi_mr_regattr)\S*\s.*failed|Failed to register|register(ing)? '
        r'(memory|buffer) failed|Unable to de-register memory', re.I)),
    ('cuda', re.compile(r'Cuda failure|CUDA error|HIP failure|hip error|'
                        r'Cuda driver error|cuMem\w+ failed', re.I)),
    ('internal', re.compile(r'internal error|unhandled (system|cuda|hip) '
                            r'error|remote error|invalid usage', re.I)),
    ('plugin-init', re.compile(
        r'initiali[sz]ation failed|Failed to initiali[sz]e|fi_getinfo\(\) '
        r'call failed|Unable to find a protocol that worked|Couldn.t '
        r'(initiali[sz]e|open|find) .*(plugin|provider|device)|'
        r'NET/Plugin\s*:.*(fail|error)', re.I)),
)


@dataclasses.dataclass(frozen=True)
class Warn:
    """One WARN line: its text after ``NCCL WARN``, where it was read, its
    fatal class (None: not fatal) and, when a site declared it benign,
    why."""
    text: str
    source: str = ''
    fatal: Optional[str] = None
    benign: Optional[str] = None

    def describe(self):
        tag = (f'benign: {self.benign}' if self.benign else
               f'fatal: {self.fatal}' if self.fatal else 'not fatal')
        return f'NCCL WARN {self.text[:160]} ({tag})'


def warn_text(line):
    """The text after ``NCCL WARN`` (or ``RCCL WARN``) of ``line``, else
    None."""
    m = _WARN.search(line)
    return m.group('text') if m else None


def fatal_class(text):
    for name, rx in FATAL:
        if rx.search(text):
            return name
    return None


def classify(text, source='', benign: Sequence = ()):
    """A :class:`Warn` for the WARN ``text``; ``benign``: ``[(regex or
    pattern text, why)]`` of the site."""
    for pattern, why in benign or ():
        rx = pattern if hasattr(pattern, 'search') else re.compile(pattern)
        if rx.search(text):
            return Warn(text, source, None, why or 'declared benign')
    return Warn(text, source, fatal_class(text), None)


def read_text(text, source='', benign: Sequence = ()) -> List[Warn]:
    """Every WARN line of ``text``, in order; a line repeated by many ranks
    is kept once per (text, source)."""
    out, seen = [], set()
    for line in (text or '').splitlines():
        t = warn_text(line)
        if t is None or (t, source) in seen:
            continue
        seen.add((t, source))
        out.append(classify(t, source, benign))
    return out


def read_files(paths, benign: Sequence = ()) -> List[Warn]:
    out = []
    for path in paths or ():
        try:
            with open(path, errors='replace') as fp:
                out.extend(read_text(fp.read(), str(path), benign))
        except OSError:
            continue
    return out


def benign_patterns(site_list):
    """``[(compiled regex, why)]`` from a site file's ``benign_warns``
    (``[{pattern, why}]``)."""
    return [(re.compile(d['pattern']), d.get('why', ''))
            for d in site_list or () if d.get('pattern')]


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
