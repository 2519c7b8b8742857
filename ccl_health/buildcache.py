"""Build recipes for the third-party programs the suite tests, and the cache
that keeps an unchanged recipe from being rebuilt.

A :class:`Recipe` is pure data: where the source comes from (pinned URL and
sha256, or a local mirror), and the shell steps that build it.  Its
:meth:`Recipe.key` hashes everything that changes the result (source
checksum, steps, toolchain), so a different compiler or CUDA gets its own
install prefix, and an unchanged one is found again.  :func:`build_script`
renders the steps as one bash script that logs every step to its own file and
says which step failed and where its log is.

A failed build is a failed build: the script runs under ``set -euo
pipefail``, every step in a bash of its own (so ``set -e`` holds inside the
step too), the tarball's sha256 is checked before anything is unpacked (a
mismatch is one line naming the file and both checksums), and the stamp that
says "installed" is written last, only after every step succeeded and the
recipe's products exist.  Any failure exits 1 with one line
``ccl-health: build of NAME VERSION failed ...`` on stdout and stderr (the
last such line of stderr: :func:`failure_line`).

Paths with spaces (or other characters a shell or Make would split: the
output folder, the stage, the checkout, the mirror, ``CCL_HEALTH_CACHE``).
Every path is quoted (:func:`shlex.quote`, or ``"$PREFIX"`` inside steps).
Upstream builds cannot all take such paths even quoted: nccl-tests' Makefile
passes ``$(abspath build)`` unquoted to a sub-make, and autotools/libtool
packages bake ``--prefix`` unquoted into compiler flags (libfabric's
``-DSYSCONFDIR=``).  So:

* the sources are unpacked and built in a fresh space-free folder under
  ``$TMPDIR`` (else ``/tmp``) when the working folder is not space-free,
  and removed when the script ends; the step logs stay in the working
  folder (``build-logs/``);
* a cache folder that is not space-free is reached through a space-free
  symbolic link ``$TMPDIR/ccl-health-<uid>-cache-<hash>`` (made atomically,
  checked to point at the cache and to be this user's own link): the steps see ``$PREFIX`` and ``$CACHE``
  through it and install into the real cache folder.  Paths compiled into
  the products (libfabric's sysconfdir and DSO provider folder, libtool's
  ``.la`` files) name that link; a site that needs them on other nodes uses
  a cache path without spaces;
* site paths handed to Make (``MPI_HOME``, ``CUDA_HOME``, ...) cannot be
  moved: a step checks them with ``ccl_no_space NAME VALUE`` and fails with
  one line naming the variable and its value.
"""

import dataclasses
import hashlib
import json
import os
import shlex
from typing import Dict, List, Tuple

import yaml

from ccl_health import CclHealthError, resources, shell

STAMP = '.ccl-health-complete'


@dataclasses.dataclass
class Source:
    name: str
    version: str
    url: str
    sha256: str
    tarball: str      # file name in the mirror
    topdir: str       # folder the tarball unpacks to


def load_sources(path):
    """Read the pins (``builders/sources.yaml``)."""
    with open(path) as fp:
        doc = yaml.safe_load(fp)
    out = {}
    for name, raw in (doc or {}).items():
        try:
            out[name] = Source(name=name, **raw)
        except TypeError as err:
            raise CclHealthError(f'{path}: {name}: {err}') from None
        if len(out[name].sha256) != 64:
            raise CclHealthError(f'{path}: {name}: sha256 must be 64 hex '
                                 f'digits')
    return out


