import path from 'node:path';
import sharp from 'sharp';
import type { RgbImage } from '../../../../compute/image';

/** The annotated MoNuSeg tiles of the shared test data (../shared/data/nuclei/SOURCES.md). */
export const monusegDir = path.join(__dirname, '../../../../../shared/data/nuclei/monuseg');

/** Each tile's scale, from the `MicronsPerPixel` of its XML annotation. */
export const monusegTiles = [
  { name: 'TCGA-2Z-A9J9-01A-01-TS1', mpp: 0.2527 },
  { name: 'TCGA-A6-6782-01A-01-BS1', mpp: 0.2457 },
] as const;

export interface AnnotatedTile {
  image: RgbImage;
  /** Reference instance labels, 0 = background. */
  reference: Uint16Array;
}

/** A tile and its reference labels, cropped to `crop` when given. */
export async function readAnnotatedTile(
  name: string,
  crop?: { left: number; top: number; width: number; height: number },
): Promise<AnnotatedTile> {
  const cut = (s: sharp.Sharp) => (crop ? s.extract(crop) : s);
  const rgb = await cut(sharp(path.join(monusegDir, `${name}.tif`)).removeAlpha())
    .raw()
    .toBuffer({ resolveWithObject: true });
  // grey16 keeps the 16-bit ids; sharp's default would turn the grey PNG into 8-bit sRGB.
  const labels = await cut(sharp(path.join(monusegDir, `${name}_label.png`)).toColourspace('grey16'))
    .raw({ depth: 'ushort' })
    .toBuffer({ resolveWithObject: true });
  return {
    image: { data: new Uint8Array(rgb.data), width: rgb.info.width, height: rgb.info.height },
    reference: new Uint16Array(labels.data.buffer, labels.data.byteOffset, labels.data.length / 2).slice(),
  };
}
