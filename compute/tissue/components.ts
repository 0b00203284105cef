import { type Bits, fillRow, lastWordMask } from './bits';

/**
 * Connected regions as runs (horizontal spans of one value) joined by union-find: one scan of the
 * bytes plus work per run, which at this scale is far less than per pixel.
 */
interface Runs {
  count: number;
  row: Int32Array;
  start: Int32Array;
  /** Exclusive. */
  end: Int32Array;
}

/** Runs of `value` in row order; words that are all one value are taken whole. */
function findRuns(bits: Bits, value: 0 | 1): Runs {
  const { words, stride, width, height } = bits;
  const keep = lastWordMask(width);
  let runs: Runs = emptyRuns(1024);
  const push = (y: number, start: number, end: number) => {
    if (runs.count === runs.row.length) runs = grow(runs, runs.count * 2);
    runs.row[runs.count] = y;
    runs.start[runs.count] = start;
    runs.end[runs.count] = end;
    runs.count++;
  };
  for (let y = 0; y < height; y++) {
    let open = -1;
    for (let w = 0; w < stride; w++) {
      let word = value === 1 ? words[y * stride + w]! : ~words[y * stride + w]! >>> 0;
      // Padding is never part of a run, whichever value is sought.
      if (w === stride - 1) word = (word & keep) >>> 0;
      const x0 = w * 32;
      if (word === 0) {
        if (open >= 0) push(y, open, x0);
        open = -1;
      } else if (word === 0xffffffff) {
        if (open < 0) open = x0;
      } else {
        for (let b = 0; b < 32; b++) {
          const set = (word >>> b) & 1;
          if (set === 1 && open < 0) open = x0 + b;
          else if (set === 0 && open >= 0) {
            push(y, open, x0 + b);
            open = -1;
          }
        }
      }
    }
    if (open >= 0) push(y, open, width);
  }
  return runs;
}

function emptyRuns(capacity: number): Runs {
  return {
    count: 0,
    row: new Int32Array(capacity),
    start: new Int32Array(capacity),
    end: new Int32Array(capacity),
  };
}

function grow(runs: Runs, capacity: number): Runs {
  const copy = (a: Int32Array) => {
    const b = new Int32Array(capacity);
    b.set(a);
    return b;
  };
  return { count: runs.count, row: copy(runs.row), start: copy(runs.start), end: copy(runs.end) };
}

function find(parent: Int32Array, i: number): number {
  let root = i;
  while (parent[root] !== root) root = parent[root]!;
  while (parent[i] !== root) {
    const next = parent[i]!;
    parent[i] = root;
    i = next;
  }
  return root;
}

/**
 * Unites runs of consecutive rows that touch: overlapping columns, or also diagonally when
 * `diagonal`. Runs are sorted by row then column, so one pointer walks the previous row.
 */
function uniteRuns(runs: Runs, diagonal: boolean): Int32Array {
  const parent = Int32Array.from({ length: runs.count }, (_, i) => i);
  const reach = diagonal ? 1 : 0;
  let prevFirst = 0;
  let prevEnd = 0;
  let i = 0;
  while (i < runs.count) {
    const y = runs.row[i]!;
    const first = i;
    const touching = prevEnd > prevFirst && runs.row[prevFirst] === y - 1;
    let k = prevFirst;
    for (; i < runs.count && runs.row[i] === y; i++) {
      if (!touching) continue;
      while (k < prevEnd && runs.end[k]! + reach <= runs.start[i]!) k++;
      for (let j = k; j < prevEnd && runs.start[j]! < runs.end[i]! + reach; j++) union(parent, i, j);
    }
    prevFirst = first;
    prevEnd = i;
  }
  return parent;
}

function union(parent: Int32Array, a: number, b: number): void {
  const ra = find(parent, a);
  const rb = find(parent, b);
  // The smaller index wins, so every root is the first run of its region.
  if (ra !== rb) parent[Math.max(ra, rb)] = Math.min(ra, rb);
}

interface Region {
  /** The value the region's pixels get, from its area and whether it touches the image border. */
  decide: (area: number, touchesBorder: boolean) => 0 | 1;
}

function relabel(image: Bits, value: 0 | 1, diagonal: boolean, { decide }: Region): void {
  const runs = findRuns(image, value);
  const parent = uniteRuns(runs, diagonal);
  const area = new Float64Array(runs.count);
  const border = new Uint8Array(runs.count);
  for (let i = 0; i < runs.count; i++) {
    const root = find(parent, i);
    const y = runs.row[i]!;
    area[root]! += runs.end[i]! - runs.start[i]!;
    if (y === 0 || y === image.height - 1 || runs.start[i] === 0 || runs.end[i] === image.width)
      border[root] = 1;
  }
  for (let i = 0; i < runs.count; i++) {
    const root = find(parent, i);
    const next = decide(area[root]!, border[root] === 1);
    if (next === value) continue;
    fillRow(image, runs.row[i]!, runs.start[i]!, runs.end[i]!, next);
  }
}

/** Drops tissue regions (8-connected) of fewer than `minArea` pixels, in place: dust, debris, stray specks. */
export function removeSmallRegions(image: Bits, minArea: number): void {
  if (minArea <= 1) return;
  relabel(image, 1, true, { decide: (area) => (area < minArea ? 0 : 1) });
}

/**
 * Fills background regions (4-connected, the dual of 8-connected tissue) of at most `maxArea`
 * pixels that do not touch the image border, in place: lumens and tears inside tissue, never the
 * slide background.
 */
export function fillSmallHoles(image: Bits, maxArea: number): void {
  if (maxArea <= 0) return;
  relabel(image, 0, false, { decide: (area, touchesBorder) => (!touchesBorder && area <= maxArea ? 1 : 0) });
}
