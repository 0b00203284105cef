import { maxFilter } from '../../../../compute/segmentation/seeds';

/** The plain definition: every pixel's maximum over its clipped `(2r + 1)^2` square. */
function referenceMaxFilter(src: Float32Array, width: number, height: number, radius: number): Float32Array {
  const out = new Float32Array(src.length);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let best = Number.NEGATIVE_INFINITY;
      for (let yy = Math.max(0, y - radius); yy <= Math.min(height - 1, y + radius); yy++)
        for (let xx = Math.max(0, x - radius); xx <= Math.min(width - 1, x + radius); xx++)
          best = Math.max(best, src[yy * width + xx]!);
      out[y * width + x] = best;
    }
  }
  return out;
}

describe('the seed finder’s sliding maximum (van Herk / Gil-Werman)', () => {
  it.each([
    [1, 1, 1],
    [7, 5, 1],
    [13, 29, 3],
    [40, 17, 7],
    [9, 9, 12],
  ])('equals the plain square maximum on %i x %i, radius %i', (width, height, radius) => {
    let s = width * 131 + height * 7 + radius;
    const src = Float32Array.from({ length: width * height }, () => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return (s % 1000) / 10 - 50;
    });
    expect(Array.from(maxFilter(src, width, height, radius))).toEqual(
      Array.from(referenceMaxFilter(src, width, height, radius)),
    );
  });
});
