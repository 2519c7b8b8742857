"""Values written into shell scripts (job scripts, build scripts): one
shell word, literal text quoted with :func:`shlex.quote`, and only variable
references left to expand, explicitly."""

import re
import shlex

_NAME = r'[A-Za-z_][A-Za-z0-9_]*'
#: ``${NAME}`` only
BRACED = re.compile(rf'\$\{{{_NAME}\}}')
#: ``${NAME}`` and ``$NAME``
ANY = re.compile(rf'\$(?:\{{{_NAME}\}}|{_NAME})')


def word(value, refs=BRACED):
    """``value`` as one shell word: the parts that ``refs`` matches are
    emitted as ``"<ref>"`` (expanded, still one word), every other part
    with :func:`shlex.quote` (``$(cmd)``, backquotes, ``"; cmd`` run
    nothing)."""
    value = str(value)
    out, pos = [], 0
    for m in refs.finditer(value):
        if m.start() > pos:
            out.append(shlex.quote(value[pos:m.start()]))
        out.append(f'"{m.group(0)}"')
        pos = m.end()
    if pos < len(value) or not out:
        out.append(shlex.quote(value[pos:]))
    return ''.join(out)
