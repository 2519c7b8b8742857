"""The GPUs on this node's PCI bus, read from sysfs
(``<root>/bus/pci/devices/*/{vendor,class}``), whatever the driver says.

A GPU is a device of NVIDIA (vendor ``0x10de``) or AMD (``0x1002``) whose
class is one its driver binds to:

* NVIDIA's ``nv_pci_table`` (open-gpu-kernel-modules, kernel-open/nvidia/
  nv-pci-table.c): VGA ``0x0300`` and 3D controller ``0x0302``;
* amdgpu's ``pciidlist`` (drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c): VGA
  ``0x0300``, display other ``0x0380`` (MI100 / MI200) and processing
  accelerator ``0x1200`` (MI300).

``CCL_HEALTH_SYSFS`` names another root than ``/sys`` (tests)."""

import os

VENDORS = {0x10de: 'nvidia', 0x1002: 'amd'}
#: class and subclass (the class file's top 16 of 24 bits) per vendor
GPU_CLASSES = {'nvidia': (0x0300, 0x0302), 'amd': (0x0300, 0x0380, 0x1200)}
DEFAULT_ROOT = '/sys'


def root_of(environ):
    return environ.get('CCL_HEALTH_SYSFS') or DEFAULT_ROOT


def _hex(path):
    with open(path) as fp:
        return int(fp.read().strip(), 16)


def gpus(root=DEFAULT_ROOT):
    """``[(address, vendor)]`` of the GPUs on the PCI bus; None where the
    bus cannot be read (no sysfs, a container without it): unknown, never
    "no GPU"."""
    base = os.path.join(root, 'bus', 'pci', 'devices')
    try:
        addresses = sorted(os.listdir(base))
    except OSError:
        return None
    found = []
    for addr in addresses:
        try:
            vendor = VENDORS.get(_hex(os.path.join(base, addr, 'vendor')))
            cls = _hex(os.path.join(base, addr, 'class')) >> 8
        except (OSError, ValueError):
            continue
        if vendor and cls in GPU_CLASSES[vendor]:
            found.append((addr, vendor))
    return found
