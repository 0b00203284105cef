import type { KeyValueStore, ShardExtent, ShardedArray } from '../zarr';
import type { ShardAddress, TilePlan } from './plan';
import type { ParentQuadrant, PlaneWriters } from './plane-writers';
import type { PredictionPlan } from './prediction-plan';
import { markerArray, type PredictionStoreLayout, storeLevels } from './store';

/**
 * Pyramid levels a band builds itself: level L's shard rows lie inside one band when 2^L divides
 * the band's rows (bands start at multiples of them), so a band of 8 shard rows builds levels 1
 * to 3, and the one band of a slide that has no other builds every level; postprocessing builds
 * the levels above (`finishPredictionStore`'s `fromLevel`).
 */
export function bandPyramidLevels(
  layout: PredictionStoreLayout,
  tiles: Pick<TilePlan, 'bandShards' | 'bands'>,
): number {
  return tiles.bands === 1 ? storeLevels(layout).length - 1 : levelsInsideRows(layout, tiles.bandShards);
}

/** The levels whose shard rows lie inside each band of `bandShards` rows. */
export function levelsInsideRows(layout: PredictionStoreLayout, bandShards: number): number {
  let levels = 0;
  while (bandShards % 2 ** (levels + 1) === 0) levels++;
  return Math.min(levels, storeLevels(layout).length - 1);
}

/**
 * A shard taken into its parent (`BandPyramid.add`): per marker, its quadrant of the parent's
 * buffer, to hand to the calls that average the shard's buffers into it (`PlaneWriters.encode`'s
 * `average`, or `downsample`), asked right away; then `averaged`, with those calls, settles once
 * they are done and every shard they completed is stored.
 */
export interface Averaging {
  readonly quadrants: readonly ParentQuadrant[];
  averaged(calls: Promise<unknown>): Promise<void>;
}

/**
 * A shard of a level above 0 being filled: one buffer per marker, and its children still to come.
 * The buffers come holding an earlier shard's pixels, and each child sets every pixel of its
 * quadrant. A quadrant with no child lies past the level's edge, which is neither stored nor
 * averaged into the level above (`encodeShard` leaves out or pads what lies past it).
 */
interface OpenParent {
  buffers: Uint16Array[];
  missing: number;
}

/**
 * Builds a band's levels 1 to `top` from the shard buffers the pipeline makes: each level-0
 * shard is averaged into its quadrant of the level-1 shard above it on the plane writer that owns
 * the marker, chunk by chunk as its encode (which pads the edge chunks as stored) passes them; a
 * shard whose children are all in is encoded, stored and averaged into the level above in turn.
 * Nothing is read back from the store or decoded, and the means run off the main thread, yet the
 * bytes are those `finishPredictionStore` builds from the stored shards (`PyramidBuilder`): the
 * same means of the same values, encoded the same way. Memory holds the shards being filled: half
 * a band's rows of level 1, a quarter of level 2, and so on, per marker.
 */
export class BandPyramid {
  private readonly open = new Map<string, OpenParent>();
  private readonly pool: Uint16Array[][] = [];
  /** Per level 0 to `top`, marker 0's array (the geometry is every marker's). */
  private readonly levels: ShardedArray<'uint16'>[];
  /** Per level, per marker, its array. */
  private readonly arrays: ShardedArray<'uint16'>[][];

  constructor(
    layout: PredictionStoreLayout,
    private readonly writers: PlaneWriters,
    private readonly sink: KeyValueStore,
    readonly top: number,
    private readonly signal?: AbortSignal,
  ) {
    this.arrays = Array.from({ length: top + 1 }, (_, level) =>
      layout.markers.map((marker) => markerArray(layout, marker, level)),
    );
    this.levels = this.arrays.map((arrays) => arrays[0]!);
  }

  /**
   * Shards of the band stored by an earlier attempt (`[plan.first, plan.start.shardsDone)`), read
   * back into buffers of the writers and added, so that their parents are built (again) once
   * their siblings are in.
   */
  async addStored(plan: PredictionPlan): Promise<void> {
    const buffers = this.writers.shardBuffers();
    for (let i = plan.first; i < plan.start.shardsDone; i++) {
      const shard = plan.tiles.order[i]!;
      for (const [m, array] of this.arrays[0]!.entries())
        await array.readShard(this.sink, shard.y, shard.x, buffers[m]!, this.signal);
      await this.addStoredShard(0, shard.y, shard.x, buffers);
    }
  }

  /**
   * Level-0 shard `shard` taken into the level above: its encodes, asked right away, average it
   * into its parent (`Averaging`).
   */
  add(shard: ShardAddress): Averaging | undefined {
    return this.childOf(0, shard.y, shard.x);
  }

  /** Shard `(y, x)` of `level`, read back from the store into writers' buffers, averaged into its parent. */
  addStoredShard(level: number, y: number, x: number, buffers: readonly Uint16Array[]): Promise<void> {
    const child = this.childOf(level, y, x);
    if (!child) return Promise.resolve();
    const into = { validHeight: child.extent.height, validWidth: child.extent.width, knownFill: [] };
    const averaged = buffers.map((buffer, m) => {
      const { parent, ...quadrant } = child.quadrants[m]!;
      return this.writers.downsample(m, buffer, parent, { ...quadrant, ...into });
    });
    return child.averaged(Promise.all(averaged));
  }

