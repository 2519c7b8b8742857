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

#: what makes ReFrame run a command while it loads an environment
#: (``reframe.utility.osext.expandvars``: ``$(...)`` and backquotes, even
#: inside single quotes)
_SUBST = re.compile(r'[$`]')


def _literal(text, inert):
    if not inert:
        return shlex.quote(text)
    # ``$`` quoted on its own ('$' then '(...)': no ``$(`` in the text) and
    # a backquote as bash's $'\140': the word holds neither ``$(`` nor a
    # backquote, and bash reads the same literal text
    out, pos = [], 0
    for m in _SUBST.finditer(text):
        if m.start() > pos:
            out.append(shlex.quote(text[pos:m.start()]))
        out.append("'$'" if m.group(0) == '$' else "$'\\140'")
        pos = m.end()
    if pos < len(text) or not out:
        out.append(shlex.quote(text[pos:]))
    return ''.join(out)


def word(value, refs=BRACED, inert=False):
    """``value`` as one shell word: the parts that ``refs`` matches are
    emitted as ``"<ref>"`` (expanded, still one word), every other part
    with :func:`shlex.quote` (``$(cmd)``, backquotes, ``"; cmd`` run
    nothing).

    ``inert``: a bash word that also holds no ``$(`` and no backquote, for
    values that ReFrame reads before the job script is written (a test's
    ``env_vars``: ``runtime.loadenv`` passes them through
    ``osext.expandvars``, which runs ``$(...)`` and backquotes with a shell
    on the host).  The job's bash reads the same literal text."""
    value = str(value)
    out, pos = [], 0
    for m in refs.finditer(value):
        if m.start() > pos:
            out.append(_literal(value[pos:m.start()], inert))
        out.append(f'"{m.group(0)}"')
        pos = m.end()
    if pos < len(value) or not out:
        out.append(_literal(value[pos:], inert))
    return ''.join(out)


#: matches nothing: every part literal
NOTHING = re.compile(r'(?!x)x')


def quote(value):
    """``value`` as one literal shell word (nothing expands): the one
    quoting of every generated shell line (build scripts, job scripts,
    the fleet's step lines, commands printed for the user to paste)."""
    return word(value, NOTHING)


def join(words):
    """Words as one shell command line, each :func:`quote`d."""
    return ' '.join(quote(w) for w in words)
