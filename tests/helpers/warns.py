"""WARN lines of the product's WARN table, as their upstream loggers print
them (issue 27)."""

import os

from conftest import REPO


def warn_samples(disposition):
    """A line of every string of the product WARN table with
    ``disposition`` (the test fixture's sample where it has one, else the
    format with each conversion filled in), as aws-ofi-nccl's logger
    prints its own."""
    import csv
    import re
    from ccl_health.evidence import warntable
    fix = os.path.join(REPO, 'tests', 'fixtures', 'warns',
                       'upstream_formats.tsv')
    with open(fix, newline='') as fp:
        samples = {(r['source'], r['path'], r['line'], r['format']):
                   r['sample'] for r in csv.DictReader(fp, delimiter='\t')}
    fill = {'s': 'mlx5_0', 'p': '0x7f3a2c000b80', 'x': '1a2b'}
    out = []
    for r in warntable.rows():
        if r.disposition != disposition:
            continue
        text = samples.get((f'{r.source}@{r.version}', r.path, str(r.line),
                            r.format))
        if text is None:
            text = warntable.unescape(warntable._joined(r.format))
            text = re.sub(r'%[-+ #0]*\d*(?:\.\d+|\.\*)?(?:hh|h|ll|l|z)?'
                          r'([diouxXspm])',
                          lambda m: fill.get(m.group(1), '7'), text)
            text = ' '.join(text.split())
        if r.source == 'aws/aws-ofi-nccl':
            text = 'NET/OFI ' + text
        assert warntable.match(text).disposition == disposition, (r, text)
        out.append(text)
    return out
