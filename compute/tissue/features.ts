import type { RgbImage } from '../image';

/** Optical density (summed over R, G, B) is coded 0..255 over 0..3; anything denser codes 255. */
export const odPerCode = 3 / 255;

/** Fixed-point fraction bits of the per-channel density table: the sum rounds to a code once. */
const odFraction = 6;

/** -log10(I / 255) per channel value in fixed-point codes, 0 read as 1 so that black stays finite. */
const odOfValue = Uint16Array.from({ length: 256 }, (_, v) =>
  Math.round((-Math.log10(Math.max(v, 1) / 255) / odPerCode) * (1 << odFraction)),
);

/** Saturation code by `max << 8 | (max - min)`: a lookup costs less than a division per pixel. */
const saturationOf = Uint8Array.from({ length: 1 << 16 }, (_, i) => {
  const max = i >>> 8;
  const range = i & 255;
  return max === 0 || range > max ? 0 : Math.round((255 * range) / max);
});

export interface ColourLimits {
  /** A pixel whose every channel is at least this is background (glass, bright dust). */
  whiteLevel: number;
  /** A pixel whose every channel is below this is black (slide borders, black ink, shadows). */
  blackLevel: number;
}

export interface PixelFeatures {
  /** HSV saturation, `round(255 * (max - min) / max)`; 0 where the pixel cannot be tissue. */
  saturation: Uint8Array;
  /** Summed optical density in codes of `odPerCode`; 0 where the pixel cannot be tissue. */
  density: Uint8Array;
  /**
   * Histograms over every pixel that is not black or ink: near-white ones are counted (they are
   * the background class Otsu must see) but never coded as tissue; borders cannot drag Otsu.
   */
  saturationHistogram: Int32Array;
  densityHistogram: Int32Array;
}

/**
 * Codes every pixel. Green, blue and cyan inks absorb red while H&E absorbs green most, so
 * stained tissue is never clearly greener than red, and hematoxylin's blue keeps red at least as
 * high as green: either sign means ink. Teal-tinted tissue (green about 30 over red) is kept.
 */
export function pixelFeatures(image: RgbImage, { whiteLevel, blackLevel }: ColourLimits): PixelFeatures {
  const { data } = image;
  const n = image.width * image.height;
  const saturation = new Uint8Array(n);
  const density = new Uint8Array(n);
  const saturationHistogram = new Int32Array(256);
  const densityHistogram = new Int32Array(256);
  for (let i = 0, p = 0; i < n; i++, p += 3) {
    const r = data[p]!;
    const g = data[p + 1]!;
    const b = data[p + 2]!;
    if (g - r >= 40 || (g >= r && b - r >= 80)) continue;
    // Comparisons, not Math.max/min: those are far slower in a hot loop under Jest's VM realm.
    let max = r;
    let min = r;
    if (g > max) max = g;
    else if (g < min) min = g;
    if (b > max) max = b;
    else if (b < min) min = b;
    if (max < blackLevel) continue;
    const s = saturationOf[(max << 8) | (max - min)]!;
    let d = (odOfValue[r]! + odOfValue[g]! + odOfValue[b]! + (1 << (odFraction - 1))) >>> odFraction;
    if (d > 255) d = 255;
    saturationHistogram[s]!++;
    densityHistogram[d]!++;
    if (min < whiteLevel) {
      saturation[i] = s;
      density[i] = d;
    }
  }
  return { saturation, density, saturationHistogram, densityHistogram };
}
