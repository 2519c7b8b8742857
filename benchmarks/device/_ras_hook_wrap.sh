#!/bin/bash
# all_reduce_perf as the health hook's probe runs it (ras_hang_on_device.sh):
# the real program ($RAS_DEV_REAL) in the background; rank 0's wrapper
# stops rank $RAS_DEV_STOP (default 2; the next rank where that one holds
# RAS's port: a stopped holder cannot answer) 10 s in, after NCCL's
# start-up, and writes which one to $RAS_DEV_KEEP/hook-stopped.txt.  Each rank's pid goes to $RAS_DEV_PIDS/<rank>.
r=${OMPI_COMM_WORLD_RANK:-0}
stdbuf -oL "$RAS_DEV_REAL" "$@" &
p=$!
echo "$p" > "$RAS_DEV_PIDS/$r"
if [ "$r" = 0 ]; then
  ( sleep 10
    held=$(ss -ltnpH "sport = :${NCCL_RAS_ADDR##*:}" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1)
    v=${RAS_DEV_STOP:-2}; [ "pid=$(cat "$RAS_DEV_PIDS/$v")" = "$held" ] && v=$((v + 1))
    vp=$(cat "$RAS_DEV_PIDS/$v")
    kill -STOP "$vp"
    echo "stopped rank $v pid $vp (RAS port ${NCCL_RAS_ADDR:-?} held by ${held:-?})" > "$RAS_DEV_KEEP/hook-stopped.txt" ) &
fi
wait "$p"
