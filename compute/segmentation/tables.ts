import { type FileHandle, open, rename, rm } from 'node:fs/promises';
import {
  ByteWriter,
  type ColumnSource,
  type KeyValue,
  ParquetWriter,
  type SchemaElement,
} from 'hyparquet-writer';
import { M, MEASUREMENT_COUNT } from './features';
import { objectsBounds, type TileObjects } from './objects';
import type { SegmentationTile } from './tiles';

/**
 * The per-cell tables of a segmentation layer, as Parquet: `features/instances.parquet` (one
 * row per cell, its geometry and morphology) and `features/markers/{marker}.parquet` (one row
 * per cell per marker). Written tile by tile in row groups, straight to a local file, so memory
 * holds one row group whatever the slide; the caller then moves the file to the object store.
 * Rows follow the layer's labels: tile order, then local order, so `local_label` ascends.
 */

/** Where each cell is, level-0 pixels and microns; box min inclusive, max exclusive (pixels). */
export const GEOMETRY_COLUMNS = [
  'centroid_x_px',
  'centroid_y_px',
  'centroid_x_um',
  'centroid_y_um',
  'bbox_min_x',
  'bbox_min_y',
  'bbox_max_x',
  'bbox_max_y',
] as const;

/** Shape and stain of each cell (microns; orientation in radians, regionprops' convention). */
export const MORPHOLOGY_COLUMNS = [
  'area_px',
  'area_um2',
  'perimeter_um',
  'eccentricity',
  'solidity',
  'major_axis_length_um',
  'minor_axis_length_um',
  'orientation_rad',
  'mean_hematoxylin_od',
  'mean_eosin_od',
  'nucleus_area_um2',
] as const;

/** The columns of each marker table besides `instance_id`. */
export const EXPRESSION_COLUMNS = ['mean', 'median', 'pixel_count'] as const;

export const INSTANCE_COLUMNS = [
  'instance_id',
  'local_label',
  ...GEOMETRY_COLUMNS,
  ...MORPHOLOGY_COLUMNS,
] as const;
export const MARKER_COLUMNS = ['instance_id', ...EXPRESSION_COLUMNS] as const;

/** Rows per row group: about 10 MB of instance rows, small enough to keep memory flat. */
export const ROW_GROUP_ROWS = 65_536;

type ColumnKind = 'id' | 'int32' | 'int64' | 'double' | 'bytes';

const kindOf: Record<string, ColumnKind> = {
  instance_id: 'id',
  local_label: 'int64',
  bbox_min_x: 'int32',
  bbox_min_y: 'int32',
  bbox_max_x: 'int32',
  bbox_max_y: 'int32',
  area_px: 'int64',
  pixel_count: 'int64',
  geometry: 'bytes',
  nucleus_geometry: 'bytes',
};

function schemaOf(columns: readonly string[]): SchemaElement[] {
  return [
    { name: 'schema', num_children: columns.length },
    ...columns.map((name): SchemaElement => {
      const kind = kindOf[name] ?? 'double';
      if (kind === 'id')
        return { name, type: 'INT64', converted_type: 'UINT_64', repetition_type: 'REQUIRED' };
      if (kind === 'int64') return { name, type: 'INT64', repetition_type: 'REQUIRED' };
      if (kind === 'int32') return { name, type: 'INT32', repetition_type: 'REQUIRED' };
      if (kind === 'bytes') return { name, type: 'BYTE_ARRAY', repetition_type: 'REQUIRED' };
      return { name, type: 'DOUBLE', repetition_type: 'REQUIRED' };
    }),
  ];
}

export type ColumnArray = BigUint64Array | BigInt64Array | Int32Array | Float64Array | Uint8Array[];

function allocateColumn(kind: ColumnKind, rows: number): ColumnArray {
  if (kind === 'id') return new BigUint64Array(rows);
  if (kind === 'int64') return new BigInt64Array(rows);
  if (kind === 'int32') return new Int32Array(rows);
  if (kind === 'bytes') return new Array<Uint8Array>(rows);
  return new Float64Array(rows);
}

/**
 * One Parquet file written row group by row group. Rows gather in fixed typed columns; a full
 * group is encoded and appended to the file, then the buffers are reused. The file appears
 * under its name only once complete (written beside it, then renamed).
 */
