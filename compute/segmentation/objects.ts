import { zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { ComputeError } from '../errors';
import type { RgbImage, SlideImage } from '../image';
import { M, MEASUREMENT_COUNT, measureCell } from './features';
import { stainDensities } from './stain';
import { grownRect, type SegmentationTile } from './tiles';
import type { LabelImage, Segmenter } from './types';

/**
 * The cells one tile owns: those whose centroid lies in its core, each whole (the segmenter saw
 * the core grown by a halo), as row runs in level-0 pixels with its measurements. This is what
 * a segmentation activity stores per tile (`objects/{index}.bin`) and what the mask painter and
 * the table writers read back, so the slide is segmented once and everything after is a pass
 * over small files.
 *
 * Local label `k` (1-based) of tile `t` becomes layer label `labelOffsets[t] + k`.
 */
export interface TileObjects {
  tile: SegmentationTile;
  count: number;
  /** `count x MEASUREMENT_COUNT`, row-major, pixel units (see `MEASUREMENTS`). */
  measurements: Float64Array;
  /** Object `k` (0-based) owns runs `runStart[k] .. runStart[k + 1]` (in triples). */
  runStart: Uint32Array;
  /** Triples `(y, x0, x1)`, level-0 pixels, `x1` exclusive; each object's rows ascending. */
  runs: Uint32Array;
  /**
   * Each object's nucleus as row runs, grouped as `runs` are (object `k`: runs
   * `nuclei.runStart[k] .. nuclei.runStart[k + 1]`); absent from files of format 1.
   */
  nuclei?: { runStart: Uint32Array; runs: Uint32Array };
  /**
   * Kept objects that touch the edge of the window read (where it is not the slide's edge): the
   * halo was too small for them, so they may be cut. Zero when the halo fits the largest cell.
   */
  cutObjects: number;
}

export interface SegmentTileOptions {
  segmenter: Segmenter;
  /** Microns per level-0 pixel. */
  mpp: number;
  /** Level-0 pixels read around the core on every side: at least the largest cell's diameter. */
  haloPx: number;
  signal?: AbortSignal;
}

/** Reads the tile's core and halo from level 0, segments it, and keeps the objects it owns. */
export async function segmentTileObjects(
  slide: SlideImage,
  tile: SegmentationTile,
  options: SegmentTileOptions,
): Promise<TileObjects> {
  const window = grownRect(tile, options.haloPx, slide);
  const rgb = await slide.readRegion({ level: 0, ...window }, options.signal);
  return segmentWindowObjects(rgb, window, tile, slide, options);
}

/** As `segmentTileObjects`, for pixels already read: `rgb` is `window` of level 0. */
export async function segmentWindowObjects(
  rgb: RgbImage,
  window: { x: number; y: number; width: number; height: number },
  tile: SegmentationTile,
  slide: { widthPx: number; heightPx: number },
  options: SegmentTileOptions,
): Promise<TileObjects> {
  const { cells, nuclei } = await options.segmenter.segment(rgb, options.mpp, options.signal);
  checkLabels(cells, rgb, 'cells');
  checkLabels(nuclei, rgb, 'nuclei');
  const stats = labelStatistics(cells);
  const owned = ownedLabels(stats, window, tile);
  const nucleusArea = labelAreas(nuclei, cells.count);
  const { runStart, runs } = collectRuns(cells, owned, stats, window);
  const nucleusRuns = collectRuns(nuclei, owned, labelStatistics(nuclei), window);
  const densities = { densities: stainDensities(rgb), x: window.x, y: window.y };
  const count = owned.length;
  const measurements = new Float64Array(count * MEASUREMENT_COUNT);
  for (let k = 0; k < count; k++) {
    const own = runs.subarray(runStart[k]! * 3, runStart[k + 1]! * 3);
    measureCell(own, nucleusArea[owned[k]!]!, densities, measurements, k * MEASUREMENT_COUNT);
  }
  const cutObjects = owned.filter((label) => touchesInnerEdge(stats, label, window, slide)).length;
  return { tile, count, measurements, runStart, runs, nuclei: nucleusRuns, cutObjects };
}

function checkLabels(image: LabelImage, rgb: RgbImage, what: string): void {
  if (
    image.width !== rgb.width ||
    image.height !== rgb.height ||
    image.labels.length !== rgb.width * rgb.height
  ) {
    throw new RangeError(`the segmenter's ${what} are not ${rgb.width} x ${rgb.height}`);
  }
}

/** Per label (index = label): pixel count, run count, coordinate sums and bounding box in the window. */
interface LabelStatistics {
  area: Float64Array;
  runs: Uint32Array;
  sumX: Float64Array;
  sumY: Float64Array;
  minX: Int32Array;
  minY: Int32Array;
  maxX: Int32Array;
  maxY: Int32Array;
}

function labelStatistics(cells: LabelImage): LabelStatistics {
  const n = cells.count + 1;
  const s: LabelStatistics = {
    area: new Float64Array(n),
    runs: new Uint32Array(n),
    sumX: new Float64Array(n),
    sumY: new Float64Array(n),
    minX: new Int32Array(n).fill(0x7fffffff),
    minY: new Int32Array(n).fill(0x7fffffff),
    maxX: new Int32Array(n).fill(-1),
    maxY: new Int32Array(n).fill(-1),
  };
  const { labels, width, height } = cells;
  for (let y = 0; y < height; y++) {
    const row = y * width;
    let x = 0;
    while (x < width) {
      const label = labels[row + x]!;
      const start = x;
      while (x < width && labels[row + x] === label) x++;
      if (label === 0) continue;
      if (label >= n) throw new RangeError(`label ${label} above the count ${cells.count}`);
      const length = x - start;
      s.area[label]! += length;
      s.runs[label]!++;
      s.sumX[label]! += (length * (start + x - 1)) / 2;
      s.sumY[label]! += length * y;
      if (start < s.minX[label]!) s.minX[label] = start;
      if (x - 1 > s.maxX[label]!) s.maxX[label] = x - 1;
      if (y < s.minY[label]!) s.minY[label] = y;
      s.maxY[label] = y;
    }
  }
  return s;
}

/** Labels whose centroid (level-0 pixel index, rounded down) lies in the core, ascending. */
function ownedLabels(
  s: LabelStatistics,
  window: { x: number; y: number },
  core: { x: number; y: number; width: number; height: number },
): number[] {
  const owned: number[] = [];
  for (let label = 1; label < s.area.length; label++) {
    const area = s.area[label]!;
    if (area === 0) continue;
    // Half-open cores and floored centroids: a centroid on a shared border belongs to one tile.
    const cx = Math.floor(window.x + s.sumX[label]! / area);
    const cy = Math.floor(window.y + s.sumY[label]! / area);
    if (cx >= core.x && cx < core.x + core.width && cy >= core.y && cy < core.y + core.height)
      owned.push(label);
  }
  return owned;
}

function labelAreas(image: LabelImage, count: number): Float64Array {
  const areas = new Float64Array(count + 1);
  const { labels } = image;
  for (let i = 0; i < labels.length; i++) {
    const label = labels[i]!;
    if (label !== 0 && label <= count) areas[label]!++;
  }
  return areas;
}

/** The runs of the owned labels, grouped by object in `owned` order, in level-0 pixels. */
function collectRuns(
  cells: LabelImage,
  owned: readonly number[],
  s: LabelStatistics,
  window: { x: number; y: number },
): { runStart: Uint32Array; runs: Uint32Array } {
  const slot = new Int32Array(cells.count + 1).fill(-1);
  const runStart = new Uint32Array(owned.length + 1);
  owned.forEach((label, k) => {
    slot[label] = k;
    runStart[k + 1] = runStart[k]! + s.runs[label]!;
  });
  const runs = new Uint32Array(runStart[owned.length]! * 3);
  const next = runStart.slice(0, owned.length);
  const { labels, width, height } = cells;
  for (let y = 0; y < height; y++) {
    const row = y * width;
    let x = 0;
    while (x < width) {
      const label = labels[row + x]!;
      const start = x;
      while (x < width && labels[row + x] === label) x++;
      const k = label === 0 ? -1 : slot[label]!;
      if (k < 0) continue;
      const at = next[k]!++ * 3;
      runs[at] = window.y + y;
      runs[at + 1] = window.x + start;
      runs[at + 2] = window.x + x;
    }
  }
  return { runStart, runs };
}

function touchesInnerEdge(
  s: LabelStatistics,
  label: number,
  window: { x: number; y: number; width: number; height: number },
  slide: { widthPx: number; heightPx: number },
): boolean {
  return (
    (s.minX[label] === 0 && window.x > 0) ||
    (s.minY[label] === 0 && window.y > 0) ||
    (s.maxX[label] === window.width - 1 && window.x + window.width < slide.widthPx) ||
    (s.maxY[label] === window.height - 1 && window.y + window.height < slide.heightPx)
  );
}

/** First label of every tile in the layer: labels run 1..total without gaps, in tile order. */
export function labelOffsets(counts: readonly number[]): { offsets: number[]; total: number } {
  const offsets: number[] = [];
  let total = 0;
  for (const count of counts) {
    if (!Number.isSafeInteger(count) || count < 0) throw new RangeError(`object count ${count}`);
    offsets.push(total);
    total += count;
  }
  if (total > 0xffff_ffff) throw new ComputeError('TooLarge', `${total} cells do not fit uint32 labels`);
  return { offsets, total };
}

/** The centroid of object `k`, level-0 pixel indices. */
export function objectCentroid(objects: TileObjects, k: number): { x: number; y: number } {
  const base = k * MEASUREMENT_COUNT;
  return { x: objects.measurements[base + M.centroid_x]!, y: objects.measurements[base + M.centroid_y]! };
}

const MAGIC = 0x4f535053; // "SPSO" little-endian
/** 2 adds the nuclei's runs after the cells'; 1 is still read (objects without nuclei). */
const FORMAT_VERSION = 2;
const HEADER_WORDS = 12;

/**
 * A small versioned binary form: magic, version, then a zstd frame of a 48-byte header (tile,
 * counts, measurement count) and the arrays, little-endian: measurements (float64), run
 * starts and runs (uint32). Millions of runs would be slow and large as JSON.
 */
export function encodeTileObjects(objects: TileObjects): Uint8Array {
  const { tile, count, measurements, runStart, runs, nuclei } = objects;
  const arrays = [measurements, runStart, runs, ...(nuclei ? [nuclei.runStart, nuclei.runs] : [])];
  const bodyBytes = HEADER_WORDS * 4 + arrays.reduce((sum, array) => sum + array.byteLength, 0);
  const body = new Uint8Array(bodyBytes);
  const header = new Uint32Array(body.buffer, 0, HEADER_WORDS);
  header.set([
    tile.index,
    tile.x,
    tile.y,
    tile.width,
    tile.height,
    count,
    runs.length / 3,
    MEASUREMENT_COUNT,
    objects.cutObjects,
    nuclei ? nuclei.runs.length / 3 : 0,
  ]);
  let at = HEADER_WORDS * 4;
  for (const array of arrays) {
    body.set(new Uint8Array(array.buffer, array.byteOffset, array.byteLength), at);
    at += array.byteLength;
  }
  const packed = zstdCompressSync(body);
  const out = new Uint8Array(8 + packed.byteLength);
  const view = new DataView(out.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, nuclei ? FORMAT_VERSION : 1, true);
  out.set(packed, 8);
  return out;
}

export function decodeTileObjects(bytes: Uint8Array): TileObjects {
  const corrupt = (what: string, cause?: unknown) =>
    new ComputeError(
      'CorruptTileObjects',
      `tile objects: ${what}`,
      cause === undefined ? undefined : { cause },
    );
  if (bytes.byteLength < 8) throw corrupt('too short');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== MAGIC) throw corrupt('not a tile objects file');
  const version = view.getUint32(4, true);
  if (version !== 1 && version !== FORMAT_VERSION) throw corrupt(`version ${version}`);
  let body: Uint8Array;
  try {
    // A fresh, aligned buffer: the typed arrays below are views of it.
    body = new Uint8Array(zstdDecompressSync(bytes.subarray(8)));
  } catch (err) {
    throw corrupt('does not decompress', err);
  }
  if (body.byteLength < HEADER_WORDS * 4) throw corrupt('header cut short');
  const h = new Uint32Array(body.buffer, body.byteOffset, HEADER_WORDS);
  const [index, x, y, width, height, count, runCount, measurementCount, cutObjects, nucleusRunCount] =
    Array.from(h.subarray(0, 10));
  const nucleusBytes = version === 1 ? 0 : (count! + 1) * 4 + nucleusRunCount! * 12;
  if (measurementCount !== MEASUREMENT_COUNT) throw corrupt(`${measurementCount} measurements per object`);
  const expected =
    HEADER_WORDS * 4 + count! * MEASUREMENT_COUNT * 8 + (count! + 1) * 4 + runCount! * 12 + nucleusBytes;
  if (body.byteLength !== expected) throw corrupt(`${body.byteLength} bytes, expected ${expected}`);
  let at = body.byteOffset + HEADER_WORDS * 4;
  const measurements = new Float64Array(body.buffer, at, count! * MEASUREMENT_COUNT);
  at += measurements.byteLength;
  const runStart = new Uint32Array(body.buffer, at, count! + 1);
  at += runStart.byteLength;
  const runs = new Uint32Array(body.buffer, at, runCount! * 3);
  at += runs.byteLength;
  if (runStart[count!] !== runCount) throw corrupt('run starts do not end at the run count');
  let nuclei: TileObjects['nuclei'];
  if (version !== 1) {
    const nucleusRunStart = new Uint32Array(body.buffer, at, count! + 1);
    at += nucleusRunStart.byteLength;
    nuclei = { runStart: nucleusRunStart, runs: new Uint32Array(body.buffer, at, nucleusRunCount! * 3) };
    if (nucleusRunStart[count!] !== nucleusRunCount)
      throw corrupt('nucleus run starts do not end at their count');
  }
  return {
    tile: { index: index!, x: x!, y: y!, width: width!, height: height! },
    count: count!,
    measurements,
    runStart,
    runs,
    ...(nuclei && { nuclei }),
    cutObjects: cutObjects!,
  };
}

