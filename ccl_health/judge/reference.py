"""Per-system reference values, kept as data: ``reference/<system>.yaml``.

Layout::

    system: local
    partitions:
      gpu:
        gdr: {supported: false, reason: "..."}
        entries:
          - transport: intra          # intra | net-socket | net-plugin | net-plugin-gdr
            collective: all_reduce
            nodes: 1
            gpus_per_node: 2
            algo: default             # optional: default | Ring | Tree
            tolerance: 0.10           # allowed fraction below the value
            source: "where the numbers come from"
            busbw:                    # GB/s, by message size
              1GiB: 330.0
              1MiB: [70.9, 0.2]       # [value, its own tolerance]: small,
                                      # latency-bound sizes are noisier

Every value carries its source.  The file is validated against
``ccl_health/sitedata/schemas/reference.schema.json`` (JSON Schema, with the
``jsonschema`` library), and then for what a schema cannot say: sizes that
parse, one size named once (``2GiB`` and ``2048MiB`` are one size), no nan /
inf, one entry per key.  A malformed file is an error that names the file and
the key.  A key without an entry is explained by
:meth:`SystemReference.missing_reason`.  :class:`Editor` changes a file
keeping what it does not change (comments, sources, other entries) and
:func:`write_atomic` replaces it.
"""

import dataclasses
import contextlib
import datetime
import difflib
import io
import os
import tempfile
from typing import Dict, Optional

from ccl_health import TRANSPORTS, CclHealthError
from ccl_health.sitedata import schemas
from ccl_health.units import format_size, parse_size

UNIT = 'GB/s'


def perf_var(size):
    """Name of the ReFrame performance variable for busbw at ``size``."""
    return f'busbw_{format_size(size)}'


def busbw_perfvalues(perfvalues):
    """``[(size, [value, ref, lower, upper, unit, result]), ...]`` for the
    ``busbw_<size>`` variables of a run report's ``perfvalues`` (keys
    ``<system>:<partition>:busbw_<size>``), by size."""
    out = []
    for key, vals in (perfvalues or {}).items():
        var = key.rsplit(':', 1)[-1]
        if var.startswith('busbw_'):
            size = parse_size(var[len('busbw_'):])
            assert perf_var(size) == var
            out.append((size, vals))
    return sorted(out, key=lambda item: item[0])


class ReferenceError(CclHealthError):
    pass


def label(transport, collective, nodes, gpus_per_node, algo='default'):
    """``intra all_reduce 1x8 default``: a reference key as people read it."""
    return f'{transport} {collective} {nodes}x{gpus_per_node} {algo}'


def _nodes(n):
    return f'{n} node{"" if n == 1 else "s"}'


@dataclasses.dataclass
class Entry:
    transport: str
    collective: str
    nodes: int
    gpus_per_node: int
    tolerance: float
    source: str
    busbw: Dict[int, float]
    algo: str = 'default'
    #: tolerances of single sizes, where they differ from ``tolerance``
    size_tolerance: Dict[int, float] = dataclasses.field(default_factory=dict)

    def tolerance_at(self, size):
        return self.size_tolerance.get(size, self.tolerance)

    def key(self):
        return (self.transport, self.collective, self.nodes,
                self.gpus_per_node, self.algo)

    def label(self):
        """``intra all_reduce 1x8 default``: the key as people read it."""
        return label(*self.key())

    def to_rfm(self, scope):
        """The ReFrame ``reference`` dict for this entry: a lower bound only
        (being faster than the reference is never a failure)."""
        return {scope: {perf_var(size): (val, -self.tolerance_at(size), None,
                                         UNIT)
                        for size, val in sorted(self.busbw.items())}}

    def as_yaml(self):
        d = {'transport': self.transport, 'collective': self.collective,
             'nodes': self.nodes, 'gpus_per_node': self.gpus_per_node}
        if self.algo != 'default':
            d['algo'] = self.algo
        d.update({'tolerance': self.tolerance, 'source': self.source,
                  'busbw': {format_size(s): (
                      [round(v, 2), self.size_tolerance[s]]
                      if s in self.size_tolerance else round(v, 2))
                      for s, v in sorted(self.busbw.items())}})
        return d


