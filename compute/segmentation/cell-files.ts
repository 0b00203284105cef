import { type FileHandle, open, rename, rm } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from 'hyparquet';
import { writeDecimal } from './decimal';
import { M, MEASUREMENT_COUNT } from './features';
import { objectsBounds, type TileObjects } from './objects';
import { tileOutliner } from './outline-pool';
import { forEachTile, ParquetTableFile, type PixelRect, ROW_GROUP_ROWS, type TableSource } from './tables';
import { MULTIPOLYGON_BIT, POLYGON_BIT, type TileOutlines } from './tile-outlines';

/**
 * The cell outlines of a segmentation layer, traced from its uint32 label mask, as two files
 * written in one pass over the tiles: `features/cells.geojson` (QuPath's import format: a
 * FeatureCollection of `objectType: cell` features with measurements) and
 * `features/outlines.parquet` (GeoParquet 1.1: `instance_id`, `local_label` and the outline as
 * WKB, one row per row of the instance table, in its order). Coordinates are level-0 pixel
 * corners of the H&E, with no CRS. Each tile's cells are traced over the mask region under them,
 * so a cell that crosses a tile or shard border is whole. Tiles are traced on worker threads
 * (tile-outlines.ts), a few ahead of the one being written, and written in order; memory holds
 * those tiles' regions and the rows of one row group.
 */

export const OUTLINE_COLUMNS = ['instance_id', 'local_label', 'geometry', 'nucleus_geometry'] as const;

/** GeoParquet's metadata version written to the `geo` key. */
export const GEOPARQUET_VERSION = '1.1.0';

/**
 * Tracing threads by default, at most: past about four the writing thread (Parquet encoding,
 * the GeoJSON) is what takes the time, and each more thread holds its own heap and tiles.
 */
const MAX_THREADS = 4;

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
  /** Worker threads tracing tiles; 0 traces them on this thread (the reference). Default: the cores, up to 4. */
  threads?: number;
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
  const threads = options.threads ?? Math.min(availableParallelism(), MAX_THREADS);
  const geojson = await GeoJsonFile.create(options.geojsonPath);
  const outliner = tileOutliner(threads);
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
    let row = 0;
    let features = 0;
    /** Writes one traced tile's rows and features, in label order. */
    const writeTile = async ({ objects, offset }: { objects: TileObjects; offset: number }) => {
      const outlines = (await outliner.next())!;
      extent.add(outlines);
      const m = objects.measurements;
      for (let k = 0; k < objects.count; k++) {
        const label = offset + k + 1;
        const instanceId = instanceIdBase + BigInt(label);
        const r = table.row;
        ids[r] = instanceId;
        labels[r] = BigInt(label);
        geometries[r] = outlines.wkb.subarray(k > 0 ? outlines.wkbEnd[k - 1] : 0, outlines.wkbEnd[k]);
        nucleusGeometries[r] = outlines.nucleusWkb.subarray(
          k > 0 ? outlines.nucleusWkbEnd[k - 1] : 0,
          outlines.nucleusWkbEnd[k],
        );
        await means.read(row++, values, 5);
        if (outlines.traced[k] === 1) {
          const b = k * MEASUREMENT_COUNT;
          const area = m[b + M.area]!;
          values[0] = area;
          values[1] = area * mpp * mpp;
          values[2] = m[b + M.nucleus_area]! * mpp * mpp;
          values[3] = m[b + M.mean_hematoxylin_od]!;
          values[4] = m[b + M.mean_eosin_od]!;
          const json = outlines.json.subarray(k > 0 ? outlines.jsonEnd[k - 1] : 0, outlines.jsonEnd[k]);
          await geojson.writeCell(json, instanceId, label, measurementKeys, values);
          features++;
        }
        if (table.commit()) await table.flush();
      }
    };
    // Tiles are traced ahead while earlier ones are written, two per thread at most.
    const inFlight = Math.max(1, 2 * threads);
    const waiting: { objects: TileObjects; offset: number }[] = [];
    await forEachTile(options, async (objects, offset) => {
      if (objects.count === 0) return 0;
      const rect = objectsBounds(objects);
      const labels = await options.readMask(rect, signal);
      await outliner.submit({
        ...rect,
        labels,
        firstLabel: offset + 1,
        boxes: boxesOf(objects),
        nuclei: objects.nuclei,
      });
      waiting.push({ objects, offset });
      while (waiting.length >= inFlight) await writeTile(waiting.shift()!);
      return objects.count;
    });
    while (waiting.length > 0) await writeTile(waiting.shift()!);
    table.metadata.push({ key: 'geo', value: JSON.stringify(geoMetadata(extent)) });
    const geoparquetBytes = await table.close();
    const geojsonBytes = await geojson.close();
    return { cells: table.rowCount, features, geojsonBytes, geoparquetBytes };
  } catch (err) {
    await parquet?.abort();
    await geojson.abort();
    throw err;
  } finally {
    await outliner.close();
  }
}

