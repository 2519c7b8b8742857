#!/usr/bin/env bash
# Issue 40: a GPU node's first week as README.md and docs/ tell it, from a
# clean clone, on the GPUs the machine has (2 or 4; one GPU: it says why
# the proof needs two and stops).  Every command a person types is quoted
# from the doc that shows it: `doc FILE 'TEXT'` checks that FILE holds TEXT
# word for word before it runs (a changed doc stops the proof, naming the
# line), and commands.txt lists each with its source.
#
# Phases (each fits one device call of ~500 s, its own nccl-tests build
# included; one that needs earlier nights makes two and calibrates first):
#   main       README.md's main command, `scripts/run` (cold: .venv and every
#              build), then `scripts/calibrate --db ...` as its `next:` line
#              and docs/sites.md say
#   nights     two nights, the calibration from them (docs/sites.md), five
#              more (README.md's nightly line; short: the selection
#              docs/run.md shows, `-- -n 'AllReduceSweep%transport=intra'
#              -S max_size=1G`, after the nightly's `--` of its --help)
#   step       bare all_reduce_perf at the judged sizes (64 MiB-1 GiB)
#              without and with each candidate setting, the one that costs
#              3-5 % (_first_week_step.py) set in the nights' environment
#              for three nights (the third tells the DRIFT with its
#              `changed:` line), `scripts/report detect` and `scripts/report
#              accept` as docs/database.md shows, one more night
#   crash      a night with NCCL_NET=bogus (every rank fails at init: a CRASH
#              with its WARN, never CONTENDED), then two healthy nights
#              (recovered, told once; then all clear)
#   framework  the framework checks together, as docs/framework.md shows
#   all        every phase in one week (no per-call limit: BUDGET=3600)
# What comes back: $OUT/first-week-<phase>.tgz (every night's mail = its
# stdout, its stderr and exit code apart; the published pages; the
# database; the reference after calibration; the bare measurements;
# commands.txt, timings.txt, expectations.txt) and $OUT/first-week-<phase>.txt
# (the expectations and timings, readable without unpacking).
#
# On the device (repo root; .whl and .mirror carried: CCL_HEALTH_WHEELS and
# CCL_HEALTH_MIRROR, the offline variables of docs/sites.md):
#   bash benchmarks/device/first_week.sh PHASE "$OUT"
# (FIRST_WEEK_KEEP_CACHE=1 keeps ~/.cache/ccl-health of an earlier phase on
# a machine still warm; BUDGET=S the seconds a phase may take, default 540)
# Here, without GPUs: the same phases with every command written, not run,
# and the bare measurements made up (the doc quotes and the choice checked):
#   FIRST_WEEK_DRY=1 FIRST_WEEK_GPUS=4 bash benchmarks/device/first_week.sh all /tmp/fw-dry
set -u
PHASE=${1:-}
case "$PHASE" in
  main|nights|step|crash|framework|all) ;;
  *) echo "usage: $0 main|nights|step|crash|framework|all [OUT-DIR]" >&2; exit 2 ;;
esac
OUTDIR=$(realpath -m "${2:-${OUT:-/tmp/first-week-out}}"); mkdir -p "$OUTDIR"
HERE=$(cd "$(dirname "$0")" && pwd); SRC=$(cd "$HERE/../.." && pwd)
DRY=${FIRST_WEEK_DRY:-}
START=$(date +%s)
if [ "$PHASE" = all ]; then BUDGET=${BUDGET:-3600}; else BUDGET=${BUDGET:-540}; fi
ROOT=/tmp/first-week
if [ -n "$DRY" ]; then ROOT=$OUTDIR/dry; export HOME=$ROOT/home; fi
K=$ROOT/keep CLONE=$ROOT/clone
WWW=$HOME/ccl-health-www               # README.md's --publish ~/ccl-health-www
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
since() { echo $(( $(date +%s) - START )); }