/**
 * The earlier tiles whose objects can overlap `tile`'s: those before it in the plan whose
 * window (core grown by the halo) meets its window. With a halo under the core size these are
 * its left, upper-left, upper and upper-right neighbours.
 */
export function earlierNeighbours(
  tiles: readonly SegmentationTile[],
  tile: SegmentationTile,
  haloPx: number,
): SegmentationTile[] {
  const reach = 2 * haloPx;
  return tiles.filter(
    (t) =>
      t.index < tile.index &&
      t.x < tile.x + tile.width + reach &&
      tile.x < t.x + t.width + reach &&
      t.y < tile.y + tile.height + reach &&
      tile.y < t.y + t.height + reach,
  );
}

/**
 * The final objects of tiles already segmented, kept while a later tile of the plan can still
 * overlap them (`earlierNeighbours`), for `dropDuplicateObjects` when tiles are segmented in plan
 * order. The plan is row-major (`planSegmentationTiles`), so a tile is let go once neither the
 * rest of the current row nor the rows below reach it: what is kept is about one row of tiles
 * (the slide's width over the core size, at most 196 tiles of 1024 px at compute/slide's 200,000
 * px side limit), however tall the slide. A neighbour not kept (a retry that starts mid-plan) is
 * loaded.
 */
export class EarlierTileObjects {
  private readonly kept = new Map<number, TileObjects>();

