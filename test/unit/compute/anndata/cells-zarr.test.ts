import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { writeSyntheticCellTables } from '../../../../bench/synthetic-cells';
import { writeCellsTableZarr } from '../../../../compute/anndata';
import { folderStore } from '../../../../compute/zarr';
import { runPythonJson, spatialDataPython } from '../../../support/python';

let folder: string;

beforeAll(async () => {
  folder = await mkdtemp(path.join(os.tmpdir(), 'sps-cells-zarr-'));
});

afterAll(async () => {
  await rm(folder, { recursive: true, force: true });
});

/**
 * A SpatialData store of the table alone (root `spatialdata_attrs` 0.2, `tables/table`), read by
 * `spatialdata.read_zarr`; each part is compared with the Parquet tables it came from.
 */
const check = `
import json, sys, warnings
warnings.simplefilter('ignore')
import numpy as np
import pyarrow.parquet as pq
import spatialdata as sd
from spatialdata.models import TableModel, get_table_keys
store, instances, *markers = sys.argv[1:]
s = sd.read_zarr(store)
a = s.tables['table']
TableModel.validate(a)
table = pq.read_table(instances).to_pandas()
means = np.stack([pq.read_table(m.split('=')[1]).column('mean').to_numpy() for m in markers], axis=1) if markers else np.zeros((len(table), 0))
medians = np.stack([pq.read_table(m.split('=')[1]).column('median').to_numpy() for m in markers], axis=1) if markers else np.zeros((len(table), 0))
obs_columns = [c for c in table.columns if c != 'instance_id']
print(json.dumps({
  'tables': list(s.tables.keys()),
  'keys': list(get_table_keys(a)),
  'shape': list(a.shape),
  'xDtype': str(a.X.dtype),
  'xEqual': bool(np.array_equal(a.X, means.astype(np.float32))),
  'medianEqual': bool(np.array_equal(a.layers['median'], medians.astype(np.float32))),
  'indexEqual': bool((a.obs_names == table['instance_id'].astype(str).to_numpy()).all()),
  'sameObs': all(np.array_equal(a.obs[c].to_numpy(), table[c].to_numpy()) for c in obs_columns),
  'regions': [str(v) for v in a.obs['region'].cat.categories],
  'regionRows': int((a.obs['region'] == 'cells').sum()),
  'labelDtype': str(a.obs['local_label'].dtype),
  'var': list(a.var_names),
  'featureTypes': sorted(set(a.var['feature_types'])) if a.n_vars else [],
  'spatialEqual': bool(np.array_equal(a.obsm['spatial'], table[['centroid_x_um', 'centroid_y_um']].to_numpy())),
  'mpp': float(a.uns['mpp']),
  'provenance': {k: str(v) for k, v in a.uns['provenance'].items()},
}))
`;

interface Checked {
  tables: string[];
  keys: unknown[];
  shape: number[];
  xEqual: boolean;
  medianEqual: boolean;
  indexEqual: boolean;
  sameObs: boolean;
  regions: string[];
  regionRows: number;
  var: string[];
}

/** The table under `tables/table` of a store whose root says it is SpatialData (format 0.2). */
async function spatialDataStore(name: string): Promise<string> {
  const root = path.join(folder, name);
  await mkdir(path.join(root, 'tables'), { recursive: true });
  const group = (attributes: object) => JSON.stringify({ zarr_format: 3, node_type: 'group', attributes });
  await writeFile(path.join(root, 'zarr.json'), group({ spatialdata_attrs: { version: '0.2' } }));
  await writeFile(path.join(root, 'tables', 'zarr.json'), group({}));
  return root;
}

test('SpatialData reads the cell table: X the marker means, obs by instance id, rows tied to the label image', async () => {
  const tables = writeSyntheticCellTables(folder, 20_000, ['DAPI', 'CD3', 'PanCK'], 0.2527);
  const root = await spatialDataStore('three-markers.zarr');
  const written = await writeCellsTableZarr({
    store: folderStore(path.join(root, 'tables', 'table')),
    instances: tables.instances,
    markers: tables.markers,
    mpp: tables.mpp,
    provenance: { layerId: 'layer-1', predictionJobId: 'job-1' },
    region: 'cells',
    blockRows: 8_000,
  });
  expect(written.rows).toBe(20_000);
  const args = [root, tables.instances, ...tables.markers.map((m) => `${m.name}=${m.path}`)];
  const read = await runPythonJson<Checked>(check, args, {}, spatialDataPython());
  expect(read).toMatchObject({
    tables: ['table'],
    keys: ['cells', 'region', 'local_label'],
    shape: [20_000, 3],
    xDtype: 'float32',
    xEqual: true,
    medianEqual: true,
    indexEqual: true,
    sameObs: true,
    regions: ['cells'],
    regionRows: 20_000,
    labelDtype: 'int64',
    var: ['DAPI', 'CD3', 'PanCK'],
    featureTypes: ['predicted_marker'],
    spatialEqual: true,
    mpp: 0.2527,
    provenance: { layerId: 'layer-1', predictionJobId: 'job-1' },
  });
}, 180_000);

test('a layer without marker tables gives cells x 0; a table out of step with the cells is refused', async () => {
  const sub = await mkdtemp(path.join(folder, 'none-'));
  const tables = writeSyntheticCellTables(sub, 500, ['DAPI']);
  const root = await spatialDataStore('no-markers.zarr');
  const store = folderStore(path.join(root, 'tables', 'table'));
  await writeCellsTableZarr({
    store,
    instances: tables.instances,
    markers: [],
    mpp: 0.5,
    provenance: {},
    region: 'cells',
  });
  const read = await runPythonJson<Checked>(check, [root, tables.instances], {}, spatialDataPython());
  expect(read).toMatchObject({ shape: [500, 0], indexEqual: true, sameObs: true, regionRows: 500, var: [] });

  const other = writeSyntheticCellTables(await mkdtemp(path.join(folder, 'other-')), 400, ['DAPI']);
  await expect(
    writeCellsTableZarr({
      store,
      instances: tables.instances,
      markers: other.markers,
      mpp: 0.5,
      provenance: {},
      region: 'cells',
    }),
  ).rejects.toThrow(/DAPI: 400 rows, the instance table has 500/);
}, 180_000);
