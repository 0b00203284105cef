import type { RgbImage, SlideImage } from '../image';
import { encodeJson, groupMetadata, type KeyValueStore, ShardedArray } from '../zarr';
import { copyRgbIntoShard, downsampleIntoQuadrant } from './kernels';
import { heImageAttributes } from './ngff';
import { type PyramidLevel, pyramidLevels, type ShardAddress, ShardTree } from './plan';

/** What missing chunks read as: white, the background of a brightfield slide (as in `SlideImage`). */
export const HE_FILL_VALUE = 255;
/** zstd level of the inner chunks: level 1 compressed H&E about 1.6x faster than 3, 1 % larger. */
export const HE_ZSTD_LEVEL = 1;
/** Shards encoded or being stored at once, besides the one being made: bounds memory. */
const WRITES_IN_FLIGHT = 2;

/**
 * Progress, and the token to resume from: pass the last one reported back as `resume`. Plain
 * JSON, so it can travel as Temporal heartbeat details. `done` counts shards finished in
 * traversal order; `layout` names everything the bytes depend on, so a token from another
 * slide size or shard layout is ignored rather than trusted.
 */
export interface PyramidProgress {
  version: 1;
  layout: string;
  done: number;
  total: number;
}

export type PyramidResume = PyramidProgress;

export interface BuildHePyramidOptions {
  image: SlideImage;
  /** The pyramid's root: keys are written relative to it (`zarr.json`, `0/c/0/1/2`). */
  sink: KeyValueStore;
  /** Microns per level-0 pixel, or null when the slide has no trustworthy calibration. */
  mpp: number | null;
  /** The multiscale's name. */
  name: string;
  shardSize?: number;
  chunkSize?: number;
  signal?: AbortSignal;
  /** The last progress reported by an earlier, interrupted build of the same slide. */
  resume?: PyramidResume | null;
  onProgress?: (progress: PyramidProgress) => void;
}

export interface HePyramid {
  levels: PyramidLevel[];
  progress: PyramidProgress;
}

/**
 * Writes the H&E pyramid of `image` as an OME-NGFF 0.5 image on Zarr v3: one sharded uint8
 * `[3, H, W]` array per level, level 0 the slide's level 0, each next level a 2x2 box average.
 *
 * Shards are made in one post-order walk of the shard quadtree (Z-order), so a level-k shard is
 * averaged from the four level-(k-1) shards below it while they are still in memory, and only
 * one shard per level is alive at a time: memory does not grow with the slide. Each finished
 * shard is written at once. Given `resume`, shards already finished are not made again; those
 * still needed by a parent are read back from `sink`. The bytes are the same either way. The
 * group's `zarr.json` is written last, so its presence marks a complete pyramid.
 */
export async function buildHePyramid(options: BuildHePyramidOptions): Promise<HePyramid> {
  const shardSize = options.shardSize ?? 4096;
  const chunkSize = options.chunkSize ?? 512;
  checkSizes(options.image, shardSize, chunkSize);
  const levels = pyramidLevels(options.image.widthPx, options.image.heightPx);
  const arrays = levels.map((level) => levelArray(level, shardSize, chunkSize));
  const tree = new ShardTree(levels, shardSize);
  const layout = `he/1/${options.image.widthPx}x${options.image.heightPx}/${shardSize}/${chunkSize}/zstd${HE_ZSTD_LEVEL}`;
  const from = resumeFrom(options.resume, layout, tree.total);
  const { sink, signal } = options;
  for (const array of arrays) await array.writeMetadata(sink, signal);
  const build = new Build(options, tree, arrays, { layout, from });
  await build.run();
  const attributes = heImageAttributes(options.name, levels, options.mpp);
  await sink.put('zarr.json', encodeJson(groupMetadata(attributes)), { signal });
  return { levels, progress: build.progress() };
}

function levelArray(level: PyramidLevel, shardSize: number, chunkSize: number): ShardedArray<'uint8'> {
  return new ShardedArray(level.path, {
    dataType: 'uint8',
    shape: [3, level.heightPx, level.widthPx],
    shardShape: [shardSize, shardSize],
    chunkShape: [chunkSize, chunkSize],
    fillValue: HE_FILL_VALUE,
    dimensionNames: ['c', 'y', 'x'],
    compressionLevel: HE_ZSTD_LEVEL,
  });
}

