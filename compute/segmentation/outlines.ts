/**
 * Cell outlines from a uint32 label raster: per label, the polygons of its pixels with their
 * holes, along pixel edges (so the unsimplified polygon covers exactly the label's pixels), the
 * label's pixels 8-connected (two pixels that meet at a corner are one piece), then simplified
 * by Douglas-Peucker within less than half a pixel. Half a pixel is the distance from a pixel's
 * centre to its edges, so the simplified polygon still holds exactly the label's pixel centres.
 */

/** A window of a label image: row-major labels, placed at `(x, y)` of level 0. */
export interface LabelWindow {
  labels: Uint32Array;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A level-0 box; `max` exclusive. */
export interface PixelBox {
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
}

/**
 * Closed rings as flat `x0, y0, x1, y1, ...` (the first point is not repeated), level-0 pixel
 * corners. The shell's shoelace area is positive in image coordinates (x right, y down), holes'
 * negative, as RFC 7946's right-hand rule reads them with y up.
 */
export interface OutlinePolygon {
  shell: Int32Array;
  holes: Int32Array[];
}

/** Douglas-Peucker tolerance: points closer than this to the simplified edge are dropped. */
export const SIMPLIFY_TOLERANCE_PX = 0.5;

// Directions of travel along pixel edges: east, south, west, north (y down).
const DX = [1, 0, -1, 0] as const;
const DY = [0, 1, 0, -1] as const;

/**
 * The outline of `label` within `box` of `window` (the box must hold every pixel of the label
 * that is to be outlined; pixels of it outside the box are ignored). One polygon per 8-connected
 * piece, largest first; empty when the box holds none of the label.
 */
export function traceLabel(
  window: LabelWindow,
  label: number,
  box: PixelBox,
  tolerance = SIMPLIFY_TOLERANCE_PX,
): OutlinePolygon[] {
  const rings = traceRings(window, label, box);
  // Most cells are one piece without holes: one ring, nothing to assemble.
  if (rings.length === 1) return [{ shell: simplifyRing(rings[0]!, tolerance), holes: [] }];
  const polygons = assembleRings(rings);
  return polygons.map((polygon) => ({
    shell: simplifyRing(polygon.shell, tolerance),
    holes: polygon.holes.map((hole) => simplifyRing(hole, tolerance)),
  }));
}

/**
 * Every boundary ring of the label, unsimplified, with only the corners where the direction
 * turns. Each pixel contributes its edges that face another label, directed so that the pixel
 * lies to the right of travel (y down); at a corner where two of its pixels meet diagonally the
 * ring turns to the other pixel, which joins them (8-connectivity).
 */
export function traceRings(window: LabelWindow, label: number, box: PixelBox): Int32Array[] {
  const x0 = Math.max(box.minX, window.x);
  const y0 = Math.max(box.minY, window.y);
  const x1 = Math.min(box.maxX, window.x + window.width);
  const y1 = Math.min(box.maxY, window.y + window.height);
  if (x1 <= x0 || y1 <= y0) return [];
  const w = x1 - x0;
  const h = y1 - y0;
  // The box with a background border, so every edge test stays inside.
  const pw = w + 2;
  const inside = scratch.inside(pw * (h + 2));
  for (let y = 0; y < h; y++) {
    const from = (y0 + y - window.y) * window.width + (x0 - window.x);
    const to = (y + 1) * pw + 1;
    for (let x = 0; x < w; x++) if (window.labels[from + x] === label) inside[to + x] = 1;
  }
  // Outgoing boundary edges per corner (bit d: direction d), corners of the bordered box.
  const vw = pw + 1;
  const out = scratch.out(vw * (h + 3));
  let edges = 0;
  for (let y = 1; y <= h; y++) {
    for (let x = 1; x <= w; x++) {
      const i = y * pw + x;
      if (inside[i] === 0) continue;
      if (inside[i - pw] === 0) edges += mark(out, y * vw + x, 1);
      if (inside[i + 1] === 0) edges += mark(out, y * vw + x + 1, 2);
      if (inside[i + pw] === 0) edges += mark(out, (y + 1) * vw + x + 1, 4);
      if (inside[i - 1] === 0) edges += mark(out, (y + 1) * vw + x, 8);
    }
  }
  const rings: Int32Array[] = [];
  const ox = x0 - 1;
  const oy = y0 - 1;
  for (let start = 0; edges > 0 && start < out.length; start++) {
    while (out[start] !== 0) {
      let points = scratch.points;
      let n = 0;
      const first = 31 - Math.clz32(out[start]!);
      let v = start;
      let d = first;
      let previous = -1;
      for (;;) {
        if (d !== previous) {
          if (n + 2 > points.length) points = scratch.growPoints();
          points[n++] = (v % vw) + ox;
          points[n++] = Math.floor(v / vw) + oy;
        }
        out[v]! &= ~(1 << d);
        edges--;
        v += DX[d]! + DY[d]! * vw;
        previous = d;
        const bits = out[v]!;
        // Where two pixels of the label meet at a corner there are two ways on: turn left,
        // into the other pixel. Back at the start with no such turn, the ring is closed.
        const left = (previous + 3) & 3;
        if (bits & (1 << left)) d = left;
        else if (v === start) break;
        else d = 31 - Math.clz32(bits);
      }
      // The last edge may run straight on through the start corner: then it is no corner.
      rings.push(points.slice(previous === first ? 2 : 0, n));
    }
  }
  return rings;
}

/** Twice the signed (shoelace) area of a flat ring. */
export function ringArea2(ring: Int32Array): number {
  let sum = 0;
  const n = ring.length;
  for (let i = 0; i < n; i += 2) {
    const j = (i + 2) % n;
    sum += ring[i]! * ring[j + 1]! - ring[j]! * ring[i + 1]!;
  }
  return sum;
}

/** Even-odd test of a point against one ring. */
function inRing(ring: Int32Array, x: number, y: number): boolean {
  let inside = false;
  const n = ring.length;
  for (let i = 0, j = n - 2; i < n; j = i, i += 2) {
    const yi = ring[i + 1]!;
    const yj = ring[j + 1]!;
    if (yi > y !== yj > y && x < ((ring[j]! - ring[i]!) * (y - yi)) / (yj - yi) + ring[i]!) inside = !inside;
  }
  return inside;
}

/**
 * Shells (positive area) with the holes (negative) inside them, largest shell first. A hole
 * goes to the smallest shell around the pixel just inside it (a piece of the label may sit in
 * another piece's hole).
 */
function assembleRings(rings: Int32Array[]): { shell: Int32Array; holes: Int32Array[] }[] {
  const polygons = rings
    .filter((ring) => ringArea2(ring) > 0)
    .map((shell) => ({ shell, area: ringArea2(shell), holes: [] as Int32Array[] }))
    .sort((a, b) => b.area - a.area);
  for (const hole of rings) {
    if (ringArea2(hole) >= 0) continue;
    let owner = polygons[0]!;
    if (polygons.length > 1) {
      // The centre of the pixel left of the hole's first edge: outside the label, inside the hole.
      const dx = Math.sign(hole[2]! - hole[0]!);
      const dy = Math.sign(hole[3]! - hole[1]!);
      const px = hole[0]! + 0.5 * dx + 0.5 * dy;
      const py = hole[1]! + 0.5 * dy - 0.5 * dx;
      for (let i = polygons.length - 1; i >= 0; i--) {
        if (inRing(polygons[i]!.shell, px, py)) {
          owner = polygons[i]!;
          break;
        }
      }
    }
    owner.holes.push(hole);
  }
  return polygons.map(({ shell, holes }) => ({ shell, holes }));
}

/**
 * Douglas-Peucker on a closed ring: split at the point farthest from the first, then each half
 * keeps the points at `tolerance` or more from the segment that would replace them.
 */
export function simplifyRing(ring: Int32Array, tolerance = SIMPLIFY_TOLERANCE_PX): Int32Array {
  const n = ring.length / 2;
  if (n <= 4) return ring;
  let far = 0;
  let farDistance = -1;
  for (let i = 1; i < n; i++) {
    const d = (ring[2 * i]! - ring[0]!) ** 2 + (ring[2 * i + 1]! - ring[1]!) ** 2;
    if (d > farDistance) {
      farDistance = d;
      far = i;
    }
  }
  const keep = scratch.keep(n);
  const tolerance2 = tolerance * tolerance;
  keep[0] = 1;
  keep[far] = 1;
  const stack = scratch.stack;
  stack.length = 0;
  stack.push(0, far, far, n);
  while (stack.length > 0) {
    const b = stack.pop()!;
    const a = stack.pop()!;
    const ax = ring[2 * a]!;
    const ay = ring[2 * a + 1]!;
    const bx = ring[(2 * b) % ring.length]!;
    const by = ring[((2 * b) % ring.length) + 1]!;
    let worst = -1;
    let worstDistance = -1;
    for (let i = a + 1; i < b; i++) {
      const d = segmentDistance2(ring[2 * i]!, ring[2 * i + 1]!, ax, ay, bx, by);
      if (d > worstDistance) {
        worstDistance = d;
        worst = i;
      }
    }
    if (worst >= 0 && worstDistance >= tolerance2) {
      keep[worst] = 1;
      stack.push(a, worst, worst, b);
    }
  }
  let kept = 0;
  for (let i = 0; i < n; i++) kept += keep[i]!;
  if (kept < 3) return ring;
  const out = new Int32Array(kept * 2);
  for (let i = 0, o = 0; i < n; i++) {
    if (keep[i] === 0) continue;
    out[o++] = ring[2 * i]!;
    out[o++] = ring[2 * i + 1]!;
  }
  return out;
}

/** Squared distance from a point to a segment. */
function segmentDistance2(px: number, py: number, ax: number, ay: number, bx: number, by: number): number {
  const vx = bx - ax;
  const vy = by - ay;
  const length2 = vx * vx + vy * vy;
  const t = length2 === 0 ? 0 : Math.max(0, Math.min(1, ((px - ax) * vx + (py - ay) * vy) / length2));
  return (px - ax - t * vx) ** 2 + (py - ay - t * vy) ** 2;
}

/**
 * Zeroed scratch rasters reused from cell to cell (a layer has millions of small cells: fresh
 * arrays for each would be most of the work, for the garbage collector).
 */
const scratch = {
  insideBuffer: new Uint8Array(4096),
  outBuffer: new Uint8Array(4096),
  inside(length: number): Uint8Array {
    if (this.insideBuffer.length < length) this.insideBuffer = new Uint8Array(length * 2);
    return this.insideBuffer.fill(0, 0, length).subarray(0, length);
  },
  /** One ring's corners as they are traced. */
  points: new Int32Array(1024) as Int32Array,
  growPoints(): Int32Array {
    const grown = new Int32Array(this.points.length * 2);
    grown.set(this.points);
    this.points = grown;
    return grown;
  },
  keepBuffer: new Uint8Array(1024),
  stack: [] as number[],
  keep(length: number): Uint8Array {
    if (this.keepBuffer.length < length) this.keepBuffer = new Uint8Array(length * 2);
    return this.keepBuffer.fill(0, 0, length).subarray(0, length);
  },
  out(length: number): Uint8Array {
    if (this.outBuffer.length < length) this.outBuffer = new Uint8Array(length * 2);
    return this.outBuffer.fill(0, 0, length).subarray(0, length);
  },
};

/** Sets direction bit `bit` of corner `v`; one edge more. */
function mark(out: Uint8Array, v: number, bit: number): number {
  out[v]! |= bit;
  return 1;
}
