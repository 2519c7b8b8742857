"""Facts about the node the suite runs on: GPUs, CUDA, MPI.  Used by the
``local`` system configuration and by the main command to decide what can
run here."""

import dataclasses
import os
import re
import shutil
import subprocess
from typing import List, Optional

from ccl_health.sitedata import sysconfig


@dataclasses.dataclass
class Gpus:
    vendor: Optional[str] = None       # 'nvidia' | 'amd' | None
    count: int = 0
    model: str = ''
    arch: str = ''                     # 'sm_90', 'gfx90a'
    driver: str = ''
    why_none: str = ''                 # one line when count == 0
    #: the vendor tool that is installed and listed no GPU ('' when none
    #: is installed): its driver does not answer
    tool: str = ''
    #: the UUID of each GPU, by index (nvidia-smi ``GPU-<uuid>``, rocminfo
    #: ``GPU-<hex>``); empty where unknown
    uuids: List[str] = dataclasses.field(default_factory=list)

    def describe(self):
        """``2 x NVIDIA H200 (sm_90, driver 570.124.06)``: only what is
        known (an assumed count has no driver: ``2 x assumed (2:sm_80)
        (sm_80)``, never ``driver )``)."""
        facts = ', '.join(x for x in (
            self.arch, f'driver {self.driver}' if self.driver else '') if x)
        return (f'{self.count} x {self.model or "GPU"}' +
                (f' ({facts})' if facts else ''))


def _run(cmd, timeout=20, env=None, keep_stdout=False):
    """``(stdout, stderr)`` of ``cmd``; on failure ``(None, 'exit N:
    what it said')`` (``keep_stdout``: its stdout instead of None, where
    the tool says why on stdout and its stderr is noise)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, str(err)
    if p.returncode == 0:
        return p.stdout, p.stderr.strip()
    if keep_stdout:
        return p.stdout, f'exit {p.returncode}: {p.stderr.strip()}'.strip()
    # nvidia-smi says why it failed on stdout ("NVIDIA-SMI has failed
    # because it couldn't communicate with the NVIDIA driver ...")
    said = ' '.join((p.stderr.strip() or p.stdout.strip()).split())
    return None, f'exit {p.returncode}: {said}' if said else \
        f'exit {p.returncode}'


def detect_gpus(env=None, whole_node=False):
    """Ask nvidia-smi, then rocm-smi.  Never raises.

    nvidia-smi lists every GPU whatever CUDA_VISIBLE_DEVICES says; rocminfo
    honours ROCR_VISIBLE_DEVICES, unless ``whole_node`` (the health hook:
    the node's GPUs, then what the environment makes visible of them).

    ``CCL_HEALTH_ASSUME_GPUS=<count>:<arch>`` (e.g. ``2:sm_90``) pretends,
    for dry runs on machines without GPUs (CI): nothing can run then."""
    env = os.environ if env is None else env
    assumed = env.get('CCL_HEALTH_ASSUME_GPUS')
    if assumed:
        count, _, arch = assumed.partition(':')
        arch = arch or 'sm_90'
        try:
            n = int(count)
        except ValueError:
            n = 0
        return Gpus('amd' if arch.startswith('gfx') else 'nvidia',
                    n, f'assumed ({assumed})', arch)
    if shutil.which('nvidia-smi'):
        out, err = _run(['nvidia-smi', '--query-gpu=index,uuid,name,'
                         'compute_cap,driver_version', '--format=csv,noheader'])
        if out:
            rows = parse_nvidia_smi_csv(out)
            if rows:
                _, _, name, cap, drv = rows[0]
                arch = 'sm_' + cap.replace('.', '') if cap else ''
                return Gpus('nvidia', len(rows), name, arch, drv,
                            uuids=[r[1] for r in rows])
        tool, said = 'nvidia-smi', tool_answer('nvidia-smi', out, err)
    elif shutil.which('rocm-smi') or shutil.which('rocminfo'):
        out, err = _run(['rocminfo'], env={
            k: v for k, v in os.environ.items()
            if k != 'ROCR_VISIBLE_DEVICES'} if whole_node else None,
            keep_stdout=True)
        agents = parse_rocminfo(out or '')
        if agents:
            arch = agents[0][0]
            return Gpus('amd', len(agents), arch, arch,
                        uuids=[u for _, u in agents])
        tool, said = 'rocminfo', tool_answer('rocminfo', out, err)
    else:
        tool, said = '', ''
    why = no_gpu_line(tool, said)
    return Gpus(why_none=why, tool=tool)


#: lines of a vendor tool's answer that say nothing about the GPUs (the
#: kernel-module library's complaints where /proc/modules is missing)
_NOISE = re.compile(r'^(libkmod: |Error: could not get list of modules)')
_ANSI = re.compile(r'\x1b\[[0-9;]*m')


def _short(text, limit=100):
    """``text`` cut at a word boundary within ``limit`` characters."""
    text = ' '.join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(' ', 1)[0].rstrip(',;:') + ' ...'


def tool_answer(tool, out, err):
    """What a vendor tool that listed no GPU said, in a few whole words:
    the driver not loaded in the user's words, else its first line that
    is not noise (``err``: :func:`_run`'s ``exit N: ...``)."""
    code = re.match(r'exit (\d+):?\s*', err or '')
    err = (err or '')[code.end():] if code else err
    text = _ANSI.sub('', '\n'.join(x for x in (out, err) if x))
    if re.search(r"ROCk module is NOT loaded|couldn't communicate with the "
                 r"NVIDIA driver|No devices were found", text):
        return ('no AMD GPU driver loaded' if tool == 'rocminfo' else
                'no NVIDIA driver answered' if 'communicate' in text else
                'no GPU listed')
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not _NOISE.match(ln.strip())]
    said = _short(lines[0]) if lines else 'no output'
    return f'exit {code.group(1)}, {said}' if code else said


def no_gpu_line(tool, said):
    """The one line of a machine where no GPU was found: each vendor
    tool, and what it said (never its noise)."""
    if tool == 'nvidia-smi':
        return f'no GPU found (nvidia-smi: {said})'
    if tool == 'rocminfo':
        return f'no GPU found (nvidia-smi: not installed; rocminfo: {said})'
    return 'no GPU found (nvidia-smi: not installed; rocminfo: not installed)'


def parse_nvidia_smi_csv(text):
    """Rows ``[index, uuid, name, compute_cap, driver]`` of ``nvidia-smi
    --query-gpu=index,uuid,name,compute_cap,driver_version
    --format=csv,noheader`` (``0, GPU-63536d13-c7f6-4b78-6145-e06e786e4c2b,
    NVIDIA H100 80GB HBM3, 9.0, 580.159.04``), by index."""
    rows = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(',')]
        if len(cells) < 5 or not cells[0].isdigit():
            continue
        # a name with a comma in it: everything between uuid and the last two
        rows.append([cells[0], cells[1], ', '.join(cells[2:-2]), cells[-2],
                     cells[-1]])
    return sorted(rows, key=lambda r: int(r[0]))


