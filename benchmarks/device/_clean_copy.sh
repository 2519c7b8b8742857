# Sourced by the device scripts: OUT1 (what comes back), K (/tmp/keep, the
# tarball's content), the offline wheels and source mirror carried with the
# call, a clean copy of the repository in /tmp/clone (cwd afterwards), and
# the steps the scripts share (_steps.sh).
#   source benchmarks/device/_clean_copy.sh <out-dir> [database file]
source "$(dirname "${BASH_SOURCE[0]}")/_steps.sh"
OUT1=$(realpath -m "$1"); mkdir -p "$OUT1"
K=/tmp/keep; rm -rf "$K"; mkdir -p "$K/logs"
SRC=$(pwd)
export CCL_HEALTH_WHEELS=$SRC/.whl CCL_HEALTH_MIRROR=$SRC/.mirror
export CCL_HEALTH_CACHE=/tmp/ccl-cache PYTHONUNBUFFERED=1
[ -n "${2:-}" ] && export CCL_HEALTH_DB=$2
rm -rf /tmp/clone && mkdir /tmp/clone
tar -C "$SRC" --exclude=./.whl --exclude=./.mirror -cf - . | tar -C /tmp/clone -xf -
cd /tmp/clone || exit 1
