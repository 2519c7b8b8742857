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
  for o in /tmp/o-*; do
    [ -d "$o" ] || continue
    n=$(basename "$o"); mkdir -p "$K/$n"
    cp -r "$o/reports" "$K/$n/" 2>/dev/null
    (cd "$o" && find stage -type f \( -name '*.json' -o -name 'rfm_job.*' -o -name '*.csv' \) 2>/dev/null |
      grep -v Build_ | while read -r f; do mkdir -p "$K/$n/$(dirname "$f")"; cp "$f" "$K/$n/$f"; done)
    # one rank's NCCL debug log per test is enough as evidence
    (cd "$o" && for d in stage/*/*/*/*; do l=$(ls $d/nccl-debug.*.log 2>/dev/null | head -1); [ -n "$l" ] && mkdir -p "$K/$n/$d" && grep -E "NCCL version|via |Loaded net plugin|Selected provider|Using network" "$l" > "$K/$n/$d/nccl-debug-excerpt.log"; done) 2>/dev/null
  done
  cp /tmp/fw.db $K/ 2>/dev/null
  tar -C /tmp -czf "$OUT1/framework-outputs.tgz" keep
}
T() { local s; s=$(date +%s.%N); "$@"; local rc=$?
      python3 -c "import sys; print(f'wall {float(sys.argv[2])-float(sys.argv[1]):.1f} s, rc {sys.argv[3]}: {sys.argv[4]}')" \
        "$s" "$(date +%s.%N)" "$rc" "$*" | tee -a $K/logs/timings.txt; save; return $rc; }
T scripts/run --output /tmp/o-sweep -- -n 'AllReduceSweep%transport=intra' -S min_size=1M -S max_size=1G > $K/logs/sweep.log 2>&1
T scripts/run --output /tmp/o-coll --checks checks/collective_sweep.py -- -n 'CollectiveSweep%transport=intra' -S min_size=1M -S max_size=1G > $K/logs/collectives.log 2>&1
T timeout 240 scripts/run --output /tmp/o-torch --checks checks/framework_checks.py -- -n 'TorchBandwidth%transport=intra' -n 'TorchBandwidth%transport=net-socket' -n 'TorchFirstCall%transport=intra' -n MpiFirstCall -n 'TorchPatternReplay%transport=intra' -S max_size=256M > $K/logs/framework.log 2>&1
T scripts/run --output /tmp/o-health --checks checks/node_health.py > $K/logs/health-mode.log 2>&1
save
