"""docs/sites.md's InfiniBand example system (not shipped), made in a
site's copy as the page tells a site to."""

import os
import re

import yaml

from conftest import REPO


SYSTEM = 'mycluster'
SECTION = '## An InfiniBand site without the plugin'


def docs_site_block():
    """The ```yaml block of docs/sites.md's InfiniBand section: the
    transports (and fleet settings) the page tells such a site to list."""
    with open(os.path.join(REPO, 'docs', 'sites.md')) as fp:
        text = fp.read()
    section = text[text.index(SECTION):]
    section = section[:section.index('\n## ', len(SECTION))]
    return yaml.safe_load(re.search(r'```yaml\n(.*?)```', section,
                                    re.S).group(1))


def make_ib_system(mine):
    """What docs/sites.md's InfiniBand section tells a site to do in its
    copy ``mine``: the closest shipped system's three files (perlmutter:
    A100 nodes under Slurm) renamed to :data:`SYSTEM`, with host names of
    its own and the transports the section lists."""
    for src, dst in (('site/perlmutter.yaml', f'site/{SYSTEM}.yaml'),
                     ('reference/perlmutter.yaml',
                      f'reference/{SYSTEM}.yaml'),
                     ('config/systems/perlmutter.py',
                      f'config/systems/{SYSTEM}.py')):
        text = (mine / src).read_text().replace('perlmutter', SYSTEM)
        (mine / dst).write_text(text)
    conf = mine / 'config' / 'systems' / f'{SYSTEM}.py'
    text = conf.read_text()
    old = re.search(r"'hostnames': \[.*?\],", text).group(0)
    conf.write_text(text.replace(old, r"'hostnames': [r'gpu\d+'],"))
    doc = yaml.safe_load((mine / 'site' / f'{SYSTEM}.yaml').read_text())
    doc.update(docs_site_block())
    (mine / 'site' / f'{SYSTEM}.yaml').write_text(yaml.safe_dump(doc))
