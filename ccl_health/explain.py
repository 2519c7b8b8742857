"""Raw outputs in, verdict out: ``scripts/explain FILE...``.

Takes the output of an nccl-tests / rccl-tests run made elsewhere (its
stdout, its ``-J`` JSON, rccl-tests' ``-Z json`` file) and the NCCL/RCCL
debug logs of the same run (and a sweep's node state sampler file,
``ccl-health-nodestate.jsonl``: ``contended`` when another process shared
the GPUs), tells them apart by their content, and prints
the sizes and bus bandwidth read, the transport the logs prove, the
versions found and, given a reference (``--system`` / ``--partition`` or
``--reference``), the verdict, judged like the suite's own runs
(:func:`ccl_health.judge.casejudge.judge`): PASS only with complete positive
evidence.  Exit status: :func:`ccl_health.judge.verdicts.exit_code` of the
verdict; 2 for an unreadable file, or when no file holds anything
recognisable (a file with nothing recognisable beside others, such as a
job's stderr with only mpirun's words, is listed as not read).
"""

import argparse
import json
import sys

from ccl_health import CclHealthError, argnumbers
from ccl_health.sitedata.transports import NAMES as TRANSPORTS
from ccl_health import resources
from ccl_health.evidence import collectives
from ccl_health.evidence import nccltests
from ccl_health.evidence import nccltests_json
from ccl_health.evidence import results
from ccl_health.judge import reference
from ccl_health.evidence.proof import asked_from_log
from ccl_health.judge import verdicts as V
from ccl_health.judge import assemble
from ccl_health.judge import casejudge as judge_mod
from ccl_health.units import format_size
from ccl_health.helptext import Formatter

def default_reference_dir():
    return resources.reference_dir()


def classify(text, path):
    """What ``text`` (the content of ``path``) is: ``'json'`` (an
    nccl-tests / rccl-tests JSON file), ``'output'`` (a text output, maybe
    with NCCL lines in it), ``'log'`` (an NCCL/RCCL debug log), or raise."""
    if text.lstrip().startswith('{"phase"'):
        return 'nodestate'       # python -m ccl_health.evidence.nodestate --watch
    if nccltests_json.looks_like_json(text):
        return 'json'
    res = nccltests.parse_text(text)
    # an error printed by NCCL's logger ("NCCL WARN Cuda failure") is the
    # debug log's, not a test output's
    own_errors = [e for e in res.errors if not nccltests._NCCL_LOG.search(e)]
    # a line NCCL's logger wrote (with or without its host:pid:tid prefix);
    # text that merely names NCCL ("RCCL Test Data") is not a log
    logged = any(nccltests._NCCL_LOG.search(nccltests.strip_prefixes(ln))
                 for ln in text.splitlines())
    # an error the test program prints makes an output; another program's
    # error ("NCCL error in: ..." of a training job) in a debug log does not
    test_errors = [e for e in own_errors if nccltests.TEST_ERROR.search(e)]
    if res.rows or res.out_of_bounds is not None or res.devices or \
            res.tests_version or test_errors or res.min_bytes is not None \
            or (own_errors and not logged):
        return 'output'
    if logged:
        return 'log'
    raise CclHealthError(f'{path}: not an nccl-tests / rccl-tests output '
                         f'nor an NCCL/RCCL debug log (nothing recognisable)')


def _only_said(text):
    """Whether the output ``text`` holds nothing of a run but how it ended
    (errors, a signal): no header, rank line, row or summary."""
    res = nccltests.parse_text(text)
    return bool(res.errors) and not (
        res.rows or res.devices or res.min_bytes is not None or
        res.tests_version or res.out_of_bounds is not None or
        res.avg_busbw is not None)


def _read(path):
    try:
        with open(path, errors='replace') as fp:
            return fp.read()
    except OSError as err:
        raise CclHealthError(f'{path}: cannot read: {err.strerror or err}') \
            from None


