#!/usr/bin/env bash
# The health hook's wall time as NHC runs it (issue 42), from a clean copy
# of the repository, with one command (repo root on the device):
#   bash benchmarks/device/hook_timing.sh "$OUT"
# Carried (optional): .whl (the offline wheels: jsonschema, ruamel.yaml,
# nvidia-ml-py, as the other device scripts), .mirror/nccl-tests-2.19.6.tar.gz
# (then the old path, all_reduce_perf and ccl-health-links apart, is timed
# too).
#  1. builds ccl-health-links and ccl-health-probe (builders/src/
#     ccl_health_links.cu, the flags of builders/nccl_tests.py's links and
#     probe steps) into /tmp/prefix/bin, for this GPU's architecture;
#     nccl-tests from the mirror into /tmp/old (with ccl-health-links only)
#  2. the site's references as docs/sites.md says a site writes them where
#     the shipped ones lack this node's key: peer_copy from a healthy run of
#     ccl-health-links, an all_reduce entry at 1 GiB for each GPU count from
#     one probe run (half of what was measured: a healthy node passes; the
#     timing does not depend on the value; `scripts/calibrate` from a full
#     `scripts/run` is the documented way, ~4 min, not done here)
#  3. the hook 10 times (RUNS) per GPU set, in an empty environment (env -i),
#     recording into a SQLite database (--db: the record included): 1 GPU
#     (CUDA_VISIBLE_DEVICES=0), 2 (0,1) and every GPU where there are more
#     (a part of the node's GPUs with --expect-gpus: its count);
#     the one probe process, then the old path where it was built
#  4. ccl-health-probe alone on the last GPU set, RUNS times with -O 0 and
#     -O 1 (NCCL's communicators after / during the copy matrix)
#  5. $OUT1/hook-timing.md: GPUs, kind, median, max, runs (wall, and the
#     hook's time outside its probes: the probe process counted once), the
#     medians of --json's timings by phase, -O 0 against -O 1; every line,
#     --json and log in $OUT1/hook-timing.tgz
set -u
source "$(dirname "$0")/_clean_copy.sh" "${1:-${OUT:-/tmp/out}}"
RUNS=${RUNS:-10}
# HOOK_ENV: NAME=value words added to the hook's empty environment (none on
# the device; a dry run without a GPU gives PATH to stand-ins there)
HOOK_ENV=${HOOK_ENV:-}
L=$K/logs
export NCCL_NVLS_ENABLE=0
note() { echo "$*" | tee -a "$K/notes.txt"; }
save() { tar -C /tmp -czf "$OUT1/hook-timing.tgz" keep 2>/dev/null; }
wheels_to_site
PY=$(command -v python3)
nvidia-smi -L > $L/machine.txt 2>&1; nvidia-smi topo -m >> $L/machine.txt 2>&1
git -C "$SRC" rev-parse HEAD >> $L/machine.txt 2>/dev/null
NGPU=$(nvidia-smi -L | grep -c '^GPU ')
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
GEN="-gencode=arch=compute_$CC,code=sm_$CC"

# 1. the programs
P=/tmp/prefix; mkdir -p $P/bin
s=$(date +%s.%N)
timeout 300 nvcc -O2 -o $P/bin/ccl-health-links builders/src/ccl_health_links.cu > $L/nvcc-links.log 2>&1 ||
  note "nvcc: ccl-health-links did not build (logs/nvcc-links.log)"
timeout 300 nvcc $GEN -O2 -DCCL_HEALTH_PROBE -o $P/bin/ccl-health-probe builders/src/ccl_health_links.cu -lnccl \
  > $L/nvcc-probe.log 2>&1 || { note "nvcc: ccl-health-probe did not build (logs/nvcc-probe.log)"; tail -n 30 $L/nvcc-probe.log; }
