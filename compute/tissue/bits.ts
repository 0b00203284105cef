/**
 * A binary image packed 32 pixels to a word: morphology and region labelling then work a word at
 * a time, which is what keeps a 4000 x 4000 mask well under a second.
 * Bit `x & 31` of word `x >> 5` of a row is pixel x; bits past the width are always 0.
 */
export interface Bits {
  words: Uint32Array;
  /** Words per row. */
  stride: number;
  width: number;
  height: number;
}

export function emptyBits(width: number, height: number): Bits {
  const stride = (width + 31) >>> 5;
  return { words: new Uint32Array(stride * height), stride, width, height };
}

/** Packs the pixels for which `isSet(i)` holds, `i` being the row-major pixel index. */
export function packBits(width: number, height: number, isSet: (i: number) => boolean): Bits {
  const bits = emptyBits(width, height);
  const { words, stride } = bits;
  for (let y = 0; y < height; y++) {
    for (let w = 0; w < stride; w++) {
      const first = y * width + w * 32;
      const n = w === stride - 1 ? width - w * 32 : 32;
      let word = 0;
      for (let b = 0; b < n; b++) if (isSet(first + b)) word |= 1 << b;
      words[y * stride + w] = word;
    }
  }
  return bits;
}

/** One byte per pixel, 0 or 1. */
export function unpackBits({ words, stride, width, height }: Bits): Uint8Array {
  const mask = new Uint8Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let w = 0; w < stride; w++) {
      const word = words[y * stride + w]!;
      if (word === 0) continue;
      const first = y * width + w * 32;
      const n = w === stride - 1 ? width - w * 32 : 32;
      for (let b = 0; b < n; b++) mask[first + b] = (word >>> b) & 1;
    }
  }
  return mask;
}

/** The mask of the bits of a row's last word that are pixels (all of them when the width is a multiple of 32). */
export function lastWordMask(width: number): number {
  const used = width & 31;
  return used === 0 ? 0xffffffff : (1 << used) - 1;
}

export function clearPadding(bits: Bits): void {
  const keep = lastWordMask(bits.width);
  if (keep === 0xffffffff) return;
  for (let y = 0; y < bits.height; y++) bits.words[y * bits.stride + bits.stride - 1]! &= keep;
}

/** Sets pixels `[start, end)` of row `y` to `value`. */
export function fillRow({ words, stride }: Bits, y: number, start: number, end: number, value: 0 | 1): void {
  for (let x = start; x < end; ) {
    const w = x >>> 5;
    const from = x & 31;
    const to = Math.min(32, end - w * 32);
    // Bits from..to-1 of the word; a shift by 32 is a shift by 0 in JavaScript, hence the full case.
    const span = to - from === 32 ? 0xffffffff : ((1 << (to - from)) - 1) << from;
    const at = y * stride + w;
    words[at] = value === 1 ? words[at]! | span : words[at]! & ~span;
    x = w * 32 + to;
  }
}

export function countSet({ words }: Bits): number {
  let n = 0;
  for (let i = 0; i < words.length; i++) {
    // Population count (Hacker's Delight 5-2).
    let v = words[i]!;
    v -= (v >>> 1) & 0x55555555;
    v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
    n += (((v + (v >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
  }
  return n;
}
