import { tissuePatchGrid } from '../../../compute/tissue';
import { creditGridPositions } from '../../../models/registry';

/** The tissue grid of a slide covered in tissue everywhere. */
function fullTissueGrid(widthPx: number, heightPx: number, mpp: number) {
  const downsample = 16;
  const width = Math.ceil(widthPx / downsample);
  const height = Math.ceil(heightPx / downsample);
  return tissuePatchGrid({
    mask: new Uint8Array(width * height).fill(1),
    width,
    height,
    maskDownsample: downsample,
    levelWidthPx: widthPx,
    levelHeightPx: heightPx,
    mpp,
  });
}

describe('the credit grid upper bound', () => {
  test.each([
    [2220, 2967, 0.499],
    [1000, 1000, 0.25],
    [224, 224, 0.5],
    [225, 223, 0.5],
    [46000, 32914, 0.2527],
    [3000, 2000, 1.0],
  ])(
    'of a %i x %i slide at %f µm is every position of the tissue grid, and covers a slide all tissue',
    (w, h, mpp) => {
      const grid = fullTissueGrid(w, h, mpp);
      expect(creditGridPositions(w, h, mpp)).toBe(grid.cols * grid.rows);
      // Edge positions mostly outside the slide hold under 10 % tissue, so they may not count.
      expect(grid.count).toBeLessThanOrEqual(grid.cols * grid.rows);
      expect(grid.count).toBeGreaterThan(0);
    },
  );

  test('is never below the tissue count of any mask on the slide', () => {
    const width = 100;
    const height = 80;
    const mask = new Uint8Array(width * height);
    for (let i = 0; i < mask.length; i += 7) mask[i] = 1;
    const grid = tissuePatchGrid({
      mask,
      width,
      height,
      maskDownsample: 20,
      levelWidthPx: 2000,
      levelHeightPx: 1600,
      mpp: 0.25,
    });
    expect(grid.count).toBeGreaterThan(0);
    expect(grid.count).toBeLessThanOrEqual(creditGridPositions(2000, 1600, 0.25));
    expect(grid.cols * grid.rows).toBe(creditGridPositions(2000, 1600, 0.25));
  });
});
