#!/usr/bin/env bash
# Issue 14 (fleet) on one H100: the wall time of a two-"node" pair step
# (2 ranks on the one GPU, each its own NCCL_HOSTID: NCCL takes them for
# two hosts and goes through its network path, NET/Socket) and of the node
# step (the health hook).  Output: $OUT/fleet-device.tgz
set -u
REPO=$(pwd)
K=/tmp/keep; mkdir -p $K
export NCCL_NVLS_ENABLE=0
( nvidia-smi -L; nproc; date -u ) > $K/machine.txt 2>&1
cd /tmp && tar xzf "$REPO/.dev-fleet/nccl-tests-2.19.6.tar.gz" && cd nccl-tests-2.19.6
s=$(date +%s.%N)
make -j16 MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > $K/build.log 2>&1
echo "build rc $? $(python3 -c "print(f'{$(date +%s.%N)-$s:.1f} s')")" >> $K/build.log
B=/tmp/nccl-tests-2.19.6/build
mkdir -p /tmp/wrap/bin
printf '#!/bin/bash\nexport NCCL_HOSTID=fleet-node-${OMPI_COMM_WORLD_RANK:-0} NCCL_TESTS_DEVICE=0\nexec %s/all_reduce_perf "$@"\n' "$B" > /tmp/wrap/bin/all_reduce_perf
chmod +x /tmp/wrap/bin/all_reduce_perf
cd "$REPO"
T() { local tag=$1; shift; local s=$(date +%s.%N); timeout 60 "$@" > $K/$tag.out 2>&1; local rc=$?
  python3 -c "import sys; print(f'{sys.argv[4]}\twall\t{float(sys.argv[2])-float(sys.argv[1]):.2f}\trc\t{sys.argv[3]}')" "$s" "$(date +%s.%N)" "$rc" "$tag" >> $K/timings.tsv; }
# the pair step exactly as the fleet's default step_probe: -b 1G -e 1G -g 1 -n 20 -w 5 -T 120
for i in 1 2 3; do
  T pair-1G-$i mpirun --allow-run-as-root --bind-to none -np 2 -x NCCL_NVLS_ENABLE -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET \
    /tmp/wrap/bin/all_reduce_perf -b 1G -e 1G -g 1 -n 20 -w 5 -T 120
done
for i in 1 2; do
  T pair-256M-$i mpirun --allow-run-as-root --bind-to none -np 2 -x NCCL_NVLS_ENABLE \
    /tmp/wrap/bin/all_reduce_perf -b 256M -e 256M -g 1 -n 20 -w 5 -T 120
done
python3 -m pip install -q --no-index --find-links .dev-fleet/whl --break-system-packages jsonschema ruamel.yaml > $K/pip.log 2>&1
# the node step: the health hook on this node (1 GPU), nccl-tests from this build
mkdir -p /tmp/tp/bin && cp $B/all_reduce_perf /tmp/tp/bin/
for i in 1 2; do
  T hook-$i scripts/ccl-health-check --tests-prefix /tmp/tp --json $K/hook-$i.json --no-record
done
tar -C /tmp -czf "$OUT/fleet-device.tgz" keep
cat $K/timings.tsv; tail -3 $K/build.log
grep -h -E "via NET|HOSTID|Avg bus|^ +1073741824|^ +268435456" $K/pair-1G-1.out $K/pair-256M-1.out | head -12
cat $K/hook-1.out | tail -3
