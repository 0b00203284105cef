import { partSizes } from '../../../storage/s3-uploads';

/**
 * How the S3 backend cuts a chunk into parts: every part but a lone one holds at least the
 * part size (S3's minimum and the 10,000-part budget both rest on it), the last is no larger
 * than the others (its storing is what the client waits for), and nothing is lost or added.
 */
const MiB = 1024 * 1024;

describe('partSizes', () => {
  test.each([
    [64 * MiB, 16 * MiB, [16 * MiB, 16 * MiB, 16 * MiB, 16 * MiB]],
    [40 * MiB, 16 * MiB, [24 * MiB, 16 * MiB]],
    [44 * MiB + 1000, 16 * MiB, [28 * MiB + 1000, 16 * MiB]],
    [16 * MiB, 16 * MiB, [16 * MiB]],
    [20 * MiB, 16 * MiB, [20 * MiB]],
    // A last chunk smaller than a part, and a chunk just over the part size.
    [300, 16 * MiB, [300]],
    [6 * MiB, 5 * MiB, [6 * MiB]],
  ])('%d bytes in parts of %d', (total, size, expected) => {
    expect(partSizes(total, size)).toEqual(expected);
  });

  test('parts add up to the chunk, each at least the part size, the last no larger than any other', () => {
    for (const total of [5 * MiB, 31 * MiB + 7, 64 * MiB, 100 * MiB + 1, 512 * MiB - 256 * 1024]) {
      for (const size of [5 * MiB, 16 * MiB, 33 * MiB]) {
        const sizes = partSizes(total, size);
        expect(sizes.reduce((sum, part) => sum + part, 0)).toBe(total);
        if (total >= size) expect(Math.min(...sizes)).toBeGreaterThanOrEqual(size);
        expect(sizes.at(-1)).toBe(Math.min(...sizes));
        expect(sizes).toEqual(partSizes(total, size));
      }
    }
  });
});
