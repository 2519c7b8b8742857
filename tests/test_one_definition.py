"""One definition each (issue 37): the transport asked for, the verdict
groups and the history key are spelled in one module of the package, and
every other module takes them from there.  Read from the package's
source with ``ast`` (function-level code too), so that a second copy
fails here before it can disagree with the first."""

import ast
import os
import re

import pytest

from conftest import REPO
from ccl_health.judge.series import KEY
from ccl_health.judge.verdicts import NAMES

PACKAGE = os.path.join(REPO, 'ccl_health')
#: the homes: the one module (and function) allowed to spell each
VERDICTS_HOME = 'ccl_health/judge/verdicts.py'
KEY_HOME = 'ccl_health/judge/series.py'
GDR_HOME = ('ccl_health/sitedata/transports.py', 'asked_from_env')

_SQL_LIST = re.compile(r"\(\s*'[^']*'(?:\s*,\s*'[^']*')*\s*\)")
_SQL_NAMES = re.compile(r'\(([a-z_]+(?:\s*,\s*[a-z_]+)+)')


def _sources():
    for d, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(x for x in dirs if x != '__pycache__')
        for f in sorted(files):
            if f.endswith('.py'):
                path = os.path.join(d, f)
                rel = os.path.relpath(path, REPO).replace(os.sep, '/')
                with open(path) as fp:
                    yield rel, ast.parse(fp.read(), rel)


def _with_functions(tree):
    """Every node of ``tree`` with the name of the function it is in."""
    def walk(node, fn):
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            yield child, name
            yield from walk(child, name)
    yield from walk(tree, None)


def _strings(node):
    """The string constants of a tuple, list or set literal, or None when
    it holds anything else."""
    if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return None
    out = [e.value for e in node.elts if isinstance(e, ast.Constant)
           and isinstance(e.value, str)]
    return out if len(out) == len(node.elts) else None


def _docstrings(tree):
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body and \
                isinstance(node.body[0], ast.Expr) and \
                isinstance(node.body[0].value, ast.Constant):
            out.add(id(node.body[0].value))
    return out


def verdict_group_copies(sources):
    """Where a module other than the verdicts' spells a group of verdicts:
    a literal of two or more verdict names, an SQL list of verdict names,
    or a group derived again from :class:`Verdict` (a comprehension over
    it)."""
    names = set(NAMES)
    found = []
    for rel, tree in sources:
        if rel == VERDICTS_HOME:
            continue
        docs = _docstrings(tree)
        for node, _ in _with_functions(tree):
            where = f'{rel}:{getattr(node, "lineno", "?")}'
            s = _strings(node)
            if s and len(s) >= 2 and set(s) <= names:
                found.append(f'{where} {tuple(s)}')
            if isinstance(node, ast.Constant) and isinstance(
                    node.value, str) and id(node) not in docs:
                for m in _SQL_LIST.finditer(node.value):
                    quoted = re.findall(r"'([^']*)'", m.group(0))
                    if set(quoted) <= names:
                        found.append(f'{where} SQL {m.group(0)}')
            if isinstance(node, ast.comprehension):
                it = node.iter
                if (isinstance(it, ast.Name) and it.id == 'Verdict') or (
                        isinstance(it, ast.Attribute) and
                        it.attr == 'Verdict'):
                    found.append(f'{rel}:{it.lineno} a group derived from '
                                 f'Verdict')
    return found


def gdr_readers(sources):
    """Where ``NCCL_NET_GDR_LEVEL`` is named in code outside the one rule
    (docstrings and comments aside)."""
    found = []
    for rel, tree in sources:
        docs = _docstrings(tree)
        for node, fn in _with_functions(tree):
            if isinstance(node, ast.Constant) and isinstance(
                    node.value, str) and id(node) not in docs and \
                    'NCCL_NET_GDR_LEVEL' in node.value and \
                    (rel, fn) != GDR_HOME:
                found.append(f'{rel}:{node.lineno} in {fn or "the module"}')
    return found


def key_copies(sources):
    """Where a module other than the series' spells the history key's
    columns: a literal of every column of :data:`KEY` (and nothing but the
    series' columns and ``time``), or the same as an SQL list."""
    # the configuration's columns, the kind and node of a series, a time
    key, allowed = set(KEY), set(KEY) | {'kind', 'node', 'time'}
    found = []
    for rel, tree in sources:
        if rel == KEY_HOME:
            continue
        docs = _docstrings(tree)
        for node, _ in _with_functions(tree):
            s = _strings(node)
            if s and key <= set(s) <= allowed:
                found.append(f'{rel}:{node.lineno} {tuple(s)}')
            if isinstance(node, ast.Constant) and isinstance(
                    node.value, str) and id(node) not in docs:
                for m in _SQL_NAMES.finditer(node.value):
                    cols = {c.strip() for c in m.group(1).split(',')}
                    if key <= cols <= allowed:
                        found.append(f'{rel}:{node.lineno} SQL ({m.group(1)}')
    return found


@pytest.fixture(scope='module')
def sources():
    return list(_sources())


def test_one_definition_of_the_verdict_groups(sources):
    assert verdict_group_copies(sources) == []


def test_one_reading_of_the_gdr_level(sources):
    assert gdr_readers(sources) == []


def test_one_definition_of_the_history_key(sources):
    assert key_copies(sources) == []


# -- the scanner finds what it is meant to find ------------------------------
def _parse(text):
    return [('ccl_health/x.py', ast.parse(text))]


@pytest.mark.parametrize('text', [
    "GOOD = ('pass', 'skipped')",
    "def f(v):\n    return v in ['fallback', 'below-reference']",
    "SQL = \"verdict NOT IN ('pass', 'skipped')\"",
    "def f(w):\n    return f\"x {w} AND verdict IN ('pass', 'drop')\"",
    "GOOD = tuple(v.value for v in Verdict if v.good)",
    "BAD = {v for v in V.Verdict if v.failed}",
])
def test_the_scanner_finds_a_verdict_group(text):
    assert verdict_group_copies(_parse(text))


@pytest.mark.parametrize('text', [
    "X = ('pass',)",                        # one verdict is no group
    "MODES = ('pass', 'retry', 'stop')",    # not every name a verdict
    "def f():\n    '''verdict IN ('pass', 'skipped')'''",
])
def test_the_scanner_leaves_what_is_no_group(text):
    assert verdict_group_copies(_parse(text)) == []


@pytest.mark.parametrize('text', [
    "def asked(env):\n    return env.get('NCCL_NET_GDR_LEVEL')",
    "GDR = 'NCCL_NET_GDR_LEVEL'",
    "def f(ev):\n    return ev.env['NCCL_NET_GDR_LEVEL'] != 'LOC'",
])
def test_the_scanner_finds_a_gdr_reader(text):
    assert gdr_readers(_parse(text))


@pytest.mark.parametrize('text', [
    "G = ('system', 'partition', 'collective', 'transport', 'nodes', "
    "'ranks', 'algo')",
    "S = ['system', 'partition', 'kind', 'transport', 'collective', "
    "'nodes', 'ranks', 'algo', 'node']",
    "SQL = 'CREATE INDEX i ON cases (system, partition, transport, "
    "collective, nodes, ranks, algo, time)'",
])
def test_the_scanner_finds_a_history_key(text):
    assert key_copies(_parse(text))


def test_the_scanner_leaves_other_column_lists():
    assert key_copies(_parse(
        "ACCEPT = ('system', 'partition', 'transport', 'collective', "
        "'nodes', 'ranks', 'algo', 'kind', 'size')\n"
        "LIGHT = ('id', 'system', 'partition')")) == []