function checkSizes(image: SlideImage, shardSize: number, chunkSize: number): void {
  if (!(image.widthPx >= 1 && image.heightPx >= 1)) {
    throw new RangeError(`image of ${image.widthPx} x ${image.heightPx} pixels has nothing to build`);
  }
  if (
    !Number.isSafeInteger(chunkSize) ||
    chunkSize < 2 ||
    chunkSize % 2 !== 0 ||
    !Number.isSafeInteger(shardSize) ||
    shardSize % chunkSize !== 0
  ) {
    // Odd chunks would split a 2x2 block's output across parent chunks.
    throw new RangeError(`chunk ${chunkSize} must be even and divide shard ${shardSize}`);
  }
}

function resumeFrom(resume: PyramidResume | null | undefined, layout: string, total: number): number {
  if (
    typeof resume !== 'object' ||
    resume === null ||
    resume.version !== 1 ||
    resume.layout !== layout ||
    resume.total !== total ||
    !Number.isSafeInteger(resume.done) ||
    resume.done < 0 ||
    resume.done > total
  ) {
    return 0;
  }
  return resume.done;
}

/** Chunk-major shard buffers for reuse: allocating 50 MB per shard would churn the GC. */
class BufferPool {
  private readonly free: Uint8Array[] = [];
  constructor(private readonly allocate: () => Uint8Array) {}

  take(): Uint8Array {
    return this.free.pop() ?? this.allocate();
  }

  /** Returns `buffer` once `busy` settles (its chunks are compressed from views of it). */
  giveAfter(buffer: Uint8Array, busy: Promise<unknown>): void {
    busy.then(
      () => this.free.push(buffer),
      () => {},
    );
  }
}

interface Made {
  pixels: Uint8Array;
  /** Settles when the shard's chunks no longer read `pixels`. */
  written: Promise<void>;
}

class Build {
  private readonly pool: BufferPool;
  private readonly slideQueue: ShardAddress[];
  private slideCursor = 0;
  private prefetch: { at: ShardAddress; pixels: Promise<RgbImage> } | undefined;
  private readonly inFlight: Promise<void>[] = [];
  private readonly finished = new Set<number>();
  /** Next rank in traversal order. */
  private rank = 0;
  /** Ranks below this are written. */
  private done: number;
  private readonly layout: string;
  private readonly from: number;

  constructor(
    private readonly options: BuildHePyramidOptions,
    private readonly tree: ShardTree,
    private readonly arrays: ShardedArray<'uint8'>[],
    resume: { layout: string; from: number },
  ) {
    this.layout = resume.layout;
    this.from = resume.from;
    this.done = resume.from;
    const g = arrays[0]!.geometry;
    // Unfilled: whatever a buffer held past a level's edge is overwritten before it is encoded.
    this.pool = new BufferPool(() => new Uint8Array(g.chunksY * g.chunksX * g.chunkLength));
    this.slideQueue = tree.levelZeroShards(resume.from);
  }

  progress(): PyramidProgress {
    return { version: 1, layout: this.layout, done: this.done, total: this.tree.total };
  }

  async run(): Promise<void> {
    try {
      await this.visit({ level: this.tree.rootLevel, y: 0, x: 0 }, false);
      while (this.inFlight.length > 0) await this.inFlight.shift();
    } finally {
      // Nothing may still be writing once the build has settled, failed or not.
      await Promise.allSettled([...this.inFlight, this.prefetch?.pixels]);
    }
    this.options.onProgress?.(this.progress());
  }

