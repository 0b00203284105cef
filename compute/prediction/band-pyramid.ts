import type { KeyValueStore } from '../zarr';
import type { ShardAddress } from './plan';
import type { PredictionPlan } from './prediction-plan';
import {
  markerArray,
  type PredictionStoreLayout,
  PyramidBuilder,
  storeLevels,
  writePyramidMetadata,
} from './store';

/**
 * Pyramid levels a band builds itself: level L's shard rows lie inside one band when 2^L divides
 * the band's rows (bands start at multiples of them), so a band of 8 shard rows builds levels 1
 * to 3; postprocessing builds the levels above (`finishPredictionStore`'s `fromLevel`).
 */
export function bandPyramidLevels(layout: PredictionStoreLayout, bandShards: number): number {
  let levels = 0;
  while (bandShards % 2 ** (levels + 1) === 0) levels++;
  return Math.min(levels, storeLevels(layout).length - 1);
}

/**
 * Follows a band's pipeline: as its level-0 shards are stored, each shard of levels 1 to
 * `bandPyramidLevels` whose shards below are all stored is built, one at a time, while the
 * pipeline makes the next shards. The bytes are `finishPredictionStore`'s (the same builder on
 * the same stored shards).
 */
export class BandPyramid {
  /** Per level, the shards stored (`y,x`). */
  private readonly stored: Set<string>[];
  private readonly builder: PyramidBuilder;
  private readonly top: number;
  private queue: Promise<void>;
  private failure: unknown;

  constructor(
    private readonly plan: PredictionPlan,
    sink: KeyValueStore,
    signal?: AbortSignal,
  ) {
    this.top = bandPyramidLevels(plan.layout, plan.tiles.bandShards);
    this.stored = Array.from({ length: this.top + 1 }, () => new Set<string>());
    this.builder = new PyramidBuilder(sink, plan.layout, signal);
    this.queue = this.top > 0 ? writePyramidMetadata(sink, plan.layout, signal) : Promise.resolve();
    // Shards stored by an earlier attempt of this band: their parents are built (again) as
    // soon as their siblings are in.
    for (let i = plan.first; i < plan.start.shardsDone; i++) this.shardStored(plan.tiles.order[i]!);
  }

  /** A level-0 shard of the band is stored (every marker's). */
  shardStored(shard: ShardAddress): void {
    this.mark(0, shard.y, shard.x);
  }

  /** Settles once every shard started is built; throws the first failure. */
  async done(): Promise<void> {
    await this.queue;
    if (this.failure !== undefined) throw this.failure;
  }

  private mark(level: number, y: number, x: number): void {
    this.stored[level]!.add(`${y},${x}`);
    if (level >= this.top) return;
    const py = Math.floor(y / 2);
    const px = Math.floor(x / 2);
    const below = markerArray(this.plan.layout, this.plan.layout.markers[0]!, level);
    const children = below.childShards(py, px);
    if (!children.every((c) => this.stored[level]!.has(`${c.shardY},${c.shardX}`))) return;
    this.queue = this.queue.then(async () => {
      if (this.failure !== undefined) return;
      try {
        for (const marker of this.plan.layout.markers) await this.builder.build(marker, level + 1, py, px);
        this.mark(level + 1, py, px);
      } catch (err) {
        this.failure = err;
      }
    });
  }
}
