import type { RgbImage } from '../image';
import { expandLabels } from './expand';
import { type InstanceOptions, nucleusInstances } from './nuclei';
import { gaussianBlur } from './smooth';
import { glassPixels, stainDensities } from './stain';
import { hematoxylinThreshold } from './threshold';
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

/**
 * Tuned on the two MoNuSeg tiles of ../shared/data/nuclei (bench/segmentation-quality.ts), in
 * coarse steps of each parameter, one at a time; every value is a plausible size for nuclei.
 */
export const defaultClassicalOptions: Readonly<ClassicalOptions> = {
  smoothingUm: 0.25,
  minThresholdOd: 0.3,
  maxThresholdOd: 1.2,
  whiteLevel: 220,
  openingRadiusUm: 0.5,
  maxHoleAreaUm2: 10,
  distanceSmoothingUm: 0.5,
  seedSeparationUm: 1.75,
  minSeedDistanceUm: 0.75,
  minAreaUm2: 6,
  maxAreaUm2: 300,
  minSolidity: 0.8,
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
  const hematoxylin = gaussianBlur(
    stainDensities(tile).hematoxylin,
    width,
    height,
    options.smoothingUm / mpp,
  );
  const cut = hematoxylinThreshold(hematoxylin, glassPixels(tile, options.whiteLevel), {
    min: options.minThresholdOd,
    max: options.maxThresholdOd,
  });
  const mask = new Uint8Array(hematoxylin.length);
  for (let i = 0; i < mask.length; i++) mask[i] = hematoxylin[i]! >= cut ? 1 : 0;
  const nuclei = nucleusInstances({ mask, width, height }, mpp, options);
  return { nuclei, cells: expandLabels(nuclei, options.cellExpansionUm / mpp) };
}
