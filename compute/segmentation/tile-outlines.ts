import { writeDecimal } from './decimal';
import { type OutlinePolygon, traceLabel } from './outlines';

/**
 * One tile's cells traced and encoded, the part of the outline writers that is independent
 * from tile to tile (so it can run on worker threads): each cell's outline and nucleus as WKB,
 * and as the GeoJSON text that sits between a feature's `"type":"` and its properties. Every
 * result is a few flat buffers (cheap to transfer between threads, little for the garbage
 * collector) with each cell's end offset.
 */

/** What tracing one tile needs: the mask under its cells, their boxes and nuclei. */
export interface TileOutlineJob {
  /** The mask's level-0 labels over the window, row-major. */
  labels: Uint32Array;
  x: number;
  y: number;
  width: number;
  height: number;
  /** The label of the tile's first cell; the others follow in order. */
  firstLabel: number;
  /** Each cell's box, `minX, minY, maxX, maxY` (max exclusive). */
  boxes: Int32Array;
  /** Each cell's nucleus as row runs `y, x0, x1` (cell `k`'s from `runStart[k]` to `runStart[k + 1]`). */
  nuclei?: { runStart: Uint32Array; runs: Uint32Array };
}

/** Geometry types seen, as bits. */
export const POLYGON_BIT = 1;
export const MULTIPOLYGON_BIT = 2;

export interface TileOutlines {
  count: number;
  /** Each cell's outline as WKB, cell `k`'s ending at `wkbEnd[k]`. */
  wkb: Uint8Array;
  wkbEnd: Uint32Array;
  nucleusWkb: Uint8Array;
  nucleusWkbEnd: Uint32Array;
  /** Each traced cell's GeoJSON geometry members (empty for a cell with no outline). */
  json: Uint8Array;
  jsonEnd: Uint32Array;
  /** 1 where the cell has an outline (pixels left in the mask). */
  traced: Uint8Array;
  /** Bounding box of every outline's shells: min x, min y, max x, max y (infinite if none). */
  bbox: Float64Array;
  /** Geometry types of the outlines and of the nuclei (bits). */
  types: number;
  nucleusTypes: number;
}

const encoder = new TextEncoder();
const COORDINATES = encoder.encode('","coordinates":');
const NUCLEUS = encoder.encode('},"nucleusGeometry":{"type":"');
const POLYGON = encoder.encode('Polygon');
const MULTIPOLYGON = encoder.encode('MultiPolygon');

export function outlineTile(job: TileOutlineJob): TileOutlines {
  const count = job.boxes.length / 4;
  const wkb = new ByteSink(count * 512);
  const nucleusWkb = new ByteSink(count * 256);
  const json = new ByteSink(count * 512);
  const wkbEnd = new Uint32Array(count);
  const nucleusWkbEnd = new Uint32Array(count);
  const jsonEnd = new Uint32Array(count);
  const traced = new Uint8Array(count);
  const bbox = Float64Array.of(
    Number.POSITIVE_INFINITY,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
  );
  let types = 0;
  let nucleusTypes = 0;
  const box = { minX: 0, minY: 0, maxX: 0, maxY: 0 };
  for (let k = 0; k < count; k++) {
    box.minX = job.boxes[4 * k]!;
    box.minY = job.boxes[4 * k + 1]!;
    box.maxX = job.boxes[4 * k + 2]!;
    box.maxY = job.boxes[4 * k + 3]!;
    // A cell the mask gave wholly to an earlier tile's overlapping cell has no outline.
    const polygons = traceLabel(job, job.firstLabel + k, box);
    const nucleus = job.nuclei ? traceRuns(job.nuclei, k) : [];
    types |= polygons.length > 1 ? MULTIPOLYGON_BIT : POLYGON_BIT;
    nucleusTypes |= nucleus.length > 1 ? MULTIPOLYGON_BIT : POLYGON_BIT;
    extend(bbox, polygons);
    wkb.wkb(polygons);
    wkbEnd[k] = wkb.at;
    nucleusWkb.wkb(nucleus);
    nucleusWkbEnd[k] = nucleusWkb.at;
    if (polygons.length > 0) {
      traced[k] = 1;
      json.geometry(polygons);
      // QuPath reads a cell's nucleus from this member beside `geometry`.
      if (nucleus.length > 0) {
        json.bytes(NUCLEUS);
        json.geometry(nucleus);
      }
    }
    jsonEnd[k] = json.at;
  }
  return {
    count,
    wkb: wkb.done(),
    wkbEnd,
    nucleusWkb: nucleusWkb.done(),
    nucleusWkbEnd,
    json: json.done(),
    jsonEnd,
    traced,
    bbox,
    types,
    nucleusTypes,
  };
}

