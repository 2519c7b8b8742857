"""The WARN table: every upstream ``WARN(...)`` / ``NCCL_OFI_WARN(...)``
format string read, per source and version, with what its code does right
after it (``warn_table.tsv`` beside this module, shipped with the package).

Columns: ``source`` (``NVIDIA/nccl``, ``ROCm/rccl``,
``aws/aws-ofi-nccl``), ``version`` (the tag or commit read), ``path`` and
``line`` of the call, ``disposition``, ``class``, ``format`` (the C
literal as written) and ``evidence`` (the deciding statement, e.g.
``line 335: continue;`` or ``line 353: return ncclSystemError;``).

``disposition``:

* ``fatal``: an error is returned, propagated or the program aborts;
  ``class`` names the fatal class (``connection``, ``memory-registration``,
  ``cuda``, ``internal``, ``plugin-init``, ``link-down``);
* ``advisory``: a ``continue``, a fall-through or a success return: the
  library goes on;
* ``by-event``: an InfiniBand async event printed with its
  ``ibv_event_type_str`` (``Got async event : %s``): the rows that follow
  it spell each event out, classified as the newest NCCL
  (``src/transport/net_ib/common.cc``) handles that event type; a string
  that is none of them is not decided by the table.

The table is built by the helpers of the test suite's WARN fixture folder
(``disposition.py`` reads the code after each call; a person's reading of
the disputed ones is kept beside it); nothing here reads them."""

import csv
import dataclasses
import functools
import os
import re
from typing import Optional

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     'warn_table.tsv')

DISPOSITIONS = ('fatal', 'advisory', 'by-event')

#: the code that talks to the network: NCCL's and RCCL's InfiniBand
#: transport and its verbs wrapper, and the net plugin (aws-ofi-nccl)
_NETWORK_PATHS = re.compile(r'^src/(transport/net_ib|misc/ibvwrap)')
_NETWORK_SOURCES = ('aws/aws-ofi-nccl',)

#: one printf conversion (``%s``, ``%-8d``, ``%.*s``, ``%lu``, ``%zu``,
#: ``%016lx``, ``%p``, ...)
_CONV = re.compile(r'%(?P<flags>[-+ #0]*)(?P<width>\d+|\*)?'
                   r'(?:\.(?P<prec>\d+|\*))?(?P<len>hh|h|ll|l|z|j|t|L)?'
                   r'(?P<conv>[diouxXeEfgGcspm])')
_CONV_RX = {
    's': r'.*', 'm': r'.*', 'c': r'.',
    'd': r'[-+]?\d+', 'i': r'[-+]?\d+', 'u': r'\d+', 'o': r'[0-7]+',
    'x': r'(?:0x)?[0-9a-fA-F]+', 'X': r'(?:0X)?[0-9a-fA-F]+',
    'p': r'(?:0x[0-9a-fA-F]+|\(nil\)|\(null\)|0)',
    'e': r'[-+0-9.eEinfa]+', 'E': r'[-+0-9.eEINFA]+',
    'f': r'[-+0-9.inf]+', 'g': r'[-+0-9.eEinfa]+', 'G': r'[-+0-9.eEINFA]+',
}
_ESCAPES = {'n': '\n', 't': '\t', '"': '"', "'": "'", '\\': '\\'}


def unescape(literal):
    """The C string literal ``literal`` as the program prints it."""
    return re.sub(r'\\(.)', lambda m: _ESCAPES.get(m.group(1), m.group(1)),
                  literal)


def _pieces(text):
    """The regex of printed ``text`` (conversions and literal runs)."""
    out, pos = [], 0
    for m in _CONV.finditer(text):
        out.append(_literal(text[pos:m.start()]))
        out.append(_CONV_RX[m.group('conv')])
        pos = m.end()
    out.append(_literal(text[pos:]))
    return ''.join(out)


def _literal(text):
    text = text.replace('%%', '%')
    return r'\s+'.join(re.escape(p) for p in re.split(r'\s+', text))


