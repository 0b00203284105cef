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

export const OUTLINE_COLUMNS = ['instance_id', 'local_label', 'geometry'] as const;

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
    const [ids, labels, geometries] = table.columns as [BigUint64Array, BigInt64Array, Uint8Array[]];
    const means = await MarkerMeans.open(options.markerTables, groupRows);
    const extent = new Extent();
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
        const markerMeans = await means.next(row++);
        if (polygons.length > 0) {
          const area = m[k * MEASUREMENT_COUNT + M.area]!;
          const b = k * MEASUREMENT_COUNT;
          const measurements: [string, number][] = [
            ['Cell: Area px', area],
            ['Cell: Area µm^2', area * mpp * mpp],
            ['Nucleus: Area µm^2', m[b + M.nucleus_area]! * mpp * mpp],
            ['Cell: Hematoxylin OD mean', m[b + M.mean_hematoxylin_od]!],
            ['Cell: Eosin OD mean', m[b + M.mean_eosin_od]!],
            ...options.markerTables.map(({ marker }, i): [string, number] => [
              `Cell: ${marker} mean`,
              markerMeans[i]!,
            ]),
          ];
          await geojson.write(featureJson(polygons, instanceId, label, measurements));
          features++;
        }
        if (table.commit()) await table.flush();
      }
      return objects.count;
    });
    table.metadata.push({ key: 'geo', value: JSON.stringify(geoMetadata(extent)) });
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

/** GeoJSON rings close on their first point. */
function ringJson(ring: Int32Array): string {
  let s = '[';
  for (let i = 0; i < ring.length; i += 2) s += `[${ring[i]},${ring[i + 1]}],`;
  return `${s}[${ring[0]},${ring[1]}]]`;
}

function polygonJson(polygon: OutlinePolygon): string {
  return `[${[polygon.shell, ...polygon.holes].map(ringJson).join(',')}]`;
}

/**
 * One QuPath cell: the outline is the cell (the mask's label); measurements are a name-to-number
 * object (QuPath 0.4 on), leaving out values that are not numbers (a marker with no pixels).
 * No classification: the segmenter does not classify cells.
 */
function featureJson(
  polygons: OutlinePolygon[],
  instanceId: bigint,
  label: number,
  measurements: [string, number][],
): string {
  const geometry =
    polygons.length === 1
      ? `{"type":"Polygon","coordinates":${polygonJson(polygons[0]!)}}`
      : `{"type":"MultiPolygon","coordinates":[${polygons.map(polygonJson).join(',')}]}`;
  const values = Object.fromEntries(measurements.filter(([, value]) => Number.isFinite(value)));
  const properties = {
    objectType: 'cell',
    instance_id: instanceId.toString(),
    local_label: label,
    measurements: values,
  };
  return `{"type":"Feature","geometry":${geometry},"properties":${JSON.stringify(properties)}}`;
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

/**
 * GeoParquet 1.1 column metadata. `crs: null` declares the coordinates to have no known CRS:
 * they are pixels of the slide, not places on Earth. Shells wind counterclockwise in the
 * numbers as written (x right, y up as GeoParquet reads them).
 */
function geoMetadata(extent: Extent) {
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

/** A GeoJSON FeatureCollection written feature by feature, in chunks of about 1 MiB. */
class GeoJsonFile {
  private pending: string[] = [];
  private pendingLength = 0;
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
    out.push('{"type":"FeatureCollection","features":[\n');
    return out;
  }

  async write(feature: string): Promise<void> {
    this.push(this.first ? feature : `,\n${feature}`);
    this.first = false;
    if (this.pendingLength >= 1 << 20) await this.drain();
  }

  async close(): Promise<number> {
    this.push('\n]}\n');
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

  private push(text: string): void {
    this.pending.push(text);
    this.pendingLength += text.length;
  }

  private async drain(): Promise<void> {
    await this.file.write(this.pending.join(''));
    this.pending = [];
    this.pendingLength = 0;
  }
}
