import { availableParallelism } from 'node:os';
import type { RgbImage, SlideImage } from '../image';
import { crc32c, type KeyValueStore, type ShardedArray, type ShardGeometry } from '../zarr';
import {
  type ChannelStatistics,
  emptyStatistics,
  inputSamples,
  inputWindow,
  mergeStatistics,
  type PlaneSums,
} from './kernels';
import { inputTileLength, type ModelSession } from './model';
import { intersect, type PatchGrid, type PixelRect, type ShardAddress, TilePlan } from './plan';
import type { InputKernel } from './plane-kernel';
import { type PlaneWriters, startPlaneWriters } from './plane-writers';
import {
  checkMarkerName,
  HISTOGRAM_BINS,
  layoutKey,
  markerArray,
  PREDICTION_FILL_VALUE,
  type PredictionStoreLayout,
} from './store';

/**
 * Progress of `predictMarkers` and the token to resume it from (plain JSON, for Temporal
 * heartbeat details). Everything in it is as of the last shard stored, in shard order, so a
 * retry that starts from it writes the same bytes and ends with the same counts and statistics.
 */
export interface PredictionProgress {
  version: 1;
  /** Everything the bytes depend on; a token for another layout is ignored. */
  layout: string;
  shardsDone: number;
  shards: number;
  /** Positions finished (predicted or failed) in the shards done. */
  tiles: number;
  failedTiles: number;
  statistics: Record<string, ChannelStatistics>;
}

export interface PredictMarkersOptions {
  /** The H&E pyramid (`openHePyramid`): its level nearest the model's scale is read. */
  he: SlideImage;
  /** Microns per level-0 pixel of the H&E. */
  heMpp: number;
  /** The credit grid (`tissuePatchGrid`): its selected positions are predicted. */
  grid: PatchGrid;
  model: ModelSession;
  /** Channels of the model to store, in the store's order; the others are discarded. */
  markers: readonly string[];
  /** The store's root. */
  sink: KeyValueStore;
  /** Tiles per inference. Default 8. */
  batchSize?: number;
  /**
   * Store shard side (level-0 pixels). Default 1024: 2 MB of uint16 per marker, two of them
   * alive per marker (one made, one stored), so 14 markers hold about 56 MB of shards.
   */
  shardSize?: number;
  /** Inner chunk side. Default 512. */
  chunkSize?: number;
  /** Shard rows per band (see `TilePlan`). Default `BAND_SHARDS`. */
  bandShards?: number;
  /** Threads writing output planes into shards (`plane-writers`), at most one per marker. */
  writers?: number;
  signal?: AbortSignal;
  resume?: PredictionProgress | null;
  /** After each batch: positions finished of all, and the token as of the last stored shard. */
  onProgress?: (done: number, total: number, token: PredictionProgress) => void;
}

export interface PredictMarkersResult {
  tiles: number;
  failedTiles: number;
  statistics: Record<string, ChannelStatistics>;
  /** What `finishPredictionStore` needs to add the pyramid and metadata. */
  layout: PredictionStoreLayout;
  progress: PredictionProgress;
}

/**
 * Predicts `markers` on the selected positions of `grid` and writes level 0 of each marker's
 * array (`markers/{name}/0`) into the store; `finishPredictionStore` adds the pyramid levels and
 * the NGFF groups afterwards (the job's postprocessing).
 *
 * Shard by shard in `TilePlan` order: the H&E under a shard (with every position's halo) is read
 * in one region while the shard before is being inferred; positions are inferred in batches, a
 * failing batch tile by tile, and a tile that fails alone is counted failed and left at the fill
 * value. Three things overlap: while one batch is inferred, the next is filled and waits in the
 * model's queue, and the one before is written by the plane writers (resampled onto the
 * position's level pixels straight into the shard's buffers); a finished shard is encoded and
 * stored while the next one is made. Memory holds two shards per marker, three batches of
 * inputs and outputs, the H&E of a few shards ahead and a band's frontier of outputs, whatever
 * the slide.
 */
export async function predictMarkers(options: PredictMarkersOptions): Promise<PredictMarkersResult> {
  const job = new Prediction(options);
  return job.run();
}

type Region = { image: RgbImage; x: number; y: number } | undefined;

interface ShardWork {
  index: number;
  shard: ShardAddress;
  positions: number[];
  /** Positions to infer here (not carried from an earlier shard of the band), in batches. */
  batches: number[][];
  region: Promise<Region>;
}

