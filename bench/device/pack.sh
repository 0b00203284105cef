#!/usr/bin/env bash
# Packs this build for a machine that reaches no registry (the device machine of
# docs/testing.md): Node 22, the production npm dependencies of this platform only, dist/, a
# prebuilt workflow bundle, the Temporal CLI and the slide the benchmarks copy from. The pack is
# xz in parts small enough for one device call each, under .device-kit/ (git-ignored), with
# bench/device/run.sh to unpack and run it there.
#
#   bash bench/device/pack.sh [PART_MIB]      (default 56: a call carries at most 64 MiB)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${SPS_CACHE_DIR:-$HOME/.cache/sps}
part_mib=${1:-56}
slide=$root/../shared/data/wsi/CMU-1-Small-Region.svs
out=$root/.device-kit
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

cd "$root"
npm run build
node=$cache/node-22/package/bin/node
temporal=${TEMPORAL_CLI:-$cache/bin/temporal}
for file in "$node" "$temporal" "$slide"; do
  [[ -f $file ]] || { echo "pack: $file is missing (npm run build and npm test fetch it)" >&2; exit 1; }
done

kit=$stage/kit
mkdir -p "$kit/node/bin"
cp "$node" "$kit/node/bin/node"
cp "$temporal" "$kit/temporal"
cp "$slide" "$kit/"
cp -a dist "$kit/dist"
"$node" -e "require('./dist/cli/runtime').loadWorkflowBundle().then((b) => require('node:fs').writeFileSync(process.argv[1], b.code))" \
  "$kit/workflow-bundle.js"

# Production dependencies as the Dockerfile prunes them, then only this platform's binaries.
cp package.json package-lock.json .npmrc "$stage/"
cp -a node_modules "$stage/node_modules"
(cd "$stage" && PATH=$(dirname "$node"):$PATH npm prune --omit=dev --ignore-scripts --no-audit --no-fund >/dev/null)
find "$stage/node_modules/onnxruntime-node/bin" -mindepth 2 -maxdepth 2 -type d ! -path '*/linux' -exec rm -rf {} +
find "$stage/node_modules/onnxruntime-node/bin" -mindepth 3 -maxdepth 3 -type d ! -name x64 -exec rm -rf {} +
find "$stage/node_modules/@temporalio/core-bridge/releases" -mindepth 1 -maxdepth 1 ! -name x86_64-unknown-linux-gnu -exec rm -rf {} +
mv "$stage/node_modules" "$kit/node_modules"
# The marker bootstrap.js compares with package-lock.json, newer than the lock once unpacked.
touch "$kit/node_modules/.package-lock.json"

rm -rf "$out"
mkdir -p "$out"
tar -C "$stage" -cf - kit | xz -T0 -6 | split -b "${part_mib}M" -d -a 1 - "$out/kit.tar.xz."
parts=$(ls "$out" | wc -l)
(cd "$out" && cat kit.tar.xz.* | sha256sum | cut -d' ' -f1 >"$stage/sum")
# Each part goes in a folder of its own: a call carries one folder, named with the count and sum.
sum=$(cat "$stage/sum")
for file in "$out"/kit.tar.xz.*; do
  index=${file##*.}
  mkdir -p "$out/$index"
  mv "$file" "$out/$index/kit-$parts-$sum.$index"
done
du -sh "$kit" "$out"/* >&2
echo "pack: $parts parts under .device-kit/ (carry .device-kit/N in call N, each running bash bench/device/run.sh)" >&2
