import { asyncBufferFromFile, parquetMetadataAsync, parquetRead } from 'hyparquet';

/**
 * The layer's Parquet tables read block by block (rows `[start, end)`), for the AnnData writers
 * (`cells.h5ad`, the SpatialData table of the zipped export).
 */

/** A block of one column as the AnnData writers store it. */
export type Column = Float64Array | Float32Array | Int32Array | BigInt64Array;

export type Kind = 'float64' | 'int32' | 'int64';

export interface ParquetColumns {
  /** Column name -> values of rows `[start, end)` of the file. */
  read(start: number, end: number, names: readonly string[]): Promise<Map<string, ArrayLike<unknown>>>;
  names: string[];
  /** Column name -> the dtype it keeps in AnnData (Parquet's integers stay integers). */
  kinds: Map<string, Kind>;
  rows: number;
}

export async function openParquet(path: string): Promise<ParquetColumns> {
  const file = await asyncBufferFromFile(path);
  const metadata = await parquetMetadataAsync(file);
  const columns = metadata.schema.slice(1);
  const kindOf = (type: string | undefined): Kind =>
    type === 'INT64' ? 'int64' : type === 'INT32' ? 'int32' : 'float64';
  return {
    names: columns.map((element) => element.name),
    kinds: new Map(columns.map((element) => [element.name, kindOf(element.type)])),
    rows: Number(metadata.num_rows),
    async read(start, end, names) {
      const out = new Map<string, unknown[]>(names.map((name) => [name, new Array<unknown>(end - start)]));
      await parquetRead({
        file,
        metadata,
        columns: [...names],
        rowStart: start,
        rowEnd: end,
        onChunk: ({ columnName, columnData, rowStart }) => {
          const target = out.get(columnName);
          if (!target) return;
          for (let i = 0; i < columnData.length; i++) {
            const row = rowStart + i;
            if (row >= start && row < end) target[row - start] = columnData[i];
          }
        },
      });
      return out;
    },
  };
}

/** The column that indexes `obs`: the cells' instance ids. */
export const INDEX_COLUMN = 'instance_id';
/** The columns `obsm['spatial']` copies, (x, y) in microns as squidpy expects. */
export const SPATIAL_COLUMNS = ['centroid_x_um', 'centroid_y_um'] as const;

/**
 * A layer's instance table and its marker tables, opened and checked to be one table: as many
 * rows each, indexed by 64-bit instance ids.
 */
export async function openCellTables<M extends { name: string; path: string }>(
  instancesPath: string,
  markerTables: readonly M[],
): Promise<{ instances: ParquetColumns; markers: (M & { table: ParquetColumns })[] }> {
  const instances = await openParquet(instancesPath);
  const markers = await Promise.all(
    markerTables.map(async (m) => ({ ...m, table: await openParquet(m.path) })),
  );
  for (const marker of markers) {
    if (marker.table.rows !== instances.rows) {
      throw new Error(`${marker.name}: ${marker.table.rows} rows, the instance table has ${instances.rows}`);
    }
  }
  if (instances.kinds.get(INDEX_COLUMN) !== 'int64')
    throw new Error(`${INDEX_COLUMN} is not a 64-bit integer`);
  return { instances, markers };
}

/** One block of cells, rows `start` to `end`, in the shapes AnnData stores. */
interface CellBlock {
  /** The instance table's columns of these rows. */
  columns: Map<string, ArrayLike<unknown>>;
  ids: ArrayLike<unknown>;
  /** `obsm['spatial']`: (x, y) per row, interleaved. */
  xy: Float64Array;
  /** `X` and the median layer: rows x markers, row-major. */
  means: Float32Array;
  medians: Float32Array;
}

/** A layer's instance table and marker tables, as `openCellTables` answers them. */
interface CellTables {
  instances: ParquetColumns;
  markers: readonly { name: string; table: ParquetColumns }[];
}

/** Reads one block of the instance table and the matching rows of every marker table. */
async function readCellBlock(tables: CellTables, start: number, end: number): Promise<CellBlock> {
  const { instances, markers } = tables;
  const rows = end - start;
  const m = markers.length;
  const columns = await instances.read(start, end, instances.names);
  const ids = columns.get(INDEX_COLUMN)!;
  const xy = new Float64Array(rows * 2);
  const [xs, ys] = SPATIAL_COLUMNS.map((name) => columns.get(name)!);
  for (let i = 0; i < rows; i++) {
    xy[2 * i] = Number(xs![i]);
    xy[2 * i + 1] = Number(ys![i]);
  }
  const means = new Float32Array(rows * m);
  const medians = new Float32Array(rows * m);
  for (const [c, marker] of markers.entries()) {
    const values = await marker.table.read(start, end, [INDEX_COLUMN, 'mean', 'median']);
    const markerIds = values.get(INDEX_COLUMN)!;
    const mean = values.get('mean')!;
    const med = values.get('median')!;
    for (let i = 0; i < rows; i++) {
      // Both tables follow the layer's labels; a row out of step would misattribute a cell.
      if (markerIds[i] !== ids[i]) throw new Error(`${marker.name}: row ${start + i} is another cell`);
      means[i * m + c] = Number(mean[i]);
      medians[i * m + c] = Number(med[i]);
    }
  }
  return { columns, ids, xy, means, medians };
}

function typedColumn(values: ArrayLike<unknown>, like: Kind): Column {
  const n = values.length;
  if (like === 'int64') {
    const out = new BigInt64Array(n);
    for (let i = 0; i < n; i++) out[i] = BigInt(values[i] as bigint | number);
    return out;
  }
  const out = like === 'int32' ? new Int32Array(n) : new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = Number(values[i]);
  return out;
}

/** One block of rows as both AnnData writers append it (`cells.h5ad`, the SpatialData table). */
interface ObsBlock {
  /** How many rows: `[start, start + rows)` of the tables. */
  rows: number;
  /** Where the block ends: the rows written once it is appended. */
  end: number;
  /** `obs`'s index: the instance ids as decimal strings. */
  index: string[];
  /** `obs`'s columns by name, each in the dtype AnnData keeps (`kinds`). */
  obs: Map<string, Column>;
  /** `obsm['spatial']`: (x, y) per row, interleaved. */
  spatial: Float64Array;
  /** `X` (the means) and `layers['median']`: rows x markers, row-major. */
  X: Float32Array;
  median: Float32Array;
}

/**
 * The tables read block by block, `blockRows` rows at a time, in the shapes AnnData stores:
 * the one loop of the two AnnData writers, which differ only in where the blocks go.
 */
export async function* obsBlocks(
  tables: CellTables,
  obsColumns: readonly string[],
  blockRows: number,
  signal?: AbortSignal,
): AsyncGenerator<ObsBlock, void, undefined> {
  const { instances } = tables;
  for (let start = 0; start < instances.rows; start += blockRows) {
    signal?.throwIfAborted();
    const end = Math.min(instances.rows, start + blockRows);
    const block = await readCellBlock(tables, start, end);
    const obs = new Map(
      obsColumns.map((name) => [name, typedColumn(block.columns.get(name)!, instances.kinds.get(name)!)]),
    );
    yield {
      rows: end - start,
      end,
      index: Array.from({ length: end - start }, (_, i) => String(block.ids[i])),
      obs,
      spatial: block.xy,
      X: block.means,
      median: block.medians,
    };
  }
}