def parse_rocminfo(text):
    """``[(gfx arch, uuid)]`` of the GPU agents in rocminfo's output, in its
    order (the order of ROCR_VISIBLE_DEVICES indices)."""
    agents, name, uuid, gpu = [], None, '', False

    def close():
        if name and (gpu or name.startswith('gfx')):
            agents.append((name, uuid))
    for line in text.splitlines():
        s = line.strip()
        if re.match(r'^Agent\s+\d+$', s):
            close()
            name, uuid, gpu = None, '', False
        elif s.startswith('Name:') and name is None:
            name = s.split(':', 1)[1].strip()
        elif s.startswith('Uuid:'):
            uuid = s.split(':', 1)[1].strip()
        elif s.startswith('Device Type:'):
            gpu = s.split(':', 1)[1].strip() == 'GPU'
    close()
    # an APU gets the placeholder GPU-XX, a discrete GPU GPU-<16 hex>
    return [(n, u if re.fullmatch(r'GPU-[0-9a-fA-F]+', u) else '')
            for n, u in agents if n.startswith('gfx')]


def mig_devices(env=None):
    """``{MIG uuid: GPU index}`` from ``nvidia-smi -L`` (``  MIG 1g.10gb
    Device  0: (UUID: MIG-<uuid>)`` under ``GPU 0: ... (UUID: GPU-...)``);
    empty where there is none or nvidia-smi cannot say."""
    if not shutil.which('nvidia-smi', path=(env or os.environ).get('PATH')):
        return {}
    out, _ = _run(['nvidia-smi', '-L'])
    found, gpu = {}, None
    for line in (out or '').splitlines():
        m = re.match(r'^GPU (\d+):', line.strip())
        if m:
            gpu = int(m.group(1))
            continue
        m = re.search(r'\(UUID: (MIG-[^)\s]+)\)', line)
        if m and gpu is not None:
            found[m.group(1)] = gpu
    return found