/** The buffers of a result, to transfer rather than copy between threads. */
export function transferables(outlines: TileOutlines): ArrayBuffer[] {
  const { wkb, wkbEnd, nucleusWkb, nucleusWkbEnd, json, jsonEnd, traced, bbox } = outlines;
  return [wkb, wkbEnd, nucleusWkb, nucleusWkbEnd, json, jsonEnd, traced, bbox].map(
    (array) => array.buffer as ArrayBuffer,
  );
}

function extend(bbox: Float64Array, polygons: readonly OutlinePolygon[]): void {
  for (const { shell } of polygons) {
    for (let i = 0; i < shell.length; i += 2) {
      const x = shell[i]!;
      const y = shell[i + 1]!;
      if (x < bbox[0]!) bbox[0] = x;
      if (y < bbox[1]!) bbox[1] = y;
      if (x > bbox[2]!) bbox[2] = x;
      if (y > bbox[3]!) bbox[3] = y;
    }
  }
}

/** Reused raster of one nucleus (most are small: no fresh array each). */
let nucleusLabels = new Uint32Array(1024);

/** The outline of object `k`'s nucleus, from its runs (nuclei are not in the mask). */
function traceRuns(nuclei: { runStart: Uint32Array; runs: Uint32Array }, k: number): OutlinePolygon[] {
  const from = nuclei.runStart[k]! * 3;
  const to = nuclei.runStart[k + 1]! * 3;
  if (to === from) return [];
  const { runs } = nuclei;
  let minX = Number.POSITIVE_INFINITY;
  let minY = Number.POSITIVE_INFINITY;
  let maxX = 0;
  let maxY = 0;
  for (let r = from; r < to; r += 3) {
    minY = Math.min(minY, runs[r]!);
    maxY = Math.max(maxY, runs[r]! + 1);
    minX = Math.min(minX, runs[r + 1]!);
    maxX = Math.max(maxX, runs[r + 2]!);
  }
  const width = maxX - minX;
  const height = maxY - minY;
  if (nucleusLabels.length < width * height) nucleusLabels = new Uint32Array(width * height * 2);
  const labels = nucleusLabels.fill(0, 0, width * height);
  for (let r = from; r < to; r += 3) {
    const row = (runs[r]! - minY) * width - minX;
    labels.fill(1, row + runs[r + 1]!, row + runs[r + 2]!);
  }
  const box = { minX, minY, maxX, maxY };
  return traceLabel({ labels, x: minX, y: minY, width, height }, 1, box);
}

/** Bytes appended to a buffer that doubles when full. */
class ByteSink {
  private buffer: Uint8Array;
  private view: DataView;
  at = 0;

  constructor(capacity: number) {
    this.buffer = new Uint8Array(Math.max(capacity, 64));
    this.view = new DataView(this.buffer.buffer);
  }

  done(): Uint8Array {
    return this.buffer.slice(0, this.at);
  }

