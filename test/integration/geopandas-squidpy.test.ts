/** @jest-environment ./test/support/onnx-environment.js */
import { mkdtemp, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { SegmentationManifest } from '../../schemas/segmentation';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { runPythonJson, spatialDataPython } from '../support/python';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * The README's recipes for a layer's files, run as written, with no flags: the GeoParquet
 * outlines with `geopandas.read_parquet` (joined to the morphology table on `instance_id`),
 * and `cells.h5ad` with squidpy's spatial graph and Moran's I over `obsm["spatial"]`. Both
 * readers come with SpatialData, so they run in its venv.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let manifest: SegmentationManifest;
let scratch: string;

async function download(url: string, name: string): Promise<string> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${stack.tenant.apiKey}` } });
  expect(response.status).toBe(200);
  const file = path.join(scratch, name);
  await writeFile(file, new Uint8Array(await response.arrayBuffer()));
  return file;
}

beforeAll(async () => {
  stack = await startStack({ sharedSlides: 'processed' });
  call = apiClient(stack.api, stack.tenant.apiKey);
  scratch = await mkdtemp(path.join(testEnv().scratch, 'geopandas-squidpy-'));
  const processed = stack.processedSample();
  sampleId = processed.sampleId;
  manifest = SegmentationManifest.parse(
    (await call('GET', `/samples/${sampleId}/segmentation/${processed.layerId}/manifest`)).json,
  );
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

test('geopandas.read_parquet opens the outlines as a GeoDataFrame of polygons that joins the morphology table', async () => {
  const outlines = await download(manifest.artifacts.outlines!.geoparquetUrl, 'outlines.parquet');
  const instances = await download(manifest.artifacts.cells.morphologyUrl, 'instances.parquet');
  const read = await runPythonJson<Record<string, unknown>>(
    `
import json, sys, warnings
warnings.simplefilter('ignore')
import geopandas as gpd, pandas as pd
cells = gpd.read_parquet(sys.argv[1])
morphology = pd.read_parquet(sys.argv[2])
joined = cells.merge(morphology, on='instance_id')
drawn = cells[~cells.geometry.is_empty]
print(json.dumps({
  'type': type(cells).__name__, 'rows': len(cells), 'crs': cells.crs, 'active': cells.geometry.name,
  'types': sorted(set(drawn.geom_type)), 'joined': len(joined),
  'areaCorrelates': bool(drawn.geometry.area.corr(joined.loc[drawn.index, 'area_px']) > 0.9),
}))
`,
    [outlines, instances],
    {},
    spatialDataPython(),
  );
  expect(read).toEqual({
    type: 'GeoDataFrame',
    rows: manifest.instanceCount,
    crs: null,
    active: 'geometry',
    types: expect.arrayContaining(['Polygon']),
    joined: manifest.instanceCount,
    areaCorrelates: true,
  });
}, 120_000);

test('squidpy builds the spatial graph of cells.h5ad and scores every marker (Moran I)', async () => {
  const h5ad = await download(manifest.artifacts.anndata!.url, 'cells.h5ad');
  const read = await runPythonJson<Record<string, unknown>>(
    `
import contextlib, io, json, sys, warnings
warnings.simplefilter('ignore')
import anndata as ad, numpy as np, squidpy as sq
a = ad.read_h5ad(sys.argv[1])
# squidpy logs its progress on stdout, where the answer goes.
with contextlib.redirect_stdout(io.StringIO()):
    sq.gr.spatial_neighbors(a, coord_type='generic', n_neighs=6)
    sq.gr.spatial_autocorr(a, mode='moran', n_perms=None)
moran = a.uns['moranI']
print(json.dumps({
  'cells': int(a.n_obs), 'edges': int(a.obsp['spatial_connectivities'].nnz),
  'scored': sorted(moran.index.astype(str)), 'finite': bool(np.isfinite(moran['I']).all()),
}))
`,
    [h5ad],
    {},
    spatialDataPython(),
  );
  expect(read).toEqual({
    cells: manifest.instanceCount,
    edges: expect.any(Number),
    scored: [...manifest.artifacts.cells.markers].sort(),
    finite: true,
  });
  expect(read.edges as number).toBeGreaterThanOrEqual(manifest.instanceCount);
}, 120_000);