def _log_only(files, kinds, logs, nodes, transport_asked, site=None):
    """The explanation of debug logs given alone: the transport they
    prove; bandwidth is not judged (could-not-check)."""
    paths = [p for p, _ in logs]
    ev = assemble.evidence(paths)
    hosts = list(ev.hosts)
    nodes = nodes or len(hosts) or ev.nnodes_seen or 1
    # the judge's verdict of a case with no output: a fatal WARN fails it,
    # and so does an error the job printed into its log ("NCCL error in:
    # ... remote process exited"), judged as the run's reported error
    parsed = [nccltests.parse_text(t) for _, t in logs]
    errors = [e for r in parsed for e in r.errors
              if not nccltests._NCCL_LOG.search(e)]
    said_res = None
    if errors:
        said_res = results.SweepResult(source='text', closed=None)
        said_res.errors = errors
        # an operation that timed out (PyTorch's watchdog) is a hang
        said_res.timed_out = any(r.timed_out for r in parsed)
    att = assemble.attempt(logs=paths, result=said_res, debug=ev,
                           transport=transport_asked, nodes=nodes)
    proof = att.proof
    said = (f'proven {proof.proven}' if proof.ok else
            f'{"fallback to " + proof.proven if proof.proven else "not proven"}')
    why = proof.reason.replace('the transport is not proven: ', '', 1)
    reason = (f'could not check: debug log only: transport {said}: '
              f'{why}; bandwidth not judged (no nccl-tests / '
              f'rccl-tests output among the files)')
    judged = judge_mod.judge(assemble.case(
        [att], transport=proof.asked, nodes=nodes, site=site))
    verdict = V.Verdict.COULD_NOT_CHECK
    if judged.verdict.failed:
        verdict = judged.verdict
        reason = (f'{judged.reason}; debug log only: transport {said}: '
                  f'{why}; bandwidth not judged')
    else:
        reason += judge_mod._warn_note(judged.warns)
    return {
        'files': [{'path': p, 'kind': kinds[p]} for p in files],
        'format': None, 'source': None, 'collective': None,
        'nranks': ev.nranks_seen, 'hosts': hosts, 'complete': False,
        'out_of_bounds': None, 'avg_busbw': None, 'errors': errors,
        'json_error': None, 'notes': ['debug log only: bandwidth not judged'],
        'exit_status': None, 'rows': [],
        'transport': {'asked': proof.asked, 'proven': proof.proven,
                      'ok': proof.ok, 'reason': proof.reason},
        'runs': _runs_doc(proof),
        'versions': dict(ev.versions),
        'versions_by_rank': ev.versions_by_rank,
        'reference': {'system': None, 'partition': None, 'file': None,
                      'found': False, 'key': '?',
                      'reason': 'debug log only: bandwidth not judged'},
        'verdict': str(verdict), 'reason': reason,
        'exit_code': V.exit_code([verdict]),
        'node_state': None,
    }


def explain(files, *, system=None, partition=None, reference_file=None,
            transport_asked=None, nodes=None, gpus_per_node=None,
            collective=None, exit_status=None, refdir=None, site=None):
    """The explanation of one run as a dict (what ``--json`` prints);
    ``site`` (:class:`ccl_health.sitedata.site.Site`): its benign WARNs
    and ceilings, as the suite's own runs are judged.  Section by section:
    reading the paste (:func:`_read_paste`, :func:`_parse_run`), what the
    run was (:func:`_run_of`, :func:`_reference_of`), the verdict (the
    judge's), the words (:func:`_document`)."""
    paste = _read_paste(files)
    if not paste.outputs and not paste.jsons:
        if paste.logs:
            return _log_only(files, paste.kinds, paste.logs, nodes,
                             transport_asked, site)
        raise CclHealthError(f'{files[0]}: no nccl-tests / rccl-tests output '
                             f'among the files')
    res, stdout, source = _parse_run(paste)
    run = _run_of(res, stdout, source, paste.logs, nodes=nodes,
                  transport_asked=transport_asked, exit_status=exit_status,
                  collective=collective, gpus_per_node=gpus_per_node)
    ref_doc, entry = _reference_of(run, system=system, partition=partition,
                                   reference_file=reference_file,
                                   refdir=refdir)

    # the verdict: the judge's, from this run's evidence
    states = _node_states(paste.watched)
    # the ranks asked: --gpus-per-node given, its nodes' worth (the judge
    # compares them with the output's); else what the output shows
    asked_ranks = (run.nodes * gpus_per_node if gpus_per_node and run.nodes
                   else run.ranks)
    judged = judge_mod.judge(assemble.case(
        [run.att], what=res.collective or 'the run', transport=run.asked,
        collective=run.coll, nodes=run.nodes, gpus_per_node=run.gpn,
        ranks=asked_ranks, site=site, node_states=states, reference=entry,
        missing_reference=ref_doc['reason'] or ref_doc['key']))
    reason = judged.reason
    if exit_status is None and judged.verdict is \
            V.Verdict.COULD_NOT_CHECK and 'exit status' in reason:
        reason += ' (give it with --exit-status N)'
    return _document(files, paste, res, run, ref_doc, judged, reason,
                     exit_status, _node_doc(paste.watched, states))


