"""The PCIe links of the node's GPUs and of the NICs near them, and their
AER error counters, read from sysfs (``<root>/bus/pci/devices/*``;
``CCL_HEALTH_SYSFS`` names another root: :func:`ccl_health.evidence.
nodestate.pci.root_of`).

Per device (``{address: {...}}``, what :attr:`NodeState.pci
<ccl_health.evidence.nodestate.nodedata.NodeState.pci>` keeps):

* ``role``: ``gpu`` (:func:`ccl_health.evidence.nodestate.pci.gpus`) or
  ``nic``: a network or InfiniBand controller (class ``0x0200`` /
  ``0x0207``) of the makers whose NICs NCCL's network plugins drive
  (:data:`NIC_VENDORS`) under the same PCIe root complex as a GPU (NCCL's
  PIX / PXB / PHB: the ones it pairs with a GPU);
* ``speed`` / ``width``: the link as trained now (``current_link_speed``,
  ``current_link_width``); ``max_speed`` / ``max_width``: the most BOTH ends
  support, the smaller of the device's ``max_link_speed`` /
  ``max_link_width`` and those of its upstream port (the bridge above it in
  the device tree): a link narrower than that trained down;
* ``aer_fatal`` / ``aer_nonfatal``: the kernel's AER counters of the device
  (``aer_dev_fatal``, ``aer_dev_nonfatal``), ``{name: count}`` with the
  total as ``TOTAL_ERR_FATAL`` / ``TOTAL_ERR_NONFATAL``; absent where the
  kernel has no AER for it; ``upstream_aer_fatal`` / ``upstream_aer_nonfatal``
  the same of its upstream port (the kernel counts an error "as seen by"
  a device: what a GPU sends wrong may count at the port above it).

The formats are the kernel's: ``drivers/pci/pci-sysfs.c`` writes the
speeds with ``pci_speed_string()`` (``"8.0 GT/s PCIe"``, ``"16.0 GT/s
PCIe"``, ``"Unknown"``; kernels before 5.x ``"8 GT/s"``, ``"Unknown
speed"``) and the widths as ``"%u\\n"``; ``drivers/pci/pcie/aer.c``'s
``aer_stats_dev_attr`` writes one ``"<name> <count>"`` line per error bit
with a name (``DLP``, ``CmpltTO``, ...), ``"dev_fatal_errs_bit[<n>]
<count>"`` for an unnamed bit that counted, then ``"TOTAL_ERR_FATAL
<count>"`` (``TOTAL_ERR_NONFATAL``).  What these facts mean is
:mod:`.diagnose`'s."""

import os
import re

from ccl_health.evidence.nodestate import pci

#: NIC makers whose adapters NCCL's network transports use: NVIDIA
#: Networking (Mellanox) ConnectX / BlueField, HPE (Cray) Slingshot
#: Cassini, Broadcom (Thor RoCE NICs), Amazon EFA
NIC_VENDORS = {0x15b3: 'Mellanox', 0x17db: 'Cray', 0x14e4: 'Broadcom',
               0x1d0f: 'Amazon'}
#: Ethernet and InfiniBand controllers (class and subclass)
NIC_CLASSES = (0x0200, 0x0207)
ADDRESS = re.compile(r'^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')
ROOT_COMPLEX = re.compile(r'^pci[0-9a-f]{4,}:[0-9a-f]{2}$')
SPEED = re.compile(r'^\s*(\d+(?:\.\d+)?)\s*GT/s')
AER_LINE = re.compile(r'^(\S+)\s+(\d+)$')


def parse_speed(text):
    """GT/s of a ``*_link_speed`` file (``"32.0 GT/s PCIe"``, ``"8 GT/s"``),
    None for ``"Unknown"`` / ``"Unknown speed"`` or anything else."""
    m = SPEED.match(text or '')
    return float(m.group(1)) if m else None


def parse_width(text):
    """Lanes of a ``*_link_width`` file (``"16"``; a leading ``x``
    accepted), None where it says nothing readable."""
    t = (text or '').strip().lower().lstrip('x')
    return int(t) if t.isdigit() else None


