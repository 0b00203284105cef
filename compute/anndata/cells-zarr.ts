import { gzipSync } from 'node:zlib';
import type { KeyValueStore } from '../store';
import { encodeJson, groupMetadata } from '../zarr';
import { type Column, INDEX_COLUMN, obsBlocks, openCellTables } from './parquet-columns';

/**
 * A segmentation layer's per-cell tables as a SpatialData table element: AnnData's Zarr v3
 * encoding (anndata.readthedocs.io, "On-disk format") with the same content as `cells.h5ad`,
 * plus what SpatialData's `TableModel` needs to tie each row to a pixel of a label image:
 * `obs[regionKey]` (categorical, every row `region`) and `obs[instanceKey]` (the label value,
 * `local_label`), named in `uns['spatialdata_attrs']` and in the group's attributes. Written
 * block by block (one Parquet row group per Zarr chunk), so memory holds one block.
 */
export interface CellsTableZarrOptions {
  /** Where the table group goes: its `zarr.json` is the store's root key. */
  store: KeyValueStore;
  /** Local `instances.parquet` of the layer. */
  instances: string;
  /** Local marker tables (`instance_id, mean, median, ...`), in the order of `var`. */
  markers: readonly { name: string; path: string }[];
  /** Microns per level-0 pixel. */
  mpp: number;
  /** Strings under `uns['provenance']`. */
  provenance: Record<string, string>;
  /** The label element the rows annotate (SpatialData's `region`). */
  region: string;
  /** Rows per chunk. Default 65,536 (a Parquet row group). */
  blockRows?: number;
  signal?: AbortSignal;
}

const REGION_KEY = 'region';
const INSTANCE_KEY = 'local_label';

type ZarrType = 'float32' | 'float64' | 'int32' | 'int64' | 'int8' | 'string';

const array = (type: string) => ({ 'encoding-type': type, 'encoding-version': '0.2.0' });
const dict = { 'encoding-type': 'dict', 'encoding-version': '0.1.0' };

/**
 * One Zarr v3 array of `rows` rows (and `width` columns, or 1-D), chunked by `blockRows` rows
 * and filled chunk by chunk in row order. Chunks are whole: the last is padded with the fill
 * value, as Zarr's regular grid requires.
 */
class RowArray {
  private chunk = 0;

  private constructor(
    private readonly store: KeyValueStore,
    private readonly path: string,
    private readonly width: number | null,
    private readonly blockRows: number,
  ) {}

  static async create(
    store: KeyValueStore,
    path: string,
    spec: { type: ZarrType; rows: number; width: number | null; blockRows: number },
    attributes: Record<string, unknown>,
  ): Promise<RowArray> {
    const { type, rows, width, blockRows } = spec;
    const shape = width === null ? [rows] : [rows, width];
    const chunkShape = width === null ? [blockRows] : [blockRows, Math.max(1, width)];
    await putArrayMetadata(store, path, type, shape, chunkShape, attributes);
    return new RowArray(store, path, width, blockRows);
  }

  async append(values: Column | Int8Array | string[], signal?: AbortSignal): Promise<void> {
    const key = this.width === null ? `c/${this.chunk}` : `c/${this.chunk}/0`;
    this.chunk++;
    if (this.width === 0) return;
    const length = this.blockRows * (this.width ?? 1);
    const bytes = Array.isArray(values) ? vlenUtf8(values, length) : paddedBytes(values, length);
    await this.store.put(`${this.path}/${key}`, gzipSync(bytes), { signal });
  }
}

function paddedBytes(values: Column | Int8Array, length: number): Uint8Array {
  const Ctor = values.constructor as new (n: number) => Column | Int8Array;
  const whole = new Ctor(length);
  whole.set(values as never);
  return new Uint8Array(whole.buffer, whole.byteOffset, whole.byteLength);
}

/** numcodecs' VLenUTF8: the item count, then each item's byte length and bytes (uint32 LE). */
function vlenUtf8(values: readonly string[], length: number): Uint8Array {
  const encoded = Array.from({ length }, (_, i) => Buffer.from(values[i] ?? '', 'utf8'));
  const out = Buffer.alloc(4 + encoded.reduce((sum, item) => sum + 4 + item.length, 0));
  out.writeUInt32LE(length, 0);
  let at = 4;
  for (const item of encoded) {
    out.writeUInt32LE(item.length, at);
    item.copy(out, at + 4);
    at += 4 + item.length;
  }
  return out;
}

async function putArrayMetadata(
  store: KeyValueStore,
  path: string,
  type: ZarrType,
  shape: number[],
  chunkShape: number[],
  attributes: Record<string, unknown>,
): Promise<void> {
  const codecs =
    type === 'string' ? [{ name: 'vlen-utf8' }] : [{ name: 'bytes', configuration: { endian: 'little' } }];
  const document = {
    zarr_format: 3,
    node_type: 'array',
    shape,
    data_type: type,
    chunk_grid: { name: 'regular', configuration: { chunk_shape: chunkShape } },
    chunk_key_encoding: { name: 'default', configuration: { separator: '/' } },
    fill_value: type === 'string' ? '' : 0,
    codecs: [...codecs, { name: 'gzip', configuration: { level: 6 } }],
    attributes,
  };
  await store.put(`${path}/zarr.json`, new TextEncoder().encode(JSON.stringify(document)));
}

