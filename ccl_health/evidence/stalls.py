"""Which rank stopped or exited first, from what a run's outputs show
(where NCCL's RAS, :mod:`ccl_health.evidence.ras`, could not be asked).

* a crash: the launcher's own words for the first process that ended
  (:func:`first_exit`): Open MPI's ``mpirun noticed that process rank 2
  with PID 1746 on node n1 exited on signal 9 (Killed).``, its ``The first
  process to do so was: ... Process name: [[3449,1],2] ... Exit code: 1``
  (``[prterun-...@1,7]`` under PRRTE), srun's ``srun: error: n1: task 5:
  Killed`` / ``task 3: Exited with exit code 1``, MPICH Hydra's ``RANK 2
  PID 1746 RUNNING AT n1`` / ``KILLED BY SIGNAL: 9``; the rank's own error
  (nccl-tests' ``host: Test NCCL failure ...`` line, ``.. host pid N:``);
* a hang: the rank whose NCCL debug log stopped first
  (:func:`log_stopped_first`): one log's last write clearly before every
  other's (:data:`SPREAD` seconds), else none named.

Each returns a :class:`Named` saying where it was read; nothing is
guessed: without such words, nothing is named."""

import dataclasses
import os
import re
from typing import Optional

#: a debug log whose last write is this many seconds before every other's
#: stopped first (NCCL writes its INIT lines within a second on every rank)
SPREAD = 5.0


@dataclasses.dataclass
class Named:
    """A rank the outputs name."""
    #: 'exited' (a crash) or 'stopped' (a hang)
    state: str
    #: where it was read ('the launcher', 'the debug logs')
    source: str
    rank: Optional[int] = None
    host: str = ''
    pid: Optional[int] = None
    gpu: str = ''
    #: how it ended: ``signal 9 (Killed)``, ``exit code 1``
    how: str = ''
    #: the rank's own error line, where it printed one
    error: str = ''


_OMPI = re.compile(r'process rank (\d+) with PID (\d+) on node (\S+?) '
                   r'exited on signal (\d+)(?: \(([^)]*)\))?')
_OMPI_FIRST = re.compile(r'Process name:\s*\[(?:\[\d+,\d+\],(\d+)|[^\]]*?,'
                         r'(\d+))\]\s*(?:Exit code:\s*(-?\d+))?')
_EXIT_CODE = re.compile(r'^\s*Exit code:\s*(-?\d+)')
_SRUN = re.compile(r'srun: error: (\S+?): tasks? (\d+)(?:[-,]\S*)?: (.+)$')
_HYDRA = re.compile(r'RANK (\d+) PID (\d+) RUNNING AT (\S+)')
_HYDRA_HOW = re.compile(r'(KILLED BY SIGNAL: \d+(?: \([^)]*\))?|EXIT CODE: '
                        r'\d+)')
_TEST_FAIL = re.compile(r'^\s*(\S+): Test (?:NCCL|CUDA|HIP|RCCL)? ?failure '
                        r'.*$')


def _rank_of(result, host, pid):
    """The rank nccl-tests' header gives ``host`` / ``pid`` (None)."""
    for r, h, p in zip(getattr(result, 'rank_ids', []) or [],
                       getattr(result, 'rank_hosts', []) or [],
                       getattr(result, 'rank_pids', []) or []):
        if p is not None and p == pid and (not host or h == host or
                                           host.startswith(h + '.')):
            return r
    return None


def _gpu_of(result, rank):
    for r, dev in zip(getattr(result, 'rank_ids', []) or [],
                      getattr(result, 'devices', []) or []):
        if r == rank:
            m = re.match(r'\S+:(\d+)', dev)
            return m.group(1) if m else ''
    return ''


def _pid_host_of(result, rank):
    for r, h, p in zip(getattr(result, 'rank_ids', []) or [],
                       getattr(result, 'rank_hosts', []) or [],
                       getattr(result, 'rank_pids', []) or []):
        if r == rank:
            return h, p
    return '', None


def first_exit(text, result=None) -> Optional[Named]:
    """The first process a launcher says ended (``text``: its output and
    stderr), with the rank's error line; None where no launcher said."""
    lines = (text or '').splitlines()
    found = None
    for i, line in enumerate(lines):
        m = _OMPI.search(line)
        if m:
            sig = f'signal {m.group(4)}' + (f' ({m.group(5)})'
                                             if m.group(5) else '')
            # Open MPI says "with PID 0" for a process killed from
            # outside (seen on 4x H200, the device proof of issue 44): no pid
            pid = int(m.group(2)) or None
            found = Named('exited', 'the launcher (mpirun)',
                          int(m.group(1)), m.group(3), pid, how=sig)
            break
        m = _OMPI_FIRST.search(line)
        if m and 'Process name' in line:
            rank = int(m.group(1) or m.group(2))
            code = m.group(3)
            if code is None:
                for nxt in lines[i + 1:i + 4]:
                    c = _EXIT_CODE.match(nxt)
                    if c:
                        code = c.group(1)
                        break
            found = Named('exited', 'the launcher (mpirun)', rank,
                          how=f'exit code {code}' if code else '')
            break
        m = _SRUN.search(line)
        if m:
            how = m.group(3).strip()
            how = {'Killed': 'killed (signal 9)'}.get(how, how)
            found = Named('exited', 'the launcher (srun)', int(m.group(2)),
                          m.group(1), how=how[:120])
            break
        m = _HYDRA.search(line)
        if m:
            how = ''
            for nxt in lines[i + 1:i + 4]:
                h = _HYDRA_HOW.search(nxt)
                if h:
                    how = h.group(1).lower()
                    break
            found = Named('exited', 'the launcher (mpiexec)',
                          int(m.group(1)), m.group(3), int(m.group(2)),
                          how=how)
            break
    if found is None:
        return None
    if found.pid is None or not found.host:
        host, pid = _pid_host_of(result, found.rank)
        found.host, found.pid = found.host or host, found.pid or pid
    found.gpu = _gpu_of(result, found.rank)
    for line in lines:
        m = _TEST_FAIL.match(line)
        if m and (not found.host or m.group(1) == found.host or
                  found.host.startswith(m.group(1) + '.')):
            found.error = line.strip()[:200]
            break
    return found


def log_stopped_first(logs, result=None) -> Optional[Named]:
    """The rank whose NCCL debug log (``nccl-debug.<host>.<pid>.log``)
    was last written clearly before every other's (:data:`SPREAD`); None
    where no log stands out (or fewer than two)."""
    stamps = []
    for path in logs or ():
        try:
            stamps.append((os.path.getmtime(path), path))
        except OSError:
            continue
    if len(stamps) < 2:
        return None
    stamps.sort()
    if stamps[1][0] - stamps[0][0] < SPREAD:
        return None
    name = os.path.basename(stamps[0][1])
    m = re.match(r'^nccl-debug\.(.+)\.(\d+)\.log$', name)
    if not m:
        return Named('stopped', f'the debug logs ({name} stopped first)')
    host, pid = m.group(1), int(m.group(2))
    rank = _rank_of(result, host, pid)
    return Named('stopped', f'the debug logs ({name} stopped '
                 f'{stamps[1][0] - stamps[0][0]:.0f} s before the others)',
                 rank, host, pid, _gpu_of(result, rank) if rank is not None
                 else '')
