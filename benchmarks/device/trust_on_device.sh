#!/usr/bin/env bash
# Issue 11 on a GPU device (written for ONE GPU: the only kind lent when it
# ran), from a clean copy of the repo:
#  A. a build made to fail: the libfabric tarball in the carried mirror is
#     damaged (truncated), so the plugin cannot build: the plugin transports
#     are build-failed, the exit code is nonzero, `scripts/report failed`
#     lists them; nccl-tests builds for real
#  B. SIGTERM to `scripts/run` in the middle of a real net-socket sweep:
#     two ranks on the one GPU, each told it is another host (NCCL_HOSTID,
#     set per rank by a wrapper: NCCL then connects them over NET/Socket);
#     the case in flight recorded as aborted with what it measured, nothing
#     left running
#  C. the health hook: GPU UUID / MIG / index forms of CUDA_VISIBLE_DEVICES
#     against the real nvidia-smi, an unwritable --json path, bad limit
#     values (exit 2, one line)
#  D. real nccl-tests outputs of failures (out of memory, no device, a run
#     stopped midway, a complete run with -J), each with its exit code, and
#     `scripts/explain` on each
# Usage (repo root on the device, .whl and .mirror carried):
#   bash benchmarks/device/trust_on_device.sh <out-dir>
set -u
source "$(dirname "$0")/_clean_copy.sh" "$1"
L=$K/logs
save() { tar -C /tmp -czf "$OUT1/trust-outputs.tgz" keep; }
T() { timed_step $L/timings.txt "$@"; }
nvidia-smi -L > $L/nvidia-smi-L.txt 2>&1
nvidia-smi --query-gpu=index,uuid,name,pci.bus_id --format=csv > $L/nvidia-smi-uuid.csv 2>&1
sha256sum "$CCL_HEALTH_MIRROR"/* > $L/mirror-sha256.txt

# --- A. a build made to fail -----------------------------------------------
export CCL_HEALTH_DB=/tmp/a.db
T scripts/run --output /tmp/o-a > $L/a-build-failed.log 2>&1
echo "scripts/run exit: $?" >> $L/a-build-failed.log
T scripts/report --db /tmp/a.db failed > $L/a-report-failed.txt 2>&1
echo "scripts/report failed exit: $?" >> $L/a-report-failed.txt
T scripts/report --db /tmp/a.db runs > $L/a-report-runs.txt 2>&1
cp /tmp/a.db $K/
find /tmp/o-a/stage -name 'rfm_build.*' -path '*Libfabric*' -exec cp {} $L/ \; 2>/dev/null
cp /tmp/o-a/reports/run-*.json $K/a-run-report.json 2>/dev/null
save

# --- B. SIGTERM in the middle of a net-socket sweep ------------------------
real=$(ls -d /tmp/ccl-cache/nccl-tests-*/bin | head -1)
pair_on_one_gpu "$real" /tmp/site
export CCL_HEALTH_DB=/tmp/b.db
CCL_HEALTH_SITE_DIR=/tmp/site CCL_HEALTH_ASSUME_GPUS=2:sm_90 CCL_HEALTH_RUN_ID=sigterm-midway \
  scripts/run --output /tmp/o-b -- -n 'AllReduceSweep%transport=net-socket' \
  -S min_size=1M -S max_size=1G -S iters=20 > $L/b-sigterm.log 2>&1 &
RUNPID=$!
# wait until the sweep has printed some sizes, then stop it as Slurm would
for i in $(seq 1 120); do
  n=$(cat /tmp/o-b/stage/*/*/*/AllReduceSweep*/rfm_job.out 2>/dev/null | grep -cE '^ +[0-9]+ +[0-9]+ +float')
  [ "${n:-0}" -ge 4 ] && break; sleep 1
