import type { RgbImage } from '../image';
import { countSet, packBits, unpackBits } from './bits';
import { fillSmallHoles, removeSmallRegions } from './components';
import { odPerCode, pixelFeatures } from './features';
import { closeThenOpen } from './morphology';
import { type Histogram, otsuThreshold } from './otsu';

/**
 * Defaults suit a brightfield H&E overview at 8 to 16 µm per pixel: a 2 px closing bridges
 * 16-32 µm gaps, a 1 px opening keeps thin strands, and the areas are in pixels of the image.
 */
export interface TissueOptions {
  /** A pixel whose every channel is at least this is background. Default 220. */
  whiteLevel?: number;
  /** A pixel whose every channel is below this is black: borders, black ink, shadows. Default 50. */
  blackLevel?: number;
  closeRadius?: number;
  openRadius?: number;
  /** Tissue regions smaller than this (pixels) are dropped. Default 16. */
  minRegionArea?: number;
  /** Enclosed holes up to this area (pixels) are filled. Default 64. */
  maxHoleArea?: number;
}

export interface TissueMask {
  /** 1 for tissue, 0 for background, row-major, one byte per pixel of the input image. */
  mask: Uint8Array;
  width: number;
  height: number;
}

/** Where a feature's threshold came from: Otsu inside its bounds, or a fixed bound. */
export type ThresholdSource = 'otsu' | 'floor' | 'ceiling' | 'none';

export interface FeatureThreshold {
  /** Pixels at or above it are tissue (saturation in 0..1, optical density summed over RGB). */
  value: number;
  source: ThresholdSource;
}

export interface TissueDetection extends TissueMask {
  thresholds: { saturation: FeatureThreshold; opticalDensity: FeatureThreshold };
  /** Tissue pixels over all pixels. */
  tissueFraction: number;
}

const defaults: Required<TissueOptions> = {
  whiteLevel: 220,
  blackLevel: 50,
  closeRadius: 2,
  openRadius: 1,
  minRegionArea: 16,
  maxHoleArea: 64,
};

/**
 * Otsu's cut is kept inside these bounds (in codes). The floor sits above glass (saturation
 * about 0.05, density about 0.15 at low resolution) so that an image that is nearly all
 * background cannot push the cut into its noise; the ceiling stops an image that is nearly all
 * tissue from being cut between pale stroma and dense nuclei.
 */
const bounds = {
  saturation: { floor: Math.round(0.08 * 255), ceiling: Math.round(0.2 * 255), minSpread: 12 },
  density: { floor: Math.round(0.25 / odPerCode), ceiling: Math.round(0.6 / odPerCode), minSpread: 12 },
};

/**
 * Finds tissue in a low-resolution brightfield image (about 8 to 16 µm per pixel): a pixel is
 * tissue when its saturation or its optical density reaches a per-image Otsu threshold and it
 * is neither near-white, black nor ink; the mask is then closed, opened, cleared of small
 * regions and its small holes filled. Deterministic and linear in the pixel count.
 *
 * An image without contrast (Otsu meaningless) falls back to fixed thresholds, and optical
 * density alone is then no evidence: a uniform white, grey or black image has no tissue, a
 * uniform stained one is all tissue.
 */
export function detectTissue(image: RgbImage, options: TissueOptions = {}): TissueDetection {
  const o = { ...defaults, ...options };
  const { width, height } = image;
  if (image.data.length !== width * height * 3) {
    throw new RangeError(`RGB data of ${image.data.length} bytes for ${width} x ${height} pixels`);
  }
  for (const radius of [o.closeRadius, o.openRadius]) {
    if (!Number.isInteger(radius) || radius < 0 || radius > 64) {
      throw new RangeError(`a disc radius of ${radius} px (whole pixels, 0 to 64)`);
    }
  }
  const features = pixelFeatures(image, o);
  const saturation = threshold(features.saturationHistogram, bounds.saturation, 'floor');
  const density = threshold(features.densityHistogram, bounds.density, 'none');
  const { saturation: sat, density: od } = features;
  // Pixels that cannot be tissue are coded 0, below every threshold.
  const candidates = packBits(width, height, (i) => sat[i]! >= saturation.code || od[i]! >= density.code);
  const bits = closeThenOpen(candidates, o.closeRadius, o.openRadius);
  removeSmallRegions(bits, o.minRegionArea);
  fillSmallHoles(bits, o.maxHoleArea);
  const mask = unpackBits(bits);
  return {
    mask,
    width,
    height,
    thresholds: {
      saturation: { value: saturation.code / 255, source: saturation.source },
      opticalDensity: {
        value: density.source === 'none' ? Number.POSITIVE_INFINITY : density.code * odPerCode,
        source: density.source,
      },
    },
    tissueFraction: mask.length === 0 ? 0 : countSet(bits) / mask.length,
  };
}

interface Bounds {
  floor: number;
  ceiling: number;
  minSpread: number;
}

/** `none` is a code no pixel reaches: the feature is switched off. */
function threshold(
  histogram: Histogram,
  { floor, ceiling, minSpread }: Bounds,
  withoutContrast: 'floor' | 'none',
): { code: number; source: ThresholdSource } {
  const otsu = otsuThreshold(histogram, minSpread);
  if (otsu === undefined)
    return withoutContrast === 'floor' ? { code: floor, source: 'floor' } : { code: 256, source: 'none' };
  if (otsu < floor) return { code: floor, source: 'floor' };
  if (otsu > ceiling) return { code: ceiling, source: 'ceiling' };
  return { code: otsu, source: 'otsu' };
}
