"""What one probe of the hook is: the GPUs it ran on, what it measured and
its verdict.  :class:`Probe` is an all_reduce on a set of GPUs,
:class:`LinksProbe` the copy matrix of every GPU pair.  :mod:`.probes`
fills what was measured, :mod:`.judging` the verdict."""

import dataclasses


@dataclasses.dataclass
class Probe:
    """One all_reduce on a set of GPUs."""
    gpus: tuple               # node GPU indices (nvidia-smi / rocminfo)
    size: int
    busbw: float = 0.0
    expected: float = 0.0     # the lower bound the judge allowed
    ref: float = 0.0
    proven: str = ''
    paths: str = ''
    ok: bool = False
    why: str = ''
    seconds: float = 0.0
    versions: dict = dataclasses.field(default_factory=dict)
    #: the verdict name (ccl_health.judge.verdicts.Verdict) of this probe
    verdict: str = ''
    #: what the probe's ``*_VISIBLE_DEVICES`` names these GPUs by
    tokens: tuple = ()
    exit_status: object = None
    #: the try (1, 2, ...) this probe belongs to
    attempt: int = 1
    #: the one probe process's own time from its start to its table's end
    #: (its ``# probe total`` line; None: not that program)
    program_s: object = None
    #: its ``# nccl init`` line: ncclCommInitAll's seconds
    nccl_init_s: object = None
    #: seconds the one probe process ran before its go (started ahead,
    #: :class:`ccl_health.hook.probes.EarlyProbe`; None: it was not)
    early_s: object = None


@dataclasses.dataclass
class LinksProbe:
    """The copy matrix of every GPU pair (``ccl-health-links`` or
    nvbandwidth, :mod:`ccl_health.evidence.copymatrix`); it stands in for the
    NCCL pair rounds where the program is installed."""
    gpus: tuple               # node GPU indices, in the program's order
    tool: str = ''
    path: str = ''
    size: int = 0
    tokens: tuple = ()
    ok: bool = False
    why: str = ''
    verdict: str = ''
    seconds: float = 0.0
    init_s: object = None
    copy_s: object = None
    exit_status: object = None
    #: every measured direction: name, src, dst, GB/s, reference, lower
    #: bound (None: not judged), ok
    links: list = dataclasses.field(default_factory=list)
    #: directed pairs that cannot peer, by node GPU index
    no_peer: list = dataclasses.field(default_factory=list)
    judged: bool = False
    # what the hook's record reads of its probes (no bandwidth of NCCL's)
    busbw: float = 0.0
    ref: float = 0.0
    proven: str = ''
    versions: dict = dataclasses.field(default_factory=dict)
    attempt: int = 1
    #: as :attr:`Probe.early_s`
    early_s: object = None
