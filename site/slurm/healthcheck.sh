#!/bin/bash
# Slurm HealthCheckProgram wrapper for the ccl-health node hook.
# slurm.conf:
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
# Nothing here is per site: the hook finds the system from the host name
# and reads its partition, launcher, GPU count and limit from
# site/<system>.yaml (`health:`) and config/systems/ (CCL_HEALTH_CHECK_LIMIT
# and the other CCL_HEALTH_* variables of the hook still override).
# Drains the node, with the one-line reason, only when the hook says
# UNHEALTHY (exit 1 and a line "UNHEALTHY: ..."); "could not check" (exit 2)
# and anything else (a missing hook: 126 / 127) never drain.
# Installed with pip (no checkout around this file): the hook is
# $CCL_HEALTH_CHECK, else ccl-health-check on PATH.
dir=$(cd "$(dirname "$0")/../.." && pwd)
hook="$dir/scripts/ccl-health-check"
[ -x "$hook" ] || hook=${CCL_HEALTH_CHECK:-ccl-health-check}
out=$("$hook" 2>/dev/null)
rc=$?
if [ $rc -eq 1 ] && [ "${out#UNHEALTHY: }" != "$out" ]; then
    scontrol update nodename="${SLURMD_NODENAME:-$(hostname -s)}" state=drain \
        reason="ccl-health: ${out#UNHEALTHY: }"
fi
logger -t ccl-health "$out"
exit 0