class _Paste:
    """The files of a paste, told apart by their content: text outputs,
    JSON files, debug logs, the node state sampler's file (each a list of
    ``(path, text)``), ``kinds`` ({path: kind}), and ``said_only``: the
    outputs that say only how the run ended (a job's stderr), read with
    the run's output."""

    def __init__(self):
        self.outputs, self.jsons, self.logs, self.watched = [], [], [], []
        self.kinds, self.said_only = {}, []


def _read_paste(files):
    """The files read and told apart (:class:`_Paste`); an error where
    none holds anything recognisable, or where they hold several runs."""
    paste = _Paste()
    unrecognised = []
    for path in files:
        text = _read(path)
        try:
            kind = classify(text, path)
        except CclHealthError as err:
            # a job's stderr beside its output (mpirun's or srun's own
            # words, or nothing): not read, and said so; alone, an error
            unrecognised.append(err)
            paste.kinds[path] = 'unrecognised'
            continue
        paste.kinds[path] = kind
        {'output': paste.outputs, 'json': paste.jsons, 'log': paste.logs,
         'nodestate': paste.watched}[kind].append((path, text))
    if unrecognised and not (paste.outputs or paste.jsons or paste.logs or
                             paste.watched):
        raise unrecognised[0]
    # a job's stderr beside its output that says only how a process died
    # (the launcher's or the C library's words: "Signal: Aborted (6)"): the
    # same run's, read with it
    said_only = [(p, t) for p, t in paste.outputs if _only_said(t)]
    if said_only and (len(said_only) < len(paste.outputs) or paste.jsons):
        paste.outputs = [o for o in paste.outputs if o not in said_only]
        paste.said_only = said_only
    if len(paste.outputs) > 1 or len(paste.jsons) > 1:
        raise CclHealthError(
            f'{(paste.outputs + paste.jsons)[-1][0]}: one run at a time (got '
            f'{len(paste.outputs)} text outputs and {len(paste.jsons)} JSON '
            f'files)')
    return paste


def _parse_run(paste):
    """The run's result (its text output, its JSON, or both), with the
    errors and signal of the files that say only how it ended; its stdout
    and the output's path."""
    outputs, jsons = paste.outputs, paste.jsons
    stdout = outputs[0][1] if outputs else ''
    origin = jsons[0][0] if jsons else (outputs[0][0] if outputs else '')
    if jsons and not outputs:
        res = nccltests.parse_any(jsons[0][1], origin)
    else:
        res = nccltests.parse(stdout, jsons[0][1] if jsons else None, origin)
    for _, text in paste.said_only:
        said = nccltests.parse_text(text)
        res.errors += [e for e in said.errors if e not in res.errors]
        res.signal = res.signal or said.signal
    return res, stdout, outputs[0][0] if outputs else ''


class _Run:
    """What the run was, as the files show it: its debug evidence, hosts
    and nodes, the transport asked and its proof (``att``: the assembler's
    attempt, ``proof_doc``), the collective, ranks, GPUs per node and the
    notes said of them."""


