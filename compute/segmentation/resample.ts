import type { RgbImage } from '../image';

/**
 * Bilinear resampling between a tile's scale and a model's, pixel centres aligned (a pixel's
 * centre is at `x + 0.5`), edges repeated. Reduction by two averages 2 x 2 blocks exactly;
 * other factors interpolate, which is all a foreground map or an H&E tile needs.
 */

/** Where a pixel of a grid `scale` times as fine falls in the source grid, clamped to it. */
function sourceCoordinate(x: number, scale: number, size: number): number {
  const s = (x + 0.5) / scale - 0.5;
  return Math.min(Math.max(s, 0), size - 1);
}

export interface PlanarInput {
  /** `[3, height, width]` floats, RGB in 0..1. */
  data: Float32Array;
  width: number;
  height: number;
}

/**
 * `tile` at `scale` times its resolution (`width`, `height` the scaled size), as three planes in
 * 0..1, padded by `halo` pixels on every side that repeat the nearest edge pixel.
 */
export function planarInput(
  tile: RgbImage,
  scale: number,
  width: number,
  height: number,
  halo: number,
): PlanarInput {
  const paddedWidth = width + 2 * halo;
  const paddedHeight = height + 2 * halo;
  const plane = paddedWidth * paddedHeight;
  const data = new Float32Array(3 * plane);
  const src = tile.data;
  for (let y = 0; y < paddedHeight; y++) {
    const my = Math.min(Math.max(y - halo, 0), height - 1);
    const sy = sourceCoordinate(my, scale, tile.height);
    const y0 = Math.floor(sy);
    const y1 = Math.min(y0 + 1, tile.height - 1);
    const fy = sy - y0;
    for (let x = 0; x < paddedWidth; x++) {
      const mx = Math.min(Math.max(x - halo, 0), width - 1);
      const sx = sourceCoordinate(mx, scale, tile.width);
      const x0 = Math.floor(sx);
      const x1 = Math.min(x0 + 1, tile.width - 1);
      const fx = sx - x0;
      const a = (y0 * tile.width + x0) * 3;
      const b = (y0 * tile.width + x1) * 3;
      const c = (y1 * tile.width + x0) * 3;
      const d = (y1 * tile.width + x1) * 3;
      const at = y * paddedWidth + x;
      for (let ch = 0; ch < 3; ch++) {
        const top = src[a + ch]! + (src[b + ch]! - src[a + ch]!) * fx;
        const bottom = src[c + ch]! + (src[d + ch]! - src[c + ch]!) * fx;
        data[ch * plane + at] = (top + (bottom - top) * fy) / 255;
      }
    }
  }
  return { data, width: paddedWidth, height: paddedHeight };
}

/** A float plane of `width` x `height` resampled to `toWidth` x `toHeight`. */
export function resamplePlane(
  src: Float32Array,
  width: number,
  height: number,
  toWidth: number,
  toHeight: number,
): Float32Array {
  if (width === toWidth && height === toHeight) return src;
  const out = new Float32Array(toWidth * toHeight);
  const scaleX = toWidth / width;
  const scaleY = toHeight / height;
  for (let y = 0; y < toHeight; y++) {
    const sy = sourceCoordinate(y, scaleY, height);
    const y0 = Math.floor(sy);
    const y1 = Math.min(y0 + 1, height - 1);
    const fy = sy - y0;
    for (let x = 0; x < toWidth; x++) {
      const sx = sourceCoordinate(x, scaleX, width);
      const x0 = Math.floor(sx);
      const x1 = Math.min(x0 + 1, width - 1);
      const fx = sx - x0;
      const top = src[y0 * width + x0]! + (src[y0 * width + x1]! - src[y0 * width + x0]!) * fx;
      const bottom = src[y1 * width + x0]! + (src[y1 * width + x1]! - src[y1 * width + x0]!) * fx;
      out[y * toWidth + x] = top + (bottom - top) * fy;
    }
  }
  return out;
}
