import path from 'node:path';
import { type ColumnSource, parquetWriteFile, type SchemaElement } from 'hyparquet-writer';
import { INSTANCE_COLUMNS, MARKER_COLUMNS, ROW_GROUP_ROWS } from '../compute/segmentation';

/**
 * A synthetic segmentation layer's tables, with the columns, types and row groups of
 * `features/instances.parquet` and `features/markers/{marker}.parquet`: cells on a grid over a
 * slide at `mpp`, shapes and expression from a fixed hash of the label (the same every run).
 * For the h5ad bench and tests, which need a layer of a given size without segmenting one.
 */
export interface SyntheticCellTables {
  instances: string;
  markers: { name: string; path: string }[];
  mpp: number;
}

const integerColumns: Record<string, 'INT32' | 'INT64'> = {
  instance_id: 'INT64',
  local_label: 'INT64',
  bbox_min_x: 'INT32',
  bbox_min_y: 'INT32',
  bbox_max_x: 'INT32',
  bbox_max_y: 'INT32',
  area_px: 'INT64',
  pixel_count: 'INT64',
};

/** A value in [0, 1) from a label and a salt (splitmix-like, in 32-bit arithmetic). */
function hash(label: number, salt: number): number {
  let h = Math.imul(label ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(salt + 1, 0xc2b2ae35);
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  return (h >>> 0) / 2 ** 32;
}

function write(file: string, columns: Record<string, Float64Array | Int32Array | BigInt64Array>): void {
  const names = Object.keys(columns);
  const schema: SchemaElement[] = [
    { name: 'schema', num_children: names.length },
    ...names.map(
      (name): SchemaElement => ({
        name,
        type: integerColumns[name] ?? 'DOUBLE',
        repetition_type: 'REQUIRED',
        ...(name === 'instance_id' ? { converted_type: 'UINT_64' as const } : {}),
      }),
    ),
  ];
  const columnData: ColumnSource[] = names.map((name) => ({ name, data: columns[name]! }));
  parquetWriteFile({ filename: file, columnData, schema, rowGroupSize: ROW_GROUP_ROWS });
}

export function writeSyntheticCellTables(
  folder: string,
  cells: number,
  markerNames: readonly string[],
  mpp = 0.25,
): SyntheticCellTables {
  const base = 1n << 32n;
  const side = Math.ceil(Math.sqrt(cells));
  const pitch = 40;
  const columns: Record<string, Float64Array | Int32Array | BigInt64Array> = {};
  for (const name of INSTANCE_COLUMNS) {
    const type = integerColumns[name];
    columns[name] =
      type === 'INT64'
        ? new BigInt64Array(cells)
        : type === 'INT32'
          ? new Int32Array(cells)
          : new Float64Array(cells);
  }
  const col = columns as Record<(typeof INSTANCE_COLUMNS)[number], Float64Array | Int32Array | BigInt64Array>;
  for (let i = 0; i < cells; i++) {
    const label = i + 1;
    const x = (i % side) * pitch + 20 + 8 * hash(label, 1);
    const y = Math.floor(i / side) * pitch + 20 + 8 * hash(label, 2);
    const radius = 6 + 6 * hash(label, 3);
    const area = Math.round(Math.PI * radius * radius);
    (col.instance_id as BigInt64Array)[i] = base + BigInt(label);
    (col.local_label as BigInt64Array)[i] = BigInt(label);
    col.centroid_x_px[i] = x;
    col.centroid_y_px[i] = y;
    col.centroid_x_um[i] = x * mpp;
    col.centroid_y_um[i] = y * mpp;
    col.bbox_min_x[i] = Math.floor(x - radius);
    col.bbox_min_y[i] = Math.floor(y - radius);
    col.bbox_max_x[i] = Math.ceil(x + radius);
    col.bbox_max_y[i] = Math.ceil(y + radius);
    (col.area_px as BigInt64Array)[i] = BigInt(area);
    col.area_um2[i] = area * mpp * mpp;
    col.perimeter_um[i] = 2 * Math.PI * radius * mpp;
    col.eccentricity[i] = 0.8 * hash(label, 4);
    col.solidity[i] = 0.85 + 0.15 * hash(label, 5);
    col.major_axis_length_um[i] = 2 * radius * mpp * 1.1;
    col.minor_axis_length_um[i] = 2 * radius * mpp * 0.9;
    col.orientation_rad[i] = Math.PI * (hash(label, 6) - 0.5);
    col.mean_hematoxylin_od[i] = 0.3 + 0.5 * hash(label, 7);
    col.mean_eosin_od[i] = 0.1 + 0.3 * hash(label, 8);
    col.nucleus_area_um2[i] = area * mpp * mpp * 0.6;
  }
  const instances = path.join(folder, 'instances.parquet');
  write(instances, columns);
  const markers = markerNames.map((name, m) => {
    const file = path.join(folder, `${name}.parquet`);
    const mean = new Float64Array(cells);
    const median = new Float64Array(cells);
    const count = new BigInt64Array(cells);
    for (let i = 0; i < cells; i++) {
      mean[i] = hash(i + 1, 100 + m);
      median[i] = Math.min(1, mean[i]! * (0.9 + 0.2 * hash(i + 1, 200 + m)));
      count[i] = (col.area_px as BigInt64Array)[i]!;
    }
    const table: Record<string, Float64Array | BigInt64Array> = {
      instance_id: col.instance_id as BigInt64Array,
    };
    Object.assign(table, { mean, median, pixel_count: count });
    if (Object.keys(table).join() !== MARKER_COLUMNS.join()) throw new Error('marker columns drifted');
    write(file, table);
    return { name, path: file };
  });
  return { instances, markers, mpp };
}
