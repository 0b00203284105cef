/** A histogram of byte codes: `counts[v]` pixels have code `v` (0..255). */
export type Histogram = ArrayLike<number>;

/**
 * Otsu's threshold: the code `t` that maximises the between-class variance of `code < t` and
 * `code >= t`. Undefined when the histogram has too little spread for a split to mean anything
 * (a blank or uniform image, where Otsu would cut its noise in two): the codes between the 1st
 * and the 99th percentile span fewer than `minSpread` codes.
 */
export function otsuThreshold(counts: Histogram, minSpread: number): number | undefined {
  let total = 0;
  for (let v = 0; v < 256; v++) total += counts[v] ?? 0;
  if (total === 0) return undefined;
  const low = percentile(counts, total, 0.01);
  const high = percentile(counts, total, 0.99);
  if (high - low < minSpread) return undefined;
  let sumAll = 0;
  for (let v = 0; v < 256; v++) sumAll += v * (counts[v] ?? 0);
  let below = 0;
  let sumBelow = 0;
  let best = -1;
  let bestFirst = low + 1;
  let bestLast = low + 1;
  for (let t = 1; t < 256; t++) {
    const n = counts[t - 1] ?? 0;
    below += n;
    sumBelow += (t - 1) * n;
    const above = total - below;
    if (below === 0 || above === 0) continue;
    const diff = sumBelow / below - (sumAll - sumBelow) / above;
    const between = below * above * diff * diff;
    if (between > best * (1 + 1e-12)) {
      best = between;
      bestFirst = t;
      bestLast = t;
    } else if (t === bestLast + 1 && between >= best * (1 - 1e-12)) {
      bestLast = t;
    }
  }
  // Two clean modes give a plateau of equally good cuts (every code between them): take its
  // middle, not its first code, which would hug the lower mode.
  return Math.round((bestFirst + bestLast) / 2);
}

/** The smallest code at or below which lies at least `fraction` of the pixels. */
function percentile(counts: Histogram, total: number, fraction: number): number {
  const target = total * fraction;
  let seen = 0;
  for (let v = 0; v < 256; v++) {
    seen += counts[v] ?? 0;
    if (seen >= target && seen > 0) return v;
  }
  return 255;
}