/** A batch handed to the model: its shard, positions, buffer pair and answer. */
interface PostedBatch {
  index: number;
  batch: number[];
  buffer: number;
  outputs: Promise<BatchOutputs>;
}

/** A position's output planes, one per stored marker (`[M, T, T]`), or null if it failed. */
type Carried = Float32Array | null;

/** One shard's buffers, one per marker, chunk-major, shared with the plane writers. */
interface Slot {
  buffers: Uint16Array[];
}

interface Made {
  slot: Slot;
  tiles: number;
  failed: number;
  statistics: ChannelStatistics[];
  /** Inner chunks no position meets: never set in the buffer, left out of the shard. */
  untouched: number[];
}

/** Where each tile of a batch's answer starts in the batch's output buffer; null if it failed. */
type BatchOutputs = (number | null)[];

/**
 * Input and output buffers: one batch is written while the next is inferred and the one after
 * waits, filled, in the model's queue, so the model never waits for the main thread.
 */
const BATCH_BUFFERS = 3;

/**
 * Shards whose H&E is read ahead of the one being made: a shard holds a batch or two of tissue
 * positions, inferred faster than its region is read and decoded.
 */
const SHARDS_AHEAD = 4;

/**
 * Shard rows per band by default: the positions across a band's lower edge are inferred twice,
 * and a band of eight 1024 px shards infers 2 % of a slide's positions twice where one of four
 * inferred 4 %, for a frontier of held outputs twice as long (about 100 MB for 14 markers).
 */
const BAND_SHARDS = 8;

/**
 * Plane writers by default: two cores stay with the main thread and the inference, and four
 * writers keep up with the bundled model on 16 cores (bench/inference: more only slowed the
 * inference, whose memory traffic they share).
 */
function defaultWriters(): number {
  return Math.max(1, Math.min(4, availableParallelism() - 2));
}

class Prediction {
  private readonly plan: TilePlan;
  private readonly arrays: ShardedArray<'uint16'>[];
  private readonly layout: PredictionStoreLayout;
  private readonly key: string;
  private readonly channelIndex: number[];
  private readonly batchSize: number;
  private readonly total: number;
  private readonly carried = new Map<number, Carried>();
  private readonly free: Slot[] = [];
  private readonly geometry: ShardGeometry;
  /** Per buffer pair, in the writers' memory, filled by `inputKernel` (`run`). */
  private readonly inputs: Float32Array[] = [];
  private inputKernel: InputKernel | undefined;
  /** Per buffer pair, in the writers' memory (`run`). */
  private readonly outputs: Float32Array[] = [];
  /** Carried outputs' buffers (writers' memory) whose positions are done, for later ones. */
  private readonly spareCarried: Float32Array[] = [];
  /** Per buffer pair: settles once the batch last answered into it is written. */
  private readonly released: Promise<void>[] = [];
  /** Batches of prepared shards not yet handed to the model, and those handed to it, in order. */
  private readonly unposted: { index: number; batch: number[]; region: Promise<Region> }[] = [];
  private readonly posted: PostedBatch[] = [];
  private postedCount = 0;
  /** Position of a stored marker's plane in a tile's answer, and in a carried output. */
  private readonly carriedChannels: number[];
  private progress: PredictionProgress;
  /** A copy of `progress` handed to `onProgress`, which may keep it. */
  private snapshot: PredictionProgress;
  /** Shard index this run started at. */
  private readonly start: number;
  /** Positions finished so far, stored or not (progress). */
  private counted: number;