def _run_of(res, stdout, source, logs, *, nodes, transport_asked,
            exit_status, collective, gpus_per_node):
    """The :class:`_Run` of ``res``: the transport from the logs and the
    NCCL lines of the output, then the shape of the run."""
    run = _Run()
    ev = run.ev = assemble.evidence([p for p, _ in logs], stdout, source)
    run.hosts = res.hosts or list(getattr(ev, 'hosts', []) or [])
    # host names where the lines carry them (NCCL's nNodes counts host
    # hashes: NCCL_HOSTID splits one host), else the log's own node count
    if not nodes and res.rank_lines_partial:
        # a cut listing names some of the run's hosts only: NCCL's own
        # count of them, or the hosts of its lines where they are more,
        # else unknown (never the hosts that happen to be shown)
        seen = list(getattr(ev, 'hosts', []) or [])
        nodes = ev.nnodes_seen or (len(seen) if len(seen) > len(res.hosts)
                                   else None)
    else:
        nodes = nodes or (len(run.hosts) if run.hosts else ev.nnodes_seen)
    run.nodes = nodes
    from_log = None if transport_asked else asked_from_log(ev)
    asked = run.asked = transport_asked or from_log or ev.proven()
    run.notes = list(res.notes)
    proof_doc = None
    if asked is None:
        # NCCL's lines inline in the output are a debug log too
        why = ('no NCCL debug log among the files' if not logs and
               not ev.via and not ev.nccl_lines else
               'no channel lines in the debug logs' if logs else
               'no channel lines among the NCCL lines of the output')
        proof_doc = {'asked': None, 'proven': None, 'ok': False,
                     'reason': f'the transport is not proven: {why}'}
    elif asked not in TRANSPORTS:
        proof_doc = {'asked': asked, 'proven': ev.proven(), 'ok': False,
                     'reason': f'the logs show {asked}, not a transport the '
                               f'suite judges ({", ".join(TRANSPORTS)})'}
    elif from_log:
        run.notes.append(f'--transport not given: judged as the transport '
                         f'the logs ask for ({asked})')
    elif not transport_asked:
        run.notes.append(f'--transport not given: judged as the transport '
                         f'the logs prove ({asked})')
    # proven by the assembler (not given: the proof reads the ask from the
    # log itself), unless the ask cannot be named
    run.att = assemble.attempt(
        stdout, [p for p, _ in logs], exit_status, result=res,
        source=source, debug=ev, transport=transport_asked, nodes=nodes or 1,
        proof=assemble.PROVE if proof_doc is None else
        _Unproven(proof_doc['reason']))
    run.runs = []
    if proof_doc is None:
        proof = run.att.proof
        proof_doc = {'asked': proof.asked, 'proven': proof.proven,
                     'ok': proof.ok, 'reason': proof.reason}
        run.runs = _runs_doc(proof)
    run.proof_doc = proof_doc
    _shape(run, res, collective, gpus_per_node)
    return run


def _shape(run, res, collective, gpus_per_node):
    """The collective, ranks and GPUs per node of ``run`` (what its
    reference key is made of)."""
    coll = collective or res.collective
    try:
        coll = collectives.canonical(coll) if coll else None
    except CclHealthError:
        pass
    ranks = res.nranks
    if ranks is None and coll and res.rows:
        # only some rank lines (or none): the busbw / algbw factor of the
        # collective, else unknown (null), never one rank by default
        try:
            ranks = res.nranks = collectives.ranks_of_factor(
                coll, [(m.algbw, m.busbw) for r in res.rows
                       for m in (r.out_of_place, r.in_place) if m])
        except CclHealthError:
            ranks = None
    ranks = ranks or run.ev.nranks_seen
    per_host = res.ranks_per_host
    nodes = run.nodes
    if len(set(per_host.values())) > 1:
        # hosts holding different numbers of ranks: no one GPUs per node
        gpn = gpus_per_node
        run.notes.append('hosts hold different numbers of ranks: ' +
                         ', '.join(f'{h} {n}' for h, n in per_host.items()))
    elif per_host and (not nodes or len(per_host) == nodes):
        gpn = gpus_per_node or next(iter(per_host.values()))
    else:
        gpn = gpus_per_node or (ranks // nodes if ranks and nodes and
                                ranks % nodes == 0 else None)
    run.coll, run.ranks, run.gpn = coll, ranks, gpn


