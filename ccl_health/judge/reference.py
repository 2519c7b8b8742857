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
            noise: {1GiB: 0.004, 1MiB: 0.031}   # written by scripts/calibrate:
                                      # each size's run-to-run noise (a
                                      # fraction of its value), beside it
            calibrated: {runs: 5, newest: <run id>, time: <its time>}

An entry that ``scripts/calibrate`` wrote carries ``noise`` and
``calibrated``: it is a *level* (:attr:`Entry.calibrated`), what drops and
drifts are judged from after its newest run, wherever the performance
database holds no newer one (:mod:`ccl_health.db.levels`).  An entry
written by hand has neither: a published expectation, not a level.

Every value carries its source.  The file is validated against
``ccl_health/sitedata/schemas/reference.schema.json`` (JSON Schema, with the
``jsonschema`` library), and then for what a schema cannot say: sizes that
parse, one size named once (``2GiB`` and ``2048MiB`` are one size), no nan /
inf, one entry per key.  A malformed file is an error that names the file and
the key.  A key without an entry is explained by
:meth:`SystemReference.missing_reason`.  The editing of reference files
(what ``scripts/calibrate`` writes) is in
:mod:`ccl_health.judge.reference_file`.
"""

import dataclasses
import difflib
import os
from typing import Dict, Optional

from ccl_health import CclHealthError, read_text
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
    #: the relative run-to-run noise of each calibrated size (what
    #: ``scripts/calibrate`` measured, beside the value)
    noise: Dict[int, float] = dataclasses.field(default_factory=dict)
    #: the calibration the values are (``{'runs': n, 'newest': run id,
    #: 'time': its time}``), or None: an entry written by hand
    calibrated: Optional[dict] = None

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
        if self.noise:
            d['noise'] = {format_size(s): n
                          for s, n in sorted(self.noise.items())}
        if self.calibrated:
            d['calibrated'] = dict(self.calibrated)
        return d


@dataclasses.dataclass
class PeerCopy:
    """A partition's ``peer_copy``: the copy-engine GB/s of one direction
    of its GPU links (:mod:`ccl_health.evidence.copymatrix`), by kind (``gpu_to_gpu``,
    ``in_gpu``, ``host_to_gpu``, ``gpu_to_host``) and for single
    directions that differ (``pairs``, by the node's GPU indices), at one
    copy size, with one tolerance and its source."""
    size: int
    tolerance: float
    source: str
    gbps: Dict[str, float]
    pairs: Dict[tuple, float] = dataclasses.field(default_factory=dict)

    def expected(self, link, label=str):
        """The reference GB/s of a :class:`ccl_health.evidence.copymatrix.Link` (its GPU
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
    noise = {}
    for size, val in (raw.get('noise') or {}).items():
        try:
            nbytes = parse_size(size)
        except CclHealthError as err:
            raise ReferenceError(f'{path}: {where}.noise.{size}: {err}') \
                from None
        _need(nbytes in busbw, path, f'{where}.noise.{size}',
              'the noise of a size without a busbw value (each size\'s '
              'noise is beside its value)')
        _need(nbytes not in noise, path, f'{where}.noise',
              f'{format_size(nbytes)} named twice: keep one')
        noise[nbytes] = float(val)
    calibrated = raw.get('calibrated')
    _need(calibrated is None or noise, path, f'{where}.calibrated',
          'a calibration without the noise of its sizes (noise:)')
    return Entry(raw['transport'], raw['collective'], raw['nodes'],
                 raw['gpus_per_node'], float(raw['tolerance']),
                 raw['source'].strip(), busbw, raw.get('algo', 'default'),
                 size_tol, noise,
                 None if calibrated is None else {
                     'runs': int(calibrated['runs']),
                     'newest': str(calibrated['newest']),
                     'time': str(calibrated['time'])})


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
    return from_doc(schemas.load_yaml(text, path, ReferenceError), path)


def from_doc(doc, path='<reference>'):
    """A :class:`SystemReference` from the YAML document of a reference
    file (:func:`parse`)."""
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
    text = read_text(path, 'reference file', ReferenceError,
                     missing='reference file not found')
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