  private reserve(length: number): void {
    if (this.at + length <= this.buffer.length) return;
    const grown = new Uint8Array(Math.max(this.buffer.length * 2, this.at + length));
    grown.set(this.buffer.subarray(0, this.at));
    this.buffer = grown;
    this.view = new DataView(grown.buffer);
  }

  /** ISO WKB, little-endian: a Polygon, a MultiPolygon of several, or an empty Polygon. */
  wkb(polygons: readonly OutlinePolygon[]): void {
    let size = polygons.length > 1 ? 9 : 0;
    for (const p of polygons) {
      size += 9 + 4 + (p.shell.length + 2) * 8;
      for (const hole of p.holes) size += 4 + (hole.length + 2) * 8;
    }
    this.reserve(Math.max(size, 9));
    if (polygons.length === 0) this.header(3, 0);
    else if (polygons.length === 1) this.polygonWkb(polygons[0]!);
    else {
      this.header(6, polygons.length);
      for (const p of polygons) this.polygonWkb(p);
    }
  }

  private header(type: number, count: number): void {
    this.buffer[this.at] = 1;
    this.view.setUint32(this.at + 1, type, true);
    this.view.setUint32(this.at + 5, count, true);
    this.at += 9;
  }

  private polygonWkb(p: OutlinePolygon): void {
    this.header(3, 1 + p.holes.length);
    this.ringWkb(p.shell);
    for (const hole of p.holes) this.ringWkb(hole);
  }

  /** A closed ring: its points, then the first again. */
  private ringWkb(ring: Int32Array): void {
    const view = this.view;
    let at = this.at;
    view.setUint32(at, ring.length / 2 + 1, true);
    at += 4;
    for (let i = 0; i < ring.length; i += 2) {
      view.setFloat64(at, ring[i]!, true);
      view.setFloat64(at + 8, ring[i + 1]!, true);
      at += 16;
    }
    view.setFloat64(at, ring[0]!, true);
    view.setFloat64(at + 8, ring[1]!, true);
    this.at = at + 16;
  }

  /**
   * The type's name, then its coordinates: a Polygon, or a MultiPolygon of several. GeoJSON
   * rings close on their first point.
   */
  geometry(polygons: readonly OutlinePolygon[]): void {
    let points = 0;
    for (const p of polygons) {
      points += p.shell.length / 2 + 1;
      for (const hole of p.holes) points += hole.length / 2 + 1;
    }
    // Each point at most 2 x 11 digits and 4 marks; brackets and commas around each ring.
    this.reserve(points * 26 + polygons.length * 8 + 64);
    this.bytes(polygons.length === 1 ? POLYGON : MULTIPOLYGON);
    this.bytes(COORDINATES);
    if (polygons.length !== 1) this.char(0x5b);
    for (let i = 0; i < polygons.length; i++) {
      if (i > 0) this.char(0x2c);
      this.polygonJson(polygons[i]!);
    }
    if (polygons.length !== 1) this.char(0x5d);
  }

  private polygonJson(polygon: OutlinePolygon): void {
    this.char(0x5b);
    this.ringJson(polygon.shell);
    for (const hole of polygon.holes) {
      this.char(0x2c);
      this.ringJson(hole);
    }
    this.char(0x5d);
  }

  private ringJson(ring: Int32Array): void {
    this.char(0x5b);
    for (let i = 0; i <= ring.length; i += 2) {
      if (i > 0) this.char(0x2c);
      this.char(0x5b);
      this.int(ring[i % ring.length]!);
      this.char(0x2c);
      this.int(ring[(i % ring.length) + 1]!);
      this.char(0x5d);
    }
    this.char(0x5d);
  }

  bytes(bytes: Uint8Array): void {
    this.reserve(bytes.length);
    this.buffer.set(bytes, this.at);
    this.at += bytes.length;
  }

  private char(code: number): void {
    this.buffer[this.at++] = code;
  }

  private int(value: number): void {
    this.at = writeDecimal(this.buffer, this.at, value);
  }
}
