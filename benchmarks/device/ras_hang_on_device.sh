#!/usr/bin/env bash
# Issue 44 on a 4-GPU device (nvidia-h200-x4, NCCL 2.28.3): a hang names
# its rank (NCCL's RAS asked before the processes are stopped), a crash
# names the first rank that exited.  One MPI rank per GPU, a bare
# all_reduce_perf (nccl-tests 2.19.6 from the carried mirror):
#   stop   rank 2 SIGSTOPped mid-sweep -> HANG naming rank 2, its GPU, pid
#   kill   rank 1 SIGKILLed mid-sweep  -> crash naming rank 1 (mpirun's words)
#   fleet  two "nodes" (NCCL_HOSTID per two ranks), rank 3 stopped -> the
#          fleet's pair step: HANG naming rank 3 and its node
#   hook   the health hook's probe (4 GPUs, --no-pairs), rank 2 stopped
#          10 s in -> UNHEALTHY hang naming rank 2 (the hook's own RAS port
#          and its share of --limit)
# One process of a job holds RAS's port; a stopped holder cannot answer
# (the reason then says RAS did not answer): each case stops the next rank
# where the one it wants holds the port (ss -ltnp), and records which.
# Everything (outputs, debug logs, RAS's answers as text and JSON, lines)
# goes to $OUT/ras-hang.tgz; $OUT/ras-summary.txt has one line per case
# (OK: the rank stopped or killed was named).  Bounded: each step has its
# timeout; the whole fits one call (~4 min).
# Usage (repo root on the device; .mirror and .whl carried):
#   bash benchmarks/device/ras_hang_on_device.sh "$OUT"
set -u
source "$(dirname "$0")/_clean_copy.sh" "${1:-${OUT:-/tmp/out}}"
L=$K/logs
S=$OUT1/ras-summary.txt
: > "$S"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
save() { tar -C /tmp -czf "$OUT1/ras-hang.tgz" keep 2>/dev/null; }
note() { echo "$*" | tee -a "$S"; }
trap save EXIT
{ nvidia-smi -L; nvidia-smi topo -m; echo "NCCL_VERSION=${NCCL_VERSION:-?}"; nproc; date -u
  git -C "$SRC" rev-parse HEAD; } > $L/machine.txt 2>&1
wheels_to_site

# nccl-tests with MPI, one rank per GPU
W=/tmp/ras-build; rm -rf $W; mkdir -p $W
tar -C $W -xzf "$CCL_HEALTH_MIRROR/nccl-tests-2.19.6.tar.gz"
s=$(date +%s)
timeout 300 make -C $W/nccl-tests-2.19.6 -j"$(nproc)" MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > $L/build.log 2>&1
note "build rc=$? $(( $(date +%s)-s )) s"
B=$W/nccl-tests-2.19.6/build
[ -x $B/all_reduce_perf ] || { note "no all_reduce_perf: see logs/build.log"; exit 1; }

# stop / kill / fleet: the bare sweep, judged by the suite's own assembler
s=$(date +%s)
timeout 420 python3 benchmarks/device/_ras_cases.py $B $K 2> $L/cases.err | tee $L/cases.out
note "cases rc=${PIPESTATUS[0]} $(( $(date +%s)-s )) s"
grep -P '^(stop|kill|fleet)\t' $L/cases.out >> "$S"
save

# what the cases left running (a stopped job's other ranks) is no part of
# the hook's case: it would be named as a leftover process
pkill -9 -f all_reduce_perf 2>/dev/null; sleep 2
nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv > $L/before-hook.txt 2>&1

# hook: the probe's rank 2 (3 where 2 holds RAS's port) stopped 10 s in
# (benchmarks/device/_ras_hook_wrap.sh as the prefix's all_reduce_perf)
P=/tmp/ras-prefix; rm -rf $P /tmp/ras-hookpids; mkdir -p $P/bin /tmp/ras-hookpids
cp benchmarks/device/_ras_hook_wrap.sh $P/bin/all_reduce_perf; chmod +x $P/bin/all_reduce_perf
s=$(date +%s)
RAS_DEV_REAL=$B/all_reduce_perf RAS_DEV_PIDS=/tmp/ras-hookpids RAS_DEV_KEEP=$K \
timeout -s KILL 120 python3 -m ccl_health.hook --tests-prefix $P --no-record --no-pairs \
  --repeats 1 --iters 4000 --limit 60 --launcher "mpirun --allow-run-as-root --bind-to none -np" \
  --evidence-dir $K/hook-evidence --json $K/hook.json > $K/hook.line 2> $L/hook.err
rc=$?
note "hook rc=$rc $(( $(date +%s)-s )) s: $(cat $K/hook.line)"
stopped=$(cat $K/hook-stopped.txt 2>/dev/null)
read -r _ _ v _ pid _ <<< "$stopped"
# the line is cut at 256 characters (NHC, scontrol): the whole reason is
# in --json
if [ -n "${pid:-}" ] && grep -q "rank $v (.*GPU $v, pid $pid)" $K/hook.line &&
    grep -q "rank $v (.*GPU $v, pid $pid) unresponsive" $K/hook.json; then
  note "hook	OK	names rank $v pid $pid ($stopped)"
else
  note "hook	NOT OK	($stopped)"
fi
save
cat "$S"
