"""XID errors (the NVIDIA driver's error reports) since the last check, from
the kernel log: ``/dev/kmsg`` (read without blocking), else
``journalctl -k``.  Lines of the form::

    NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.

The time of the last check is kept in a small state file; the first check
looks back :data:`FIRST_LOOK_BACK` seconds.  A log that cannot be read is a
"not checked" fact, never a fault."""

import os
import re
import subprocess
import time

from ccl_health import safefile

FIRST_LOOK_BACK = 3600.0
XID_LINE = re.compile(r'NVRM: Xid \((?P<pci>[^)]*)\): (?P<xid>\d+)(?:, '
                      r'(?P<text>.*))?')
#: XIDs that drain a node (NVIDIA's XID catalogue: double-bit ECC (48),
#: row remapping failure (64), NVLink error (74), fallen off the bus (79),
#: contained / uncontained ECC (94, 95), GSP errors (119, 120))
DRAIN_XIDS = frozenset({48, 64, 74, 79, 94, 95, 119, 120})
KMSG = '/dev/kmsg'


def parse_kmsg(text, boot_epoch):
    """XID events of ``/dev/kmsg`` records (``pri,seq,usec,flags;msg``);
    ``boot_epoch``: the epoch time of the kernel's clock 0."""
    out = []
    for line in text.splitlines():
        head, sep, msg = line.partition(';')
        if not sep:
            continue
        fields = head.split(',')
        m = XID_LINE.search(msg)
        if not m or len(fields) < 3:
            continue
        try:
            when = boot_epoch + int(fields[2]) / 1e6
        except ValueError:
            continue
        out.append(_event(when, m))
    return out


def parse_journal(text):
    """XID events of ``journalctl -k -o short-unix`` lines
    (``<epoch.us> <host> kernel: NVRM: Xid ...``)."""
    out = []
    for line in text.splitlines():
        m = XID_LINE.search(line)
        if not m:
            continue
        try:
            when = float(line.split(None, 1)[0])
        except (ValueError, IndexError):
            continue
        out.append(_event(when, m))
    return out


def _event(when, m):
    return {'time': round(when, 3), 'pci': m.group('pci'),
            'xid': int(m.group('xid')), 'text': (m.group('text') or '')[:200]}


def read_kmsg(path=KMSG, budget=0.2):
    """Everything ``/dev/kmsg`` still holds (non-blocking reads)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    lines, t0 = [], time.monotonic()
    try:
        while time.monotonic() - t0 < budget:
            try:
                rec = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as err:
                if err.errno == 32:        # EPIPE: a record was overwritten
                    continue
                raise
            if not rec:
                break
            lines.append(rec.decode(errors='replace').rstrip('\n'))
    finally:
        os.close(fd)
    return '\n'.join(lines)


def events_since(since):
    """``(events after epoch time since, None)`` or ``(None, why not)``."""
    try:
        text = read_kmsg()
        boot = time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)
        return [e for e in parse_kmsg(text, boot) if e['time'] > since], None
    except OSError as err:
        kmsg_why = f'{KMSG}: {err.strerror or err}'
    try:
        out = subprocess.run(['journalctl', '-k', '-q', '--no-pager', '-o',
                              'short-unix', '--since', f'@{int(since)}'],
                             capture_output=True, text=True, timeout=0.4)
    except (OSError, subprocess.SubprocessError) as err:
        return None, (f'XIDs not checked: {kmsg_why}; journalctl: '
                      f'{getattr(err, "strerror", None) or err}')
    if out.returncode != 0:
        return None, (f'XIDs not checked: {kmsg_why}; journalctl -k: exit '
                      f'{out.returncode}: {out.stderr.strip()[:100]}')
    return [e for e in parse_journal(out.stdout) if e['time'] > since], None


def since_last(state_file, now=None):
    """XID events since the time kept in ``state_file`` (first time: the
    last hour); the file then keeps ``now``.  ``(events, None)`` or
    ``(None, why not checked)``."""
    now = time.time() if now is None else now
    since = now - FIRST_LOOK_BACK
    try:
        with open(state_file) as fp:
            since = float(fp.read().strip())
    except (OSError, ValueError):
        pass
    events, why = events_since(since)
    if why is None:
        try:
            safefile.write_atomic(state_file, f'{now:.3f}\n')
        except OSError:
            pass          # next time looks back from the same point
    return events, why