/** Each object's box, `minX, minY, maxX, maxY`. */
function boxesOf(objects: TileObjects): Int32Array {
  const boxes = new Int32Array(objects.count * 4);
  const m = objects.measurements;
  for (let k = 0; k < objects.count; k++) {
    const b = k * MEASUREMENT_COUNT;
    boxes[4 * k] = m[b + M.bbox_min_x]!;
    boxes[4 * k + 1] = m[b + M.bbox_min_y]!;
    boxes[4 * k + 2] = m[b + M.bbox_max_x]!;
    boxes[4 * k + 3] = m[b + M.bbox_max_y]!;
  }
  return boxes;
}

/** The bounding box and geometry types of everything written, for GeoParquet's `geo` key. */
class Extent {
  readonly bbox = Float64Array.of(
    Number.POSITIVE_INFINITY,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
  );
  types = 0;
  nucleusTypes = 0;

  add(outlines: TileOutlines): void {
    this.types |= outlines.types;
    this.nucleusTypes |= outlines.nucleusTypes;
    for (let i = 0; i < 2; i++) this.bbox[i] = Math.min(this.bbox[i]!, outlines.bbox[i]!);
    for (let i = 2; i < 4; i++) this.bbox[i] = Math.max(this.bbox[i]!, outlines.bbox[i]!);
  }
}

/** GeoParquet's names of the geometry types in `bits`, sorted. */
function typeNames(bits: number): string[] {
  return [...(bits & MULTIPOLYGON_BIT ? ['MultiPolygon'] : []), ...(bits & POLYGON_BIT ? ['Polygon'] : [])];
}

/**
 * GeoParquet 1.1 column metadata. `crs: null` declares the coordinates to have no known CRS:
 * they are pixels of the slide, not places on Earth. Shells wind counterclockwise in the
 * numbers as written (x right, y up as GeoParquet reads them).
 */
function geoMetadata(extent: Extent) {
  const bbox = Number.isFinite(extent.bbox[0]) ? [...extent.bbox] : undefined;
  return {
    version: GEOPARQUET_VERSION,
    primary_column: 'geometry',
    columns: {
      geometry: {
        encoding: 'WKB',
        geometry_types: typeNames(extent.types),
        crs: null,
        orientation: 'counterclockwise',
        edges: 'planar',
        ...(bbox ? { bbox } : {}),
      },
      nucleus_geometry: {
        encoding: 'WKB',
        geometry_types: typeNames(extent.nucleusTypes),
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

  /** Each marker's mean of table row `row` (rows asked in order), into `values` from `at`. */
  async read(row: number, values: Float64Array, at: number): Promise<void> {
    if (this.files.length === 0) return;
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
    for (let i = 0; i < this.columns.length; i++) values[at + i] = this.columns[i]![row - this.start]!;
  }
}

const encoder = new TextEncoder();
const ascii = (text: string) => encoder.encode(text);
const FEATURE_START = ascii('{"type":"Feature","geometry":{"type":"');
const PROPERTIES = ascii('},"properties":{"objectType":"cell","instance_id":"');
const LOCAL_LABEL = ascii('","local_label":');
const MEASUREMENTS = ascii(',"measurements":{');
const FEATURE_END = ascii('}}}');
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
   * with no pixels). No classification: the segmenter does not classify cells. `geometry` is
   * the cell's geometry members as `outlineTile` writes them.
   */
  async writeCell(
    geometry: Uint8Array,
    instanceId: bigint,
    label: number,
    keys: readonly Uint8Array[],
    values: Float64Array,
  ): Promise<void> {
    let keyBytes = 0;
    for (const key of keys) keyBytes += key.length;
    // A value at most 25 characters and a comma.
    await this.reserve(geometry.length + 320 + keyBytes + keys.length * 26);
    if (!this.first) this.bytes(SEPARATOR);
    this.first = false;
    this.bytes(FEATURE_START);
    this.bytes(geometry);
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

  private int(value: number): void {
    this.at = writeDecimal(this.buffer, this.at, value);
  }
}
