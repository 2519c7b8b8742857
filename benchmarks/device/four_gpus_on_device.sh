#!/usr/bin/env bash
# Issue 8 on a 4-GPU device (nvidia-h200-x4), the short version that fits a
# few minutes: the intra sweep (one rank per GPU), the health hook with its
# pair check, the bare nccl-tests comparison, a 1x4 reference.  The plugin
# and libfabric are not built (intra only).
# Usage (repo root on the device, .whl and .mirror carried):
#   bash benchmarks/device/four_gpus_on_device.sh <out-dir>
set -u
source "$(dirname "$0")/_clean_copy.sh" "$1" /tmp/x4.db
mkdir -p /tmp/site /tmp/none/lib
python3 - <<'PY'
import yaml
d = yaml.safe_load(open('site/local.yaml'))
d['build']['libfabric']['prefix'] = '/tmp/none'
d['build']['plugin']['prefix'] = '/tmp/none'
yaml.safe_dump(d, open('/tmp/site/local.yaml', 'w'))
PY
export CCL_HEALTH_SITE_DIR=/tmp/site
save() { cp -r /tmp/o4/reports /tmp/o4/perflogs $K/ 2>/dev/null
  (cd /tmp/o4 2>/dev/null && find stage -name 'result.json' -o -name 'rfm_job.*' | grep -v Build_ | while read -r f; do mkdir -p "$K/$(dirname "$f")"; cp "$f" "$K/$f"; done)
  cp /tmp/x4.db $K/ 2>/dev/null; tar -C /tmp -czf "$OUT1/x4-outputs.tgz" keep; }
{ nvidia-smi -L; nvidia-smi topo -m; } > $K/logs/node.txt 2>&1
s=$(date +%s); scripts/run --output /tmp/o4 -- -n 'AllReduceSweep%transport=intra' > $K/logs/sweep.log 2>&1; echo "sweep rc=$? $(( $(date +%s)-s )) s" | tee -a $K/logs/timings.txt
save
s=$(date +%s); scripts/ccl-health-check --json $K/health.json > $K/logs/health.txt 2>&1; echo "health rc=$? $(( $(date +%s)-s )) s" | tee -a $K/logs/timings.txt
save
timeout 60 .venv/bin/python benchmarks/harness_overhead.py /tmp/o4 --json $K/overhead.json > $K/logs/overhead.txt 2>&1
cp -r reference /tmp/refcal; .venv/bin/python -m ccl_health.cli calibrate --reference-dir /tmp/refcal --report /tmp/o4/reports/run-*.json --tolerance intra=0.1 --source "ccl-health on nvidia-h200-x4, $(date -u +%F): benchmarks/device/four_gpus_on_device.sh" > $K/logs/calibrate.log 2>&1; cp /tmp/refcal/local.yaml $K/calibrated-local.yaml
save
sed -n '/== ccl-health verdict ==/,$p' $K/logs/sweep.log; cat $K/logs/health.txt $K/logs/overhead.txt $K/logs/calibrate.log $K/logs/timings.txt
