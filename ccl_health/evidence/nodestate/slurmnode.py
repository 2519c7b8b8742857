"""What the resource manager says of this node: Slurm's record of it,
``scontrol -o show node <name>``, read once and within a time bound.

Slurm runs this node when

* slurmd says so: ``SLURMD_NODENAME`` (slurmd's run_script_health_check
  sets it for the HealthCheckProgram; every job step has it too);
* LBNL NHC found it: ``NHC_RM=slurm`` (NHC 1.4.3's nhcmain_find_rm sets it
  when ``scontrol`` is on its PATH, and exports it to every check); or
* ``scontrol`` on PATH answers with this host's record (the short host
  name: NHC's ``HOSTNAME_S``, what ``hostname -s`` gives).

Where Slurm is named (the first two) and ``scontrol`` fails, hangs or
gives no record of the node, nothing is known of the node's role: the
hook could not check (:class:`NotAnswered`).  Where only an ``scontrol``
on PATH was asked, Slurm's answer that it has no such node (``Node NAME
not found``, or exit 0 with no record of it: a login node) or that this
host has no Slurm configuration
(:data:`NO_CLUSTER`: a machine with Slurm's client only) means no
resource manager runs the node; an ``scontrol`` that fails otherwise,
hangs or cannot start says nothing of the node (a job may run on it):
could not check too.  ``NHC_RM`` naming another resource manager (pbs, sge, lsf) is not
Slurm: nothing is asked.  ``SLURM_SCONTROL`` names the command (as NHC's
node-mark-offline helper reads it).

The record is Slurm's ``slurm_sprint_node_table`` (src/api/node_info.c)
with ``one_liner``: ``Key=value`` fields joined by spaces (two in places), in a
fixed order (``NodeName`` ... ``AvailableFeatures`` ``ActiveFeatures``
``Gres`` ... ``OS`` ... ``State`` ... ``Partitions`` ... ``Reason``
``Comment`` ``Extra``).  The values of ``OS``, ``Reason``, ``Comment`` and
``Extra`` may hold spaces and ``=``: a word that is no ``Key=`` continues
the field before it, and a key seen a second time is text of the field
before it (so a drain reason cannot pose as ``State=``).

``State`` is ``node_state_string_complete``: the base state (``DOWN``,
``IDLE``, ``ALLOCATED``, ``ERROR``, ``MIXED``, ``FUTURE``, ``UNKNOWN``)
and ``+FLAG`` per flag (``DRAIN``, ``COMPLETING``, ``NOT_RESPONDING``,
``POWERED_DOWN``, ...).  The forms of ``node_state_string`` and
``node_state_string_compact`` (older releases, sinfo: ``ALLOCATED+``,
``DRAINING``, ``FAILING``, ``COMPLETING``, ``MIX``, ``ALLOC``, ``COMP``,
``DRNG``, ``FAILG``, with a ``*~#!%$@^-`` suffix) are read too.  A node
runs a job when its base state is ``ALLOCATED`` or ``MIXED`` or it is
``COMPLETING`` (a job's end still under way).

``Gres`` is the node's configured GRES: ``name[:type][:no_consume]:count
[(S:sockets)]``, comma separated, ``(null)`` for none (``gpu:a100:4(S:0-1)``,
``gpu:4,nic:mlx5:2``).  Its GPUs are the ``gpu`` entries' counts."""

import dataclasses
import os
import re
import shutil
import time
from typing import Optional, Tuple

#: how long the hook waits for scontrol at most (s); less where the
#: limit is short (:func:`bound`)
BOUND = 5.0
#: state suffixes of node_state_string / _compact (no-respond, powered
#: down, powering up, ...)
SUFFIXES = '*~#!%$@^-'
#: base states in node_state_string / _compact forms, with the flags they
#: carry: (base, flags)
FORMS = {
    'ALLOC': ('ALLOCATED', ()), 'MIX': ('MIXED', ()),
    'COMP': ('IDLE', ('COMPLETING',)), 'COMPLETING': ('IDLE', ('COMPLETING',)),
    'DRAINED': ('IDLE', ('DRAIN',)), 'DRAIN': ('IDLE', ('DRAIN',)),
    # draining / failing: drained or failing with a job still on the node
    'DRAINING': ('ALLOCATED', ('DRAIN',)), 'DRNG': ('ALLOCATED', ('DRAIN',)),
    'FAILING': ('ALLOCATED', ('FAIL',)), 'FAILG': ('ALLOCATED', ('FAIL',)),
    'UNK': ('UNKNOWN', ()), 'FUTR': ('FUTURE', ()), 'RESV': ('IDLE',
                                                             ('RESERVED',)),
}
#: what a node with a job is (Slurm's state names)
JOB_BASES = ('ALLOCATED', 'MIXED')
JOB_FLAGS = ('COMPLETING',)
#: GRES names that are GPUs or shares of them
GPU_GRES = ('gpu', 'mps', 'shard')
#: the contexts Slurm gives its prolog / epilog scripts: a job of the node,
#: not the hook's own
SCRIPT_CONTEXTS = ('prolog', 'epilog')