@dataclasses.dataclass
class PeerCopy:
    """A partition's ``peer_copy``: the copy-engine GB/s of one direction
    of its GPU links (:mod:`ccl_health.evidence.links`), by kind (``gpu_to_gpu``,
    ``in_gpu``, ``host_to_gpu``, ``gpu_to_host``) and for single
    directions that differ (``pairs``, by the node's GPU indices), at one
    copy size, with one tolerance and its source."""
    size: int
    tolerance: float
    source: str
    gbps: Dict[str, float]
    pairs: Dict[tuple, float] = dataclasses.field(default_factory=dict)

    def expected(self, link, label=str):
        """The reference GB/s of a :class:`ccl_health.evidence.links.Link` (its GPU
        indices turned into the node's by ``label``), or None."""
        if link.kind == 'gpu_to_gpu':
            key = (int(label(int(link.src))), int(label(int(link.dst))))
            if key in self.pairs:
                return self.pairs[key]
        return self.gbps.get(link.kind)


@dataclasses.dataclass
class PartitionReference:
    name: str
    gdr_supported: bool = True
    gdr_reason: str = ''
    entries: list = dataclasses.field(default_factory=list)
    peer_copy: Optional[PeerCopy] = None


@dataclasses.dataclass
class SystemReference:
    system: str
    path: str
    partitions: Dict[str, PartitionReference]

    def partition(self, name):
        try:
            return self.partitions[name]
        except KeyError:
            raise ReferenceError(
                f'{self.path}: no partition {name!r} (has: '
                f'{", ".join(sorted(self.partitions)) or "none"})') from None

    def lookup(self, partition, transport, collective, nodes, gpus_per_node,
               algo='default'):
        part = self.partitions.get(partition)
        if part is None:
            return None
        want = (transport, collective, nodes, gpus_per_node, algo)
        for e in part.entries:
            if e.key() == want:
                return e
        return None

    def missing_reason(self, partition, transport, collective, nodes,
                       gpus_per_node, algo='default'):
        """Why :meth:`lookup` finds nothing for this key, in one line that
        names the file, what does not match and the nearest keys the file
        has, e.g. ``no reference for frontier:batch intra all_reduce 1 node
        x 8 GPUs in reference/frontier.yaml: no entry for 1 node x 8 GPUs
        (has: intra all_reduce 1x4 default, ...)``; None when there is
        one."""
        if self.lookup(partition, transport, collective, nodes,
                       gpus_per_node, algo) is not None:
            return None
        what = (f'no reference for {self.system}:{partition} {transport} '
                f'{collective} {_nodes(nodes)} x {gpus_per_node} GPUs'
                + (f' (algo {algo})' if algo != 'default' else '')
                + f' in {self.path}')
        part = self.partitions.get(partition)
        if part is None:
            near = difflib.get_close_matches(partition, list(self.partitions),
                                             n=1)
            return (f'{what}: no partition {partition!r}'
                    + (f' (did you mean {near[0]!r}?)' if near else '')
                    + f' (has: {", ".join(sorted(self.partitions)) or "none"}'
                    + ')')
        if not part.entries:
            return f'{what}: partition {partition!r} has no entries'
        want = (transport, collective, nodes, gpus_per_node, algo)
        entries = part.entries
        if all(e.transport != transport for e in entries):
            why = f'no entry for transport {transport}'
        elif all((e.transport, e.collective) != (transport, collective)
                 for e in entries):
            why = f'no {transport} entry for {collective}'
        elif all(e.key()[:4] != want[:4] for e in entries):
            why = (f'no {transport} {collective} entry for {_nodes(nodes)} '
                   f'x {gpus_per_node} GPUs')
        else:
            why = (f'no {transport} {collective} {nodes}x{gpus_per_node} '
                   f'entry with algo {algo}')

        def closeness(e):
            same = [a == b for a, b in zip(e.key(), want)]
            return (-sum(w for w, hit in zip((8, 4, 2, 2, 1), same) if hit),
                    e.key()[0] != transport, abs(e.nodes - nodes),
                    abs(e.gpus_per_node - gpus_per_node))
        near = sorted(entries, key=closeness)
        shown = ', '.join(e.label() for e in near[:8])
        more = len(near) - 8
        return (f'{what}: {why} (has: {shown}'
                + (f', and {more} more' if more > 0 else '') + ')')

    def peer_copy(self, partition):
        """The partition's :class:`PeerCopy`, or None."""
        part = self.partitions.get(partition)
        return part.peer_copy if part is not None else None

    def gdr_unsupported(self, partition):
        """The reason GDR cannot work on ``partition``, or None."""
        part = self.partitions.get(partition)
        if part is not None and not part.gdr_supported:
            return part.gdr_reason or 'GDR declared unsupported'
        return None


