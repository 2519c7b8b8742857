"""A throw-away multi-node Slurm cluster on this one host, for the fleet
test (tests/test_fleet_slurm.py).

Each "node" is a network namespace of its own with a veth pair into it;
the host ends of the veths sit on a bridge the cluster creates, in a private
/24 that nothing else on the host uses (10.253.X.0/24, the first X free).
The bridge holds the controller's address (.1); node i has .(10+i).  One
``munged`` (key and socket under the cluster's folder), one real
``slurmctld`` on the bridge address, and one ``slurmd`` per node started
as ``nsenter --net=/var/run/netns/<ns> slurmd -D -f <conf> -N <node>``
(``ip netns exec`` remounts /sys and slurmd loses its cgroup mounts: see
/work/shared/SLURM.md).  The file system is shared by every node, as a
cluster's shared file system is.

Every node is in the partition ``batch`` (the default), and in each of
``partitions`` given (another name a job must ask for, e.g. the
``service`` partition of a ``#SCRON`` line).  Settings that let many job
steps of one allocation run at once and end quickly: ``CR_CPU`` (memory
is not a consumable, so a step asks for none), ``SlurmdParameters=
config_overrides`` (the configured CPUs, not this host's), ``KillWait=2``,
``MessageTimeout=10``, ``OverTimeLimit=0``.

:class:`MultiCluster` is a context manager: leaving it (also on an error)
cancels every job, ends the daemons it started and the ``slurmstepd`` of
its nodes (found by their network namespace, never by name alone), removes
the namespaces, veths and bridge, and :meth:`MultiCluster.leftovers` says
what is still there (empty when all is clean)."""

import contextlib
import ipaddress
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time

from helpers.ports import free_ports
from helpers.procs import running
from helpers.slurm_harness import (PLUGINS, Cluster, Unavailable, _which,
                                   daemon_pids, ensure_installed)

PARTITION = 'batch'
NETNS_DIR = '/var/run/netns'

__all__ = ['MultiCluster', 'Unavailable', 'ClusterError', 'ensure_installed',
           'PARTITION', 'namespaced_pids', 'started']


class ClusterError(Exception):
    """The cluster did not come up on a machine that should run it (root,
    Slurm installed): a failure, not a reason to skip."""


def _ip(*args, check=True):
    p = subprocess.run(['ip'] + list(args), capture_output=True, text=True,
                       timeout=30)
    if check and p.returncode != 0:
        raise ClusterError(f'ip {" ".join(args)}: {p.stderr.strip()}')
    return p


def _used_subnets():
    """The networks of this host's addresses and routes (not the default
    route)."""
    nets = set()
    out = _ip('-o', '-4', 'addr', 'show', check=False).stdout
    for line in out.splitlines():
        parts = line.split()
        if 'inet' in parts:
            addr = parts[parts.index('inet') + 1]
            nets.add(ipaddress.ip_interface(addr).network)
    for line in _ip('-4', 'route', 'show', 'table', 'all',
                    check=False).stdout.splitlines():
        dest = (line.split() or [''])[0]
        if dest in ('default', 'local', 'broadcast', 'unreachable',
                    'blackhole', 'prohibit', 'throw', 'multicast'):
            dest = (line.split() + ['', ''])[1] if dest != 'default' else ''
        try:
            net = ipaddress.ip_network(dest, strict=False)
        except ValueError:
            continue
        if net.prefixlen:
            nets.add(net)
    return nets


def _free_subnet():
    used = _used_subnets()
    for x in range(0, 256):
        net = ipaddress.ip_network(f'10.253.{x}.0/24')
        if not any(net.overlaps(u) for u in used):
            return net
    raise Unavailable('no free 10.253.X.0/24 network on this host')


def _free_tag():
    taken = _ip('-o', 'link', 'show', check=False).stdout + \
        _ip('netns', 'list', check=False).stdout
    while True:
        tag = f'{random.randrange(100000):05d}'
        if f'cclb{tag}' not in taken and f'ccl{tag}-' not in taken:
            return tag


