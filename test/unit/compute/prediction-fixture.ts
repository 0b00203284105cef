import path from 'node:path';
import type { SlideImage } from '../../../compute/image';
import { type ModelSession, openModelSession, type PatchGrid } from '../../../compute/prediction';
import { buildHePyramid, openHePyramid } from '../../../compute/pyramid';
import { openTiffSlide } from '../../../compute/slide';
import { fileSource } from '../../../compute/source';
import { memoryStore } from '../../../compute/zarr';
import { modelSpec } from '../../../models/registry';
import { wsiDir } from './helpers';

export interface SmallRegionPrediction {
  he: SlideImage;
  mpp: number;
  session: ModelSession;
  grid: PatchGrid;
}

/**
 * CMU-1-Small-Region's H&E pyramid in memory, the v0.7 model, and a patch grid over the slide
 * holding the positions `keep(row, col)` selects (gaps make shards of background alone).
 */
export async function smallRegionPrediction(
  keep: (row: number, col: number) => boolean,
): Promise<SmallRegionPrediction> {
  const source = await fileSource(path.join(wsiDir, 'CMU-1-Small-Region.svs'));
  let he: SlideImage;
  let mpp: number;
  try {
    const slide = await openTiffSlide(source);
    mpp = slide.probe.effectiveMpp!;
    const sink = memoryStore();
    await buildHePyramid({ image: slide, sink, mpp, name: 'H&E', shardSize: 1024, chunkSize: 256 });
    he = await openHePyramid(sink);
  } finally {
    await source.close();
  }
  const session = await openModelSession(modelSpec('v0.7'));
  const size = (224 * 0.5) / mpp;
  const cols = Math.ceil(he.widthPx / size);
  const rows = Math.ceil(he.heightPx / size);
  const selected = new Uint8Array(cols * rows);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) selected[r * cols + c] = keep(r, c) ? 1 : 0;
  return { he, mpp, session, grid: { cols, rows, selected, patchSizeLevel0Px: size } };
}

/** The keys whose bytes differ between two stores holding the same keys. */
export function differingKeys(
  expected: { readonly map: Map<string, Uint8Array> },
  actual: { readonly map: Map<string, Uint8Array> },
): string[] {
  return [...expected.map]
    .filter(([key, bytes]) => Buffer.compare(bytes, actual.map.get(key)!) !== 0)
    .map(([key]) => key);
}
