import { levelFor } from '../../../web/src/viewer/view';

describe('the level the viewer draws', () => {
  const pyramid = [0.5, 1, 2, 4, 8];

  test('is the level nearest a device pixel in log scale: its pixels span 0.71 to 1.41 device pixels', () => {
    expect(levelFor(pyramid, 1)).toBe(1);
    expect(levelFor(pyramid, 1.3)).toBe(1);
    // 0.7 of a halving above level 1 (where the bench's views fall): level 2, pixels 1.23 device pixels.
    expect(levelFor(pyramid, 2 ** 0.7)).toBe(2);
    expect(levelFor(pyramid, 2 ** 0.49)).toBe(1);
    for (let step = 0; step <= 400; step++) {
      const worldPerDevicePx = 0.5 * 2 ** (step / 100);
      const drawn = pyramid[levelFor(pyramid, worldPerDevicePx)]! / worldPerDevicePx;
      expect(drawn).toBeGreaterThan(Math.SQRT1_2 * 0.999);
      expect(drawn).toBeLessThan(Math.SQRT2 * 1.001);
    }
  });

  test('halfway between two levels in log scale, the finer one', () => {
    expect(levelFor(pyramid, Math.SQRT2)).toBe(1);
    expect(levelFor(pyramid, 4 * Math.SQRT2)).toBe(3);
  });

  test('past either end of the pyramid, its finest or its coarsest level', () => {
    expect(levelFor(pyramid, 0.01)).toBe(0);
    expect(levelFor(pyramid, 1000)).toBe(4);
    expect(levelFor([0.25], 3)).toBe(0);
  });

  test('levels need not be halvings: a pyramid of quarters', () => {
    const quarters = [1, 4, 16];
    expect(levelFor(quarters, 1.99)).toBe(0);
    expect(levelFor(quarters, 2.01)).toBe(1);
    expect(levelFor(quarters, 7.9)).toBe(1);
    expect(levelFor(quarters, 8.1)).toBe(2);
  });
});
