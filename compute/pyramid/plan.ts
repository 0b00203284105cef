/**
 * The shape of a pyramid and the order its shards are made in. Pure arithmetic, shared by the
 * builder, the resume check and the tests.
 */

export interface PyramidLevel {
  /** The array's folder in the store: `"0"` is level 0. */
  path: string;
  widthPx: number;
  heightPx: number;
  /** Level-0 pixels per pixel of this level along each axis: `2 ** level`. */
  downsample: number;
}

/** Levels stop once the smaller side is under this many pixels. */
export const SMALLEST_SIDE_PX = 512;

/** Level 0, then halvings (rounded down) until the smaller side is under `SMALLEST_SIDE_PX`. */
export function pyramidLevels(widthPx: number, heightPx: number): PyramidLevel[] {
  const levels: PyramidLevel[] = [];
  let width = widthPx;
  let height = heightPx;
  for (let k = 0; ; k++) {
    levels.push({ path: String(k), widthPx: width, heightPx: height, downsample: 2 ** k });
    if (Math.min(width, height) < SMALLEST_SIDE_PX) return levels;
    width = Math.floor(width / 2);
    height = Math.floor(height / 2);
  }
}

export interface ShardAddress {
  level: number;
  y: number;
  x: number;
}

/**
 * The quadtree over the shards of every level. Shard `(y, x)` of level `k` is made from shards
 * `(2y + a, 2x + b)` of level `k - 1`. The tree is addressed through a covering grid (level-0
 * shards halved, rounded up) that can hold nodes outside a level's own shard grid, or above the
 * last level: those are virtual, passed through but never written. A node's post-order rank
 * among written shards (children in Z-order, then the node) is the traversal order that
 * progress counts.
 */
export class ShardTree {
  readonly levels: readonly PyramidLevel[];
  /** Level of the single root node: at least the last level. */
  readonly rootLevel: number;
  /** Written shards in all. */
  readonly total: number;
  private readonly shardsY: number[];
  private readonly shardsX: number[];

  constructor(
    levels: readonly PyramidLevel[],
    readonly shardSize: number,
  ) {
    this.levels = levels;
    this.shardsY = levels.map((l) => Math.ceil(l.heightPx / shardSize));
    this.shardsX = levels.map((l) => Math.ceil(l.widthPx / shardSize));
    let root = 0;
    while (this.coverY(root) > 1 || this.coverX(root) > 1) root++;
    this.rootLevel = Math.max(root, levels.length - 1);
    this.total = this.shardsY.reduce((n, rows, k) => n + rows * this.shardsX[k]!, 0);
  }

  isWritten({ level, y, x }: ShardAddress): boolean {
    return level < this.levels.length && y < this.shardsY[level]! && x < this.shardsX[level]!;
  }

  /** Children in Z-order, within the covering grid. */
  children({ level, y, x }: ShardAddress): ShardAddress[] {
    if (level === 0) return [];
    const below = level - 1;
    const out: ShardAddress[] = [];
    for (const [a, b] of [
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ] as const) {
      const child = { level: below, y: 2 * y + a, x: 2 * x + b };
      if (child.y < this.coverY(below) && child.x < this.coverX(below)) out.push(child);
    }
    return out;
  }

  /** Written shards in the subtree under (and including) `node`, on levels from `floor` up. */
  subtreeSize({ level, y, x }: ShardAddress, floor = 0): number {
    let n = 0;
    for (let m = Math.min(level, this.levels.length - 1); m >= floor; m--) {
      const span = 2 ** (level - m);
      const rows = Math.max(0, Math.min((y + 1) * span, this.shardsY[m]!) - y * span);
      const cols = Math.max(0, Math.min((x + 1) * span, this.shardsX[m]!) - x * span);
      n += rows * cols;
    }
    return n;
  }

