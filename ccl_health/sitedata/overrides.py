"""A site file checked against what it overrides, when it is loaded.

Two keys of ``site/<system>.yaml`` change what the judge decides, so a
mistake in them silences a fault or invents one on every node:

* ``benign_warns: [{pattern, why, overrides}]`` silences NCCL WARN lines
  (:mod:`ccl_health.evidence.warns`).  Each pattern is compiled (a bad
  regex names the file and the key) and tried on lines of every fatal
  class, built from the upstream format strings
  (:func:`ccl_health.evidence.warns.fatal_samples`).  A pattern that
  matches a line of a fatal class must name that class in ``overrides``
  (a WARN class of :data:`ccl_health.evidence.warns.FATAL`: ``cuda``,
  ``connection``, ... ; not a verdict such as ``crash``, which several
  classes give) and say why; a pattern that matches any line (``.*``,
  ``.``, ``^``, one that matches an empty or an unrelated line, or most
  fatal lines, such as a negated class ``^[^ZA]``) is refused.  At run time a pattern silences a fatal line
  only of a class it names (:func:`ccl_health.evidence.warns.classify`).
  Checked by :func:`check_benign`, from :func:`ccl_health.sitedata.site.parse`.
* ``transports.<t>.ceiling: {links, link_gbps}`` bounds a busbw: above it
  is ``wrong-results``.  A ceiling below a reference value of the same
  transport (``reference/<system>.yaml``, any partition) would fail every
  healthy run at the reference, so it is an error naming both keys:
  :func:`check_ceilings`, called wherever a site and its references are
  both loaded (the health hook, the ReFrame sweep, the fleet).

Every error is a :class:`ccl_health.CclHealthError` of one line that names
the file and the key."""

import re

from ccl_health import CclHealthError
from ccl_health.evidence import warns
from ccl_health.units import format_size

#: lines no WARN pattern of a site should match: a pattern that matches
#: one of them matches (nearly) any line.  They start with a capital, a
#: small letter, a digit, punctuation and a space, so a negated class or a
#: negative look-ahead that leaves out one of them still meets another
_ANY_LINE = ('', 'Zq7 vxk_jw', 'lorem ipsum dolor', '0 kqz', '[x] y', ' q',
             'Mqv7 zzk')
#: a pattern that silences more than this share of the fatal samples is no
#: site's harmless line, whatever it names in ``overrides``
_MOST_SAMPLES = 0.5


def check_benign(items, path):
    """The site file's ``benign_warns`` list (schema-valid dicts), checked;
    raises :class:`CclHealthError` naming ``path`` and the key."""
    if not items:
        return []       # the samples take a while to build: none needed
    samples = warns.fatal_samples()
    out = []
    for i, item in enumerate(items or ()):
        key = f'{path}: benign_warns[{i}]'
        pattern = item['pattern']
        try:
            rx = re.compile(pattern)
        except re.error as err:
            raise CclHealthError(f'{key}.pattern: bad regex {pattern!r}: '
                                 f'{err}') from None
        if not str(item.get('why', '')).strip():
            raise CclHealthError(f'{key}.why: empty: say why the line is '
                                 f'harmless on this site')
        named = warns.override_classes(item.get('overrides'))
        for cls in named:
            if cls not in warns.FATAL_CLASSES:
                raise CclHealthError(
                    f'{key}.overrides: {cls!r} is not a fatal WARN class '
                    f'(the classes: {", ".join(warns.FATAL_CLASSES)}; '
                    f'crash and fallback are verdicts that several '
                    f'classes give: name the class the line is of)')
        every = [line for line in _ANY_LINE if rx.search(line)]
        silenced = sum(1 for _, text in samples if rx.search(text))
        if every or silenced > _MOST_SAMPLES * len(samples):
            what = (f'an empty line' if '' in every else
                    f'the unrelated line {every[0]!r}' if every else
                    f'{silenced} of the {len(samples)} fatal WARN lines '
                    f'tried')
            raise CclHealthError(
                f'{key}.pattern: {pattern!r} matches any line (it matches '
                f'{what}): it would silence every fault; write the text of '
                f'the harmless WARN')
        hits = {}
        for cls, text in samples:
            if cls not in named and rx.search(text):
                hits.setdefault(cls, text)
        if hits:
            classes = ', '.join(hits)
            cls, text = next(iter(hits.items()))
            raise CclHealthError(
                f'{key}.pattern: {pattern!r} matches WARN lines of the '
                f'fatal class{"es" if len(hits) > 1 else ""} {classes} '
                f'(e.g. "NCCL WARN {text}"): to silence '
                f'{"them" if len(hits) > 1 else "it"}, name '
                f'{"them" if len(hits) > 1 else "the class"} (overrides: '
                f'{cls if len(hits) == 1 else "[" + classes + "]"}) and say '
                f'why; else write a pattern of the harmless line only')
        out.append(dict(item))
    return out


def check_ceilings(site, ref):
    """Every ``transports.<t>.ceiling`` of ``site`` against the busbw of
    every entry of transport ``<t>`` in ``ref`` (a
    :class:`ccl_health.judge.reference.SystemReference`, all partitions:
    the ceiling holds for the transport on every partition); a ceiling
    below one is a :class:`CclHealthError` naming both keys and values."""
    if site is None or ref is None:
        return
    for name, t in site.transports.items():
        ceil = getattr(t, 'ceiling', None)
        if not ceil:
            continue
        gbps = float(ceil['links']) * float(ceil['link_gbps'])
        worst = None
        for pname, part in ref.partitions.items():
            for i, e in enumerate(part.entries):
                if e.transport != name:
                    continue
                for size, val in e.busbw.items():
                    if val > gbps and (worst is None or val > worst[0]):
                        worst = (val, pname, i, e, size)
        if worst is None:
            continue
        val, pname, i, e, size = worst
        raise CclHealthError(
            f'{site.path}: transports.{name}.ceiling: {ceil["links"]} links '
            f'x {float(ceil["link_gbps"]):g} GB/s = {gbps:g} GB/s is below '
            f'the reference {ref.path}: partitions.{pname}.entries[{i}]'
            f'.busbw.{format_size(size)} ({e.label()}): {val:g} GB/s; every '
            f'healthy run would be wrong-results: correct the ceiling (the '
            f'links one GPU uses x the GB/s of one link) or remove it')
