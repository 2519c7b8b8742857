"""The transport asked for: one rule (ccl_health.sitedata.transports.
asked_from_env), and its former three copies (the transport proof of a
debug log, the framework tool, the rehearsal's stand-in) agree on every
value of NCCL_NET_GDR_LEVEL, with NCCL's own meaning as the oracle.

The oracle, from NVIDIA/nccl 2.30.7 (commit 5067397c):
* src/graph/paths.cc:244-279, ``ncclGetLevel``: the value is compared with
  ``topoPathTypeStr`` by ``strcmp`` (exact case); else, when it starts with
  a digit, it is the old numbering read by ``strtol(str, NULL, 0)``,
  clamped to 5, mapped by ``levelsOldToNew`` (paths.cc:243:
  LOC, PIX, PXB, PHB, SYS, SYS); anything else leaves NCCL's default.
* src/graph/topo.cc:34 and src/include/graph.h:117-145: the names and
  their order, LOC 0 < NVL < NVB < C2C < PIX < PXB < P2C < PXN < PHB < SYS.
* src/graph/paths.cc:511-528, ``ncclTopoCheckGdr``: the default is PXB
  (P2C on C2C systems); GPUDirect RDMA is disabled on a GPU-NIC path whose
  distance is above the level.  A GPU and a NIC are never the same device,
  so LOC (0) disables it on every path: LOC never asks for GDR; unset or
  unread, the topology decides (no ask).
"""

import argparse
import os
import subprocess
import sys

import pytest

from conftest import REPO
from ccl_health.evidence import debuglog
from ccl_health.evidence import proof
from ccl_health.sitedata import transports
from ccl_health.torch_bench import output

STANDIN = os.path.join(REPO, 'ccl_health', 'rehearsal', 'standin.py')

#: the value -> (the level NCCL reads, or None: its default; GDR asked),
#: written from the source cited above, not from the suite's code
UNSET = object()
ORACLE = [
    ('0', 'LOC', False),           # old numbering 0 = PATH_LOC
    ('LOC', 'LOC', False),
    ('PIX', 'PIX', True),
    ('PXB', 'PXB', True),
    ('PHB', 'PHB', True),
    ('SYS', 'SYS', True),
    ('1', 'PIX', True),
    ('2', 'PXB', True),
    ('3', 'PHB', True),            # the GPUDirect row of site/frontier.yaml
    ('4', 'SYS', True),
    ('5', 'SYS', True),
    ('9', 'SYS', True),            # clamped to 5
    ('0x3', 'PHB', True),          # strtol base 0: hexadecimal
    ('010', 'SYS', True),          # ... and octal: 8, clamped
    ('3abc', 'PHB', True),         # strtol stops at the first non-digit
    ('NVL', 'NVL', True),          # a name NCCL reads, not LOC
    ('P2C', 'P2C', True),
    (UNSET, None, False),          # NCCL's default: the topology decides
    ('', None, False),
    ('junk', None, False),
    ('loc', None, False),          # strcmp: another case is not read ...
    ('phb', None, False),          # ... and leaves the default: no ask
    (' 3', None, False),           # not a leading digit
    ('-1', None, False),
]
IDS = ['unset' if v is UNSET else repr(v) for v, _, _ in ORACLE]


@pytest.mark.parametrize('value,level,asked', ORACLE, ids=IDS)
def test_the_level_nccl_reads(value, level, asked):
    assert transports.gdr_level(None if value is UNSET else value) == level


def plugin_env(value):
    env = {'NCCL_P2P_DISABLE': '1', 'NCCL_SHM_DISABLE': '1',
           'NCCL_NET_PLUGIN': '/x/libnccl-net-ofi.so'}
    if value is not UNSET:
        env['NCCL_NET_GDR_LEVEL'] = value
    return env