class VisibilityError(Exception):
    """A ``*_VISIBLE_DEVICES`` value this module cannot read."""


@dataclasses.dataclass
class Visible:
    """The GPUs of this node a GPU program started here would see."""
    indices: List[int]           # node GPU indices (nvidia-smi / rocminfo)
    tokens: List[str]            # the token naming each, as given
    variable: str = ''           # the variable that decided ('' unset)
    value: str = ''
    #: well-formed tokens that name no GPU of this node
    unknown: List[str] = dataclasses.field(default_factory=list)


_UUID_HEX = re.compile(r'^[0-9a-fA-F-]+$')


def _resolve_token(tok, gpus, mig):
    """The node index named by one token, None when it names no GPU here.
    Raises VisibilityError for a token of no known form."""
    if re.fullmatch(r'\d+', tok):
        i = int(tok)
        return i if i < gpus.count else None
    uuids = [u.lower() for u in gpus.uuids]
    low = tok.lower()
    m = re.fullmatch(r'mig-(gpu-[0-9a-f-]+)/\d+/\d+', low)
    if m:                                   # MIG-GPU-<uuid>/<gi>/<ci>
        low = m.group(1)
    elif low.startswith('mig-'):            # MIG-<uuid> (R470 and later)
        hits = [g for u, g in mig.items() if u.lower().startswith(low)]
        if len(set(hits)) > 1:
            raise VisibilityError(f'{tok!r} is the prefix of several MIG '
                                  f'devices')
        if hits:
            return hits[0]
        if not _UUID_HEX.match(low[4:]):
            raise VisibilityError(f'{tok!r} is no MIG device id')
        return None
    if low.startswith('gpu-') and _UUID_HEX.match(low[4:]) and len(low) > 4:
        hits = [i for i, u in enumerate(uuids) if u and u.startswith(low)]
        if len(hits) > 1:
            raise VisibilityError(f'{tok!r} is the prefix of several GPU '
                                  f'UUIDs')
        return hits[0] if hits else None
    raise VisibilityError(f'{tok!r} is neither a GPU index, a GPU UUID '
                          f'(GPU-...) nor a MIG id (MIG-...)')


def _apply(var, value, gpus, base, mig):
    """Narrow ``base`` (node indices) with one ``*_VISIBLE_DEVICES`` value.
    Indices count within ``base``; UUIDs name node GPUs.  As the CUDA and
    ROCm runtimes do, a negative index ends the list."""
    out, tokens, unknown = [], [], []
    sub = dataclasses.replace(gpus, count=len(base),
                              uuids=[gpus.uuids[i] if i < len(gpus.uuids)
                                     else '' for i in base])
    mig = {u: base.index(g) for u, g in mig.items() if g in base}
    for raw in value.split(','):
        tok = raw.strip()
        if re.fullmatch(r'-\d+', tok):
            break
        if not tok:
            raise VisibilityError(f'{var}={value!r}: an empty entry')
        try:
            i = _resolve_token(tok, sub, mig)
        except VisibilityError as err:
            raise VisibilityError(f'{var}={value!r}: {err}') from None
        if i is None:
            unknown.append(tok)
        elif base[i] in out:
            raise VisibilityError(f'{var}={value!r}: {tok!r} names a GPU '
                                  f'twice')
        else:
            out.append(base[i])
            tokens.append(tok)
    return out, tokens, unknown


def visible_gpus(gpus, env, mig=None):
    """The GPUs of this node (``gpus`` from :func:`detect_gpus`) a program
    started with environment ``env`` sees, as a :class:`Visible`.

    ``CUDA_VISIBLE_DEVICES`` (NVIDIA), and on AMD ``ROCR_VISIBLE_DEVICES``
    then ``HIP_VISIBLE_DEVICES`` (or ``CUDA_VISIBLE_DEVICES``, which HIP
    reads too) within it, may hold indices, GPU UUIDs (``GPU-8c2f...``, a
    unique prefix is enough), MIG ids (``MIG-GPU-<uuid>/<gi>/<ci>``,
    ``MIG-<uuid>``, resolved to their GPU with ``mig``, see
    :func:`mig_devices`), or hide every GPU (empty, ``NoDevFiles``, ``-1``).
    Raises :class:`VisibilityError` for a value of no known form."""
    base = list(range(gpus.count))
    tokens = [str(i) for i in base]
    layers = (['ROCR_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES'
               if env.get('HIP_VISIBLE_DEVICES') is not None else
               'CUDA_VISIBLE_DEVICES'] if gpus.vendor == 'amd' else
              ['CUDA_VISIBLE_DEVICES'])
    var = value = ''
    unknown = []
    for name in layers:
        val = env.get(name)
        if val is None:
            continue
        var, value = name, val
        if val.strip() in ('', 'NoDevFiles'):
            return Visible([], [], name, val, [])
        base, tokens, miss = _apply(name, val, gpus, base, mig or {})
        unknown += miss
    return Visible(base, tokens, var, value, unknown)


