"""Print the requirements of ccl-health and of the extras named on the
command line, one a line, read from pyproject.toml (the single source of
the dependencies): ``python scripts/_deps.py reframe report``.  Used by
scripts/_venv.sh; needs nothing beyond the standard library (tomllib, or
on Python < 3.11 a reading of the two lists this file keeps)."""

import ast
import os
import re
import sys

PYPROJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                         'pyproject.toml')


def _lists(text):
    """(dependencies, {extra: [requirement]}) without tomllib: the
    ``dependencies = [...]`` of [project] and the ``name = [...]`` lines of
    [project.optional-dependencies] (string lists, as this file has)."""
    section, deps, extras = None, [], {}
    pos = 0
    pattern = re.compile(r'^\[([^\]]+)\]\s*$|^([A-Za-z0-9_-]+)\s*=\s*(\[)',
                         re.M)
    while True:
        m = pattern.search(text, pos)
        if not m:
            break
        if m.group(1):
            section, pos = m.group(1).strip(), m.end()
            continue
        depth, i = 0, m.start(3)
        while True:          # the bracketed list, strings may hold ]
            c = text[i]
            if c in '"\'':
                i = text.index(c, i + 1)
            elif c == '#':
                i = text.index('\n', i)
            elif c == '[':
                depth += 1
            elif c == ']':
                depth -= 1
                if depth == 0:
                    break
            i += 1
        body = re.sub(r'#[^\n]*', '', text[m.start(3):i + 1])
        value = ast.literal_eval(body)
        if section == 'project' and m.group(2) == 'dependencies':
            deps = value
        elif section == 'project.optional-dependencies':
            extras[m.group(2)] = value
        pos = i + 1
    return deps, extras


def requirements(extras, path=PYPROJECT):
    with open(path, 'rb') as fp:
        raw = fp.read()
    try:
        import tomllib
        doc = tomllib.loads(raw.decode())['project']
        deps, table = doc['dependencies'], doc['optional-dependencies']
    except ImportError:
        deps, table = _lists(raw.decode())
    out = list(deps)
    for name in extras:
        if name not in table:
            raise SystemExit(f'{path}: no extra {name!r} (has: '
                             f'{", ".join(sorted(table))})')
        for req in table[name]:
            # an extra of this project itself: its requirements
            m = re.match(r'^ccl-health\[([^\]]+)\]$', req.replace(' ', ''))
            if m:
                out += requirements(m.group(1).split(','), path)
            else:
                out.append(req)
    return list(dict.fromkeys(out))


if __name__ == '__main__':
    print('\n'.join(requirements(sys.argv[1:])))