def _reference_of(run, *, system, partition, reference_file, refdir):
    """The reference of ``run``'s key: its document (``key``, ``found``,
    why not found in ``reason``) and its entry (None when not found)."""
    asked, coll, nodes, gpn = run.asked, run.coll, run.nodes, run.gpn
    ref_doc = {'system': system, 'partition': partition,
               'file': reference_file, 'found': False, 'reason': None}
    entry = None
    key = (f'{system or "?"}:{partition or "?"} {asked or "?"} '
           f'{coll or "?"} {nodes or "?"} node(s) x {gpn or "?"} GPUs')
    if not (system or reference_file):
        ref_doc['reason'] = ('no reference given (--system S --partition P, '
                             'or --reference FILE)')
    elif None in (asked, coll, nodes, gpn):
        missing = [n for n, v in (('--transport', asked),
                                  ('--collective', coll), ('--nodes', nodes),
                                  ('--gpus-per-node', gpn)) if v is None]
        ref_doc['reason'] = (f'no reference key: {", ".join(missing)} not '
                             f'known from the files')
    else:
        try:
            ref = (reference.load(reference_file) if reference_file else
                   reference.load_for_system(refdir or
                                             default_reference_dir(), system))
            if partition is None:
                if len(ref.partitions) == 1:
                    partition = next(iter(ref.partitions))
                else:
                    raise CclHealthError(
                        f'{ref.path}: --partition needed (has: '
                        f'{", ".join(sorted(ref.partitions))})')
            ref_doc.update(system=ref.system, partition=partition,
                           file=ref.path)
            key = (f'{ref.system}:{partition} {asked} {coll} {nodes} '
                   f'node(s) x {gpn} GPUs')
            entry = ref.lookup(partition, asked, coll, nodes, gpn)
            if entry is None:
                miss = getattr(ref, 'missing_reason', None)
                ref_doc['reason'] = (miss(partition, asked, coll, nodes, gpn)
                                     if miss else f'no reference for {key} '
                                     f'in {ref.path}')
            else:
                ref_doc.update(found=True, tolerance=entry.tolerance,
                               source=entry.source)
        except CclHealthError as err:
            ref_doc['reason'] = str(err)
    ref_doc['key'] = key
    return ref_doc, entry


def _document(files, paste, res, run, ref_doc, judged, reason, exit_status,
              node_doc):
    """The explanation's words: what ``--json`` prints and :func:`render`
    writes for a person."""
    versions = {}
    if res.tests_version:
        versions['nccl_tests'] = res.tests_version
    if res.nccl_version:
        versions['rccl_code' if res.format.startswith('rccl') else
                 'nccl_code'] = res.nccl_version
    if res.library_version:
        versions['library'] = res.library_version
    versions.update(run.ev.versions)

    rows = []
    for r, f in zip(res.rows, judged.findings):
        rows.append({
            'size': r.size, 'busbw': _num(r.busbw),
            'out_of_place': _num(r.out_of_place.busbw)
            if r.out_of_place else None,
            'in_place': _num(r.in_place.busbw) if r.in_place else None,
            'wrong': r.wrong, 'nonfinite': r.nonfinite,
            'reference': f.ref, 'allowed': f.allowed,
            'below': f.below if f.ref is not None else None})
    v = judged.verdict
    return {
        'files': [{'path': p, 'kind': paste.kinds[p]} for p in files],
        'format': res.format, 'source': res.source,
        'collective': res.collective, 'nranks': run.ranks,
        'hosts': run.hosts,
        'rank_lines_cut': bool(res.rank_lines_partial),
        'complete': res.complete, 'out_of_bounds': res.out_of_bounds,
        'avg_busbw': _num(res.avg_busbw), 'errors': res.errors,
        'json_error': res.json_error, 'notes': run.notes,
        'exit_status': exit_status, 'rows': rows,
        'transport': run.proof_doc,
        'runs': run.runs,
        'versions': versions, 'reference': ref_doc,
        'verdict': str(v), 'reason': reason,
        'exit_code': V.exit_code([v]),
        'node_state': node_doc,
        'warns': [w.describe() for w in judged.warns],
    }


def _runs_doc(proof):
    """Each run of a log that holds several, judged on its own
    (:class:`ccl_health.evidence.proof.RunProof`): its processes, rank
    count, transport and whether the output is its; [] for one run."""
    return [r.as_dict() for r in getattr(proof, 'runs', None) or []]


class _Unproven:
    """A proof that is not one: the transport could not be named."""
    ok, proven = False, None

    def __init__(self, reason):
        self.reason = reason


