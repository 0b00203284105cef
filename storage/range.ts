import type { RangeQuery } from './types';

const isByteCount = (n: number) => Number.isSafeInteger(n) && n > 0;

/** A malformed range is a programming error; both backends refuse it the same way. */
export function checkRange(range: RangeQuery): void {
  const valid =
    'suffixLength' in range
      ? isByteCount(range.suffixLength)
      : Number.isSafeInteger(range.offset) && range.offset >= 0 && isByteCount(range.length);
  if (!valid) throw new RangeError(`invalid byte range ${JSON.stringify(range)}`);
}

/**
 * The bytes `[start, end)` that a checked `range` covers in an object of `size` bytes, clamped
 * to the object as S3 clamps them; a range that starts past the end covers nothing.
 */
export function clampRange(range: RangeQuery, size: number): { start: number; end: number } {
  if ('suffixLength' in range) return { start: Math.max(0, size - range.suffixLength), end: size };
  return { start: Math.min(range.offset, size), end: Math.min(size, range.offset + range.length) };
}

export function rangeHeader(range: RangeQuery): string {
  checkRange(range);
  return 'suffixLength' in range
    ? `bytes=-${range.suffixLength}`
    : `bytes=${range.offset}-${range.offset + range.length - 1}`;
}
