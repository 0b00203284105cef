import {
  type LabelWindow,
  type OutlinePolygon,
  ringArea2,
  simplifyRing,
  traceLabel,
  traceRings,
} from '../../../../compute/segmentation/outlines';

/**
 * The tracer against plain references: the pixels whose centres the polygons hold (even-odd
 * over every ring, point by point) must be exactly the label's pixels; the unsimplified rings'
 * area must be its pixel count; pieces and holes must be as many as a flood fill finds
 * (8-connected label pixels, 4-connected other pixels enclosed).
 */

function windowOf(rows: string[], x = 0, y = 0): LabelWindow {
  const height = rows.length;
  const width = rows[0]!.length;
  const labels = new Uint32Array(width * height);
  rows.forEach((row, r) => {
    for (let c = 0; c < width; c++) labels[r * width + c] = row[c] === '.' ? 0 : Number.parseInt(row[c]!, 36);
  });
  return { labels, x, y, width, height };
}

const wholeBox = (w: LabelWindow) => ({ minX: w.x, minY: w.y, maxX: w.x + w.width, maxY: w.y + w.height });

function evenOdd(rings: Int32Array[], px: number, py: number): boolean {
  let inside = false;
  for (const ring of rings) {
    const n = ring.length;
    for (let i = 0, j = n - 2; i < n; j = i, i += 2) {
      const yi = ring[i + 1]!;
      const yj = ring[j + 1]!;
      if (yi > py !== yj > py && px < ((ring[j]! - ring[i]!) * (py - yi)) / (yj - yi) + ring[i]!) {
        inside = !inside;
      }
    }
  }
  return inside;
}

/** Each pixel centre of the window: inside the polygons (even-odd over all their rings)? */
function rasterise(polygons: OutlinePolygon[], w: LabelWindow): Uint8Array {
  const rings = polygons.flatMap((p) => [p.shell, ...p.holes]);
  const out = new Uint8Array(w.width * w.height);
  for (let y = 0; y < w.height; y++)
    for (let x = 0; x < w.width; x++)
      out[y * w.width + x] = evenOdd(rings, w.x + x + 0.5, w.y + y + 0.5) ? 1 : 0;
  return out;
}

function labelPixels(w: LabelWindow, label: number): Uint8Array {
  return Uint8Array.from(w.labels, (l) => (l === label ? 1 : 0));
}

/** Components of `mask === value` by flood fill, 8- or 4-connected; `border` drops those touching it. */
function componentCount(mask: Uint8Array, width: number, height: number, value: number, eight: boolean) {
  const seen = new Uint8Array(mask.length);
  let count = 0;
  let enclosed = 0;
  for (let s = 0; s < mask.length; s++) {
    if (mask[s] !== value || seen[s]) continue;
    count++;
    let touches = false;
    const stack = [s];
    seen[s] = 1;
    while (stack.length > 0) {
      const i = stack.pop()!;
      const x = i % width;
      const y = Math.floor(i / width);
      if (x === 0 || y === 0 || x === width - 1 || y === height - 1) touches = true;
      for (let dy = -1; dy <= 1; dy++)
        for (let dx = -1; dx <= 1; dx++) {
          if ((dx === 0 && dy === 0) || (!eight && dx !== 0 && dy !== 0)) continue;
          const nx = x + dx;
          const ny = y + dy;
          if (nx < 0 || ny < 0 || nx >= width || ny >= height) continue;
          const j = ny * width + nx;
          if (mask[j] === value && !seen[j]) {
            seen[j] = 1;
            stack.push(j);
          }
        }
    }
    if (!touches) enclosed++;
  }
  return { count, enclosed };
}

/** Every check for every label of `w`. */
function checkWindow(w: LabelWindow): void {
  const labels = new Set(w.labels);
  labels.delete(0);
  for (const label of labels) {
    const mask = labelPixels(w, label);
    const pixels = mask.reduce((a, b) => a + b, 0);
    const rings = traceRings(w, label, wholeBox(w));
    expect(rings.reduce((sum, ring) => sum + ringArea2(ring), 0)).toBe(2 * pixels);
    const polygons = traceLabel(w, label, wholeBox(w));
    expect(rasterise(polygons, w)).toEqual(mask);
    expect(rasterise(traceLabel(w, label, wholeBox(w), 0), w)).toEqual(mask);
    // With a background border, so holes are what no border reaches.
    const pw = w.width + 2;
    const padded = new Uint8Array(pw * (w.height + 2));
    for (let y = 0; y < w.height; y++)
      padded.set(mask.subarray(y * w.width, (y + 1) * w.width), (y + 1) * pw + 1);
    const pieces = componentCount(padded, pw, w.height + 2, 1, true).count;
    const holes = componentCount(padded, pw, w.height + 2, 0, false).enclosed;
    expect(polygons).toHaveLength(pieces);
    expect(polygons.reduce((sum, p) => sum + p.holes.length, 0)).toBe(holes);
    for (const p of polygons) {
      expect(ringArea2(p.shell)).toBeGreaterThan(0);
      for (const hole of p.holes) expect(ringArea2(hole)).toBeLessThan(0);
    }
  }
}

