import type { RgbImage, SlideImage } from '../image';
import type { ShardGeometry } from '../zarr';
import type { BandPyramid } from './band-pyramid';
import {
  type ChannelStatistics,
  emptyStatistics,
  inputSamples,
  inputWindow,
  mergeStatistics,
  type PlaneSums,
} from './kernels';
import { inputTileLength, type ModelSession } from './model';
import { intersect, type PixelRect, type ShardAddress } from './plan';
import type { PlaneWriters } from './plane-writers';
import type { PredictionPlan, PredictionProgress } from './prediction-plan';
import type { PredictionSink } from './prediction-sink';
import { HISTOGRAM_BINS, PREDICTION_FILL_VALUE } from './store';

/**
 * The prediction's pipeline, shard by shard in `TilePlan` order: the H&E under a shard (with
 * every position's halo) is read in one region while the shards before it are made; positions
 * are inferred in batches, a failing batch tile by tile, and a tile that fails alone is counted
 * failed and left at the fill value. Three things overlap: while one batch is inferred, the next
 * is filled and waits in the model's queue, and the one before is written by the plane writers
 * into the shard's buffers; a finished shard is encoded and stored while the next one is made.
 * Memory holds two shards per marker, three batches of inputs and outputs, the H&E of a few
 * shards ahead and a band's frontier of outputs, whatever the slide.
 */

export interface PipelineInput {
  plan: PredictionPlan;
  he: SlideImage;
  model: ModelSession;
  writers: PlaneWriters;
  sink: PredictionSink;
  signal?: AbortSignal;
  /** After each batch: positions finished of all, and the token as of the last stored shard. */
  onProgress?: (done: number, total: number, token: PredictionProgress) => void;
  /** Builds the levels above from each shard's buffers before they are reused (a band's). */
  pyramid?: BandPyramid;
}

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

type Region = { image: RgbImage; x: number; y: number } | undefined;

interface ShardWork {
  index: number;
  shard: ShardAddress;
  positions: number[];
  /** Positions to infer here (not carried from an earlier shard of the band), in batches. */
  batches: number[][];
  region: Promise<Region>;
}

interface Made {
  buffers: Uint16Array[];
  tiles: number;
  failed: number;
  statistics: ChannelStatistics[];
  /** Inner chunks no position meets: never set in the buffer, left out of the shard. */
  untouched: number[];
}

/** Runs the pipeline to its last shard; answers the final progress. */
export async function runPipeline(input: PipelineInput): Promise<PredictionProgress> {
  const { plan, sink, writers } = input;
  const book = new ProgressBook(plan, input.onProgress);
  const feed = new ModelFeed(input);
  const maker = new ShardMaker(input, feed, book);
  await sink.writeMetadata();
  let storing: Promise<void> | undefined;
  // Shards prepared ahead: their H&E is read, and their batches can be handed to the model,
  // while the shards before them are made.
  const ahead: ShardWork[] = [];
  const prepareAhead = (from: number) => {
    while (ahead.length < SHARDS_AHEAD) {
      const work = maker.prepare(from + ahead.length);
      if (!work) break;
      ahead.push(work);
    }
  };
  try {
    prepareAhead(book.progress.shardsDone);
    for (let work = ahead.shift(); work; work = ahead.shift()) {
      prepareAhead(work.index + 1);
      const made = await maker.make(work);
      // One shard is stored while the next is made: its buffers stay out of the pool till then.
      await storing;
      storing = (async () => {
        const parent = input.pyramid?.add(work.shard);
        const stored = sink.storeShard(
          work.shard,
          made.buffers,
          (m) => (_, shard, extent, level) =>
            writers.encode(m, shard, extent, level, made.untouched, 'sized', parent?.quadrants[m]),
        );
        await (parent ? parent.averaged(stored) : stored);
        maker.free(made.buffers);
        book.shardStored(work.index, made);
      })();
      storing.catch(() => {});
    }
    await storing;
  } finally {
    await Promise.allSettled([storing, ...ahead.map((work) => work.region), feed.settled()]);
  }
  if (book.progress.shardsDone !== plan.end) throw new Error('prediction ended before its last shard');
  return book.progress;
}

/** The token, as of the last stored shard, and the positions finished so far. */
class ProgressBook {
  readonly progress: PredictionProgress;
  /** A copy of `progress` handed to `onProgress`, which may keep it. */
  private snapshot: PredictionProgress;
  /** Positions finished in the shards made (stored or not). */
  private counted: number;
  /** Shard index this run started at. */
  readonly startShard: number;

