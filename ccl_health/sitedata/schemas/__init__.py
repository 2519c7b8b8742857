"""The declared schemas of the suite's data files (JSON Schema, Draft
2020-12): ``site.schema.json`` for ``site/<system>.yaml`` and
``reference.schema.json`` for ``reference/<system>.yaml``.

:func:`load_yaml` reads a file strictly (a key given twice is an error, not
the last one silently winning); :func:`validate` checks a document against
its schema with the ``jsonschema`` library and raises one line per error
that names the file and the key path, e.g.
``site/frontier.yaml: transports.net-plugin.ld_library_path: '/opt/x' is
not of type 'array'``."""

import difflib
import functools
import hashlib
import json
import math
import os

import yaml

from ccl_health import CclHealthError, outputs, safefile

HERE = os.path.dirname(os.path.abspath(__file__))

#: at most this many errors are named in one message
MAX_ERRORS = 5


class _Duplicate(yaml.YAMLError):
    pass


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping."""


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            continue      # the base constructor reports it
        if key in seen:
            raise _Duplicate(f'key {key!r} given twice (lines '
                             f'{seen[key] + 1} and '
                             f'{key_node.start_mark.line + 1})')
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

if hasattr(yaml, 'CSafeLoader'):
    class _FastLoader(yaml.CSafeLoader):
        """The same, through libyaml's parser (issue 42: the hook reads its
        site and reference files on every run; PyYAML's own parser is most
        of that time).  A document it refuses is read again by
        :class:`_StrictLoader`, whose words name the fault."""

    _FastLoader.add_constructor(
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
else:                   # PyYAML built without libyaml
    _FastLoader = None


#: the most nodes a document may hold once its aliases are expanded: a
#: site or reference file has a few thousand; nested aliases ("billion
#: laughs": 3.8 KB that expand to 10^9 nodes) hang whoever walks them
MAX_EXPANDED_NODES = 200_000


def _expanded_nodes(node, memo, limit):
    """How many nodes ``node`` stands for with its aliases expanded
    (counted once per node object: an alias is the node it names), up to
    just past ``limit``."""
    known = memo.get(id(node))
    if known is not None:
        return known
    memo[id(node)] = limit + 1       # an alias of itself expands forever
    if isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = node.value
    else:
        children = ()
    total = 1
    for child in children:
        total += _expanded_nodes(child, memo, limit)
        if total > limit:
            break
    memo[id(node)] = total
    return total


def load_yaml(text, path, error=CclHealthError):
    """The YAML document in ``text`` (``path`` names it in errors); one
    whose aliases expand past :data:`MAX_EXPANDED_NODES` nodes is an
    error, found before anything is built from it."""
    if _FastLoader is not None:
        try:
            return _load(_FastLoader, text, path, error)
        except (yaml.YAMLError, RecursionError):
            pass            # named below, in PyYAML's own words
    try:
        return _load(_StrictLoader, text, path, error)
    except yaml.YAMLError as err:
        one_line = ' '.join(str(err).replace('"<unicode string>", ', '')
                            .split())
        raise error(f'{path}: not valid YAML: {one_line}') from None
    except RecursionError:
        raise error(f'{path}: nested too deeply to be a site or reference '
                    f'file') from None


def _load(loader_class, text, path, error):
    """The document through ``loader_class``; its YAML errors raised as
    they are."""
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is not None and _expanded_nodes(
                node, {}, MAX_EXPANDED_NODES) > MAX_EXPANDED_NODES:
            raise error(f'{path}: its aliases expand to more than '
                        f'{MAX_EXPANDED_NODES:,} YAML nodes (nested '
                        f'aliases?): write the values out or use fewer '
                        f'levels of aliases')
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def _jsonschema():
    try:
        import jsonschema
    except ImportError:
        raise CclHealthError('the Python module jsonschema is missing '
                             '(pip install ccl-health, or scripts/run, '
                             'installs it)') \
            from None
    return jsonschema


@functools.lru_cache(maxsize=None)
def schema(name):
    """The schema ``<name>.schema.json``, checked against its meta-schema."""
    jsonschema = _jsonschema()
    with open(os.path.join(HERE, f'{name}.schema.json')) as fp:
        doc = json.load(fp)
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


def key_path(parts):
    """``['transports', 'intra', 'env']`` -> ``transports.intra.env``; list
    indices as ``[0]``."""
    out = ''
    for p in parts:
        if isinstance(p, int) and not isinstance(p, bool):
            out += f'[{p}]'
        else:
            out += f'{"." if out else ""}{p}'
    return out or 'top level'


def _not_finite(doc, parts=()):
    """``(path parts, value)`` of every nan / inf number in ``doc``."""
    if isinstance(doc, float) and not math.isfinite(doc):
        yield list(parts), doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield from _not_finite(v, parts + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _not_finite(v, parts + (i,))


_DESCRIBED = ('anyOf', 'oneOf', 'type', 'minimum', 'exclusiveMinimum',
              'maximum', 'exclusiveMaximum', 'pattern', 'minLength')


def _message(err):
    if err.validator in _DESCRIBED and 'description' in err.schema and \
            '$schema' not in err.schema:      # not the whole file's
        return f'{err.instance!r} is not {err.schema["description"]}'
    if err.validator == 'additionalProperties' and \
            err.schema.get('additionalProperties') is False:
        props = sorted(err.schema.get('properties', {}))
        near = [f'{hit[0]!r} for {key!r}' for key in err.instance
                if key not in props and isinstance(key, str)
                for hit in [difflib.get_close_matches(key, props, n=1)]
                if hit] if isinstance(err.instance, dict) else []
        return (f'{err.message} (known: {", ".join(props)})' +
                (f'; did you mean {", ".join(near)}?' if near else ''))
    return err.message


#: the digests of documents that passed their schema, in this user's state
#: folder (:func:`ccl_health.outputs.state_dir`): the hook checks the same
#: site and reference files on every run, and what passed once needs no
#: ``jsonschema`` (a fifth of the hook's start-up) until it changes
PASSED_FILE = 'schema-passed'
#: the digests kept (the newest)
PASSED_KEEP = 64


def passed_digest(kind, doc, *texts):
    """The digest of ``doc`` checked as ``kind`` against ``texts`` (the
    schema's own text: a changed schema checks everything again)."""
    h = hashlib.sha256(kind.encode())
    for text in texts:
        h.update(text if isinstance(text, bytes) else str(text).encode())
        h.update(b'\0')
    h.update(repr(_canonical(doc)).encode())
    return h.hexdigest()


def _canonical(value):
    """``value`` as nested tuples that keep every type (``1`` and ``'1'``
    are two keys; a YAML file may hold both), mappings in one order."""
    if isinstance(value, dict):
        return ('dict', tuple(sorted(
            ((type(k).__name__, repr(k)), _canonical(v))
            for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_canonical(v) for v in value))
    return (type(value).__name__, repr(value))


def _passed_path():
    return os.path.join(outputs.state_dir(), PASSED_FILE)


def passed_before(digest):
    """Whether a document of this digest passed before; only a file of
    this user in a folder of its own counts (another user's planted file,
    a link: checked again)."""
    path = _passed_path()
    try:
        if safefile.unsafe_reason(os.path.dirname(path)):
            return False
        text = safefile.read_own(path, 'record of checked files')
    except (CclHealthError, OSError):
        return False
    return bool(text) and digest in text.split()


def remember_passed(digest):
    """Note that a document of this digest passed (never in the way: a
    state folder that cannot be written is no error)."""
    path = _passed_path()
    try:
        folder = os.path.dirname(path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if safefile.unsafe_reason(folder):
            return
        kept = [d for d in (safefile.read_own(path) or '').split()
                if d != digest][-(PASSED_KEEP - 1):]
        safefile.write_atomic(path, '\n'.join(kept + [digest]) + '\n',
                              mode=0o600)
    except (CclHealthError, OSError):
        pass


def _schema_text(name):
    with open(os.path.join(HERE, f'{name}.schema.json'), 'rb') as fp:
        return fp.read()


def errors(doc, name):
    """Every problem of ``doc`` against schema ``name`` as ``(key path,
    message)``, by key path; nan / inf numbers first (JSON Schema has no way
    to refuse them).  A document that passed before as it is now
    (:func:`passed_before`) is not checked again."""
    out = [(key_path(parts), f'{val!r} is not a finite number')
           for parts, val in _not_finite(doc)]
    digest = passed_digest('schema:' + name, doc, _schema_text(name))
    if not out and passed_before(digest):
        return []
    out = _errors(doc, name, out)
    if not out:
        remember_passed(digest)
    return out


def _errors(doc, name, out):
    jsonschema = _jsonschema()
    validator = jsonschema.Draft202012Validator(schema(name))
    missing = {}
    for e in sorted(validator.iter_errors(doc),
                    key=lambda e: [str(p) for p in e.absolute_path]):
        where = key_path(e.absolute_path)
        if e.validator == 'required':
            if where not in missing:
                missing[where] = []
                out.append((where, missing[where]))
            missing[where].append(repr(e.message.split(' is a required')[0]
                                       .strip("'")))
        else:
            out.append((where, _message(e)))
    return [(where, msg if isinstance(msg, str) else
             f'missing key{"s" if len(msg) > 1 else ""} {", ".join(msg)}')
            for where, msg in out]


def validate(doc, name, path, error=CclHealthError):
    """Raise ``error`` naming the file and the key of each problem of
    ``doc`` against schema ``name`` (the first :data:`MAX_ERRORS`, one
    line): ``site/x.yaml: env.FOO: None is not a string ...``."""
    found = errors(doc, name)
    if found:
        more = len(found) - MAX_ERRORS
        raise error(f'{path}: ' + '; '.join(
            f'{where}: {msg}' for where, msg in found[:MAX_ERRORS]) +
            (f' (and {more} more)' if more > 0 else ''))