def _need(cond, path, where, msg):
    if not cond:
        raise ReferenceError(f'{path}: {where}: {msg}')


def _entry(path, where, raw):
    """An :class:`Entry` from one schema-valid entry, with the checks a
    schema cannot make: sizes that parse, no size named twice."""
    busbw, size_tol, named = {}, {}, {}
    for size, val in raw['busbw'].items():
        try:
            nbytes = parse_size(size)
        except CclHealthError as err:
            raise ReferenceError(f'{path}: {where}.busbw.{size}: {err}') \
                from None
        _need(nbytes > 0, path, f'{where}.busbw.{size}',
              'a message size must be positive')
        _need(nbytes not in named, path, f'{where}.busbw',
              f'{named.get(nbytes)!s} and {size!s} name one size '
              f'({format_size(nbytes)}): keep one')
        named[nbytes] = size
        if isinstance(val, list):
            val, size_tol[nbytes] = val[0], float(val[1])
        busbw[nbytes] = float(val)
    return Entry(raw['transport'], raw['collective'], raw['nodes'],
                 raw['gpus_per_node'], float(raw['tolerance']),
                 raw['source'].strip(), busbw, raw.get('algo', 'default'),
                 size_tol)


def _peer_copy(path, where, raw):
    """A :class:`PeerCopy` from a schema-valid ``peer_copy`` block, with
    the checks a schema cannot make: a size that parses."""
    try:
        size = parse_size(str(raw['size']))
    except CclHealthError as err:
        raise ReferenceError(f'{path}: {where}.size: {err}') from None
    _need(size > 0, path, f'{where}.size', 'must be positive')
    pairs = {}
    for key, val in (raw.get('pairs') or {}).items():
        a, b = (int(x) for x in key.split('->'))
        _need(a != b, path, f'{where}.pairs.{key}',
              'a pair of two different GPUs')
        pairs[(a, b)] = float(val)
    return PeerCopy(size, float(raw['tolerance']), raw['source'].strip(),
                    {k: float(v) for k, v in raw['gbps'].items()}, pairs)


def parse(text, path='<reference>'):
    """A :class:`SystemReference` from the text of a reference file,
    validated against ``ccl_health/sitedata/schemas/reference.schema.json``; every
    error names the file and the key."""
    doc = schemas.load_yaml(text, path, ReferenceError)
    _need(doc is not None, path, 'top level', 'empty file')
    schemas.validate(doc, 'reference', path, ReferenceError)
    out = {}
    for pname, praw in doc['partitions'].items():
        where = f'partitions.{pname}'
        gdr = praw.get('gdr', {'supported': True})
        part = PartitionReference(pname, gdr['supported'],
                                  gdr.get('reason', ''))
        seen = {}
        for i, raw in enumerate(praw.get('entries', [])):
            e = _entry(path, f'{where}.entries[{i}]', raw)
            _need(e.key() not in seen, path, f'{where}.entries[{i}]',
                  f'duplicate entry for {e.label()} '
                  f'(entries[{seen.get(e.key())}] has the same key)')
            seen[e.key()] = i
            part.entries.append(e)
        if praw.get('peer_copy') is not None:
            part.peer_copy = _peer_copy(path, f'{where}.peer_copy',
                                        praw['peer_copy'])
        out[pname] = part
    return SystemReference(doc['system'], path, out)


def load(path):
    try:
        with open(path) as fp:
            text = fp.read()
    except FileNotFoundError:
        raise ReferenceError(f'{path}: reference file not found') from None
    except OSError as err:
        raise ReferenceError(f'{path}: cannot read the reference file: '
                             f'{err.strerror or err}') from None
    except UnicodeDecodeError:
        raise ReferenceError(f'{path}: not a reference file (not text: a '
                             f'binary file?)') from None
    return parse(text, path)