def _node_states(watched):
    """The sampler's readings of the run (``ccl-health-nodestate.jsonl``
    among the files), or None."""
    if not watched:
        return None
    from ccl_health.evidence.nodestate.__main__ import read_watch
    return read_watch(watched[0][0])


def _node_doc(watched, states):
    """What the node's state shows: the causes (the judge says
    ``contended``)."""
    if not watched:
        return None
    from ccl_health.evidence.nodestate.diagnose import diagnose
    all_states = [states.get('before'), *states.get('samples', []),
                  states.get('after')]
    causes = diagnose(states.get('before'), states.get('after'),
                      samples=states.get('samples', []))
    return {'file': watched[0][0],
            'readings': sum(1 for s in all_states if s),
            'causes': [c.text for c in causes]}


def _num(x):
    """JSON has no nan / inf: those are written as strings."""
    if isinstance(x, float) and x != x or x in (float('inf'), float('-inf')):
        return str(x)
    return x


def render(doc):
    """The explanation for a person."""
    out = []
    files = ', '.join(f'{f["path"]} ('
                      f'{"nothing recognisable: not read" if f["kind"] == "unrecognised" else f["kind"]})'
                      for f in doc['files'])
    out.append(f'files      {files}')
    state = 'complete' if doc['complete'] else 'INCOMPLETE'
    if doc['format'] is None:
        out.append('output     none (debug log only: bandwidth not judged)')
    else:
        where = (f'; hosts shown: {", ".join(doc["hosts"]) or "none"} (the '
                 f'rank lines are cut)' if doc.get('rank_lines_cut') else
                 f' on {", ".join(doc["hosts"]) or "?"}')
        out.append(
            f'output     {doc["format"]} ({doc["source"]}), {state}; '
            f'{doc["collective"] or "collective unknown"}, '
            f'{doc["nranks"] or "?"} ranks{where}')
    if doc['versions']:
        out.append('versions   ' + ', '.join(
            f'{k} {v}' for k, v in doc['versions'].items()))
    t = doc['transport']
    proven = f'proven {t["proven"]}' if t.get('proven') else 'not proven'
    asked = f' (asked {t["asked"]})' if t.get('asked') else ''
    out.append(f'transport  {proven}{asked}: {t["reason"]}')
    for run in doc.get('runs') or []:
        rt = run['transport']
        said = (f'proven {rt["proven"]}' if rt['ok'] else
                f'{rt["proven"]}, not proven as asked' if rt['proven'] else
                'not proven')
        n = run['nranks']
        out.append(f'run {run["run"]:<6} {", ".join(run["processes"][:4])}'
                   f'{", ..." if len(run["processes"]) > 4 else ""} '
                   f'({len(run["processes"])} process(es), '
                   f'{n if n else "?"} ranks)'
                   f'{"; the output is this run" if run["table"] else ""}: '
                   f'{said} (asked {rt["asked"] or "?"}): {rt["reason"]}')
    r = doc['reference']
    out.append(f'reference  {r["key"]}: ' + (
        f'{r["file"]}, tolerance {r["tolerance"]:.0%}' if r['found']
        else r['reason']))
    status = doc['exit_status']
    out.append('exit       ' + (str(status) if status is not None else
                                'unknown (--exit-status N)'))
    ns = doc.get('node_state')
    if ns:
        out.append(f'node       {ns["readings"]} readings: ' + (
            '; '.join(ns['causes']) or 'no cause (nothing else on the GPUs)'))
    for e in doc['errors'][:5]:
        out.append(f'error      {e}')
    for n in doc['notes']:
        out.append(f'note       {n}')
    out.append('')
    out.append(f'{"size":>8}  {"busbw GB/s":>10}  {"reference":>9}  '
               f'{"allowed":>8}')
    for row in doc['rows']:
        b = row['busbw']
        bs = f'{b:10.2f}' if isinstance(b, float) else f'{b!s:>10}'
        ref = f'{row["reference"]:9.2f}' if row['reference'] else ' ' * 9
        allowed = f'{row["allowed"]:8.2f}' if row['allowed'] else ' ' * 8
        mark = ('  BELOW' if row['below'] else '') + \
            ('  WRONG' if row['wrong'] else '') + \
            ('  NON-FINITE' if row['nonfinite'] else '')
        out.append(f'{format_size(row["size"]):>8}  {bs}  {ref}  '
                   f'{allowed}{mark}')
    out.append('')
    out.append(f'{doc["verdict"].upper()}: {doc["reason"]}')
    return '\n'.join(out)

