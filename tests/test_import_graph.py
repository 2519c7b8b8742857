"""No import circle among the modules of ``ccl_health/`` (issue 29.9).

The graph is built from the source with :mod:`ast`, not by importing: every
``import x`` and ``from x import y`` at any depth of a file counts, inside
functions too (a lazy import hides a circle, it does not break it); only
the body of an ``if TYPE_CHECKING:`` is left out.  ``from pkg import name``
where ``name`` is a submodule is an import of that submodule; a package's
``__init__`` is a module of its own (``ccl_health.fleet``).  What two
modules both need belongs in a lower module that both import."""

import ast
import os

from conftest import REPO

PACKAGE = 'ccl_health'
ROOT = os.path.join(REPO, PACKAGE)


def module_files(root=ROOT, package=PACKAGE):
    """{dotted module name: path} of every module under ``root``; a
    package's ``__init__.py`` is named for the package."""
    found = {}
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        rel = os.path.relpath(top, os.path.dirname(root))
        prefix = rel.replace(os.sep, '.')
        for f in sorted(files):
            if not f.endswith('.py'):
                continue
            name = prefix if f == '__init__.py' else f'{prefix}.{f[:-3]}'
            found[name] = os.path.join(top, f)
    assert package in found, f'{root} is not a package'
    return found


def _is_type_checking(test):
    return (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING') or \
        (isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING')


def _imports(tree):
    """Every Import / ImportFrom node of ``tree``, at any depth, except
    those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name, modules):
    """The longest prefix of the dotted ``name`` that is a module of the
    package (None outside it)."""
    parts = name.split('.')
    while parts:
        candidate = '.'.join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(module, path, modules):
    """The modules of the package that ``module`` (at ``path``) imports."""
    with open(path, encoding='utf-8') as fp:
        tree = ast.parse(fp.read(), path)
    is_package = os.path.basename(path) == '__init__.py'
    out = set()
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, modules)
                if target:
                    out.add(target)
            continue
        if node.level:
            base = module.split('.')
            drop = node.level - 1 if is_package else node.level
            base = base[:len(base) - drop] if drop else base
            source = '.'.join(base + ([node.module] if node.module else []))
        else:
            source = node.module
        for alias in node.names:
            sub = f'{source}.{alias.name}'
            target = sub if sub in modules else _resolve(source, modules)
            if target:
                out.add(target)
    out.discard(module)   # `from . import x` inside pkg/__init__ names pkg.x
    return out


def import_graph(root=ROOT, package=PACKAGE):
    modules = module_files(root, package)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def strongly_connected(graph):
    """Tarjan: the components of more than one module (the circles)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def a_cycle(graph, component):
    """One circle through the first module of ``component``: the shortest
    path back to it, as a list of modules ending where it began."""
    start, inside = component[0], set(component)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(graph[path[-1]] & inside):
            if w == start:
                return path + [start]
            if w not in seen:
                seen.add(w)
                paths.append(path + [w])
    raise AssertionError(f'no cycle through {start}')


def test_the_graph_sees_lazy_and_relative_imports(tmp_path):
    """The walk finds an import inside a function, a ``from . import``
    of a submodule and a package __init__ as a module; it leaves out
    ``if TYPE_CHECKING:`` and imports from outside the package."""
    pkg = tmp_path / 'pkg'
    (pkg / 'sub').mkdir(parents=True)
    (pkg / '__init__.py').write_text('import os\n')
    (pkg / 'a.py').write_text(
        'from typing import TYPE_CHECKING\n'
        'if TYPE_CHECKING:\n    from pkg import c\n'
        'def f():\n    from .sub import b\n')
    (pkg / 'sub' / '__init__.py').write_text('from . import b\n')
    (pkg / 'sub' / 'b.py').write_text(
        'from .. import a, CONST\n'
        'class K:\n    def m(self):\n        import pkg.c as c\n')
    (pkg / 'c.py').write_text('from pkg.sub.b import K\n')
    graph = import_graph(str(pkg), 'pkg')
    assert graph == {'pkg': set(), 'pkg.a': {'pkg.sub.b'},
                     'pkg.sub': {'pkg.sub.b'},
                     'pkg.sub.b': {'pkg.a', 'pkg', 'pkg.c'},
                     'pkg.c': {'pkg.sub.b'}}
    circles = strongly_connected(graph)
    assert circles == [['pkg.a', 'pkg.c', 'pkg.sub.b']]
    assert a_cycle(graph, circles[0]) == ['pkg.a', 'pkg.sub.b', 'pkg.a']


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert 'ccl_health.judge.casejudge' in graph['ccl_health.hook.judging']
    assert len(graph) > 100


