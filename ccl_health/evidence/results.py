"""What a parsed nccl-tests / rccl-tests output is: :class:`SweepResult`
(rows of :class:`Row`, each with its in-place / out-of-place
:class:`Measurement`), whatever form it was read from."""

import dataclasses
import math
from typing import Dict, List, Optional


@dataclasses.dataclass
class Measurement:
    time_us: float
    algbw: float          # GB/s
    busbw: float          # GB/s
    wrong: Optional[int]  # None when not checked (-c 0, printed N/A)
    #: nccl-tests < 2.12: the largest difference from the expected values
    #: (the ``error`` column); ``wrong`` is then 1 when it is beyond the
    #: version's tolerance for the type, else 0
    max_delta: Optional[float] = None
    #: why a value of this measurement is not a finite number, or None
    invalid: Optional[str] = None

    @property
    def finite(self):
        return self.invalid is None and all(
            isinstance(v, (int, float)) and math.isfinite(v)
            for v in (self.time_us, self.algbw, self.busbw))


@dataclasses.dataclass
class Row:
    size: int
    count: int
    dtype: str
    redop: str
    root: Optional[int]
    out_of_place: Optional[Measurement]
    in_place: Optional[Measurement]

    @property
    def busbw(self):
        """The better of in-place and out-of-place busbw (what a reference is
        compared against); nan when either is not a finite number."""
        vals = [m.busbw for m in (self.out_of_place, self.in_place) if m]
        if not vals:
            return None
        if any(not isinstance(v, (int, float)) or not math.isfinite(v)
               for v in vals):
            return math.nan
        return max(vals)

    @property
    def wrong(self):
        vals = [m.wrong for m in (self.out_of_place, self.in_place)
                if m and m.wrong is not None]
        return sum(vals) if vals else None

    @property
    def nonfinite(self):
        """True when a time, bandwidth or check value is nan / inf or
        unreadable."""
        ms = [m for m in (self.out_of_place, self.in_place) if m]
        return not ms or any(not m.finite for m in ms)