  /** Makes (or, if already written, skips or reads back) the shard at `node` and all below it. */
  private async visit(node: ShardAddress, needed: boolean): Promise<Made | undefined> {
    this.options.signal?.throwIfAborted();
    const size = this.tree.subtreeSize(node);
    const written = this.tree.isWritten(node);
    if (this.rank + size <= this.from) {
      this.rank += size;
      return written && needed ? this.readBack(node) : undefined;
    }
    let pixels: Uint8Array | undefined;
    if (node.level === 0) {
      if (written) {
        pixels = this.pool.take();
        await this.readSlide(node, pixels);
      }
    } else {
      for (const child of this.tree.children(node)) {
        const made = await this.visit(child, written);
        if (!made) continue;
        // Taken at the first child, not before the walk down: a chain of single-shard levels
        // then holds two buffers, not one per level.
        pixels ??= this.pool.take();
        this.downsample(child, made.pixels, pixels);
        this.pool.giveAfter(made.pixels, made.written);
      }
    }
    if (!written) return undefined;
    pixels ??= this.pool.take();
    const made = { pixels, written: (await this.write(node, pixels)).stored };
    if (needed) return made;
    this.pool.giveAfter(pixels, made.written);
    return undefined;
  }

  private async readBack(node: ShardAddress): Promise<Made> {
    const pixels = this.pool.take();
    await this.arrays[node.level]!.readShard(this.options.sink, node.y, node.x, pixels, this.options.signal);
    return { pixels, written: Promise.resolve() };
  }

  private downsample(child: ShardAddress, from: Uint8Array, into: Uint8Array): void {
    const extent = this.arrays[child.level]!.shardExtent(child.y, child.x);
    downsampleIntoQuadrant(from, into, this.arrays[0]!.geometry, {
      y: child.y % 2,
      x: child.x % 2,
      validHeight: extent.height,
      validWidth: extent.width,
    });
  }

  /** Level-0 pixels from the slide, reading the next level-0 shard's region meanwhile. */
  private async readSlide(node: ShardAddress, into: Uint8Array): Promise<void> {
    const pending =
      this.prefetch?.at.y === node.y && this.prefetch.at.x === node.x ? this.prefetch : undefined;
    const pixels = pending?.pixels ?? this.startRead(node);
    // The queue lists level-0 shards in the order this walk reaches them.
    const next = this.slideQueue[++this.slideCursor];
    this.prefetch = next ? { at: next, pixels: this.startRead(next) } : undefined;
    copyRgbIntoShard(await pixels, into, this.arrays[0]!.geometry, 0);
  }

  private startRead(node: ShardAddress): Promise<RgbImage> {
    const { image, signal } = this.options;
    const size = this.tree.shardSize;
    const region = {
      level: 0,
      x: node.x * size,
      y: node.y * size,
      width: Math.min(size, image.widthPx - node.x * size),
      height: Math.min(size, image.heightPx - node.y * size),
    };
    const pixels = image.readRegion(region, signal).then((rgb) => {
      if (
        rgb.width !== region.width ||
        rgb.height !== region.height ||
        rgb.data.length !== rgb.width * rgb.height * 3
      ) {
        throw new Error(`readRegion answered ${rgb.width} x ${rgb.height} for ${JSON.stringify(region)}`);
      }
      return rgb;
    });
    // A prefetch may be abandoned when the build fails; its rejection is not news.
    pixels.catch(() => {});
    return pixels;
  }

  /**
   * Starts encoding and storing a finished shard, waiting first if too many are in flight.
   * Answers the write itself (wrapped: an awaited promise would flatten), which settles once
   * the shard is stored.
   */
  private async write(node: ShardAddress, pixels: Uint8Array): Promise<{ stored: Promise<void> }> {
    const rank = this.rank++;
    const { sink, signal } = this.options;
    const writing = this.arrays[node.level]!.writeShard(sink, node.y, node.x, pixels, signal).then(() =>
      this.finish(rank),
    );
    // Failures surface where `inFlight` is awaited; until then the rejection is expected.
    writing.catch(() => {});
    this.inFlight.push(writing);
    while (this.inFlight.length > WRITES_IN_FLIGHT) await this.inFlight.shift();
    return { stored: writing };
  }

  /** Marks a rank written and reports progress up to the first rank still unwritten. */
  private finish(rank: number): void {
    this.finished.add(rank);
    if (rank !== this.done) return;
    while (this.finished.delete(this.done)) this.done++;
    this.options.onProgress?.(this.progress());
  }
}
