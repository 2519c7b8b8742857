#!/usr/bin/env bash
# The same verdicts before and after a restructure (issue 19), from a clean
# copy of the repository, on whatever GPU kind is lent:
#  1. the README's main command (scripts/run: build everything, sweep every
#     transport this machine has)
#  2. a net-socket sweep with two ranks on GPU 0, each rank told it is
#     another host (NCCL_HOSTID per rank: NCCL connects them over NET/Socket)
# Every case's verdict and reason is read back from the performance database
# into verdicts.tsv (case, verdict, reason), with the run logs and reports in
# verdicts-<label>.tgz.
# Usage (repo root on the device, .whl and .mirror carried):
#   bash benchmarks/device/verdicts_on_device.sh <out-dir> <label>
set -u
LABEL=${2:-run}
source "$(dirname "$0")/_clean_copy.sh" "$1"
L=$K/logs
export NCCL_NVLS_ENABLE=0
save() { tar -C /tmp -czf "$OUT1/verdicts-$LABEL.tgz" keep; }
T() { timed_step $L/timings.txt "$@"; }
nvidia-smi -L > $L/machine.txt 2>&1; git -C "$SRC" rev-parse HEAD >> $L/machine.txt 2>/dev/null
echo "label $LABEL" >> $L/machine.txt

# 1. the README's main command
export CCL_HEALTH_DB=/tmp/main.db
T scripts/run --output /tmp/o-main > $L/main.log 2>&1
cp /tmp/o-main/reports/run-*.json $K/ 2>/dev/null; save

# 2. net-socket, two ranks on one GPU, each its own NCCL_HOSTID
real=$(ls -d /tmp/ccl-cache/nccl-tests-*/bin | head -1)
pair_on_one_gpu "$real" /tmp/site
export CCL_HEALTH_DB=/tmp/socket.db
CCL_HEALTH_SITE_DIR=/tmp/site CCL_HEALTH_ASSUME_GPUS=2:sm_90 \
  T scripts/run --output /tmp/o-socket -- -n 'AllReduceSweep%transport=net-socket' \
  -S min_size=1M -S max_size=256M -S iters=10 > $L/socket.log 2>&1
mkdir -p $K/socket-stage
cp /tmp/o-socket/stage/*/*/*/AllReduceSweep*/{rfm_job.out,ccl-health-case.json,nccl-debug.*} $K/socket-stage/ 2>/dev/null
cp /tmp/o-socket/reports/run-*.json $K/socket-stage/ 2>/dev/null

# the verdicts, from the databases
for db in /tmp/main.db /tmp/socket.db; do
  .venv/bin/python - "$db" >> $L/verdicts.tsv 2>>$L/verdicts.err <<'PY'
import sqlite3, sys
con = sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True)
for name, verdict, reason in con.execute(
        'select case_name, verdict, reason from cases order by case_name'):
    print(f'{name}\t{verdict}\t{(reason or "")[:300]}')
PY
done
cp $L/verdicts.tsv "$OUT1/verdicts-$LABEL.tsv"
save
cat $L/timings.txt; cat $L/verdicts.tsv
