"""Processes of a test, and waiting for a condition instead of a sleep."""
import os
import time


def processes_with(text):
    """pids of the processes whose environment holds ``text``."""
    found = []
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                with open(f'/proc/{d}/environ', 'rb') as fp:
                    if text.encode() in fp.read():
                        found.append(int(d))
            except OSError:
                pass
    return found


def running(pid):
    """Whether the process ``pid`` is running: it exists and is no zombie
    (a zombie is dead for every purpose of a test)."""
    try:
        with open(f'/proc/{pid}/stat') as fp:
            return fp.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def cmdline(pid):
    """The command line of ``pid`` (words), or [] when it is gone."""
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as fp:
            return [w.decode(errors='replace')
                    for w in fp.read().split(b'\0') if w]
    except OSError:
        return []


def wait_until(condition, timeout, step=0.05):
    """Call ``condition`` until it returns something true (returned) or
    ``timeout`` seconds pass (its last, false answer returned)."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got or time.monotonic() >= deadline:
            return got
        time.sleep(step)
