#!/usr/bin/env bash
# Smoke test of ccl_health.torch_bench on a GPU machine (one GPU is enough):
# every mode at world size 1 on the GPU (NCCL), the mpi4py first call and
# every mode on 2 CPU ranks (gloo; the logic of 2 ranks, not the links).
# Writes $OUT/smoke.log and $OUT/smoke-json.tar.gz.
#   OUT=/tmp/smoke benchmarks/device/torch_smoke.sh
set -u
OUT=${OUT:-/tmp/torch-smoke}
mkdir -p "$OUT/json"
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
PAT=ccl_health/data/patterns/example.csv
J=$OUT/json
step() {   # name, command...
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$SECONDS
  timeout 60 "$@"
  echo "=== $name: rc=$? in $((SECONDS - t0)) s"
}
{
  nvidia-smi -L; nvidia-smi topo -m; nvidia-smi nvlink -s 2>&1 | head -5
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
  python3 -c 'import mpi4py, numpy; print("mpi4py", mpi4py.__version__, "numpy", numpy.__version__)'
  step gpu-bandwidth python3 -m ccl_health.torch_bench bandwidth --sizes 1M:16M \
      --collectives all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall \
      --json $J/gpu-bandwidth.json
  step gpu-bandwidth-ideal python3 -m ccl_health.torch_bench bandwidth --sizes 16M:64M:4 \
      --collectives all_reduce --nvlink-links 18 --json $J/gpu-bandwidth-ideal.json
  step gpu-first-call python3 -m ccl_health.torch_bench first-call --loops 2 \
      --json $J/gpu-first-call.json
  step gpu-replay python3 -m ccl_health.torch_bench replay --pattern $PAT \
      --json $J/gpu-replay.json --csv $J/gpu-replay.csv
  step gpu-replay-ring env NCCL_ALGO=Ring python3 -m ccl_health.torch_bench replay \
      --pattern $PAT --iters 5 --json $J/gpu-replay-ring.json
  step mpi4py-first-call mpirun -np 2 python3 -m ccl_health.torch_bench first-call \
      --backend mpi4py --loops 3 --json $J/mpi4py-first-call.json
  step cpu2-bandwidth mpirun -np 2 python3 -m ccl_health.torch_bench bandwidth --device cpu \
      --sizes 64K:1M:4 --collectives all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv \
      --iters 5 --warmup 2 --json $J/cpu2-bandwidth.json
  step cpu2-first-call mpirun -np 2 python3 -m ccl_health.torch_bench first-call --device cpu \
      --loops 2 --json $J/cpu2-first-call.json
  step cpu2-replay mpirun -np 2 python3 -m ccl_health.torch_bench replay --device cpu \
      --pattern $PAT --iters 2 --warmup 1 --json $J/cpu2-replay.json
  step bad-pattern python3 -m ccl_health.torch_bench replay \
      --pattern tests/fixtures/patterns/bad-datatype.csv
} > "$OUT/smoke.log" 2>&1
tar -C "$OUT" -czf "$OUT/smoke-json.tar.gz" json
tail -c 11000 "$OUT/smoke.log"
