#!/usr/bin/env bash
# The health hook's faults on the GPUs this machine has (issue 42), from a
# clean copy of the repository, the hook run as NHC runs it (`env -i`):
#   0. set-up as a site installs the hook: the clone's .venv, nccl-tests
#      ccl-health-links and ccl-health-probe (the hook's one probe process)
#      built into the prefix its site file names; the shipped reference
#      (H200, 2 and 4 GPUs; the keys it lacks from the probe run now): what
#      the hook reads with an empty environment
#   1. idle, three times: HEALTHY, the same line each time (nothing of the
#      NVLink counters noted); the PCIe links the sampler saw under load
#      (--json node_state.under_load) beside nvidia-smi's
#   2. a foreign process holding memory: 0.5 GiB on GPU 0 and half of the
#      last GPU's memory (one GPU: half of GPU 0): UNHEALTHY, named by the
#      GPU it holds most on, with the other
#   3. a pair made slow by a copy loop between its two GPUs (a process
#      copying GPU 0 -> GPU 1 without end; needs 2 GPUs, else one line
#      says it was skipped)
#   4. inherited NCCL variables (NCCL_P2P_DISABLE=1 NCCL_ALGO=Ring
#      NCCL_PROTO=LL NCCL_SHM_DISABLE=1): the verdict of the clean run,
#      the dropped variables named in --json
#   5. SIGALRM to the hook's process group 1.5 s in (as NHC's watchdog
#      sends it): one line, exit 2, no process and no temporary folder left
#   6. the real LBNL NHC 1.4.3 (.mirror/nhc-1.4.3.tar.gz, built here) with
#      site/nhc/ccl_health.nhc: idle (passes) and with the memory holder
#      (the node marked: nhc exits non-zero, "ccl-health: ..." in its log)
# Each step is bounded (timeout); its line, exit status and wall time go to
# hook-faults-summary.txt; everything (lines, --json, logs) into ONE
# tarball, $OUT/hook-faults.tgz.
# Needs: nvcc, mpirun (the hook's launcher), python3 with torch and
# nvidia-ml-py (steps 2, 3; the node state), the offline wheels in .whl
# (jsonschema and its needs, ruamel.yaml) and .mirror (nccl-tests-2.19.6
# and nhc-1.4.3 tarballs), both carried.
# Usage (repo root on the device):
#   bash benchmarks/device/hook_faults.sh "$OUT"
set -u
source "$(dirname "$0")/_clean_copy.sh" "${1:-${OUT:-/tmp/out}}"
L=$K/logs
S=$K/hook-faults-summary.txt
: > "$S"
export NCCL_NVLS_ENABLE=0
save() { cp "$S" "$OUT1/" 2>/dev/null; tar -C /tmp -czf "$OUT1/hook-faults.tgz" keep 2>/dev/null; }
note() { echo "$*" | tee -a "$S"; }
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
LAST=$((NGPU > 0 ? NGPU - 1 : 0))
{ nvidia-smi -L; nvidia-smi topo -m; nvidia-smi -q -d PCIE; git -C "$SRC" rev-parse HEAD; } > $L/machine.txt 2>&1
note "GPUs: $NGPU ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs))"

# NHC's PATH, with the launcher's folder where it is elsewhere (a site sets
# its launcher in site/<system>.yaml; this machine's mpirun may not be in
# /usr/bin)
NHC_PATH=/sbin:/usr/sbin:/bin:/usr/bin
MPI=$(command -v mpirun 2>/dev/null) && case ":$NHC_PATH:" in
  *":$(dirname "$MPI"):"*) ;; *) NHC_PATH=$NHC_PATH:$(dirname "$MPI") ;; esac
note "PATH as NHC runs the hook: $NHC_PATH"

# 0. set-up, as a site installs the hook: a virtual environment of the
# clone (the system's packages: NVML, torch; the carried wheels), nccl-tests
# built from .mirror and ccl-health-links with nvcc into one prefix that the
# clone's site file names (build.nccl_tests.prefix), its launcher allowed to
# run as root (the device runs us as root; NHC does on a cluster), NVLink
# multicast left off in the probes (health.env: the device has none); the
# shipped reference (H200: 2 and 4 GPUs), the keys it lacks from the probe
# run now
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
P=/tmp/hf-prefix; rm -rf $P; mkdir -p $P/bin
s=$(date +%s)
# the clone's .venv as scripts/run makes it (scripts/_venv.sh: offline from
# the carried wheels, CCL_HEALTH_WHEELS of docs/sites.md; a python3 that is
# itself a virtual environment lends it its packages by a .pth file, so
# the hook finds them in NHC's empty environment too)
( export CCL_HEALTH_WHEELS="$SRC/.whl"; source scripts/_venv.sh &&
  ccl_venv reframe report nvidia ) > $L/venv.log 2>&1