def from_proof(value):
    """The transport proof's ask: what a debug log that echoes the
    environment says."""
    lines = [f'n0:10:10 [0] NCCL INFO {k} set by environment to {v}'
             for k, v in plugin_env(value).items()]
    return proof.asked_from_log(debuglog.evidence_from_text(
        '\n'.join(lines)))


class _Dist:
    """What the framework tool's document reads of its process."""
    arch, local_size, world, launcher, gpu = 'sm_90', 2, 2, 'none', 'x'

    class device:
        index = 0

    def gather_strings(self, s):
        return [s]

    def versions(self):
        return {}


def from_torch_bench(value, monkeypatch):
    """The framework tool's ask: the transport of its JSON document when
    no --transport is given."""
    for k in list(os.environ):
        if k.startswith('NCCL_'):
            monkeypatch.delenv(k)
    for k, v in plugin_env(value).items():
        monkeypatch.setenv(k, v)
    args = argparse.Namespace(transport=None, ideal_busbw=1.0)
    return output.common_doc(_Dist(), 'bandwidth', args)[0]['transport']


def from_standin(value, tmp_path, *python):
    """The rehearsal's stand-in's ask: the capture it replays."""
    caps = tmp_path / 'captures'
    for name in transports.NAMES:
        (caps / name).mkdir(parents=True, exist_ok=True)
        (caps / name / 'stdout.txt').write_text(f'replayed {name}\n')
        (caps / name / 'rc.txt').write_text('rc=0\n')
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('NCCL_', 'CCL_HEALTH_'))}
    env.update(plugin_env(value), CCL_HEALTH_REPLAY_DIR=str(caps))
    p = subprocess.run([*(python or [sys.executable]), STANDIN], env=env,
                       cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()[-1]


@pytest.mark.parametrize('value,level,asked', ORACLE, ids=IDS)
def test_the_former_three_copies_agree_with_nccl(value, level, asked,
                                                 monkeypatch, tmp_path):
    want = 'net-plugin-gdr' if asked else 'net-plugin'
    got = {'proof': from_proof(value),
           'torch_bench': from_torch_bench(value, monkeypatch),
           'standin': from_standin(value, tmp_path)}
    assert got == dict.fromkeys(got, want)
    assert transports.asked_from_env(plugin_env(value)) == want


def test_the_standin_finds_the_rule_without_the_package_installed(tmp_path):
    """Run from the source tree by a Python that has not the package on its
    path (``-S``: no site packages, no .pth), as ``tests/replay/bin``
    runs it."""
    assert from_standin('PHB', tmp_path, sys.executable, '-S') == \
        'net-plugin-gdr'


def test_the_rule_of_the_other_transports():
    ask = transports.asked_from_env
    assert ask({}) == 'intra'                  # P2P kept: one node's GPUs
    assert ask({'NCCL_P2P_DISABLE': '1'}) == 'net-socket'
    assert ask({'NCCL_P2P_DISABLE': '1', 'NCCL_NET_PLUGIN': 'none',
                'NCCL_NET': 'IB'}) == 'net-ib'
    assert ask({'NCCL_P2P_DISABLE': '1', 'NCCL_NET': 'socket',
                'NCCL_NET_PLUGIN': '/x/lib.so'}) == 'net-socket'
    assert ask({'NCCL_P2P_DISABLE': '1', 'NCCL_NET': 'AWS Libfabric',
                'NCCL_NET_GDR_LEVEL': '3'}) == 'net-plugin-gdr'
    # a debug log's echo says only what it echoes
    assert ask({}, complete=False) is None
    assert ask({'NCCL_NET_GDR_LEVEL': 'PHB'}, complete=False) is None
    assert ask({'NCCL_IB_DISABLE': '1', 'NCCL_P2P_DISABLE': '1',
                'NCCL_SHM_DISABLE': '1'}, complete=False) == 'net-socket'
    assert ask({}, complete=False, plugin='libnccl-net-ofi.so') == \
        'net-plugin'
