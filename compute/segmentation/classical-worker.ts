import { parentPort } from 'node:worker_threads';
import type { RgbImage } from '../image';
import { type ClassicalOptions, type SlideStain, segmentClassical } from './classical';

/** What the classical segmenter's thread (classical-threads.ts) is sent: one tile to segment. */
export interface ClassicalTileJob {
  id: number;
  tile: RgbImage;
  mpp: number;
  options: ClassicalOptions;
  stain?: SlideStain;
}

parentPort!.on('message', ({ id, tile, mpp, options, stain }: ClassicalTileJob) => {
  try {
    const { nuclei, cells } = segmentClassical(tile, mpp, options, stain);
    const moved = [nuclei.labels.buffer, cells.labels.buffer] as ArrayBuffer[];
    parentPort!.postMessage({ id, segmentation: { nuclei, cells } }, moved);
  } catch (err) {
    parentPort!.postMessage({ id, error: err instanceof Error ? err.message : String(err) });
  }
});