  constructor(private readonly options: PredictMarkersOptions) {
    const { model, markers, grid } = options;
    const spec = model.spec;
    this.batchSize = options.batchSize ?? 8;
    if (!Number.isSafeInteger(this.batchSize) || this.batchSize < 1) throw new RangeError('batchSize');
    if (markers.length === 0 || new Set(markers).size !== markers.length)
      throw new RangeError('markers must be distinct and at least one');
    this.channelIndex = markers.map((marker) => {
      checkMarkerName(marker);
      const c = spec.channels.indexOf(marker);
      if (c < 0) throw new RangeError(`model ${spec.version} has no channel ${marker}`);
      return c;
    });
    const shardSize = options.shardSize ?? 1024;
    const chunkSize = options.chunkSize ?? 512;
    if (
      !Number.isSafeInteger(chunkSize) ||
      chunkSize < 2 ||
      chunkSize % 2 !== 0 ||
      shardSize % chunkSize !== 0
    )
      throw new RangeError(`chunk ${chunkSize} must be even and divide shard ${shardSize}`);
    this.plan = new TilePlan({
      grid,
      heLevels: options.he.levels,
      heMpp: options.heMpp,
      modelMpp: spec.mpp,
      shardSize,
      bandShards: options.bandShards ?? BAND_SHARDS,
    });
    this.layout = {
      markers: [...markers],
      widthPx: this.plan.widthPx,
      heightPx: this.plan.heightPx,
      heLevel: this.plan.level,
      pixelSizeUm: this.plan.pixelSizeUm,
      shardSize,
      chunkSize,
      model: spec.version,
      outputRange: [spec.outputRange[0], spec.outputRange[1]],
    };
    this.arrays = markers.map((marker) => markerArray(this.layout, marker, 0));
    this.key = [
      'predict/1',
      layoutKey(this.layout),
      `b${this.plan.order.length}x${options.bandShards ?? BAND_SHARDS}`,
      `${spec.tileSize}+${spec.halo}@${spec.mpp}`,
      `grid:${grid.cols}x${grid.rows}:${grid.patchSizeLevel0Px}:${crc32c(grid.selected)}`,
    ].join('/');
    let selected = 0;
    let empty = 0;
    for (let i = 0; i < grid.selected.length; i++) {
      if (grid.selected[i] !== 1) continue;
      selected++;
      const sq = this.plan.square(i);
      if (sq.x1 <= sq.x0 || sq.y1 <= sq.y0) empty++;
    }
    this.total = selected;
    this.progress = this.resumeFrom(options.resume) ?? {
      version: 1,
      layout: this.key,
      shardsDone: 0,
      shards: this.plan.order.length,
      // Positions that hold no pixel of this level (a sliver past its edge) have nothing to do.
      tiles: empty,
      failedTiles: 0,
      statistics: Object.fromEntries(markers.map((m) => [m, emptyStatistics(HISTOGRAM_BINS)])),
    };
    this.snapshot = structuredClone(this.progress);
    this.start = this.progress.shardsDone;
    this.counted = this.progress.tiles;
    this.geometry = this.arrays[0]!.geometry;
    for (let b = 0; b < BATCH_BUFFERS; b++) this.released.push(Promise.resolve());
    this.carriedChannels = markers.map((_, m) => m);
  }

  private resumeFrom(resume: PredictionProgress | null | undefined): PredictionProgress | undefined {
    if (
      typeof resume !== 'object' ||
      resume === null ||
      resume.version !== 1 ||
      resume.layout !== this.key ||
      resume.shards !== this.plan.order.length ||
      !Number.isSafeInteger(resume.shardsDone) ||
      resume.shardsDone < 0 ||
      resume.shardsDone > resume.shards ||
      !this.layout.markers.every((m) => resume.statistics?.[m]?.histogram?.length === HISTOGRAM_BINS)
    ) {
      return undefined;
    }
    return structuredClone(resume);
  }

  async run(): Promise<PredictMarkersResult> {
    const { sink, signal, model } = this.options;
    for (const array of this.arrays) await array.writeMetadata(sink, signal);
    const order = this.plan.order;
    const writers = startPlaneWriters({
      count: this.options.writers ?? defaultWriters(),
      markers: this.arrays.length,
      geometry: this.geometry,
      tile: model.spec.tileSize,
      bins: HISTOGRAM_BINS,
      range: this.layout.outputRange,
    });
    let storing: Promise<void> | undefined;
    // Shards prepared ahead: their H&E is read, and their batches can be handed to the model,
    // while the shards before them are made.
    const ahead: ShardWork[] = [];
    const prepareAhead = (from: number) => {
      while (ahead.length < SHARDS_AHEAD) {
        const work = this.prepare(from + ahead.length);
        if (!work) break;
        ahead.push(work);
      }
    };
    try {
      // The model answers into the writers' memory, where their kernel reads the planes in place;
      // its inputs are filled there too, by the same module's input fill, and read in place.
      const tileOutput = model.spec.channels.length * model.spec.tileSize * model.spec.tileSize;
      for (let b = 0; b < BATCH_BUFFERS; b++) {
        this.outputs.push(writers.planeBuffer(this.batchSize * tileOutput));
        this.inputs.push(writers.planeBuffer(this.batchSize * inputTileLength(model.spec)));
      }
      this.inputKernel = writers.inputKernel(model.spec.tileSize + 2 * model.spec.halo);
      prepareAhead(this.progress.shardsDone);
      for (let work = ahead.shift(); work; work = ahead.shift()) {
        prepareAhead(work.index + 1);
        const made = await this.make(work, writers);
        // One shard is stored while the next is made: its buffers stay out of the pool till then.
        await storing;
        storing = this.store(work, made, writers);
        storing.catch(() => {});
      }
      await storing;
    } finally {
      const reads = ahead.map((work) => work.region);
      await Promise.allSettled([storing, ...reads, ...this.posted.map((b) => b.outputs)]);
      await writers.close();
    }
    if (this.progress.shardsDone !== order.length) throw new Error('prediction ended before its last shard');
    return {
      tiles: this.progress.tiles,
      failedTiles: this.progress.failedTiles,
      statistics: this.progress.statistics,
      layout: this.layout,
      progress: this.progress,
    };
  }

