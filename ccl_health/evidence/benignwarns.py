"""A site file's ``benign_warns`` checked against the fatal WARN classes
(:mod:`ccl_health.sitedata.overrides` says why): what the loader of a
site file (:func:`ccl_health.sitedata.site.load`) is given by its caller
as ``benign_check``, since the WARN classes are the evidence's."""

import re

from ccl_health import CclHealthError
from ccl_health.evidence import warns

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