@dataclasses.dataclass
class SweepResult:
    collective: Optional[str] = None     # e.g. 'all_reduce_perf'
    rows: List[Row] = dataclasses.field(default_factory=list)
    nranks: Optional[int] = None
    devices: List[str] = dataclasses.field(default_factory=list)
    hosts: List[str] = dataclasses.field(default_factory=list)
    out_of_bounds: Optional[int] = None  # None when the summary is missing
    avg_busbw: Optional[float] = None
    nccl_version: Optional[int] = None   # e.g. 22807
    library_version: Optional[str] = None  # 'RCCL 2.22.3-HEAD:7d8d67c'
    tests_version: Optional[str] = None
    timed_out: bool = False              # nccl-tests' own -T fired
    errors: List[str] = dataclasses.field(default_factory=list)
    source: str = 'text'                 # 'json' or 'text'
    #: what was read: 'nccl-tests', 'nccl-tests-2.0' (``error`` column),
    #: 'rccl-tests', 'nccl-tests-json', 'rccl-tests-json',
    #: 'rccl-tests-json-lines'
    format: str = 'nccl-tests'
    #: True when the program's closing lines were read (both summary lines
    #: of the text, the summary keys of the JSON, the end of rccl-tests'
    #: JSON array), False when they were looked for and are missing, None
    #: when the result was not read from a program's output
    closed: Optional[bool] = None
    #: NCCL_TESTS_MIN_BW: the program's own average check said FAILED
    avg_busbw_failed: bool = False
    #: the JSON file could not be used (damaged or cut): the text was judged
    json_error: Optional[str] = None
    #: lines worth showing that are not failures (the library's last error
    #: message, a reduced maximum size, a damaged JSON file)
    notes: List[str] = dataclasses.field(default_factory=list)
    #: the check column's header: '#wrong' or 'error' (None: not seen)
    check_column: Optional[str] = None
    #: the host of each rank line, in rank order (``ranks_per_host``)
    rank_hosts: List[str] = dataclasses.field(default_factory=list)
    #: the Pid of each rank line (nccl-tests 2.4 and later; None before):
    #: the process whose NCCL debug log proves that rank's transport
    rank_pids: List[Optional[int]] = dataclasses.field(default_factory=list)
    #: the rank number of each rank line, in the order printed
    rank_ids: List[int] = dataclasses.field(default_factory=list)
    #: the run's own header (``nThread 1 nGpus 1 minBytes 8 maxBytes ...
    #: step: 2(factor)``, rccl-tests' ``nThreads: 1 nGpus: 1 nRanks: 1
    #: minBytes: ...``): the sizes it was asked to cover; None when not read
    min_bytes: Optional[int] = None
    max_bytes: Optional[int] = None
    #: the ``step:`` value, and whether it multiplies (``(factor)``, then
    #: ``step_factor`` is it) or adds (``(bytes)``)
    step: Optional[int] = None
    step_factor: Optional[int] = None
    #: ``nGpus`` (GPUs per process) and ``nThread(s)`` of the header
    gpus_per_process: Optional[int] = None
    threads: Optional[int] = None
    #: the signal a process of the run died of, as its launcher, the C
    #: library or the shell announced it ('Aborted (6)', 'Segmentation
    #: fault (11)'), or None
    signal: Optional[str] = None
    #: where the header is missing, the sizes of the command line pasted
    #: with the output (``all_reduce_perf -b 64K -e 4G -f 2``): where the
    #: sweep was asked to go (``min_bytes`` .. ``max_bytes`` stay None)
    command_sizes: Optional[tuple] = None
    #: the ranks the pasted launcher line asks for (``mpirun -np 16``,
    #: ``srun --nodes 2 --ntasks-per-node 8``, times the program's ``-g`` /
    #: ``-t``), or None
    launcher_ranks: Optional[int] = None

    @property
    def complete(self):
        """True when the run printed its closing summary."""
        return self.out_of_bounds is not None and self.closed is not False

    @property
    def nonfinite_sizes(self):
        """Sizes of the rows with a nan / inf (or unreadable) value."""
        return [r.size for r in self.rows if r.nonfinite]

    def by_size(self):
        return {r.size: r for r in self.rows}

    #: only some of the ranks' lines were read (a pasted excerpt): they
    #: count neither the ranks nor the ranks per host
    rank_lines_partial: bool = False

    @property
    def ranks_per_host(self):
        """{host: ranks} from the rank lines (hosts may hold different
        numbers of ranks: GPUs per node is not ranks / hosts); empty where
        only some rank lines were read."""
        if self.rank_lines_partial:
            return {}
        counts = {}
        for host in self.rank_hosts:
            counts[host] = counts.get(host, 0) + 1
        return counts

    @property
    def repeated_ranks(self):
        """Rank numbers printed by more than one rank line: each process
        that believes it is rank 0 prints its own header and devices
        (nccl-tests built without MPI under mpirun, or several runs in one
        text): not one communicator."""
        seen, rep = set(), []
        for r in self.rank_ids:
            if r in seen and r not in rep:
                rep.append(r)
            seen.add(r)
        return rep

    def expected_sizes(self):
        """The sizes the header asks for (``minBytes`` .. ``maxBytes`` by
        ``step``), or None when the header was not read.  The program
        rounds each size down to whole elements of its type, so compare
        with the rows' sizes by that rule."""
        lo, hi, step, factor = self.min_bytes, self.max_bytes, self.step, \
            self.step_factor
        if None in (lo, hi, step) and self.command_sizes:
            # no header: the command line pasted with the output
            lo, hi, step = self.command_sizes
            factor = step
        if None in (lo, hi, step) or step < 1 or lo < 0:
            return None
        sizes, size = [], lo
        while size <= hi and len(sizes) < 10000:
            sizes.append(size)
            nxt = size * step if factor else size + step
            if nxt <= size:
                break
            size = nxt
        return sizes

    @property
    def wrong_total(self):
        return sum(r.wrong or 0 for r in self.rows)
