import type { RgbImage, SlideImage } from '../image';
import { expandLabels } from './expand';
import { defaultInstanceOptions, type InstanceOptions, nucleusInstances } from './nuclei';
import { gaussianBlur } from './smooth';
import { glassPixels, stainDensities } from './stain';
import { addToHistogram, HISTOGRAM_CODES, hematoxylinThreshold, thresholdOf } from './threshold';
import type { Segmenter, TileSegmentation } from './types';

/**
 * The classical nucleus segmenter: hematoxylin density by colour deconvolution, smoothed,
 * thresholded by Otsu within tissue, then the shared instance step (nuclei.ts) and cells grown
 * a fixed distance around each nucleus. Every length is in microns, so one parameter set serves
 * slides scanned at 0.25 and 0.5 µm/px.
 */
export interface ClassicalOptions extends InstanceOptions {
  /** Sigma of the Gaussian applied to the hematoxylin density, µm. */
  smoothingUm: number;
  /** Bounds on Otsu's hematoxylin cut, OD (threshold.ts). */
  minThresholdOd: number;
  maxThresholdOd: number;
  /** A pixel whose R, G and B are all at least this is glass and left out of Otsu's histogram. */
  whiteLevel: number;
  /** How far a cell reaches beyond its nucleus, µm. */
  cellExpansionUm: number;
}

/** Tuned like the instance step's defaults (nuclei.ts), on the same MoNuSeg tiles. */
export const defaultClassicalOptions: Readonly<ClassicalOptions> = {
  ...defaultInstanceOptions,
  smoothingUm: 0.25,
  minThresholdOd: 0.3,
  maxThresholdOd: 1.2,
  whiteLevel: 220,
  cellExpansionUm: 5,
};

export function createClassicalSegmenter(options: Partial<ClassicalOptions> = {}): Segmenter {
  const parameters: ClassicalOptions = { ...defaultClassicalOptions, ...options };
  return {
    name: 'classical-watershed',
    version: '1.0.0',
    parameters: Object.freeze({ ...parameters }),
    async segment(tile, mpp, signal) {
      signal?.throwIfAborted();
      return segmentClassical(tile, mpp, parameters);
    },
  };
}

/** Synchronous core of the classical segmenter, for scripts and tests. */
export function segmentClassical(tile: RgbImage, mpp: number, options: ClassicalOptions): TileSegmentation {
  if (!(mpp > 0)) throw new RangeError(`mpp must be positive, not ${mpp}`);
  const { width, height } = tile;
  const hematoxylin = smoothedHematoxylin(tile, mpp, options);
  const cut = hematoxylinThreshold(hematoxylin, glassPixels(tile, options.whiteLevel), {
    min: options.minThresholdOd,
    max: options.maxThresholdOd,
  });
  const mask = new Uint8Array(hematoxylin.length);
  for (let i = 0; i < mask.length; i++) mask[i] = hematoxylin[i]! >= cut ? 1 : 0;
  const nuclei = nucleusInstances({ mask, width, height }, mpp, options);
  return { nuclei, cells: expandLabels(nuclei, options.cellExpansionUm / mpp) };
}

function smoothedHematoxylin(tile: RgbImage, mpp: number, options: ClassicalOptions): Float32Array {
  return gaussianBlur(stainDensities(tile).hematoxylin, tile.width, tile.height, options.smoothingUm / mpp);
}

/**
 * One hematoxylin cut for a whole slide: Otsu over the pooled densities of up to `samples`
 * of its tissue tiles (level 0), spread evenly over the plan. A cut per tile would move with
 * each tile's mix of nuclei and stroma, so a nucleus on a border would be drawn differently by
 * the two tiles that see it; segmenting every tile at one cut keeps the layer seamless. The
 * answer goes into `minThresholdOd` and `maxThresholdOd` alike.
 */
export async function slideHematoxylinThreshold(
  slide: SlideImage,
  tiles: readonly { x: number; y: number; width: number; height: number }[],
  mpp: number,
  options: { samples?: number; signal?: AbortSignal } & Partial<ClassicalOptions> = {},
): Promise<number> {
  const parameters: ClassicalOptions = { ...defaultClassicalOptions, ...options };
  const samples = Math.min(options.samples ?? 16, tiles.length);
  const counts = new Float64Array(HISTOGRAM_CODES);
  for (let s = 0; s < samples; s++) {
    const tile = tiles[Math.floor(((s + 0.5) * tiles.length) / samples)]!;
    const rgb = await slide.readRegion({ level: 0, ...tile }, options.signal);
    addToHistogram(
      counts,
      smoothedHematoxylin(rgb, mpp, parameters),
      glassPixels(rgb, parameters.whiteLevel),
    );
  }
  return thresholdOf(counts, { min: parameters.minThresholdOd, max: parameters.maxThresholdOd });
}
