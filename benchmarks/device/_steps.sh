# Sourced by the device scripts (through _clean_copy.sh, or alone): the
# steps several of them take, each written once.  They use what the script
# has set: K (/tmp/keep), L (its logs), S (its summary), SRC (the carried
# repository), note (a line into the summary).
#   source benchmarks/device/_steps.sh

# note: a script's own (a line into its summary) replaces this one
note() { echo "$*"; }

# timed_step FILE CMD...: CMD run, then "wall <s> s, rc <rc>: CMD" appended
# to FILE (not to CMD's output, where a caller sends it); CMD's exit
# status returned
timed_step() {
  local log=$1 s rc; shift
  s=$(date +%s.%N); "$@"; rc=$?
  python3 -c "import sys; print(f'wall {float(sys.argv[2])-float(sys.argv[1]):.2f} s, rc {sys.argv[3]}: {sys.argv[4]}')" \
    "$s" "$(date +%s.%N)" "$rc" "$*" >> "$log"
  return $rc
}

# wheels_to_site: the wheels carried with the call ($SRC/.whl) installed
# into /tmp/site, and PYTHONPATH set to it and this copy (the hook's runs
# under env -i pass it on); a failed or missing install is noted
wheels_to_site() {
  if ls "$SRC"/.whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$SRC"/.whl/*.whl > "$L/pip.log" 2>&1 ||
      note "pip: the wheels did not install (see logs/pip.log)"
  else
    note "pip: no wheels in $SRC/.whl (carry .whl)"
  fi
  export PYTHONPATH=/tmp/site:$PWD
}

# pair_on_one_gpu REAL SITEDIR [PYTHON]: two ranks of one GPU as two hosts
# to NCCL (each its own NCCL_HOSTID, both on device 0): all_reduce_perf of
# the nccl-tests in REAL wrapped in $WRAP/bin (default /tmp/wrap), and
# SITEDIR/local.yaml, site/local.yaml with that wrapper as its nccl-tests
# (PYTHON: the one with yaml, default python3)
pair_on_one_gpu() {
  local wrap=${WRAP:-/tmp/wrap}
  mkdir -p "$wrap/bin" "$2"
  printf '#!/bin/bash\nexport NCCL_HOSTID=ccl-health-rank-${OMPI_COMM_WORLD_RANK:-0} NCCL_TESTS_DEVICE=0\nexec %s/all_reduce_perf "$@"\n' "$1" > "$wrap/bin/all_reduce_perf"
  chmod +x "$wrap/bin/all_reduce_perf"
  "${3:-python3}" - "$2/local.yaml" "$wrap" <<'PY'
import sys
import yaml
doc = yaml.safe_load(open('site/local.yaml'))
doc['build']['nccl_tests'] = {'prefix': sys.argv[2]}
yaml.safe_dump(doc, open(sys.argv[1], 'w'))
PY
}

# alarm_the_hook PID START BEFORE AFTER: SIGALRM to the process group PID
# (the hook started at START, date +%s.%N, in a session of its own) in the
# middle of its probes: the processes matching BEFORE (grep -E) before the
# signal, those matching AFTER a second after it ended, and the temporary
# folders of $TMPDIR left kept under $K/sigalrm-*; its exit status, time
# and line ($K/sigalrm.line) into the summary
alarm_the_hook() {
  local pid=$1 s=$2 rc e
  ps -eo pid,pgid,etimes,cmd | grep -E "$3" | grep -v grep > $K/sigalrm-ps-before.txt
  kill -ALRM -- -$pid
  wait $pid; rc=$?
  e=$(date +%s.%N)
  sleep 1
  ps -eo pid,pgid,etimes,cmd | grep -E "$4" | grep -v grep > $K/sigalrm-ps-after.txt
  ls -la $TMPDIR > $K/sigalrm-tmp-after.txt 2>&1
  printf '%s\texit %s\t%.2f s\t%s\n' sigalrm "$rc" "$(python3 -c "print($e - $s)")" "$(cat $K/sigalrm.line)" | tee -a "$S"
  note "  processes before: $(wc -l < $K/sigalrm-ps-before.txt), left after: $(wc -l < $K/sigalrm-ps-after.txt); temporary folders left: $(ls $TMPDIR | grep -c ccl-health)"
}

# keep_stages [OUTPUTS]: what each ReFrame output (the folders OUTPUTS
# names, default /tmp/o-*) left, into $K/<its name>: its reports (and
# perflogs), the stage's JSON, job scripts and CSV (builds left out), and
# one rank's NCCL debug log per test, its lines that show the transport
keep_stages() {
  local o n
  for o in ${1:-/tmp/o-*}; do
    [ -d "$o" ] || continue
    n=$(basename "$o"); mkdir -p "$K/$n"
    cp -r "$o/reports" "$o/perflogs" "$K/$n/" 2>/dev/null
    (cd "$o" && find stage -type f \( -name '*.json' -o -name 'rfm_job.*' -o -name '*.csv' \) 2>/dev/null |
      grep -v Build_ | while read -r f; do mkdir -p "$K/$n/$(dirname "$f")"; cp "$f" "$K/$n/$f"; done)
    # one rank's NCCL debug log per test is enough as evidence
    (cd "$o" && for d in stage/*/*/*/*; do l=$(ls $d/nccl-debug.*.log 2>/dev/null | head -1); [ -n "$l" ] && mkdir -p "$K/$n/$d" && grep -E "NCCL version|via |Loaded net plugin|Selected provider|Using network" "$l" > "$K/$n/$d/nccl-debug-excerpt.log"; done) 2>/dev/null
  done
}
