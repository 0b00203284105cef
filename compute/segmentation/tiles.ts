import type { MaskScale, TissueMask } from '../tissue';

/**
 * The tiles a slide is segmented in. Each tile owns a core: the objects whose centroid lies in
 * it. Cores tile level 0 without overlap; the segmenter reads each core grown by a halo so an
 * object near the core's border is seen whole. Order and indices are deterministic, so a tile's
 * index names its stored objects and its label offset across retries.
 */
export interface SegmentationTile {
  /** Position in the plan: 0, 1, 2, ... over the tiles kept. */
  index: number;
  /** Core rectangle in level-0 pixels. */
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A low-resolution tissue mask and how many level-0 pixels each of its pixels spans. */
export type TissueMaskScale = TissueMask & MaskScale;

export interface PlanSegmentationTilesOptions {
  /** Side of a core in level-0 pixels (e.g. 1024). */
  coreSize: number;
  /** Without it every core is kept; with it, only cores that hold at least one tissue pixel. */
  tissue?: TissueMaskScale;
}

export interface SlideSize {
  widthPx: number;
  heightPx: number;
}

/** Cores in row-major order over a grid anchored at (0, 0); edge cores are cut to the slide. */
export function planSegmentationTiles(
  size: SlideSize,
  options: PlanSegmentationTilesOptions,
): SegmentationTile[] {
  const { widthPx, heightPx } = size;
  const { coreSize, tissue } = options;
  for (const [name, value] of Object.entries({ widthPx, heightPx, coreSize })) {
    if (!Number.isSafeInteger(value) || value <= 0)
      throw new RangeError(`${name} must be a positive integer`);
  }
  if (tissue && tissue.mask.length !== tissue.width * tissue.height) {
    throw new RangeError(`tissue mask of ${tissue.mask.length} bytes for ${tissue.width} x ${tissue.height}`);
  }
  const tiles: SegmentationTile[] = [];
  for (let y = 0; y < heightPx; y += coreSize) {
    for (let x = 0; x < widthPx; x += coreSize) {
      const core = { x, y, width: Math.min(coreSize, widthPx - x), height: Math.min(coreSize, heightPx - y) };
      if (tissue && !holdsTissue(tissue, core)) continue;
      tiles.push({ index: tiles.length, ...core });
    }
  }
  return tiles;
}

/**
 * Halo around each core, µm: at least the widest cell (the classical segmenter's nuclei reach
 * about 20 µm across, cells 5 µm more on each side), plus room for the segmenter's own context
 * (smoothing, Otsu, watershed) to settle before the objects a tile keeps.
 */
export const DEFAULT_HALO_UM = 40;

/** A halo in microns as whole level-0 pixels, rounded up so it is never smaller than asked. */
export function haloPixels(haloUm: number, mpp: number): number {
  if (!(haloUm >= 0) || !(mpp > 0)) throw new RangeError(`halo ${haloUm} µm at ${mpp} µm/px`);
  return Math.ceil(haloUm / mpp - 1e-9);
}

/** A rectangle grown by `halo` on every side and cut to the slide. */
export function grownRect(
  rect: { x: number; y: number; width: number; height: number },
  halo: number,
  size: SlideSize,
): { x: number; y: number; width: number; height: number } {
  const x0 = Math.max(0, rect.x - halo);
  const y0 = Math.max(0, rect.y - halo);
  const x1 = Math.min(size.widthPx, rect.x + rect.width + halo);
  const y1 = Math.min(size.heightPx, rect.y + rect.height + halo);
  return { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
}

function holdsTissue(
  tissue: TissueMaskScale,
  core: { x: number; y: number; width: number; height: number },
): boolean {
  const [dx, dy] =
    'maskDownsample' in tissue
      ? [tissue.maskDownsample, tissue.maskDownsample]
      : [tissue.maskDownsampleX, tissue.maskDownsampleY];
  // Every mask pixel that overlaps the core at all: a sliver of tissue at a core's edge counts.
  const x0 = Math.max(0, Math.floor(core.x / dx));
  const y0 = Math.max(0, Math.floor(core.y / dy));
  const x1 = Math.min(tissue.width, Math.ceil((core.x + core.width) / dx));
  const y1 = Math.min(tissue.height, Math.ceil((core.y + core.height) / dy));
  for (let y = y0; y < y1; y++) {
    const row = y * tissue.width;
    for (let x = x0; x < x1; x++) if (tissue.mask[row + x] === 1) return true;
  }
  return false;
}
