"""Checks that run at the same time on one node share no rendezvous port
(issue 40): each framework job picks a block of free ports as it starts
(ccl_health/torch_bench/port.py), never a port another listener holds."""

import socket
import subprocess
import sys

from conftest import REPO

from ccl_health.torch_bench import port


class Picks:
    """A random source that proposes ``firsts`` in turn."""
    def __init__(self, firsts):
        self.firsts = list(firsts)

    def randrange(self, lo, hi):
        return self.firsts.pop(0)


def _listening():
    s = socket.socket()
    s.bind(('', 0))
    s.listen()
    return s, s.getsockname()[1]


def test_a_block_never_holds_a_port_in_use():
    held, taken = _listening()
    try:
        free = 20000
        for first in range(20000, 31000, 10):
            try:
                for p in range(first, first + 10):
                    socket.socket().bind(('', p))
                free = first
                break
            except OSError:
                continue
        got = port.free_block(10, rng=Picks([taken - 3, free]))
        assert got == free != taken - 3
        assert port.free_block(10, tries=1, rng=Picks([taken])) is None
    finally:
        held.close()


def test_the_command_prints_a_port_a_job_can_listen_on():
    p = subprocess.run([sys.executable, '-m', 'ccl_health.torch_bench.port',
                        '--count', '3', '--default', '1'], cwd=REPO,
                       capture_output=True, text=True, check=True)
    first = int(p.stdout)
    assert port.LOW <= first < port.HIGH
    with socket.socket() as s:
        s.bind(('', first))
