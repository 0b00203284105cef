/**
 * Writes a safe integer's decimal digits (and sign) into `buffer` at `at`, without a string;
 * returns the index after them. The outline writers print millions of coordinates this way.
 */
export function writeDecimal(buffer: Uint8Array, at: number, value: number): number {
  let n = value;
  let i = at;
  if (n < 0) {
    buffer[i++] = 0x2d;
    n = -n;
  }
  let digits = 1;
  for (let t = n; t >= 10; t = Math.floor(t / 10)) digits++;
  for (let d = digits - 1; d >= 0; d--) {
    buffer[i + d] = 0x30 + (n % 10);
    n = Math.floor(n / 10);
  }
  return i + digits;
}
