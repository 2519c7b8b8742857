"""Link facts: what the job's GPUs and NICs can carry, read on the node
(``nvidia-smi topo -m``, ``/sys/class/net``) or given on the command line.
The arithmetic (NVLink generation x links x per-link bandwidth, NIC line
rate / 8) is :mod:`ccl_health.evidence.collectives`'; this module only finds its
inputs."""

import os
import subprocess

from ccl_health.evidence import collectives as C
from ccl_health.sitedata import transports as registry


def _run(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return p.stdout if p.returncode == 0 else ''
    except (OSError, subprocess.TimeoutExpired):
        return ''


def nic_line_rate(env=None, sysfs='/sys/class/net'):
    """(Gb/s, interface) of the NIC NCCL's socket transport uses: the one
    ``NCCL_SOCKET_IFNAME`` names, else the fastest interface that is up
    (not loopback); (None, why) when the kernel does not say."""
    env = os.environ if env is None else env
    want = [i for i in (env.get('NCCL_SOCKET_IFNAME') or '').split(',')
            if i and not i.startswith('^')]
    try:
        names = sorted(os.listdir(sysfs))
    except OSError:
        return None, f'no {sysfs}'
    best = (None, 'no interface reports a speed')
    for name in names:
        if name == 'lo' or (want and not any(name.startswith(w.lstrip('='))
                                             for w in want)):
            continue
        try:
            with open(os.path.join(sysfs, name, 'speed')) as fp:
                mbps = int(fp.read().strip())
        except (OSError, ValueError):
            continue
        if mbps > 0 and (best[0] is None or mbps / 1000 > best[0]):
            best = (mbps / 1000.0, name)
    return best


def link_facts(transport, arch, local_size, args, env=None):
    """(ideal busbw GB/s or None, where it comes from)."""
    if getattr(args, 'ideal_busbw', None):
        return args.ideal_busbw, 'given (--ideal-busbw)'
    if registry.get(transport).ideal_from == registry.IDEAL_NVLINK:
        gen = args.nvlink_gen or C.nvlink_generation(arch)
        links, how = args.nvlink_links, '--nvlink-links'
        if not links:
            topo = C.parse_topo_nvlinks(_run(['nvidia-smi', 'topo', '-m']))
            visible = (env or os.environ).get('CUDA_VISIBLE_DEVICES')
            gpus = (range(local_size) if not visible and local_size > 1
                    else sorted({i for i, _ in topo}))
            links, how = C.nvlinks_per_gpu(topo, gpus), 'nvidia-smi topo -m'
        if not gen or not links:
            return None, (f'no NVLink known between the GPUs ({arch or "?"}'
                          f', {links or 0} links from {how})')
        return C.ideal_busbw(transport, nvlink_gen=gen,
                             nvlink_links=links), (
            f'NVLink {gen} x {links} links x {C.NVLINK_GBPS_PER_LINK[gen]:g} '
            f'GB/s per direction ({how})')
    gbps, nic = (args.nic_gbps, '--nic-gbps') if args.nic_gbps else \
        nic_line_rate(env)
    if not gbps:
        return None, f'NIC line rate unknown ({nic})'
    return C.ideal_busbw(transport, nic_gbps=gbps), (
        f'NIC line rate {gbps:g} Gb/s / 8 ({nic})')