done
ps -eo pid,pgid,cmd | grep -E 'all_reduce_perf|mpirun|reframe' | grep -v grep > $L/b-before-sigterm-ps.txt
date +%s.%N > $L/b-sigterm-time.txt
kill -TERM $RUNPID
wait $RUNPID; echo "scripts/run exit after SIGTERM: $?" >> $L/b-sigterm.log
date +%s.%N >> $L/b-sigterm-time.txt
sleep 2
ps -eo pid,pgid,cmd | grep -E 'all_reduce_perf|mpirun|reframe' | grep -v grep > $L/b-after-sigterm-ps.txt
echo "processes left: $(wc -l < $L/b-after-sigterm-ps.txt)" >> $L/b-sigterm.log
.venv/bin/python - > $L/b-db.txt 2>&1 <<'EOF'
from ccl_health import store
with store.open_store('/tmp/b.db', readonly=True) as db:
    for c in db.cases():
        print(c['run_id'], c['case_name'], c['verdict'], c['reason'])
    for r in db.records():
        print(r['case_name'], r['size'], r['busbw'], r['size_verdict'])
EOF
cp /tmp/b.db $K/
mkdir -p $K/b-stage; cp /tmp/o-b/stage/*/*/*/AllReduceSweep*/{rfm_job.out,rfm_job.sh,ccl-health-case.json,nccl-debug.*} $K/b-stage/ 2>/dev/null
save

# --- B2. the same sweep to its end: a complete run, judged -----------------
export CCL_HEALTH_DB=/tmp/b2.db
CCL_HEALTH_SITE_DIR=/tmp/site CCL_HEALTH_ASSUME_GPUS=2:sm_90 CCL_HEALTH_RUN_ID=socket-complete \
  T scripts/run --output /tmp/o-b2 -- -n 'AllReduceSweep%transport=net-socket' \
  -S min_size=1M -S max_size=64M -S iters=10 > $L/b2-complete.log 2>&1
echo "scripts/run exit: $?" >> $L/b2-complete.log
cp /tmp/b2.db $K/; cp /tmp/o-b2/reports/run-*.json $K/b2-run-report.json 2>/dev/null
save

# --- C. the health hook -----------------------------------------------------
export CCL_HEALTH_DB=/tmp/c.db
H=scripts/ccl-health-check
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1 | tr -d ' ')
hook() { local name=$1; shift
  { echo "\$ $*"; T "$@"; echo "exit $?"; } > $L/c-$name.txt 2>&1; }
hook plain $H
hook uuid env CUDA_VISIBLE_DEVICES=$uuid $H
hook uuid-prefix env CUDA_VISIBLE_DEVICES=${uuid:0:12} $H
hook index env CUDA_VISIBLE_DEVICES=0 $H
hook unknown-uuid env CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000 $H
hook json-unwritable $H --json /nonexistent/dir/detail.json
hook limit-abc $H --limit abc
hook limit-env-abc env CCL_HEALTH_CHECK_LIMIT=abc $H
hook limit-negative $H --limit -5
hook repeats-zero $H --repeats 0
hook unknown-option $H --frobnicate
save

# --- D. real outputs of failures, and explain -----------------------------
cd /tmp/keep && mkdir -p d && cd d
run() { local name=$1; shift
  ( "$@" > $name.out 2>&1; echo "rc=$?" > $name.rc ); }
run ok-1rank-json $real/all_reduce_perf -g 1 -b 8 -e 64M -f 4 -n 5 -w 2 -J ok-1rank.json
run oom $real/all_reduce_perf -g 1 -b 200G -e 200G -n 1 -w 0
CUDA_VISIBLE_DEVICES= run no-device $real/all_reduce_perf -g 1 -b 8 -e 8
CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000 run bad-uuid $real/all_reduce_perf -g 1 -b 8 -e 8
# a run stopped midway (what a killed job leaves)
( $real/all_reduce_perf -g 1 -b 1M -e 8G -f 2 -n 200 -w 2 > stopped-midway.out 2>&1 & p=$!; sleep 6; kill -TERM $p; wait $p; echo "rc=$?" > stopped-midway.rc )
cd /tmp/clone
for f in /tmp/keep/d/*.out; do
  n=$(basename $f .out); rc=$(cut -d= -f2 /tmp/keep/d/$n.rc)
  { echo "\$ scripts/explain $n.out --exit-status $rc --system local --partition gpu"
    scripts/explain $f --exit-status $rc --system local --partition gpu; echo "exit $?"; } > $L/d-explain-$n.txt 2>&1
done
save
cat $L/timings.txt
