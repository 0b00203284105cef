import type { RgbImage, SlideImage } from '../image';
import { segmentClassicalOnThread } from './classical-threads';
import { expandLabels } from './expand';
import { defaultInstanceOptions, type InstanceOptions, nucleusInstances } from './nuclei';
import { gaussianBlur } from './smooth';
import { glassPixels, type StainVectors, stainDensities, type Vector } from './stain';
import { estimateStains, StainSample } from './stain-estimate';
import { DensityHistogram } from './threshold';
import type { Segmenter, TileSegmentation } from './types';

/**
 * The classical nucleus segmenter: hematoxylin density by colour deconvolution with the stain
 * vectors of the slide itself (Macenko, stain-estimate.ts), smoothed, thresholded by Otsu within
 * tissue between bounds relative to the tissue's own densities (threshold.ts), then the shared
 * instance step (nuclei.ts) and cells grown a fixed distance around each nucleus. Nothing is a
 * fixed density, so a pale or differently stained slide is cut where its own nuclei stand out;
 * every length is in microns, so one parameter set serves 0.25 and 0.5 µm/px alike.
 */
export interface ClassicalOptions extends InstanceOptions {
  /** Sigma of the Gaussian applied to the hematoxylin density, µm. */
  smoothingUm: number;
  /** Bounds on Otsu's hematoxylin cut, as fractions of the tissue's 99th-percentile density. */
  minCutFraction: number;
  maxCutFraction: number;
  /** A pixel whose R, G and B are all at least this is glass and left out of Otsu's histogram. */
  whiteLevel: number;
  /** How far a cell reaches beyond its nucleus, µm. */
  cellExpansionUm: number;
}

/**
 * The instance step's values were tuned on the MoNuSeg tiles (nuclei.ts); the cut's bounds were
 * not: a floor at a quarter and a ceiling at three quarters of the darkest tissue hematoxylin.
 */
export const defaultClassicalOptions: Readonly<ClassicalOptions> = {
  ...defaultInstanceOptions,
  smoothingUm: 0.25,
  minCutFraction: 0.25,
  maxCutFraction: 0.75,
  whiteLevel: 220,
  cellExpansionUm: 5,
};

/**
 * What a slide-wide estimate fixes for every tile of the slide: its stain vectors and the
 * hematoxylin cut in OD. A cut per tile would move with each tile's mix of nuclei and stroma, so
 * a nucleus on a border would be drawn differently by the two tiles that see it.
 */
export interface SlideStain extends StainVectors {
  cutOd: number;
}

/**
 * With `stain`, every tile is segmented with the slide's vectors and cut; without, each tile
 * estimates its own from its pixels (a tile seen alone, as in the benchmarks). `thread`: where
 * tiles are segmented, `main` (default) on the calling thread, `worker` on the process's pool of
 * worker threads (classical-threads.ts), leaving the calling thread's event loop free; both give
 * the same labels.
 */
export function createClassicalSegmenter(
  options: Partial<ClassicalOptions> = {},
  stain?: SlideStain,
  { thread = 'main' }: { thread?: 'main' | 'worker' } = {},
): Segmenter {
  const parameters: ClassicalOptions = { ...defaultClassicalOptions, ...options };
  return {
    name: 'classical-watershed',
    version: '2.0.0',
    parameters: Object.freeze({ ...parameters, stain: stain ? describeStain(stain) : 'per tile' }),
    async segment(tile, mpp, signal) {
      signal?.throwIfAborted();
      if (thread === 'worker') return segmentClassicalOnThread(tile, mpp, parameters, stain);
      return segmentClassical(tile, mpp, parameters, stain);
    },
  };
}

/** Synchronous core of the classical segmenter, for scripts and tests. */
export function segmentClassical(
  tile: RgbImage,
  mpp: number,
  options: ClassicalOptions,
  stain?: SlideStain,
): TileSegmentation {
  if (!(mpp > 0)) throw new RangeError(`mpp must be positive, not ${mpp}`);
  const { width, height } = tile;
  const vectors = stain ?? tileStains(tile);
  const hematoxylin = smoothedHematoxylin(tile, vectors, mpp, options);
  let cut = stain?.cutOd;
  if (cut === undefined) {
    const histogram = new DensityHistogram();
    histogram.add(hematoxylin, glassPixels(tile, options.whiteLevel));
    cut = histogram.cut(cutBounds(options));
  }
  const mask = new Uint8Array(hematoxylin.length);
  for (let i = 0; i < mask.length; i++) mask[i] = hematoxylin[i]! >= cut ? 1 : 0;
  const nuclei = nucleusInstances({ mask, width, height }, mpp, options);
  return { nuclei, cells: expandLabels(nuclei, options.cellExpansionUm / mpp) };
}

function cutBounds(options: ClassicalOptions) {
  return { minFraction: options.minCutFraction, maxFraction: options.maxCutFraction };
}

function tileStains(tile: RgbImage): StainVectors {
  const sample = new StainSample();
  sample.add(tile);
  return estimateStains(sample);
}

function smoothedHematoxylin(
  tile: RgbImage,
  stains: StainVectors,
  mpp: number,
  options: ClassicalOptions,
): Float32Array {
  const { hematoxylin } = stainDensities(tile, stains);
  return gaussianBlur(hematoxylin, tile.width, tile.height, options.smoothingUm / mpp);
}

const vectorText = (v: Vector) => v.map((c) => c.toFixed(4)).join(',');

function describeStain(stain: SlideStain): string {
  return `hematoxylin ${vectorText(stain.hematoxylin)}; eosin ${vectorText(stain.eosin)}; cut ${stain.cutOd.toFixed(4)} OD`;
}

/**
 * One stain estimate for a whole slide from up to `samples` of its tissue tiles (level 0),
 * spread evenly over the plan: Macenko's vectors from their pooled pixels, then Otsu's cut of
 * their pooled hematoxylin densities unmixed with those vectors.
 */
export async function estimateSlideStain(
  slide: SlideImage,
  tiles: readonly { x: number; y: number; width: number; height: number }[],
  mpp: number,
  options: { samples?: number; signal?: AbortSignal } & Partial<ClassicalOptions> = {},
): Promise<SlideStain> {
  const parameters: ClassicalOptions = { ...defaultClassicalOptions, ...options };
  const count = Math.min(options.samples ?? 16, tiles.length);
  const picked = Array.from(
    { length: count },
    (_, s) => tiles[Math.floor(((s + 0.5) * tiles.length) / count)]!,
  );
  const read = (tile: (typeof picked)[number]) => slide.readRegion({ level: 0, ...tile }, options.signal);
  // Each tile contributes a share of the pixels, so no one tile's colour outweighs the rest.
  const sample = new StainSample(Math.ceil(200_000 / Math.max(count, 1)));
  for (const tile of picked) sample.add(await read(tile));
  const vectors = estimateStains(sample);
  const histogram = new DensityHistogram();
  for (const tile of picked) {
    const rgb = await read(tile);
    histogram.add(
      smoothedHematoxylin(rgb, vectors, mpp, parameters),
      glassPixels(rgb, parameters.whiteLevel),
    );
  }
  const cut = histogram.cut(cutBounds(parameters));
  // JSON (a heartbeat, the layer's index) has no Infinity; the largest double cuts away as much.
  return { ...vectors, cutOd: Number.isFinite(cut) ? cut : Number.MAX_VALUE };
}
