import type { RgbImage, SlideImage } from '../image';
import { encodeJson, groupMetadata, type KeyValueStore, ShardedArray } from '../zarr';
import { copyRgbIntoShard, downsampleIntoQuadrant } from './kernels';
import { heImageAttributes } from './ngff';
import {
  type PyramidLevel,
  type PyramidRegion,
  type PyramidStage,
  pyramidLevels,
  pyramidStages,
  type ShardAddress,
  ShardTree,
} from './plan';

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

/** Side of a level's shards and of their inner chunks, in pixels, unless a caller says otherwise. */
export const HE_SHARD_SIZE = 4096;
export const HE_CHUNK_SIZE = 512;

interface PyramidLayoutOptions {
  shardSize?: number;
  chunkSize?: number;
}

export interface BuildHePyramidOptions extends PyramidLayoutOptions {
  image: SlideImage;
  /** The pyramid's root: keys are written relative to it (`zarr.json`, `0/c/0/1/2`). */
  sink: KeyValueStore;
  /** Microns per level-0 pixel, or null when the slide has no trustworthy calibration. */
  mpp: number | null;
  /** The multiscale's name. */
  name: string;
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
 * The same bytes as the arrays' metadata, every region of `pyramidStages` in order and the
 * group, in one call (see `buildHePyramidRegion`).
 */
export async function buildHePyramid(options: BuildHePyramidOptions): Promise<HePyramid> {
  const { image, sink, signal } = options;
  const size = { widthPx: image.widthPx, heightPx: image.heightPx };
  const levels = await writeHePyramidArrays({ ...options, ...size });
  const tree = new ShardTree(levels, options.shardSize ?? HE_SHARD_SIZE);
  const progress = await buildHePyramidRegion({
    ...options,
    ...size,
    region: { leafLevel: 0, topLevel: tree.rootLevel, row: 0 },
  });
  await writeHePyramidGroup({ sink, name: options.name, levels, mpp: options.mpp, signal });
  return { levels, progress };
}

/** Each level's array metadata (`{level}/zarr.json`), written before any of its shards. */
export async function writeHePyramidArrays(
  options: PyramidLayoutOptions & {
    widthPx: number;
    heightPx: number;
    sink: KeyValueStore;
    signal?: AbortSignal;
  },
): Promise<PyramidLevel[]> {
  const { shardSize, chunkSize } = layoutOf(options);
  checkSizes(options, shardSize, chunkSize);
  const levels = pyramidLevels(options.widthPx, options.heightPx);
  for (const level of levels)
    await levelArray(level, shardSize, chunkSize).writeMetadata(options.sink, options.signal);
  return levels;
}

/** The H&E group's `zarr.json`: where it goes, and the image and scale it describes. */
interface HePyramidGroupOptions {
  sink: KeyValueStore;
  name: string;
  levels: readonly PyramidLevel[];
  mpp: number | null;
  signal?: AbortSignal;
}

/** The group's `zarr.json`, written last: its presence marks a complete pyramid. */
export async function writeHePyramidGroup(options: HePyramidGroupOptions): Promise<void> {
  await options.sink.put('zarr.json', heGroupDocument(options), { signal: options.signal });
}

function heGroupDocument(options: HePyramidGroupOptions) {
  return encodeJson(groupMetadata(heImageAttributes(options.name, options.levels, options.mpp)));
}

/**
 * The group's metadata again for the sample's current mpp (a scale set or corrected after
 * ingest), so the H&E and the marker stores made at that scale line up. Unchanged metadata is
 * not rewritten, and a store whose group is gone (a sample being deleted) is left alone.
 */
export async function rescaleHePyramidGroup(options: HePyramidGroupOptions): Promise<void> {
  const current = await options.sink.get('zarr.json', { signal: options.signal });
  const next = heGroupDocument(options);
  if (!current || Buffer.from(current).equals(next)) return;
  await options.sink.put('zarr.json', next, { signal: options.signal });
}

/**
 * The regions of a pyramid, stage by stage, in bands of `2 ** bandLevels` level-0 shard rows,
 * a band cut into column ranges where a stage has fewer rows than `regionsPerStage` (default 1).
 */
export function planHePyramid(
  widthPx: number,
  heightPx: number,
  options: PyramidLayoutOptions & { bandLevels: number; regionsPerStage?: number },
): PyramidStage[] {
  const { shardSize } = layoutOf(options);
  return pyramidStages(widthPx, heightPx, shardSize, options.bandLevels, options.regionsPerStage);
}

export interface BuildHePyramidRegionOptions extends PyramidLayoutOptions {
  /** The slide's level-0 size. */
  widthPx: number;
  heightPx: number;
  /** The slide: read only by a region whose leaf level is 0. */
  image?: SlideImage;
  sink: KeyValueStore;
  region: PyramidRegion;
  signal?: AbortSignal;
  /** The last progress reported by an earlier, interrupted build of the same region. */
  resume?: PyramidResume | null;
  onProgress?: (progress: PyramidProgress) => void;
}

/**
 * Writes the shards of one region (see `PyramidRegion`), once the arrays' metadata and the
 * regions it reads are stored. Shards are made in one post-order walk of each subtree
 * (Z-order), so a level-k shard is averaged from the four level-(k-1) shards below it while
 * they are still in memory, and only one shard per level is alive at a time: memory does not
 * grow with the slide. Each finished shard is written at once. Given `resume`, shards already
 * finished are not made again; those still needed by a parent are read back from `sink`. The
 * bytes are the same either way, and the same whichever regions the pyramid is cut into.
 */
export async function buildHePyramidRegion(options: BuildHePyramidRegionOptions): Promise<PyramidProgress> {
  const { shardSize, chunkSize } = layoutOf(options);
  checkSizes(options, shardSize, chunkSize);
  const levels = pyramidLevels(options.widthPx, options.heightPx);
  const tree = new ShardTree(levels, shardSize);
  checkRegion(tree, options.region, options.image);
  const arrays = levels.map((level) => levelArray(level, shardSize, chunkSize));
  const layout = `he/1/${options.widthPx}x${options.heightPx}/${shardSize}/${chunkSize}/zstd${HE_ZSTD_LEVEL}/${regionName(options.region)}`;
  const build = new Build(options, tree, arrays, layout);
  await build.run();
  return build.progress();
}

function layoutOf(options: PyramidLayoutOptions): { shardSize: number; chunkSize: number } {
  return { shardSize: options.shardSize ?? HE_SHARD_SIZE, chunkSize: options.chunkSize ?? HE_CHUNK_SIZE };
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

function checkSizes(size: { widthPx: number; heightPx: number }, shardSize: number, chunkSize: number): void {
  if (!(size.widthPx >= 1 && size.heightPx >= 1)) {
    throw new RangeError(`image of ${size.widthPx} x ${size.heightPx} pixels has nothing to build`);
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

/** A region's name in its resume token: a token of another region is not its own. */
function regionName({ leafLevel, topLevel, row, columns }: PyramidRegion): string {
  const name = `${leafLevel}-${topLevel}-${row}`;
  return columns ? `${name}-${columns.first}-${columns.end}` : name;
}

function checkRegion(tree: ShardTree, region: PyramidRegion, image: SlideImage | undefined): void {
  const { leafLevel, topLevel, row, columns } = region;
  const levelsOk =
    Number.isSafeInteger(leafLevel) &&
    Number.isSafeInteger(topLevel) &&
    leafLevel >= 0 &&
    topLevel <= tree.rootLevel &&
    (leafLevel < topLevel || topLevel === 0);
  const rowOk = Number.isSafeInteger(row) && row >= 0 && row < tree.coverY(topLevel);
  const columnsOk =
    columns === undefined ||
    (Number.isSafeInteger(columns.first) &&
      Number.isSafeInteger(columns.end) &&
      columns.first >= 0 &&
      columns.first < columns.end &&
      columns.end <= tree.coverX(topLevel));
  if (!levelsOk || !rowOk || !columnsOk) {
    throw new RangeError(
      `no region ${JSON.stringify(region)} in a pyramid rooted at level ${tree.rootLevel}`,
    );
  }
  if (leafLevel === 0 && !image) throw new RangeError('a region read from the slide needs the slide');
  const base = tree.levels[0]!;
  if (image && (image.widthPx !== base.widthPx || image.heightPx !== base.heightPx)) {
    throw new RangeError(
      `the slide is ${image.widthPx} x ${image.heightPx}, not ${base.widthPx} x ${base.heightPx}`,
    );
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

function shardName({ level, y, x }: ShardAddress): string {
  return `${level}/${y}/${x}`;
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
  private readonly roots: ShardAddress[];
  /** The lowest level this region writes: its leaf level, unless that is read back. */
  private readonly floor: number;
  private readonly total: number;
  private readonly slideQueue: ShardAddress[];
  private slideCursor = 0;
  private prefetch: { at: ShardAddress; pixels: Promise<RgbImage> } | undefined;
  /** Read-backs started while the sibling before them is averaged, by `shardName`. */
  private readonly readAhead = new Map<string, Promise<Made>>();
  private readonly inFlight: Promise<void>[] = [];
  private readonly finished = new Set<number>();
  /** Next rank in traversal order. */
  private rank = 0;
  /** Ranks below this are written. */
  private done: number;
  private readonly from: number;

  constructor(
    private readonly options: BuildHePyramidRegionOptions,
    private readonly tree: ShardTree,
    private readonly arrays: ShardedArray<'uint8'>[],
    private readonly layout: string,
  ) {
    const { leafLevel, topLevel, row, columns } = options.region;
    const { first, end } = columns ?? { first: 0, end: tree.coverX(topLevel) };
    this.roots = Array.from({ length: end - first }, (_, k) => ({ level: topLevel, y: row, x: first + k }));
    this.floor = leafLevel === 0 ? 0 : leafLevel + 1;
    this.total = this.roots.reduce((n, root) => n + tree.subtreeSize(root, this.floor), 0);
    this.from = resumeFrom(options.resume, layout, this.total);
    this.done = this.from;
    const g = arrays[0]!.geometry;
    // Unfilled: whatever a buffer held past a level's edge is overwritten before it is encoded.
    this.pool = new BufferPool(() => new Uint8Array(g.chunksY * g.chunksX * g.chunkLength));
    this.slideQueue = leafLevel === 0 ? tree.levelZeroShards(this.from, this.roots) : [];
  }

  progress(): PyramidProgress {
    return { version: 1, layout: this.layout, done: this.done, total: this.total };
  }

  async run(): Promise<void> {
    try {
      for (const root of this.roots) await this.visit(root, false);
      while (this.inFlight.length > 0) await this.inFlight.shift();
    } finally {
      // Nothing may still be writing once the build has settled, failed or not.
      await Promise.allSettled([...this.inFlight, this.prefetch?.pixels, ...this.readAhead.values()]);
    }
    this.options.onProgress?.(this.progress());
  }

  /** Makes (or, if already written, skips or reads back) the shard at `node` and all below it. */
  private async visit(node: ShardAddress, needed: boolean): Promise<Made | undefined> {
    this.options.signal?.throwIfAborted();
    const written = this.tree.isWritten(node);
    if (node.level < this.floor) return written && needed ? this.readBack(node) : undefined;
    const size = this.tree.subtreeSize(node, this.floor);
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
      const children = this.tree.children(node);
      for (const [index, child] of children.entries()) {
        const visiting = this.visit(child, written);
        this.readAheadAfter(children[index + 1], written);
        const made = await visiting;
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

  /**
   * Starts reading back `next`, the sibling after the child being visited, when it is
   * one the walk will read back (below the floor, stored and needed): its fetch and
   * decompression then run on the I/O and libuv threads while this one is averaged. One at a
   * time, so a region holds at most one shard more.
   */
  private readAheadAfter(next: ShardAddress | undefined, needed: boolean): void {
    if (!next || !needed || next.level >= this.floor || !this.tree.isWritten(next)) return;
    const made = this.readBack(next);
    // Awaited when the walk reaches `next`, or settled in `run`'s finally if it never does.
    made.catch(() => {});
    this.readAhead.set(shardName(next), made);
  }

  private async readBack(node: ShardAddress): Promise<Made> {
    const ahead = this.readAhead.get(shardName(node));
    if (ahead) {
      this.readAhead.delete(shardName(node));
      return ahead;
    }
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
    const { signal } = this.options;
    // Only a region with leaf level 0 reads the slide, and checkRegion saw that it has one.
    const image = this.options.image!;
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
