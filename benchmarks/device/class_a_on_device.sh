#!/usr/bin/env bash
# Issue 43, class A on a GPU device (ONE GPU is enough): a net plugin named
# by the environment and not found, then NCCL's own "Using network ..." and
# no channel line (one rank: NCCL sets up its network, connects nothing),
# as RCCL printed it on LUMI (tests/fixtures/published/rccl-debug_plugin-
# ofi-named-not-found_using-network-socket_no-channels_lumi-rccl-tests-
# readme.log).  Bare commands only (no ccl-health code runs here): nccl-tests'
# all_reduce_perf, one process, one GPU, NCCL_DEBUG=INFO, with
#   plugin-path-not-found   NCCL_NET_PLUGIN=/nonexistent/libnccl-net-ofi.so
#   plugin-name-not-found   NCCL_NET_PLUGIN=ofi (NCCL adds libnccl-net-*.so)
#   plugin-not-found-stdout the second, its debug lines on stdout among the rows
# Usage (repo root on the device, .mirror carried with nccl-tests):
#   bash benchmarks/device/class_a_on_device.sh <out-dir>
set -u
source "$(dirname "$0")/_clean_copy.sh" "$1"
L=$K/logs W=/tmp/cla; rm -rf $W; mkdir -p $W
export NCCL_NVLS_ENABLE=0
{ date -u; nvidia-smi -L; ls -la /usr/lib/x86_64-linux-gnu/libnccl*; } > $L/node.txt 2>&1
cd $W && tar xzf "$CCL_HEALTH_MIRROR/nccl-tests-2.19.6.tar.gz"
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
make -C nccl-tests-2.19.6 -j"$(nproc)" NVCC_GENCODE="-gencode=arch=compute_$CC,code=sm_$CC" > $L/build_nccl_tests.log 2>&1
B=$W/nccl-tests-2.19.6/build
A="-b 1M -e 64M -f 4 -n 5 -w 2 -g 1"
run() { # name env... (NCCL_DEBUG_FILE into the case's folder unless stdout)
  local name=$1; shift; mkdir -p $K/$name
  ( cd $K/$name && echo "env: $* all_reduce_perf $A" > command.txt
    env "$@" timeout -s KILL 120 $B/all_reduce_perf $A > stdout.txt 2> stderr.txt
    echo "rc=$?" > rc.txt )
}
run plugin-path-not-found NCCL_DEBUG=INFO NCCL_DEBUG_FILE=$K/plugin-path-not-found/nccl-debug.%h.%p.log NCCL_NET_PLUGIN=/nonexistent/libnccl-net-ofi.so
run plugin-name-not-found NCCL_DEBUG=INFO NCCL_DEBUG_FILE=$K/plugin-name-not-found/nccl-debug.%h.%p.log NCCL_NET_PLUGIN=ofi
run plugin-not-found-stdout NCCL_DEBUG=INFO NCCL_NET_PLUGIN=ofi
for d in $K/plugin-*; do echo "== $d $(cat $d/rc.txt)"; grep -h "Plugin\|Using network\|via NET\|Channel" $d/*.log $d/stdout.txt 2>/dev/null | head -8; done | tee $L/summary.txt
tar -C $K -czf "$OUT1/class-a.tgz" .
