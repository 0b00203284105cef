import type { ImageLevel } from '../image';

/**
 * The tile plan of a prediction: where each credit-grid position lies on the prediction store's
 * pixel grid, which shards it touches, and the order shards are made in. Pure arithmetic, shared
 * by the predictor, the resume check and the tests.
 *
 * The store's grid is H&E pyramid level k, the level whose microns per pixel are nearest the
 * model's: an exact 2^k downsample of level 0, so the store is aligned with the H&E by
 * construction and its level-0 read needs no resampling of the slide at all. A position (a
 * square of `patchSizeLevel0Px` level-0 pixels, not a whole number) covers the level-k pixels
 * between its rounded edges, so neighbouring positions tile the grid with no gap or overlap.
 */

/** The part of the patch grid a prediction needs (what `tissuePatchGrid` answers). */
export interface PatchGrid {
  cols: number;
  rows: number;
  /** `cols x rows`, row-major: 1 where the position is predicted (and paid for). */
  selected: Uint8Array;
  /** Side of one position in level-0 pixels. */
  patchSizeLevel0Px: number;
}

/** A rectangle of level-k pixels, `[x0, x1) x [y0, y1)`. */
export interface PixelRect {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

export interface ShardAddress {
  y: number;
  x: number;
}

export interface TilePlanInput {
  grid: PatchGrid;
  /** The H&E pyramid's levels, largest first; level k must be level 0 halved k times. */
  heLevels: readonly ImageLevel[];
  /** Microns per level-0 pixel of the H&E. */
  heMpp: number;
  /** Microns per pixel of the model's input. */
  modelMpp: number;
  shardSize: number;
  /** Shard rows per band: shards are made column by column within a band (see `TilePlan`). */
  bandShards: number;
}

/**
 * The H&E level whose pixel size is nearest `modelMpp` by ratio (0.25 and 1.0 are equally far
 * from 0.5); a tie goes to the finer level, which loses no detail.
 */
export function nearestLevel(heMpp: number, levelCount: number, modelMpp: number): number {
  let best = 0;
  for (let k = 1; k < levelCount; k++) {
    if (
      Math.abs(Math.log2((heMpp * 2 ** k) / modelMpp)) < Math.abs(Math.log2((heMpp * 2 ** best) / modelMpp))
    )
      best = k;
  }
  return best;
}

/**
 * Shards are made band by band (`bandShards` shard rows each), column by column inside a band,
 * top to bottom inside a column. A position that crosses into a shard made later in the same
 * band is inferred once and its output kept until then; only positions crossing a band's lower
 * edge are inferred twice (once per band), a share of about `patch / (shard * band)` of them.
 * Held outputs are those along one band's frontier: memory does not grow with the slide.
 */
export class TilePlan {
  readonly level: number;
  readonly widthPx: number;
  readonly heightPx: number;
  /** Microns per pixel of the store's grid (H&E level `level`). */
  readonly pixelSizeUm: number;
  readonly shardsY: number;
  readonly shardsX: number;
  /** Shards in the order they are made. */
  readonly order: readonly ShardAddress[];
  readonly grid: PatchGrid;
  private readonly edgesX: Int32Array;
  private readonly edgesY: Int32Array;
  private readonly shardSize: number;
  /** Shard rows per band. */
  readonly bandShards: number;

