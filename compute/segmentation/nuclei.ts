import { packBits, unpackBits } from '../tissue/bits';
import { fillSmallHoles } from '../tissue/components';
import { closeThenOpen } from '../tissue/morphology';
import { distanceToBackground } from './distance';
import { keepAndRenumber, labelUnseeded, regionStats } from './labels';
import { peakSeeds } from './seeds';
import { gaussianBlur } from './smooth';
import type { LabelImage } from './types';
import { seededWatershed } from './watershed';

/**
 * From a foreground mask (pixels that look like nucleus) to nucleus instances: clean the mask,
 * split touching nuclei by a watershed of the distance to background seeded at its peaks, then
 * drop what is too small, too large or too ragged to be a nucleus. Shared by the classical and
 * the model-based front ends; every size is in microns and converted here with the tile's mpp.
 */
export interface InstanceOptions {
  /** Radius of the opening that removes specks and thin bridges, µm. */
  openingRadiusUm: number;
  /** Holes of at most this area inside a nucleus are filled, µm². */
  maxHoleAreaUm2: number;
  /** Sigma of the Gaussian that smooths the distance map before seeds are sought, µm. */
  distanceSmoothingUm: number;
  /** Two seeds closer than this are one nucleus, µm. */
  seedSeparationUm: number;
  /** A distance peak lower than this (half a nucleus' thickness) is no seed, µm. */
  minSeedDistanceUm: number;
  minAreaUm2: number;
  maxAreaUm2: number;
  /** Area over convex-hull area; below it an object is debris or a failed split. */
  minSolidity: number;
}

/**
 * Tuned with the classical front end on the two MoNuSeg tiles of ../shared/data/nuclei
 * (bench/segmentation-quality.ts), in coarse steps of each parameter, one at a time; every
 * value is a plausible size for nuclei. Model-based front ends start from the same values.
 */
export const defaultInstanceOptions: Readonly<InstanceOptions> = {
  openingRadiusUm: 0.5,
  maxHoleAreaUm2: 10,
  distanceSmoothingUm: 0.5,
  seedSeparationUm: 1.75,
  minSeedDistanceUm: 0.75,
  minAreaUm2: 6,
  maxAreaUm2: 300,
  minSolidity: 0.8,
};

export interface Foreground {
  /** One byte per pixel, nonzero where the pixel is nucleus. */
  mask: Uint8Array;
  width: number;
  height: number;
  /**
   * Where a model says how central a pixel is (higher at nucleus centres), its map; seeds are its
   * peaks. Otherwise they are the peaks of the distance to background.
   */
  centre?: Float32Array;
}

export function nucleusInstances(foreground: Foreground, mpp: number, options: InstanceOptions): LabelImage {
  const { width, height } = foreground;
  const mask = cleanMask(foreground, mpp, options);
  const distance = distanceToBackground(mask, width, height);
  const relief =
    foreground.centre ?? gaussianBlur(distance, width, height, options.distanceSmoothingUm / mpp);
  const seeds = peakSeeds(relief, mask, width, height, {
    separation: options.seedSeparationUm / mpp,
    minHeight: foreground.centre ? Number.NEGATIVE_INFINITY : options.minSeedDistanceUm / mpp,
  });
  const elevation = new Float32Array(relief.length);
  for (let i = 0; i < relief.length; i++) elevation[i] = -relief[i]!;
  const labels = seededWatershed({ elevation, labels: seeds.labels, mask, width, height });
  const highest = labelUnseeded(labels, mask, width, seeds.count);
  return keepAndRenumber(labels, width, height, plausibleNuclei(labels, width, highest, mpp, options));
}

/** The mask opened (specks, bridges) and with its small holes filled (pale nucleoli, chromatin gaps). */
function cleanMask({ mask, width, height }: Foreground, mpp: number, options: InstanceOptions): Uint8Array {
  let bits = packBits(width, height, (i) => mask[i] !== 0);
  const radius = Math.round(options.openingRadiusUm / mpp);
  if (radius > 0) bits = closeThenOpen(bits, 0, radius);
  fillSmallHoles(bits, options.maxHoleAreaUm2 / (mpp * mpp));
  return unpackBits(bits);
}

/** `keep[label]` = 1 for labels of plausible size and shape. */
function plausibleNuclei(
  labels: Uint32Array,
  width: number,
  highest: number,
  mpp: number,
  options: InstanceOptions,
): Uint8Array {
  const { area, solidity } = regionStats(labels, width, highest);
  const pixelArea = mpp * mpp;
  const keep = new Uint8Array(highest + 1);
  for (let l = 1; l <= highest; l++) {
    const um2 = area[l]! * pixelArea;
    keep[l] =
      um2 >= options.minAreaUm2 && um2 <= options.maxAreaUm2 && solidity[l]! >= options.minSolidity ? 1 : 0;
  }
  return keep;
}
