#!/usr/bin/env bash
# The health hook in a hostile environment on one GPU (issue 20, issue 19
# class 1), from a clean copy of the repository.  Needs: nvcc, python3 with
# torch (benchmarks/device/nodestate/busy.py), the offline wheels in .whl
# (jsonschema, ruamel.yaml, nvidia-ml-py; no internet).  Each step is
# independent and bounded (timeout); its line, exit status and wall time go
# to $OUT1/hostile-summary.txt, every --json detail and log into
# $OUT1/hostile.tgz.
#  1. clean environment: NCCL_P2P_DISABLE=1 NCCL_ALGO=Ring NCCL_PROTO=LL
#     inherited give the verdict the clean environment gives, the dropped
#     variables named in the --json document
#  2. SIGALRM to the hook's process group (as NHC's watchdog sends it) in
#     the middle of a probe: one line, exit 2, no process left (ps), no
#     temporary folder left
#  3. a foreign process computing on the GPU (busy.py) and no reference for
#     the node: UNHEALTHY, the process named first
#  4. a wrong result injected into the first try only (a ccl-health-links
#     wrapper whose first run adds "# error: wrong data ..."; the second
#     run is the real one): UNHEALTHY wrong-results, "attempt 1 of 2"
# Usage (repo root on the device, .whl carried):
#   bash benchmarks/device/hostile_hook_on_device.sh "$OUT"
set -u
source "$(dirname "$0")/_clean_copy.sh" "${1:-${OUT:-/tmp/out}}"
L=$K/logs
S=$OUT1/hostile-summary.txt
: > "$S"
export NCCL_NVLS_ENABLE=0
save() { tar -C /tmp -czf "$OUT1/hostile.tgz" keep 2>/dev/null; }
note() { echo "$*" | tee -a "$S"; }
wheels_to_site
nvidia-smi -L > $L/machine.txt 2>&1; git -C "$SRC" rev-parse HEAD >> $L/machine.txt 2>/dev/null

# the copy matrix program and a reference of this GPU's own copies (half
# of what it measures now: the healthy node passes, a fault still shows)
P=/tmp/prefix; mkdir -p $P/bin
timeout 300 nvcc -O2 -o $P/bin/ccl-health-links.real builders/src/ccl_health_links.cu > $L/nvcc.log 2>&1 ||
  note "nvcc: ccl-health-links did not build (see logs/nvcc.log)"
ln -sf ccl-health-links.real $P/bin/ccl-health-links
timeout 60 $P/bin/ccl-health-links.real > $K/links-capture.txt 2>&1
rm -rf /tmp/ref && cp -r reference /tmp/ref
timeout 60 python3 benchmarks/device/_links_reference.py $K/links-capture.txt /tmp/ref/local.yaml \
  hostile_hook_on_device.sh > $L/mkref.log 2>&1 || note "reference: not made (logs/mkref.log)"

hook() {  # name, then env assignments; runs the hook once, bounded
  local name=$1; shift
  local s e rc
  s=$(date +%s.%N)
  env "$@" timeout -s KILL 120 python3 -m ccl_health.hook --tests-prefix $P --no-record \
    --json $K/$name.json > $K/$name.line 2> $K/$name.err
  rc=$?
  e=$(date +%s.%N)
  printf '%s\texit %s\t%.2f s\t%s\n' "$name" "$rc" "$(python3 -c "print($e - $s)")" \
    "$(cat $K/$name.line)" | tee -a "$S"
}
dropped() { python3 -c "import json,sys; print('  dropped:', json.load(open(sys.argv[1])).get('dropped_env'))" "$K/$1.json" 2>&1 | tee -a "$S"; }

# 1. the clean environment
hook clean-baseline CCL_HEALTH_REFERENCE_DIR=/tmp/ref
hook clean-inherited CCL_HEALTH_REFERENCE_DIR=/tmp/ref NCCL_P2P_DISABLE=1 NCCL_ALGO=Ring NCCL_PROTO=LL
dropped clean-inherited
save

# 2. SIGALRM in the middle of a probe: the probe is the real copy matrix
# run 200 times (its header first: it started), the hook's group signalled
(
  mkdir -p /tmp/slow/bin
  printf '#!/bin/bash\nfor i in $(seq 200); do %s/bin/ccl-health-links.real "$@" || exit; done\n' $P > /tmp/slow/bin/ccl-health-links
  chmod +x /tmp/slow/bin/ccl-health-links
  export TMPDIR=/tmp/hostile-tmp; rm -rf $TMPDIR; mkdir -p $TMPDIR
  s=$(date +%s.%N)
  setsid bash -c 'CCL_HEALTH_REFERENCE_DIR=/tmp/ref exec python3 -m ccl_health.hook --tests-prefix /tmp/slow --no-record --limit 60 --json '$K'/sigalrm.json' > $K/sigalrm.line 2> $K/sigalrm.err &
  pid=$!
  sleep 5
  alarm_the_hook $pid $s 'ccl-health|ccl_health' 'ccl-health-links|ccl_health.hook'
)
save

# 3. a foreign process on the GPU, no reference for this node (the shipped
# reference has no copy kinds of one GPU)
(
  rm -f /tmp/busy.pid
  timeout -s KILL 200 python3 benchmarks/device/nodestate/busy.py /tmp/busy.pid > $L/busy.log 2>&1 & B=$!
  for i in $(seq 150); do [ -s /tmp/busy.pid ] && break; sleep 0.2; done
  note "  busy.py pid $(cat /tmp/busy.pid 2>/dev/null)"
  hook foreign-no-reference CCL_HEALTH_REFERENCE_DIR=$PWD/reference
  hook foreign-with-reference CCL_HEALTH_REFERENCE_DIR=/tmp/ref
  kill $B 2>/dev/null; wait $B 2>/dev/null
)
save

# 4. a wrong result in the first try only
(
  mkdir -p /tmp/wrong/bin
  cat > /tmp/wrong/bin/ccl-health-links <<EOF
#!/bin/bash
# first run: the real output with a wrong-data error line; later: real
$P/bin/ccl-health-links.real "\$@"; rc=\$?
if [ ! -e /tmp/wrong/first-done ]; then
  touch /tmp/wrong/first-done
  echo "# error: wrong data: GPU 0 (inside) byte 4096 is 0x00, expected 0x5a"
fi
exit \$rc
EOF
  chmod +x /tmp/wrong/bin/ccl-health-links
  rm -f /tmp/wrong/first-done
  s=$(date +%s.%N)
  CCL_HEALTH_REFERENCE_DIR=/tmp/ref timeout -s KILL 120 python3 -m ccl_health.hook --tests-prefix /tmp/wrong \
    --no-record --json $K/wrong-first.json > $K/wrong-first.line 2> $K/wrong-first.err
  rc=$?; e=$(date +%s.%N)
  printf '%s\texit %s\t%.2f s\t%s\n' wrong-first "$rc" "$(python3 -c "print($e - $s)")" "$(cat $K/wrong-first.line)" | tee -a "$S"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('  attempts:', d.get('attempts'), d.get('attempt_notes'))" $K/wrong-first.json 2>&1 | tee -a "$S"
)
save
cp "$S" $K/ && save
cat "$S"
