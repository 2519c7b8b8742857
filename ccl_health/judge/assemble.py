"""The one case assembler: what a run left (its output, its NCCL / RCCL
debug logs, its exit status), the transport asked, the site (its
``benign_warns``, its ceilings), the node's state and the reference in;
the judge's :class:`ccl_health.judge.caseevidence.CaseEvidence` out.

Every door that judges a case is a thin adapter around it, keeping only
what is its own (where its files are, what it asked): the sweep
(:mod:`ccl_health.rfm.sweep`), the health hook
(:mod:`ccl_health.hook.judging`), a fleet step
(:mod:`ccl_health.fleet.stepevidence`) and ``scripts/explain``.  Ingest
records what those doors judged (a run report's verdicts, a hook's
pending record) and assembles nothing.

Two steps, because the hook runs a probe more than once and judges each
try alone before judging them together:

* :func:`attempt`: one run's output and logs -> an
  :class:`~ccl_health.judge.caseevidence.Attempt` (the debug-log evidence, the
  transport proof, the WARN lines, the ranks' versions);
* :func:`case`: the attempts of one case, what was asked, the site, the
  node's state and the reference -> the ``CaseEvidence``.  The site's
  ``benign_warns`` are applied here, to every attempt, whichever door
  built it; the bound of an impossible busbw comes from the site's
  ceilings and the node's links here too.
"""

import dataclasses

from ccl_health.evidence import debuglog, nccltests, stalls
from ccl_health.evidence import warns as W
from ccl_health.evidence.proof import prove
from ccl_health.judge import ceiling as bounds
from ccl_health.judge.caseevidence import Attempt, CaseEvidence

#: :func:`attempt`'s ``proof`` left to it: proven from the evidence
PROVE = object()


def evidence(logs=(), stdout='', source='stdout'):
    """The debug-log evidence (:class:`ccl_health.evidence.debuglog.
    Evidence`) of the log files ``logs`` and of the NCCL lines of the
    output ``stdout`` (named ``source``)."""
    logs = list(logs or ())
    ev = debuglog.read_evidence(logs) if logs else debuglog.Evidence()
    if stdout:
        debuglog.feed_lines(ev, stdout.splitlines(), source=source)
    return ev


def attempt(stdout='', logs=(), exit_status=None, *, result=None,
            parse=None, source='stdout', debug=None, transport=None,
            nodes=1, proof=PROVE, proof_required=True, killed=None,
            launch_error=None, ras=None, launcher_text=None):
    """One run of a case from what it left: its output ``stdout`` (named
    ``source`` in what is read; ``result``: already parsed, else
    ``parse(stdout)``, by default nccl-tests' text or JSON reader), its
    debug log files ``logs`` (``debug``: their evidence, already read with
    the output's NCCL lines by :func:`evidence`) and its exit status.

    The transport ``transport`` asked (None: what the logs say was asked,
    :func:`ccl_health.evidence.proof.prove`) is proven on ``nodes`` nodes,
    every rank of the output's header showing it; where the proof is not
    required (``proof_required`` False) and neither a log nor a channel
    line was left, there is no proof (never a failed one).  ``proof``: the
    door's own where it already knows the ask cannot be proven.
    ``killed``: why it was stopped from outside (a hang), ``ras``: what
    NCCL's RAS said before it was stopped (:mod:`ccl_health.evidence.ras`);
    ``launch_error``: it never ran (could not check).  ``launcher_text``:
    the launcher's words (its stderr; default ``stdout``), where the first
    rank that exited is read (:func:`ccl_health.evidence.stalls.
    first_exit`)."""
    logs = list(logs or ())
    if result is None and (stdout or parse is not None):
        result = (parse or nccltests.parse)(stdout or '')
    ev = debug if debug is not None else evidence(logs, stdout, source)
    if proof is PROVE:
        proof = None
        if proof_required or logs or ev.via:
            proof = prove(transport, ev, nodes=nodes or 1,
                          expected_ranks=getattr(result, 'nranks', None),
                          table=result, table_source=source if stdout
                          else None)
    warn_list, versions = W.read_logs(logs, stdout or '', source)
    return Attempt(result, exit_status, killed, proof, ev, warn_list,
                   launch_error, rank_versions=versions,
                   **_who(killed, ras, logs, result, exit_status,
                          launcher_text if launcher_text is not None
                          else stdout))


def _who(killed, ras, logs, result, exit_status, text):
    """The rank a hang or a crash is named by: RAS's answer and the
    debug log that stopped first (killed), the launcher's first exit."""
    out = {'ras': _own(ras, result)}
    if killed:
        out['stalled'] = stalls.log_stopped_first(logs, result)
    elif exit_status not in (None, 0):
        out['first_exit'] = stalls.first_exit(text, result)
    return out


