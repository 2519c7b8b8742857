#!/usr/bin/env bash
# Issue 7 and the health mode on the GPU device (2x H200), through ReFrame
# and the main command, from a clean copy of the repo:
#  torch.distributed bandwidth (intra + net-socket), time to first
#  collective (torch+NCCL, mpi4py), pattern replay, every nccl-tests
#  collective (intra), and the node health check as a ReFrame test.
# Usage (repo root on the device, .whl and .mirror carried):
#   bash benchmarks/device/framework_on_device.sh <out-dir>
set -u
source "$(dirname "$0")/_clean_copy.sh" "$1" /tmp/fw.db
save() {
  keep_stages
  cp /tmp/fw.db $K/ 2>/dev/null
  tar -C /tmp -czf "$OUT1/framework-outputs.tgz" keep
}
T() { timed_step $K/logs/timings.txt "$@"; local rc=$?; save; return $rc; }
T scripts/run --output /tmp/o-sweep -- -n 'AllReduceSweep%transport=intra' -S min_size=1M -S max_size=1G > $K/logs/sweep.log 2>&1
T scripts/run --output /tmp/o-coll --checks checks/collective_sweep.py -- -n 'CollectiveSweep%transport=intra' -S min_size=1M -S max_size=1G > $K/logs/collectives.log 2>&1
T timeout 240 scripts/run --output /tmp/o-torch --checks checks/framework_checks.py -- -n 'TorchBandwidth%transport=intra' -n 'TorchBandwidth%transport=net-socket' -n 'TorchFirstCall%transport=intra' -n MpiFirstCall -n 'TorchPatternReplay%transport=intra' -S max_size=256M > $K/logs/framework.log 2>&1
T scripts/run --output /tmp/o-health --checks checks/node_health.py > $K/logs/health-mode.log 2>&1
save
