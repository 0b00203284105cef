/**
 * Instance segmentation quality against a reference, on label images of the same size (0 =
 * background, any positive integers as instance ids):
 * - detection F1 at IoU 0.5: a predicted and a reference object match when their IoU is above
 *   0.5, which makes the matching one-to-one by itself (two objects cannot both overlap a third
 *   by more than half its union);
 * - the mean IoU of those matched pairs;
 * - Panoptic Quality (Kirillov et al. 2019, as Graham et al. use it for nuclei): the matched
 *   IoUs summed over `matched + unmatched / 2`, which is the F1 times the mean matched IoU;
 * - the Aggregated Jaccard Index of Kumar et al. (IEEE TMI 2017): every reference object is
 *   paired with the prediction of highest IoU with it (a prediction may serve several), their
 *   intersections summed over their unions, plus every prediction never chosen added to the
 *   unions.
 */

export interface SegmentationQuality {
  reference: number;
  predicted: number;
  matched: number;
  precision: number;
  recall: number;
  f1: number;
  /** Mean IoU of the matched pairs; 0 when none matched. */
  meanMatchedIou: number;
  /** Panoptic Quality at IoU 0.5: F1 (detection) times mean matched IoU (segmentation). */
  pq: number;
  aji: number;
}

/** Overlap counts of every (reference, predicted) pair that shares a pixel, and each object's area. */
interface Overlaps {
  referenceArea: Map<number, number>;
  predictedArea: Map<number, number>;
  /** Keyed by `reference * 2^32 + predicted`. */
  intersection: Map<number, number>;
}

const pairKey = (ref: number, pred: number) => ref * 0x100000000 + pred;

function overlaps(reference: ArrayLike<number>, predicted: ArrayLike<number>): Overlaps {
  if (reference.length !== predicted.length) throw new RangeError('label images differ in size');
  const referenceArea = new Map<number, number>();
  const predictedArea = new Map<number, number>();
  const intersection = new Map<number, number>();
  for (let i = 0; i < reference.length; i++) {
    const r = reference[i]!;
    const p = predicted[i]!;
    if (r !== 0) referenceArea.set(r, (referenceArea.get(r) ?? 0) + 1);
    if (p !== 0) predictedArea.set(p, (predictedArea.get(p) ?? 0) + 1);
    if (r !== 0 && p !== 0) {
      const key = pairKey(r, p);
      intersection.set(key, (intersection.get(key) ?? 0) + 1);
    }
  }
  return { referenceArea, predictedArea, intersection };
}

export function segmentationQuality(
  reference: ArrayLike<number>,
  predicted: ArrayLike<number>,
): SegmentationQuality {
  const o = overlaps(reference, predicted);
  const pairs = pairList(o);
  let matched = 0;
  let iouSum = 0;
  for (const pair of pairs) {
    if (pair.iou > 0.5) {
      matched++;
      iouSum += pair.iou;
    }
  }
  const nRef = o.referenceArea.size;
  const nPred = o.predictedArea.size;
  const precision = nPred === 0 ? 0 : matched / nPred;
  const recall = nRef === 0 ? 0 : matched / nRef;
  const f1 = nRef + nPred === 0 ? 1 : (2 * matched) / (nRef + nPred);
  const meanMatchedIou = matched === 0 ? 0 : iouSum / matched;
  return {
    reference: nRef,
    predicted: nPred,
    matched,
    precision,
    recall,
    f1,
    meanMatchedIou,
    pq: nRef + nPred === 0 ? 1 : f1 * meanMatchedIou,
    aji: aggregatedJaccard(o, pairs),
  };
}

interface Pair {
  reference: number;
  predicted: number;
  intersection: number;
  union: number;
  iou: number;
}

function pairList({ referenceArea, predictedArea, intersection }: Overlaps): Pair[] {
  const pairs: Pair[] = [];
  for (const [key, inter] of intersection) {
    const reference = Math.floor(key / 0x100000000);
    const predicted = key - reference * 0x100000000;
    const union = referenceArea.get(reference)! + predictedArea.get(predicted)! - inter;
    pairs.push({ reference, predicted, intersection: inter, union, iou: inter / union });
  }
  // Map order follows first appearance; sort so ties in AJI's argmax resolve the same way always.
  return pairs.sort((a, b) => a.reference - b.reference || a.predicted - b.predicted);
}

function aggregatedJaccard(o: Overlaps, pairs: Pair[]): number {
  const best = new Map<number, Pair>();
  for (const pair of pairs) {
    const current = best.get(pair.reference);
    if (!current || pair.iou > current.iou) best.set(pair.reference, pair);
  }
  let intersection = 0;
  let union = 0;
  const used = new Set<number>();
  for (const [ref, area] of o.referenceArea) {
    const pair = best.get(ref);
    if (pair) {
      intersection += pair.intersection;
      union += pair.union;
      used.add(pair.predicted);
    } else {
      union += area;
    }
  }
  for (const [pred, area] of o.predictedArea) if (!used.has(pred)) union += area;
  return union === 0 ? 1 : intersection / union;
}