  constructor(input: TilePlanInput) {
    const { grid, heLevels, heMpp, modelMpp, shardSize, bandShards } = input;
    if (!(heMpp > 0) || !(modelMpp > 0)) throw new RangeError(`mpp ${heMpp} and model mpp ${modelMpp}`);
    if (
      !Number.isSafeInteger(shardSize) ||
      shardSize < 1 ||
      !Number.isSafeInteger(bandShards) ||
      bandShards < 1
    )
      throw new RangeError(`shard ${shardSize} and band ${bandShards} must be positive integers`);
    if (grid.selected.length !== grid.cols * grid.rows || !(grid.patchSizeLevel0Px > 0))
      throw new RangeError(`grid of ${grid.cols} x ${grid.rows} with ${grid.selected.length} entries`);
    const base = heLevels[0];
    if (!base) throw new RangeError('the H&E has no levels');
    this.level = nearestLevel(heMpp, heLevels.length, modelMpp);
    const level = heLevels[this.level]!;
    const factor = 2 ** this.level;
    // The store is only aligned with level 0 if the level is an exact halving (compute/pyramid).
    if (
      level.widthPx !== Math.floor(base.widthPx / factor) ||
      level.heightPx !== Math.floor(base.heightPx / factor)
    ) {
      throw new RangeError(`H&E level ${this.level} is not level 0 halved ${this.level} times`);
    }
    this.widthPx = level.widthPx;
    this.heightPx = level.heightPx;
    this.pixelSizeUm = heMpp * factor;
    this.grid = grid;
    const step = grid.patchSizeLevel0Px / factor;
    this.edgesX = edges(grid.cols, step, this.widthPx);
    this.edgesY = edges(grid.rows, step, this.heightPx);
    this.shardSize = shardSize;
    this.bandShards = bandShards;
    this.shardsY = Math.ceil(this.heightPx / shardSize);
    this.shardsX = Math.ceil(this.widthPx / shardSize);
    const order: ShardAddress[] = [];
    for (let band = 0; band < this.shardsY; band += bandShards) {
      for (let x = 0; x < this.shardsX; x++) {
        for (let y = band; y < Math.min(band + bandShards, this.shardsY); y++) order.push({ y, x });
      }
    }
    this.order = order;
  }

  /** Bands of `bandShards` shard rows (the last may be shorter): each is made on its own. */
  get bands(): number {
    return Math.ceil(this.shardsY / this.bandShards);
  }

  /** The band that shard row `y` belongs to. */
  bandOf(y: number): number {
    return Math.floor(y / this.bandShards);
  }

  /** Where band `band`'s shards lie in `order`: `[first, end)`. */
  bandRange(band: number): { first: number; end: number } {
    if (!Number.isSafeInteger(band) || band < 0 || band >= this.bands)
      throw new RangeError(`no band ${band}`);
    const y = band * this.bandShards;
    return { first: y * this.shardsX, end: Math.min(y + this.bandShards, this.shardsY) * this.shardsX };
  }

  get positionCount(): number {
    return this.grid.cols * this.grid.rows;
  }

  /** The level-k pixels of position `index` (`row * cols + col`); empty past the level's edge. */
  square(index: number): PixelRect {
    const col = index % this.grid.cols;
    const row = (index - col) / this.grid.cols;
    return {
      x0: this.edgesX[col]!,
      x1: this.edgesX[col + 1]!,
      y0: this.edgesY[row]!,
      y1: this.edgesY[row + 1]!,
    };
  }

  shardRect({ y, x }: ShardAddress): PixelRect {
    const s = this.shardSize;
    return {
      x0: x * s,
      y0: y * s,
      x1: Math.min((x + 1) * s, this.widthPx),
      y1: Math.min((y + 1) * s, this.heightPx),
    };
  }

  /** Selected positions whose square meets the shard, row-major. */
  positionsOf(shard: ShardAddress): number[] {
    return this.positionsMeeting(shard, true);
  }

  /** Positions selected (or not) whose square meets the shard, row-major. */
  private positionsMeeting(shard: ShardAddress, selected: boolean): number[] {
    const r = this.shardRect(shard);
    const [c0, c1] = span(this.edgesX, r.x0, r.x1);
    const [w0, w1] = span(this.edgesY, r.y0, r.y1);
    const out: number[] = [];
    const { cols } = this.grid;
    for (let row = w0; row < w1; row++) {
      for (let col = c0; col < c1; col++) {
        if ((this.grid.selected[row * cols + col] === 1) === selected) out.push(row * cols + col);
      }
    }
    return out;
  }

