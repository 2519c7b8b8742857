"""Issue 21, 6: the product names no path of the machine it was made on:
no ``/work/...`` and no ``../shared`` (outside the repository); what a
reference cites is a file in the repository or a public source."""

import os
import re

import pytest
import yaml

from conftest import REPO

PRODUCT = ('ccl_health', 'reference', 'site', 'benchmarks', 'config',
           'checks', 'builders', 'scripts', 'README.md', 'docs',
           'pyproject.toml')
MACHINE = re.compile(r'(?<![\w.])/work/|\.\./shared\b|(?<![\w/])shared/'
                     r'(?:anchors|DEVICE|DESIGN|mirror)')


def _files():
    for top in PRODUCT:
        path = os.path.join(REPO, top)
        if os.path.isfile(path):
            yield path
            continue
        for d, dirs, files in os.walk(path):
            dirs[:] = [x for x in dirs if x != '__pycache__']
            for f in files:
                yield os.path.join(d, f)


def test_the_product_names_no_machine_path():
    found = []
    for path in _files():
        try:
            text = open(path, encoding='utf-8').read()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if MACHINE.search(line):
                found.append(f'{os.path.relpath(path, REPO)}:{n}: '
                             f'{line.strip()[:120]}')
    assert not found, '\n'.join(found)


def test_the_pattern_finds_what_it_must():
    for bad in ('see /work/shared/anchors/x.tsv', '../shared/anchors/x',
                '(shared/DEVICE.md)'):
        assert MACHINE.search(bad), bad
    assert not MACHINE.search('reference/anchors/x.tsv; the GPUs shared')


@pytest.mark.parametrize('name', ['frontier', 'perlmutter', 'lumi', 'local'])
def test_cited_repository_files_exist(name):
    """A reference ``source:`` that cites ``reference/anchors/<file>``
    names a file of the repository."""
    text = open(os.path.join(REPO, 'reference', f'{name}.yaml')).read()
    for rel in re.findall(r'reference/anchors/[\w.-]+', text):
        assert os.path.isfile(os.path.join(REPO, rel)), rel
