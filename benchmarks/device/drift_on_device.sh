#!/usr/bin/env bash
# Issue 13 part 4 on ONE GPU: a healthy series and graded degradations of a
# net-socket all_reduce, for the sustained-shift (drift) detector.
# Two MPI ranks on GPU 0, each told it is another host (per-rank NCCL_HOSTID):
# NCCL connects them over NET/Socket.  Each run: all_reduce_perf
# -b 64M -e 256M -f 2 -n $ITERS -w 2.  Order: healthy runs, then each
# candidate NCCL setting for $PER runs, then healthy runs again, all inside
# a time budget.  Output: $OUT/drift-series.tsv (label, env, run, size,
# busbw_oop, busbw_ip), $OUT/drift-raw.tgz (every raw output).
# Usage (repo root on the device, this folder carried as .dev-drift):
#   bash .dev-drift/drift_on_device.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
START=$(date +%s)
BUDGET=${BUDGET:-430}          # seconds for the whole script
ITERS=${ITERS:-8}
HEALTHY=${HEALTHY:-25}
PER=${PER:-6}
LOG=$OUT/drift-log.txt
exec > >(tee -a "$LOG") 2>&1
export NCCL_NVLS_ENABLE=0
nvidia-smi -L
B=/tmp/nt; mkdir -p $B
tar -xzf "$HERE"/nccl-tests-2.19.6.tar.gz -C $B --strip-components=1
( cd $B && make -j16 MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BIN_FILES_LIST=all_reduce \
    > /tmp/build.log 2>&1 ) || { tail -30 /tmp/build.log; exit 1; }
echo "build done at $(( $(date +%s) - START )) s"
W=/tmp/wrap.sh
printf '#!/bin/bash\nexport NCCL_HOSTID=drift-rank-${OMPI_COMM_WORLD_RANK:-0} NCCL_TESTS_DEVICE=0\nexec %s/build/all_reduce_perf "$@"\n' "$B" > $W
chmod +x $W
R=/tmp/raw; mkdir -p $R
TSV=$OUT/drift-series.tsv
printf 'label\tenv\trun\tsize\tbusbw_oop\tbusbw_ip\twall_s\n' > $TSV
n=0
one() {  # label env...
  local label=$1; shift
  local left=$(( BUDGET - ($(date +%s) - START) ))
  [ $left -lt 12 ] && return 1
  n=$((n+1))
  local f=$R/$(printf '%03d' $n)-$label.out
  local xs=(-x NCCL_NVLS_ENABLE -x NCCL_DEBUG)
  for e in "$@"; do xs+=(-x "$e"); done
  local s=$(date +%s.%N)
  NCCL_DEBUG=WARN timeout 40 mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none "${xs[@]}" \
    $W -g 1 -b 64M -e 256M -f 2 -n $ITERS -w 2 > $f 2>&1
  local rc=$? e=$(date +%s.%N)
  local wall=$(python3 -c "print(f'{$e-$s:.2f}')")
  awk -v l="$label" -v env="$*" -v n=$n -v w=$wall '$3=="float" && $1+0>0 {print l"\t"env"\t"n"\t"$1"\t"$8"\t"$12"\t"w}' $f >> $TSV
  echo "$n $label [$*] rc=$rc wall=$wall $(awk '$3=="float"{printf "%s:%s ", $1, $8}' $f)"
  return 0
}
for i in $(seq 1 $HEALTHY); do one healthy || break; done
# candidates: each a label and NCCL settings (in order of interest).
# Measured in the first call (tests/fixtures/device/drift): over NET/Socket
# the bandwidth scales with NCCL_BUFFSIZE (4 MiB default: 1.85 GB/s; 2 MiB:
# -50 %; 1 MiB: -75 %), so buffers a little under 4 MiB should cost a few
# percent: the graded set (expected -3 %, -6 %, -12 %) comes first.
# CANDS_FILE: one "label VAR=VALUE ..." per line, to run another set.
if [ -n "${CANDS_FILE:-}" ]; then
  mapfile -t CANDS < "$CANDS_FILE"
else
CANDS=(
  "buff3875k NCCL_BUFFSIZE=4063232"
  "buff3750k NCCL_BUFFSIZE=3932160"
  "buff3500k NCCL_BUFFSIZE=3670016"
  "nsocks2 NCCL_NSOCKS_PERTHREAD=2"
  "maxch1 NCCL_MAX_NCHANNELS=1"
  "sockthr2 NCCL_SOCKET_NTHREADS=2"
  "minch4 NCCL_MIN_NCHANNELS=4"
  "ll128 NCCL_PROTO=LL128"
  "p2ploc NCCL_P2P_LEVEL=LOC"
)
fi
for c in "${CANDS[@]}"; do
  set -- $c; label=$1; shift
  for i in $(seq 1 $PER); do one "$label" "$@" || break 2; done
done
for i in $(seq 1 ${AFTER:-10}); do one healthy2 || break; done
tar -C /tmp -czf $OUT/drift-raw.tgz raw build.log
echo "done at $(( $(date +%s) - START )) s, $n runs"