@dataclasses.dataclass
class SlurmNode:
    """Slurm's record of one node (the fields the hook reads)."""
    name: str
    state: str = ''
    base: str = ''
    flags: Tuple[str, ...] = ()
    gres: str = ''
    #: GPUs of its GRES (``gpu`` entries); 0: none configured
    gpus: int = 0
    #: its GRES has a GPU entry (gpu, mps, shard)
    gpu_gres: bool = False
    partitions: Tuple[str, ...] = ()
    features: Tuple[str, ...] = ()
    line: str = ''

    @property
    def has_job(self):
        """A job runs on the node (or is ending on it)."""
        return self.base in JOB_BASES or any(f in JOB_FLAGS
                                             for f in self.flags)

    def to_dict(self):
        d = dataclasses.asdict(self)
        d['has_job'] = self.has_job
        return d


@dataclasses.dataclass
class Reading:
    """What the resource manager said of this node: ``node`` None where
    none runs it (``why`` says how that was found)."""
    node: Optional[SlurmNode] = None
    #: 'slurm', or '' (no resource manager: host-name patterns)
    source: str = ''
    why: str = ''
    command: Tuple[str, ...] = ()
    seconds: float = 0.0
    #: the hook runs in a job of its own (``SLURM_JOB_ID``): its id
    own_job: str = ''

    def to_dict(self):
        return {'source': self.source, 'why': self.why,
                'command': list(self.command),
                'seconds': round(self.seconds, 3), 'own_job': self.own_job,
                'node': self.node.to_dict() if self.node else None}


class NotAnswered(Exception):
    """Slurm runs this node and did not say what it is: could not check."""


# -- the record ---------------------------------------------------------------

_KEY = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$', re.S)


def fields(line):
    """``{key: value}`` of one ``scontrol -o show node`` record."""
    out, last = {}, None
    for word in line.split():
        m = _KEY.match(word)
        if m and m.group(1) not in out:
            last = m.group(1)
            out[last] = m.group(2)
        elif last is not None:
            out[last] += ' ' + word
    return out


def parse_state(text):
    """``(base, flags)`` of a node state (module docstring)."""
    text = (text or '').strip().upper()
    words = text.split('+')
    head = words[0].rstrip(SUFFIXES)
    flags = [w.rstrip(SUFFIXES) for w in words[1:] if w.rstrip(SUFFIXES)]
    if text.endswith('+') and len(words) == 2 and not words[1]:
        flags.append('COMPLETING')      # node_state_string's "ALLOCATED+"
    base, implied = FORMS.get(head, (head, ()))
    return base, tuple(dict.fromkeys(list(implied) + flags))


def _count(text):
    m = re.fullmatch(r'(\d+)([KMGT]?)', text.strip(), re.I)
    if not m:
        return None
    return int(m.group(1)) * 1024 ** ' KMGT'.index(
        (m.group(2) or ' ').upper())


def parse_gres(text):
    """``(GPUs, has a GPU entry)`` of a node's ``Gres=`` value."""
    text = (text or '').strip()
    if text in ('', '(null)', 'N/A'):
        return 0, False
    gpus, any_gpu = 0, False
    for entry in re.split(r',(?![^()]*\))', text):
        entry = re.sub(r'\(.*\)$', '', entry.strip())
        parts = entry.split(':')
        name = parts[0].strip().lower()
        if name not in GPU_GRES:
            continue
        any_gpu = True
        if name == 'gpu':
            n = _count(parts[-1]) if len(parts) > 1 else None
            gpus += 1 if n is None else n
    return gpus, any_gpu


def _names(value):
    value = (value or '').strip()
    if value in ('', '(null)', 'N/A'):
        return ()
    return tuple(v for v in value.split(',') if v)


def parse_node(text, name=None):
    """The :class:`SlurmNode` of ``scontrol -o show node`` output: the
    record of ``name`` (None where it has none), else its first."""
    records = [fields(ln) for ln in (text or '').splitlines()
               if ln.startswith('NodeName=')]
    if name is not None:
        records = [r for r in records if r.get('NodeName') == name]
    if not records:
        return None
    rec = records[0]
    base, flags = parse_state(rec.get('State', ''))
    gpus, gpu_gres = parse_gres(rec.get('Gres', ''))
    line = next(ln for ln in text.splitlines()
                if ln.startswith(f'NodeName={rec["NodeName"]} ') or
                ln == f'NodeName={rec["NodeName"]}')
    return SlurmNode(
        name=rec['NodeName'], state=rec.get('State', ''), base=base,
        flags=flags, gres=rec.get('Gres', ''), gpus=gpus, gpu_gres=gpu_gres,
        partitions=_names(rec.get('Partitions')),
        features=_names(rec.get('ActiveFeatures') or
                        rec.get('AvailableFeatures')),
        line=line)


# -- asking Slurm -------------------------------------------------------------

def named(environ):
    """What says Slurm runs this node (``'SLURMD_NODENAME=n1'``,
    ``'NHC_RM=slurm'``), or ''."""
    if environ.get('SLURMD_NODENAME'):
        return f'SLURMD_NODENAME={environ["SLURMD_NODENAME"]}'
    if environ.get('NHC_RM') == 'slurm':
        return 'NHC_RM=slurm'
    return ''


