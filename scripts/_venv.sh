# Sourced by scripts/run and scripts/test: make (once) and enter the
# project's virtual environment, with the dependencies pyproject.toml lists
# (its single source; scripts/_deps.py reads them).
#   CCL_HEALTH_VENV    where the environment lives (default: <repo>/.venv)
#   CCL_HEALTH_PYTHON  the Python that creates it (default: python3)
#   CCL_HEALTH_WHEELS  a folder of wheels: install offline from it only
set -eu
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CCL_HEALTH_VENV:-$REPO/.venv}
PY=${CCL_HEALTH_PYTHON:-python3}
ccl_venv() {   # the extras of pyproject.toml to install: reframe report ...
  local extras=()
  for a in "$@"; do
    case $a in    # the former requirement files, for older callers
      *requirements-test.txt) extras+=(test) ;;
      *requirements.txt) extras+=(reframe report nvidia) ;;
      *) extras+=("$a") ;;
    esac
  done
  if [ ! -x "$VENV/bin/python" ]; then
    echo "ccl-health: creating the virtual environment $VENV" >&2
    "$PY" -m venv --system-site-packages "$VENV"
  fi
  local sp
  sp=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # the project itself, importable without building it (works offline)
  echo "$REPO" > "$sp/ccl-health.pth"
  # when python3 is itself a virtual environment (a site's PyTorch env, say),
  # let ours see its packages too instead of downloading them again.  Written
  # once, by the Python that made the environment: cron, NHC and slurmd run
  # these scripts with another PATH (cron's /usr/bin:/bin), whose python3
  # would write none and take those packages away from a working .venv
  if [ ! -f "$sp/zz-ccl-health-parent.pth" ]; then
    "$PY" -c 'import sys, site
if sys.prefix != sys.base_prefix: print("\n".join(site.getsitepackages()))' > "$sp/zz-ccl-health-parent.pth"
  fi
  # the requirements of these extras, from pyproject.toml
  local reqs
  reqs=$("$VENV/bin/python" "$REPO/scripts/_deps.py" "${extras[@]}") || return 1
  # nothing to do when these exact requirements were installed already
  local want stamp="$VENV/.ccl-health-requirements"
  want=$(printf '%s\n' "$reqs" | sha256sum | cut -c1-16)
  if [ -f "$stamp" ] && grep -qx "$want" "$stamp"; then return 0; fi
  local opts=(-q --disable-pip-version-check)
  if [ -n "${CCL_HEALTH_WHEELS:-}" ]; then
    opts+=(--no-index --find-links "$CCL_HEALTH_WHEELS")
  fi
  local list="$VENV/.ccl-health-requirements.txt"
  printf '%s\n' "$reqs" > "$list"
  "$VENV/bin/python" -m pip install "${opts[@]}" -r "$list" >&2 &&
    echo "$want" >> "$stamp"
}
# the extras scripts/run needs on this machine: NVML only where NVIDIA's
# driver is (an AMD node does without nvidia-ml-py)
ccl_run_extras() {
  echo reframe report
  if command -v nvidia-smi >/dev/null 2>&1; then echo nvidia; fi
}
