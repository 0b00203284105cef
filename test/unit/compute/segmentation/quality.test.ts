import { segmentationQuality } from '../../../../compute/segmentation/quality';

/** A label image from rows of digits, one character a pixel. */
function labels(...rows: string[]): Uint32Array {
  return Uint32Array.from(rows.join(''), (c) => Number(c));
}

describe('segmentation quality', () => {
  it('is perfect for identical images, whatever the ids', () => {
    const reference = labels('1100', '1100', '0022', '0022');
    const predicted = labels('7700', '7700', '0033', '0033');
    const q = segmentationQuality(reference, predicted);
    expect(q).toMatchObject({
      reference: 2,
      predicted: 2,
      matched: 2,
      f1: 1,
      meanMatchedIou: 1,
      pq: 1,
      aji: 1,
    });
  });

  it('matches only above IoU 0.5 and scores F1 from the counts', () => {
    // Reference 1 (4 px) vs predicted 1 (3 px inside it): IoU 3/4, a match.
    // Reference 2 (4 px) vs predicted 2 (2 px inside it): IoU 2/4 = 0.5, not a match.
    // Predicted 3 overlaps nothing.
    const reference = labels('11000', '11000', '00022', '00022');
    const predicted = labels('11000', '10003', '00022', '00000');
    const q = segmentationQuality(reference, predicted);
    expect(q.matched).toBe(1);
    expect(q.precision).toBeCloseTo(1 / 3);
    expect(q.recall).toBeCloseTo(1 / 2);
    expect(q.f1).toBeCloseTo((2 * 1) / (2 + 3));
    expect(q.meanMatchedIou).toBeCloseTo(0.75);
    // PQ: the matched IoU over TP + FP / 2 + FN / 2 = 1 + 2 / 2 + 1 / 2.
    expect(q.pq).toBeCloseTo(0.75 / 2.5);
    // AJI: ref 1 -> pred 1 (I 3, U 4), ref 2 -> pred 2 (I 2, U 4); pred 3 unused (+1 to U).
    expect(q.aji).toBeCloseTo(5 / 9);
  });

  it('lets one prediction serve two references in AJI (Kumar et al. 2017), so a merge is penalised', () => {
    // Two reference nuclei, one prediction covering both: each reference picks it (IoU 2/4).
    const reference = labels('1122');
    const predicted = labels('5555');
    const q = segmentationQuality(reference, predicted);
    expect(q.matched).toBe(0);
    expect(q.f1).toBe(0);
    // I = 2 + 2, U = 4 + 4: the prediction's area is counted in both unions.
    expect(q.aji).toBeCloseTo(0.5);
  });

  it('counts a reference with no overlap into the union alone', () => {
    const reference = labels('1100', '0000', '0022');
    const predicted = labels('1100', '0000', '0000');
    const q = segmentationQuality(reference, predicted);
    expect(q.aji).toBeCloseTo(2 / 4);
    expect(q.recall).toBeCloseTo(0.5);
    expect(q.precision).toBe(1);
  });

  it('rejects images of different sizes', () => {
    expect(() => segmentationQuality(labels('11'), labels('110'))).toThrow(RangeError);
  });
});