def node_name(environ, hostname):
    """This node's name in Slurm: ``SLURMD_NODENAME``, else the short
    host name (NHC's ``HOSTNAME_S``, ``hostname -s``)."""
    return environ.get('SLURMD_NODENAME') or hostname.split('.')[0]


def own_job(environ):
    """The id of the job the hook runs in (a job step, a batch script),
    '' outside one or in a prolog / epilog (``SLURM_SCRIPT_CONTEXT``):
    the job there is not the hook's."""
    context = environ.get('SLURM_SCRIPT_CONTEXT', '')
    if context.startswith(SCRIPT_CONTEXTS):
        return ''
    return environ.get('SLURM_JOB_ID', '')


def _not_found(output, name):
    """Whether ``scontrol show node NAME`` said Slurm has no such node
    (``Node NAME not found``, src/scontrol/info_node.c): Slurm answered,
    and this host is none of its nodes (a login node, a client)."""
    want = f'Node {name} not found'
    return any(ln.strip() == want for ln in (output or '').splitlines())


#: what Slurm's client says where this host has no Slurm configuration
#: (src/common/read_config.c: ``fatal("Could not establish a configuration
#: source")`` since 20.02's configless mode; earlier, ``s_p_parse_file:
#: unable to status file .../slurm.conf``): no slurmd runs here with a
#: configuration (a configless slurmd keeps its own copy, which scontrol
#: reads), so no job of Slurm's can run here
NO_CLUSTER = re.compile(r'Could not establish a configuration source|'
                        r'unable to (?:status|read|open) file \S*slurm\.conf',
                        re.I)


def _no_cluster(output):
    """Whether scontrol said this host has no Slurm configuration."""
    return bool(NO_CLUSTER.search(output or ''))


def bound(limit):
    """The time scontrol may take within the hook's ``limit``."""
    return min(BOUND, 0.25 * limit)


def read(environ, hostname, seconds, runner):
    """This node's :class:`Reading`.  ``runner(cmd, env, timeout)`` runs
    a command within ``timeout`` s and returns an object with ``output``,
    ``returncode``, ``timed_out`` and ``not_started``
    (:func:`ccl_health.hook.bounded.bounded`).  Raises :class:`NotAnswered`
    where Slurm is named and does not answer."""
    t0 = time.monotonic()
    said = named(environ)
    other = environ.get('NHC_RM', '')
    tool = environ.get('SLURM_SCONTROL') or 'scontrol'
    exe = shutil.which(tool, path=environ.get('PATH', os.defpath))
    job = own_job(environ)
    if not said:
        if other:
            return Reading(why=f'NHC_RM={other}: not Slurm (host-name '
                           f'patterns)', own_job=job)
        if exe is None:
            return Reading(why='no resource manager (SLURMD_NODENAME and '
                           'NHC_RM unset, no scontrol on PATH): host-name '
                           'patterns', own_job=job)
    name = node_name(environ, hostname)
    cmd = (exe or tool, '-o', 'show', 'node', name)
    shown = f'`{tool} -o show node {name}`'
    if exe is None:
        raise NotAnswered(f'{said} says Slurm runs this node, but {tool} is '
                          f'not on PATH')
    got = runner(list(cmd), environ, seconds)
    node, problem, unknown_node = None, '', False
    if got.not_started:
        problem = f'could not start: {got.not_started}'
    elif got.timed_out:
        problem = f'gave no answer within {seconds:.1f} s'
    elif _not_found(got.output, name) or _no_cluster(got.output):
        lines = [ln.strip() for ln in (got.output or '').splitlines()
                 if ln.strip()]
        problem = f'failed (exit {got.returncode}): {lines[-1][:200]}'
        unknown_node = True
    elif got.returncode != 0:
        lines = [ln.strip() for ln in (got.output or '').splitlines()
                 if ln.strip()]
        problem = (f'failed (exit {got.returncode}): '
                   f'{(lines or ["no output"])[-1][:200]}')
    else:
        node = parse_node(got.output, name)
        if node is None:
            problem = (f'gave no record of node {name}: '
                       f'{" ".join((got.output or "no output").split())[:200]}')
            # it answered (exit 0), without this host among its nodes
            unknown_node = True
    took = time.monotonic() - t0
    if problem:
        if said:
            raise NotAnswered(f'Slurm runs this node ({said}) but {shown} '
                              f'{problem}')
        if not unknown_node:
            # an scontrol that fails or hangs says nothing of the node: a
            # job may run here, so "no resource manager" is not known
            raise NotAnswered(f'{shown} ({exe}) {problem}: whether Slurm '
                              f'runs this node is not known')
        return Reading(why=f'{shown} {problem}: no resource manager known '
                       f'(host-name patterns)', command=cmd, seconds=took,
                       own_job=job)
    return Reading(node, 'slurm', said or f'{tool} on PATH answered for '
                   f'{name}', cmd, took, job)
