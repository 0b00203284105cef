import type { RgbImage } from '../image';
import type { ShardGeometry } from '../zarr';

/**
 * Pixel kernels between interleaved RGB and chunk-major planar shard buffers (see
 * `ShardGeometry`). They run once per pixel of the slide on the main thread, which is the
 * bottleneck, so each has a word-wise path: four bytes per 32-bit load and store, little-endian
 * (compute/zarr refuses other hosts), with a byte-wise path for unaligned buffers and row ends.
 */

const EVEN_BYTES = 0x00ff00ff;
/** The `+ 2` of rounding half up, in both 16-bit lanes. */
const HALF_UP = 0x00020002;

function words(bytes: Uint8Array): Uint32Array | undefined {
  if (bytes.byteOffset % 4 !== 0 || bytes.byteLength % 4 !== 0) return undefined;
  return new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

/** Copies `rgb` into a uint8 shard buffer with its top-left corner at shard row `top`, column 0. */
export function copyRgbIntoShard(rgb: RgbImage, shard: Uint8Array, g: ShardGeometry, top: number): void {
  const { width, height, data } = rgb;
  const ch = g.chunkHeight;
  const cw = g.chunkWidth;
  const plane = ch * cw;
  // Word-wise needs every row and every chunk row to start on a word.
  const src32 = (width * 3) % 4 === 0 && cw % 4 === 0 ? words(data) : undefined;
  const dst32 = src32 ? words(shard) : undefined;
  for (let y = 0; y < height; y++) {
    const sy = top + y;
    const cy = Math.floor(sy / ch);
    const rowInChunk = (sy - cy * ch) * cw;
    for (let x0 = 0, cx = 0; x0 < width; x0 += cw, cx++) {
      const n = Math.min(cw, width - x0);
      const r = (cy * g.chunksX + cx) * g.chunkLength + rowInChunk;
      const src = (y * width + x0) * 3;
      const done = src32 && dst32 ? copyQuads(src32, src >> 2, dst32, r >> 2, plane >> 2, n >> 2) : 0;
      copyPixels(data, src + done * 3, shard, r + done, plane, n - done);
    }
  }
}

/** Four pixels (three words, RGBR GBRG BRGB) into a word of each plane, `quads` times. */
function copyQuads(
  src: Uint32Array,
  s: number,
  dst: Uint32Array,
  r: number,
  plane: number,
  quads: number,
): number {
  const g = r + plane;
  const b = g + plane;
  for (let i = 0; i < quads; i++, s += 3) {
    const w0 = src[s]!;
    const w1 = src[s + 1]!;
    const w2 = src[s + 2]!;
    dst[r + i] =
      (w0 & 0xff) | ((w0 >>> 24) << 8) | (((w1 >>> 16) & 0xff) << 16) | (((w2 >>> 8) & 0xff) << 24);
    dst[g + i] =
      ((w0 >>> 8) & 0xff) | ((w1 & 0xff) << 8) | ((w1 >>> 24) << 16) | (((w2 >>> 16) & 0xff) << 24);
    dst[b + i] =
      ((w0 >>> 16) & 0xff) | (((w1 >>> 8) & 0xff) << 8) | ((w2 & 0xff) << 16) | ((w2 >>> 24) << 24);
  }
  return quads * 4;
}

function copyPixels(src: Uint8Array, s: number, dst: Uint8Array, r: number, plane: number, n: number): void {
  const g = r + plane;
  const b = g + plane;
  for (let x = 0; x < n; x++, s += 3) {
    dst[r + x] = src[s]!;
    dst[g + x] = src[s + 1]!;
    dst[b + x] = src[s + 2]!;
  }
}

/**
 * Averages each 2x2 block of a child shard (the level below) into one quadrant of its parent,
 * `(y, x)` in {0, 1}. Rounds half up: `(a + b + c + d + 2) >> 2`. Child chunks past
 * `validHeight` x `validWidth` are skipped: they could only make pixels outside the level.
 * Chunk sides must be even so that a child chunk lands inside one parent chunk.
 */
export function downsampleIntoQuadrant(
  child: Uint8Array,
  parent: Uint8Array,
  g: ShardGeometry,
  quadrant: { y: number; x: number; validHeight: number; validWidth: number },
): void {
  const ch = g.chunkHeight;
  const cw = g.chunkWidth;
  const halfH = ch >> 1;
  const halfW = cw >> 1;
  // Word-wise reads 8 bytes of each row for 4 outputs: rows and half rows must hold whole words.
  const src32 = cw % 8 === 0 ? words(child) : undefined;
  const dst32 = src32 ? words(parent) : undefined;
  const top = quadrant.y * g.chunksY * halfH;
  const left = quadrant.x * g.chunksX * halfW;
  for (let ky = 0; ky < g.chunksY && ky * ch < quadrant.validHeight; ky++) {
    for (let kx = 0; kx < g.chunksX && kx * cw < quadrant.validWidth; kx++) {
      const py = top + ky * halfH;
      const px = left + kx * halfW;
      const pcy = Math.floor(py / ch);
      const pcx = Math.floor(px / cw);
      const from = (ky * g.chunksX + kx) * g.chunkLength;
      const to = (pcy * g.chunksX + pcx) * g.chunkLength + (py - pcy * ch) * cw + (px - pcx * cw);
      for (let c = 0; c < g.channels; c++) {
        for (let y = 0; y < halfH; y++) {
          const upper = from + c * ch * cw + 2 * y * cw;
          const out = to + c * ch * cw + y * cw;
          if (src32 && dst32)
            halveRowWords(src32, upper >> 2, (upper + cw) >> 2, dst32, out >> 2, halfW >> 2);
          else halveRow(child, upper, upper + cw, parent, out, halfW);
        }
      }
    }
  }
}

/**
 * Two input words per row hold two 2x2 blocks each. Masking the even and odd bytes into 16-bit
 * lanes and adding all four gives both sums (at most 4 * 255 + 2) in one add chain.
 */
function halveRowWords(
  src: Uint32Array,
  upper: number,
  lower: number,
  dst: Uint32Array,
  out: number,
  count: number,
): void {
  for (let i = 0; i < count; i++, upper += 2, lower += 2) {
    const u0 = src[upper]!;
    const l0 = src[lower]!;
    const u1 = src[upper + 1]!;
    const l1 = src[lower + 1]!;
    const s0 =
      (u0 & EVEN_BYTES) + ((u0 >>> 8) & EVEN_BYTES) + (l0 & EVEN_BYTES) + ((l0 >>> 8) & EVEN_BYTES) + HALF_UP;
    const s1 =
      (u1 & EVEN_BYTES) + ((u1 >>> 8) & EVEN_BYTES) + (l1 & EVEN_BYTES) + ((l1 >>> 8) & EVEN_BYTES) + HALF_UP;
    dst[out + i] =
      ((s0 >>> 2) & 0xff) |
      (((s0 >>> 18) & 0xff) << 8) |
      (((s1 >>> 2) & 0xff) << 16) |
      (((s1 >>> 18) & 0xff) << 24);
  }
}

function halveRow(
  src: Uint8Array,
  upper: number,
  lower: number,
  dst: Uint8Array,
  out: number,
  count: number,
): void {
  for (let i = 0; i < count; i++, upper += 2, lower += 2) {
    dst[out + i] = (src[upper]! + src[upper + 1]! + src[lower]! + src[lower + 1]! + 2) >> 2;
  }
}

/** Interleaves planar `[3, height, width]` pixels into RGB. */
export function planarToRgb(planar: Uint8Array, width: number, height: number): RgbImage {
  const plane = width * height;
  const data = new Uint8Array(plane * 3);
  for (let i = 0, o = 0; i < plane; i++, o += 3) {
    data[o] = planar[i]!;
    data[o + 1] = planar[i + plane]!;
    data[o + 2] = planar[i + 2 * plane]!;
  }
  return { data, width, height };
}