async function putGroup(store: KeyValueStore, path: string, attributes: Record<string, unknown>) {
  await store.put(path === '' ? 'zarr.json' : `${path}/zarr.json`, encodeJson(groupMetadata(attributes)));
}

/** A whole small array in one chunk; a lone string or number is a scalar (shape `[]`). */
async function putSmallArray(
  store: KeyValueStore,
  path: string,
  type: ZarrType,
  values: Float64Array | string[] | string | number,
  attributes: Record<string, unknown>,
): Promise<void> {
  const scalar = typeof values === 'string' || typeof values === 'number';
  const list =
    typeof values === 'string' ? [values] : typeof values === 'number' ? new Float64Array([values]) : values;
  const n = list.length;
  await putArrayMetadata(store, path, type, scalar ? [] : [n], scalar ? [] : [Math.max(1, n)], attributes);
  if (n === 0) return;
  const bytes = Array.isArray(list) ? vlenUtf8(list, n) : paddedBytes(list, n);
  await store.put(`${path}/${scalar ? 'c' : 'c/0'}`, gzipSync(bytes));
}

/** Writes the table; resolves its row count and every key written (for an archive of it). */
export async function writeCellsTableZarr(
  options: CellsTableZarrOptions,
): Promise<{ rows: number; keys: string[] }> {
  const { signal } = options;
  const keys: string[] = [];
  const store: KeyValueStore = {
    ...options.store,
    put: (key, bytes, putOptions) => {
      keys.push(key);
      return options.store.put(key, bytes, putOptions);
    },
  };
  const { instances, markers } = await openCellTables(options.instances, options.markers);
  if (instances.kinds.get(INSTANCE_KEY) !== 'int64')
    throw new Error(`${INSTANCE_KEY} is not a 64-bit integer`);
  const obsColumns = instances.names.filter((name) => name !== INDEX_COLUMN);
  const n = instances.rows;
  const m = markers.length;
  const blockRows = Math.max(1, Math.min(options.blockRows ?? 65_536, n || 1));
  const rowsSpec = (type: ZarrType, width: number | null) => ({ type, rows: n, width, blockRows });

  const spatialdata = { region: options.region, region_key: REGION_KEY, instance_key: INSTANCE_KEY };
  await putGroup(store, '', {
    'encoding-type': 'anndata',
    'encoding-version': '0.1.0',
    'spatialdata-encoding-type': 'ngff:regions_table',
    ...spatialdata,
    version: '0.2',
  });
  const X = await RowArray.create(store, 'X', rowsSpec('float32', m), array('array'));
  await putGroup(store, 'layers', dict);
  const median = await RowArray.create(store, 'layers/median', rowsSpec('float32', m), array('array'));
  await putGroup(store, 'obs', {
    _index: '_index',
    'column-order': [...obsColumns, REGION_KEY],
    'encoding-type': 'dataframe',
    'encoding-version': '0.2.0',
  });
  const index = await RowArray.create(store, 'obs/_index', rowsSpec('string', null), array('string-array'));
  const columns = await Promise.all(
    obsColumns.map(async (name) => {
      const kind = instances.kinds.get(name)!;
      return {
        name,
        kind,
        column: await RowArray.create(store, `obs/${name}`, rowsSpec(kind, null), array('array')),
      };
    }),
  );
  await putGroup(store, `obs/${REGION_KEY}`, { ordered: false, ...array('categorical') });
  await putSmallArray(
    store,
    `obs/${REGION_KEY}/categories`,
    'string',
    [options.region],
    array('string-array'),
  );
  const regionCodes = await RowArray.create(
    store,
    `obs/${REGION_KEY}/codes`,
    rowsSpec('int8', null),
    array('array'),
  );
  await putGroup(store, 'obsm', dict);
  const spatial = await RowArray.create(store, 'obsm/spatial', rowsSpec('float64', 2), array('array'));

  for await (const block of obsBlocks({ instances, markers }, obsColumns, blockRows, signal)) {
    await index.append(block.index, signal);
    for (const { name, column } of columns) await column.append(block.obs.get(name)!, signal);
    await regionCodes.append(new Int8Array(block.rows), signal);
    await spatial.append(block.spatial, signal);
    await X.append(block.X, signal);
    await median.append(block.median, signal);
  }

  const names = markers.map((marker) => marker.name);
  await putGroup(store, 'var', {
    _index: '_index',
    'column-order': ['feature_types'],
    'encoding-type': 'dataframe',
    'encoding-version': '0.2.0',
  });
  await putSmallArray(store, 'var/_index', 'string', names, array('string-array'));
  const types = names.map(() => 'predicted_marker');
  await putSmallArray(store, 'var/feature_types', 'string', types, array('string-array'));

  await putGroup(store, 'uns', dict);
  await putSmallArray(store, 'uns/mpp', 'float64', options.mpp, array('numeric-scalar'));
  await putGroup(store, 'uns/provenance', dict);
  for (const [key, value] of Object.entries(options.provenance)) {
    await putSmallArray(store, `uns/provenance/${key}`, 'string', value, array('string'));
  }
  await putGroup(store, 'uns/spatialdata_attrs', dict);
  for (const [key, value] of Object.entries(spatialdata)) {
    await putSmallArray(store, `uns/spatialdata_attrs/${key}`, 'string', value, array('string'));
  }
  for (const name of ['obsp', 'varm', 'varp']) await putGroup(store, name, dict);
  return { rows: n, keys };
}