def _netns_inode(path):
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def namespaced_pids(inodes):
    """{pid: (comm, inode)} of the processes whose network namespace is one
    of ``inodes``."""
    out = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            ino = os.stat(f'/proc/{entry}/ns/net').st_ino
            if ino in inodes:
                with open(f'/proc/{entry}/comm') as fp:
                    out[int(entry)] = (fp.read().strip(), ino)
        except OSError:
            continue
    return out


class MultiCluster(Cluster):
    """``nodes`` slurmd, each in a network namespace of its own, one
    slurmctld, one munged, all under ``root``."""

    def __init__(self, root, nodes=16, cpus=2, memory_mb=1000, scron=False,
                 partitions=()):
        super().__init__(root, cpus=cpus, memory_mb=memory_mb, scron=scron)
        #: partitions beside ``batch``, of every node, never the default
        self.partitions = tuple(partitions)
        if not 1 <= nodes <= 240:
            raise ValueError(f'{nodes} nodes: one /24 holds 1 to 240')
        self.count = nodes
        width = max(2, len(str(nodes)))
        self.nodes = [f'n{i:0{width}d}' for i in range(1, nodes + 1)]
        self.nodelist = f'n[{1:0{width}d}-{nodes:0{width}d}]'
        self.ctl_host = self.node          # slurmctld insists on its hostname
        # names of our own: a tag no link or namespace here has yet
        self.tag = _free_tag()
        self.bridge = f'cclb{self.tag}'
        self.netns = {n: f'ccl{self.tag}-{n}' for n in self.nodes}
        self.veths = {n: f'cv{self.tag}{i:03d}'[:15]
                      for i, n in enumerate(self.nodes, 1)}
        self.net = None
        self.addr = {}
        self.ns_inodes = set()
        self.made = {'bridge': False, 'netns': [], 'veth': []}
        self.logs.update({n: os.path.join(self.root, 'log', f'slurmd-{n}.log')
                          for n in self.nodes})
        self.start_seconds = None

    # -- network -----------------------------------------------------------

    def make_network(self):
        if os.geteuid() != 0:
            raise Unavailable('network namespaces need root')
        for tool in ('ip', 'nsenter'):
            if not _which(tool):
                raise Unavailable(f'{tool} is not installed')
        self.net = _free_subnet()
        hosts = list(self.net.hosts())
        self.ctl_addr = str(hosts[0])
        self.addr = {n: str(hosts[10 + i]) for i, n in enumerate(self.nodes)}
        _ip('link', 'add', self.bridge, 'type', 'bridge')
        self.made['bridge'] = True
        _ip('addr', 'add', f'{self.ctl_addr}/{self.net.prefixlen}', 'dev',
            self.bridge)
        _ip('link', 'set', self.bridge, 'up')
        for node in self.nodes:
            ns, veth = self.netns[node], self.veths[node]
            p = _ip('netns', 'add', ns, check=False)
            if p.returncode != 0:
                why = f'ip netns add {ns}: {p.stderr.strip()}'
                if 'not permitted' in p.stderr.lower():
                    raise Unavailable(why)       # no CAP_SYS_ADMIN here
                raise ClusterError(why)
            self.made['netns'].append(ns)
            self.ns_inodes.add(_netns_inode(os.path.join(NETNS_DIR, ns)))
            _ip('link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0',
                'netns', ns)
            self.made['veth'].append(veth)
            _ip('link', 'set', veth, 'master', self.bridge)
            _ip('link', 'set', veth, 'up')
            _ip('-n', ns, 'addr', 'add',
                f'{self.addr[node]}/{self.net.prefixlen}', 'dev', 'eth0')
            _ip('-n', ns, 'link', 'set', 'eth0', 'up')
            _ip('-n', ns, 'link', 'set', 'lo', 'up')
            _ip('-n', ns, 'route', 'add', 'default', 'via', self.ctl_addr)

    def remove_network(self):
        for ns in reversed(self.made['netns']):
            _ip('netns', 'delete', ns, check=False)
        for veth in self.made['veth']:
            _ip('link', 'delete', veth, check=False)   # gone with its netns
        if self.made['bridge']:
            _ip('link', 'delete', self.bridge, check=False)
        self.made = {'bridge': False, 'netns': [], 'veth': []}

    # -- configuration -----------------------------------------------------

    def write_files(self):
        root = self.root
        self.make_folders('run', 'log')
        self.ctld_port, self.slurmd_port, self.srun_lo = free_ports(3)
        first, last = self.addr[self.nodes[0]], self.addr[self.nodes[-1]]
        a, b = first.rsplit('.', 1)[1], last.rsplit('.', 1)[1]
        prefix = first.rsplit('.', 1)[0]
        conf = f'''\
# written by tests/helpers/slurm_cluster.py: {self.count} nodes in network namespaces
ClusterName=cclfleet
SlurmctldHost={self.ctl_host}({self.ctl_addr})
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={self.logs["slurmctld"]}
SlurmdLogFile={root}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
{PLUGINS}KillWait=2
OverTimeLimit=0
MinJobAge=600
MessageTimeout=10
SlurmdTimeout=60
TCPTimeout=5
# every slurmd straight from slurmctld / srun: no node-to-node fan-out
TreeWidth={max(50, self.count)}
NodeName={self.nodelist} NodeAddr={prefix}.[{a}-{b}] CPUs={self.cpus} RealMemory={self.memory_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes={self.nodelist} Default=YES MaxTime=INFINITE State=UP
'''
        for name in self.partitions:
            conf += (f'PartitionName={name} Nodes={self.nodelist} '
                     f'Default=NO MaxTime=INFINITE State=UP\n')
        if self.scron:
            conf += 'ScronParameters=enable\n'
        with open(self.conf, 'w') as fp:
            fp.write(conf)

    # -- daemons -------------------------------------------------------------

    def node_states(self):
        """{node: sinfo's short state}, {} when sinfo does not answer."""
        try:
            p = self.run('sinfo', '-h', '-N', '-o', '%N %t', timeout=20)
        except subprocess.TimeoutExpired:
            return {}
        if p.returncode != 0:
            return {}
        return dict(line.split() for line in p.stdout.splitlines()
                    if len(line.split()) == 2)

    def node_reasons(self):
        """{node: (state, reason)} of the nodes sinfo lists with a reason."""
        p = self.run('sinfo', '-h', '-N', '-R', '-o', '%N|%t|%E', timeout=20)
        out = {}
        for line in p.stdout.splitlines():
            node, state, reason = line.split('|', 2)
            out[node] = (state, reason)
        return out

    def _wait_for(self, what, cond, timeout, names):
        try:
            return super()._wait_for(what, cond, timeout, names)
        except Unavailable as err:     # a daemon failed: not a skip
            raise ClusterError(str(err)) from None

    def all_idle(self):
        states = self.node_states()
        return len(states) == self.count and \
            all(s == 'idle' for s in states.values())

    def start(self, timeout=60):
        t0 = time.monotonic()
        self.before = daemon_pids()
        self.make_network()
        self.write_files()
        self.start_controller(timeout)
        nsenter = _which('nsenter')
        for node in self.nodes:
            self._spawn(node, [
                nsenter, f'--net={NETNS_DIR}/{self.netns[node]}',
                _which('slurmd'), '-D', '-f', self.conf, '-N', node])
        self._wait_for(f'all {self.count} nodes idle in sinfo',
                       self.all_idle, timeout,
                       ['munged', 'slurmctld'] + self.nodes)
        self.start_seconds = time.monotonic() - t0
        return self

    def resume(self, nodes=None, timeout=30):
        """Return drained / down nodes to service and wait until sinfo
        shows them idle (right after ``state=resume`` slurmctld lists them
        ``idle*``, not responding, for about a second: a client that reads
        sinfo then leaves them out)."""
        nodes = list(nodes or self.nodes)
        self.run('scontrol', 'update', f'nodename={",".join(nodes)}',
                 'state=resume', timeout=20)
        self._wait_for(f'{",".join(nodes)} idle after resume',
                       lambda: all(self.node_states().get(n) == 'idle'
                                   for n in nodes), timeout, [])

    def cancel_all(self, grace=15):
        if self.procs.get('slurmctld') is None or \
                self.procs['slurmctld'].poll() is not None:
            return
        try:
            self.run('scancel', '--full', timeout=20)
            deadline = time.time() + grace
            while time.time() < deadline and self.run(
                    'squeue', '-h', '-t', 'all', '-o', '%i %T',
                    timeout=20).stdout.strip().count('ING'):
                time.sleep(0.3)     # RUNNING, PENDING, COMPLETING
        except subprocess.TimeoutExpired:
            pass

    def stop(self, grace=15):
        """Cancel every job, end the daemons we started (SIGTERM, then
        SIGKILL), every process left in our namespaces (slurmstepd and the
        tasks it started), remove the network; returns what is left
        (:meth:`leftovers`)."""
        self.cancel_all(grace)
        for name in self.nodes + ['slurmctld', 'munged']:
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
        for name in self.nodes + ['slurmctld', 'munged']:
            p = self.procs.get(name)
            if p is None:
                continue
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(grace)
        # slurmstepd and its tasks detach from slurmd: they live on in the
        # nodes' namespaces; those, and only those, are ours to end
        deadline = time.time() + grace
        inns = {}
        while time.time() < deadline:
            inns = {pid: c for pid, (c, _) in
                    namespaced_pids(self.ns_inodes).items() if running(pid)}
            if not inns:
                break
            for pid in inns:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        self.remove_network()
        # an inode of a namespace gone may name a new one later: forget them
        self.ns_inodes = set()
        if self._sockdir:
            shutil.rmtree(self._sockdir, ignore_errors=True)
            self._sockdir = None
        left = self.leftovers()
        if inns:
            left['in namespaces'] = inns
        return left

    def leftovers(self):
        """What this cluster left behind: daemons started since
        :meth:`start`, processes in its namespaces, the namespaces, veths
        and bridge.  Empty when all is clean."""
        left = {}
        procs = {p.pid: name for name, p in self.procs.items()
                 if running(p.pid)}
        if procs:
            left['daemons'] = procs
        inns = {pid: c for pid, (c, _) in
                namespaced_pids(self.ns_inodes).items() if running(pid)}
        if inns:
            left['in namespaces'] = inns
        names = set(_ip('netns', 'list', check=False).stdout.split())
        ns = sorted(set(self.netns.values()) & names)
        if ns:
            left['netns'] = ns
        links = _ip('-o', 'link', 'show', check=False).stdout
        devs = {l.split(':')[1].strip().split('@')[0]
                for l in links.splitlines() if ':' in l}
        mine = sorted(devs & (set(self.veths.values()) | {self.bridge}))
        if mine:
            left['links'] = mine
        return left

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
        return False


def started(root, **options):
    """A :class:`MultiCluster` of ``options`` under ``root``, started; the
    test is skipped, saying why, where it cannot be: not root, no Slurm to
    install, or the cluster does not start here (the namespaces, what it
    left behind named).  The caller stops it."""
    import pytest
    if os.geteuid() != 0:
        pytest.skip('a multi-node Slurm in network namespaces needs root')
    try:
        ensure_installed()
    except Unavailable as err:
        pytest.skip(f'no Slurm on this machine: {err}')
    c = MultiCluster(root, **options)
    try:
        c.start()
    except Unavailable as err:
        left = c.stop()
        pytest.skip(f'the cluster does not start here: {err}'
                    + (f' (left behind: {left})' if left else ''))
    except BaseException:
        c.stop()
        raise
    return c
