#!/usr/bin/env bash
# Issue 7 item 4 on the GPU device (2x H200), through ReFrame, from a clean
# copy of the repo:
#  the DDP training step (TorchTrainingStep: communication-bound `comm` and
#  compute-bound `compute` models; samples/s, median step time, share of
#  NCCL kernels from torch.profiler) over intra, net-socket and net-plugin
#  (the same model without and with the network plugin), and the
#  torch.distributed all_reduce sweep on NVLink up to 1 GiB with the ideal
#  busbw and efficiency columns (the NV18 topology parse is fixed).
# Usage (repo root on the device, .whl and .mirror carried):
#   bash benchmarks/device/training_on_device.sh <out-dir>
# Writes <out-dir>/training-outputs.tgz and <out-dir>/timings.txt (at most 8
# files come back from the device) and prints the figures at the end.
set -u
source "$(dirname "$0")/_clean_copy.sh" "$1" /tmp/train.db
save() {
  keep_stages
  cp /tmp/train.db $K/ 2>/dev/null
  tar -C /tmp -czf "$OUT1/training-outputs.tgz" keep
  cp $K/logs/timings.txt "$OUT1/" 2>/dev/null
}
T() { timed_step $K/logs/timings.txt "$@"; local rc=$?; save; return $rc; }
{ nvidia-smi -L; nvidia-smi topo -m
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
} > $K/logs/node.txt 2>&1
# net-plugin$ would not match: the model parameter follows the transport in
# the test's name (TorchTrainingStepPlugin %transport=net-plugin %model=comm);
# 'net-plugin%' leaves net-plugin-gdr out
T timeout 380 scripts/run --output /tmp/o-train --checks checks/framework_checks.py -- \
  -n 'TorchTrainingStep%transport=intra' -n 'TorchTrainingStep%transport=net-socket' \
  -n 'TorchTrainingStepPlugin%transport=net-plugin%' \
  -n 'TorchBandwidth%transport=intra%torch_collective=all_reduce' -S max_size=1G \
  > $K/logs/training.log 2>&1
save
# the figures, for the reply
python3 - <<'EOF' 2>&1 | tee $K/logs/figures.txt
import glob, json, os
rows = []
for f in sorted(glob.glob('/tmp/o-train/stage/*/*/*/*/torch-bench.json')):
    try:
        d = json.load(open(f))
    except ValueError as err:
        print(f, err); continue
    if d.get('mode') == 'train':
        s = d.get('summary') or {}
        rows.append((d.get('transport'), d.get('model'), s.get('samples_per_s'),
                     s.get('step_ms'), s.get('nccl_fraction'), s.get('params'),
                     d.get('global_batch'), d.get('profile_error', '')))
    elif d.get('mode') == 'bandwidth':
        print(f'# torch all_reduce over {d.get("transport")}: ideal '
              f'{d.get("ideal_busbw")} GB/s ({d.get("ideal_source")}); '
              f'torch {d.get("torch_version")}, NCCL {d.get("nccl_version")}')
        for r in (d.get('collectives') or {}).get('all_reduce', {}).get('rows', []):
            print(f'{r["size"]:>11} {r["time_us"]:>10.1f} us {r["busbw"]:>8.2f} GB/s '
                  f'ideal {r["ideal_busbw"]} eff {r["efficiency_pct"]} %')
print(f'{"transport":<11} {"model":<8} {"samples/s":>10} {"step ms":>9} {"NCCL %":>7} {"params":>10} {"batch":>6}')
for t, m, sps, ms, fr, p, gb, err in sorted(rows, key=lambda r: (r[1] or '', r[0] or '')):
    fmt = lambda v, f: 'N/A' if v is None else format(v, f)
    print(f'{t or "?":<11} {m or "?":<8} {fmt(sps, ".1f"):>10} {fmt(ms, ".2f"):>9} '
          f'{fmt(fr, ".1f"):>7} {fmt(p, "d"):>10} {fmt(gb, "d"):>6} {err}')
EOF
sed -n '/== ccl-health verdict ==/,$p' $K/logs/training.log
save