  constructor(
    private readonly tiles: readonly SegmentationTile[],
    private readonly haloPx: number,
    private readonly load: (index: number, signal?: AbortSignal) => Promise<TileObjects>,
  ) {}

  /** Tiles whose objects are held now. */
  get size(): number {
    return this.kept.size;
  }

  /** The objects of `tile`'s earlier neighbours. Call with the plan's tiles in order. */
  async of(tile: SegmentationTile, signal?: AbortSignal): Promise<TileObjects[]> {
    this.forgetUnreachable(tile);
    return Promise.all(
      earlierNeighbours(this.tiles, tile, this.haloPx).map(async (neighbour) => {
        const kept = this.kept.get(neighbour.index);
        if (kept !== undefined) return kept;
        const loaded = await this.load(neighbour.index, signal);
        this.kept.set(neighbour.index, loaded);
        return loaded;
      }),
    );
  }

  /** Keeps a tile's objects, as stored (after `dropDuplicateObjects`), for the tiles after it. */
  add(objects: TileObjects): void {
    this.kept.set(objects.tile.index, objects);
  }

  /** Lets go of the tiles that neither `tile`, the rest of its row, nor a later row can reach. */
  private forgetUnreachable(tile: SegmentationTile): void {
    const reach = 2 * this.haloPx;
    for (const [index, { tile: t }] of this.kept) {
      const bottom = t.y + t.height + reach;
      const laterRows = bottom > tile.y + tile.height;
      const restOfRow =
        bottom > tile.y && t.y < tile.y + tile.height + reach && t.x + t.width + reach > tile.x;
      if (!laterRows && !restOfRow) this.kept.delete(index);
    }
  }
}