def load_for_system(refdir, system):
    path = os.path.join(refdir, f'{system}.yaml')
    if not os.path.exists(path):
        known = sorted(f[:-5] for f in os.listdir(refdir)
                       if f.endswith('.yaml')) if os.path.isdir(refdir) else []
        raise ReferenceError(
            f'{path}: no reference file for system {system!r} '
            f'(references exist for: {", ".join(known) or "none"}); '
            f'record one with scripts/calibrate')
    ref = load(path)
    if ref.system != system:
        raise ReferenceError(f'{path}: system is {ref.system!r}, '
                             f'expected {system!r}')
    return ref


def _sort_key(transport, collective, nodes, gpus_per_node, algo='default'):
    return (TRANSPORTS.index(transport) if transport in TRANSPORTS else 99,
            collective, nodes, gpus_per_node, algo)


def _is_content(line):
    text = line.strip()
    return bool(text) and not text.startswith('#')


def _indent(line):
    return len(line) - len(line.lstrip(' '))


class Editor:
    """Edits of a reference file that keep everything they do not change:
    the file is read with ruamel.yaml's round-trip loader, the entries that
    change are edited in place (their comments, key order and quoting kept)
    and only their lines are written anew; every other line stays byte for
    byte.  Where an edit cannot be placed by lines (a new partition, flow
    style ``entries: [...]``, a changed ``gdr``) the whole document is
    dumped by ruamel.yaml, which keeps comments and order but may re-wrap
    long lines.  :meth:`render` validates the result with :func:`parse`."""

    def __init__(self, path, system):
        try:
            from ruamel.yaml import YAML
            from ruamel.yaml.comments import CommentedMap
        except ImportError:
            raise ReferenceError(f'{path}: cannot edit: the Python module '
                                 f'ruamel.yaml is missing (pip install '
                                 f'ccl-health, or scripts/run, installs '
                                 f'it)') from None
        self.path, self.system = path, system
        try:
            with open(path) as fp:
                self.old_text = fp.read()
        except FileNotFoundError:
            self.old_text = None
        except OSError as err:
            raise ReferenceError(f'{path}: cannot read: {err.strerror}') \
                from None
        except UnicodeDecodeError:
            raise ReferenceError(f'{path}: not a reference file (not text: '
                                 f'a binary file?)') from None
        self._yaml = YAML()
        self._yaml.preserve_quotes = True
        self._yaml.width = 100
        self._yaml.indent(mapping=2, sequence=2, offset=0)
        self._whole = False       # dump the whole document at the end
        self._splices = []        # (first line, end line, order, new lines)
        self._spans = {}          # see _entry_spans
        self.changes = []         # one line per change, for people
        if self.old_text is None:
            self.current = None
            self.doc = CommentedMap([('system', system),
                                     ('partitions', CommentedMap())])
            self.doc.yaml_set_start_comment(
                f'ccl-health reference for {system}; recorded by '
                f'scripts/calibrate on {datetime.date.today().isoformat()}')
            self._whole = True
            self.lines = []
            return
        # refuse to extend a broken file: it stays as it is
        self.current = parse(self.old_text, path)
        if self.current.system != system:
            raise ReferenceError(f'{path}: system is '
                                 f'{self.current.system!r}, expected '
                                 f'{system!r}')
        self.doc = self._yaml.load(self.old_text)
        # anchors and aliases: an entry rendered on its own would define
        # its anchor again (or lose it under an alias elsewhere); ruamel
        # dumps the whole document with each anchor once
        from ruamel.yaml.events import AliasEvent
        if any(isinstance(e, AliasEvent)
               for e in self._yaml.parse(self.old_text)):
            self._whole = True
        self.lines = self.old_text.splitlines(keepends=True)
        if self.lines and not self.lines[-1].endswith('\n'):
            self.lines[-1] += '\n'
        self._yaml.indent(**self._indentation())

    def _indentation(self):
        """The file's own indentation, as ruamel.yaml's ``indent()`` takes
        it: mapping indent, sequence item indent, dash offset."""
        out = {'mapping': 2, 'sequence': 2, 'offset': 0}
        parts = self.doc['partitions']
        try:
            top = self.doc.lc.key('partitions')[1]
            for name, part in parts.items():
                out['mapping'] = parts.lc.key(name)[1] - top
                break
            for part in parts.values():
                seq = (part or {}).get('entries')
                if seq and not seq.fa.flow_style():
                    parent = part.lc.key('entries')[1]
                    line, col = seq.lc.item(0)
                    out['offset'] = _indent(self.lines[line]) - parent
                    out['sequence'] = col - parent
                    break
        except (AttributeError, KeyError, TypeError, IndexError):
            pass
        if out['mapping'] < 1 or out['sequence'] < out['offset'] + 2:
            out = {'mapping': 2, 'sequence': 2, 'offset': 0}
        return out

    # -- where things are in the old text
    def _entry_spans(self, seq):
        """``{id(entry mapping): (first line, last content line)}`` of the
        entries of a block sequence as they are in the old text (0-based,
        inclusive), taken before the first edit of the sequence."""
        if id(seq) in self._spans:
            return self._spans[id(seq)]
        starts = [seq.lc.item(i)[0] for i in range(len(seq))]
        spans = {}
        for i, first in enumerate(starts):
            dash = _indent(self.lines[first])
            if i + 1 < len(starts):
                stop = starts[i + 1]
            else:
                stop = next((n for n in range(first + 1, len(self.lines))
                             if _is_content(self.lines[n]) and
                             _indent(self.lines[n]) <= dash),
                            len(self.lines))
            last = max(n for n in range(first, stop)
                       if _is_content(self.lines[n]))
            spans[id(seq[i])] = (first, last)
        self._spans[id(seq)] = spans
        return spans

    def _render_entry(self, partition, entry_map, dash_col, span=None):
        """The lines of ``entry_map`` as an item of ``partitions.
        <partition>.entries``, at column ``dash_col``; None when ruamel
        would not put it there.  Whole-line comments that ruamel carries
        along from outside the entry's old lines ``span`` (it attaches the
        comment above the next entry to this one's last key) are left out:
        they stay where they are."""
        from ruamel.yaml.comments import CommentedMap, CommentedSeq
        wrap = CommentedMap([('partitions', CommentedMap([
            (partition, CommentedMap([('entries',
                                       CommentedSeq([entry_map]))]))]))])
        out = io.StringIO()
        self._yaml.dump(wrap, out)
        lines = out.getvalue().splitlines(keepends=True)[3:]
        own = {ln.strip() for ln in self.lines[span[0]:span[1] + 1]} \
            if span else set()
        lines = [ln for ln in lines if _is_content(ln) or
                 (ln.strip() and ln.strip() in own)]
        if not lines or _indent(lines[0]) != dash_col or \
                not lines[0].lstrip().startswith('- '):
            return None
        return lines

    # -- edits
    def put(self, partition, entry, *, merge=True, tolerance=None,
            source=None):
        """Write ``entry`` (an :class:`Entry`) under ``partition``.  A new
        key is inserted in order.  An existing entry is replaced whole
        (``merge=False``) or updated (``merge=True``): its busbw per
        measured size, keeping sizes not measured, curated per-size
        tolerances (the wider of the curated and the measured noise), its
        tolerance unless ``tolerance`` is given, and its source, to which
        the calibration's provenance (``entry.source``) is appended unless
        ``source`` replaces it."""
        from ruamel.yaml.comments import CommentedMap
        parts = self.doc['partitions']
        if partition not in parts:
            parts[partition] = CommentedMap([('entries', [])])
            self._whole = True
        part = parts[partition]
        if part is None or 'entries' not in part:
            part = parts[partition] = part or CommentedMap()
            part['entries'] = []
            self._whole = True
        seq = part['entries']
        keys = [label_key(m) for m in seq]
        key = entry.key()
        flow = not hasattr(seq, 'fa') or seq.fa.flow_style() or not seq
        if flow:
            # no lines to splice into (``entries: []``, ``[...]``): the
            # whole document is dumped, else the edit would be lost
            self._whole = True
        if key in keys:
            i = keys.index(key)
            if merge:
                what = _merge(seq[i], entry, tolerance, source)
            else:
                seq[i] = _entry_map(entry)
                what = 'replaced'
            self.changes.append(f'{partition} {entry.label()}: {what}')
            if not self._whole and not flow:
                span = self._entry_spans(seq).get(id(seq[i]))
                lines = span and self._render_entry(
                    partition, seq[i], _indent(self.lines[span[0]]), span)
                if not lines:
                    self._whole = True
                else:
                    self._splices.append((span[0], span[1] + 1, (1,), lines))
            return
        new = _entry_map(entry)
        pos = next((j for j, k in enumerate(keys)
                    if _sort_key(*k) > _sort_key(*key)), len(keys))
        self.changes.append(f'{partition} {entry.label()}: new entry')
        if not self._whole and not flow:
            spans = self._entry_spans(seq)
            before = [spans[id(m)] for m in seq[:pos] if id(m) in spans]
            after = [spans[id(m)] for m in seq[pos:] if id(m) in spans]
            at = before[-1][1] + 1 if before else after[0][0]
            dash = _indent(self.lines[(before[-1] if before
                                       else after[0])[0]])
            lines = self._render_entry(partition, new, dash)
            if lines is None:
                self._whole = True
            else:
                self._splices.append((at, at, (0, _sort_key(*key)), lines))
        seq.insert(pos, new)

    def set_gdr(self, partition, supported, reason=''):
        """Declare GPUDirect RDMA (un)supported on ``partition``."""
        from ruamel.yaml.comments import CommentedMap
        parts = self.doc['partitions']
        if partition not in parts or parts[partition] is None:
            parts[partition] = CommentedMap()
        part = parts[partition]
        gdr = CommentedMap([('supported', supported)])
        if reason:
            gdr['reason'] = reason
        gdr.fa.set_flow_style()
        old = part.get('gdr')
        if old is not None and dict(old) == dict(gdr):
            return
        if old is None:
            part.insert(0, 'gdr', gdr)
        else:
            part['gdr'] = gdr
        self._whole = True
        self.changes.append(f'{partition}: gdr ' + (
            'supported' if supported else f'unsupported: {reason}'))

    def render(self):
        """The new text of the file, validated as loading validates it."""
        if self._whole:
            out = io.StringIO()
            self._yaml.dump(self.doc, out)
            text = out.getvalue()
        else:
            lines = list(self.lines)
            # from the end, so that line numbers stay right; new entries
            # at one place in key order
            for first, end, _, new in sorted(
                    self._splices, key=lambda s: (s[0], s[2]),
                    reverse=True):
                lines[first:end] = new
            text = ''.join(lines)
        ref = parse(text, self.path)
        if ref.system != self.system:
            raise ReferenceError(f'{self.path}: system is {ref.system!r}, '
                                 f'expected {self.system!r}')
        return text

    def diff(self, text):
        """A unified diff of the file from its old text to ``text``."""
        return ''.join(difflib.unified_diff(
            (self.old_text or '').splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=self.path if self.old_text is not None else '/dev/null',
            tofile=self.path))


