import { ComputeError } from '../errors';
import type { RgbImage } from '../image';

/**
 * Uncompressed samples: a zero-copy view when they are already RGB. Writers may pad a tile's
 * bytes past its size, so only a short tile is an error.
 */
export function decodeRaw(
  bytes: Uint8Array,
  width: number,
  height: number,
  samplesPerPixel: 1 | 3,
): RgbImage {
  const expected = width * height * samplesPerPixel;
  if (bytes.byteLength < expected) {
    throw new ComputeError(
      'CorruptTile',
      `an uncompressed tile has ${bytes.byteLength} bytes, ${width} x ${height} x ${samplesPerPixel} needs ${expected}`,
    );
  }
  const samples = bytes.subarray(0, expected);
  return samplesPerPixel === 3 ? { data: samples, width, height } : expandGrey(samples, width, height);
}

/** Grey to RGB by repeating each sample: rare in slides, so a plain loop is fast enough. */
export function expandGrey(grey: Uint8Array, width: number, height: number): RgbImage {
  const pixels = width * height;
  const data = new Uint8Array(pixels * 3);
  for (let i = 0, o = 0; i < pixels; i++, o += 3) {
    const v = grey[i] ?? 0;
    data[o] = v;
    data[o + 1] = v;
    data[o + 2] = v;
  }
  return { data, width, height };
}