/** Share of the smaller of two objects that their overlap must reach for one to be a duplicate. */
export const DUPLICATE_OVERLAP = 0.5;

/**
 * Drops the objects of a tile that an earlier tile already holds. Each window segments a
 * border object on its own, and two windows rarely agree to the pixel: both copies can have
 * their centroid in their own core, or the one tile splits what the other merges. An object is
 * dropped when it covers at least `DUPLICATE_OVERLAP` of the smaller of itself and an object of
 * `earlier` (their final, already reconciled objects). Deterministic in tile order, so running
 * tiles in index order (or this as a pass after segmenting them) gives the same layer on every
 * retry. Where a small overlap remains, the mask gives the pixels to the earlier tile.
 */
export function dropDuplicateObjects(objects: TileObjects, earlier: readonly TileObjects[]): TileObjects {
  if (objects.count === 0 || earlier.length === 0) return objects;
  const window = objectsBounds(objects);
  const owner = new Int32Array(window.width * window.height).fill(-1);
  const areas: number[] = [];
  for (const other of earlier) {
    for (let k = 0; k < other.count; k++) {
      const id = areas.length;
      areas.push(other.measurements[k * MEASUREMENT_COUNT + M.area]!);
      forEachRunIn(other, k, window, (row, x0, x1) => owner.fill(id, row + x0, row + x1));
    }
  }
  const keep: number[] = [];
  const overlap = new Map<number, number>();
  for (let k = 0; k < objects.count; k++) {
    overlap.clear();
    forEachRunIn(objects, k, window, (row, x0, x1) => {
      for (let i = row + x0; i < row + x1; i++) {
        const id = owner[i]!;
        if (id >= 0) overlap.set(id, (overlap.get(id) ?? 0) + 1);
      }
    });
    const area = objects.measurements[k * MEASUREMENT_COUNT + M.area]!;
    const duplicate = [...overlap].some(([id, n]) => n >= DUPLICATE_OVERLAP * Math.min(area, areas[id]!));
    if (!duplicate) keep.push(k);
  }
  return keep.length === objects.count ? objects : selectObjects(objects, keep);
}