export class ParquetTableFile {
  readonly columns: ColumnArray[];
  private rows = 0;
  private written = 0;
  private readonly bytes: ByteWriter;
  private readonly parquet: ParquetWriter;

  private constructor(
    private readonly file: FileHandle,
    private readonly path: string,
    private readonly temporary: string,
    private readonly names: readonly string[],
    private readonly groupRows: number,
    /** The footer's key-value metadata: filled in until `close`. */
    readonly metadata: KeyValue[],
  ) {
    this.columns = names.map((name) => allocateColumn(kindOf[name] ?? 'double', groupRows));
    this.bytes = new ByteWriter(1 << 20);
    // Each row group leaves the buffer for the file as soon as it is encoded.
    const flush = async () => {
      const chunk = this.bytes.getBytes().slice();
      this.bytes.index = 0;
      await this.file.write(chunk);
    };
    Object.assign(this.bytes, { flush });
    this.parquet = new ParquetWriter({
      writer: this.bytes,
      schema: schemaOf(names),
      createdBy: 'slide-prediction-service compute/segmentation',
      kvMetadata: metadata,
    });
  }

  static async create(
    path: string,
    names: readonly string[],
    groupRows: number,
    metadata: Readonly<Record<string, string>> = {},
  ): Promise<ParquetTableFile> {
    const temporary = `${path}.${process.pid}.tmp`;
    const file = await open(temporary, 'w');
    const pairs = Object.entries(metadata).map(([key, value]) => ({ key, value }));
    return new ParquetTableFile(file, path, temporary, names, groupRows, pairs);
  }

  /** Index of the next row in `columns`; call `commit` once it is filled. */
  get row(): number {
    return this.rows;
  }

  /** Counts the row filled at `row`; true when the group is full and must be `flush`ed. */
  commit(): boolean {
    this.rows++;
    this.written++;
    return this.rows === this.groupRows;
  }

  get rowCount(): number {
    return this.written;
  }

  /** Writes what is left and the footer, then moves the file into place; resolves its size. */
  async close(): Promise<number> {
    try {
      // A table with no cells is still a valid file with the schema and no row group.
      if (this.rows > 0) await this.flush();
      await this.parquet.finish();
      const tail = this.bytes.getBytes().slice();
      this.bytes.index = 0;
      await this.file.write(tail);
      const size = (await this.file.stat()).size;
      await this.file.close();
      await rename(this.temporary, this.path);
      return size;
    } catch (err) {
      await this.abort();
      throw err;
    }
  }

  async abort(): Promise<void> {
    await this.file.close().catch(() => undefined);
    await rm(this.temporary, { force: true });
  }

  /** Encodes the gathered rows as one row group and appends it to the file. */
  async flush(): Promise<void> {
    const rows = this.rows;
    const columnData: ColumnSource[] = this.names.map((name, c) => {
      const column = this.columns[c]!;
      // Byte columns (WKB) are unique per row: no dictionary, no min/max.
      if (Array.isArray(column))
        return { name, data: column.slice(0, rows), encoding: 'PLAIN', statistics: false };
      return { name, data: column.subarray(0, rows) };
    });
    await this.parquet.write({ columnData, rowGroupSize: rows });
    this.rows = 0;
  }
}

/** Where the tables read their cells from: the plan, its offsets and the stored tile objects. */
export interface TableSource {
  tiles: readonly SegmentationTile[];
  /** Per tile, the layer label of its object 0 minus one (see `labelOffsets`). */
  labelOffsets: readonly number[];
  loadTileObjects(index: number, signal?: AbortSignal): Promise<TileObjects>;
  /** `instance_id = instanceIdBase + local_label`: unique across layers when the caller spaces bases. */
  instanceIdBase: bigint;
  rowGroupRows?: number;
  signal?: AbortSignal;
  /** Key-value metadata of every file written (the layer's scale, units, id, schema version). */
  metadata?: Readonly<Record<string, string>>;
  /** After each tile: tiles done and rows so far (a heartbeat). */
  onProgress?: (progress: { tilesDone: number; tiles: number; rows: number }) => void;
}

export interface WriteInstanceTableOptions extends TableSource {
  /** Local file to write (replaced whole; a partial write never appears under this name). */
  path: string;
  /** Microns per level-0 pixel. */
  mpp: number;
}

