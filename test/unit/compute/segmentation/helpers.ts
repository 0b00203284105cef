import type { RgbImage, SlideImage } from '../../../../compute/image';
import type { LabelImage, Segmenter } from '../../../../compute/segmentation/types';

/** A one-level slide held in memory. */
export function memorySlide(image: RgbImage): SlideImage {
  const { width, height } = image;
  return {
    widthPx: width,
    heightPx: height,
    levels: [{ widthPx: width, heightPx: height, downsample: 1 }],
    async readRegion(region) {
      if (
        region.level !== 0 ||
        region.x < 0 ||
        region.y < 0 ||
        region.x + region.width > width ||
        region.y + region.height > height
      ) {
        throw new RangeError(`region ${JSON.stringify(region)} outside ${width} x ${height}`);
      }
      const data = new Uint8Array(region.width * region.height * 3);
      for (let y = 0; y < region.height; y++) {
        const from = ((region.y + y) * width + region.x) * 3;
        data.set(image.data.subarray(from, from + region.width * 3), y * region.width * 3);
      }
      return { data, width: region.width, height: region.height };
    },
  };
}

/** A `region` of `image` as an image of its own. */
export function crop(image: RgbImage, x: number, y: number, width: number, height: number): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let row = 0; row < height; row++) {
    const from = ((y + row) * image.width + x) * 3;
    data.set(image.data.subarray(from, from + width * 3), row * width * 3);
  }
  return { data, width, height };
}

/** 4-connected components of `mask`, labelled 1..count in raster order of their first pixel. */
export function components(mask: Uint8Array, width: number, height: number): LabelImage {
  const labels = new Uint32Array(width * height);
  let count = 0;
  const stack: number[] = [];
  for (let start = 0; start < mask.length; start++) {
    if (mask[start] !== 1 || labels[start] !== 0) continue;
    labels[start] = ++count;
    stack.push(start);
    while (stack.length > 0) {
      const i = stack.pop()!;
      const x = i % width;
      const neighbours = [x > 0 ? i - 1 : -1, x < width - 1 ? i + 1 : -1, i - width, i + width];
      for (const j of neighbours) {
        if (j >= 0 && j < mask.length && mask[j] === 1 && labels[j] === 0) {
          labels[j] = count;
          stack.push(j);
        }
      }
    }
  }
  return { labels, width, height, count };
}

/** Nuclei are the dark connected blobs; each cell is its nucleus (a stand-in for the real one). */
export const darkBlobSegmenter: Segmenter = {
  name: 'dark-blobs',
  version: 'test',
  parameters: {},
  async segment(tile) {
    const mask = new Uint8Array(tile.width * tile.height);
    for (let i = 0; i < mask.length; i++) {
      mask[i] = tile.data[3 * i]! + tile.data[3 * i + 1]! + tile.data[3 * i + 2]! < 300 ? 1 : 0;
    }
    const nuclei = components(mask, tile.width, tile.height);
    return { nuclei, cells: { ...nuclei, labels: nuclei.labels.slice() } };
  },
};

/** A white image with dark discs (centres and radii given), pinkish where nothing is. */
export function discImage(
  width: number,
  height: number,
  discs: Array<{ x: number; y: number; r: number }>,
): RgbImage {
  const data = new Uint8Array(width * height * 3).fill(235);
  for (const { x: cx, y: cy, r } of discs) {
    for (let y = Math.max(0, Math.floor(cy - r)); y <= Math.min(height - 1, Math.ceil(cy + r)); y++) {
      for (let x = Math.max(0, Math.floor(cx - r)); x <= Math.min(width - 1, Math.ceil(cx + r)); x++) {
        if ((x - cx) ** 2 + (y - cy) ** 2 <= r * r) data.set([60, 40, 120], (y * width + x) * 3);
      }
    }
  }
  return { data, width, height };
}
