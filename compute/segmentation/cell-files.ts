import { type FileHandle, open, rename, rm } from 'node:fs/promises';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from 'hyparquet';
import { M, MEASUREMENT_COUNT } from './features';
import { objectsBounds, type TileObjects } from './objects';
import { type OutlinePolygon, type PixelBox, traceLabel } from './outlines';
import { forEachTile, ParquetTableFile, type PixelRect, ROW_GROUP_ROWS, type TableSource } from './tables';

/**
 * The cell outlines of a segmentation layer, traced from its uint32 label mask, as two files
 * written in one pass over the tiles: `features/cells.geojson` (QuPath's import format: a
 * FeatureCollection of `objectType: cell` features with measurements) and
 * `features/outlines.parquet` (GeoParquet 1.1: `instance_id`, `local_label` and the outline as
 * WKB, one row per row of the instance table, in its order). Coordinates are level-0 pixel
 * corners of the H&E, with no CRS. Each tile's cells are traced over the mask region under them,
 * so a cell that crosses a tile or shard border is whole; memory holds one tile's region and the
 * rows of one row group.
 */

export const OUTLINE_COLUMNS = ['instance_id', 'local_label', 'geometry', 'nucleus_geometry'] as const;

/** GeoParquet's metadata version written to the `geo` key. */
export const GEOPARQUET_VERSION = '1.1.0';

export interface WriteCellOutlinesOptions extends TableSource {
  /** Microns per level-0 pixel. */
  mpp: number;
  /** The mask's level-0 labels over `rect`, row-major. */
  readMask(rect: PixelRect, signal?: AbortSignal): Promise<Uint32Array>;
  /** Local files to write (each replaced whole once complete). */
  geojsonPath: string;
  geoparquetPath: string;
  /** Marker tables already written (`writeMarkerTables`), rows in label order: their means. */
  markerTables: readonly { marker: string; path: string }[];
}

export interface CellOutlinesResult {
  /** Rows of the GeoParquet file: every cell of the layer. */
  cells: number;
  /** Features of the GeoJSON: the cells with pixels left in the mask. */
  features: number;
  geojsonBytes: number;
  geoparquetBytes: number;
}

export async function writeCellOutlines(options: WriteCellOutlinesOptions): Promise<CellOutlinesResult> {
  const { mpp, instanceIdBase, signal } = options;
  const groupRows = options.rowGroupRows ?? ROW_GROUP_ROWS;
  const geojson = await GeoJsonFile.create(options.geojsonPath);
  let parquet: ParquetTableFile | undefined;
  try {
    parquet = await ParquetTableFile.create(
      options.geoparquetPath,
      OUTLINE_COLUMNS,
      groupRows,
      options.metadata,
    );
    const table = parquet;
    const [ids, labels, geometries, nucleusGeometries] = table.columns as [
      BigUint64Array,
      BigInt64Array,
      Uint8Array[],
      Uint8Array[],
    ];
    const means = await MarkerMeans.open(options.markerTables, groupRows);
    const measurementKeys = [
      'Cell: Area px',
      'Cell: Area µm^2',
      'Nucleus: Area µm^2',
      'Cell: Hematoxylin OD mean',
      'Cell: Eosin OD mean',
      ...options.markerTables.map(({ marker }) => `Cell: ${marker} mean`),
    ].map((name) => encoder.encode(`${JSON.stringify(name)}:`));
    const values = new Float64Array(measurementKeys.length);
    const extent = new Extent();
    const nucleusTypes = new Set<string>();
    let row = 0;
    let features = 0;
    await forEachTile(options, async (objects, offset) => {
      if (objects.count === 0) return 0;
      const rect = objectsBounds(objects);
      const window = { ...rect, labels: await options.readMask(rect, signal) };
      const m = objects.measurements;
      for (let k = 0; k < objects.count; k++) {
        const label = offset + k + 1;
        const instanceId = instanceIdBase + BigInt(label);
        // A cell the mask gave wholly to an earlier tile's overlapping cell has no outline.
        const polygons = traceLabel(window, label, boxOf(objects, k));
        const r = table.row;
        ids[r] = instanceId;
        labels[r] = BigInt(label);
        geometries[r] = encodeWkb(polygons);
        extent.add(polygons);
        const nucleus = objects.nuclei ? traceRuns(objects.nuclei, k) : [];
        nucleusGeometries[r] = encodeWkb(nucleus);
        nucleusTypes.add(nucleus.length > 1 ? 'MultiPolygon' : 'Polygon');
        const markerMeans = await means.next(row++);
        if (polygons.length > 0) {
          const b = k * MEASUREMENT_COUNT;
          const area = m[b + M.area]!;
          values[0] = area;
          values[1] = area * mpp * mpp;
          values[2] = m[b + M.nucleus_area]! * mpp * mpp;
          values[3] = m[b + M.mean_hematoxylin_od]!;
          values[4] = m[b + M.mean_eosin_od]!;
          markerMeans.forEach((mean, i) => {
            values[5 + i] = mean;
          });
          await geojson.writeCell(polygons, nucleus, instanceId, label, measurementKeys, values);
          features++;
        }
        if (table.commit()) await table.flush();
      }
      return objects.count;
    });
    table.metadata.push({ key: 'geo', value: JSON.stringify(geoMetadata(extent, nucleusTypes)) });
    const geoparquetBytes = await table.close();
    const geojsonBytes = await geojson.close();
    return { cells: table.rowCount, features, geojsonBytes, geoparquetBytes };
  } catch (err) {
    await parquet?.abort();
    await geojson.abort();
    throw err;
  }
}