note "built the programs in $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s"
OLD=""
if [ -f "$SRC/.mirror/nccl-tests-2.19.6.tar.gz" ]; then
  s=$(date +%s.%N)
  mkdir -p /tmp/old/bin && tar -C /tmp -xzf "$SRC/.mirror/nccl-tests-2.19.6.tar.gz" &&
  (cd /tmp/nccl-tests-2.19.6 && make -j"$(nproc)" MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi \
      NVCC_GENCODE="$GEN" > $L/nccl-tests-build.log 2>&1) &&
  cp /tmp/nccl-tests-2.19.6/build/all_reduce_perf /tmp/old/bin/ && cp $P/bin/ccl-health-links /tmp/old/bin/ &&
  OLD=/tmp/old
  note "nccl-tests: ${OLD:-not built (logs/nccl-tests-build.log)} in $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s"
fi

# 2. the references this node's keys need
SETS="0"; [ "$NGPU" -ge 2 ] && SETS="$SETS 0,1"
[ "$NGPU" -gt 2 ] && SETS="$SETS $(seq -s, 0 $((NGPU - 1)))"
for set in $SETS; do
  CUDA_VISIBLE_DEVICES=$set timeout 120 $P/bin/ccl-health-probe -a 1G -i 10 -W 2 > $K/probe-$set.txt 2>&1
  echo "probe on $set: exit $?" | tee -a $L/probes.txt
  grep -E '^# (init|done|error|probe total|Out of bounds|nccl init|all_reduce phases|early)|Test .* failure|^ +1073741824 ' $K/probe-$set.txt
done
timeout 120 $PY benchmarks/device/_hook_timing_ref.py reference/local.yaml $K/probe-*.txt > $L/reference.log 2>&1 ||
  note "reference: not written (logs/reference.log)"
cp reference/local.yaml $K/reference-local.yaml

# 3. the hook, as NHC runs it
hook() {  # label set prefix run
  local s e rc name="$1-$2-$4"
  s=$(date +%s.%N)
  if [ "$2" = all ]; then
    env -i PYTHONPATH="$PYTHONPATH" $HOOK_ENV timeout -s KILL 120 $PY -m ccl_health.hook --tests-prefix $3 \
      --db $K/hook.db --json $K/$name.json > $K/$name.line 2> $K/$name.err
  else     # a part of the node's GPUs: the count it is to judge
    env -i PYTHONPATH="$PYTHONPATH" $HOOK_ENV CUDA_VISIBLE_DEVICES=$2 timeout -s KILL 120 $PY -m ccl_health.hook \
      --tests-prefix $3 --expect-gpus $(echo "$2" | tr , '\n' | wc -l) --db $K/hook.db \
      --json $K/$name.json > $K/$name.line 2> $K/$name.err
  fi
  rc=$?
  e=$(date +%s.%N)
  printf '%s\t%s\t%s\t%s\t%.3f\t%s\n' "$1" "$2" "$4" "$rc" "$(python3 -c "print($e - $s)")" \
    "$(cat $K/$name.line)" >> $K/runs.tsv
}
: > $K/runs.tsv
env -i PYTHONPATH="$PYTHONPATH" $PY -X importtime -m ccl_health.hook --help > /dev/null 2> $L/importtime-help.txt
for set in $SETS; do
  label=$set; [ "$set" != 0 ] && [ "$set" != 0,1 ] && label=all
  for i in $(seq 1 $RUNS); do hook one-process $label $P $i; done
  if [ -n "$OLD" ]; then for i in $(seq 1 $RUNS); do hook apart $label $OLD $i; done; fi
  save
done
# 4. the program alone, NCCL's communicators after the copies (-O 0, the
# hook's default) and during them (-O 1): the copies' GB/s must not move
last=${SETS##* }
for i in $(seq 1 $RUNS); do
  for o in 0 1; do
    s=$EPOCHREALTIME
    CUDA_VISIBLE_DEVICES=$last timeout 120 $P/bin/ccl-health-probe -a 1G -i 10 -W 2 -O $o > $K/overlap-O$o-$i.txt 2>&1
    echo "# wall $(awk "BEGIN {print $EPOCHREALTIME - $s}") s" >> $K/overlap-O$o-$i.txt
  done
done
$PY benchmarks/device/_hook_timing_table.py $K/runs.tsv $K "$NGPU" > "$OUT1/hook-timing.md" 2> $L/table.log
$PY benchmarks/device/_probe_overlap_table.py $K/overlap-O*.txt >> "$OUT1/hook-timing.md" 2>> $L/table.log
cat "$OUT1/hook-timing.md"
save
