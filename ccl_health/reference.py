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

Every value carries its source.  A malformed file is an error that names the
file and the key.
"""

import dataclasses
import datetime
import os
from typing import Dict

import yaml

from . import TRANSPORTS, CclHealthError
from .units import format_size, parse_size

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
class PartitionReference:
    name: str
    gdr_supported: bool = True
    gdr_reason: str = ''
    entries: list = dataclasses.field(default_factory=list)


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
    _need(isinstance(raw, dict), path, where, 'must be a mapping')
    known = {'transport', 'collective', 'nodes', 'gpus_per_node', 'algo',
             'tolerance', 'source', 'busbw'}
    unknown = set(raw) - known
    _need(not unknown, path, where,
          f'unknown key(s) {", ".join(sorted(unknown))}')
    for key in ('transport', 'collective', 'nodes', 'gpus_per_node',
                'tolerance', 'source', 'busbw'):
        _need(key in raw, path, where, f'missing key {key!r}')
    t = raw['transport']
    _need(t in TRANSPORTS, path, f'{where}.transport',
          f'unknown transport {t!r} (known: {", ".join(TRANSPORTS)})')
    for key in ('nodes', 'gpus_per_node'):
        v = raw[key]
        _need(isinstance(v, int) and not isinstance(v, bool) and v > 0,
              path, f'{where}.{key}', f'must be a positive integer, got {v!r}')
    tol = raw['tolerance']
    _need(_fraction(tol), path, f'{where}.tolerance',
          f'must be a fraction in [0, 1), got {tol!r}')
    _need(isinstance(raw['source'], str) and raw['source'].strip(), path,
          f'{where}.source', 'every value needs its source (a non-empty text)')
    bw = raw['busbw']
    _need(isinstance(bw, dict) and bw, path, f'{where}.busbw',
          'must be a non-empty mapping of size -> GB/s')
    busbw, size_tol = {}, {}
    for size, val in bw.items():
        try:
            nbytes = parse_size(size)
        except CclHealthError as err:
            raise ReferenceError(f'{path}: {where}.busbw.{size}: {err}') \
                from None
        if isinstance(val, list):
            _need(len(val) == 2 and _fraction(val[1]), path,
                  f'{where}.busbw.{size}', f'[value, tolerance] with a '
                  f'tolerance in [0, 1), got {val!r}')
            val, size_tol[nbytes] = val[0], float(val[1])
        _need(isinstance(val, (int, float)) and not isinstance(val, bool)
              and val > 0, path, f'{where}.busbw.{size}',
              f'must be a positive number (GB/s), got {val!r}')
        busbw[nbytes] = float(val)
    return Entry(t, str(raw['collective']), raw['nodes'],
                 raw['gpus_per_node'], float(tol), raw['source'].strip(),
                 busbw, str(raw.get('algo', 'default')), size_tol)


def _fraction(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and \
        0 <= x < 1


def parse(text, path='<reference>'):
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ReferenceError(f'{path}: not valid YAML: {err}') from None
    _need(isinstance(doc, dict), path, 'top level', 'must be a mapping')
    _need('system' in doc, path, 'top level', "missing key 'system'")
    parts = doc.get('partitions')
    _need(isinstance(parts, dict), path, 'partitions',
          'missing or not a mapping of partition name -> entries')
    out = {}
    for pname, praw in parts.items():
        where = f'partitions.{pname}'
        _need(isinstance(praw, dict), path, where, 'must be a mapping')
        gdr = praw.get('gdr', {'supported': True})
        _need(isinstance(gdr, dict) and isinstance(gdr.get('supported'), bool),
              path, f'{where}.gdr', "must be {supported: true|false, "
              "reason: ...}")
        if not gdr['supported']:
            _need(gdr.get('reason'), path, f'{where}.gdr.reason',
                  'say why GDR is unsupported')
        part = PartitionReference(pname, gdr['supported'],
                                  gdr.get('reason', ''))
        entries = praw.get('entries', [])
        _need(isinstance(entries, list), path, f'{where}.entries',
              'must be a list')
        seen = set()
        for i, raw in enumerate(entries):
            e = _entry(path, f'{where}.entries[{i}]', raw)
            _need(e.key() not in seen, path, f'{where}.entries[{i}]',
                  f'duplicate entry for {e.key()}')
            seen.add(e.key())
            part.entries.append(e)
        out[str(pname)] = part
    return SystemReference(str(doc['system']), path, out)


def load(path):
    try:
        with open(path) as fp:
            text = fp.read()
    except FileNotFoundError:
        raise ReferenceError(f'{path}: reference file not found') from None
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


def upsert(path, system, partition, entry, gdr=None):
    """Write ``entry`` into the reference file at ``path`` (created when
    missing), replacing the entry with the same key; everything else in the
    file is kept."""
    if os.path.exists(path):
        with open(path) as fp:
            doc = yaml.safe_load(fp) or {}
        parse(yaml.safe_dump(doc), path)   # refuse to extend a broken file
    else:
        doc = {'system': system, 'partitions': {}}
    part = doc.setdefault('partitions', {}).setdefault(partition, {})
    if gdr is not None:
        part['gdr'] = gdr
    entries = part.setdefault('entries', [])
    entries[:] = [e for e in entries
                  if _entry(path, 'entry', e).key() != entry.key()]
    entries.append(entry.as_yaml())
    entries.sort(key=lambda e: (TRANSPORTS.index(e['transport']),
                                e['collective'], e['nodes'],
                                e['gpus_per_node'], e.get('algo', '')))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f'{path}.tmp'
    with open(tmp, 'w') as fp:
        fp.write(f'# ccl-health reference for {system}; updated '
                 f'{datetime.date.today().isoformat()} by scripts/calibrate\n')
        yaml.safe_dump(doc, fp, sort_keys=False, width=100,
                       default_flow_style=None)
    os.replace(tmp, path)
    return load(path)