function boxOf(objects: TileObjects, k: number): PixelBox {
  const b = k * MEASUREMENT_COUNT;
  const m = objects.measurements;
  return {
    minX: m[b + M.bbox_min_x]!,
    minY: m[b + M.bbox_min_y]!,
    maxX: m[b + M.bbox_max_x]!,
    maxY: m[b + M.bbox_max_y]!,
  };
}

/** ISO WKB, little-endian: a Polygon, a MultiPolygon of several, or an empty Polygon. */
export function encodeWkb(polygons: readonly OutlinePolygon[]): Uint8Array {
  const polygonBytes = (p: OutlinePolygon) =>
    9 + [p.shell, ...p.holes].reduce((sum, ring) => sum + 4 + (ring.length + 2) * 8, 0);
  const single = polygons.length <= 1;
  const size = single
    ? polygons.length === 0
      ? 9
      : polygonBytes(polygons[0]!)
    : 9 + polygons.reduce((sum, p) => sum + polygonBytes(p), 0);
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  let at = 0;
  const header = (type: number, count: number) => {
    view.setUint8(at, 1);
    view.setUint32(at + 1, type, true);
    view.setUint32(at + 5, count, true);
    at += 9;
  };
  const polygon = (p: OutlinePolygon) => {
    header(3, 1 + p.holes.length);
    for (const ring of [p.shell, ...p.holes]) {
      view.setUint32(at, ring.length / 2 + 1, true);
      at += 4;
      for (let i = 0; i <= ring.length; i += 2) {
        view.setFloat64(at, ring[i % ring.length]!, true);
        view.setFloat64(at + 8, ring[(i % ring.length) + 1]!, true);
        at += 16;
      }
    }
  };
  if (polygons.length === 0) header(3, 0);
  else if (single) polygon(polygons[0]!);
  else {
    header(6, polygons.length);
    for (const p of polygons) polygon(p);
  }
  return bytes;
}

/** The bounding box and geometry types of everything written, for GeoParquet's `geo` key. */
class Extent {
  minX = Number.POSITIVE_INFINITY;
  minY = Number.POSITIVE_INFINITY;
  maxX = Number.NEGATIVE_INFINITY;
  maxY = Number.NEGATIVE_INFINITY;
  readonly types = new Set<string>();

  add(polygons: readonly OutlinePolygon[]): void {
    this.types.add(polygons.length > 1 ? 'MultiPolygon' : 'Polygon');
    for (const { shell } of polygons) {
      for (let i = 0; i < shell.length; i += 2) {
        this.minX = Math.min(this.minX, shell[i]!);
        this.maxX = Math.max(this.maxX, shell[i]!);
        this.minY = Math.min(this.minY, shell[i + 1]!);
        this.maxY = Math.max(this.maxY, shell[i + 1]!);
      }
    }
  }
}

/** The outline of object `k`'s nucleus, from its runs (nuclei are not in the mask). */
function traceRuns(nuclei: { runStart: Uint32Array; runs: Uint32Array }, k: number): OutlinePolygon[] {
  const from = nuclei.runStart[k]! * 3;
  const to = nuclei.runStart[k + 1]! * 3;
  if (to === from) return [];
  const box = { minX: Number.POSITIVE_INFINITY, minY: Number.POSITIVE_INFINITY, maxX: 0, maxY: 0 };
  for (let r = from; r < to; r += 3) {
    box.minY = Math.min(box.minY, nuclei.runs[r]!);
    box.maxY = Math.max(box.maxY, nuclei.runs[r]! + 1);
    box.minX = Math.min(box.minX, nuclei.runs[r + 1]!);
    box.maxX = Math.max(box.maxX, nuclei.runs[r + 2]!);
  }
  const width = box.maxX - box.minX;
  const height = box.maxY - box.minY;
  const labels = new Uint32Array(width * height);
  for (let r = from; r < to; r += 3) {
    const row = (nuclei.runs[r]! - box.minY) * width - box.minX;
    labels.fill(1, row + nuclei.runs[r + 1]!, row + nuclei.runs[r + 2]!);
  }
  return traceLabel({ labels, x: box.minX, y: box.minY, width, height }, 1, box);
}

