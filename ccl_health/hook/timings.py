"""Where the hook's time goes (issue 42): seconds by phase, as ``--json``
says them in ``timings`` and ``benchmarks/device/hook_timing.sh`` tables
their medians.

Phases in the order they run (the main thread's, back to back, so that
they add up to ``total``): ``start`` (the interpreter and the imports,
from the process's start in ``/proc``), ``options``,
``resource_manager``, ``site`` (the system, its files checked, the
partition), ``node_state_before_wait`` (what was left to wait of the node
state's first reading, which runs in a thread from the start:
``node_state_before`` is its own length), ``plan``, ``probe`` (every try's
programs, wall), ``node_state_after``, ``judging``, ``line`` (``--json``
and the line), ``record``.  The one probe process's own lines, inside
``probe``: ``probe_init`` (CUDA started on every GPU), ``probe_copies``
(the copy matrix), ``probe_all_reduce`` (NCCL's communicators and the
all_reduce with its check; ``probe_nccl_init`` the communicators alone,
its ``# nccl init`` line), ``probe_program`` (its ``# probe total``),
``probe_outside`` (``probe`` less the program's own time: its start and
its exit).  Where the one probe process was started ahead
(:class:`ccl_health.hook.probes.EarlyProbe`), ``probe_start_ahead`` is
what starting it cost the main thread (a phase of its own, out of
``site``), ``probe_early`` how long it ran before its go (beside the
phases before ``probe``, not in ``total`` twice), and its own lines count
from the go."""

import os
import time


class Clock:
    """Phases measured back to back from ``t0`` (:func:`time.monotonic`)."""

    def __init__(self, t0=None):
        self.t0 = time.monotonic() if t0 is None else t0
        self._last = self.t0
        self.phases = {}
        start = process_age()
        if start is not None:
            self.phases['start'] = round(max(0.0, start - (
                time.monotonic() - self.t0)), 3)

    def mark(self, phase):
        """The time since the last mark is ``phase``'s (added to it)."""
        now = time.monotonic()
        self.add(phase, now - self._last)
        self._last = now

    def aside(self, phase, seconds):
        """``seconds`` just spent are ``phase``'s, not the next mark's."""
        self.add(phase, seconds)
        self._last += seconds

    def add(self, phase, seconds):
        if seconds is not None:
            self.phases[phase] = round(self.phases.get(phase, 0.0) +
                                       float(seconds), 3)

    def as_dict(self):
        out = dict(self.phases)
        out['total'] = round(out.get('start', 0.0) +
                             time.monotonic() - self.t0, 3)
        return out


def process_age():
    """Seconds since this process started (Linux ``/proc``: its start
    time in clock ticks since boot against the uptime), None where it
    cannot be read."""
    try:
        with open('/proc/self/stat') as fp:
            stat = fp.read()
        with open('/proc/uptime') as fp:
            uptime = float(fp.read().split()[0])
        # the fields after the command's name (which may hold spaces)
        ticks = int(stat.rsplit(')', 1)[1].split()[19])
        return max(0.0, uptime - ticks / os.sysconf('SC_CLK_TCK'))
    except (OSError, ValueError, IndexError):
        return None


def probe_phases(clock, tries):
    """The one probe process's own lines of every try (``tries``: the
    probes of each try) into ``clock``."""
    for probes in tries:
        program = next((getattr(p, 'program_s', None) for p in probes
                        if getattr(p, 'program_s', None) is not None), None)
        links = next((p for p in probes if getattr(p, 'init_s', None)
                      is not None), None)
        init = getattr(links, 'init_s', None)
        copies = getattr(links, 'copy_s', None)
        clock.add('probe_init', init)
        clock.add('probe_copies', copies)
        clock.add('probe_early', next(
            (p.early_s for p in probes
             if getattr(p, 'early_s', None) is not None), None))
        clock.add('probe_nccl_init', next(
            (getattr(p, 'nccl_init_s', None) for p in probes
             if getattr(p, 'nccl_init_s', None) is not None), None))
        if program is not None:
            clock.add('probe_program', program)
            clock.add('probe_all_reduce', program - (init or 0) -
                      (copies or 0))
            wall = max((p.seconds for p in probes), default=0.0)
            clock.add('probe_outside', wall - program)