  /** Throws if a shard of the levels built still waits for a child (the band ended early). */
  finished(): void {
    if (this.open.size > 0)
      throw new Error(`pyramid shards left unfinished: ${[...this.open.keys()].join(' ')}`);
  }

  /**
   * Shard `(y, x)` of `level` counted into its parent, whose buffers are opened by its first
   * child; `undefined` at the top level.
   */
  private childOf(level: number, y: number, x: number): (Averaging & { extent: ShardExtent }) | undefined {
    if (level >= this.top) return undefined;
    const py = Math.floor(y / 2);
    const px = Math.floor(x / 2);
    const key = `${level + 1}/${py},${px}`;
    const children = this.levels[level]!.childShards(py, px);
    let parent = this.open.get(key);
    if (!parent) {
      parent = {
        buffers: this.pool.pop() ?? this.writers.shardBuffers(),
        missing: children.length,
      };
      this.open.set(key, parent);
    }
    const child = children.find((c) => c.shardY === y && c.shardX === x);
    if (!child) throw new Error(`shard ${y},${x} of level ${level} is not under ${key}`);
    const target = parent.buffers;
    parent.missing--;
    const last = parent.missing === 0;
    if (last) this.open.delete(key);
    return {
      quadrants: target.map((buffer) => ({ parent: buffer, y: child.y, x: child.x })),
      extent: child.extent,
      // Every child is averaged in once the last one is: a marker's calls run in order.
      averaged: (calls) =>
        last ? calls.then(() => this.complete(level + 1, py, px, target)) : calls.then(() => {}),
    };
  }

  /**
   * Stores a finished shard of `level`, its encodes averaging it into the level above; then its
   * buffers are free.
   */
  private async complete(level: number, y: number, x: number, buffers: Uint16Array[]): Promise<void> {
    const child = this.childOf(level, y, x);
    // In the frames `PyramidBuilder` writes (`encodeShard`'s), on the writer that owns the marker.
    const stored = Promise.all(
      this.arrays[level]!.map((array, m) =>
        array.writeShard(this.sink, y, x, buffers[m]!, this.signal, (_, shard, extent, zstdLevel) =>
          this.writers.encode(m, shard, extent, zstdLevel, [], 'streamed', child?.quadrants[m]),
        ),
      ),
    );
    await (child ? child.averaged(stored) : stored);
    this.pool.push(buffers);
  }
}

/** Shards of the level below read ahead of the writers: reads overlap the means and encodes. */
const STORED_SHARDS_IN_FLIGHT = 3;

export interface BuildStoredLevelsOptions {
  layout: PredictionStoreLayout;
  writers: PlaneWriters;
  sink: KeyValueStore;
  /** The lowest level to build, at least 1: the level below it is stored. */
  fromLevel: number;
  signal?: AbortSignal;
  /** After each shard of the level below is added: how many, of all. */
  onShard?: (done: number, total: number) => void;
}

/**
 * Builds levels `fromLevel` and up of every marker from the stored shards of the level below
 * (postprocessing's levels, those spanning several bands), on the plane writers: a `BandPyramid`
 * fed those shards read back in Z-order, so that each parent is finished as soon as its last
 * child is in and memory holds a few shards per level. Reads, means and encodes of several
 * markers overlap, where `PyramidBuilder`, the reference, does one shard after another on the
 * calling thread; the bytes are the same.
 */
export async function buildStoredLevels(options: BuildStoredLevelsOptions): Promise<void> {
  const { layout, writers, sink, fromLevel, signal } = options;
  const top = storeLevels(layout).length - 1;
  if (fromLevel > top) return;
  const pyramid = new BandPyramid(layout, writers, sink, top, signal);
  const below = layout.markers.map((marker) => markerArray(layout, marker, fromLevel - 1));
  const order = zOrder(below[0]!.shardsY, below[0]!.shardsX);
  const free: Uint16Array[][] = [];
  const inFlight = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  let done = 0;
  for (const { y, x } of order) {
    if (inFlight.size >= STORED_SHARDS_IN_FLIGHT) await Promise.race(inFlight);
    if (failure) break;
    signal?.throwIfAborted();
    const buffers = free.pop() ?? writers.shardBuffers();
    await Promise.all(below.map((array, m) => array.readShard(sink, y, x, buffers[m]!, signal)));
    // Settled, never rejected: a failure is kept and thrown once the others in flight settle.
    const added: Promise<void> = pyramid.addStoredShard(fromLevel - 1, y, x, buffers).then(
      () => {
        free.push(buffers);
        options.onShard?.(++done, order.length);
      },
      (error: unknown) => {
        failure ??= { error };
      },
    );
    inFlight.add(added);
    void added.then(() => inFlight.delete(added));
  }
  await Promise.all(inFlight);
  if (failure) throw failure.error;
  pyramid.finished();
}

/** Every cell of a `rows` x `cols` grid in Z-order (Morton): the four under each parent one after another. */
function zOrder(rows: number, cols: number): { y: number; x: number }[] {
  const cells: { y: number; x: number; code: number }[] = [];
  for (let y = 0; y < rows; y++) for (let x = 0; x < cols; x++) cells.push({ y, x, code: morton(y, x) });
  return cells.sort((a, b) => a.code - b.code);
}

function morton(y: number, x: number): number {
  let code = 0;
  for (let bit = 0; 2 ** bit <= Math.max(y, x); bit++) {
    code += (((y >> bit) & 1) * 2 + ((x >> bit) & 1)) * 4 ** bit;
  }
  return code;
}
