import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { writeSyntheticCellTables } from '../../../../bench/synthetic-cells';
import { writeCellsH5ad } from '../../../../compute/anndata';
import { runPythonJson } from '../../../support/python';

let folder: string;

beforeAll(async () => {
  folder = await mkdtemp(path.join(os.tmpdir(), 'sps-h5ad-'));
});

afterAll(async () => {
  await rm(folder, { recursive: true, force: true });
});

/** anndata and scanpy read the file; each part is compared with the Parquet tables it came from. */
const check = `
import json, sys
import anndata as ad
import numpy as np
import pyarrow.parquet as pq
import scanpy as sc
h5ad, instances, *markers = sys.argv[1:]
a = ad.read_h5ad(h5ad)
table = pq.read_table(instances).to_pandas()
names = [m.split('=')[0] for m in markers]
means = np.stack([pq.read_table(m.split('=')[1]).column('mean').to_numpy() for m in markers], axis=1) if markers else np.zeros((len(table), 0))
medians = np.stack([pq.read_table(m.split('=')[1]).column('median').to_numpy() for m in markers], axis=1) if markers else np.zeros((len(table), 0))
obs_columns = [c for c in table.columns if c != 'instance_id']
same_obs = all(np.array_equal(a.obs[c].to_numpy(), table[c].to_numpy()) for c in obs_columns)
out = {
  'shape': list(a.shape),
  'xDtype': str(a.X.dtype),
  'xEqual': bool(np.array_equal(a.X, means.astype(np.float32))),
  'medianEqual': bool(np.array_equal(a.layers['median'], medians.astype(np.float32))),
  'indexIsString': all(isinstance(i, str) for i in a.obs_names[:10]),
  'indexEqual': bool((a.obs_names == table['instance_id'].astype(str).to_numpy()).all()),
  'obsColumns': list(a.obs.columns),
  'sameObs': bool(same_obs),
  'labelDtype': str(a.obs['local_label'].dtype),
  'var': list(a.var_names),
  'spatialEqual': bool(np.array_equal(a.obsm['spatial'], table[['centroid_x_um', 'centroid_y_um']].to_numpy())),
  'mpp': float(a.uns['mpp']),
  'provenance': {k: str(v) for k, v in a.uns['provenance'].items()},
}
if a.n_vars > 0:
  # scanpy's graph on expression and on position (a slice: the check is that it reads, not speed).
  b = a[:2000].copy()
  sc.pp.neighbors(b, use_rep='X', n_neighbors=5, method='gauss')
  sc.pp.neighbors(b, use_rep='spatial', n_neighbors=5, method='gauss', key_added='spatial')
  out['neighbors'] = [int(b.obsp['connectivities'].shape[0]), int(b.obsp['spatial_connectivities'].nnz > 0)]
print(json.dumps(out))
`;

interface Checked {
  shape: number[];
  xDtype: string;
  xEqual: boolean;
  medianEqual: boolean;
  indexIsString: boolean;
  indexEqual: boolean;
  obsColumns: string[];
  sameObs: boolean;
  labelDtype: string;
  var: string[];
  spatialEqual: boolean;
  mpp: number;
  provenance: Record<string, string>;
  neighbors?: number[];
}

test('cells.h5ad holds the tables: X the marker means, obs by instance id, spatial in microns', async () => {
  const tables = writeSyntheticCellTables(folder, 20_000, ['DAPI', 'CD3', 'PanCK'], 0.2527);
  const file = path.join(folder, 'cells.h5ad');
  const progress: number[] = [];
  const written = await writeCellsH5ad({
    path: file,
    instances: tables.instances,
    markers: tables.markers,
    mpp: tables.mpp,
    provenance: { layerId: 'layer-1', predictionJobId: 'job-1' },
    blockRows: 8_000,
    onProgress: ({ rows }) => progress.push(rows),
  });
  expect(written.rows).toBe(20_000);
  expect(written.sizeBytes).toBeGreaterThan(20_000 * 20 * 8);
  expect(progress).toEqual([8_000, 16_000, 20_000]);
  const read = await runPythonJson<Checked>(check, [
    file,
    tables.instances,
    ...tables.markers.map((m) => `${m.name}=${m.path}`),
  ]);
  expect(read).toMatchObject({
    shape: [20_000, 3],
    xDtype: 'float32',
    xEqual: true,
    medianEqual: true,
    indexIsString: true,
    indexEqual: true,
    sameObs: true,
    labelDtype: 'int64',
    var: ['DAPI', 'CD3', 'PanCK'],
    spatialEqual: true,
    mpp: 0.2527,
    provenance: { layerId: 'layer-1', predictionJobId: 'job-1' },
    neighbors: [2_000, 1],
  });
  expect(read.obsColumns).toContain('area_um2');
  expect(read.obsColumns).not.toContain('instance_id');
}, 120_000);

test('a layer without marker tables gives cells x 0; a table out of step with the cells is refused', async () => {
  const sub = await mkdtemp(path.join(folder, 'none-'));
  const tables = writeSyntheticCellTables(sub, 500, ['DAPI']);
  const file = path.join(sub, 'cells.h5ad');
  await writeCellsH5ad({ path: file, instances: tables.instances, markers: [], mpp: 0.5, provenance: {} });
  const read = await runPythonJson<Checked>(check, [file, tables.instances]);
  expect(read).toMatchObject({ shape: [500, 0], indexEqual: true, var: [] });

  const other = writeSyntheticCellTables(await mkdtemp(path.join(folder, 'other-')), 400, ['DAPI']);
  await expect(
    writeCellsH5ad({
      path: file,
      instances: tables.instances,
      markers: other.markers,
      mpp: 0.5,
      provenance: {},
    }),
  ).rejects.toThrow(/DAPI: 400 rows, the instance table has 500/);
}, 120_000);
