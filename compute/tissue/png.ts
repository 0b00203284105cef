import sharp from 'sharp';
import type { TissueMask } from './detect';

/**
 * The mask as an 8-bit greyscale PNG of 0 and 255: viewers show it as black and white and any
 * decoder reads it back (libvips writes 1-bit PNGs only through a palette, which reads back RGB).
 */
export async function encodeMaskPng({ mask, width, height }: TissueMask): Promise<Uint8Array> {
  const grey = Buffer.allocUnsafe(mask.length);
  for (let i = 0; i < mask.length; i++) grey[i] = mask[i] === 0 ? 0 : 255;
  const png = await sharp(grey, { raw: { width, height, channels: 1 } })
    .toColourspace('b-w')
    .png({ compressionLevel: 9 })
    .toBuffer();
  return new Uint8Array(png.buffer, png.byteOffset, png.byteLength);
}
