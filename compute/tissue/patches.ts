import { ComputeError } from '../errors';

/**
 * The model's patch grid over a slide and the tissue mask's share of each position: the count
 * is what a prediction costs (DECISIONS.md, Credits), the positions are what the prediction job
 * tiles, so both come out of one pass.
 */
export type PatchGridInput = MaskGeometry & MaskScale;

/** Level-0 pixels per mask pixel: one factor for both axes, or one per axis (a level's sides rarely divide evenly). */
export type MaskScale = { maskDownsample: number } | { maskDownsampleX: number; maskDownsampleY: number };

interface MaskGeometry {
  /** 1 for tissue, row-major, `width x height`. */
  mask: Uint8Array;
  width: number;
  height: number;
  /** Level-0 size: the grid stops here, and mask pixels past it are outside the slide. */
  levelWidthPx: number;
  levelHeightPx: number;
  /** Level-0 microns per pixel. */
  mpp: number;
  /** Default 224. */
  patchSizePx?: number;
  /** Microns per pixel of the model's input. Default 0.5. */
  patchMpp?: number;
  /** Tissue share of a patch's whole area at which it counts. Default 0.1. */
  minCoverage?: number;
}

export interface TissuePatches {
  /** Positions that count: the number of 1s in `selected`. */
  count: number;
  cols: number;
  rows: number;
  /** Side of one patch in level-0 pixels (`patchSizePx * patchMpp / mpp`, not rounded). */
  patchSizeLevel0Px: number;
  /** `cols x rows`, row-major: 1 where position (col, row) counts. */
  selected: Uint8Array;
}

/** Beyond this the grid is not a slide's but a wrong mpp's (a 200,000 px slide at 0.25 µm has 10^5). */
const maxPositions = 1 << 26;

/**
 * Relative slack on the coverage test: areas are sums of products of fractional lengths, and a
 * patch covered exactly `minCoverage` must count whatever the rounding.
 */
const tolerance = 1e-9;

/** The number of tissue patches: what a prediction on this slide costs per marker. */
export function countTissuePatches(input: PatchGridInput): number {
  return tissuePatchGrid(input).count;
}

/**
 * Marks (and counts) the positions of the model grid whose tissue coverage is at least
 * `minCoverage`. The grid is anchored at level-0 (0, 0); partial patches at the right and bottom
 * edges are positions too, and what lies outside the slide is no tissue, so their coverage is
 * over the whole patch. Coverage is exact: each mask pixel is a rectangle of level-0 pixels and
 * contributes its overlap area with the patch.
 */
export function tissuePatchGrid(input: PatchGridInput): TissuePatches {
  const grid = gridOf(input);
  const { cols, rows, size } = grid;
  const selected = new Uint8Array(cols * rows);
  const tissue = new Float64Array(cols);
  const threshold = (input.minCoverage ?? 0.1) * size * size * (1 - tolerance);
  const split = splitColumns(input, grid);
  let count = 0;
  for (let row = 0; row < rows; row++) {
    tissue.fill(0);
    addTissueOfBand(input, grid, split, row, tissue);
    for (let col = 0; col < cols; col++) {
      if (tissue[col]! > 0 && tissue[col]! >= threshold) {
        selected[row * cols + col] = 1;
        count++;
      }
    }
  }
  return { count, cols, rows, patchSizeLevel0Px: size, selected };
}

/** The counted positions in row-major order, as the prediction job visits them. */
export function* tissuePatchPositions(patches: TissuePatches): Generator<{ col: number; row: number }> {
  const { selected, cols } = patches;
  for (let i = 0; i < selected.length; i++) {
    if (selected[i] === 1) yield { col: i % cols, row: Math.floor(i / cols) };
  }
}

interface Grid {
  cols: number;
  rows: number;
  /** Patch side in level-0 pixels. */
  size: number;
  dx: number;
  dy: number;
}

