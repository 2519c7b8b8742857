#!/usr/bin/env bash
# Issue 13 (node state, cause-first verdicts, `contended`) on ONE GPU, from
# a copy of the repo (cwd) with the ReFrame wheels in $WHL and the
# nccl-tests tarball in $MIRROR:
#  1. NVML answers recorded (python -m ccl_health.evidence.nodestate --record): idle;
#     with another process keeping the GPU busy (torch matmul loop); with
#     another process holding ~70% of the GPU's memory; the reader timed
#  2. the health hook (real NVML; the probes replayed from the 2xH200
#     capture through the stand-in launcher and nvidia-smi) with each
#     foreign process present: line, exit code, time, --json detail
#  3. a net-socket sweep (two ranks on the one GPU, each told it is another
#     host: NCCL_HOSTID) alone, with the busy process, with the memory
#     holder; then two such `scripts/run` at once
# ONLY=hook: the records and the hook, no sweeps.
# Usage: WHL=... MIRROR=... bash benchmarks/device/nodestate_on_device.sh OUT
set -u
OUT1=$(realpath -m "$1"); mkdir -p "$OUT1"
K=/tmp/keep; rm -rf $K; mkdir -p $K/logs; L=$K/logs
SRC=$(pwd)
source "$(dirname "$0")/_steps.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 CCL_HEALTH_CACHE=/tmp/ccl-cache
export CCL_HEALTH_WHEELS=${VENV_WHL:-$WHL}
save() { tar -C /tmp -czf "$OUT1/nodestate.tgz" keep; }
T() { timed_step $L/timings.txt "$@"; }
export PYTHONPATH=$SRC
nvidia-smi -L > $L/nvidia-smi-L.txt 2>&1
python3 -c 'import pynvml; pynvml.nvmlInit(); print(pynvml.nvmlSystemGetDriverVersion(), pynvml.nvmlSystemGetNVMLVersion())' > $L/nvml-version.txt 2>&1
python3 -m pip show nvidia-ml-py >> $L/nvml-version.txt 2>&1

# nccl-tests from the mirror, behind a wrapper giving each rank its own host
( mkdir -p /tmp/nt && tar -C /tmp/nt -xzf $MIRROR/nccl-tests-*.tar.gz &&
  cd /tmp/nt/nccl-tests-* && make -j16 MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" ) > $L/build-nccl-tests.log 2>&1 &
BUILD=$!
# scripts/run's virtual environment, offline
T bash -c 'source scripts/_venv.sh && ccl_venv $(ccl_run_extras)' > $L/venv.log 2>&1
VPY=$SRC/.venv/bin/python

B=benchmarks/device/nodestate/busy.py
start() { rm -f /tmp/ready-$1; python3 $B /tmp/ready-$1 "${@:2}" > $L/$1-proc.log 2>&1 &
          for _ in $(seq 300); do [ -s /tmp/ready-$1 ] && break; sleep 0.1; done
          cat /tmp/ready-$1; }
stop() { kill "$1"; wait "$1" 2>/dev/null; sleep 1; }

# --- 1. NVML recorded, the reader timed ------------------------------------
T python3 -m ccl_health.evidence.nodestate --record $K/idle.json --label idle > $L/idle-state.json 2> $L/idle.err
python3 - > $L/reader-timing.txt 2>&1 <<'PY'
import time
from ccl_health import nodestate
t = []
for i in range(10):
    s = nodestate.read()
    t.append(s.seconds)
light = [nodestate.read(light=True).seconds for _ in range(10)]
print(f'full reading, 10 times in one process: min {min(t):.4f} s, max {max(t):.4f} s, first {t[0]:.4f} s')
print(f'light reading (sampler), 10 times: min {min(light):.4f} s, max {max(light):.4f} s')
print('gpus', len(s.gpus), 'not_checked', s.not_checked, 'unsupported', s.gpus[0].unsupported if s.gpus else None)
PY
save

hook() { local name=$1; shift
  { echo "\$ ccl_health.hook.check (fake probes, real NVML) $*";
    T env PATH=$SRC/tests/replay/fake-node:$PATH CCL_HEALTH_HOSTNAME=ci-test-host \
      CCL_HEALTH_XID_STATE=/tmp/xid-state CCL_HEALTH_DB=/tmp/hook.db \
      $VPY -m ccl_health.hook --tests-prefix $SRC/tests/replay \
      --launcher $SRC/tests/replay/fake-node/launch --json $K/hook-$name.json "$@"
    echo "exit $?"; } > $L/hook-$name.txt 2>&1; }
hook idle

[ "${ONLY:-}" = hook ] && kill $BUILD
wait $BUILD; echo "build exit $?" >> $L/build-nccl-tests.log
real=$(ls -d /tmp/nt/nccl-tests-*/build)
pair_on_one_gpu "$real" /tmp/sitedir
sweep() { local name=$1
  [ "${ONLY:-}" = hook ] && return 0
  CCL_HEALTH_SITE_DIR=/tmp/sitedir CCL_HEALTH_ASSUME_GPUS=2:sm_90 CCL_HEALTH_DB=$K/sweeps.db \
    T timeout 150 scripts/run --output /tmp/o-$name -- -n 'AllReduceSweep%transport=net-socket' \
    -S min_size=1M -S max_size=256M -S iters=20 > $L/sweep-$name.log 2>&1
  echo "scripts/run exit: $?" >> $L/sweep-$name.log
  mkdir -p $K/stage-$name
  cp /tmp/o-$name/stage/*/*/*/AllReduceSweep*/{rfm_job.sh,rfm_job.out,ccl-health-nodestate.jsonl} $K/stage-$name/ 2>/dev/null; }
sweep alone
save

# --- 2+3. another process keeping the GPU busy -----------------------------
BUSY=$(start busy)
echo "busy pid $BUSY" >> $L/pids.txt
sleep 2
T python3 -m ccl_health.evidence.nodestate --record $K/busy.json --label busy > /dev/null 2>&1
python3 -m ccl_health.evidence.nodestate --record $K/busy.json --label busy-again --append > /dev/null 2>&1
hook busy
sweep busy
stop $BUSY
save

# --- another process holding ~70% of the memory (idle) --------------------
HOLD=$(start hold --hold 0.7 --idle)
echo "hold pid $HOLD" >> $L/pids.txt
T python3 -m ccl_health.evidence.nodestate --record $K/memhold.json --label memhold > /dev/null 2>&1
hook memhold
sweep memhold
stop $HOLD
T python3 -m ccl_health.evidence.nodestate --record $K/after.json --label after-all > /dev/null 2>&1
save

# --- two main runs at once --------------------------------------------------
sweep twoA & A=$!
sleep 0.5
sweep twoB & Bp=$!
wait $A $Bp
$VPY - > $L/sweeps-db.txt 2>&1 <<PY
from ccl_health import store
with store.open_store('$K/sweeps.db', readonly=True) as db:
    for c in db.cases():
        print(c['run_id'], '|', c['case_name'], '|', c['verdict'], '|', c['reason'])
PY
save