def _joined(fmt):
    """``fmt`` with the conversions that extract.py joined from a format
    macro (``"%" PRIu32`` -> ``%%lu``, ``"0x%016" PRIx64`` -> ``%016%lu``)
    made one conversion again."""
    fmt = re.sub(r'%(0?\d+)%(?:l|ll|z)?[udx]', r'%\1lx', fmt)
    return re.sub(r'%%(?=(?:l|ll|z)?[udx])', '%', fmt)


#: what a sample line puts for each conversion (a plausible value)
_CONV_SAMPLE = {'s': 'mlx5_0', 'm': 'Connection reset by peer', 'c': 'x',
                'd': '3', 'i': '3', 'u': '3', 'o': '7', 'x': '1f', 'X': '1F',
                'p': '0x7f3a2c000000', 'e': '1.5e+00', 'E': '1.5E+00',
                'f': '1.5', 'g': '1.5', 'G': '1.5'}


def sample(fmt):
    """A line printed from the format literal ``fmt`` with a plausible
    value in each conversion (its first line)."""
    text = unescape(_joined(fmt)).strip().split('\n')[0].strip()
    return _CONV.sub(lambda m: _CONV_SAMPLE[m.group('conv')],
                     text).replace('%%', '%')


def format_regex(fmt):
    """A regex that matches a whole WARN text printed from the C format
    literal ``fmt``: each conversion becomes what it prints, each run of
    white space any white space; a format with a newline matches its
    first line alone (a log line) or all of it joined; aws-ofi-nccl's
    logger adds ``NET/OFI`` in front."""
    text = unescape(_joined(fmt)).strip()
    first, nl, rest = text.partition('\n')
    rx = _pieces(first.strip())
    if nl:
        rx += r'(?:\s.*)?'
    return re.compile(r'(?:NET/OFI\s+)?' + rx + r'\s*', re.S | re.I)


@dataclasses.dataclass(frozen=True)
class Row:
    source: str
    version: str
    path: str
    line: int
    disposition: str
    cls: str
    format: str
    evidence: str

    @property
    def origin(self):
        return f'{self.source}@{self.version} {self.path}:{self.line}'

    @property
    def network(self):
        """Printed by the network code (IB transport, verbs wrapper, net
        plugin): no intra-node run needs it."""
        return self.source in _NETWORK_SOURCES or bool(
            _NETWORK_PATHS.match(self.path))

    @functools.cached_property
    def regex(self):
        return format_regex(self.format)

    @functools.cached_property
    def literal(self):
        """The longest literal run of the format (a cheap test first)."""
        text = unescape(_joined(self.format)).split('\n')[0]
        runs = [r.strip() for r in _CONV.sub('\x00', text).split('\x00')]
        return max(runs, key=len).replace('%%', '%')

    @functools.cached_property
    def weight(self):
        """How much of the format is literal text: the more specific row
        wins where several match."""
        return len(re.sub(r'\s+', '', _CONV.sub('', unescape(self.format))))


@functools.lru_cache(maxsize=1)
def rows():
    """Every row of the table, the most specific first."""
    with open(TABLE, newline='') as fp:
        out = []
        for d in csv.DictReader(fp, delimiter='\t'):
            if d['disposition'] not in DISPOSITIONS:
                raise ValueError(f'{TABLE}: {d["source"]} {d["path"]}:'
                                 f'{d["line"]}: disposition '
                                 f'{d["disposition"]!r}')
            out.append(Row(d['source'], d['version'], d['path'],
                           int(d['line']), d['disposition'], d['class'],
                           d['format'], d['evidence']))
    out.sort(key=lambda r: -r.weight)
    return tuple(out)


def _squash(text):
    return re.sub(r'\s+', ' ', text)


def match(text) -> Optional[Row]:
    """The table row whose format printed the WARN ``text`` (the most
    specific; among equally specific rows of different sources, a fatal
    one), else None."""
    flat = _squash(text)
    low = flat.lower()
    found = None
    for row in rows():
        if found is not None and row.weight < found.weight:
            break
        if _squash(row.literal).lower() not in low:
            continue
        if row.regex.fullmatch(text) or row.regex.fullmatch(flat):
            if found is None or (row.disposition == 'fatal' and
                                 found.disposition != 'fatal'):
                found = row
    return found
