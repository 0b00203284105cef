import { otsuThreshold } from '../tissue/otsu';

/**
 * The hematoxylin density above which a pixel is nucleus: Otsu's cut of the densities of the
 * tile's tissue pixels, held between two bounds. Without the floor, a tile of stroma alone (one
 * mode) would have its noise split in two and half of it called nuclei; without the ceiling, a
 * tile of packed dark nuclei would lose their paler rims.
 */

export interface ThresholdBounds {
  /** The lowest density a nucleus cut may have, in OD. */
  min: number;
  /** The highest, in OD. */
  max: number;
}

/** Densities are coded 0..255 in steps of this many OD for Otsu's histogram. */
const odPerCode = 0.01;

/** Too few distinct codes between the 1st and 99th percentile for a split to mean anything. */
const minSpread = 8;

export function hematoxylinThreshold(
  hematoxylin: Float32Array,
  glass: Uint8Array,
  bounds: ThresholdBounds,
): number {
  const counts = new Float64Array(HISTOGRAM_CODES);
  addToHistogram(counts, hematoxylin, glass);
  return thresholdOf(counts, bounds);
}

/** Codes of the density histogram that `addToHistogram` fills and `thresholdOf` cuts. */
export const HISTOGRAM_CODES = 256;

/** Adds the densities of the non-glass pixels to `counts` (pooled over several tiles for a slide-wide cut). */
export function addToHistogram(counts: Float64Array, hematoxylin: Float32Array, glass: Uint8Array): void {
  for (let i = 0; i < hematoxylin.length; i++) {
    if (glass[i] !== 0) continue;
    let code = Math.round(hematoxylin[i]! / odPerCode);
    if (code < 0) code = 0;
    else if (code > 255) code = 255;
    counts[code]!++;
  }
}

/** Otsu's cut of a density histogram, held between the bounds. */
export function thresholdOf(counts: Float64Array, bounds: ThresholdBounds): number {
  const code = otsuThreshold(counts, minSpread);
  // No spread: a blank or uniform tile; the ceiling keeps it free of nuclei unless it is all dark.
  const cut = code === undefined ? bounds.max : (code - 0.5) * odPerCode;
  return Math.min(Math.max(cut, bounds.min), bounds.max);
}