  constructor(
    private readonly plan: PredictionPlan,
    private readonly onProgress?: PipelineInput['onProgress'],
  ) {
    this.progress = structuredClone(plan.start);
    this.snapshot = structuredClone(this.progress);
    this.startShard = this.progress.shardsDone;
    this.counted = this.progress.tiles;
  }

  /** After a batch of the shard being made, `tiles` of whose positions are finished so far. */
  batchDone(tiles: number): void {
    this.onProgress?.(this.counted + tiles, this.plan.total, this.snapshot);
  }

  shardMade(tiles: number): void {
    this.counted += tiles;
  }

  shardStored(index: number, made: Made): void {
    const progress = this.progress;
    this.plan.layout.markers.forEach((marker, m) => {
      mergeStatistics(progress.statistics[marker]!, made.statistics[m]!);
    });
    progress.tiles += made.tiles;
    progress.failedTiles += made.failed;
    progress.shardsDone = index + 1;
    this.snapshot = structuredClone(progress);
    this.onProgress?.(this.counted, this.plan.total, this.snapshot);
  }
}

/** A batch handed to the model: its shard, positions, buffer pair and answer. */
interface PostedBatch {
  index: number;
  batch: number[];
  outputs: Float32Array;
  /** Where each tile's answer starts in `outputs`; null if it failed. */
  answer: Promise<(number | null)[]>;
  /** Call with the write of this batch's outputs: its buffers are reused once it settles. */
  release(written: Promise<unknown>): void;
}

/**
 * Hands batches to the model ahead of the one being written, each in a pair of input and output
 * buffers of the writers, reused once the batch in them is written.
 */
class ModelFeed {
  private readonly inputs: Float32Array[] = [];
  private readonly outputs: Float32Array[] = [];
  /** Per buffer pair: settles once the batch last answered into it is written. */
  private readonly released: Promise<void>[] = [];
  /** Batches of prepared shards not yet handed to the model, and those handed to it, in order. */
  private readonly unposted: { index: number; batch: number[]; region: Promise<Region> }[] = [];
  private readonly posted: PostedBatch[] = [];
  private postedCount = 0;

  constructor(private readonly input: PipelineInput) {
    const { model, writers, plan } = input;
    const tileOutput = model.spec.channels.length * model.spec.tileSize * model.spec.tileSize;
    for (let b = 0; b < BATCH_BUFFERS; b++) {
      this.outputs.push(writers.planeBuffer(plan.batchSize * tileOutput));
      this.inputs.push(writers.inputBuffer(plan.batchSize * inputTileLength(model.spec)));
      this.released.push(Promise.resolve());
    }
  }

  queue(index: number, batch: number[], region: Promise<Region>): void {
    this.unposted.push({ index, batch, region });
  }

  /** The next batch handed to the model, after handing it more to wait on. */
  next(): PostedBatch {
    this.post();
    const next = this.posted.shift();
    if (!next) throw new Error('no batch queued for the model');
    return next;
  }

  /** Settles once every batch handed to the model has its answer or failed. */
  settled(): Promise<unknown> {
    return Promise.allSettled(this.posted.map((b) => b.answer));
  }

  /**
   * Hands queued batches to the model until two wait beyond the one being written, across
   * shard boundaries. A batch is filled once its buffer pair is released.
   */
  post(): void {
    while (this.posted.length < BATCH_BUFFERS - 1 && this.unposted.length > 0) {
      const { index, batch, region } = this.unposted.shift()!;
      const buffer = this.postedCount++ % BATCH_BUFFERS;
      const answer = (async () => {
        await this.released[buffer];
        const input = this.fillInputs(await region, batch, buffer);
        return this.inferWithRetry(input, batch.length, buffer);
      })();
      answer.catch(() => {});
      const release = (written: Promise<unknown>) => {
        this.released[buffer] = written.then(
          () => {},
          () => {},
        );
      };
      this.posted.push({ index, batch, outputs: this.outputs[buffer]!, answer, release });
    }
  }

  /** The model inputs of `batch` in input buffer `which`, read from the shard's H&E region. */
  private fillInputs(region: Region, batch: number[], which: number): Float32Array {
    if (!region) throw new Error('positions to infer but no H&E region');
    const { plan, model, writers } = this.input;
    const { tileSize, halo } = model.spec;
    const length = inputTileLength(model.spec);
    const input = this.inputs[which]!.subarray(0, batch.length * length);
    batch.forEach((p, k) => {
      const sq = plan.tiles.square(p);
      const ys = inputSamples(sq.y0, sq.y1 - sq.y0, tileSize, halo, plan.tiles.heightPx);
      const xs = inputSamples(sq.x0, sq.x1 - sq.x0, tileSize, halo, plan.tiles.widthPx);
      writers.fillInput(region.image, region.x, region.y, ys, xs, input, k * length);
    });
    return input;
  }

