#!/bin/bash
# Slurm HealthCheckProgram wrapper for the ccl-health node hook.
# slurm.conf (this file in the checkout, or the copy scripts/init-site made
# in the site's folder: either finds the hook):
#   HealthCheckProgram=/opt/ccl-health/site/slurm/healthcheck.sh
#   HealthCheckInterval=300
#   HealthCheckNodeState=IDLE      # the probes want idle GPUs
# Run it on the GPU nodes only: slurm.conf is one file for every node, so
# install this script (or a HealthCheckProgram that calls it) on the GPU
# nodes and a no-op at the same path on the others.  Wherever it runs, the
# hook asks Slurm (scontrol -o show node $SLURMD_NODENAME): a node with no
# GPU in its GRES and none on its PCI bus is "SKIPPED: not a GPU node"
# (exit 0), and a node that runs a job (ALLOCATED, MIXED, COMPLETING:
# HealthCheckNodeState=ANY) gets no probe, only its state is read ("HEALTHY:
# node state only (allocated to a job: no probe) ..."; ECC, XID, a lost GPU
# still drain, a job's process on a GPU never does).
# Nothing here is per site: the hook finds the site's files through the
# site pointer (<checkout>/site.conf, written by scripts/init-site), with
# slurmd's empty environment too, the system from the host name, and reads
# its partition, launcher, GPU count and limit from site/<system>.yaml
# (`health:`) and config/systems/ (CCL_HEALTH_CHECK_LIMIT and the other
# CCL_HEALTH_* variables of the hook still override).
# Drains the node, with the one-line reason, only when the hook says
# UNHEALTHY (exit 1 and a line "UNHEALTHY: ..."); "could not check" (exit 2)
# and anything else never drain.
# Where the hook is: $CCL_HEALTH_CHECK, else <home>/scripts/ccl-health-check
# (a checkout) or <home>/bin/ccl-health-check (the virtual environment it
# is pip-installed in), where <home> is the line below (scripts/init-site
# writes it into its copy of this file), else this file's own checkout
# (site/slurm/ under it), else ccl-health-check on PATH.  None there: one
# line "COULD-NOT-CHECK: ..." (to syslog too), exit 2, nothing drained.
home=
say() {
    printf '%s\n' "$1"
    logger -t ccl-health "$1" 2>/dev/null
}
hook=${CCL_HEALTH_CHECK:-}
if [ -z "$hook" ]; then
    for dir in ${home:+"$home"} "$(cd "$(dirname "$0")/../.." && pwd)"; do
        for h in "$dir/scripts/ccl-health-check" "$dir/bin/ccl-health-check"; do
            if [ -x "$h" ]; then hook=$h; break 2; fi
        done
    done
fi
[ -n "$hook" ] || hook=$(command -v ccl-health-check 2>/dev/null)
if [ -z "$hook" ] || ! [ -x "$hook" ]; then
    say "COULD-NOT-CHECK: no ccl-health hook: ${CCL_HEALTH_CHECK:+CCL_HEALTH_CHECK=$CCL_HEALTH_CHECK is not executable; }none in ${home:-(no home= in $0)} nor beside $0, none on PATH (scripts/init-site writes home= into its copy)"
    exit 2
fi
out=$("$hook" 2>/dev/null)
rc=$?
if [ $rc -eq 1 ] && [ "${out#UNHEALTHY: }" != "$out" ]; then
    scontrol update nodename="${SLURMD_NODENAME:-$(hostname -s)}" state=drain \
        reason="ccl-health: ${out#UNHEALTHY: }"
fi
logger -t ccl-health "$out"
exit 0
