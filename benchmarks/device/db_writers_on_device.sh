#!/usr/bin/env bash
# Issue 30 on the device machine (its GPUs unused): 64 and 8 health hooks
# writing at once to PostgreSQL, directly and through PgBouncer in
# transaction mode (benchmarks/db_scale.py --set writers), on a machine whose
# cores are not shared with other work: the 2-core test machine runs the 64
# writers, the server and the pooler on the same 2 cores, so its latencies are
# its own queue.  The writers stand for 64 nodes' hooks: run once sharing
# all cores with the server (an upper bound for a site's), once with the
# server and pooler pinned to a quarter of the cores and the writers to the
# rest (CCL_HEALTH_DB_CORES / CCL_HEALTH_WRITER_CORES).
# Carried (.dbwhl, ignored by git): psycopg and psycopg-binary 3.3.9 and the
# suite's pure-Python needs (jsonschema, ruamel.yaml, ...); the PostgreSQL 16.2
# server binaries of the pgserver 0.1.4 wheel (no install: unpacked); Debian
# 12's pgbouncer 1.18 with its libevent and c-ares (dpkg-deb -x).
# Making .dbwhl here (Python 3.12 wheels for the device; Debian 12 packages):
#   P="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
#      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .dbwhl"
#   pip download $P psycopg==3.3.9 psycopg-binary==3.3.9 pgserver==0.1.4 \
#     typing_extensions pytest pluggy iniconfig packaging pygments pyyaml \
#     jinja2 markupsafe attrs jsonschema jsonschema-specifications referencing \
#     rpds-py ruamel.yaml ruamel.yaml.clib nvidia-ml-py
#   (cd .dbwhl && apt-get download pgbouncer libevent-2.1-7 libc-ares2)
# Usage (repo root on the device):
#   bash benchmarks/device/db_writers_on_device.sh <out-dir>
set -u
source "$(dirname "$0")/_clean_copy.sh" "$1"
D=$SRC/.dbwhl
V=/tmp/dbv; rm -rf $V /tmp/pg /tmp/pgb
python3 -m venv --system-site-packages $V
$V/bin/pip install -q --no-index --no-deps $(ls $D/*.whl | grep -v pgserver) > $K/logs/pip.txt 2>&1
# unpack the server binaries keeping their modes (zipfile alone drops them)
python3 - "$(ls $D/pgserver-*.whl)" /tmp/pg <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for i in z.infolist():
        p = z.extract(i, sys.argv[2])
        mode = i.external_attr >> 16
        if mode:
            os.chmod(p, mode)
PY
chmod -R a+rX /tmp/pg
for d in $D/*.deb; do dpkg-deb -x $d /tmp/pgb; done
id postgres > /dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin postgres
export CCL_HEALTH_PG_BIN=/tmp/pg/pgserver/pginstall/bin
export CCL_HEALTH_PGBOUNCER=/tmp/pgb/usr/sbin/pgbouncer
export LD_LIBRARY_PATH=/tmp/pgb/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CCL_HEALTH_PGBOUNCER_POOL=${POOL:-$(( $(nproc) / 2 ))}
export CCL_HEALTH_PGBOUNCER_PROCS=${POOLERS:-1}
{ date -u; nproc; free -g | head -2; $CCL_HEALTH_PG_BIN/postgres --version
  $CCL_HEALTH_PGBOUNCER --version; echo "pool $CCL_HEALTH_PGBOUNCER_POOL, $CCL_HEALTH_PGBOUNCER_PROCS pooler(s)"
  $V/bin/python -c 'import psycopg; print("psycopg", psycopg.__version__)'; } > $K/logs/machine.txt 2>&1
# two runs: everything sharing the cores, then the server and the pooler
# pinned to a quarter of them (a database host of its own) and the writers
# to the rest (standing for their own nodes)
n=$(nproc); q=$(( n / 4 ))
for run in shared pinned; do
  mkdir -p $K/$run
  if [ $run = pinned ]; then
    export CCL_HEALTH_DB_CORES=0-$(( q - 1 )) CCL_HEALTH_WRITER_CORES=$q-$(( n - 1 ))
  fi
  s=$(date +%s)
  $V/bin/python benchmarks/db_scale.py --set writers --work /tmp/dbw \
    --json $K/$run/db_writers.json --out $K/$run/db_writers.md > $K/$run/db_scale.txt 2>&1
  echo "exit $? after $(( $(date +%s) - s )) s" >> $K/$run/db_scale.txt
done
tar -C /tmp -czf "$OUT1/db-writers.tgz" keep
grep -h "writers:\|exit" $K/*/db_scale.txt; cat $K/logs/machine.txt