  /**
   * One batch into output buffer `which`; if it throws, each tile alone (its retry). A tile that
   * fails alone is null. Only inference failures are absorbed: an abort or a read failure ends
   * the run.
   */
  private async inferWithRetry(
    input: Float32Array,
    count: number,
    which: number,
  ): Promise<(number | null)[]> {
    const { model, signal } = this.input;
    const tile = model.spec.channels.length * model.spec.tileSize * model.spec.tileSize;
    const output = this.outputs[which]!.subarray(0, count * tile);
    try {
      await model.run(input, count, output);
      return Array.from({ length: count }, (_, k) => k * tile);
    } catch {
      signal?.throwIfAborted();
      const length = inputTileLength(model.spec);
      const out: (number | null)[] = [];
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
}

/**
 * Outputs of positions inferred in one shard and needed by later ones of the band (their stored
 * markers' planes, `[M, T, T]`, or null if the position failed), in buffers reused once read.
 */
class CarriedOutputs {
  private readonly held = new Map<number, Float32Array | null>();
  private readonly spare: Float32Array[] = [];

  constructor(
    private readonly writers: PlaneWriters,
    private readonly length: number,
  ) {}

  /** Keeps position `p`'s planes: `channels` of the answer at `source[base..]`, or its failure. */
  keep(
    p: number,
    source: Float32Array,
    base: number | null,
    channels: readonly number[],
    plane: number,
  ): void {
    let kept: Float32Array | null = null;
    if (base !== null) {
      kept = this.spare.pop() ?? this.writers.planeBuffer(this.length);
      channels.forEach((c, m) => {
        const from = base + c * plane;
        kept!.set(source.subarray(from, from + plane), m * plane);
      });
    }
    this.held.set(p, kept);
  }

  /** Position `p`'s planes; with `last`, forgotten (`reuse` its buffer once it has been read). */
  take(p: number, last: boolean): Float32Array | null {
    const out = this.held.get(p);
    if (out === undefined) throw new Error(`position ${p} was not carried`);
    if (last) this.held.delete(p);
    return out;
  }

  reuse(buffer: Float32Array): void {
    this.spare.push(buffer);
  }
}

/** Makes each shard: infers or carries its positions and has the writers write them. */
class ShardMaker {
  private readonly carried: CarriedOutputs;
  /** Shard buffers free for the next shard, holding an earlier shard's pixels (see `make`). */
  private readonly pool: Uint16Array[][] = [];
  private readonly geometry: ShardGeometry;
  /** Position of a stored marker's plane in a carried output. */
  private readonly carriedChannels: number[];

  constructor(
    private readonly input: PipelineInput,
    private readonly feed: ModelFeed,
    private readonly book: ProgressBook,
  ) {
    const { plan, model, writers, sink } = input;
    const markers = plan.layout.markers.length;
    const plane = model.spec.tileSize * model.spec.tileSize;
    this.carried = new CarriedOutputs(writers, markers * plane);
    this.geometry = sink.geometry;
    this.carriedChannels = plan.layout.markers.map((_, m) => m);
  }

  free(buffers: Uint16Array[]): void {
    this.pool.push(buffers);
  }

  /** Lists shard `index`'s positions and starts reading the H&E of those it infers. */
  prepare(index: number): ShardWork | undefined {
    const { tiles, batchSize } = this.input.plan;
    const shard = index < this.input.plan.end ? tiles.order[index] : undefined;
    if (!shard) return undefined;
    const positions = tiles.positionsOf(shard);
    const infer = positions.filter((p) => tiles.inferredIn(p, shard, this.book.startShard));
    const region = this.readRegion(infer);
    region.catch(() => {});
    const batches: number[][] = [];
    for (let b = 0; b < infer.length; b += batchSize) batches.push(infer.slice(b, b + batchSize));
    for (const batch of batches) this.feed.queue(index, batch, region);
    return { index, shard, positions, batches, region };
  }

  /** Infers and writes one shard's positions into a set of shard buffers. */
  async make(work: ShardWork): Promise<Made> {
    const { model, signal, writers, plan } = this.input;
    const tiles = plan.tiles;
    const buffers = this.pool.pop() ?? writers.shardBuffers();
    const rect = tiles.shardRect(work.shard);
    const markers = plan.layout.markers.length;
    const plane = model.spec.tileSize * model.spec.tileSize;
    const histograms = plan.layout.markers.map(() => new Uint32Array(HISTOGRAM_BINS));
    // Per position (in `work.positions` order) and marker: what was written, summed at the end
    // in that order, so a resumed run (which carries fewer positions) adds up the same sums.
    const sums: (PlaneSums | undefined)[] = new Array(work.positions.length * markers);
    const slotOf = new Map(work.positions.map((p, i) => [p, i]));
    const writes: Promise<void>[] = [];
    const write = (
      positions: number[],
      source: Float32Array,
      bases: number[],
      channels: readonly number[],
    ) => {
      const written = writers
        .write({
          source,
          bases,
          squares: positions.map((p) => tiles.square(p)),
          channels,
          clip: rect,
          shards: buffers,
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
    // The buffers hold an earlier shard's pixels: what no output is written over is set to the
    // fill value, in calls the writers take in order with the writes. Only inside the chunks
    // some position's square meets: the others are left out of the shard unread.
    const { touched, untouched } = this.chunksMet(rect, work.positions);
    const fill = (rects: PixelRect[]) => {
      const filled = writers.fill(rect, rects, buffers, PREDICTION_FILL_VALUE);
      filled.catch(() => {});
      writes.push(filled);
    };
    const fillSquares = (positions: number[]) =>
      fill(positions.flatMap((p) => intersect(tiles.square(p), rect) ?? []));
    fill(tiles.uncoveredRects(work.shard).flatMap((r) => touched.flatMap((c) => intersect(r, c) ?? [])));
    const inferred = new Set(work.batches.flat());
    for (const p of work.positions) {
      if (inferred.has(p)) continue;
      const last = !tiles.neededLater(p, work.shard);
      const out = this.carried.take(p, last);
      if (out === null) fillSquares([p]);
      else {
        const written = write([p], out, [0], this.carriedChannels);
        // Its buffer serves a later position once the writers have read it.
        if (last)
          written.then(
            () => this.carried.reuse(out),
            () => {},
          );
      }
    }
    let done = 0;
    let failed = 0;
    for (const expected of work.batches) {
      signal?.throwIfAborted();
      const { index, batch, outputs: source, answer, release } = this.feed.next();
      if (index !== work.index || batch !== expected) throw new Error(`batch of shard ${index} out of order`);
      const outputs = await answer;
      const ok = batch.filter((_, k) => outputs[k] !== null);
      const bases = outputs.filter((base): base is number => base !== null);
      release(write(ok, source, bases, plan.channels));
      fillSquares(batch.filter((_, k) => outputs[k] === null));
      this.feed.post();
      batch.forEach((p, k) => {
        const base = outputs[k] ?? null;
        if (tiles.isHome(p, work.shard)) {
          done++;
          if (base === null) failed++;
        }
        if (tiles.neededLater(p, work.shard)) this.carried.keep(p, source, base, plan.channels, plane);
      });
      this.book.batchDone(done);
    }
    await Promise.all(writes);
    this.book.shardMade(done);
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
    return { buffers, tiles: done, failed, statistics, untouched };
  }

  /**
   * The inner chunks of the shard at `rect` (level pixels, chunk-major order) that the squares
   * of `positions` meet, and the indices of those they do not.
   */
  private chunksMet(rect: PixelRect, positions: number[]): { touched: PixelRect[]; untouched: number[] } {
    const g = this.geometry;
    const squares = positions.map((p) => this.input.plan.tiles.square(p));
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

  private async readRegion(positions: number[]): Promise<Region> {
    if (positions.length === 0) return undefined;
    const { plan, model, he, signal } = this.input;
    const { tileSize, halo } = model.spec;
    let x0 = Number.POSITIVE_INFINITY;
    let y0 = Number.POSITIVE_INFINITY;
    let x1 = Number.NEGATIVE_INFINITY;
    let y1 = Number.NEGATIVE_INFINITY;
    for (const p of positions) {
      const w = inputWindow(plan.tiles.square(p), tileSize, halo);
      x0 = Math.min(x0, w.x0);
      y0 = Math.min(y0, w.y0);
      x1 = Math.max(x1, w.x1);
      y1 = Math.max(y1, w.y1);
    }
    const clip: PixelRect = {
      x0: Math.max(0, x0),
      y0: Math.max(0, y0),
      x1: Math.min(plan.tiles.widthPx, x1),
      y1: Math.min(plan.tiles.heightPx, y1),
    };
    if (clip.x1 <= clip.x0 || clip.y1 <= clip.y0) return undefined;
    const image = await he.readRegion(
      {
        level: plan.tiles.level,
        x: clip.x0,
        y: clip.y0,
        width: clip.x1 - clip.x0,
        height: clip.y1 - clip.y0,
      },
      signal,
    );
    return { image, x: clip.x0, y: clip.y0 };
  }
}