export interface TableResult {
  rows: number;
  sizeBytes: number;
}

/** Writes `features/instances.parquet` (columns `INSTANCE_COLUMNS`). */
export async function writeInstanceTable(options: WriteInstanceTableOptions): Promise<TableResult> {
  const { mpp, instanceIdBase } = options;
  const table = await ParquetTableFile.create(
    options.path,
    INSTANCE_COLUMNS,
    options.rowGroupRows ?? ROW_GROUP_ROWS,
    options.metadata,
  );
  try {
    const col = Object.fromEntries(INSTANCE_COLUMNS.map((name, c) => [name, table.columns[c]!])) as Record<
      (typeof INSTANCE_COLUMNS)[number],
      ColumnArray
    >;
    const area = mpp * mpp;
    await forEachTile(options, async (objects, offset) => {
      const m = objects.measurements;
      for (let k = 0; k < objects.count; k++) {
        const b = k * MEASUREMENT_COUNT;
        const r = table.row;
        const label = offset + k + 1;
        (col.instance_id as BigUint64Array)[r] = instanceIdBase + BigInt(label);
        (col.local_label as BigInt64Array)[r] = BigInt(label);
        col.centroid_x_px[r] = m[b + M.centroid_x]!;
        col.centroid_y_px[r] = m[b + M.centroid_y]!;
        col.centroid_x_um[r] = m[b + M.centroid_x]! * mpp;
        col.centroid_y_um[r] = m[b + M.centroid_y]! * mpp;
        col.bbox_min_x[r] = m[b + M.bbox_min_x]!;
        col.bbox_min_y[r] = m[b + M.bbox_min_y]!;
        col.bbox_max_x[r] = m[b + M.bbox_max_x]!;
        col.bbox_max_y[r] = m[b + M.bbox_max_y]!;
        (col.area_px as BigInt64Array)[r] = BigInt(m[b + M.area]!);
        col.area_um2[r] = m[b + M.area]! * area;
        col.perimeter_um[r] = m[b + M.perimeter]! * mpp;
        col.eccentricity[r] = m[b + M.eccentricity]!;
        col.solidity[r] = m[b + M.solidity]!;
        col.major_axis_length_um[r] = m[b + M.major_axis_length]! * mpp;
        col.minor_axis_length_um[r] = m[b + M.minor_axis_length]! * mpp;
        col.orientation_rad[r] = m[b + M.orientation]!;
        col.mean_hematoxylin_od[r] = m[b + M.mean_hematoxylin_od]!;
        col.mean_eosin_od[r] = m[b + M.mean_eosin_od]!;
        col.nucleus_area_um2[r] = m[b + M.nucleus_area]! * area;
        if (table.commit()) await table.flush();
      }
      return objects.count;
    });
    const sizeBytes = await table.close();
    return { rows: table.rowCount, sizeBytes };
  } catch (err) {
    await table.abort();
    throw err;
  }
}

