"""A throw-away single-host Slurm cluster for tests (tests/test_slurm_path.py).

Debian's ``slurmctld slurmd munge slurm-client`` are installed when missing
(root and apt-get needed; otherwise :class:`Unavailable` says why).  Every
file of the cluster lives under one folder: the munge key and socket,
``slurm.conf`` (one node = this host, CPUs=2, a partition ``gpu``, no
cgroup, no accounting), the spool and state folders, the logs.  munged,
slurmctld and slurmd run in the foreground (``-F`` / ``-D``) as background
processes of their own session, so their pids are the ones we started; a
client finds the cluster through ``SLURM_CONF`` (:meth:`Cluster.env`).

Without accounting there is no ``sacct``: the suite is run with ReFrame's
``squeue`` backend (``CCL_HEALTH_SCHEDULER=squeue``), which polls with
squeue.  Nothing is stood in: sbatch, srun, squeue, scancel and the time
limits are Slurm's own."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from helpers.ports import free_ports
from helpers.procs import running

PACKAGES = ('slurmctld', 'slurmd', 'munge', 'slurm-client')
BINARIES = ('munged', 'slurmctld', 'slurmd', 'slurmstepd', 'sbatch', 'srun',
            'sinfo', 'squeue', 'scancel', 'scontrol')
#: the processes a cluster may leave behind (slurmstepd: one per job step)
DAEMONS = ('munged', 'slurmctld', 'slurmd', 'slurmstepd')
PARTITION = 'gpu'
#: the slurm.conf lines of every test cluster (one node or many): no
#: cgroup, no accounting, plain cons_tres on CPUs
PLUGINS = """ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
InactiveLimit=0
"""
SBIN = ('/usr/sbin', '/sbin', '/usr/bin', '/bin')


class Unavailable(Exception):
    """Slurm cannot be installed or started here; the message says why."""


def _which(name):
    return shutil.which(name, path=os.pathsep.join(
        [os.environ.get('PATH', '')] + list(SBIN)))


def missing_binaries():
    return [b for b in BINARIES if not _which(b)]


def _apt_install():
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    cmd = ['apt-get', 'install', '-y', '--no-install-recommends'] + \
        list(PACKAGES)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0:
        # a stale package index: refresh it once and try again
        subprocess.run(['apt-get', 'update'], env=env, capture_output=True,
                       text=True, timeout=600)
        p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=900)
    return p


def ensure_installed():
    """Install Debian's Slurm and munge unless already there.  Returns a
    line saying what was done; raises :class:`Unavailable`."""
    missing = missing_binaries()
    if not missing:
        return 'already installed'
    if sys.platform != 'linux':
        raise Unavailable(f'Slurm is missing ({", ".join(missing)}) and '
                          f'this is not Linux')
    if os.geteuid() != 0:
        raise Unavailable(f'Slurm is missing ({", ".join(missing)}) and '
                          f'installing it needs root')
    if not shutil.which('apt-get'):
        raise Unavailable(f'Slurm is missing ({", ".join(missing)}) and '
                          f'there is no apt-get to install it')
    try:
        p = _apt_install()
    except (OSError, subprocess.TimeoutExpired) as err:
        raise Unavailable(f'apt-get install {" ".join(PACKAGES)}: {err}')
    still = missing_binaries()
    if p.returncode != 0 or still:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise Unavailable(f'apt-get install {" ".join(PACKAGES)} failed '
                          f'(rc={p.returncode}, missing {still}): '
                          + ' | '.join(tail))
    return f'installed {" ".join(PACKAGES)}'


def daemon_pids():
    """{pid: name} of every Slurm / munge daemon running on this host."""
    out = {}
    for name in DAEMONS:
        p = subprocess.run(['pgrep', '-x', name], capture_output=True,
                           text=True)
        for pid in p.stdout.split():
            out[int(pid)] = name
    return out




class Cluster:
    """One slurmctld + one slurmd (this host) + munged, all under
    ``root``.  ``start()`` waits until the node is idle; ``stop()`` cancels
    every job, ends the daemons and checks that none is left."""

    def __init__(self, root, cpus=2, memory_mb=1000, scron=False):
        self.root = str(root)
        #: ``ScronParameters=enable`` in slurm.conf (Slurm's own cron,
        #: ``scrontab``)
        self.scron = scron
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.node = socket.gethostname().split('.')[0]
        self.procs = {}          # name -> Popen, the daemons we started
        self.before = {}         # daemons already running before us
        self.conf = os.path.join(self.root, 'slurm.conf')
        self.bindir = os.path.join(self.root, 'bin')
        self.logs = {n: os.path.join(self.root, f'{n}.log')
                     for n in ('munged', 'slurmctld', 'slurmd')}
        # a unix socket path has at most 107 characters
        self._sockdir = None
        if len(os.path.join(self.root, 'munge', 'munge.socket.2')) > 100:
            self._sockdir = tempfile.mkdtemp(prefix='ccl-munge-')
        self.munge_socket = os.path.join(
            self._sockdir or os.path.join(self.root, 'munge'),
            'munge.socket.2')

    # -- configuration ---------------------------------------------------

    def env(self, base=None):
        """The environment of a Slurm client of this cluster."""
        env = dict(os.environ if base is None else base)
        env['SLURM_CONF'] = self.conf
        env['PATH'] = os.pathsep.join([self.bindir, env.get('PATH', '')] +
                                      list(SBIN))
        for var in [v for v in env if v.startswith(('SLURM_JOB', 'SLURM_STEP',
                                                    'SBATCH_', 'SRUN_'))]:
            del env[var]
        return env

    def make_folders(self, *more):
        """The cluster's private folders under its root (``munge``,
        ``state``, ``spool``, ``bin`` and ``more``) and a fresh munge
        key."""
        for d in ('munge', 'state', 'spool', 'bin') + more:
            os.makedirs(os.path.join(self.root, d), mode=0o700,
                        exist_ok=True)
        if self._sockdir:
            os.chmod(self._sockdir, 0o700)
        key = os.path.join(self.root, 'munge', 'munge.key')
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                  'wb') as fp:
            fp.write(os.urandom(1024))

    def write_files(self):
        root = self.root
        self.make_folders()
        self.ctld_port, self.slurmd_port = free_ports(2)
        conf = f'''\
# written by tests/helpers/slurm_harness.py: one host, no cgroup, no accounting
ClusterName=cclhealth
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={self.logs["slurmctld"]}
SlurmdLogFile={self.logs["slurmd"]}
SlurmctldDebug=info
SlurmdDebug=info
{PLUGINS}KillWait=5
OverTimeLimit=0
MinJobAge=600
MessageTimeout=20
SlurmdTimeout=300
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.memory_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
'''
        if self.scron:
            conf += 'ScronParameters=enable\n'
        with open(self.conf, 'w') as fp:
            fp.write(conf)

    # -- daemons ---------------------------------------------------------

    def _spawn(self, name, cmd):
        log = open(self.logs[name] + '.stdio', 'ab')
        self.procs[name] = subprocess.Popen(
            cmd, env=self.env(), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root)
        log.close()

    def _tail(self, name, n=15):
        text = ''
        for path in (self.logs[name], self.logs[name] + '.stdio'):
            if os.path.exists(path):
                with open(path, errors='replace') as fp:
                    text += ''.join(fp.readlines()[-n:])
        return text.strip()

    def _wait_for(self, what, cond, timeout, names):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if cond():
                return
            for name in names:
                p = self.procs.get(name)
                if p is not None and p.poll() is not None:
                    raise Unavailable(f'{name} exited (rc={p.returncode}) '
                                      f'before {what}:\n{self._tail(name)}')
            time.sleep(0.5)
        raise Unavailable(f'timed out after {timeout}s waiting for {what}:\n'
                          + '\n'.join(self._tail(n) for n in names))

    def run(self, *cmd, check=False, timeout=60):
        return subprocess.run(list(cmd), env=self.env(), capture_output=True,
                              text=True, timeout=timeout, check=check)

    def ctld_up(self):
        try:
            return ' is UP' in self.run('scontrol', 'ping', timeout=20).stdout
        except subprocess.TimeoutExpired:
            return False

    def node_state(self):
        try:
            p = self.run('sinfo', '-h', '-N', '-n', self.node, '-o', '%t',
                         timeout=20)
        except subprocess.TimeoutExpired:
            return ''
        return p.stdout.strip() if p.returncode == 0 else ''

    def start_controller(self, timeout):
        """munged and slurmctld of this cluster, answering."""
        self._spawn('munged', [
            _which('munged'), '-F', '--force',
            f'--key-file={self.root}/munge/munge.key',
            f'--socket={self.munge_socket}',
            f'--pid-file={self.root}/munge/munged.pid',
            f'--seed-file={self.root}/munge/munged.seed',
            f'--log-file={self.logs["munged"]}'])
        self._wait_for('the munge socket', lambda: os.path.exists(
            self.munge_socket), timeout, ['munged'])
        self._spawn('slurmctld', [_which('slurmctld'), '-D', '-c', '-i',
                                  '-f', self.conf])
        self._wait_for('slurmctld to answer', self.ctld_up, timeout,
                       ['munged', 'slurmctld'])

    def start(self, timeout=60):
        self.before = daemon_pids()
        self.write_files()
        self.start_controller(timeout)
        self._spawn('slurmd', [_which('slurmd'), '-D', '-f', self.conf,
                               '-N', self.node])
        self._wait_for(f'node {self.node} idle in sinfo',
                       lambda: self.node_state() == 'idle', timeout,
                       ['munged', 'slurmctld', 'slurmd'])

    def owns(self, pid):
        """Whether process ``pid`` belongs to this cluster: a slurmstepd
        inherits our slurmd's environment, SLURM_CONF included."""
        try:
            with open(f'/proc/{pid}/environ', 'rb') as fp:
                env = fp.read().split(b'\0')
        except OSError:
            return False
        return f'SLURM_CONF={self.conf}'.encode() in env

    def stop(self, grace=15):
        """Cancel every job, end the daemons we started (SIGTERM, then
        SIGKILL), then any slurmstepd our slurmd left; returns the daemons
        still running that were not running before :meth:`start` (empty
        when all is well)."""
        if self.procs.get('slurmctld') and \
                self.procs['slurmctld'].poll() is None:
            try:
                self.run('scancel', '--full', '--partition', PARTITION,
                         timeout=20)
                deadline = time.time() + grace
                while time.time() < deadline and self.run(
                        'squeue', '-h', '-t', 'all', '-o', '%i %T',
                        timeout=20).stdout.strip().count('ING'):
                    time.sleep(0.5)     # RUNNING, PENDING, COMPLETING
            except subprocess.TimeoutExpired:
                pass
        for name in ('slurmd', 'slurmctld', 'munged'):
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(grace)
        # slurmstepd detaches from slurmd: end those that are ours (new, and
        # started by our slurmd: its SLURM_CONF; another cluster's stay)
        for pid, name in daemon_pids().items():
            if pid not in self.before and name == 'slurmstepd' and \
                    self.owns(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        left, deadline = {}, time.time() + grace
        ours = {p.pid for p in self.procs.values()}
        while time.time() < deadline:
            left = {pid: n for pid, n in daemon_pids().items()
                    if pid not in self.before and running(pid) and
                    (pid in ours or self.owns(pid))}
            if not left:
                break
            time.sleep(0.2)
        if self._sockdir:
            shutil.rmtree(self._sockdir, ignore_errors=True)
        return left
