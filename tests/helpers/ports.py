"""Free TCP ports of this host, for the servers the tests start
(PostgreSQL, PgBouncer, Slurm's daemons) and for a port nothing listens
on."""

import socket


def free_ports(n):
    """``n`` distinct TCP ports free right now on every address of this
    host."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind(('', 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports
