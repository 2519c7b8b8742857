#!/usr/bin/env bash
# The spine proven on a GPU node (the device), from a clean copy of the repo:
#  1. the README's main command (build everything + sweep all transports)
#  2. again with nothing changed: the builds must come from the cache
#  3. harness overhead: suite vs bare nccl-tests, same node, same sizes
#  4. calibrate a reference from the healthy run
#  5. real failures: plugin library not found (fallback), a time limit too
#     short for the sweep (hang), plain FI_PROVIDER=tcp; each recorded
# Usage (repo root on the device, .whl and .mirror carried):
#   bash benchmarks/device/suite_on_device.sh <out-dir>
set -u
OUT1=$(realpath -m "$1"); mkdir -p "$OUT1"
# at most 8 files come back from the device: everything goes into one tarball
OUTDIR=/tmp/keep/logs; rm -rf /tmp/keep; mkdir -p "$OUTDIR"
SRC=$(pwd)
source "$(dirname "$0")/_steps.sh"
export CCL_HEALTH_WHEELS=$SRC/.whl CCL_HEALTH_MIRROR=$SRC/.mirror
export CCL_HEALTH_CACHE=/tmp/ccl-cache PYTHONUNBUFFERED=1
rm -rf /tmp/clone && mkdir /tmp/clone
tar -C "$SRC" --exclude=./.whl --exclude=./.mirror -cf - . | tar -C /tmp/clone -xf -
cd /tmp/clone
save() {   # reports, perflogs, results.db, stage files (no binaries) -> tarball
  for o in /tmp/o-*; do
    [ -d "$o" ] || continue
    n=$(basename "$o"); mkdir -p "/tmp/keep/$n"
    cp -r "$o/reports" "$o/perflogs" "$o/results.db" "/tmp/keep/$n/" 2>/dev/null
    (cd "$o" && find stage output -type f \( -name '*.json' -o -name '*.log' -o -name 'rfm_*' -o -name '*.sh' \) 2>/dev/null |
      while read -r f; do mkdir -p "/tmp/keep/$n/$(dirname "$f")"; cp "$f" "/tmp/keep/$n/$f"; done)
  done
  find /tmp/ccl-cache -maxdepth 2 -name 'ccl-health-recipe.json' 2>/dev/null | while read -r f; do
    d=/tmp/keep/cache/$(basename "$(dirname "$f")"); mkdir -p "$d"; cp "$f" "$d/"; done
  tar -C /tmp -czf "$OUT1/suite-outputs.tgz" keep
  cp "$OUTDIR/timings.txt" "$OUT1/" 2>/dev/null
}
t() { timed_step "$OUTDIR/timings.txt" "$@"; local rc=$?; save; return $rc; }
t scripts/run --output /tmp/o-main > "$OUTDIR/main.log" 2>&1
cp "$OUTDIR/main.log" "$OUT1/"
t scripts/run --output /tmp/o-cached -- -n 'AllReduceSweep%transport=intra' -S max_size=64M > "$OUTDIR/cached.log" 2>&1
t timeout 200 .venv/bin/python benchmarks/harness_overhead.py /tmp/o-main --json "$OUTDIR/overhead.json" > "$OUTDIR/overhead.txt" 2>&1
cp "$OUTDIR/overhead.txt" "$OUT1/"
cp -r reference /tmp/ref-cal
t scripts/calibrate --reference-dir /tmp/ref-cal --report /tmp/o-main/reports/run-*.json --tolerance intra=0.1 --tolerance net-socket=0.35 --tolerance net-plugin=0.35 --source "ccl-health suite run on nvidia-h200-x2, $(date -u +%F)" > "$OUTDIR/calibrate.log" 2>&1
cp /tmp/ref-cal/local.yaml "$OUT1/calibrated-local.yaml"
t scripts/run --output /tmp/o-fallback -- -n 'AllReducePluginSweep%transport=net-plugin%' -S 'extra_env=NCCL_NET_PLUGIN:/nonexistent/libnccl-net-ofi.so' -S max_size=64M > "$OUTDIR/fail-fallback.log" 2>&1
t scripts/run --output /tmp/o-hang -- -n 'AllReduceSweep%transport=net-socket' -S time_limit=20s > "$OUTDIR/fail-timelimit.log" 2>&1
t scripts/run --output /tmp/o-tcp -- -n 'AllReducePluginSweep%transport=net-plugin%' -S 'extra_env=FI_PROVIDER:tcp' -S max_size=256M -S time_limit=60s > "$OUTDIR/fail-tcp.log" 2>&1
save