# -- the GPUs -----------------------------------------------------------------
G=${FIRST_WEEK_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
if [ "${G:-0}" -lt 2 ]; then
  echo "first_week: this machine has ${G:-0} GPU(s); the proof needs 2 or more:" \
       "the sweep runs one MPI rank per GPU and its intra transport is NVLink" \
       "between two GPUs (with one GPU there is no intra case to measure, so no" \
       "night, step or crash to tell): run it on nvidia-h200-x2 or -x4" \
    | tee "$OUTDIR/first-week-$PHASE.txt"
  exit 2
fi

# -- a clean clone: the working tree's files git knows, nothing built -------
rm -rf "$ROOT"; mkdir -p "$K/nights" "$K/logs" "$K/bare" "$CLONE" "$HOME"
# the build cache too, unless FIRST_WEEK_KEEP_CACHE=1 (a warm machine's
# second phase: the site's builds of an earlier day, ~30 s saved)
if [ -z "$DRY" ]; then
  rm -rf "$WWW"; [ -z "${FIRST_WEEK_KEEP_CACHE:-}" ] && rm -rf "$HOME/.cache/ccl-health"
fi
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$SRC" log -1 --format='%H %s' > "$K/logs/revision.txt" 2>&1
  (cd "$SRC" && git ls-files -co --exclude-standard -z |
     grep -zv -e '^\.whl/' -e '^\.mirror/' -e '^site\.conf$' |
     tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$CLONE" -xf -
else
  (cd "$SRC" && tar --exclude=./.whl --exclude=./.mirror --exclude=./.venv \
     --exclude=./.git --exclude=./ccl-health-output --exclude=./site.conf \
     --exclude=./stage --exclude=./output --exclude='__pycache__' -cf - .) |
    tar -C "$CLONE" -xf -
fi
# an air-gapped node: the offline wheels and source mirror (docs/sites.md,
# Variables: CCL_HEALTH_WHEELS, CCL_HEALTH_MIRROR)
[ -d "$SRC/.whl" ] && export CCL_HEALTH_WHEELS=$SRC/.whl
[ -d "$SRC/.mirror" ] && export CCL_HEALTH_MIRROR=$SRC/.mirror
export PYTHONUNBUFFERED=1
unset CCL_HEALTH_DB CCL_HEALTH_OUTPUT CCL_HEALTH_PUBLISH CCL_HEALTH_SITE_DIR \
  CCL_HEALTH_REFERENCE_DIR CCL_HEALTH_CONFIG_DIR CCL_HEALTH_SITE_CONF \
  CCL_HEALTH_CACHE CCL_HEALTH_VENV CCL_HEALTH_ASSUME_GPUS CCL_HEALTH_LAUNCHER \
  CCL_HEALTH_SCHEDULER NCCL_NET NCCL_DEBUG
cd "$CLONE" || exit 1
{ nvidia-smi -L; nvidia-smi topo -m; } > "$K/logs/gpus.txt" 2>&1
env | grep -E '^(NCCL|CCL_HEALTH|CUDA|OMPI)_' | sort > "$K/logs/environment.txt"

save() {
  rm -rf "$K/www" "$K/reference"
  [ -d "$WWW" ] && cp -r "$WWW" "$K/www"
  cp -r reference "$K/reference" 2>/dev/null
  cp ccl-health-output/ccl-health.db "$K/" 2>/dev/null
  tar -C "$ROOT" -czf "$OUTDIR/first-week-$PHASE.tgz" keep 2>/dev/null
  { echo "first_week $PHASE on $G GPU(s)${DRY:+ (dry: nothing run)}, $(since) s"
    cat "$K/expectations.txt" "$K/timings.txt" 2>/dev/null; } \
    > "$OUTDIR/first-week-$PHASE.txt"
}

# doc FILE 'TEXT': TEXT, checked to be word for word in FILE of the clone
# ('help:CMD': in CMD --help); the proof stops where a doc no longer says it
doc() {
  local where=$1 text=$2 ok
  if [ "${where#help:}" != "$where" ] && [ -n "$DRY" ]; then  # no .venv made here
    ok=$(cd "$CLONE" && "${FIRST_WEEK_PYTHON:-$SRC/.venv/bin/python}" -m ccl_health.nightly --help 2>/dev/null |
         grep -cF -- "$text")
  elif [ "${where#help:}" != "$where" ]; then
    ok=$(cd "$CLONE" && ${where#help:} --help 2>/dev/null | grep -cF -- "$text")
  else
    ok=$(grep -cF -- "$text" "$CLONE/$where" 2>/dev/null)
  fi
  if [ "${ok:-0}" -eq 0 ]; then     # (in $(...) too: checked after, below)
    echo "first_week: $where does not say: $text" | tee -a "$K/expectations.txt" \
      "$K/doc-changed" >&2
    save; exit 3
  fi
  echo "    $where: $text" >> "$K/commands.txt"
  printf '%s' "$text"
}

# x LABEL 'VAR=VALUE ...' COMMAND: run it in the clone (the variables
# exported first), stdout to LABEL.out, stderr to .err, exit code to .rc
x() {
  local label=$1 envs=$2 cmd=$3 s rc
  mkdir -p "$K/$(dirname "$label")"
  echo "[$(since) s] ${envs:+$envs }$cmd   > $label.out" >> "$K/commands.txt"
  s=$(date +%s)
  if [ -n "$DRY" ]; then
    echo "$cmd" > "$K/$label.out"; : > "$K/$label.err"; rc=0
  else
    ( for v in $envs; do export "$v"; done; eval "$cmd" ) \
      > "$K/$label.out" 2> "$K/$label.err" < /dev/null
    rc=$?
  fi
  echo "$rc" > "$K/$label.rc"
  echo "rc $rc, $(( $(date +%s) - s )) s: $label ${envs:+[$envs]}" >> "$K/timings.txt"
  save
  return $rc
}

# expect WHAT 'TEST': TEST (a shell test) recorded ok / FAIL
expect() {
  local what=$1 t=$2
  if [ -n "$DRY" ]; then echo "dry   $what" >> "$K/expectations.txt"
  elif eval "$t"; then echo "ok    $what" >> "$K/expectations.txt"
  else echo "FAIL  $what" >> "$K/expectations.txt"; fi
}
has() { grep -qF -- "$2" "$K/$1"; }

# -- the commands, as the docs write them -----------------------------------
MAIN=$(doc README.md 'scripts/run      # set up .venv, build, measure every transport')
MAIN=${MAIN%% *}
CALIBRATE=$(doc docs/sites.md 'scripts/calibrate --db ccl-health-output/ccl-health.db --system <system> --partition <partition>')
CALIBRATE=${CALIBRATE/<system>/local}; CALIBRATE=${CALIBRATE/<partition>/gpu}
NIGHTLY=$(doc README.md 'scripts/nightly --system local --partition gpu --publish ~/ccl-health-www')
SELECT=$(doc docs/run.md "-- -n 'AllReduceSweep%transport=intra' -S max_size=1G")
DETECT=$(doc docs/database.md 'scripts/report detect')
ACCEPT=$(doc docs/database.md 'scripts/report accept <run-id> --reason')
FRAMEWORK=$(doc docs/framework.md "scripts/run --checks checks/framework_checks.py -- -n 'TorchBandwidth%transport=intra' -n FirstCall")
TRAINING=$(doc docs/framework.md "scripts/run --checks checks/framework_checks.py -- -n 'TorchTrainingStep%transport=intra' -n 'TorchTrainingStepPlugin%transport=net-plugin%'")
[ -e "$K/doc-changed" ] && { save; exit 3; }

n=0 calibrated=0
night() {  # LABEL ['VAR=VALUE ...']: one night; its mail is nights/NAME.out;
  # 1 only when the budget left none (its exit code is nights/NAME.rc)
  local label=$1 envs=${2:-} name
  if [ "$(left)" -lt 45 ]; then
    echo "FAIL  budget: night $label not started ($(left) s left)" >> "$K/expectations.txt"
    return 1
  fi
  [ $n -eq 0 ] && doc help:scripts/nightly '--night NIGHT' > /dev/null
  n=$((n + 1)); name=$(printf 'day%02d-%s' $n "$label"); LAST=$name
  x "nights/$name" "$envs" "$NIGHTLY --night $name $SELECT"
  return 0
}
mail() { echo "nights/$1.out"; }
run_of() {  # the run id of night $1 (its night.json)
  [ -n "$DRY" ] && { echo "nightly-dry-$1"; return; }
  .venv/bin/python -c "import json,sys; print(json.load(open(sys.argv[1]))['run_id'])" \
    "$WWW/nights/$1/night.json"
}
calibrate() {
  x "logs/calibrate-$1" "" "$CALIBRATE"
  expect "calibrate ($1) exits 0" "[ \$(cat $K/logs/calibrate-$1.rc) = 0 ]"
  calibrated=1
}
history() {  # what a phase needs before it: two nights and their calibration
  [ $n -ge 2 ] && [ $calibrated = 1 ] && return 0
  night first; night first; calibrate after-two-nights
}

phase_main() {
  x main/scripts-run "" "$MAIN"
  expect "main: ends with one next step" "grep -q '^next: ' $K/main/scripts-run.out || grep -q 'PASS' $K/main/scripts-run.out"
  expect "main: no [ FAILED ] left unexplained" "! grep -q 'FAILED' $K/main/scripts-run.out || grep -q \"ReFrame's \\[ FAILED \\] above counts\" $K/main/scripts-run.out"
  # the next step it names, as docs/sites.md writes it
  grep '^next: ' "$K/main/scripts-run.out" > "$K/main/next.txt" 2>/dev/null
  calibrate after-main
}

phase_nights() {
  night first; night first
  calibrate after-two-nights
  for i in 1 2 3 4 5; do night healthy || break; done
  local f
  for f in $(ls "$K/nights" | grep -- '-healthy.out$'); do
    expect "nights: $f all clear, exit 0" "has nights/$f 'all clear' && [ \$(cat $K/nights/${f%.out}.rc) = 0 ]"
  done
}

phase_step() {
  history
  local bin choice var val i
  bin=$(find "$HOME/.cache/ccl-health" -path '*/bin/all_reduce_perf' 2>/dev/null | head -1)
  [ -n "$DRY" ] && bin=/dry/bin/all_reduce_perf
  echo "bare binary: ${bin:-none} (the nights' build, ~/.cache/ccl-health)" >> "$K/bare/README.txt"
  if [ -z "$bin" ]; then echo "FAIL  step: no all_reduce_perf built by the nights" >> "$K/expectations.txt"; return 1; fi
  # the nights' job script's line (one rank per GPU, its -n 20 -w 5 -T 120,
  # site/local.yaml's environment) at the judged sizes
  bare() {  # LABEL [VAR=VALUE]
    local out=$K/bare/$1.out
    local envs="NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ${2:-}"
    local cmd="mpirun -np $G $bin -g 1 -b 64M -e 1G -f 2 -n 20 -w 5 -T 120"
    echo "env $envs $cmd" > "$K/bare/$1.cmd"
    if [ -n "$DRY" ]; then
      python3 - "$1" "$out" <<'EOF'
import sys
# made up: 1 % of noise in the bare runs; 4 % for nthr352
f = {'nthr384': 0.975, 'nthr352': 0.96, 'nthr320': 0.93}.get(
    sys.argv[1][5:], 0.997 if sys.argv[1] == 'base-2' else 1.0)
with open(sys.argv[2], 'w') as fp:
    for i, bw in enumerate((313.0, 329.0, 340.0, 347.0, 355.0)):
        size = (64 << 20) << i
        fp.write(f'{size:>12} {size // 4:>12} float sum -1 1.0 1.0 '
                 f'{bw * f:.2f} 0 1.0 1.0 {bw * f - 0.5:.2f} 0\n')
EOF
    else
      timeout 90 env $envs $cmd > "$out" 2>&1
    fi
    [ -n "${2:-}" ] && echo "$2" > "$K/bare/$1.env"
    echo "[$(since) s] bare $1 ${2:-}" >> "$K/commands.txt"
  }
  bare base-1
  i=0
  # the candidates nearest a 3-5 % step on 2x H200 (three first passes,
  # tests/fixtures/device/first-week/step-pass-{1,2,3}.txt: 24 channels of
  # NV18 cost nothing, 22 cost 5 % but 1.5 % at 256 MiB and 11 % at 64 MiB;
  # 352 threads 3.3 % (0.9 % at 64 MiB, 5.1 % at 512 MiB), 320 threads 5.5 %)
  for c in nthr352:NCCL_NTHREADS=352 nthr320:NCCL_NTHREADS=320; do
    [ "$(left)" -lt 200 ] && { echo "budget: candidates after ${c%%:*} not measured" >> "$K/bare/README.txt"; break; }
    bare "cand-${c%%:*}" "${c#*:}"
    i=$((i + 1)); [ $((i % 4)) = 0 ] && bare "base-$((i / 4 + 1))"
  done
  bare "base-last"
  python3 "$HERE/_first_week_step.py" "$K/bare" > "$K/bare/choice.txt" 2>&1
  cat "$K/bare/choice.txt" >> "$K/expectations.txt"
  choice=$(cat "$K/bare/choice.env" 2>/dev/null)
  expect "step: a setting costs 3-5 % bare (bare/choice.txt)" "[ -n '$choice' ]"
  save
  [ -z "$choice" ] && return 1
  var=${choice%%=*} val=${choice#*=}
  for i in 1 2 3; do
    night "step-$var" "$choice" || return 1
    [ $i -lt 3 ] && expect "step: night $i of 3 tells nothing yet (within the tolerance, not yet a drift)" \
      "head -1 $K/$(mail "$LAST") | grep -q 'all clear'"
  done
  expect "step: the third night tells the DRIFT" "has $(mail "$LAST") 'DRIFT local/gpu/intra'"
  expect "step: ... with its changed: line" "has $(mail "$LAST") 'changed: $var: (unset) -> $val'"
  x logs/detect-before-accept "" "$DETECT"
  x logs/accept "" "${ACCEPT/<run-id>/$(run_of "$LAST")} \"first_week.sh: $choice accepted as the new level\""
  expect "step: accept exits 0" "[ \$(cat $K/logs/accept.rc) = 0 ]"
  x logs/detect-after-accept "" "$DETECT"
  night "after-accept-$var" "$choice"
  expect "step: after accept, all clear (the drift told as recovered), exit 0" \
    "head -1 $K/$(mail "$LAST") | grep -q 'all clear' && [ \$(cat $K/nights/$LAST.rc) = 0 ]"
}

phase_crash() {
  history
  local crash
  night bogus-net "NCCL_NET=bogus"; crash=$LAST
  expect "crash: told as a CRASH" "has $(mail $crash) 'CRASH'"
  expect "crash: with its WARN" "has $(mail $crash) 'NET plugin'"
  expect "crash: the run's own ranks are not contention" "! has $(mail $crash) 'CONTENDED' && ! has $(mail $crash) 'in use by'"
  expect "crash: exit 1" "[ \$(cat $K/nights/$crash.rc) = 1 ]"
  night healthy-again
  expect "crash: the next night tells the recovery" "has $(mail "$LAST") 'recovered'"
  night healthy-again
  expect "crash: ... once" "! has $(mail "$LAST") 'recovered' && has $(mail "$LAST") 'all clear'"
}

phase_framework() {
  x framework/together "" "$FRAMEWORK"
  expect "framework: no rendezvous collision" "! has framework/together.out 'torch-bench.json: No such file'"
  expect "framework: every check has a verdict line" "grep -qE '^(intra|net-socket|net-plugin)' $K/framework/together.out || grep -q 'PASS' $K/framework/together.out"
  if [ "$(left)" -gt 250 ]; then x framework/training "" "$TRAINING"
  else echo "budget: docs/framework.md's training line not run ($(left) s left)" >> "$K/expectations.txt"; fi
}

case "$PHASE" in
  main) phase_main ;;
  nights) phase_nights ;;
  step) phase_step ;;
  crash) phase_crash ;;
  framework) phase_framework ;;
  all) phase_main; phase_nights; phase_step; phase_crash; phase_framework ;;
esac
echo "done: $PHASE, $n night(s), $(since) s" >> "$K/timings.txt"
save
cat "$OUTDIR/first-week-$PHASE.txt"