def parse_aer(text):
    """``{name: count}`` of an ``aer_dev_*`` file; None where it has no
    line of the kernel's form."""
    out = {}
    for line in (text or '').splitlines():
        m = AER_LINE.match(line.strip())
        if m:
            out[m.group(1)] = int(m.group(2))
    return out or None


def _read(path):
    try:
        with open(path) as fp:
            return fp.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _hex(path):
    text = _read(path)
    try:
        return int(text, 16) if text else None
    except ValueError:
        return None


def _smaller(*values):
    known = [v for v in values if v is not None]
    return min(known) if known else None


def generation(gts):
    """The PCIe generation of a speed in GT/s (2.5 -> 1 ... 64 -> 6)."""
    return {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}.get(gts)


def _where(base, addr):
    """``(root complex, upstream port address or None)`` of a device, from
    where its sysfs link points (``../../../devices/pci0000:17/0000:17:01.0/
    0000:18:00.0``)."""
    real = os.path.realpath(os.path.join(base, addr))
    parts = real.split(os.sep)
    rc = next((p for p in parts if ROOT_COMPLEX.match(p)), None)
    parent = parts[-2] if len(parts) > 1 else ''
    return rc, (parent if ADDRESS.match(parent) else None), \
        os.path.dirname(real)


def link(base, addr):
    """The link facts of one device (its ``role`` is the caller's)."""
    dev = os.path.join(base, addr)
    rc, up, up_dir = _where(base, addr)
    out = {'root': rc, 'upstream': up,
           'speed': parse_speed(_read(os.path.join(dev,
                                                   'current_link_speed'))),
           'width': parse_width(_read(os.path.join(dev,
                                                   'current_link_width')))}
    own_speed = parse_speed(_read(os.path.join(dev, 'max_link_speed')))
    own_width = parse_width(_read(os.path.join(dev, 'max_link_width')))
    up_speed = up_width = None
    if up:
        up_speed = parse_speed(_read(os.path.join(up_dir, 'max_link_speed')))
        up_width = parse_width(_read(os.path.join(up_dir, 'max_link_width')))
    out['max_speed'] = _smaller(own_speed, up_speed)
    out['max_width'] = _smaller(own_width, up_width)
    for name, key in (('aer_dev_fatal', 'aer_fatal'),
                      ('aer_dev_nonfatal', 'aer_nonfatal')):
        for where, prefix in ((dev, ''), (up_dir if up else None,
                                          'upstream_')):
            counts = parse_aer(_read(os.path.join(where, name))) \
                if where else None
            if counts is not None:
                out[prefix + key] = counts
    return out


def read(root=pci.DEFAULT_ROOT):
    """``{address: facts}`` of the GPUs on the PCI bus and the NICs under
    the same root complexes; None where the bus cannot be read (unknown,
    never "no link")."""
    base = os.path.join(root, 'bus', 'pci', 'devices')
    gpus = pci.gpus(root)
    if gpus is None:
        return None
    out = {}
    for addr, vendor in gpus:
        out[addr] = dict(link(base, addr), role='gpu', vendor=vendor)
    roots = {out[a]['root'] for a in out}
    try:
        addresses = sorted(os.listdir(base))
    except OSError:
        return out
    for addr in addresses:
        if addr in out:
            continue
        vendor = _hex(os.path.join(base, addr, 'vendor'))
        cls = _hex(os.path.join(base, addr, 'class'))
        if vendor not in NIC_VENDORS or cls is None or \
                cls >> 8 not in NIC_CLASSES:
            continue
        facts = link(base, addr)
        if facts['root'] in roots:
            out[addr] = dict(facts, role='nic', vendor=NIC_VENDORS[vendor])
    return out


def same_address(nvml_bus_id, address):
    """Whether NVML's bus id (``"00000000:18:00.0"``, upper case, 8-digit
    domain) and a sysfs address (``"0000:18:00.0"``) name one device."""
    a = (nvml_bus_id or '').strip().lower()
    if ':' not in a:
        return False
    dom, rest = a.split(':', 1)
    return f'{dom[-4:]}:{rest}' == address.lower()