def label_key(raw):
    """The key of an entry mapping as read from the file."""
    return (raw['transport'], raw['collective'], raw['nodes'],
            raw['gpus_per_node'], raw.get('algo', 'default'))


def _pair(value, tol):
    from ruamel.yaml.comments import CommentedSeq
    seq = CommentedSeq([value, tol])
    seq.fa.set_flow_style()
    return seq


def _entry_map(entry):
    """A new entry as ruamel.yaml mappings (busbw one size a line)."""
    from ruamel.yaml.comments import CommentedMap
    d = entry.as_yaml()
    busbw = CommentedMap()
    for size, val in sorted(entry.busbw.items()):
        busbw[format_size(size)] = (
            _pair(round(val, 2), entry.size_tolerance[size])
            if size in entry.size_tolerance else round(val, 2))
    d['busbw'] = busbw
    return CommentedMap(d.items())


_THEN = '; recalibrated: '


def _merge(old, entry, tolerance, source):
    """Update the ruamel mapping ``old`` of an entry from the calibrated
    ``entry`` (see :meth:`Editor.put`); a one-line summary."""
    from ruamel.yaml.scalarstring import ScalarString
    if tolerance is not None:
        old['tolerance'] = tolerance
    tol = float(old['tolerance'])
    busbw = old['busbw']
    if busbw.fa.flow_style() and len(busbw) + len(entry.busbw) > 8:
        busbw.fa.set_block_style()      # one size a line: a readable diff
    by_size = {parse_size(k): k for k in busbw}
    kept_tol, added = [], []
    for size, val in sorted(entry.busbw.items()):
        val = round(val, 2)
        k = by_size.get(size)
        curated = None
        if k is not None and isinstance(busbw[k], list):
            curated = float(busbw[k][1])
        measured = entry.size_tolerance.get(size)
        wants = [t for t in (curated, measured) if t is not None]
        own = max(wants) if wants else None
        if own is not None and curated is None and own <= tol:
            own = None
        if k is None:
            pos = next((j for j, kk in enumerate(busbw)
                        if parse_size(kk) > size), len(busbw))
            busbw.insert(pos, format_size(size),
                         val if own is None else _pair(val, own))
            added.append(format_size(size))
        elif own is None:
            busbw[k] = val
        elif isinstance(busbw[k], list):
            busbw[k][0], busbw[k][1] = val, own
            if curated is not None:
                kept_tol.append(f'{k} {own:g}')
        else:
            busbw[k] = _pair(val, own)
    if source is not None:
        new = source
    else:
        # the curated source stays; an earlier calibration's note is
        # replaced by this one's
        base = str(old['source']).split(_THEN)[0].rstrip().rstrip(';')
        new = f'{base}{_THEN}{entry.source}'
    old_source = old['source']
    old['source'] = type(old_source)(new) if isinstance(
        old_source, ScalarString) else new
    kept = sorted(set(by_size) - set(entry.busbw))
    return ('updated ' + f'{len(entry.busbw)} size(s)'
            + (f', new: {" ".join(added)}' if added else '')
            + (f'; kept curated tolerance(s): {", ".join(kept_tol)}'
               if kept_tol else '')
            + (f'; kept unmeasured: '
               f'{" ".join(format_size(s) for s in kept)}' if kept else '')
            + f'; tolerance {tol:g}')


