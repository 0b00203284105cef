import { createHash } from 'node:crypto';
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { finishPrediction, finishPredictionStore, type PredictionStoreLayout } from '../compute/prediction';
import { levelsInsideRows } from '../compute/prediction/band-pyramid';
import { markerArray, storeLevels } from '../compute/prediction/store';
import { folderStore, type KeyValueStore } from '../compute/zarr';
import { modelSpec } from '../models/registry';
import { cpuSeconds, median } from './cpu';
import { slideSize } from './synthetic-svs';

/**
 * A prediction job's postprocessing (`finishPredictionStore`: the pyramid levels that span
 * several bands, index-only shards for every key left out, the groups) on a store whose lower
 * levels the bands wrote, two ways in turn on the same store, the order alternating by round:
 * `reference`, the levels built by `PyramidBuilder` (one shard after another on the main thread)
 * and every key of every level looked up, as before bands stored every key; `writers`, what the
 * job runs now (`finishPrediction`: the levels on plane writers, no lookups, since the bands
 * stored every key). Prints the wall and CPU seconds of each, their ratio, how long the lookups
 * take, and checks that both wrote the same bytes.
 *   npm run bench:pyramid-levels [-- --size 50000|WxH --markers 14 --rounds 3 --writers N]
 *
 * The level below the first built is written with smooth values and noise, as predicted planes
 * are; the levels under it hold index-only shards, so that the lookups for missing keys find
 * every key, as after a real job.
 */
const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '50000' },
    markers: { type: 'string', default: '14' },
    rounds: { type: 'string', default: '3' },
    writers: { type: 'string' },
  },
});
const [width, height] = slideSize(values.size);
const spec = modelSpec('v0.7');
const layout: PredictionStoreLayout = {
  markers: spec.channels.slice(0, Number(values.markers)),
  widthPx: width,
  heightPx: height,
  heLevel: 0,
  pixelSizeUm: spec.mpp,
  shardSize: 1024,
  chunkSize: 512,
  model: spec.version,
  outputRange: spec.outputRange,
};
/** The level above those a band of 8 shard rows builds: postprocessing's first. */
const fromLevel = levelsInsideRows(layout, 8) + 1;
const root = path.join(process.env.SPS_TEST_SCRATCH!, 'store');

/** The stored level below `fromLevel` (smooth values and noise), and index-only shards below it. */
async function writeBandLevels(sink: KeyValueStore): Promise<void> {
  for (const [m, marker] of layout.markers.entries()) {
    const array = markerArray(layout, marker, fromLevel - 1);
    const shard = array.allocateShard();
    for (let y = 0; y < array.shardsY; y++) {
      for (let x = 0; x < array.shardsX; x++) {
        fillSmooth(shard, m * 7919 + y * 104729 + x);
        await array.writeShard(sink, y, x, shard);
      }
    }
    for (let level = 0; level < fromLevel - 1; level++)
      await markerArray(layout, marker, level).storeMissingShards(sink);
  }
}

function fillSmooth(shard: Uint16Array, seed: number): void {
  let noise = seed >>> 0 || 1;
  for (let i = 0; i < shard.length; i++) {
    noise ^= noise << 13;
    noise ^= noise >>> 17;
    noise ^= noise << 5;
    const wave = Math.sin((i % 1024) / 97 + seed) * Math.cos(i / 1024 / 131);
    shard[i] = 20000 + Math.round(12000 * wave) + ((noise >>> 0) & 255);
  }
}

/** The folders of the levels `fromLevel` and up, every marker's: what postprocessing writes. */
function builtLevelFolders(): string[] {
  return layout.markers.flatMap((marker) =>
    Array.from({ length: storeLevels(layout).length - fromLevel }, (_, k) =>
      path.join(root, 'markers', marker, String(fromLevel + k)),
    ),
  );
}

/** sha-256 of every stored file of the levels `fromLevel` and up, by key. */
async function levelDigests(): Promise<Map<string, string>> {
  const digests = new Map<string, string>();
  for (const folder of builtLevelFolders()) {
    for (const entry of await readdir(folder, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const file = path.join(entry.parentPath, entry.name);
      digests.set(
        path.relative(root, file),
        createHash('sha256')
          .update(await readFile(file))
          .digest('hex'),
      );
    }
  }
  return digests;
}

type Way = 'reference' | 'writers';

/** One way's postprocessing, timed, into levels emptied first: the bytes compared are its own. */
async function finish(way: Way, sink: KeyValueStore): Promise<{ wall: number; cpu: number }> {
  for (const folder of builtLevelFolders()) await rm(folder, { recursive: true, force: true });
  const options = { sink, layout, statistics: {}, fromLevel };
  const wall = performance.now();
  const cpu = cpuSeconds();
  if (way === 'reference') await finishPredictionStore(options);
  else
    await finishPrediction({
      ...options,
      everyShardStored: true,
      model: { spec },
      ...(values.writers ? { writers: Number(values.writers) } : {}),
    });
  return { wall: (performance.now() - wall) / 1000, cpu: cpuSeconds() - cpu };
}

async function main(): Promise<void> {
  const sink = folderStore(root);
  const written = performance.now();
  await writeBandLevels(sink);
  console.log(
    `store ${width} x ${height}, ${layout.markers.length} markers: level ${fromLevel - 1} written in ${((performance.now() - written) / 1000).toFixed(1)} s; postprocessing builds levels ${fromLevel} to ${storeLevels(layout).length - 1}`,
  );
  const times: Record<Way, { wall: number; cpu: number }[]> = { reference: [], writers: [] };
  let referenceBytes: Map<string, string> | undefined;
  for (let round = 0; round < Number(values.rounds); round++) {
    const order: Way[] = round % 2 === 0 ? ['reference', 'writers'] : ['writers', 'reference'];
    for (const way of order) {
      const time = await finish(way, sink);
      times[way].push(time);
      console.log(`round ${round + 1}, ${way}: ${time.wall.toFixed(2)} s, CPU ${time.cpu.toFixed(2)} s`);
      const digests = await levelDigests();
      referenceBytes ??= digests;
      const differing = [...digests].filter(([key, digest]) => referenceBytes!.get(key) !== digest);
      if (differing.length > 0 || digests.size !== referenceBytes.size)
        throw new Error(`${way} wrote other bytes: ${differing.slice(0, 3).map(([key]) => key)}`);
    }
  }
  const lookups = performance.now();
  for (let level = 0; level < storeLevels(layout).length; level++)
    await Promise.all(
      layout.markers.map((marker) => markerArray(layout, marker, level).storeMissingShards(sink)),
    );
  console.log(
    `the reference's lookups for missing shards (every key of every level, each found): ${((performance.now() - lookups) / 1000).toFixed(2)} s`,
  );
  const wall = (way: Way) => median(times[way].map((t) => t.wall));
  const cpu = (way: Way) => median(times[way].map((t) => t.cpu));
  console.log(
    `\nmedians: reference ${wall('reference').toFixed(2)} s (CPU ${cpu('reference').toFixed(2)} s), on writers ${wall('writers').toFixed(2)} s (CPU ${cpu('writers').toFixed(2)} s): ${(wall('reference') / wall('writers')).toFixed(2)}x faster; the same bytes (${referenceBytes?.size} files)`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
