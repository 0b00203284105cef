#!/usr/bin/env bash
# The benchmarks whose figures need more cores than a development machine has, one after the
# other in one device call, each log also under $OUT (what the call brings back). Run through
# bench/device/run.sh in the call that carries the kit's last part:
#
#   bash bench/device/run.sh bash bench/device/figures.sh [SIZE]          (default 16384x65536)
#
# WORKERS (default 1,2,4,8) and WORKER_CORES (default 2: each worker a host of 2 cores) set
# bench:scale's setups; STEP_LIMIT_S (default 420) bounds its step, so the call ends in time.
set -uo pipefail
out=${OUT:-/tmp/sps-figures}
mkdir -p "$out"
size=${1:-16384x65536}

step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*"
  timeout "$limit" node dist/cli/dev.js bench "$@" 2>&1 | tee "$out/$name.log"
  echo "== $name: exit ${PIPESTATUS[0]}"
}

step upload 120 --services bench/upload.ts --size-mib 1024 --rounds 3 --backends fs
step scale "${STEP_LIMIT_S:-420}" --services bench/scale.ts --size "$size" --profile \
  --workers "${WORKERS:-1,2,4,8}" --worker-cores "${WORKER_CORES:-2}"