def test_no_import_circle():
    graph = import_graph()
    circles = strongly_connected(graph)
    report = [f'{len(c)} modules {c}; e.g. ' + ' -> '.join(a_cycle(graph, c))
              for c in circles]
    assert not circles, ('import circles (move what both need down into a '
                         'module both import):\n' + '\n'.join(report))


#: The layers of the package, lowest first (docs/layout.md, "Layers"):
#: each module is of the layer of the longest name here that it is or
#: lies under; the package itself (``ccl_health``, its ``__init__``) holds
#: only itself.  A module imports only from its own layer or below.
LAYERS = (
    ('small utilities', (
        'ccl_health', 'ccl_health.argnumbers', 'ccl_health.buildcache',
        'ccl_health.dburl', 'ccl_health.entry', 'ccl_health.helptext',
        'ccl_health.identity',
        'ccl_health.oneline', 'ccl_health.outputs', 'ccl_health.patterns',
        'ccl_health.progress', 'ccl_health.resources', 'ccl_health.safefile',
        'ccl_health.shell', 'ccl_health.stops', 'ccl_health.units')),
    ('sitedata', ('ccl_health.sitedata',)),
    ('evidence', ('ccl_health.evidence',)),
    ('judge', ('ccl_health.judge', 'ccl_health.summary')),
    ('db', ('ccl_health.db',)),
    ('report, fleet, hook, rfm, news', (
        'ccl_health.report', 'ccl_health.fleet', 'ccl_health.hook',
        'ccl_health.rfm', 'ccl_health.news', 'ccl_health.findings',
        'ccl_health.rehearsal', 'ccl_health.torch_bench')),
    ('commands', (
        'ccl_health.cli', 'ccl_health.reportcli', 'ccl_health.fleetcli',
        'ccl_health.hookcli', 'ccl_health.explain', 'ccl_health.nightly',
        'ccl_health.initsite', 'ccl_health.console',
        'ccl_health.fleet.__main__', 'ccl_health.hook.__main__',
        'ccl_health.report.__main__')),
)


def layer_of(module, layers=LAYERS):
    """(index, name) of the layer of ``module``; None when no name of
    ``layers`` holds it."""
    best = None
    for i, (name, prefixes) in enumerate(layers):
        for p in prefixes:
            exact = module == p
            under = '.' in p and module.startswith(p + '.')
            if (exact or under) and (best is None or len(p) > best[0]):
                best = (len(p), i, name)
    return None if best is None else best[1:]


def upward_imports(graph, layers=LAYERS):
    """``[(module, its layer, imported module, its layer)]``: each module
    that a module of a lower layer imports."""
    out = []
    for m in sorted(graph):
        mine = layer_of(m, layers)
        for t in sorted(graph[m]):
            theirs = layer_of(t, layers)
            if mine and theirs and theirs[0] > mine[0]:
                out.append((m, mine[1], t, theirs[1]))
    return out


def test_the_layer_check_finds_an_upward_import(tmp_path):
    """The check can fail: a lazy import of a higher layer inside a
    function is found, one of the same layer or below is not."""
    pkg = tmp_path / 'pkg'
    (pkg / 'low').mkdir(parents=True)
    (pkg / 'high').mkdir()
    for d in ('', 'low/', 'high/'):
        (pkg / d / '__init__.py').write_text('')
    (pkg / 'low' / 'a.py').write_text(
        'from pkg.low import b\n'
        'def f():\n    from pkg.high import c\n')
    (pkg / 'low' / 'b.py').write_text('import pkg\n')
    (pkg / 'high' / 'c.py').write_text('from pkg.low import a\n')
    layers = (('base', ('pkg',)), ('low', ('pkg.low',)),
              ('high', ('pkg.high',)))
    graph = import_graph(str(pkg), 'pkg')
    assert layer_of('pkg.low.a', layers) == (1, 'low')
    assert layer_of('pkg.lowly', layers) is None
    assert upward_imports(graph, layers) == [
        ('pkg.low.a', 'low', 'pkg.high.c', 'high')]


def test_every_module_has_a_layer():
    unmapped = [m for m in import_graph() if layer_of(m) is None]
    assert not unmapped, ('modules of no layer (name them in LAYERS and in '
                          'docs/layout.md "Layers"): ' + ', '.join(unmapped))


def test_nothing_imports_upward():
    """Nothing imports a module of a higher layer, function-level imports
    included: a lower layer that needs something from above takes it as
    an argument, or the thing moves down where it belongs."""
    found = upward_imports(import_graph())
    assert not found, 'imports of a higher layer:\n' + '\n'.join(
        f'{m} ({ml}) imports {t} ({tl})' for m, ml, t, tl in found)
