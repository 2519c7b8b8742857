"""The collective test programs the sweep runs, one driver each: its binary
per collective, its command line, its output files and its parser.

* **nccl-tests** (NVIDIA; pinned 2.19.6): ``-g 1 -b -e -f -n -w -T``, and
  ``-J <file>`` for its JSON report (nccl-tests >= 2.17,
  ``src/common.cu``: ``{"output_file", required_argument, 0, 'J'}``).
* **rccl-tests** (AMD; pinned ae3e635): the same sweep options (its
  ``src/common.cu`` reads ``t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:Y:T:G:C:O:F:E:R:
  a:y:s:u:h:q:``), but no JSON report: that commit has neither ``-J`` nor
  the ``-x <file> -Z json`` of later releases, and an option a program does
  not know makes it print its usage and exit 0 with no results, so none is
  passed; its text table is parsed (:func:`ccl_health.evidence.nccltests.parse`
  also reads the JSON of later rccl-tests, given the file).

Both install ``bin/<collective>_perf`` (``BIN_FILES_LIST`` of their
Makefiles) for every collective the suite sweeps
(:data:`ccl_health.evidence.collectives.SWEPT`).

Pure: no ReFrame."""

import dataclasses
import os
from typing import Optional, Tuple

from ccl_health import CclHealthError
from ccl_health.evidence import collectives as C
from ccl_health.evidence import nccltests
from ccl_health.units import parse_size

#: the JSON report's file name in the stage folder
RESULT_JSON = 'result.json'


@dataclasses.dataclass(frozen=True)
class TestProgram:
    """What the suite needs to know of one collective test program."""
    #: its entry in ``builders/sources.yaml``
    name: str
    #: its key under ``build:`` in ``site/<system>.yaml`` (``prefix:``
    #: there: the site's installation is run, nothing is built)
    site_key: str
    #: the GPU vendor of the partitions that run it (from the partition's GPU devices)
    vendor: str
    #: the option that writes the JSON report, or None
    json_option: Optional[str] = None
    #: the collectives it has a binary for
    collectives: Tuple[str, ...] = C.SWEPT

    def binary(self, collective):
        """``all_reduce_perf`` for ``all_reduce``."""
        name = C.canonical(collective)
        if name not in self.collectives:
            raise CclHealthError(f'{self.name} has no binary for {name} '
                                 f'(it has: {", ".join(self.collectives)})')
        return f'{name}_perf'

    def executable(self, prefix, collective):
        """The binary of ``collective`` under an install ``prefix``."""
        return os.path.join(prefix, 'bin', self.binary(collective))

    @property
    def products(self):
        """What an install must hold (checked before it counts as built)."""
        return [os.path.join('bin', self.binary('all_reduce'))]

    def options(self, min_size, max_size, step_factor, iters, warmup_iters,
                op_timeout, json_file=RESULT_JSON):
        """The command line of one sweep: one GPU per rank, sizes from
        ``min_size`` to ``max_size`` (``'8'``, ``'1G'`` or bytes) by
        ``step_factor``, ``iters`` timed iterations after ``warmup_iters``,
        the program's own per-operation timeout (s), and its JSON report
        into ``json_file`` where it writes one."""
        opts = ['-g', '1', '-b', str(parse_size(str(min_size))),
                '-e', str(parse_size(str(max_size))),
                '-f', str(int(step_factor)), '-n', str(int(iters)),
                '-w', str(int(warmup_iters)), '-T', str(int(op_timeout))]
        if self.json_option and json_file:
            opts += [self.json_option, json_file]
        return opts

    def output_files(self, json_file=RESULT_JSON):
        """The files a run writes beside stdout (kept with the stage)."""
        return [json_file] if self.json_option and json_file else []

    def parse(self, stdout_text, json_text=None, origin='<output>'):
        """The :class:`~ccl_health.evidence.nccltests.SweepResult` of one run."""
        return nccltests.parse(stdout_text, json_text, origin)

    def read(self, stdout_path, json_path=None):
        """Parse one run from its files (a JSON report that was not
        written is None)."""
        with open(stdout_path, errors='replace') as fp:
            stdout = fp.read()
        js = None
        if json_path and self.json_option and os.path.exists(json_path):
            with open(json_path, errors='replace') as fp:
                js = fp.read()
        return self.parse(stdout, js, json_path or stdout_path)

    @staticmethod
    def exact_sizes(collective):
        """Whether the program prints exactly the sizes asked for
        (:attr:`ccl_health.evidence.collectives.Collective.exact_sizes`)."""
        return C.COLLECTIVES[C.canonical(collective)].exact_sizes


NCCL_TESTS = TestProgram('nccl-tests', 'nccl_tests', 'nvidia',
                         json_option='-J')
RCCL_TESTS = TestProgram('rccl-tests', 'rccl_tests', 'amd')

#: every program, by name
PROGRAMS = {p.name: p for p in (NCCL_TESTS, RCCL_TESTS)}


def for_vendor(vendor):
    """The program of a partition's GPU vendor (``amd``: rccl-tests;
    anything else: nccl-tests)."""
    for prog in PROGRAMS.values():
        if prog.vendor == (vendor or '').lower():
            return prog
    return NCCL_TESTS


def site_prefix(site_build, program=None):
    """The prefix of the site's own installation of ``program`` from the
    ``build:`` block of a site file, or None when the site installs none
    (then it is built).  Without ``program``: the first program the site
    installs."""
    progs = [program] if program else list(PROGRAMS.values())
    for prog in progs:
        prefix = ((site_build or {}).get(prog.site_key) or {}).get('prefix')
        if prefix:
            return prefix
    return None
