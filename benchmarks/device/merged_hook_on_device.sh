#!/usr/bin/env bash
# The merged hook (node state + copy matrix) end to end on one GPU, from a
# clean copy of the repository (run from its root on the device, with the
# wheels of jsonschema / ruamel.yaml carried in .dev-links/whl): idle three
# times, then with another process keeping the GPU busy, then with another
# process holding 70 % of its memory.  Each hook line, exit status and wall
# time go to $OUT/merged-hook.txt, the --json detail beside it.
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .dev-links/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=$OUT/merged; mkdir -p $R
nvidia-smi -L > $R/machine.txt; python3 -c 'import pynvml; pynvml.nvmlInit(); print("driver", pynvml.nvmlSystemGetDriverVersion())' >> $R/machine.txt
mkdir -p /tmp/prefix/bin
nvcc -O2 -o /tmp/prefix/bin/ccl-health-links builders/src/ccl_health_links.cu || exit 1
/tmp/prefix/bin/ccl-health-links > $R/links-capture.txt
python3 .dev-links/mkref.py reference /tmp/ref-ok $R/links-capture.txt 1 > /dev/null
cp /tmp/ref-ok/local.yaml $R/reference-local.yaml
hook() {  # name
  local s=$(date +%s.%N)
  CCL_HEALTH_REFERENCE_DIR=/tmp/ref-ok python3 -m ccl_health.hook --tests-prefix /tmp/prefix --no-record --json $R/$1.json > $R/$1.line 2>$R/$1.err
  local rc=$? e=$(date +%s.%N)
  printf '%s\texit %s\t%.2f s\t%s\n' "$1" "$rc" "$(python3 -c "print($e - $s)")" "$(cat $R/$1.line)" | tee -a $OUT/merged-hook.txt
}
for i in 1 2 3; do hook idle-$i; done
python3 benchmarks/device/nodestate/busy.py /tmp/busy.pid & B=$!
while [ ! -s /tmp/busy.pid ]; do sleep 0.2; done
hook busy; kill $B; wait $B 2>/dev/null; sleep 1
python3 benchmarks/device/nodestate/busy.py /tmp/hold.pid --hold 0.7 --idle & B=$!
while [ ! -s /tmp/hold.pid ]; do sleep 0.2; done
hook memhold; kill $B; wait $B 2>/dev/null; sleep 1
hook idle-after
tar czf $OUT/merged.tar.gz -C $OUT merged && rm -rf $R
