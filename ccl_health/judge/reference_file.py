"""Editing of reference files (``reference/<system>.yaml``, the model in
:mod:`ccl_health.judge.reference`), as ``scripts/calibrate`` does it:
:class:`Editor` changes a file keeping what it does not change (comments,
sources, other entries), :func:`write_atomic` replaces it, :func:`locked`
holds its inter-process lock and :func:`upsert` does all three for one
entry."""

import contextlib
import datetime
import difflib
import io
import os

from ccl_health import safefile
from ccl_health.sitedata.transports import NAMES as TRANSPORTS
from ccl_health.judge.reference import ReferenceError, parse
from ccl_health.units import format_size, parse_size


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
    d.update(_level_maps(entry))
    return CommentedMap(d.items())


def _level_maps(entry):
    """The ``noise`` and ``calibrated`` mappings of a calibrated entry
    (flow style: one line each, beside ``busbw``), or none."""
    from ruamel.yaml.comments import CommentedMap
    out = {}
    if entry.noise:
        noise = CommentedMap((format_size(s), round(n, 4))
                             for s, n in sorted(entry.noise.items()))
        noise.fa.set_flow_style()
        out['noise'] = noise
    if entry.calibrated:
        cal = CommentedMap((k, entry.calibrated[k])
                           for k in ('runs', 'newest', 'time'))
        cal.fa.set_flow_style()
        out['calibrated'] = cal
    return out


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
    kept_tol, widened, added = [], [], []
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
            if curated is not None and own == curated:
                kept_tol.append(f'{k} {own:g}')
            elif curated is not None:
                widened.append(f'{k} {curated:g} -> {own:g}')
        else:
            busbw[k] = _pair(val, own)
    # the level of this calibration: the noise of the sizes it measured
    # (a size it did not measure is no longer calibrated) and its stamp
    for name, value in _level_maps(entry).items():
        if name in old:
            old[name] = value
        else:
            old.insert(list(old).index('busbw') + 1 if name == 'noise'
                       else len(old), name, value)
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
            + (f'; widened curated tolerance(s) to the measured noise: '
               f'{", ".join(widened)}' if widened else '')
            + (f'; kept unmeasured: '
               f'{" ".join(format_size(s) for s in kept)}' if kept else '')
            + f'; tolerance {tol:g}')


#: the one atomic writer (:mod:`ccl_health.safefile`)
write_atomic = safefile.write_atomic


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
        held = safefile.locked(lock)
        held.__enter__()
    except OSError as err:
        raise ReferenceError(f'{lock}: cannot lock: {err.strerror or err}') \
            from None
    try:
        yield
    finally:
        held.__exit__(None, None, None)


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
