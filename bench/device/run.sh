#!/usr/bin/env bash
# On the device machine (docs/testing.md): takes the part of bench/device/pack.sh's kit that
# this call carried (.device-kit/N) out of the checkout, since the next call's checkout replaces
# it; once every part is in, unpacks the kit and lays it out as npm run build would have:
# node_modules, dist/, ../shared's slide, Node 22 and the Temporal CLI. Then runs the command
# given, if any, from the repository root with that Node first on PATH:
#
#   bash bench/device/run.sh                                   (calls that only bring parts)
#   bash bench/device/run.sh node dist/cli/dev.js bench --services bench/scale.ts --workers 1,8
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
home=/tmp/sps-device-kit
mkdir -p "$home/parts"
shopt -s nullglob
for part in "$root"/.device-kit/*/kit-*; do mv "$part" "$home/parts/"; done

kit=$home/kit
if [[ ! -d $kit ]]; then
  parts=("$home"/parts/kit-*)
  ((${#parts[@]} > 0)) || { echo "run: no part of the kit here: carry .device-kit/N" >&2; exit 1; }
  name=${parts[0]##*/}
  expected=${name#kit-}
  expected=${expected%%-*}
  if ((${#parts[@]} < expected)); then
    echo "run: ${#parts[@]} of $expected parts in; carry the next one" >&2
    [[ $# -eq 0 ]] && exit 0
    exit 1
  fi
  sum=${name#kit-*-}
  sum=${sum%.*}
  actual=$(cat "${parts[@]}" | sha256sum | cut -d' ' -f1)
  [[ $actual == "$sum" ]] || { echo "run: the parts' sum is $actual, not $sum" >&2; exit 1; }
  cat "${parts[@]}" | xz -d | tar -C "$home" -xf -
  rm -rf "$home/parts"
fi

rm -rf "$root/node_modules" "$root/dist"
ln -s "$kit/node_modules" "$root/node_modules"
cp -a "$kit/dist" "$root/dist"
mkdir -p "$root/../shared/data/wsi"
cp "$kit/CMU-1-Small-Region.svs" "$root/../shared/data/wsi/"
export PATH=$kit/node/bin:$PATH
export TEMPORAL_CLI=$kit/temporal
export WORKFLOW_BUNDLE_PATH=$kit/workflow-bundle.js
echo "run: the kit is laid out ($(node --version), $(nproc) cores)" >&2
[[ $# -eq 0 ]] && exit 0
cd "$root"
exec "$@"
