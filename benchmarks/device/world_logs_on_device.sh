#!/usr/bin/env bash
# Issue 31 on a GPU device (ONE GPU): real NCCL logs of the classes the
# published set lacks, captured with bare commands (no ccl-health code runs
# here; the logs are read by `scripts/explain` and the cross-door tests at
# home, tests/test_world_logs_device.py).  Two ranks on the one GPU, each
# told it is another host (NCCL_HOSTID per rank, by a wrapper), so NCCL
# connects them through its network: Socket, or aws-ofi-nccl over
# libfabric's tcp;ofi_rxm.
#   net-not-found            NCCL_NET="AWS Libfabric", no plugin installed
#   net-renamed-plugin       the plugin loaded (it calls itself "Libfabric"
#                            since 1.x), NCCL_NET="AWS Libfabric" (a site's
#                            setting from before the rename)
#   provider-missing         the plugin loaded, FI_PROVIDER=cxi (not built
#                            here): the plugin fails to init, NCCL falls back
#   provider-missing-forced  the same with NCCL_NET=Libfabric
#   plugin-tagged            healthy plugin run, `mpirun --tag-output`,
#                            NCCL_DEBUG=INFO on stdout (interleaved with rows)
#   plugin-rows-only-2procs  healthy plugin run, no debug: the rank count
#                            from the header (nGpus x processes)
#   intra-one-proc-g2 / intra-two-procs   where the device has 2 GPUs
# Usage (repo root on the device, .mirror carried with nccl-tests, libfabric
# and aws-ofi-nccl):  bash benchmarks/device/world_logs_on_device.sh <out-dir>
set -u
source "$(dirname "$0")/_clean_copy.sh" "$1"
L=$K/logs
W=/tmp/wl; rm -rf $W; mkdir -p $W
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI_HOME=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
J=$(nproc)
{ date -u; hostname; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv
  ls /sys/class/infiniband 2>&1; ls -la /usr/lib/x86_64-linux-gnu/libnccl*; mpirun --version
  ( cd "$CCL_HEALTH_MIRROR" && sha256sum -c SHA256SUMS --ignore-missing ); } > $L/node.txt 2>&1
cd $W
for t in nccl-tests-2.19.6 libfabric-1.22.0 aws-ofi-nccl-1.21.1; do tar xzf "$CCL_HEALTH_MIRROR/$t.tar.gz"; done
s=$(date +%s)
make -C nccl-tests-2.19.6 -j$J MPI=1 MPI_HOME=$MPI_HOME NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > $L/build_nccl_tests.log 2>&1
( cd libfabric-1.22.0 && ./configure --prefix=$W/lf --disable-verbs --disable-psm2 --disable-psm3 --disable-efa --disable-usnic --disable-opx --disable-ucx --enable-tcp --enable-rxm --enable-shm && make -j$J install ) > $L/build_libfabric.log 2>&1
( cd aws-ofi-nccl-1.21.1 && ./configure --prefix=$W/ofi --with-libfabric=$W/lf --with-cuda=/usr/local/cuda --disable-tests && make -j$J install ) > $L/build_ofi.log 2>&1
echo "builds: $(( $(date +%s) - s )) s" > $L/timings.txt
B=$W/nccl-tests-2.19.6/build
printf '#!/bin/bash\nexport NCCL_HOSTID=wl-rank-${OMPI_COMM_WORLD_RANK:-0}\nexec "$@"\n' > $W/hostid; chmod +x $W/hostid
R="mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE"
PLUG="-x NCCL_NET_PLUGIN=$W/ofi/lib/libnccl-net-ofi.so -x LD_LIBRARY_PATH=$W/ofi/lib:$W/lf/lib:${LD_LIBRARY_PATH:-}"
run() { # name timeout mpirun-args... -- test args
  local name=$1 to=$2; shift 2; mkdir -p $K/$name
  local s=$(date +%s.%N)
  timeout -s KILL $to "$@" > $K/$name/stdout.txt 2> $K/$name/stderr.txt
  local rc=$?
  echo "rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$s,2))")" > $K/$name/rc.txt
  echo "$name: $(cat $K/$name/rc.txt): $*" >> $L/timings.txt
}
D() { echo "-x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET,ENV -x NCCL_DEBUG_FILE=$K/$1/nccl-debug.%h.%p.log"; }
A="-b 1M -e 64M -f 4 -n 5 -w 2 -T 60"
run net-not-found 120 $R $(D net-not-found) -x NCCL_NET="AWS Libfabric" $W/hostid $B/all_reduce_perf -g 1 $A
run net-renamed-plugin 120 $R $(D net-renamed-plugin) $PLUG -x FI_PROVIDER="tcp;ofi_rxm" -x NCCL_NET="AWS Libfabric" $W/hostid $B/all_reduce_perf -g 1 $A
run provider-missing 180 $R $(D provider-missing) $PLUG -x FI_PROVIDER=cxi $W/hostid $B/all_reduce_perf -g 1 $A
run provider-missing-forced 120 $R $(D provider-missing-forced) $PLUG -x FI_PROVIDER=cxi -x NCCL_NET=Libfabric $W/hostid $B/all_reduce_perf -g 1 $A
run plugin-tagged 180 $R --tag-output -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET $PLUG -x FI_PROVIDER="tcp;ofi_rxm" $W/hostid $B/all_reduce_perf -g 1 $A
run plugin-rows-only-2procs 180 $R $PLUG -x FI_PROVIDER="tcp;ofi_rxm" $W/hostid $B/all_reduce_perf -g 1 $A
if [ "$(nvidia-smi -L | grep -c '^GPU')" -ge 2 ]; then
  # two GPUs: the same ranks as one process with two GPUs (nGpus 2) and as
  # two processes (nGpus 1 each): the rank count a pasted part must not lose
  run intra-one-proc-g2 120 $B/all_reduce_perf -g 2 $A
  run intra-two-procs 120 $R -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET $B/all_reduce_perf -g 1 $A
fi
tar -C /tmp -czf "$OUT1/world-logs.tgz" keep
cat $L/timings.txt
