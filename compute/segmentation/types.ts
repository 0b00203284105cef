import type { RgbImage } from '../image';

/**
 * The contract between a tile segmenter (classical or model-based) and everything that tiles,
 * stitches and measures a slide. A segmenter sees one RGB tile at a known scale and answers
 * label images of the same size; it knows nothing of slides, stores or halos.
 */

/** Row-major labels: 0 is background, objects are `1..count`, contiguous. */
export interface LabelImage {
  labels: Uint32Array;
  width: number;
  height: number;
  count: number;
}

/**
 * Nuclei and the cells grown from them: label `k` of `cells` is the cell of nucleus `k`, so the
 * two images share `count` and every nucleus pixel is inside its own cell.
 */
export interface TileSegmentation {
  nuclei: LabelImage;
  cells: LabelImage;
}

export interface Segmenter {
  /** A stable identifier written to provenance, e.g. `classical-watershed`. */
  readonly name: string;
  readonly version: string;
  /** Every parameter that changes the output, for provenance. */
  readonly parameters: Readonly<Record<string, number | string | boolean>>;
  /** Segments one tile whose pixels are `mpp` microns a side. */
  segment(tile: RgbImage, mpp: number, signal?: AbortSignal): Promise<TileSegmentation>;
}