  /** Lists shard `index`'s positions and starts reading the H&E of those it infers. */
  private prepare(index: number): ShardWork | undefined {
    const shard = this.plan.order[index];
    if (!shard) return undefined;
    const positions = this.plan.positionsOf(shard);
    const infer = positions.filter((p) => this.plan.inferredIn(p, shard, this.start));
    const region = this.readRegion(infer);
    region.catch(() => {});
    const batches: number[][] = [];
    for (let b = 0; b < infer.length; b += this.batchSize) batches.push(infer.slice(b, b + this.batchSize));
    for (const batch of batches) this.unposted.push({ index, batch, region });
    return { index, shard, positions, batches, region };
  }

  /**
   * Hands prepared batches to the model until two wait beyond the one being written, across
   * shard boundaries. A batch is filled once its buffer pair is released.
   */
  private post(): void {
    while (this.posted.length < BATCH_BUFFERS - 1 && this.unposted.length > 0) {
      const { index, batch, region } = this.unposted.shift()!;
      const buffer = this.postedCount++ % BATCH_BUFFERS;
      const outputs = (async () => {
        await this.released[buffer];
        const input = this.fillInputs(await region, batch, buffer);
        return this.inferWithRetry(input, batch.length, buffer);
      })();
      outputs.catch(() => {});
      this.posted.push({ index, batch, buffer, outputs });
    }
  }