  /**
   * Level-0 shards in traversal order of the subtrees under `roots` (the whole tree unless
   * given), from rank `from` on: what is left to read from the slide.
   */
  levelZeroShards(
    from: number,
    roots: readonly ShardAddress[] = [{ level: this.rootLevel, y: 0, x: 0 }],
  ): ShardAddress[] {
    const out: ShardAddress[] = [];
    const walk = (node: ShardAddress, rank: number): number => {
      if (rank + this.subtreeSize(node) <= from) return rank + this.subtreeSize(node);
      let next = rank;
      for (const child of this.children(node)) next = walk(child, next);
      if (!this.isWritten(node)) return next;
      if (node.level === 0 && next >= from) out.push(node);
      return next + 1;
    };
    let rank = 0;
    for (const root of roots) rank = walk(root, rank);
    return out;
  }

  /** Rows of the covering grid at `level`. */
  coverY(level: number): number {
    return Math.ceil(this.shardsY[0]! / 2 ** level);
  }

  /** Columns of the covering grid at `level`. */
  coverX(level: number): number {
    return Math.ceil(this.shardsX[0]! / 2 ** level);
  }
}

/** Columns `first` up to `end` (not included) of a level's covering grid. */
export interface ColumnRange {
  first: number;
  end: number;
}

/**
 * One activity's share of a pyramid: the subtrees under row `row` of `topLevel` in the covering
 * grid, in the columns of `columns` (every column when absent). Level `leafLevel` is their
 * source: the slide when 0 (and level 0 is written), else shards an earlier region stored (read
 * back, not written again).
 */
export interface PyramidRegion {
  leafLevel: number;
  topLevel: number;
  row: number;
  columns?: ColumnRange;
}

/**
 * Regions `row` 0 to `rows - 1` of one step up the pyramid, each row cut into the column ranges
 * of `columns` when there are too few rows to spread over workers (whole rows when absent).
 */
export interface PyramidStage {
  leafLevel: number;
  topLevel: number;
  rows: number;
  columns?: ColumnRange[];
}

/**
 * The pyramid in stages of regions: stage 0 reads bands of `2 ** bandLevels` level-0 shard
 * rows from the slide and builds `bandLevels` levels above them; each next stage reads the
 * rows the one before wrote and builds `bandLevels` more, until the last level. Region `r` of
 * a stage reads regions `r * 2 ** bandLevels` up to the next multiple of the stage before,
 * so it can start once those are done. A stage of fewer rows than `regionsPerStage` cuts its
 * rows into column ranges, as many as make up the count (at most one column each), so that
 * many workers have a share of a short or wide slide. A stage that would be a single region
 * builds every level left, up to the root: one region could not be spread over workers anyway,
 * and a chain of them would pay an activity and a read-back of its leaf level each. A
 * `bandLevels` at least the root's level is one region.
 */
export function pyramidStages(
  widthPx: number,
  heightPx: number,
  shardSize: number,
  bandLevels: number,
  regionsPerStage = 1,
): PyramidStage[] {
  if (!Number.isSafeInteger(bandLevels) || bandLevels < 1) {
    throw new RangeError(`a band spans at least one level, not ${bandLevels}`);
  }
  if (!Number.isSafeInteger(regionsPerStage) || regionsPerStage < 1) {
    throw new RangeError(`at least one region a stage, not ${regionsPerStage}`);
  }
  const tree = new ShardTree(pyramidLevels(widthPx, heightPx), shardSize);
  const last = tree.levels.length - 1;
  const stages: PyramidStage[] = [];
  let leafLevel = 0;
  do {
    const band = Math.min(leafLevel + bandLevels, tree.rootLevel);
    const rows = tree.coverY(band);
    const groups = Math.min(tree.coverX(band), Math.ceil(regionsPerStage / rows));
    if (rows * groups === 1) {
      stages.push({ leafLevel, topLevel: tree.rootLevel, rows: 1 });
      return stages;
    }
    stages.push({
      leafLevel,
      topLevel: band,
      rows,
      ...(groups > 1 && { columns: columnRanges(tree.coverX(band), groups) }),
    });
    leafLevel = band;
  } while (leafLevel < last);
  return stages;
}

/** `count` contiguous ranges of `columns` columns, their sizes differing by one at most. */
function columnRanges(columns: number, count: number): ColumnRange[] {
  return Array.from({ length: count }, (_, k) => ({
    first: Math.floor((k * columns) / count),
    end: Math.floor(((k + 1) * columns) / count),
  }));
}
