"""Which rank a hang or a crash is named by, as the judge's reason says
it (:func:`ccl_health.judge.casejudge.judge_attempt` appends it).

A hang (a run stopped from outside at its bound): what NCCL's RAS said
before it was stopped (:mod:`ccl_health.evidence.ras`)::

    hang: ...: rank 2 (node1 GPU 2, pid 1746) unresponsive; 3 ranks
    waiting in AllReduce #812 (NCCL RAS at localhost:28028)

where RAS could not be asked or named no rank, the debug log that stopped
first (:func:`ccl_health.evidence.stalls.log_stopped_first`), each source
named; and where nothing names a rank, why (``no rank named: ...``).  The
verdict stays ``hang`` whatever RAS answered.

A crash: the first rank the launcher says exited, how, and its own error
line (:func:`ccl_health.evidence.stalls.first_exit`)."""

from ccl_health.units import format_size

#: ranks named in one reason at most
MAX_NAMED = 4

_STATE = {'unresponsive': 'unresponsive', 'dead': 'dead (unreachable)',
          'error': 'in error', 'status': 'in another state'}


def _who(n):
    where = ' '.join(p for p in (n.host, f'GPU {n.gpu}' if n.gpu else '')
                     if p)
    pid = f'pid {n.pid}' if n.pid is not None else ''
    inner = ', '.join(p for p in (where, pid) if p)
    head = f'rank {n.rank}' if n.rank is not None else 'process'
    return f'{head} ({inner})' if inner else head


def _note(n):
    if n.state == 'behind':
        what = f'{n.collective} ' if n.collective else 'operation '
        at = f'#{n.count}' if n.count else 'none launched'
        return f'{_who(n)} behind at {what}{at}'
    detail = f' {n.detail}' if n.detail and n.state in ('status',
                                                        'error') else ''
    return f'{_who(n)} {_STATE.get(n.state, n.state)}{detail}'


def _ras_text(ans):
    notes = list(ans.notes)
    parts = [_note(n) for n in notes[:MAX_NAMED]]
    if len(notes) > MAX_NAMED:
        parts.append(f'+{len(notes) - MAX_NAMED} more')
    for w in ans.waiting[:2]:
        what = f'{w.collective} ' if w.collective else 'operation '
        parts.append(f'{w.ranks} ranks waiting in {what}#{w.count}')
    return '; '.join(parts)


def _reached(att):
    rows = list(getattr(att.result, 'rows', None) or [])
    if not rows:
        return ''
    return f' (last size done {format_size(rows[-1].size)})'


def hang(att):
    """What names the rank of a hang, for the reason after ``hang: ...``
    (starting ``: ``)."""
    ans, named = att.ras, att.stalled
    src = f'NCCL RAS at {ans.address}' if ans is not None else ''
    if ans is not None and ans.ok and ans.notes:
        return f'{_reached(att)}: {_ras_text(ans)} ({src})'
    if ans is None:
        why = 'RAS not asked'
    elif ans.ok and ans.all_running:
        why = f'{src}: every communicator RUNNING OK'
    elif ans.ok:
        rows = ', '.join(sorted({f'{s} {e}' for s, e in ans.comms})) or \
            'no communicator'
        why = f'{src} named no rank ({rows})'
    else:
        why = ans.why
    if named is not None:
        return (f'{_reached(att)}: {_who(named)} stopped first, from '
                f'{named.source} ({why})')
    return (f'{_reached(att)}; no rank named: {why}; the outputs do not '
            f'show which rank stopped')


def crash(att):
    """The first rank that exited, for a crash's reason (starting ``; ``),
    or ''."""
    n = att.first_exit
    if n is None:
        return ''
    how = f' ({n.how})' if n.how else ''
    err = f': {n.error}' if n.error else ''
    return f'; first to exit: {_who(n)}{how}, from {n.source}{err}'


#: the states of a rank RAS names that mark its node as the one that
#: stopped (an ``error`` or another ``status`` says something else)
STOPPED = ('unresponsive', 'dead', 'behind')


def _node_of(host, nodes):
    """The one of ``nodes`` that ``host`` (as NCCL or a debug log's name
    gives it: short or qualified) is; None: none, or more than one."""
    host = (host or '').strip()
    if not host:
        return None
    hits = [n for n in nodes if n == host or host.startswith(n + '.') or
            n.startswith(host + '.')]
    return hits[0] if len(hits) == 1 else None


def _host_of(note, result):
    """The host of a rank or process RAS names.  RAS prints a node by its
    address (``on node 192.0.2.2``: seen on 4x H200, NCCL 2.28.3), so the
    run's own header (nccl-tests' ``Rank N ... Pid P on HOST``) names it
    by that pid (and rank, where both say one); without a header, as RAS
    prints it.  '' where the header lists that pid on no host or on
    several."""
    rows = list(zip(getattr(result, 'rank_ids', None) or [],
                    getattr(result, 'rank_hosts', None) or [],
                    getattr(result, 'rank_pids', None) or []))
    if not rows:
        return note.host
    same = [(r, h) for r, h, p in rows if p is not None and p == note.pid]
    hosts = {h for r, h in same if r == note.rank} or {h for _, h in same}
    return hosts.pop() if len(hosts) == 1 else ''


def node_named(att, nodes):
    """``(node, source)``: the one node of ``nodes`` (the step's, as the
    scheduler names them) that a hang names, and what named it
    (``NCCL RAS at <address>``, ``the outputs (<where>)``); None where
    nothing names exactly one node of them.

    RAS names a node only from a whole answer (read to its end, not cut at
    its size cap, of this run's processes: :func:`ccl_health.judge.
    assemble.attempt` empties another job's) in which every rank or
    process named is stopped (unresponsive, dead or behind) on that node
    (:func:`_host_of`), and every one is on one of ``nodes``: a partial or
    garbled answer names none.  Where RAS names none, the debug log that
    stopped first names its host.  Only a hang (a run stopped from
    outside) names a node so; a crash's first exit may be a victim of
    another node's fault."""
    if not getattr(att, 'killed', None):
        return None
    ans = att.ras
    if ans is not None and ans.ok and ans.notes:
        if ans.truncated or any(n.state not in STOPPED for n in ans.notes):
            return None
        found = {_node_of(_host_of(n, att.result), nodes)
                 for n in ans.notes}
        if len(found) == 1 and None not in found:
            return found.pop(), f'NCCL RAS at {ans.address}'
        return None
    named = att.stalled
    if named is not None and named.host:
        node = _node_of(named.host, nodes)
        if node is not None:
            return node, f'the outputs ({named.source})'
    return None
