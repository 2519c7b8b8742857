"""Progress on the terminal while ReFrame runs: build steps and sweeps.

ReFrame prints a line when a test case starts and ends; between them a
build or a sweep can take many minutes.  :class:`Progress` reads what the
stage folders already hold: the build script's ``ccl-health: <package>:
<step>`` lines (``rfm_build.out`` / ``rfm_job.out`` of the build fixtures,
:mod:`ccl_health.buildcache`) and the sweep's own output (the last size
nccl-tests / rccl-tests printed), and says so with the elapsed time:

    ccl-health: [  2m05s] build nccl-tests 2.19.6: make (1m40s in this step)
    ccl-health: [  4m10s] AllReduceSweep %transport=intra: 256MiB reached, busbw 120.3 GB/s

Test cases are named as ReFrame names them, from its ``[ RUN ]`` lines
(the stage folder ends in the case's hash)."""

import glob
import os
import re
import time

from ccl_health.units import format_size

_STEP = re.compile(r'^ccl-health: (.+?): ([\w.-]+)$')
_DONE = re.compile(r'^ccl-health: (.+?) (installed in|is cached at) ')
# a result line of nccl-tests / rccl-tests: size count type redop root
# time algbw busbw #wrong ...
_ROW = re.compile(r'^\s*(\d+)\s+(\d+)\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+'
                  r'[\d.]+\s+([\d.]+)\s')
_RUN = re.compile(r'\[\s*(?:\x1b\[[0-9;]*m)?RUN\s*(?:\x1b\[[0-9;]*m)?\s*\]\s+'
                  r'(.+?)\s+/([0-9a-f]{8})\b')

#: how often a build still in the same step is mentioned again
REPEAT_S = 60


def elapsed(seconds):
    m, s = divmod(int(seconds), 60)
    return f'{m}m{s:02d}s'


class Progress:
    def __init__(self, stage, start=None, clock=time.monotonic):
        self.stage = stage
        self.clock = clock
        self.start = clock() if start is None else start
        self.names = {}        # hash -> ReFrame's display name
        self.seen = {}         # path -> (offset, state)

    def saw_line(self, line):
        """A line of ReFrame's own output: learn the case names."""
        m = _RUN.search(line)
        if m:
            self.names[m.group(2)] = m.group(1)

    def _name(self, folder):
        base = os.path.basename(folder)
        h = base.rsplit('_', 1)[-1]
        return self.names.get(h, base)

    def poll(self):
        """The progress lines since the last poll."""
        now = self.clock()
        lines = []
        pattern = os.path.join(glob.escape(self.stage), '**', 'rfm_*.out')
        for path in sorted(glob.glob(pattern, recursive=True)):
            off, state = self.seen.get(path, (0, {}))
            try:
                with open(path, 'rb') as f:
                    f.seek(off)
                    new = f.read()
            except OSError:
                continue
            cut = new.rfind(b'\n') + 1          # only whole lines
            state = dict(state)
            self._read(new[:cut].decode(errors='replace'), state, now)
            msg = self._report(path, state, now)
            if msg:
                lines.append(f'ccl-health: [{elapsed(now - self.start):>7}] '
                             f'{msg}')
            self.seen[path] = (off + cut, state)
        return lines

    @staticmethod
    def _read(text, state, now):
        for ln in text.splitlines():
            m = _DONE.match(ln)
            if m:
                state.update(step=None, done=f'{m.group(1)}: '
                             f'{"installed" if m.group(2)[0] == "i" else "cached"}',
                             changed=True)
                continue
            m = _STEP.match(ln)
            if m:
                state.update(package=m.group(1), step=m.group(2),
                             step_start=now, changed=True)
                continue
            m = _ROW.match(ln)
            if m:
                state.update(size=int(m.group(1)), busbw=m.group(3),
                             changed=True)

    def _report(self, path, state, now):
        name = self._name(os.path.dirname(path))
        if state.get('done') and state.get('changed'):
            state['changed'] = False
            return f'build {state["done"]}'
        if state.get('step'):
            if state.get('changed') or \
                    now - state.get('said', 0) >= REPEAT_S:
                state['changed'] = False
                state['said'] = now
                return (f'build {state["package"]}: {state["step"]} '
                        f'({elapsed(now - state["step_start"])} in this '
                        f'step)')
            return None
        if 'size' in state and state.get('changed'):
            state['changed'] = False
            return (f'{name}: {format_size(state["size"])} reached, busbw '
                    f'{state["busbw"]} GB/s')
        return None
