#!/usr/bin/env bash
# Issue 28 on ONE GPU, from a clean copy of the repo: the nightly's news
# against a real drift right after calibration, and after an acceptance.
# Two MPI ranks on GPU 0, each told it is another host (NCCL_HOSTID, set per
# rank by a wrapper: NCCL then connects them over NET/Socket), the sweep
# narrowed to the net-socket all_reduce at 64-256 MiB (-n 8 -w 2: ~8 s).
#  0. nccl-tests built from the carried mirror (scripts/run)
#  A. 2 nights without a reference of the case (its entry removed from a
#     copy of reference/: no-reference), then `scripts/calibrate --db` from
#     them (--tolerance net-socket=0.15)
#  B. 5 healthy nights
#  C. $DEG nights (default 4) with NCCL_BUFFSIZE=4063232 in the nightly's
#     environment (measured before: -11 % at 64 MiB, -6 % at 128 and 256 MiB
#     against a run-to-run noise of 0.1 %, tests/fixtures/device/drift-graded)
#  D. `scripts/report accept` of the last degraded night, `detect` before
#     and after, then one more degraded night
# Every night: its mail (stdout and stderr of scripts/nightly), its exit
# code, its night.json, the sweep's output, job script, case file and
# per-rank debug logs; the database, the published folder, the references,
# the timings: all in $OUT/news-outputs.tgz (saved after every night).
# A time budget (BUDGET s, default 450) stops starting nights before the
# call's limit.
# Usage (repo root on the device, .whl and .mirror carried):
#   bash benchmarks/device/news_on_device.sh <out-dir>
set -u
source "$(dirname "$0")/_clean_copy.sh" "$1"
START=$(date +%s)
BUDGET=${BUDGET:-450}
DEG=${DEG:-4}
L=$K/logs N=$K/nights
mkdir -p $N
DB=/tmp/news.db WWW=/tmp/www O=/tmp/o-news
save() { cp $DB $K/ 2>/dev/null; rm -rf $K/www $K/reference
         cp -r $WWW $K/www 2>/dev/null; cp -r /tmp/ref $K/reference 2>/dev/null
         tar -C /tmp -czf "$OUT1/news-outputs.tgz" keep; }
T() { timed_step $L/timings.txt "$@"; }
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
nvidia-smi -L > $L/nvidia-smi-L.txt 2>&1
sha256sum "$CCL_HEALTH_MIRROR"/* > $L/mirror-sha256.txt

# --- 0. nccl-tests from the mirror (the case itself cannot run here
# without the wrapper: two ranks of one GPU are one host to NCCL) ----------
CCL_HEALTH_ASSUME_GPUS=2:sm_90 T scripts/run --output /tmp/o-build -- \
  -n 'AllReduceSweep%transport=net-socket' -S min_size=1M -S max_size=1M \
  -S iters=1 -S warmup_iters=0 > $L/build.log 2>&1
real=$(ls -d /tmp/ccl-cache/nccl-tests-*/bin | head -1)
[ -x "$real/all_reduce_perf" ] || { echo "no nccl-tests build" >> $L/build.log; save; exit 1; }
pair_on_one_gpu "$real" /tmp/site .venv/bin/python
rm -rf /tmp/ref && cp -r reference /tmp/ref
.venv/bin/python - <<'EOF'
import yaml
# the case has no reference until calibration: its first nights are
# no-reference, and calibrate takes them
ref = yaml.safe_load(open('/tmp/ref/local.yaml'))
entries = ref['partitions']['gpu']['entries']
ref['partitions']['gpu']['entries'] = [
    e for e in entries if (e.get('transport'), e.get('collective'),
                           e.get('nodes'), e.get('gpus_per_node')) !=
    ('net-socket', 'all_reduce', 1, 2)]
assert len(ref['partitions']['gpu']['entries']) == len(entries) - 1
yaml.safe_dump(ref, open('/tmp/ref/local.yaml', 'w'), sort_keys=False)
EOF
export CCL_HEALTH_SITE_DIR=/tmp/site CCL_HEALTH_REFERENCE_DIR=/tmp/ref \
  CCL_HEALTH_ASSUME_GPUS=2:sm_90
unset CCL_HEALTH_DB NCCL_BUFFSIZE NCCL_NSOCKS_PERTHREAD
save

n=0
night() {  # label [VAR=VALUE ...]: one night, its mail and exit code kept
  local label=$1; shift
  [ "$(left)" -lt 45 ] && { echo "budget: $label not started" >> $N/exit-codes.txt; return 1; }
  n=$((n+1)); local name=$(printf 'night-%02d-%s' $n $label)
  ( for v in "$@"; do export "$v"; done
    T scripts/nightly --system local --partition gpu --db $DB \
      --publish $WWW --output $O --night $name -- \
      -n 'AllReduceSweep%transport=net-socket' -S min_size=64M \
      -S max_size=256M -S iters=8 -S warmup_iters=2 > $N/$name.mail 2>&1 )
  local rc=$?
  echo "$name rc=$rc [$*]" >> $N/exit-codes.txt
  mkdir -p $N/$name
  cp $WWW/nights/$name/night.json $WWW/nights/$name/run.log $N/$name/ 2>/dev/null
  for d in $O/output $O/stage; do
    find $d -path '*AllReduceSweep*' -type f \( -name 'rfm_job.*' -o \
      -name 'nccl-debug.*' -o -name 'ccl-health-case.json' \) \
      -exec cp {} $N/$name/ \; 2>/dev/null
  done
  save
}
run_of() {  # the run id of night $1
  .venv/bin/python -c "import json,sys; print(json.load(open(sys.argv[1]))['run_id'])" \
    $WWW/nights/$1/night.json
}

# --- A. two nights, then the calibration from them --------------------------
night first; night first
T scripts/calibrate --db $DB --system local --partition gpu \
  --reference-dir /tmp/ref --tolerance net-socket=0.15 --min-size 64M \
  > $L/calibrate.txt 2>&1
echo "scripts/calibrate exit: $?" >> $L/calibrate.txt
save
# --- B. five healthy nights ---------------------------------------------
for i in 1 2 3 4 5; do night healthy || break; done
# --- C. a real degradation of a few percent ------------------------------
for i in $(seq 1 $DEG); do night buff3875k NCCL_BUFFSIZE=4063232 || break; done
last=$(ls $WWW/nights | grep buff3875k | tail -1)
T scripts/report --db $DB detect > $L/detect-before-accept.txt 2>&1
echo "exit $?" >> $L/detect-before-accept.txt
# --- D. accept the new level, then one more degraded night ----------------
T scripts/report --db $DB accept "$(run_of $last)" \
  --reason "news_on_device: NCCL_BUFFSIZE=4063232 accepted" > $L/accept.txt 2>&1
echo "exit $?" >> $L/accept.txt
T scripts/report --db $DB detect > $L/detect-after-accept.txt 2>&1
echo "exit $?" >> $L/detect-after-accept.txt
night after-accept NCCL_BUFFSIZE=4063232
T scripts/report --db $DB runs > $L/runs.txt 2>&1
echo "done at $(( $(date +%s) - START )) s, $n nights" >> $L/timings.txt
save
cat $N/exit-codes.txt $L/timings.txt