function gridOf(input: PatchGridInput): Grid {
  const { mask, width, height, levelWidthPx, levelHeightPx, mpp } = input;
  const patchSizePx = input.patchSizePx ?? 224;
  const patchMpp = input.patchMpp ?? 0.5;
  const minCoverage = input.minCoverage ?? 0.1;
  const [dx, dy] =
    'maskDownsample' in input
      ? [input.maskDownsample, input.maskDownsample]
      : [input.maskDownsampleX, input.maskDownsampleY];
  for (const [name, value] of Object.entries({
    levelWidthPx,
    levelHeightPx,
    mpp,
    patchSizePx,
    patchMpp,
    dx,
    dy,
  })) {
    if (!Number.isFinite(value) || value <= 0)
      throw new RangeError(`${name} must be a positive number, not ${value}`);
  }
  if (!(minCoverage >= 0 && minCoverage <= 1))
    throw new RangeError(`minCoverage ${minCoverage} is outside 0..1`);
  if (mask.length !== width * height) {
    throw new RangeError(`mask of ${mask.length} bytes for ${width} x ${height} pixels`);
  }
  const size = (patchSizePx * patchMpp) / mpp;
  const cols = Math.ceil(levelWidthPx / size);
  const rows = Math.ceil(levelHeightPx / size);
  if (cols * rows > maxPositions) {
    throw new ComputeError('TooLarge', `a patch grid of ${cols} x ${rows} positions (mpp ${mpp})`);
  }
  return { cols, rows, size, dx, dy };
}

/**
 * How each mask column splits across patch columns: the pairs (patch column, overlap width in
 * level-0 px) of mask column x are entries `first[x]` to `first[x + 1]`. Computed once, so the
 * per-pixel loop is additions only.
 */
interface ColumnSplit {
  first: Int32Array;
  col: Int32Array;
  across: Float64Array;
}

function splitColumns(input: PatchGridInput, { size, dx, cols }: Grid): ColumnSplit {
  const { width, levelWidthPx } = input;
  const first = new Int32Array(width + 1);
  const pairs: Array<[number, number]> = [];
  for (let x = 0; x < width; x++) {
    first[x] = pairs.length;
    const left = x * dx;
    const right = Math.min((x + 1) * dx, levelWidthPx);
    const lastCol = Math.min(cols - 1, Math.floor(right / size));
    for (let col = Math.floor(left / size); col <= lastCol && right > left; col++) {
      const across = overlap(left, right, col * size, (col + 1) * size);
      if (across > 0) pairs.push([col, across]);
    }
  }
  first[width] = pairs.length;
  return {
    first,
    col: Int32Array.from(pairs, ([col]) => col),
    across: Float64Array.from(pairs, ([, across]) => across),
  };
}

/** Adds to `tissue[col]` the tissue area (level-0 px²) that patch row `row` holds in each column. */
function addTissueOfBand(
  input: PatchGridInput,
  grid: Grid,
  split: ColumnSplit,
  row: number,
  tissue: Float64Array,
): void {
  const { mask, width, height, levelHeightPx } = input;
  const { size, dy } = grid;
  const top = row * size;
  const bottom = Math.min((row + 1) * size, levelHeightPx);
  const firstY = Math.max(0, Math.floor(top / dy));
  const endY = Math.min(height, Math.ceil(bottom / dy));
  const { first, col, across } = split;
  for (let y = firstY; y < endY; y++) {
    const along = overlap(y * dy, (y + 1) * dy, top, bottom);
    if (along <= 0) continue;
    const base = y * width;
    for (let x = 0; x < width; x++) {
      if (mask[base + x] !== 1) continue;
      for (let k = first[x]!; k < first[x + 1]!; k++) tissue[col[k]!]! += across[k]! * along;
    }
  }
}

function overlap(a0: number, a1: number, b0: number, b1: number): number {
  return Math.min(a1, b1) - Math.max(a0, b0);
}