/**
 * GeoParquet 1.1 column metadata. `crs: null` declares the coordinates to have no known CRS:
 * they are pixels of the slide, not places on Earth. Shells wind counterclockwise in the
 * numbers as written (x right, y up as GeoParquet reads them).
 */
function geoMetadata(extent: Extent, nucleusTypes: ReadonlySet<string>) {
  const bbox = Number.isFinite(extent.minX)
    ? [extent.minX, extent.minY, extent.maxX, extent.maxY]
    : undefined;
  return {
    version: GEOPARQUET_VERSION,
    primary_column: 'geometry',
    columns: {
      geometry: {
        encoding: 'WKB',
        geometry_types: [...extent.types].sort(),
        crs: null,
        orientation: 'counterclockwise',
        edges: 'planar',
        ...(bbox ? { bbox } : {}),
      },
      nucleus_geometry: {
        encoding: 'WKB',
        geometry_types: [...nucleusTypes].sort(),
        crs: null,
        orientation: 'counterclockwise',
        edges: 'planar',
      },
    },
  };
}

/**
 * The `mean` of each marker table, row by row in step with the cells: one row group's worth of
 * rows read at a time.
 */
class MarkerMeans {
  private start = 0;
  private columns: Float64Array[] = [];

  private constructor(
    private readonly files: { file: Awaited<ReturnType<typeof asyncBufferFromFile>>; rows: number }[],
    private readonly chunkRows: number,
  ) {}

  static async open(tables: readonly { path: string }[], chunkRows: number): Promise<MarkerMeans> {
    const files = [];
    for (const { path } of tables) {
      const file = await asyncBufferFromFile(path);
      const metadata = await parquetMetadataAsync(file);
      files.push({ file, rows: Number(metadata.num_rows) });
    }
    return new MarkerMeans(files, chunkRows);
  }

  /** Each marker's mean of table row `row` (rows asked in order). */
  async next(row: number): Promise<number[]> {
    if (this.files.length === 0) return [];
    if (this.columns.length === 0 || row >= this.start + this.columns[0]!.length) {
      this.start = row;
      this.columns = [];
      for (const { file, rows } of this.files) {
        if (row >= rows) throw new RangeError(`a marker table has ${rows} rows, fewer than the cells`);
        const rowEnd = Math.min(rows, row + this.chunkRows);
        const read = await parquetReadObjects({ file, columns: ['mean'], rowStart: row, rowEnd });
        this.columns.push(Float64Array.from(read, (r) => r.mean as number));
      }
    }
    return this.columns.map((column) => column[row - this.start]!);
  }
}

const encoder = new TextEncoder();
const ascii = (text: string) => encoder.encode(text);
const FEATURE_START = ascii('{"type":"Feature","geometry":{"type":"');
const COORDINATES = ascii('","coordinates":');
const NUCLEUS = ascii('},"nucleusGeometry":{"type":"');
const PROPERTIES = ascii('},"properties":{"objectType":"cell","instance_id":"');
const LOCAL_LABEL = ascii('","local_label":');
const MEASUREMENTS = ascii(',"measurements":{');
const FEATURE_END = ascii('}}}');
const POLYGON = ascii('Polygon');
const MULTIPOLYGON = ascii('MultiPolygon');
const SEPARATOR = ascii(',\n');

/**
 * A GeoJSON FeatureCollection written cell by cell as bytes into a 1 MiB buffer that goes to
 * the file when full: millions of features made as strings would be mostly garbage to collect.
 */
class GeoJsonFile {
  private buffer = new Uint8Array(1 << 20);
  private at = 0;
  private first = true;

  private constructor(
    private readonly file: FileHandle,
    private readonly path: string,
    private readonly temporary: string,
  ) {}

  static async create(path: string): Promise<GeoJsonFile> {
    const temporary = `${path}.${process.pid}.tmp`;
    const file = await open(temporary, 'w');
    const out = new GeoJsonFile(file, path, temporary);
    out.bytes(ascii('{"type":"FeatureCollection","features":[\n'));
    return out;
  }

