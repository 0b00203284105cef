import { type Bits, clearPadding } from './bits';

/**
 * Binary morphology with a digital disk (offsets with dx² + dy² <= r²). A disk row of half-width
 * w is 2w + 1 shifted ORs per word of a packed row.
 */

/** Closing then opening: gaps narrower than the closing disk are bridged, then specks thinner than the opening disk go. */
export function closeThenOpen(bits: Bits, closeRadius: number, openRadius: number): Bits {
  const closed = erode(dilate(bits, closeRadius), closeRadius);
  return dilate(erode(closed, openRadius), openRadius);
}

function diskHalfWidths(radius: number): number[] {
  return Array.from({ length: 2 * radius + 1 }, (_, i) => {
    const dy = i - radius;
    return Math.floor(Math.sqrt(radius * radius - dy * dy));
  });
}

/**
 * Dilation; pixels outside the image are background. Every row is first dilated horizontally by
 * each half-width the disk needs (each from the previous: two shifts more), then each output row
 * ORs the 2r + 1 rows around it, each dilated by its disk row's half-width.
 */
function dilate(bits: Bits, radius: number): Bits {
  if (radius <= 0) return bits;
  const { words, stride, height } = bits;
  const widened: Uint32Array[] = [words];
  for (let half = 1; half <= radius; half++) {
    const next = widened[half - 1]!.slice();
    for (let at = 0; at < words.length; at += stride) {
      orShifted(next, words, at, stride, half);
      orShifted(next, words, at, stride, -half);
    }
    widened.push(next);
  }
  const halves = diskHalfWidths(radius);
  const out: Bits = { ...bits, words: new Uint32Array(words.length) };
  for (let y = 0; y < height; y++) {
    const to = y * stride;
    for (let dy = -radius; dy <= radius; dy++) {
      const from = y + dy;
      if (from < 0 || from >= height) continue;
      const src = widened[halves[dy + radius]!]!;
      const at = from * stride;
      for (let i = 0; i < stride; i++) out.words[to + i]! |= src[at + i]!;
    }
  }
  clearPadding(out);
  return out;
}

/**
 * Erosion; pixels outside the image count as foreground, so tissue cut by the image edge is not
 * eaten from that side (and a closing never removes what it was given).
 */
function erode(bits: Bits, radius: number): Bits {
  if (radius <= 0) return bits;
  return complement(dilate(complement(bits), radius));
}

function complement(bits: Bits): Bits {
  const out: Bits = { ...bits, words: new Uint32Array(bits.words.length) };
  for (let i = 0; i < out.words.length; i++) out.words[i] = ~bits.words[i]!;
  clearPadding(out);
  return out;
}

/**
 * ORs the row of `n` words at `at` of `src` into the same row of `dst`, moved `shift` pixels
 * towards higher x (lower x when negative). Bits moved past either end are lost.
 */
function orShifted(dst: Uint32Array, src: Uint32Array, at: number, n: number, shift: number): void {
  const k = Math.abs(shift);
  const q = k >>> 5;
  const s = k & 31;
  if (q >= n) return;
  if (shift > 0) {
    if (s === 0) {
      for (let i = q; i < n; i++) dst[at + i]! |= src[at + i - q]!;
      return;
    }
    dst[at + q]! |= src[at]! << s;
    for (let i = q + 1; i < n; i++)
      dst[at + i]! |= (src[at + i - q]! << s) | (src[at + i - q - 1]! >>> (32 - s));
    return;
  }
  if (s === 0) {
    for (let i = 0; i < n - q; i++) dst[at + i]! |= src[at + i + q]!;
    return;
  }
  for (let i = 0; i < n - q - 1; i++)
    dst[at + i]! |= (src[at + i + q]! >>> s) | (src[at + i + q + 1]! << (32 - s));
  dst[at + n - q - 1]! |= src[at + n - 1]! >>> s;
}