@dataclasses.dataclass
class Recipe:
    source: Source
    steps: List[Tuple[str, str]]        # (step name, shell command)
    toolchain: Dict[str, str] = dataclasses.field(default_factory=dict)
    deps: Dict[str, str] = dataclasses.field(default_factory=dict)  # name -> key
    #: files the install must leave under the prefix (``lib/libfabric.so``);
    #: not part of the key: they check the build, they do not change it
    products: List[str] = dataclasses.field(default_factory=list)

    def key(self):
        blob = json.dumps({'name': self.source.name,
                           'version': self.source.version,
                           'sha256': self.source.sha256,
                           'steps': self.steps,
                           'toolchain': self.toolchain,
                           'deps': self.deps}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def prefix(self, cache_dir):
        return os.path.join(cache_dir, f'{self.source.name}-'
                            f'{self.source.version}-{self.key()}')


def is_built(prefix):
    return os.path.exists(os.path.join(prefix, STAMP))




def shell_value(value):
    """``value`` as one shell word for a build step: literal text quoted
    with :func:`shlex.quote`; only ``$NAME`` and ``${NAME}`` references are
    left to expand (in double quotes, so an expanded value stays one word).
    ``$(cmd)``, backquotes and every other character stay literal."""
    return shell.word(value, shell.ANY)


def shell_option(opt, value):
    """``--opt=value`` / ``NAME=value``, the value as :func:`shell_value`."""
    return f'{opt}={shell_value(value)}'


def cache_path(path, cache_dir):
    """A dependency's prefix as a step sees it: under the cache folder, as
    ``"$CACHE"/<name>`` (the space-free view of the cache, see the module
    notes); elsewhere (a site's install) as :func:`shell_value`."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(cache_dir))
    if rel != '.' and not rel.startswith('..') and os.sep not in rel:
        return f'"$CACHE"/{shell.quote(rel)}'
    return shell_value(path)


def no_space_check(variables):
    """A step command that fails, with one line naming the variable and its
    value, where a path that the upstream build cannot take even quoted
    (Make variables) holds whitespace; ``variables``: {NAME: value}."""
    return '; '.join(f'ccl_no_space {name} {shell_value(value)}'
                     for name, value in variables.items())


def autotools_steps(configure_args=()):
    """configure / make / make install; ``configure_args`` are single words
    (site values: ``$NAME`` references expand, nothing else)."""
    args = ''.join(' ' + a for a in configure_args)
    return [('configure', './configure --prefix="$PREFIX"' + args),
            ('build', 'make -j$JOBS'),
            ('install', 'make install')]


_UNSAFE = 'case $1 in *[!A-Za-z0-9_./+-]*) return 0;; esac; return 1'


# long: one shell script, written top to bottom as it runs
def build_script(recipe, cache_dir, mirror=None, jobs=8):
    """A bash script that builds ``recipe`` into its cached prefix, or says
    it is cached and does nothing.  Run it from an empty working folder
    (its ``build-logs/`` keep one log per step)."""
    src = recipe.source
    cache_dir = os.path.abspath(cache_dir)
    prefix = recipe.prefix(cache_dir)
    q = shell.quote
    what = f'{src.name} {src.version}'
    if mirror:
        origin = os.path.join(mirror, src.tarball)
        fetch = f'cp -- {q(origin)} {q(src.tarball)}'
    else:
        origin = src.url
        fetch = (f'curl -fsSL --retry 3 -o {q(src.tarball)} {q(src.url)} || '
                 f'wget -q -O {q(src.tarball)} {q(src.url)}')
    alias = (f'ccl-health-$(id -u)-cache-'
             f'{hashlib.sha256(cache_dir.encode()).hexdigest()[:12]}')
    lines = [
        '#!/bin/bash',
        f'# ccl-health build of {what} (recipe key {recipe.key()})',
        'set -euo pipefail',
        f'INSTALL_PREFIX={q(prefix)}',
        f'INSTALL_CACHE={q(cache_dir)}',
        f'JOBS={int(jobs)}',
        'LOGDIR="$PWD/build-logs"',
        'fail() {',
        f'  echo "ccl-health: build of {what} failed$*" >&2',
        f'  echo "ccl-health: build of {what} failed$*"',
        '  exit 1',
        '}',
        f'unsafe() {{ {_UNSAFE}; }}',
        'mkdir -p "$LOGDIR" "$INSTALL_CACHE" || fail ": cannot create '
        '$INSTALL_CACHE"',
        f'if [ -f "$INSTALL_PREFIX/{STAMP}" ]; then',
        f'  echo "ccl-health: {what} is cached at $INSTALL_PREFIX '
        f'(recipe key {recipe.key()}): not rebuilt"; exit 0',
        'fi',
        # one builder at a time per prefix (two runs starting together)
        'exec 9>"$INSTALL_PREFIX.lock"; flock 9',
        f'if [ -f "$INSTALL_PREFIX/{STAMP}" ]; then echo "ccl-health: '
        f'{what} built meanwhile by another run: $INSTALL_PREFIX"; exit 0; fi',
        'rm -rf "$INSTALL_PREFIX"',
        # the space-free views of the cache and of the working folder
        'SAFE_ROOT=${TMPDIR:-/tmp}; if unsafe "$SAFE_ROOT"; then '
        'SAFE_ROOT=/tmp; fi',
        'CACHE=$INSTALL_CACHE',
        'if unsafe "$CACHE"; then',
        f'  CACHE="$SAFE_ROOT/{alias}"',
        '  ln -sfn "$INSTALL_CACHE" "$CACHE.$$" && mv -Tf "$CACHE.$$" '
        '"$CACHE" || true',
        # ours, not only pointing at the cache: another user's link there
        # (made first, to the right place) could be turned elsewhere
        # mid-build; a link of ours in a sticky /tmp cannot be
        '  [ "$(readlink "$CACHE")" = "$INSTALL_CACHE" ] && '
        '[ "$(stat -c %u -- "$CACHE")" = "$(id -u)" ] || fail ": no '
        'space-free link $CACHE of this user to the cache folder '
        '$INSTALL_CACHE"',
        'fi',
        f'PREFIX="$CACHE"/{q(os.path.basename(prefix))}',
        'WORK=$PWD',
        'if unsafe "$WORK"; then',
        '  WORK=$(mktemp -d "$SAFE_ROOT/ccl-health-build.XXXXXX") || '
        'fail ": cannot make a space-free build folder in $SAFE_ROOT"',
        '  trap \'rm -rf "$WORK"\' EXIT',
        '  echo "ccl-health: $PWD is not space-free: building in $WORK"',
        'fi',
        'cd "$WORK"',
        'export PREFIX CACHE JOBS',
        'ccl_no_space() {',
        '  case $2 in *[[:space:]]*)',
        '    echo "ccl-health: $1=\'$2\' contains whitespace, which this '
        'build cannot take" >&2; return 1;; esac',
        '}',
        'export -f ccl_no_space',
        'step() {',
        '  local name=$1 cmd=$2 log="$LOGDIR/$1.log" last',
        f'  echo "ccl-health: {what}: $name"',
        '  if ! bash -euo pipefail -c "$cmd" >"$log" 2>&1; then',
        '    tail -n 25 "$log" >&2 || true',
        '    last=$(grep -v "^[[:space:]]*$" "$log" | tail -n 1 | '
        'cut -c1-300) || true',
        '    fail " at step \'$name\': ${last:-no output}; log: $log"',
        '  fi',
        '}',
        f'step fetch {q(fetch)}',
        # the checksum before anything is unpacked or configured
        f'SUM=$(sha256sum < {q(src.tarball)}) || fail ": cannot read "'
        f'{q(src.tarball)}',
        'SUM=${SUM%% *}',
        f'[ "$SUM" = {q(src.sha256)} ] || fail ": "{q(origin)}": sha256 '
        f'mismatch: $SUM, expected "{q(src.sha256)}" (builders/sources.yaml)"',
        'step unpack ' + q(f'rm -rf {q(src.topdir)} && tar xf '
                           f'{q(src.tarball)} && test -d {q(src.topdir)}'),
    ]
    for name, cmd in recipe.steps:
        lines.append(f'step {q(name)} {q(f"cd {q(src.topdir)} && {cmd}")}')
    for product in recipe.products:
        lines.append(f'[ -e "$INSTALL_PREFIX"/{q(product)} ] || fail '
                     f'": the install left no $INSTALL_PREFIX/"{q(product)}')
    lines += [
        '[ -d "$INSTALL_PREFIX" ] || fail ": the install left no '
        '$INSTALL_PREFIX"',
        'cat > "$INSTALL_PREFIX/ccl-health-recipe.json" <<\'EOF_RECIPE\'',
        json.dumps({'name': src.name, 'version': src.version,
                    'sha256': src.sha256, 'key': recipe.key(),
                    'steps': recipe.steps, 'toolchain': recipe.toolchain,
                    'deps': recipe.deps}, indent=1),
        'EOF_RECIPE',
        f'touch "$INSTALL_PREFIX/{STAMP}"',
        f'echo "ccl-health: {what} installed in $INSTALL_PREFIX"',
    ]
    return '\n'.join(lines) + '\n'


def failure_line(stagedir, stderr_name='rfm_build.err'):
    """The one-line cause of a failed build from its stage folder (the last
    ``ccl-health: build of ... failed ...`` or ``ccl-health: the site ...``
    line of the build's stderr, as ReFrame keeps it: the run report's
    ``stagedir`` and ``build_stderr`` of the fixture); None if there is
    none or it cannot be read."""
    try:
        with open(os.path.join(stagedir, stderr_name), errors='replace') as fp:
            lines = fp.read().splitlines()
    except (OSError, TypeError):
        return None
    for line in reversed(lines):
        if line.startswith(('ccl-health: build of ', 'ccl-health: the site')):
            return line.strip()
    return None


def resolve_mirror(option=None, env=None):
    """The mirror folder from the option, else ``CCL_HEALTH_MIRROR``; None
    means "download from the upstream URL".  A mirror that does not exist is
    an error, not a silent download."""
    env = os.environ if env is None else env
    mirror = option or env.get('CCL_HEALTH_MIRROR') or None
    if mirror and not os.path.isdir(mirror):
        raise CclHealthError(f'source mirror {mirror!r} is not a folder '
                             f'(set by --mirror or CCL_HEALTH_MIRROR)')
    return os.path.abspath(mirror) if mirror else None


def cache_dir(env=None):
    """The build cache (:func:`ccl_health.resources.cache_dir`: the
    variable, else the site pointer's, else the caller's home)."""
    from ccl_health import resources
    return resources.cache_dir(env)
