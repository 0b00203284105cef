import { otsuThreshold } from '../tissue/otsu';

/**
 * The hematoxylin density above which a pixel is nucleus: Otsu's cut of the densities of tissue
 * pixels, held between bounds that are fractions of the tissue's own darkest hematoxylin (its
 * 99th percentile), never fixed densities. A faint slide, another lab's lighter haematoxylin or
 * a faded section scales every density down alike; the cut and its bounds scale with them.
 * Without the floor, a tissue of one mode would have its noise split in two and half of it
 * called nuclei; without the ceiling, packed dark nuclei would lose their paler rims.
 */

export interface CutBounds {
  /** The lowest cut, as a fraction of the tissue's 99th-percentile density. */
  minFraction: number;
  /** The highest, likewise. */
  maxFraction: number;
}

/** Fine bins for the percentile, in OD; densities above the last bin are counted in it. */
const binOd = 0.001;
const bins = 4096;
/** Otsu's histogram spans twice the 99th percentile in this many codes. */
const codes = 256;
const codesPerScale = codes / 2;
/** Too few distinct codes between the 1st and 99th percentile for a split to mean anything. */
const minSpread = 8;
const scalePercentile = 0.99;

/**
 * Densities of tissue pixels, from one tile or pooled over several tiles of a slide, in bins
 * fine enough that a slide whose nuclei reach only 0.1 OD still spans many of Otsu's codes.
 */
export class DensityHistogram {
  private readonly counts = new Float64Array(bins);
  private total = 0;

  /** Adds the densities of the pixels that are not glass. */
  add(hematoxylin: Float32Array, glass: Uint8Array): void {
    const counts = this.counts;
    for (let i = 0; i < hematoxylin.length; i++) {
      if (glass[i] !== 0) continue;
      let bin = Math.floor(hematoxylin[i]! / binOd);
      if (!(bin >= 0)) bin = 0;
      else if (bin >= bins) bin = bins - 1;
      counts[bin]!++;
      this.total++;
    }
  }

  /** The density below which lie `fraction` of the pixels (bin centre); 0 when empty. */
  percentile(fraction: number): number {
    const target = this.total * fraction;
    let seen = 0;
    for (let b = 0; b < bins; b++) {
      seen += this.counts[b]!;
      if (seen >= target && seen > 0) return (b + 0.5) * binOd;
    }
    return 0;
  }

  /**
   * The nucleus cut in OD: Otsu on densities coded relative to the 99th percentile, clamped to
   * the bounds. `Infinity` (nothing is nucleus) when there is no tissue or its densities have no
   * spread (glass, an even wash of one colour).
   */
  cut(bounds: CutBounds): number {
    if (this.total === 0) return Number.POSITIVE_INFINITY;
    const scale = this.percentile(scalePercentile);
    const perCode = scale / codesPerScale;
    const relative = new Float64Array(codes);
    for (let b = 0; b < bins; b++) {
      const n = this.counts[b]!;
      if (n === 0) continue;
      relative[Math.min(codes - 1, Math.floor(((b + 0.5) * binOd) / perCode))]! += n;
    }
    const code = otsuThreshold(relative, minSpread);
    if (code === undefined) return Number.POSITIVE_INFINITY;
    const cut = code * perCode;
    return Math.min(Math.max(cut, bounds.minFraction * scale), bounds.maxFraction * scale);
  }
}