  /**
   * The parts of a shard that no selected position covers: the squares of unselected positions
   * and whatever lies past the grid's last edges. Selected squares are written whole, so these
   * and the squares of failed positions are all a reused shard buffer needs set to the fill.
   */
  uncoveredRects(shard: ShardAddress): PixelRect[] {
    const r = this.shardRect(shard);
    const out = this.positionsMeeting(shard, false).flatMap((p) => intersect(this.square(p), r) ?? []);
    const gridX = this.edgesX[this.edgesX.length - 1]!;
    const gridY = this.edgesY[this.edgesY.length - 1]!;
    if (gridX < r.x1) out.push({ ...r, x0: Math.max(r.x0, gridX) });
    if (gridY < r.y1) out.push({ ...r, y0: Math.max(r.y0, gridY) });
    return out;
  }

  /** Whether position `index`'s square meets a shard made after `shard` in the same band. */
  neededLater(index: number, shard: ShardAddress): boolean {
    const sq = this.square(index);
    const lastX = Math.floor((sq.x1 - 1) / this.shardSize);
    const lastY = Math.floor((sq.y1 - 1) / this.shardSize);
    const bandEnd = (Math.floor(shard.y / this.bandShards) + 1) * this.bandShards - 1;
    return lastX > shard.x || Math.min(lastY, bandEnd) > shard.y;
  }

  /** Where `shard` comes in `order`. */
  orderIndex({ y, x }: ShardAddress): number {
    const band = Math.floor(y / this.bandShards) * this.bandShards;
    const rows = Math.min(this.bandShards, this.shardsY - band);
    return band * this.shardsX + x * rows + (y - band);
  }

  /**
   * Whether position `index` is inferred in `shard` by a run that started at shard `start` of
   * the order: unless its first shard in this band was made by the same run, which then carried
   * its output along. Static, so the H&E under a shard can be read before the shard before it
   * is finished.
   */
  inferredIn(index: number, shard: ShardAddress, start: number): boolean {
    const sq = this.square(index);
    const band = Math.floor(shard.y / this.bandShards) * this.bandShards;
    const first = {
      y: Math.max(Math.floor(sq.y0 / this.shardSize), band),
      x: Math.floor(sq.x0 / this.shardSize),
    };
    if (first.y === shard.y && first.x === shard.x) return true;
    return this.orderIndex(first) < start;
  }

  /** Whether `shard` is where position `index` is first met: the one holding its top-left pixel. */
  isHome(index: number, shard: ShardAddress): boolean {
    const sq = this.square(index);
    return Math.floor(sq.y0 / this.shardSize) === shard.y && Math.floor(sq.x0 / this.shardSize) === shard.x;
  }
}

/** The overlap of two rectangles, or undefined if they do not meet. */
export function intersect(a: PixelRect, b: PixelRect): PixelRect | undefined {
  const r = {
    x0: Math.max(a.x0, b.x0),
    y0: Math.max(a.y0, b.y0),
    x1: Math.min(a.x1, b.x1),
    y1: Math.min(a.y1, b.y1),
  };
  return r.x0 < r.x1 && r.y0 < r.y1 ? r : undefined;
}

/** Position edges along one axis: `round(i * step)`, clipped to the level. */
function edges(count: number, step: number, size: number): Int32Array {
  const out = new Int32Array(count + 1);
  for (let i = 0; i <= count; i++) out[i] = Math.min(size, Math.round(i * step));
  return out;
}

/** The positions `[first, end)` along an axis whose `[edge[i], edge[i + 1])` meets `[a, b)`. */
function span(edge: Int32Array, a: number, b: number): [number, number] {
  const count = edge.length - 1;
  // First position ending after a; edges never decrease.
  let lo = 0;
  let hi = count;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (edge[mid + 1]! > a) hi = mid;
    else lo = mid + 1;
  }
  let end = lo;
  while (end < count && edge[end]! < b) end++;
  // Empty squares (past the level) meet nothing.
  let first = lo;
  while (first < end && edge[first + 1]! <= edge[first]!) first++;
  return [first, end];
}
