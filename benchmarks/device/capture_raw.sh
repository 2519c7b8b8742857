#!/usr/bin/env bash
# Capture real nccl-tests / NCCL_DEBUG outputs on a GPU node, with bare commands
# (no ccl-health code), to serve as parser / transport-proof test fixtures.
# Usage (device): bash benchmarks/device/capture_raw.sh <mirror-dir> <out-dir>
set -u
MIRROR=$(realpath "$1"); OUTDIR=$(realpath -m "$2"); mkdir -p "$OUTDIR"
W=${WORK:-/tmp/ccl-capture}; rm -rf "$W"; mkdir -p "$W"; cd "$W"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI_HOME=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
J=$(nproc)
{
  date -u; hostname; nvidia-smi; nvidia-smi topo -m; nvidia-smi nvlink -s
  nvidia-smi --query-gpu=index,name,compute_cap,driver_version,pci.bus_id --format=csv
  nvcc --version; mpirun --version; ls -la /usr/lib/x86_64-linux-gnu/libnccl*
} > "$OUTDIR/node.txt" 2>&1
( cd "$MIRROR" && sha256sum -c SHA256SUMS --ignore-missing ) > "$OUTDIR/sha.txt" 2>&1
for t in nccl-tests-2.19.6 libfabric-1.22.0 aws-ofi-nccl-1.21.1; do tar xzf "$MIRROR/$t.tar.gz"; done
T0=$(date +%s.%N)
make -C nccl-tests-2.19.6 -j$J MPI=1 MPI_HOME=$MPI_HOME NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > "$OUTDIR/build_nccl_tests.log" 2>&1
T1=$(date +%s.%N)
( cd libfabric-1.22.0 && ./configure --prefix=$W/lf --disable-verbs --disable-psm2 --disable-psm3 --disable-efa --disable-usnic --disable-opx --disable-ucx --enable-tcp --enable-rxm --enable-shm && make -j$J install ) > "$OUTDIR/build_libfabric.log" 2>&1
T2=$(date +%s.%N)
( cd aws-ofi-nccl-1.21.1 && ./configure --prefix=$W/ofi --with-libfabric=$W/lf --with-cuda=/usr/local/cuda --disable-tests && make -j$J install ) > "$OUTDIR/build_ofi.log" 2>&1
T3=$(date +%s.%N)
echo "nccl-tests $(echo "$T1-$T0"|bc) s; libfabric $(echo "$T2-$T1"|bc) s; aws-ofi-nccl $(echo "$T3-$T2"|bc) s" > "$OUTDIR/build_times.txt"
B=$W/nccl-tests-2.19.6/build
ls $B $W/ofi/lib >> "$OUTDIR/build_times.txt" 2>&1
R="mpirun -np 2 --bind-to none"
NETX="-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
PLUG="-x NCCL_NET_PLUGIN=$W/ofi/lib/libnccl-net-ofi.so -x LD_LIBRARY_PATH=$W/ofi/lib:$W/lf/lib:${LD_LIBRARY_PATH:-}"
run() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  mkdir -p "$OUTDIR/$name"
  local s=$(date +%s.%N)
  timeout -s KILL $to "$@" > "$OUTDIR/$name/stdout.txt" 2> "$OUTDIR/$name/stderr.txt"
  local rc=$?
  echo "rc=$rc wall=$(echo "$(date +%s.%N)-$s"|bc)" > "$OUTDIR/$name/rc.txt"
}
D() { echo "-x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET,ENV -x NCCL_DEBUG_FILE=$OUTDIR/$1/nccl-debug.%h.%p.log"; }
run intra 300 $R $(D intra) -x NCCL_NVLS_ENABLE $B/all_reduce_perf -g 1 -b 8 -e 8G -f 2 -T 120 -J $OUTDIR/intra/result.json
run intra-text-interleaved 120 $R -x NCCL_DEBUG=INFO -x NCCL_NVLS_ENABLE $B/all_reduce_perf -g 1 -b 1M -e 64M -f 4
run net-socket 300 $R $(D net-socket) $NETX -x NCCL_NET_PLUGIN=none -x NCCL_NVLS_ENABLE $B/all_reduce_perf -g 1 -b 8 -e 1G -f 2 -T 120 -J $OUTDIR/net-socket/result.json
run net-plugin 300 $R $(D net-plugin) $NETX $PLUG -x FI_PROVIDER="tcp;ofi_rxm" -x NCCL_NVLS_ENABLE $B/all_reduce_perf -g 1 -b 8 -e 1G -f 2 -T 120 -J $OUTDIR/net-plugin/result.json
run net-plugin-gdr 120 $R $(D net-plugin-gdr) $NETX $PLUG -x FI_PROVIDER="tcp;ofi_rxm" -x NCCL_NET_GDR_LEVEL=PHB -x NCCL_NVLS_ENABLE $B/all_reduce_perf -g 1 -b 1M -e 16M -f 4 -T 60 -J $OUTDIR/net-plugin-gdr/result.json
run plugin-missing-fallback 120 $R $(D plugin-missing-fallback) $NETX -x NCCL_NET_PLUGIN=/nonexistent/libnccl-net-ofi.so -x NCCL_NVLS_ENABLE $B/all_reduce_perf -g 1 -b 1M -e 16M -f 4 -T 60 -J $OUTDIR/plugin-missing-fallback/result.json
run plugin-tcp-hang 45 $R $(D plugin-tcp-hang) $NETX $PLUG -x FI_PROVIDER=tcp -x NCCL_NVLS_ENABLE $B/all_reduce_perf -g 1 -b 1M -e 16M -f 4 -T 15 -J $OUTDIR/plugin-tcp-hang/result.json
run intra-1channel 120 $R $(D intra-1channel) -x NCCL_MAX_NCHANNELS=1 -x NCCL_NVLS_ENABLE $B/all_reduce_perf -g 1 -b 1M -e 1G -f 4 -T 60 -J $OUTDIR/intra-1channel/result.json
run missing-gpu 60 $R -x CUDA_VISIBLE_DEVICES=0 -x NCCL_NVLS_ENABLE $B/all_reduce_perf -g 1 -b 1M -e 16M -f 4 -T 30
for c in all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  run coll-$c 120 $R -x NCCL_NVLS_ENABLE $B/${c}_perf -g 1 -b 1K -e 1G -f 8 -T 60 -J $OUTDIR/coll-$c/result.json
done
run single-process-g2 60 $B/all_reduce_perf -g 2 -b 1G -e 1G -n 10 -w 2
run timing-1G 60 bash -c "time $R -x NCCL_NVLS_ENABLE $B/all_reduce_perf -g 1 -b 1G -e 1G -n 10 -w 2"
