import { squaredDistanceToSites } from './distance';
import type { LabelImage } from './types';

/**
 * Cells grown from nuclei (like `skimage.segmentation.expand_labels`): every background pixel
 * within `distance` pixels of a nucleus takes the label of the nearest nucleus pixel. Nuclei
 * keep their pixels, so label k of the result contains nucleus k. Equidistant nuclei are decided
 * by the distance transform's fixed rule (the one met first along the row, then the column), so
 * the same image always grows the same cells.
 */
export function expandLabels(nuclei: LabelImage, distance: number): LabelImage {
  const { labels, width, height, count } = nuclei;
  const out = labels.slice();
  if (!(distance > 0) || count === 0) return { labels: out, width, height, count };
  const sites = new Uint8Array(labels.length);
  for (let i = 0; i < labels.length; i++) if (labels[i] !== 0) sites[i] = 1;
  const nearest = new Int32Array(labels.length);
  const sq = squaredDistanceToSites(sites, width, height, { nearest });
  const limit = distance * distance;
  for (let i = 0; i < labels.length; i++) {
    if (labels[i] === 0 && sq[i]! <= limit) out[i] = labels[nearest[i]!]!;
  }
  return { labels: out, width, height, count };
}