#: the command's name in its usage line (the console script sets its own)
PROG = 'scripts/explain'


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=Formatter,
        description='Explain an nccl-tests / rccl-tests run made elsewhere: '
                    'its output (text, -J JSON, rccl-tests -Z json) and its '
                    'NCCL debug logs in, sizes, transport, versions and '
                    'verdict out.')
    p.add_argument('files', nargs='+', metavar='FILE',
                   help='the program\'s output (text, -J JSON, rccl-tests '
                   '-Z json) and its NCCL / RCCL debug logs, in any order; '
                   'with a sweep\'s ccl-health-nodestate.jsonl, the node\'s '
                   'state too (contended when another process shared the '
                   'GPUs)')
    p.add_argument('--json', action='store_true',
                   help='print a machine-readable document')
    p.add_argument('--system', help='the system whose reference/<system>.yaml '
                   'to judge against (CCL_HEALTH_REFERENCE_DIR), and whose '
                   'site/<system>.yaml, where there is one, says which NCCL '
                   'WARN lines are benign and the busbw ceilings '
                   '(CCL_HEALTH_SITE_DIR)')
    p.add_argument('--partition', help='the partition of --system whose '
                   'reference applies')
    p.add_argument('--reference', metavar='FILE',
                   help='a reference file (instead of --system)')
    p.add_argument('--transport', choices=TRANSPORTS,
                   help='the transport asked for (default: the one proven)')
    p.add_argument('--nodes', type=_positive,
                   help='nodes of the run (default: from the debug logs, '
                   'else 1)')
    p.add_argument('--gpus-per-node', type=_positive,
                   help='GPUs (ranks) per node (default: from the output)')
    p.add_argument('--collective', help='the collective run (default: from '
                   'the output)')
    p.add_argument('--exit-status', type=argnumbers.EXIT_STATUS,
                   help="the program's exit status (unknown: never a pass)")
    return p


def system_site(system):
    """The site file of ``system`` (``site/<system>.yaml`` of
    ``$CCL_HEALTH_SITE_DIR`` or the shipped ones) where there is one: its
    benign WARNs and ceilings judge the run; None without ``--system`` or
    without a site file for it.  A broken site file is an error."""
    import os
    from ccl_health.sitedata import site as site_data
    if not system or os.sep in system or \
            not os.path.isfile(os.path.join(resources.site_dir(),
                                                     f'{system}.yaml')):
        return None
    from ccl_health.evidence.benignwarns import check_benign
    return site_data.load(resources.site_dir(), system,
                          benign_check=check_benign)


def _positive(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f'expected a whole number >= 1, '
                                         f'got {text!r}')
    return n


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.system and args.reference:
        print('explain: give --system or --reference, not both',
              file=sys.stderr)
        return V.EXIT_UNJUDGED
    if args.reference:               # a file named: read it before any work
        from ccl_health.judge import reference
        try:
            reference.load(args.reference)
        except CclHealthError as err:
            print(f'explain: --reference: {err}', file=sys.stderr)
            return V.EXIT_UNJUDGED
    try:
        site = system_site(args.system)
        doc = explain(args.files, system=args.system,
                      partition=args.partition,
                      reference_file=args.reference,
                      transport_asked=args.transport, nodes=args.nodes,
                      gpus_per_node=args.gpus_per_node,
                      collective=args.collective,
                      exit_status=args.exit_status, site=site)
    except CclHealthError as err:
        print(f'explain: {err}', file=sys.stderr)
        return V.EXIT_UNJUDGED
    try:
        print(json.dumps(doc, indent=1) if args.json else render(doc),
              flush=True)
    except BrokenPipeError:         # the reader went away (``| head``)
        from ccl_health.entry import reader_gone
        return reader_gone()
    return doc['exit_code']


if __name__ == '__main__':
    sys.exit(main())
