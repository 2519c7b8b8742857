"""Build recipes for the third-party programs the suite tests, and the cache
that keeps an unchanged recipe from being rebuilt.

A :class:`Recipe` is pure data: where the source comes from (pinned URL and
sha256, or a local mirror), and the shell steps that build it.  Its
:meth:`Recipe.key` hashes everything that changes the result (source
checksum, steps, toolchain), so a different compiler or CUDA gets its own
install prefix, and an unchanged one is found again.  :func:`build_script`
renders the steps as one bash script that logs every step to its own file and
says which step failed and where its log is.
"""

import dataclasses
import hashlib
import json
import os
import shlex
from typing import Dict, List, Tuple

import yaml

from . import CclHealthError

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


def build_script(recipe, cache_dir, mirror=None, jobs=8):
    """A bash script that builds ``recipe`` into its cached prefix, or says
    it is cached and does nothing.  Run it from an empty working folder."""
    src = recipe.source
    prefix = recipe.prefix(cache_dir)
    q = shlex.quote
    if mirror:
        fetch = f'cp {q(os.path.join(mirror, src.tarball))} {q(src.tarball)}'
    else:
        fetch = (f'curl -fsSL --retry 3 -o {q(src.tarball)} {q(src.url)} || '
                 f'wget -q -O {q(src.tarball)} {q(src.url)}')
    lines = [
        '#!/bin/bash',
        f'# ccl-health build of {src.name} {src.version} (recipe key '
        f'{recipe.key()})',
        'set -u',
        f'PREFIX={q(prefix)}',
        f'JOBS={int(jobs)}',
        'LOGDIR="$PWD/build-logs"; mkdir -p "$LOGDIR" "$(dirname "$PREFIX")"',
        f'if [ -f "$PREFIX/{STAMP}" ]; then',
        f'  echo "ccl-health: {src.name} {src.version} is cached at $PREFIX '
        f'(recipe key {recipe.key()}): not rebuilt"; exit 0',
        'fi',
        # one builder at a time per prefix (two runs starting together)
        'exec 9>"$PREFIX.lock"; flock 9',
        f'if [ -f "$PREFIX/{STAMP}" ]; then echo "ccl-health: {src.name} '
        f'built meanwhile by another run: $PREFIX"; exit 0; fi',
        'rm -rf "$PREFIX"',
        'step() {',
        '  local name=$1; shift',
        '  local log="$LOGDIR/$name.log"',
        f'  echo "ccl-health: {src.name} {src.version}: $name"',
        '  if ! ( eval "$@" ) >"$log" 2>&1; then',
        f'    echo "ccl-health: build of {src.name} {src.version} failed at '
        'step \'$name\'; log: $log" >&2',
        '    tail -n 25 "$log" >&2',
        f'    echo "ccl-health: build of {src.name} {src.version} failed at '
        'step \'$name\'; log: $log"',
        '    exit 1',
        '  fi',
        '}',
        f'step fetch {q(fetch)}',
        f'step verify {q(f"echo {src.sha256}  {src.tarball} | sha256sum -c -")}',
        f'step unpack {q(f"rm -rf {src.topdir} && tar xzf {src.tarball}")}',
    ]
    for name, cmd in recipe.steps:
        lines.append(f'step {q(name)} {q(f"cd {src.topdir} && {cmd}")}')
    lines += [
        'cat > "$PREFIX/ccl-health-recipe.json" <<\'EOF_RECIPE\'',
        json.dumps({'name': src.name, 'version': src.version,
                    'sha256': src.sha256, 'key': recipe.key(),
                    'steps': recipe.steps, 'toolchain': recipe.toolchain,
                    'deps': recipe.deps}, indent=1),
        'EOF_RECIPE',
        f'touch "$PREFIX/{STAMP}"',
        f'echo "ccl-health: {src.name} {src.version} installed in $PREFIX"',
    ]
    return '\n'.join(lines) + '\n'


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
    env = os.environ if env is None else env
    return os.path.abspath(env.get('CCL_HEALTH_CACHE') or os.path.join(
        env.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'),
        'ccl-health', 'builds'))
