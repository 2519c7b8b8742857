"""A site file checked against what it overrides.

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
  Checked by :func:`ccl_health.evidence.benignwarns.check_benign` (the WARN
  classes are the evidence's), which the loader of a site file
  (:func:`ccl_health.sitedata.site.load`) is given by its caller.
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
from ccl_health.units import format_size

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