def mpi_home():
    """The MPI prefix nccl-tests' Makefile wants (``$MPI_HOME/include/mpi.h``)."""
    if os.environ.get('MPI_HOME'):
        return os.environ['MPI_HOME']
    if not shutil.which('mpicc'):
        return None
    out, _ = _run(['mpicc', '--showme:incdirs'])
    for inc in (out or '').split():
        if os.path.exists(os.path.join(inc, 'mpi.h')):
            return os.path.dirname(inc.rstrip('/'))
    mpicc = os.path.realpath(shutil.which('mpicc'))
    return os.path.dirname(os.path.dirname(mpicc))


def cuda_home():
    for cand in (os.environ.get('CUDA_HOME'), os.environ.get('CUDA_PATH'),
                 '/usr/local/cuda'):
        if cand and os.path.exists(os.path.join(cand, 'bin', 'nvcc')):
            return cand
    nvcc = shutil.which('nvcc')
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) \
        if nvcc else None


def in_slurm_allocation(env=None):
    env = os.environ if env is None else env
    return bool(env.get('SLURM_JOB_ID'))


def load_system_file(path, gpus, prefix='ccl_health_config'):
    """The module of ``config/systems/<name>.py`` loaded with ``gpus`` (a
    :class:`Gpus`) as the GPUs it detects: a system file that counts the
    GPUs of the host (``local``) counts these, detected once by the caller
    (or assumed, to check its shape)."""
    global detect_gpus
    detect = detect_gpus
    detect_gpus = lambda env=None, whole_node=False: gpus  # noqa: E731
    try:
        return sysconfig.load_file(path, prefix)
    finally:
        detect_gpus = detect


def submitted_to(config_dir, asked, hostname, gpus, which=None):
    """Where ReFrame's jobs go when none runs on this host: ``(['mycluster:
    gpu', ...], '')``, the partitions ReFrame would use (``asked``: its
    ``--system`` value ``SYSTEM`` or ``SYSTEM:PARTITION``, else the system
    whose ``hostnames`` match ``hostname``) when every one of them is
    scheduled by a batch system (Slurm: ``slurm`` / ``squeue``, ...) whose
    submit command (``sbatch``) is on PATH (``which``, default
    :func:`shutil.which`).  ``([], why)`` otherwise: one of them runs its
    jobs on this host (``local``; ``why`` empty), the submit command is
    not here (a laptop: ``why`` names it), or the system is not found
    (ReFrame itself says so).  ``gpus`` are the GPUs a system file that
    counts this host's sees."""
    import shutil
    which = which or shutil.which
    sysname, _, partname = (asked or '').partition(':')
    systems = []
    for _, path in sysconfig.system_files(config_dir):
        try:
            system = load_system_file(path, gpus,
                                      'ccl_health_where_jobs_go').system
        except Exception:          # ReFrame's own load names the error
            continue
        if isinstance(system, dict):
            systems.append(system)
    if sysname:
        system = next((s for s in systems if s.get('name') == sysname), None)
    else:
        try:
            system = sysconfig.system_of_host(systems, hostname)
        except re.error:
            system = None
    if system is None:
        return [], ''
    parts = [p for p in system.get('partitions') or []
             if not partname or p.get('name') == partname]
    scheds = {p.get('scheduler', 'local') for p in parts}
    if not parts or scheds & set(sysconfig.HERE_SCHEDULERS):
        return [], ''
    names = [f'{system["name"]}:{p.get("name")}' for p in parts]
    submit = sysconfig.SUBMIT_COMMAND
    missing = sorted({submit[s] for s in scheds
                      if s in submit and not which(submit[s])})
    if missing:
        return [], (f'{", ".join(names)} submits with {", ".join(missing)}, '
                    f'which is not on PATH here')
    return names, ''
