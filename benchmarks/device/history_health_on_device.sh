#!/usr/bin/env bash
# Proofs on the GPU device (2x H200), from a clean copy of the repo:
#  A. performance database + history: 20 healthy intra sweeps, then real
#     degradations (NCCL_MAX_NCHANNELS=4, NCCL_PROTO=LL); detection judged
#     leave-one-out; the HTML report
#  B. node health hook: 20 healthy repeats (wall time), real faults
#  C. framework-level checks (torch.distributed), if present
# Usage (repo root on the device, .whl and .mirror carried):
#   bash benchmarks/device/history_health_on_device.sh <out-dir>
set -u
source "$(dirname "$0")/_clean_copy.sh" "$1" /tmp/hist.db
save() { cp /tmp/hist.db $K/ 2>/dev/null; cp -r /tmp/report $K/ 2>/dev/null
         tar -C /tmp -czf "$OUT1/proof-outputs.tgz" keep; }
T() { timed_step $K/logs/timings.txt "$@"; }
SWEEP=(-n 'AllReduceSweep%transport=intra' -S min_size=1M -S max_size=1G -S iters=10 -S warmup_iters=2)

# --- A. history -------------------------------------------------------------
T scripts/run --output /tmp/o-build -- "${SWEEP[@]}" > $K/logs/build-and-first.log 2>&1
for i in $(seq -w 1 20); do
  CCL_HEALTH_RUN_ID=healthy-$i T scripts/run --output /tmp/o-h -- "${SWEEP[@]}" > $K/logs/healthy-$i.log 2>&1
done
CCL_HEALTH_RUN_ID=degraded-nchannels4 T scripts/run --output /tmp/o-d1 -- "${SWEEP[@]}" -S extra_env=NCCL_MAX_NCHANNELS:4 > $K/logs/degraded-nchannels4.log 2>&1
CCL_HEALTH_RUN_ID=degraded-proto-ll T scripts/run --output /tmp/o-d2 -- "${SWEEP[@]}" -S extra_env=NCCL_PROTO:LL > $K/logs/degraded-proto-ll.log 2>&1
cp -r /tmp/o-d1/reports $K/reports-d1; cp -r /tmp/o-h/reports $K/reports-healthy
.venv/bin/python benchmarks/history_proof.py --db /tmp/hist.db --degraded degraded-nchannels4,degraded-proto-ll --json $K/history-proof.json > $K/history-proof.txt 2>&1
.venv/bin/python -m ccl_health.cli db detect > $K/detect.txt 2>&1
.venv/bin/python -m ccl_health.cli db --db /tmp/hist.db report --out /tmp/report > $K/report.txt 2>&1
.venv/bin/python -m ccl_health.cli db failed --hours 2 > $K/failed.txt 2>&1
.venv/bin/python -m ccl_health.cli db since intra --size 1G > $K/since.txt 2>&1
.venv/bin/python -m ccl_health.cli db compare healthy-20 degraded-nchannels4 > $K/compare.txt 2>&1
save

# --- B. health hook ---------------------------------------------------------
export CCL_HEALTH_DB=/tmp/health.db
H=scripts/ccl-health-check
for i in $(seq -w 1 20); do
  T $H --json $K/logs/health-$i.json >> $K/health-healthy.txt 2>&1
done
NCCL_P2P_DISABLE=1 T $H > $K/health-fault-p2p-disabled.txt 2>&1
NCCL_MAX_NCHANNELS=1 T $H > $K/health-fault-1channel.txt 2>&1
CUDA_VISIBLE_DEVICES=0 T $H > $K/health-fault-missing-gpu.txt 2>&1
# a dead peer: rank 1 stops itself before NCCL starts, rank 0 waits forever
real=$(ls -d /tmp/ccl-cache/nccl-tests-*/bin | head -1)
mkdir -p /tmp/hangbin/bin
printf '#!/bin/bash\nif [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then kill -STOP $$; fi\nexec %s/all_reduce_perf "$@"\n' "$real" > /tmp/hangbin/bin/all_reduce_perf
chmod +x /tmp/hangbin/bin/all_reduce_perf
T $H --limit 15 --tests-prefix /tmp/hangbin > $K/health-fault-hang.txt 2>&1
pkill -CONT -f hangbin; pkill -KILL -f hangbin
mkdir -p /tmp/nobin/bin; T $H --tests-prefix /tmp/nobin > $K/health-fault-missing-binary.txt 2>&1
echo "exit codes:" >> $K/health-faults-rc.txt; tail -n 6 $K/logs/timings.txt >> $K/health-faults-rc.txt
cp /tmp/health.db $K/
save

# --- C. framework-level checks ----------------------------------------------
if [ -f benchmarks/device/framework_on_device.sh ]; then
  timeout 200 bash benchmarks/device/framework_on_device.sh $K/framework > $K/logs/framework.log 2>&1
fi
save
cat $K/logs/timings.txt