  /**
   * One QuPath cell: the outline is the cell (the mask's label); `measurements` is a
   * name-to-number object (QuPath 0.4 on) without the values that are not numbers (a marker
   * with no pixels). No classification: the segmenter does not classify cells. GeoJSON rings
   * close on their first point.
   */
  async writeCell(
    polygons: readonly OutlinePolygon[],
    nucleus: readonly OutlinePolygon[],
    instanceId: bigint,
    label: number,
    keys: readonly Uint8Array[],
    values: Float64Array,
  ): Promise<void> {
    let points = 0;
    for (const p of [...polygons, ...nucleus])
      for (const ring of [p.shell, ...p.holes]) points += ring.length / 2 + 1;
    let keyBytes = 0;
    for (const key of keys) keyBytes += key.length;
    // Each point at most 2 x 11 digits and 4 marks; a value at most 25 characters and a comma.
    await this.reserve(
      points * 26 + (polygons.length + nucleus.length) * 8 + 320 + keyBytes + keys.length * 26,
    );
    if (!this.first) this.bytes(SEPARATOR);
    this.first = false;
    this.bytes(FEATURE_START);
    this.geometry(polygons);
    // QuPath reads a cell's nucleus from this member beside `geometry`.
    if (nucleus.length > 0) {
      this.bytes(NUCLEUS);
      this.geometry(nucleus);
    }
    this.bytes(PROPERTIES);
    this.text(instanceId.toString());
    this.bytes(LOCAL_LABEL);
    this.int(label);
    this.bytes(MEASUREMENTS);
    let written = 0;
    for (let i = 0; i < keys.length; i++) {
      if (!Number.isFinite(values[i])) continue;
      if (written++ > 0) this.char(0x2c);
      this.bytes(keys[i]!);
      this.text(String(values[i]));
    }
    this.bytes(FEATURE_END);
  }

  async close(): Promise<number> {
    await this.reserve(8);
    this.bytes(ascii('\n]}\n'));
    await this.drain();
    const size = (await this.file.stat()).size;
    await this.file.close();
    await rename(this.temporary, this.path);
    return size;
  }

  async abort(): Promise<void> {
    await this.file.close().catch(() => undefined);
    await rm(this.temporary, { force: true });
  }

  /** The type's name, then its coordinates: a Polygon, or a MultiPolygon of several. */
  private geometry(polygons: readonly OutlinePolygon[]): void {
    this.bytes(polygons.length === 1 ? POLYGON : MULTIPOLYGON);
    this.bytes(COORDINATES);
    if (polygons.length !== 1) this.char(0x5b);
    polygons.forEach((polygon, i) => {
      if (i > 0) this.char(0x2c);
      this.polygon(polygon);
    });
    if (polygons.length !== 1) this.char(0x5d);
  }

  private polygon(polygon: OutlinePolygon): void {
    this.char(0x5b);
    [polygon.shell, ...polygon.holes].forEach((ring, r) => {
      if (r > 0) this.char(0x2c);
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
    });
    this.char(0x5d);
  }

  /** Room for `length` more bytes: the buffer goes to the file first, or grows. */
  private async reserve(length: number): Promise<void> {
    if (this.at + length <= this.buffer.length) return;
    await this.drain();
    if (length > this.buffer.length) this.buffer = new Uint8Array(length);
  }

  private async drain(): Promise<void> {
    let done = 0;
    while (done < this.at) done += (await this.file.write(this.buffer, done, this.at - done)).bytesWritten;
    this.at = 0;
  }

  private bytes(bytes: Uint8Array): void {
    this.buffer.set(bytes, this.at);
    this.at += bytes.length;
  }

  /** ASCII text (digits, signs, exponents) without an encoder call. */
  private text(text: string): void {
    for (let i = 0; i < text.length; i++) this.buffer[this.at++] = text.charCodeAt(i);
  }

  private char(code: number): void {
    this.buffer[this.at++] = code;
  }

  /** A safe integer in decimal digits. */
  private int(value: number): void {
    let n = value;
    if (n < 0) {
      this.char(0x2d);
      n = -n;
    }
    let digits = 1;
    for (let t = n; t >= 10; t = Math.floor(t / 10)) digits++;
    for (let i = digits - 1; i >= 0; i--) {
      this.buffer[this.at + i] = 0x30 + (n % 10);
      n = Math.floor(n / 10);
    }
    this.at += digits;
  }
}
