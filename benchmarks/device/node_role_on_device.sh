#!/usr/bin/env bash
# A node's role on the device (issue 27 item 4, and the WARN of item 2),
# from a clean copy of the repository.  Needs: nvcc, python3 with torch
# (benchmarks/device/nodestate/busy.py), the offline wheels in .whl
# (jsonschema, ruamel.yaml, nvidia-ml-py), for (c) the mirror in .mirror
# (nccl-tests) and Open MPI.  Slurm is the stand-in scontrol of
# benchmarks/device/node_role/scontrol (the hook runs as slurmd runs it:
# SLURMD_NODENAME=n01); each step is bounded (timeout); its line, exit
# status and wall time go to $OUT1/node-role-summary.txt, every --json
# detail, log and the PCI bus of the machine into $OUT1/node-role.tgz.
#  a. a foreign process computing on GPU 0 (busy.py) while Slurm says the
#     node is ALLOCATED: no drain (exit 0, "HEALTHY: node state only
#     (allocated to a job: ...: no probe)"), no probe started, the process
#     named as the job's
#  b. the same process with the node IDLE: named and drained (exit 1,
#     "UNHEALTHY: reset ...: GPU 0 in use by pid ... leftover process on
#     an idle node: drain")
#  c. a healthy all_reduce probe whose every debug log gets an advisory
#     "NCCL WARN NET/IB : Got async event : GID table change" appended
#     (benchmarks/device/node_role/warn-launch) -> HEALTHY.  Needs two
#     GPUs (one GPU has no NCCL path: its all_reduce busbw is 0 and the
#     hook judges the copy matrix, which has no NCCL debug log): on one
#     GPU it is noted as not run.  Its verdict depends on the WARN table
#     classifying the GID change as advisory (issue 27 item 2).
# Usage (repo root on the device, .whl and .mirror carried):
#   bash benchmarks/device/node_role_on_device.sh "$OUT"
set -u
source "$(dirname "$0")/_clean_copy.sh" "${1:-${OUT:-/tmp/out}}"
L=$K/logs
S=$OUT1/node-role-summary.txt
: > "$S"
export NCCL_NVLS_ENABLE=0
save() { tar -C /tmp -czf "$OUT1/node-role.tgz" keep 2>/dev/null; }
note() { echo "$*" | tee -a "$S"; }
wheels_to_site
nvidia-smi -L > $L/machine.txt 2>&1; git -C "$SRC" rev-parse HEAD >> $L/machine.txt 2>/dev/null
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
note "GPUs: $NGPU"
# the machine's PCI bus as the hook reads it (a fixture for tests/fixtures/sysfs)
for d in /sys/bus/pci/devices/*; do
  echo "$(basename $d) $(cat $d/vendor 2>/dev/null) $(cat $d/class 2>/dev/null) $(cat $d/device 2>/dev/null)"
done > $K/pci-bus.txt
python3 -c 'from ccl_health.evidence.nodestate import pci; print(pci.gpus())' > $K/pci-gpus.txt 2>&1
note "PCI bus GPUs (ccl_health.evidence.nodestate.pci): $(cat $K/pci-gpus.txt)"

# Slurm: the stand-in scontrol, first on PATH; the hook runs as slurmd runs it
SB=/tmp/slurmbin; mkdir -p $SB
cp benchmarks/device/node_role/scontrol $SB/scontrol; chmod +x $SB/scontrol
export SLURMD_NODENAME=n01 FAKE_SLURM_CALLS=$K/scontrol-calls.txt PATH=$SB:$PATH

# the copy matrix program and a reference of this GPU's own copies (half of
# what it measures now: the healthy node passes, a fault still shows), as
# hostile_hook_on_device.sh makes them
P=/tmp/prefix; mkdir -p $P/bin
timeout 300 nvcc -O2 -o $P/bin/ccl-health-links builders/src/ccl_health_links.cu > $L/nvcc.log 2>&1 ||
  note "nvcc: ccl-health-links did not build (see logs/nvcc.log)"
timeout 60 $P/bin/ccl-health-links > $K/links-capture.txt 2>&1
rm -rf /tmp/ref && cp -r reference /tmp/ref
timeout 60 python3 benchmarks/device/_links_reference.py $K/links-capture.txt /tmp/ref/local.yaml \
  node_role_on_device.sh > $L/mkref.log 2>&1 || note "reference: not made (logs/mkref.log)"

hook() {  # name, then env assignments and options after --; runs the hook once, bounded
  local name=$1; shift
  local s e rc envs=() opts=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift; opts=("$@")
  s=$(date +%s.%N)
  env "${envs[@]}" timeout -s KILL 180 python3 -m ccl_health.hook --no-record \
    --json $K/$name.json "${opts[@]}" > $K/$name.line 2> $K/$name.err
  rc=$?
  e=$(date +%s.%N)
  printf '%s\texit %s\t%.2f s\t%s\n' "$name" "$rc" "$(python3 -c "print($e - $s)")" \
    "$(cat $K/$name.line)" | tee -a "$S"
  python3 - "$K/$name.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as err:
    print('  no --json document:', err); sys.exit()
node = (d.get('role') or {}).get('node') or {}
print(f"  verdict {d.get('verdict')}, probes run: {len(d.get('probes') or [])}, "
      f"Slurm State={node.get('state')} job={node.get('has_job')} "
      f"Gres={node.get('gres')}, scontrol {(d.get('role') or {}).get('seconds')} s")
PY
}

# a, b: a foreign process computing on GPU 0, the node allocated, then idle
(
  rm -f /tmp/busy.pid
  timeout -s KILL 300 python3 benchmarks/device/nodestate/busy.py /tmp/busy.pid > $L/busy.log 2>&1 & B=$!
  for i in $(seq 150); do [ -s /tmp/busy.pid ] && break; sleep 0.2; done
  note "  busy.py pid $(cat /tmp/busy.pid 2>/dev/null)"
  hook a-allocated-foreign CCL_HEALTH_REFERENCE_DIR=/tmp/ref FAKE_SLURM_STATE=ALLOCATED -- --tests-prefix $P
  hook a2-mixed-foreign CCL_HEALTH_REFERENCE_DIR=/tmp/ref FAKE_SLURM_STATE=MIXED -- --tests-prefix $P
  hook b-idle-foreign CCL_HEALTH_REFERENCE_DIR=/tmp/ref FAKE_SLURM_STATE=IDLE -- --tests-prefix $P
  kill $B 2>/dev/null; wait $B 2>/dev/null
)
hook b2-idle-clean CCL_HEALTH_REFERENCE_DIR=/tmp/ref FAKE_SLURM_STATE=IDLE -- --tests-prefix $P
hook b3-allocated-clean CCL_HEALTH_REFERENCE_DIR=/tmp/ref FAKE_SLURM_STATE=ALLOCATED -- --tests-prefix $P
save

# c: a healthy all_reduce probe with an advisory WARN in every debug log
if [ "$NGPU" -ge 2 ]; then
  (
    nt=$(ls "$CCL_HEALTH_MIRROR"/nccl-tests-*.tar.gz 2>/dev/null | head -1)
    rm -rf /tmp/nt && mkdir -p /tmp/nt && tar -C /tmp/nt -xzf "$nt" --strip-components=1 &&
      cd /tmp/nt && timeout 400 make -j"$(nproc)" MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi \
        NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > $L/nccl-tests-make.log 2>&1 ||
      note "nccl-tests: did not build (logs/nccl-tests-make.log)"
  )
  NT=/tmp/nt-prefix; mkdir -p $NT/bin; ln -sf /tmp/nt/build/all_reduce_perf $NT/bin/all_reduce_perf
  # the GPUs' all_reduce of 1 GiB without the WARN first; the reference is
  # half of it (a healthy node passes, the WARN alone decides)
  hook c0-baseline CCL_HEALTH_REFERENCE_DIR=/tmp/ref -- --tests-prefix $NT --no-pairs
  python3 - $K/c0-baseline.json /tmp/ref/local.yaml "$NGPU" > $L/mkref-c.log 2>&1 <<'PY' || note "reference for c: not made (logs/mkref-c.log)"
import json, sys
import yaml
d = json.load(open(sys.argv[1]))
bw = max(p['busbw'] for p in d['probes'])
doc = yaml.safe_load(open(sys.argv[2]))
n = int(sys.argv[3])
entries = [e for e in doc['partitions']['gpu']['entries']
           if not (e['transport'] == 'intra' and e['collective'] == 'all_reduce'
                   and e['nodes'] == 1 and e['gpus_per_node'] == n)]
entries.append({'transport': 'intra', 'collective': 'all_reduce', 'nodes': 1,
                'gpus_per_node': n, 'tolerance': 0.1,
                'source': 'this machine, half of the c0-baseline probe (node_role_on_device.sh)',
                'busbw': {'1GiB': round(bw / 2, 2)}})
doc['partitions']['gpu']['entries'] = entries
yaml.safe_dump(doc, open(sys.argv[2], 'w'), sort_keys=False)
print('reference', bw / 2)
PY
  hook c-warn-gid-change CCL_HEALTH_REFERENCE_DIR=/tmp/ref NODE_ROLE_NOTE=$K/warn-launch.txt \
    NODE_ROLE_LAUNCHER="mpirun --bind-to none -np" -- --tests-prefix $NT --no-pairs \
    --launcher "$PWD/benchmarks/device/node_role/warn-launch"
  note "  $(cat $K/warn-launch.txt 2>/dev/null)"
else
  note "c-warn-gid-change: not run: $NGPU GPU (one GPU has no NCCL path: the hook judges its copy matrix, which has no NCCL debug log)"
fi
save

# c1 (any GPU count): the WARN judgement on a real NCCL run of this GPU: two
# ranks on GPU 0, each told it is another host (NCCL_HOSTID), over
# NET/Socket; scripts/explain judges its output and debug logs as they are,
# then with advisory WARNs appended to every rank's log (an IB GID change
# event, a skipped HCA, an unqueryable port: the upstream code goes on after
# each), then with a fatal one (a CUDA failure): the advisories change
# nothing and are named, the fatal one is a crash
(
  nt=$(ls "$CCL_HEALTH_MIRROR"/nccl-tests-*.tar.gz 2>/dev/null | head -1)
  if [ ! -x /tmp/nt/build/all_reduce_perf ]; then
    rm -rf /tmp/nt && mkdir -p /tmp/nt && tar -C /tmp/nt -xzf "$nt" --strip-components=1 &&
      (cd /tmp/nt && timeout 400 make -j"$(nproc)" MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi \
        NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > $L/nccl-tests-make.log 2>&1) ||
      note "nccl-tests: did not build (logs/nccl-tests-make.log)"
  fi
  W=/tmp/c1; rm -rf $W; mkdir -p $W; cd $W || exit
  printf '#!/bin/bash\nexport NCCL_HOSTID=ccl-health-rank-${OMPI_COMM_WORLD_RANK:-0} NCCL_TESTS_DEVICE=0\nexec /tmp/nt/build/all_reduce_perf "$@"\n' > wrap.sh
  chmod +x wrap.sh
  timeout 180 mpirun --allow-run-as-root --bind-to none -np 2 -x NCCL_DEBUG=INFO \
    -x NCCL_DEBUG_FILE=$W/nccl-debug.%h.%p.log -x NCCL_NVLS_ENABLE=0 \
    ./wrap.sh -g 1 -b 64M -e 256M -f 2 -n 10 -w 2 > all_reduce.out 2> mpirun.err
  RC=$?
  note "c1 all_reduce over NET/Socket, 2 ranks on GPU 0: exit $RC, $(grep -c 'via NET/Socket' nccl-debug.*.log | tr '\n' ' ')"
  explain_as() {  # name, then the files
    local name=$1; shift
    timeout 120 python3 -m ccl_health.explain --json --transport net-socket \
      --nodes 1 --gpus-per-node 2 --exit-status $RC --reference $W/ref.yaml \
      --partition gpu "$@" > $K/$name.json 2> $K/$name.err
    local rc=$?
    python3 - $K/$name.json $name $rc <<'PY' 2>&1 | tee -a "$S"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as err:
    print(f'{sys.argv[2]}\texit {sys.argv[3]}\tno JSON: {err}'); sys.exit()
ws = d.get('warns') or []
print(f"{sys.argv[2]}\texit {sys.argv[3]}\tverdict {d.get('verdict')}\tproven {(d.get('transport') or {}).get('proven')}"
      f"\twarns: {len(ws)}\treason: {str(d.get('reason'))[:200]}")
for w in ws[:6]:
    print('   ', json.dumps(w)[:300])
PY
  }
  cp -r $W $K/c1-run
  # a reference of this run's own key: half of what it measured (a healthy
  # run passes; what decides below is the WARN lines alone)
  timeout 120 python3 -m ccl_health.explain --json --transport net-socket \
    --nodes 1 --gpus-per-node 2 --exit-status $RC all_reduce.out nccl-debug.*.log > $K/c1-measured.json 2>/dev/null
  python3 - $K/c1-measured.json $W/ref.yaml > $L/mkref-c1.log 2>&1 <<'PY' || note "reference for c1: not made (logs/mkref-c1.log)"
import json, sys
import yaml
d = json.load(open(sys.argv[1]))
bw = {r['size']: round(r['busbw'] / 2, 3) for r in d['rows'] if r['busbw']}
yaml.safe_dump({'system': 'device', 'partitions': {'gpu': {'entries': [{
    'transport': 'net-socket', 'collective': 'all_reduce', 'nodes': 1,
    'gpus_per_node': 2, 'tolerance': 0.1,
    'source': 'half of this run (node_role_on_device.sh c1)',
    'busbw': bw}]}}}, open(sys.argv[2], 'w'), sort_keys=False)
print(bw)
PY
  cp $W/ref.yaml $K/c1-reference.yaml 2>/dev/null
  explain_as c1-as-run all_reduce.out nccl-debug.*.log
  for f in nccl-debug.*.log; do
    h=$(head -1 $f | cut -d' ' -f1)
    { echo "$h [0] NCCL WARN NET/IB : Got async event : GID table change"
      echo "$h [0] NCCL WARN NET/IB : Unable to open device mlx5_4"
      echo "$h [0] NCCL WARN NET/IB : Unable to query port_num 2"
      echo "$h [0] NCCL WARN NET/IB : Got async event : port active"; } >> $f
  done
  explain_as c1-advisory-warns all_reduce.out nccl-debug.*.log
  f=$(ls nccl-debug.*.log | head -1); h=$(head -1 $f | cut -d' ' -f1)
  echo "$h [0] NCCL WARN Cuda failure 'an illegal memory access was encountered'" >> $f
  explain_as c1-fatal-warn all_reduce.out nccl-debug.*.log
  mkdir -p $K/c1-run/with-warns && cp nccl-debug.*.log $K/c1-run/with-warns/ 2>/dev/null
)
save
cp "$S" $K/ && save
cat "$S"
