"""A rendezvous port of the job's own: ``python3 -m
ccl_health.torch_bench.port [--count N] [--default P]`` prints the first
of ``N`` consecutive TCP ports free on this host (the first node of a job,
where rank 0 listens), so that checks running at the same time on one node
never share ``MASTER_PORT`` (the first call takes a fresh rendezvous per
loop: ``MASTER_PORT`` + loop).  The job script exports it before the
launch; ``--default`` where none is found."""

import argparse
import random
import socket
import sys

#: where a block is looked for: above the registered ports most daemons
#: use, below Linux's default ephemeral range (32768-60999), where the
#: kernel picks the ports of outgoing connections
LOW, HIGH = 20000, 32000


def free_block(count=10, tries=200, rng=random):
    """The first port of ``count`` consecutive ports that are all free
    (each bound once here, then released), or None."""
    for _ in range(tries):
        first = rng.randrange(LOW, HIGH - count)
        held = []
        try:
            for port in range(first, first + count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(s)
                s.bind(('', port))
            return first
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python3 -m ccl_health.torch_bench.port',
                                 description=__doc__.split('\n\n')[0])
    ap.add_argument('--count', type=int, default=10)
    ap.add_argument('--default', type=int, default=29500)
    args = ap.parse_args(argv)
    port = free_block(max(1, args.count))
    print(port if port is not None else args.default)
    return 0


if __name__ == '__main__':
    sys.exit(main())