/** The bounding box of every object of a tile. */
export function objectsBounds(objects: TileObjects): { x: number; y: number; width: number; height: number } {
  const m = objects.measurements;
  let x0 = Number.POSITIVE_INFINITY;
  let y0 = Number.POSITIVE_INFINITY;
  let x1 = 0;
  let y1 = 0;
  for (let k = 0; k < objects.count; k++) {
    const b = k * MEASUREMENT_COUNT;
    x0 = Math.min(x0, m[b + M.bbox_min_x]!);
    y0 = Math.min(y0, m[b + M.bbox_min_y]!);
    x1 = Math.max(x1, m[b + M.bbox_max_x]!);
    y1 = Math.max(y1, m[b + M.bbox_max_y]!);
  }
  return { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
}

/** Calls `visit(rowStart, x0, x1)` for each run of object `k` clipped to `rect` (raster of `rect`). */
function forEachRunIn(
  objects: TileObjects,
  k: number,
  rect: { x: number; y: number; width: number; height: number },
  visit: (row: number, x0: number, x1: number) => void,
): void {
  const { runs, runStart } = objects;
  for (let r = runStart[k]! * 3, end = runStart[k + 1]! * 3; r < end; r += 3) {
    const y = runs[r]! - rect.y;
    if (y < 0 || y >= rect.height) continue;
    const x0 = Math.max(runs[r + 1]!, rect.x) - rect.x;
    const x1 = Math.min(runs[r + 2]!, rect.x + rect.width) - rect.x;
    if (x1 > x0) visit(y * rect.width, x0, x1);
  }
}

function selectObjects(objects: TileObjects, keep: readonly number[]): TileObjects {
  const measurements = new Float64Array(keep.length * MEASUREMENT_COUNT);
  keep.forEach((k, j) => {
    measurements.set(
      objects.measurements.subarray(k * MEASUREMENT_COUNT, (k + 1) * MEASUREMENT_COUNT),
      j * MEASUREMENT_COUNT,
    );
  });
  const { runStart, runs } = selectRuns(objects, keep);
  const nuclei = objects.nuclei && selectRuns(objects.nuclei, keep);
  return { ...objects, count: keep.length, measurements, runStart, runs, ...(nuclei && { nuclei }) };
}

/** The runs of objects `keep`, in that order, regrouped. */
function selectRuns(
  from: { runStart: Uint32Array; runs: Uint32Array },
  keep: readonly number[],
): { runStart: Uint32Array; runs: Uint32Array } {
  const runStart = new Uint32Array(keep.length + 1);
  keep.forEach((k, j) => {
    runStart[j + 1] = runStart[j]! + from.runStart[k + 1]! - from.runStart[k]!;
  });
  const runs = new Uint32Array(runStart[keep.length]! * 3);
  keep.forEach((k, j) => {
    runs.set(from.runs.subarray(from.runStart[k]! * 3, from.runStart[k + 1]! * 3), runStart[j]! * 3);
  });
  return { runStart, runs };
}
