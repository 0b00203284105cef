import { parentPort, workerData } from 'node:worker_threads';
import type { Dataset, Group } from 'h5wasm/node';
import type { CellsH5adJob } from './cells-h5ad';
import { type Column, INDEX_COLUMN, obsBlocks, openCellTables } from './parquet-columns';

/**
 * Writes `cells.h5ad` in AnnData's HDF5 encoding (anndata.readthedocs.io, "On-disk format"):
 * h5wasm (HDF5 compiled to WebAssembly) writes the real file system here, synchronously, which
 * is why this runs on a worker thread: the activity's heartbeats go on meanwhile. Every table
 * is read block by block (one Parquet row group) and appended to resizable datasets, so memory
 * holds one block whatever the cell count.
 */

/** Decimal digits of the largest uint64: the fixed width of the index strings. */
const ID_WIDTH = 20;

const encoding = (group: Dataset | Group, type: string, version: string) => {
  group.create_attribute('encoding-type', type);
  group.create_attribute('encoding-version', version);
};

/** A 1-D or 2-D dataset that grows by blocks of rows (chunked by the block size). */
class RowDataset {
  private rows = 0;
  readonly dataset: Dataset;

  constructor(
    group: Group,
    name: string,
    empty: Column | string[],
    width: number | null,
    blockRows: number,
    dtype?: string,
  ) {
    const shape = width === null ? [0] : [0, width];
    this.dataset = group.create_dataset({
      name,
      data: empty,
      shape,
      maxshape: width === null ? [null] : [null, width],
      chunks: width === null ? [blockRows] : [blockRows, Math.max(1, width)],
      dtype: dtype ?? null,
    });
  }

  append(block: Column | string[], blockRows: number): void {
    const end = this.rows + blockRows;
    const width = this.dataset.shape!.length === 2 ? this.dataset.shape![1]! : null;
    this.dataset.resize(width === null ? [end] : [end, width]);
    if (blockRows > 0 && width !== 0)
      this.dataset.write_slice(width === null ? [[this.rows, end]] : [[this.rows, end], []], block);
    this.rows = end;
  }
}

async function write(job: CellsH5adJob): Promise<number> {
  // h5wasm offers its module to `import` only (no `require` condition), so a real dynamic import.
  const { File, ready } = await import('h5wasm/node');
  await ready;
  const { instances, markers } = await openCellTables(job.instances, job.markers);
  const obsColumns = instances.names.filter((name) => name !== INDEX_COLUMN);
  const n = instances.rows;
  const m = markers.length;
  const blockRows = Math.max(1, Math.min(job.blockRows, n || 1));

  const file = new File(job.path, 'w');
  try {
    encoding(file, 'anndata', '0.1.0');
    const X = new RowDataset(file, 'X', new Float32Array(0), m, blockRows);
    encoding(X.dataset, 'array', '0.2.0');
    const layers = file.create_group('layers');
    encoding(layers, 'dict', '0.1.0');
    const median = new RowDataset(layers, 'median', new Float32Array(0), m, blockRows);
    encoding(median.dataset, 'array', '0.2.0');

    const obs = file.create_group('obs');
    encoding(obs, 'dataframe', '0.2.0');
    obs.create_attribute('_index', '_index');
    obs.create_attribute('column-order', obsColumns);
    const index = new RowDataset(obs, '_index', [], null, blockRows, `S${ID_WIDTH}`);
    encoding(index.dataset, 'string-array', '0.2.0');
    const columns = obsColumns.map((name) => {
      const kind = instances.kinds.get(name)!;
      const empty =
        kind === 'int64' ? new BigInt64Array(0) : kind === 'int32' ? new Int32Array(0) : new Float64Array(0);
      const column = new RowDataset(obs, name, empty, null, blockRows);
      encoding(column.dataset, 'array', '0.2.0');
      return { name, kind, column };
    });
    const obsm = file.create_group('obsm');
    encoding(obsm, 'dict', '0.1.0');
    const spatial = new RowDataset(obsm, 'spatial', new Float64Array(0), 2, blockRows);
    encoding(spatial.dataset, 'array', '0.2.0');

    for await (const block of obsBlocks({ instances, markers }, obsColumns, blockRows)) {
      index.append(block.index, block.rows);
      for (const { name, column } of columns) column.append(block.obs.get(name)!, block.rows);
      spatial.append(block.spatial, block.rows);
      X.append(block.X, block.rows);
      median.append(block.median, block.rows);
      parentPort?.postMessage({ type: 'progress', rows: block.end, total: n });
    }

    const variables = file.create_group('var');
    encoding(variables, 'dataframe', '0.2.0');
    variables.create_attribute('_index', '_index');
    variables.create_attribute('column-order', ['feature_types']);
    const names = markers.map((marker) => marker.name);
    const varIndex = variables.create_dataset({ name: '_index', data: names, shape: [m], dtype: 'S' });
    encoding(varIndex, 'string-array', '0.2.0');
    const types = variables.create_dataset({
      name: 'feature_types',
      data: names.map(() => 'predicted_marker'),
      shape: [m],
      dtype: 'S',
    });
    encoding(types, 'string-array', '0.2.0');

    const uns = file.create_group('uns');
    encoding(uns, 'dict', '0.1.0');
    const mpp = uns.create_dataset({ name: 'mpp', data: new Float64Array([job.mpp]), shape: [] });
    encoding(mpp, 'numeric-scalar', '0.2.0');
    const provenance = uns.create_group('provenance');
    encoding(provenance, 'dict', '0.1.0');
    for (const [key, value] of Object.entries(job.provenance)) {
      const entry = provenance.create_dataset({ name: key, data: value });
      encoding(entry, 'string', '0.2.0');
    }
    for (const name of ['obsp', 'varm', 'varp']) encoding(file.create_group(name), 'dict', '0.1.0');
  } finally {
    file.close();
  }
  return n;
}

write(workerData as CellsH5adJob).then(
  (rows) => parentPort?.postMessage({ type: 'done', rows }),
  (err: unknown) =>
    parentPort?.postMessage({ type: 'error', message: err instanceof Error ? err.message : String(err) }),
);