  /** Infers and writes one shard's positions into a slot of shard buffers. */
  private async make(work: ShardWork, writers: PlaneWriters): Promise<Made> {
    const { model, signal } = this.options;
    const slot = this.take(writers);
    const rect = this.plan.shardRect(work.shard);
    const markers = this.arrays.length;
    const plane = model.spec.tileSize * model.spec.tileSize;
    const histograms = this.arrays.map(() => new Uint32Array(HISTOGRAM_BINS));
    // Per position (in `work.positions` order) and marker: what was written, summed at the end
    // in that order, so a resumed run (which carries fewer positions) adds up the same sums.
    const sums: (PlaneSums | undefined)[] = new Array(work.positions.length * markers);
    const slotOf = new Map(work.positions.map((p, i) => [p, i]));
    const writes: Promise<void>[] = [];
    const write = (positions: number[], source: Float32Array, bases: number[], channels: number[]) => {
      const written = writers
        .write({
          source,
          bases,
          squares: positions.map((p) => this.plan.square(p)),
          channels,
          clip: rect,
          shards: slot.buffers,
        })
        .then((result) => {
          positions.forEach((p, k) => {
            const at = slotOf.get(p)! * markers;
            for (let m = 0; m < markers; m++) sums[at + m] = result.sums[k]![m];
          });
          result.histograms.forEach((part, m) => {
            const total = histograms[m]!;
            for (let b = 0; b < part.length; b++) total[b]! += part[b]!;
          });
        });
      written.catch(() => {});
      writes.push(written);
      return written;
    };
    // The buffer holds an earlier shard's pixels: what no output is written over is set to the
    // fill value, in messages the writers take in order with the writes. Only inside the chunks
    // some position's square meets: the others are left out of the shard unread (`store`).
    const { touched, untouched } = this.chunksMet(rect, work.positions);
    const fill = (rects: PixelRect[]) => {
      const filled = writers.fill(rect, rects, slot.buffers, PREDICTION_FILL_VALUE);
      filled.catch(() => {});
      writes.push(filled);
    };
    const fillSquares = (positions: number[]) =>
      fill(positions.flatMap((p) => intersect(this.plan.square(p), rect) ?? []));
    fill(this.plan.uncoveredRects(work.shard).flatMap((r) => touched.flatMap((c) => intersect(r, c) ?? [])));
    const inferred = new Set(work.batches.flat());
    for (const p of work.positions) {
      if (inferred.has(p)) continue;
      const out = this.carried.get(p);
      if (out === undefined) throw new Error(`position ${p} was not carried into shard ${work.index}`);
      const last = !this.plan.neededLater(p, work.shard);
      if (last) this.carried.delete(p);
      if (out === null) fillSquares([p]);
      else {
        const written = write([p], out, [0], this.carriedChannels);
        // Its buffer serves a later position once the writers have read it.
        if (last)
          written.then(
            () => this.spareCarried.push(out),
            () => {},
          );
      }
    }
    let tiles = 0;
    let failed = 0;
    for (const expected of work.batches) {
      signal?.throwIfAborted();
      this.post();
      const { index, batch, buffer, outputs: answer } = this.posted.shift()!;
      if (index !== work.index || batch !== expected) throw new Error(`batch of shard ${index} out of order`);
      const outputs = await answer;
      const source = this.outputs[buffer]!;
      const done = batch.filter((_, k) => outputs[k] !== null);
      const written = write(
        done,
        source,
        outputs.filter((base): base is number => base !== null),
        this.channelIndex,
      );
      this.released[buffer] = written.catch(() => {});
      fillSquares(batch.filter((_, k) => outputs[k] === null));
      this.post();
      batch.forEach((p, k) => {
        const base = outputs[k] ?? null;
        if (this.plan.isHome(p, work.shard)) {
          tiles++;
          if (base === null) failed++;
        }
        if (this.plan.neededLater(p, work.shard)) {
          let kept: Float32Array | null = null;
          if (base !== null) {
            kept = this.spareCarried.pop() ?? writers.planeBuffer(markers * plane);
            for (let m = 0; m < markers; m++) {
              const from = base + this.channelIndex[m]! * plane;
              kept.set(source.subarray(from, from + plane), m * plane);
            }
          }
          this.carried.set(p, kept);
        }
      });
      this.options.onProgress?.(this.counted + tiles, this.total, this.snapshot);
    }
    await Promise.all(writes);
    this.counted += tiles;
    const statistics = histograms.map((histogram, m) => {
      const stats = emptyStatistics(HISTOGRAM_BINS);
      for (let i = 0; i < work.positions.length; i++) {
        const part = sums[i * markers + m];
        if (!part || part.count === 0) continue;
        stats.min = stats.count === 0 ? part.min : Math.min(stats.min, part.min);
        stats.max = stats.count === 0 ? part.max : Math.max(stats.max, part.max);
        stats.count += part.count;
        stats.sum += part.sum;
      }
      stats.histogram = Array.from(histogram);
      return stats;
    });
    return { slot, tiles, failed, statistics, untouched };
  }

  /**
   * The inner chunks of the shard at `rect` (level pixels, chunk-major order) that the squares
   * of `positions` meet, and the indices of those they do not.
   */
  private chunksMet(rect: PixelRect, positions: number[]): { touched: PixelRect[]; untouched: number[] } {
    const g = this.geometry;
    const squares = positions.map((p) => this.plan.square(p));
    const touched: PixelRect[] = [];
    const untouched: number[] = [];
    for (let k = 0; k < g.chunksY * g.chunksX; k++) {
      const x0 = rect.x0 + (k % g.chunksX) * g.chunkWidth;
      const y0 = rect.y0 + Math.floor(k / g.chunksX) * g.chunkHeight;
      const chunk = intersect({ x0, y0, x1: x0 + g.chunkWidth, y1: y0 + g.chunkHeight }, rect);
      if (chunk && squares.some((sq) => intersect(sq, chunk))) touched.push(chunk);
      else untouched.push(k);
    }
    return { touched, untouched };
  }

