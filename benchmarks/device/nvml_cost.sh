#!/usr/bin/env bash
# What NVML costs the hook on every GPU of this machine (issue 42), from a
# clean copy of the repository, with one command (repo root on the device):
#   bash benchmarks/device/nvml_cost.sh "$OUT"
# Carried: .whl (the offline wheels: nvidia-ml-py among them, as the other
# device scripts).  Each number is the median of 20 runs in one process
# (benchmarks/device/_nvml_cost.py): nvmlInit + nvmlShutdown cold and with
# NVML already held (the hook's session); one full and one light
# nodestate.read() the old way (NVML started per reading, the NVLinks
# asked link by link) and the new way (the session held, the links in one
# field read), with the NVML calls of each; per GPU the links' states link
# by link against the one field read, and whether they agree.
# Writes $OUT/nvml-cost.md (the table, also printed) and
# $OUT/nvml-cost.json (every time measured).
set -u
source "$(dirname "$0")/_clean_copy.sh" "${1:-${OUT:-/tmp/out}}"
L=$K/logs
wheels_to_site
PY=${PY:-$(command -v python3)}
{ nvidia-smi -L; nvidia-smi topo -m; git -C "$SRC" rev-parse HEAD; } > $L/machine.txt 2>&1
cp $L/machine.txt "$OUT1/machine.txt"
timeout 300 $PY benchmarks/device/_nvml_cost.py measure "$OUT1/nvml-cost.json" 2> $L/measure.err ||
  { echo "measure failed (exit $?):"; tail -n 30 $L/measure.err; }
[ -s $L/measure.err ] && cp $L/measure.err "$OUT1/measure.err"
$PY benchmarks/device/_nvml_cost.py table "$OUT1/nvml-cost.json" > "$OUT1/nvml-cost.md" &&
  cat "$OUT1/nvml-cost.md"