/** A deterministic generator (mulberry32). */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('traceLabel', () => {
  it('outlines a one-pixel cell as its square', () => {
    const w = windowOf(['...', '.1.', '...'], 10, 20);
    expect(traceLabel(w, 1, wholeBox(w))).toEqual([
      { shell: Int32Array.from([11, 21, 12, 21, 12, 22, 11, 22]), holes: [] },
    ]);
    checkWindow(w);
  });

  it('keeps a hole, and a piece of the label inside it', () => {
    const w = windowOf(['11111', '1...1', '1.1.1', '1...1', '11111']);
    const polygons = traceLabel(w, 1, wholeBox(w));
    expect(polygons).toHaveLength(2);
    expect(polygons[0]!.holes).toHaveLength(1);
    expect(polygons[1]!.holes).toHaveLength(0);
    checkWindow(w);
  });

  it('joins pixels that meet at a corner (8-connected), in both diagonals', () => {
    for (const rows of [
      ['1.', '.1'],
      ['.1', '1.'],
      ['1..', '.1.', '..1'],
      ['11.', '1.1', '.11'],
    ]) {
      const w = windowOf(rows);
      expect(traceLabel(w, 1, wholeBox(w))).toHaveLength(1);
      checkWindow(w);
    }
  });

  it('keeps a diagonal gap of the background a separate hole on each side', () => {
    const w = windowOf(['1111', '1.11', '11.1', '1111']);
    expect(traceLabel(w, 1, wholeBox(w))[0]!.holes).toHaveLength(2);
    checkWindow(w);
  });

  it('outlines touching labels each on its own', () => {
    checkWindow(windowOf(['112233', '112233', '445566', '44556.']));
  });

  it('outlines only what lies in the box, in level-0 coordinates', () => {
    const w = windowOf(['1111', '1111'], 100, 200);
    expect(traceLabel(w, 1, { minX: 101, minY: 200, maxX: 103, maxY: 201 })).toEqual([
      { shell: Int32Array.from([101, 200, 103, 200, 103, 201, 101, 201]), holes: [] },
    ]);
    expect(traceLabel(w, 2, wholeBox(w))).toEqual([]);
  });

  it('holds exactly the label pixels of random label images', () => {
    const next = random(7);
    for (let trial = 0; trial < 60; trial++) {
      const width = 3 + Math.floor(next() * 14);
      const height = 3 + Math.floor(next() * 14);
      const labels = new Uint32Array(width * height);
      const fill = next();
      for (let i = 0; i < labels.length; i++) labels[i] = next() < fill ? 1 + Math.floor(next() * 3) : 0;
      checkWindow({ labels, x: Math.floor(next() * 50), y: Math.floor(next() * 50), width, height });
    }
  });

  it('holds exactly the pixels of round cells after simplification, with fewer points', () => {
    const width = 64;
    const labels = new Uint32Array(width * width);
    const discs = [
      [20, 20, 14],
      [44, 40, 17.5],
      [12, 50, 6.3],
    ] as const;
    for (let y = 0; y < width; y++)
      for (let x = 0; x < width; x++)
        discs.forEach(([cx, cy, r], k) => {
          if ((x + 0.5 - cx) ** 2 + (y + 0.5 - cy) ** 2 <= r * r && labels[y * width + x] === 0)
            labels[y * width + x] = k + 1;
        });
    const w = { labels, x: 0, y: 0, width, height: width };
    checkWindow(w);
    const raw = traceRings(w, 2, wholeBox(w))[0]!;
    const simplified = traceLabel(w, 2, wholeBox(w))[0]!.shell;
    expect(simplified.length).toBeLessThan(raw.length);
  });
});

describe('simplifyRing', () => {
  it('drops points closer than the tolerance and keeps the rest', () => {
    const staircase = Int32Array.from([0, 0, 6, 0, 6, 1, 12, 1, 12, 10, 0, 10]);
    expect(Array.from(simplifyRing(staircase, 0.5))).toEqual([0, 0, 12, 1, 12, 10, 0, 10]);
    expect(simplifyRing(staircase, 0.4)).toEqual(staircase);
  });
});