def _own(ras, result):
    """RAS's answer where it can be this run's: one naming only
    processes the run's header does not have (another job's RAS on the
    same address) names no rank of it."""
    pids = {p for p in getattr(result, 'rank_pids', None) or ()
            if p is not None}
    named = {n.pid for n in getattr(ras, 'notes', None) or ()
             if n.pid is not None}
    if not (pids and named) or named & pids:
        return ras
    return dataclasses.replace(ras, notes=[], waiting=[], why=(
        f'RAS at {ras.address} named processes {sorted(named)[:4]}, none '
        f'of this run (its ranks: pids {sorted(pids)[:8]})'))


def unrun(launch_error=None, killed=None, result=None, exit_status=None,
          ras=None, logs=(), stdout=''):
    """An attempt that left nothing to read: the program never ran
    (``launch_error``: could not check; ``result``: what the launcher
    printed instead, with its ``exit_status``), or it was stopped from
    outside (``killed``: a hang; ``ras``: what NCCL's RAS said first; its
    ``logs`` and ``stdout`` so far name the rank where RAS could not)."""
    header = nccltests.parse(stdout) if result is None and stdout \
        else result             # the ranks' hosts and pids, for naming
    return Attempt(result, exit_status, killed, launch_error=launch_error,
                   **_who(killed, ras, list(logs or ()), header,
                          exit_status, stdout))


def benign_of(site):
    """``[(regex, why, overrides)]`` of the site's ``benign_warns``
    (:func:`ccl_health.evidence.warns.benign_patterns`); ``()`` without a
    site."""
    return W.benign_patterns(getattr(site, 'benign_warns', None) or ())


def _benign(warn_list, patterns):
    """``warn_list`` with each line a pattern of the site declares benign
    named so (:func:`ccl_health.evidence.warns.classify`'s rule: a line of
    a fatal class only where the pattern names it in ``overrides``)."""
    if not patterns:
        return list(warn_list)
    out = []
    for w in warn_list:
        again = W.classify(w.text, w.source, patterns)
        out.append(again if again.benign else w)
    return out


def case(attempts, *, what='the run', transport=None, collective=None,
         nodes=None, gpus_per_node=None, ranks=None, algo='default',
         expected_sizes=None, exact_sizes=True, site=None, node_states=None,
         node=None, gpus=None, reference=None, missing_reference='',
         proof_required=True, judge_bandwidth=True):
    """The evidence of one case for :func:`ccl_health.judge.casejudge.judge`.

    ``attempts``: its runs (:func:`attempt`), in order; ``transport``,
    ``collective``, ``nodes`` x ``gpus_per_node``, ``algo`` and the sizes
    asked (``expected_sizes``; None: the output's header; ``exact_sizes``:
    the program prints exactly those); ``site``
    (:class:`ccl_health.sitedata.site.Site`, or None): its
    ``benign_warns`` name WARN lines of every attempt benign, its
    ``transports``' ceilings bound an impossible busbw; ``node_states``:
    the node-state sampler's readings (``{'before', 'samples', 'after'}``,
    judged: another process on the GPUs is ``contended``); ``node``: a
    reading whose NVLink links of ``gpus`` (None: every GPU) bound the
    busbw (default: ``node_states``' ``before``); ``reference``: the entry
    of the case's key (None: ``no-reference``, ``missing_reference`` says
    why)."""
    patterns = benign_of(site)
    atts = [dataclasses.replace(a, warns=_benign(a.warns, patterns))
            for a in attempts]
    transports = getattr(site, 'transports', None) or {}
    if node is None:
        node = (node_states or {}).get('before')
    ceiling, source = bounds.bound(
        transport, nodes=nodes, site_transport=transports.get(transport),
        site_intra=transports.get('intra'),
        links=bounds.links_of_node(node, gpus))
    if ranks is None and nodes and gpus_per_node:
        ranks = nodes * gpus_per_node
    return CaseEvidence(
        what=what, transport=transport, collective=collective, nodes=nodes,
        gpus_per_node=gpus_per_node, ranks=ranks, algo=algo,
        expected_sizes=expected_sizes, exact_sizes=exact_sizes,
        attempts=atts, node_states=node_states,
        proof_required=proof_required, judge_bandwidth=judge_bandwidth,
        reference=reference, missing_reference=missing_reference,
        ceiling_gbps=ceiling, ceiling_source=source,
        benign_warns=patterns)