note "set-up: .venv rc=$? (logs/venv.log)"
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
GEN="-gencode=arch=compute_${CC:-90},code=sm_${CC:-90}"
W=/tmp/hf-build; rm -rf $W; mkdir -p $W
tar -C $W -xzf "$SRC/.mirror/nccl-tests-2.19.6.tar.gz" &&
  timeout 300 make -C $W/nccl-tests-2.19.6 -j"$(nproc)" MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi \
    NVCC_GENCODE="$GEN" > $L/build.log 2>&1
cp $W/nccl-tests-2.19.6/build/*_perf $P/bin/ 2>/dev/null
timeout 300 nvcc -O2 -o $P/bin/ccl-health-links builders/src/ccl_health_links.cu > $L/nvcc.log 2>&1
# the one probe process the hook runs where it is built (as the builders
# put it beside ccl-health-links)
timeout 300 nvcc $GEN -O2 -DCCL_HEALTH_PROBE -o $P/bin/ccl-health-probe builders/src/ccl_health_links.cu \
  -lnccl > $L/nvcc-probe.log 2>&1
for t in all_reduce_perf ccl-health-links ccl-health-probe; do
  [ -x $P/bin/$t ] && echo "$t built" || echo "$t MISSING"
done | paste -sd, | sed "s/^/set-up: /; s/\$/, $(( $(date +%s) - s )) s/" | tee -a "$S"
python3 - "$P" <<'PY'
import sys
p, prefix = 'site/local.yaml', sys.argv[1]
s = open(p).read()
s = s.replace('  launcher: mpirun --bind-to none -np',
              '  launcher: mpirun --allow-run-as-root --bind-to none -np\n'
              '  env: {NCCL_NVLS_ENABLE: "0"}', 1)
s = s.replace('build:\n', f'build:\n  nccl_tests:\n    prefix: {prefix}\n', 1)
open(p, 'w').write(s)
PY
cp site/local.yaml $K/site-local.yaml
# the references this node's keys lack in the shipped file (one GPU's
# copies, 8 GPUs' all_reduce): half of what the probe measures now
# (benchmarks/device/_hook_timing_ref.py keeps every shipped entry)
SETS="0"; [ "$NGPU" -ge 2 ] && SETS="$SETS 0,1"
[ "$NGPU" -gt 2 ] && SETS="$SETS $(seq -s, 0 $((NGPU - 1)))"
for set in $SETS; do
  CUDA_VISIBLE_DEVICES=$set timeout 120 $P/bin/ccl-health-probe -a 1G -i 10 -W 2 > $K/probe-$set.txt 2>&1
done
timeout 120 .venv/bin/python benchmarks/device/_hook_timing_ref.py reference/local.yaml $K/probe-*.txt \
  > $L/reference.log 2>&1
note "set-up: references of this node's keys rc=$? (logs/reference.log)"
cp reference/local.yaml $K/reference-local.yaml
save

hook() {  # name [VAR=value ...]: the hook as NHC runs it, bounded
  local name=$1; shift
  local s e rc
  s=$(date +%s.%N)
  env -i HOME="$HOME" PATH="$NHC_PATH" "$@" timeout -s KILL 90 scripts/ccl-health-check \
    --no-record --json $K/$name.json > $K/$name.line 2> $K/$name.err
  rc=$?
  e=$(date +%s.%N)
  printf '%s\texit %s\t%.2f s\t%s\n' "$name" "$rc" "$(python3 -c "print($e - $s)")" \
    "$(cat $K/$name.line)" | tee -a "$S"
}
detail() {  # name: what --json says of the links and the processes
  python3 benchmarks/device/_hook_detail.py "$K/$1.json" 2>&1 | tee -a "$S"
}
waitfile() { for i in $(seq 300); do [ -s "$1" ] && return 0; sleep 0.2; done; return 1; }

# 1. idle, three times
for i in 1 2 3; do hook idle-$i; done
detail idle-1
for i in 1 2 3; do grep -c 'NVLink' $K/idle-$i.line; done | paste -sd' ' | sed 's/^/  lines naming NVLink (want 0 0 0): /' | tee -a "$S"
save

# 2. a foreign process holding memory: a 0.5 GiB context on GPU 0, the most
# on the last GPU
cat > /tmp/hold.py <<'PY'
import os, sys, time
import torch
ready, last = sys.argv[1], int(sys.argv[2])
small = torch.empty(512 << 20, dtype=torch.uint8, device='cuda:0')
free, total = torch.cuda.mem_get_info(last)
big = torch.empty(int(total * 0.5), dtype=torch.uint8, device=f'cuda:{last}')
torch.cuda.synchronize(last)
open(ready, 'w').write(str(os.getpid()))
while True:
    time.sleep(1)
PY
(
  rm -f /tmp/hold.pid
  timeout -s KILL 300 python3 /tmp/hold.py /tmp/hold.pid $LAST > $L/hold.log 2>&1 & B=$!
  waitfile /tmp/hold.pid && note "  holder pid $(cat /tmp/hold.pid): 0.5 GiB on GPU 0, half of GPU $LAST"
  hook memory-held
  detail memory-held
  kill $B 2>/dev/null; wait $B 2>/dev/null
)
save

# 3. a pair made slow by a copy loop between its two GPUs
if [ "$NGPU" -ge 2 ]; then
  cat > /tmp/copyloop.py <<'PY'
import os, sys, torch
ready = sys.argv[1]
a = torch.empty(1 << 30, dtype=torch.uint8, device='cuda:0')
b = torch.empty(1 << 30, dtype=torch.uint8, device='cuda:1')
b.copy_(a); torch.cuda.synchronize(1)
open(ready, 'w').write(str(os.getpid()))
while True:
    for _ in range(8):
        b.copy_(a, non_blocking=True)
        a.copy_(b, non_blocking=True)
    torch.cuda.synchronize(0); torch.cuda.synchronize(1)
PY
  (
    rm -f /tmp/copy.pid
    timeout -s KILL 300 python3 /tmp/copyloop.py /tmp/copy.pid > $L/copyloop.log 2>&1 & B=$!
    waitfile /tmp/copy.pid && note "  copy loop pid $(cat /tmp/copy.pid): GPU 0 <-> GPU 1"
    hook slow-pair
    detail slow-pair
    kill $B 2>/dev/null; wait $B 2>/dev/null
  )
else
  note "slow-pair: skipped: one GPU here (a pair needs two)"
fi
save

# 4. inherited NCCL variables
hook inherited NCCL_P2P_DISABLE=1 NCCL_ALGO=Ring NCCL_PROTO=LL NCCL_SHM_DISABLE=1
detail inherited
save

# 5. SIGALRM to the hook's process group in the middle of its probes
(
  export TMPDIR=/tmp/alrm-tmp; rm -rf $TMPDIR; mkdir -p $TMPDIR
  s=$(date +%s.%N)
  setsid env -i HOME="$HOME" PATH="$NHC_PATH" TMPDIR=$TMPDIR scripts/ccl-health-check --no-record \
    --json $K/sigalrm.json > $K/sigalrm.line 2> $K/sigalrm.err &
  pid=$!
  # the alarm while a probe runs: wait (up to 5 s) for the probe program
  # (in a session of its own, so found by name; a fixed sleep missed it: on one GPU the hook
  # ends in ~1 s, before a 1.5 s sleep was over, and answered HEALTHY)
  for _ in $(seq 100); do
    pgrep -f 'ccl-health-probe|ccl-health-links|all_reduce_perf' >/dev/null && break
    sleep 0.05
  done
  alarm_the_hook $pid $s 'ccl.health|all_reduce_perf|mpirun' 'ccl-health-links|ccl_health|all_reduce_perf'
)
save

# 6. the real NHC 1.4.3 with the project's check file
(
  N=/tmp/nhc-build; rm -rf $N; mkdir -p $N
  tar -C $N -xzf "$SRC/.mirror/nhc-1.4.3.tar.gz" || { note "nhc: no .mirror/nhc-1.4.3.tar.gz"; exit 0; }
  cd $N/nhc-1.4.3 && ./configure --prefix=$N/prefix --sysconfdir=$N/prefix/etc \
    --libexecdir=$N/prefix/libexec > $L/nhc-build.log 2>&1 && make >> $L/nhc-build.log 2>&1 &&
    make install >> $L/nhc-build.log 2>&1 || { note "nhc: did not build (logs/nhc-build.log)"; exit 0; }
  cd /tmp/clone
  C=$N/conf; mkdir -p $C; cp -r $N/prefix/etc/nhc/scripts $C/scripts
  cp site/nhc/ccl_health.nhc $C/scripts/
  echo "* || check_gpu_ccl /tmp/clone 25" > $C/nhc.conf
  nhc() {  # name
    local s e rc
    s=$(date +%s.%N)
    env -i HOME="$HOME" PATH="$NHC_PATH" timeout -s KILL 60 $N/prefix/sbin/nhc -c $C/nhc.conf \
      -l $K/nhc-$1.log -t 30 CONFDIR=$C INCDIR=$C/scripts HELPERDIR=$N/prefix/libexec/nhc \
      NHC_RM=none MARK_OFFLINE=0 RESULTFILE=$K/nhc-$1.status DEBUG=1 PATH="$NHC_PATH" \
      > $K/nhc-$1.out 2>&1
    rc=$?; e=$(date +%s.%N)
    printf 'nhc-%s\texit %s\t%.2f s\t%s\n' "$1" "$rc" "$(python3 -c "print($e - $s)")" \
      "$(grep -h 'check_gpu_ccl\|ccl-health: ' $K/nhc-$1.log $K/nhc-$1.out 2>/dev/null | tail -1)" | tee -a "$S"
  }
  nhc idle
  rm -f /tmp/hold.pid
  timeout -s KILL 200 python3 /tmp/hold.py /tmp/hold.pid $LAST > $L/hold-nhc.log 2>&1 & B=$!
  waitfile /tmp/hold.pid
  nhc memory-held
  kill $B 2>/dev/null; wait $B 2>/dev/null
)
save
cat "$S"