  /** The model inputs of `batch` in input buffer `which`, read from the shard's H&E region. */
  private fillInputs(region: Region, batch: number[], which: number): Float32Array {
    if (!region) throw new Error('positions to infer but no H&E region');
    const kernel = this.inputKernel;
    if (!kernel) throw new Error('inputs filled before the writers started');
    const { tileSize, halo } = this.options.model.spec;
    const length = inputTileLength(this.options.model.spec);
    const input = this.inputs[which]!.subarray(0, batch.length * length);
    batch.forEach((p, k) => {
      const sq = this.plan.square(p);
      const ys = inputSamples(sq.y0, sq.y1 - sq.y0, tileSize, halo, this.plan.heightPx);
      const xs = inputSamples(sq.x0, sq.x1 - sq.x0, tileSize, halo, this.plan.widthPx);
      kernel.fill(region.image, region.x, region.y, ys, xs, input, k * length);
    });
    return input;
  }

  /** Encodes (on the writers) and stores a made shard, then moves the token past it. */
  private async store(work: ShardWork, made: Made, writers: PlaneWriters): Promise<void> {
    const { sink, signal } = this.options;
    const { y, x } = work.shard;
    await Promise.all(
      this.arrays.map((array, m) =>
        array.writeShard(sink, y, x, made.slot.buffers[m]!, signal, (_, shard, extent, level) =>
          writers.encode(m, shard, extent, level, made.untouched),
        ),
      ),
    );
    this.free.push(made.slot);
    const progress = this.progress;
    this.layout.markers.forEach((marker, m) => {
      mergeStatistics(progress.statistics[marker]!, made.statistics[m]!);
    });
    progress.tiles += made.tiles;
    progress.failedTiles += made.failed;
    progress.shardsDone = work.index + 1;
    this.snapshot = structuredClone(progress);
    this.options.onProgress?.(this.counted, this.total, this.snapshot);
  }

  /**
   * One batch into output buffer `which`; if it throws, each tile alone (its retry). A tile that
   * fails alone is null. Only inference failures are absorbed: an abort or a read failure ends
   * the run.
   */
  private async inferWithRetry(input: Float32Array, count: number, which: number): Promise<BatchOutputs> {
    const { model, signal } = this.options;
    const tile = model.spec.channels.length * model.spec.tileSize * model.spec.tileSize;
    const output = this.outputs[which]!.subarray(0, count * tile);
    try {
      await model.run(input, count, output);
      return Array.from({ length: count }, (_, k) => k * tile);
    } catch {
      signal?.throwIfAborted();
      const length = inputTileLength(model.spec);
      const out: BatchOutputs = [];
      for (let k = 0; k < count; k++) {
        try {
          const alone = input.slice(k * length, (k + 1) * length);
          await model.run(alone, 1, output.subarray(k * tile, (k + 1) * tile));
          out.push(k * tile);
        } catch {
          signal?.throwIfAborted();
          out.push(null);
        }
      }
      return out;
    }
  }

  /** A slot of shard buffers, fresh or holding an earlier shard's pixels (see `make`). */
  private take(writers: PlaneWriters): Slot {
    const g = this.geometry;
    return this.free.pop() ?? { buffers: writers.shardBuffers(g.chunksY * g.chunksX * g.chunkLength) };
  }

  private async readRegion(positions: number[]): Promise<Region> {
    if (positions.length === 0) return undefined;
    const { tileSize, halo } = this.options.model.spec;
    let x0 = Number.POSITIVE_INFINITY;
    let y0 = Number.POSITIVE_INFINITY;
    let x1 = Number.NEGATIVE_INFINITY;
    let y1 = Number.NEGATIVE_INFINITY;
    for (const p of positions) {
      const w = inputWindow(this.plan.square(p), tileSize, halo);
      x0 = Math.min(x0, w.x0);
      y0 = Math.min(y0, w.y0);
      x1 = Math.max(x1, w.x1);
      y1 = Math.max(y1, w.y1);
    }
    const clip: PixelRect = {
      x0: Math.max(0, x0),
      y0: Math.max(0, y0),
      x1: Math.min(this.plan.widthPx, x1),
      y1: Math.min(this.plan.heightPx, y1),
    };
    if (clip.x1 <= clip.x0 || clip.y1 <= clip.y0) return undefined;
    const image = await this.options.he.readRegion(
      { level: this.plan.level, x: clip.x0, y: clip.y0, width: clip.x1 - clip.x0, height: clip.y1 - clip.y0 },
      this.options.signal,
    );
    return { image, x: clip.x0, y: clip.y0 };
  }
}
