import type { LabelImage } from './types';

/**
 * Operations on label images: giving unseeded foreground a label, measuring regions, dropping
 * some and renumbering the rest 1..count.
 */

/**
 * Gives every 4-connected component of foreground that flooding left unlabelled (it held no
 * seed: too thin for a distance peak) a new label, in place. Returns the new highest label.
 */
export function labelUnseeded(labels: Uint32Array, mask: Uint8Array, width: number, highest: number): number {
  const n = labels.length;
  const stack = new Int32Array(n);
  let next = highest;
  for (let start = 0; start < n; start++) {
    if (mask[start] === 0 || labels[start] !== 0) continue;
    const label = ++next;
    labels[start] = label;
    let top = 0;
    stack[top++] = start;
    while (top > 0) {
      const p = stack[--top]!;
      const x = p % width;
      if (x > 0 && mask[p - 1] !== 0 && labels[p - 1] === 0) {
        labels[p - 1] = label;
        stack[top++] = p - 1;
      }
      if (x < width - 1 && mask[p + 1] !== 0 && labels[p + 1] === 0) {
        labels[p + 1] = label;
        stack[top++] = p + 1;
      }
      if (p >= width && mask[p - width] !== 0 && labels[p - width] === 0) {
        labels[p - width] = label;
        stack[top++] = p - width;
      }
      if (p + width < n && mask[p + width] !== 0 && labels[p + width] === 0) {
        labels[p + width] = label;
        stack[top++] = p + width;
      }
    }
  }
  return next;
}

/** Per-label measurements, indexed by label (index 0 unused). */
export interface RegionStats {
  area: Float64Array;
  /** Area over the area of the convex hull of its pixels (as unit squares): 1 for a convex region. */
  solidity: Float64Array;
}

export function regionStats(labels: Uint32Array, width: number, highest: number): RegionStats {
  const area = new Float64Array(highest + 1);
  const top = new Int32Array(highest + 1).fill(-1);
  const bottom = new Int32Array(highest + 1);
  for (let i = 0; i < labels.length; i++) {
    const l = labels[i]!;
    if (l === 0) continue;
    const y = (i / width) | 0;
    area[l]!++;
    if (top[l] === -1) top[l] = y;
    bottom[l] = y;
  }
  const rows = rowExtents(labels, width, top, bottom);
  const solidity = new Float64Array(highest + 1);
  for (let l = 1; l <= highest; l++) {
    if (area[l] === 0) continue;
    solidity[l] = area[l]! / hullArea(rows, l, top[l]!);
  }
  return { area, solidity };
}

/** For each label and each row of its bounding box, the leftmost pixel and one past the rightmost (CSR by label). */
interface RowExtents {
  offset: Int32Array;
  left: Int32Array;
  right: Int32Array;
}

function rowExtents(labels: Uint32Array, width: number, top: Int32Array, bottom: Int32Array): RowExtents {
  const offset = new Int32Array(top.length + 1);
  for (let l = 1; l < top.length; l++)
    offset[l + 1] = offset[l]! + (top[l]! < 0 ? 0 : bottom[l]! - top[l]! + 1);
  const total = offset[top.length]!;
  const left = new Int32Array(total).fill(width);
  const right = new Int32Array(total).fill(-1);
  for (let i = 0; i < labels.length; i++) {
    const l = labels[i]!;
    if (l === 0) continue;
    const y = (i / width) | 0;
    const x = i - y * width;
    const r = offset[l]! + y - top[l]!;
    if (x < left[r]!) left[r] = x;
    if (x + 1 > right[r]!) right[r] = x + 1;
  }
  return { offset, left, right };
}

/**
 * Area of the convex hull of a region's pixel squares: Andrew's monotone chain over the corners
 * of each row's leftmost and rightmost pixels, which are already in (y, x) order row by row.
 */
function hullArea({ offset, left, right }: RowExtents, label: number, top: number): number {
  const xs: number[] = [];
  const ys: number[] = [];
  for (let r = offset[label]!; r < offset[label + 1]!; r++) {
    if (right[r]! < 0) continue;
    const y = top + r - offset[label]!;
    xs.push(left[r]!, right[r]!, left[r]!, right[r]!);
    ys.push(y, y, y + 1, y + 1);
  }
  const order = xs.map((_, i) => i).sort((a, b) => ys[a]! - ys[b]! || xs[a]! - xs[b]!);
  const hull: number[] = [];
  const turn = (o: number, a: number, b: number) =>
    (xs[a]! - xs[o]!) * (ys[b]! - ys[o]!) - (ys[a]! - ys[o]!) * (xs[b]! - xs[o]!);
  for (const pass of [order, [...order].reverse()]) {
    const start = hull.length;
    for (const p of pass) {
      while (hull.length >= start + 2 && turn(hull[hull.length - 2]!, hull[hull.length - 1]!, p) <= 0)
        hull.pop();
      hull.push(p);
    }
    hull.pop();
  }
  let twice = 0;
  for (let k = 0; k < hull.length; k++) {
    const a = hull[k]!;
    const b = hull[(k + 1) % hull.length]!;
    twice += xs[a]! * ys[b]! - xs[b]! * ys[a]!;
  }
  return Math.abs(twice) / 2;
}

/**
 * Keeps the labels for which `keep[label]` is 1 and renumbers them 1..count in the raster order
 * of their first pixel, so the same image always gets the same numbers.
 */
export function keepAndRenumber(
  labels: Uint32Array,
  width: number,
  height: number,
  keep: Uint8Array,
): LabelImage {
  const renumbered = new Uint32Array(keep.length);
  const out = new Uint32Array(labels.length);
  let count = 0;
  for (let i = 0; i < labels.length; i++) {
    const l = labels[i]!;
    if (l === 0 || keep[l] === 0) continue;
    if (renumbered[l] === 0) renumbered[l] = ++count;
    out[i] = renumbered[l]!;
  }
  return { labels: out, width, height, count };
}