def write_atomic(path, text):
    """Replace the file at ``path`` with ``text`` atomically: a temporary
    file in the same folder, flushed to disk, renamed over it (the old
    file's permissions kept).  A reader sees the old file or the new one,
    never a part."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=folder, suffix='.tmp',
                               prefix=f'.{os.path.basename(path)}.')
    try:
        with os.fdopen(fd, 'w') as fp:
            fp.write(text)
            fp.flush()
            os.fsync(fp.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def lock_path(path):
    """The sidecar lock file of the reference file ``path``:
    ``<folder>/.<name>.lock``."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f'.{name}.lock')


@contextlib.contextmanager
def locked(path):
    """Hold the inter-process lock of the reference file ``path`` (its
    sidecar :func:`lock_path`) around a read-modify-write: two calibrations
    of one file at once run one after the other, the second reading what
    the first wrote."""
    lock = lock_path(path)
    try:
        os.makedirs(os.path.dirname(lock), exist_ok=True)
    except OSError as err:
        raise ReferenceError(f'{os.path.dirname(lock)}: cannot create the '
                             f'folder: {err.strerror}') from None
    try:
        import fasteners
    except ImportError:                # without ReFrame: the same flock
        fasteners = None
    try:
        if fasteners is not None:
            ipl = fasteners.InterProcessLock(lock)
            ipl.acquire()
        else:
            import fcntl
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError as err:
        raise ReferenceError(f'{lock}: cannot lock: {err.strerror}') \
            from None
    try:
        yield
    finally:
        if fasteners is not None:
            ipl.release()
        else:
            os.close(fd)


def upsert(path, system, partition, entry, gdr=None):
    """Write ``entry`` into the reference file at ``path`` (created when
    missing), replacing the entry with the same key; everything else in the
    file is kept (comments too), the result validated before it is written
    atomically.  Returns the file as loaded."""
    with locked(path):
        ed = Editor(path, system)
        if gdr is not None:
            ed.set_gdr(partition, gdr['supported'], gdr.get('reason', ''))
        ed.put(partition, entry, merge=False)
        text = ed.render()
        write_atomic(path, text)
    return parse(text, path)
