"""The site's and references' YAML read through libyaml's parser where
PyYAML has it (issue 42: the hook reads them on every run), with the
same documents and the same refusals as PyYAML's own parser, whose words
name a fault.  The oracle: PyYAML's pure-Python safe loader."""

import glob
import os

import pytest
import yaml

from ccl_health import CclHealthError
from ccl_health.sitedata import schemas

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not hasattr(yaml, 'CSafeLoader'),
                                reason='PyYAML without libyaml')


def test_the_shipped_files_are_read_by_libyaml_as_pyyaml_reads_them(
        monkeypatch):
    files = sorted(glob.glob(os.path.join(REPO, 'site', '*.yaml')) +
                   glob.glob(os.path.join(REPO, 'reference', '*.yaml')))
    assert files
    texts = {f: open(f).read() for f in files}
    want = {f: yaml.load(t, Loader=yaml.SafeLoader) for f, t in texts.items()}

    def python_parser(*a, **k):
        raise AssertionError('the pure-Python loader was used')
    monkeypatch.setattr(schemas, '_StrictLoader', python_parser)
    assert {f: schemas.load_yaml(t, f) for f, t in texts.items()} == want


@pytest.mark.parametrize('text, words', [
    ('a: 1\nb: 2\na: 3\n', "not valid YAML: key 'a' given twice (lines 1 "
                           "and 3)"),
    ('transports: [1,\n', "not valid YAML: while parsing a flow node "
                           "expected the node content, but found "
                           "'<stream end>' in line 2, column 1: ^"),
])
def test_a_refused_document_is_named_in_pyyaml_words(text, words):
    with pytest.raises(CclHealthError) as err:
        schemas.load_yaml(text, 'x.yaml')
    assert str(err.value).startswith(f'x.yaml: {words}'), str(err.value)