/** A level-0 rectangle, pixels. */
export interface PixelRect {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface WriteMarkerTablesOptions extends TableSource {
  markers: readonly string[];
  /** Local file of each marker's table. */
  pathOf(marker: string): string;
  /**
   * The marker's values over `rect` of level 0, row-major (`rect.width * rect.height`). The
   * caller reads them from wherever the prediction is (see `predictionMarkerReader`).
   */
  readMarkerRegion(marker: string, rect: PixelRect, signal?: AbortSignal): Promise<Float32Array>;
  /** The range the model's outputs span: the median histogram's bins cover it evenly. */
  valueRange: readonly [number, number];
  /** Bins of the median histogram. Default 1024. */
  bins?: number;
}

/**
 * Writes one table per marker (`MARKER_COLUMNS`) in one pass over the tiles: per tile, the
 * region under its cells is read once per marker. Medians come from a histogram of fixed bins
 * over `valueRange`, interpolated inside the median bin (no sort): error at most one bin width,
 * `(max - min) / bins`. Values outside the range count in the end bins.
 */
export async function writeMarkerTables(
  options: WriteMarkerTablesOptions,
): Promise<Record<string, TableResult>> {
  const { markers, instanceIdBase, signal } = options;
  const bins = options.bins ?? 1024;
  const [low, high] = options.valueRange;
  if (!(high > low) || !Number.isSafeInteger(bins) || bins < 1)
    throw new RangeError('a value range and bins');
  const groupRows = options.rowGroupRows ?? ROW_GROUP_ROWS;
  const tables: ParquetTableFile[] = [];
  try {
    for (const marker of markers)
      tables.push(
        await ParquetTableFile.create(options.pathOf(marker), MARKER_COLUMNS, groupRows, {
          ...options.metadata,
          marker,
        }),
      );
    const histogram = new Uint32Array(bins);
    const scale = bins / (high - low);
    await forEachTile(options, async (objects, offset) => {
      if (objects.count === 0) return 0;
      const rect = objectsBounds(objects);
      for (const [i, marker] of markers.entries()) {
        const values = await options.readMarkerRegion(marker, rect, signal);
        if (values.length !== rect.width * rect.height) {
          throw new RangeError(
            `marker ${marker}: ${values.length} values for ${rect.width} x ${rect.height}`,
          );
        }
        const table = tables[i]!;
        const [ids, means, medians, counts] = table.columns as [
          BigUint64Array,
          Float64Array,
          Float64Array,
          BigInt64Array,
        ];
        for (let k = 0; k < objects.count; k++) {
          const stats = objectStatistics(objects, k, values, rect, histogram, low, scale);
          const r = table.row;
          ids[r] = instanceIdBase + BigInt(offset + k + 1);
          means[r] = stats.mean;
          medians[r] = stats.median;
          counts[r] = BigInt(stats.count);
          if (table.commit()) await table.flush();
        }
      }
      return objects.count;
    });
    const results: Record<string, TableResult> = {};
    for (const [i, marker] of markers.entries()) {
      const table = tables[i]!;
      results[marker] = { rows: table.rowCount, sizeBytes: await table.close() };
    }
    return results;
  } catch (err) {
    for (const table of tables) await table.abort();
    throw err;
  }
}

/** Mean and histogram median of a marker over one object's pixels; leaves `histogram` zeroed. */
function objectStatistics(
  objects: TileObjects,
  k: number,
  values: Float32Array,
  rect: PixelRect,
  histogram: Uint32Array,
  low: number,
  scale: number,
): { mean: number; median: number; count: number } {
  const { runs, runStart } = objects;
  const last = histogram.length - 1;
  let sum = 0;
  let count = 0;
  const from = runStart[k]! * 3;
  const to = runStart[k + 1]! * 3;
  for (let r = from; r < to; r += 3) {
    const row = (runs[r]! - rect.y) * rect.width - rect.x;
    for (let i = row + runs[r + 1]!, end = row + runs[r + 2]!; i < end; i++) {
      const v = values[i]!;
      sum += v;
      count++;
      const bin = Math.floor((v - low) * scale);
      histogram[bin < 0 ? 0 : Math.min(bin, last)]!++;
    }
  }
  // The median bin, then linear interpolation inside it (grouped-data median).
  const half = count / 2;
  let seen = 0;
  let bin = 0;
  while (bin < last && seen + histogram[bin]! < half) seen += histogram[bin++]!;
  const inBin = histogram[bin]!;
  const median = low + (bin + (inBin > 0 ? (half - seen) / inBin : 0.5)) / scale;
  for (let r = from; r < to; r += 3) {
    const row = (runs[r]! - rect.y) * rect.width - rect.x;
    for (let i = row + runs[r + 1]!, end = row + runs[r + 2]!; i < end; i++) {
      const b = Math.floor((values[i]! - low) * scale);
      histogram[b < 0 ? 0 : Math.min(b, last)] = 0;
    }
  }
  return { mean: count > 0 ? sum / count : Number.NaN, median, count };
}

export async function forEachTile(
  source: TableSource,
  visit: (objects: TileObjects, offset: number) => Promise<number>,
): Promise<void> {
  let rows = 0;
  for (const [done, tile] of source.tiles.entries()) {
    source.signal?.throwIfAborted();
    const objects = await source.loadTileObjects(tile.index, source.signal);
    const offset = source.labelOffsets[tile.index];
    if (offset === undefined) throw new RangeError(`no label offset for tile ${tile.index}`);
    rows += await visit(objects, offset);
    source.onProgress?.({ tilesDone: done + 1, tiles: source.tiles.length, rows });
  }
}
