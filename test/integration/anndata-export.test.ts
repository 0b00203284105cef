/** @jest-environment ./test/support/onnx-environment.js */
import { mkdtemp, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ExportManifest } from '../../schemas/exports';
import { SegmentationManifest } from '../../schemas/segmentation';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { runPythonJson } from '../support/python';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * `cells.h5ad` of a real layer made by the real worker (the run's processed template, cloned: a
 * slide segmented, a prediction completed and the layer's tables made for it); the manifest
 * names the h5ad, which anndata and scanpy read with X equal to the marker tables' means, and an
 * export that includes the segmentation links it.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let jobId: string;
let manifest: SegmentationManifest;
let scratch: string;

async function download(url: string, name: string, authorized = true): Promise<string> {
  const headers: Record<string, string> = authorized
    ? { authorization: `Bearer ${stack.tenant.apiKey}` }
    : {};
  const response = await fetch(url, { headers });
  expect(response.status).toBe(200);
  const file = path.join(scratch, name);
  await writeFile(file, new Uint8Array(await response.arrayBuffer()));
  return file;
}

beforeAll(async () => {
  stack = await startStack({ sharedSlides: 'processed' });
  call = apiClient(stack.api, stack.tenant.apiKey);
  scratch = await mkdtemp(path.join(testEnv().scratch, 'anndata-'));
  const processed = stack.processedSample();
  ({ sampleId, jobId } = processed);
  expect(processed.markers).toEqual(['DAPI', 'CD3']);
  manifest = SegmentationManifest.parse(
    (await call('GET', `/samples/${sampleId}/segmentation/${processed.layerId}/manifest`)).json,
  );
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

test('the manifest names cells.h5ad; anndata and scanpy read it, X equal to the marker tables', async () => {
  const files = `${stack.api}/samples/${sampleId}/segmentation/${manifest.layerId}/files/`;
  expect(manifest.artifacts.anndata).toEqual({ format: 'h5ad', url: `${files}features/cells.h5ad` });
  const h5ad = await download(manifest.artifacts.anndata!.url, 'cells.h5ad');
  const instances = await download(manifest.artifacts.cells.morphologyUrl, 'instances.parquet');
  const markers = [];
  for (const marker of manifest.artifacts.cells.markers) {
    const file = await download(
      `${manifest.artifacts.cells.markerExpressionBaseUrl}${marker}.parquet`,
      `${marker}.parquet`,
    );
    markers.push(`${marker}=${file}`);
  }
  const sample = (await call('GET', `/samples/${sampleId}`)).json as { mpp: number };
  const read = await runPythonJson<{
    shape: number[];
    var: string[];
    xEqual: boolean;
    index: boolean;
    spatial: boolean;
    mpp: number;
    provenance: Record<string, string>;
    neighbors: number;
  }>(
    `
import json, sys
import anndata as ad, numpy as np, pyarrow.parquet as pq, scanpy as sc
a = ad.read_h5ad(sys.argv[1])
table = pq.read_table(sys.argv[2]).to_pandas()
pairs = [m.split('=', 1) for m in sys.argv[3:]]
means = np.stack([pq.read_table(p).column('mean').to_numpy() for _, p in pairs], axis=1).astype(np.float32)
b = a[:2000].copy()
sc.pp.neighbors(b, use_rep='X', n_neighbors=5, method='gauss')
print(json.dumps({
  'shape': list(a.shape), 'var': list(a.var_names), 'xEqual': bool(np.array_equal(a.X, means)),
  'index': bool((a.obs_names == table['instance_id'].astype(str).to_numpy()).all()),
  'spatial': bool(np.array_equal(a.obsm['spatial'], table[['centroid_x_um', 'centroid_y_um']].to_numpy())),
  'mpp': float(a.uns['mpp']), 'provenance': {k: str(v) for k, v in a.uns['provenance'].items()},
  'neighbors': int(b.obsp['connectivities'].shape[0]),
}))
`,
    [h5ad, instances, ...markers],
  );
  expect(read).toMatchObject({
    shape: [manifest.instanceCount, 2],
    var: ['DAPI', 'CD3'],
    xEqual: true,
    index: true,
    spatial: true,
    provenance: { layerId: manifest.layerId, sampleId, predictionJobId: jobId },
    neighbors: Math.min(2000, manifest.instanceCount),
  });
  expect(read.mpp).toBeCloseTo(sample.mpp, 9);
});

test('an export that includes the segmentation links cells.h5ad', async () => {
  const answer = await call('POST', `/jobs/${jobId}/exports`, {
    format: 'ome-zarr',
    includeSegmentation: true,
  });
  expect(answer.status).toBe(200);
  const exported = ExportManifest.parse(answer.json);
  const link = exported.artifacts.segmentation!.downloads.anndata!;
  expect(link).toMatchObject({ contentType: 'application/x-hdf5' });
  const file = await download(link.downloadUrl, 'exported.h5ad', false);
  const read = await runPythonJson<{ shape: number[] }>(
    `
import json, sys, anndata as ad
print(json.dumps({'shape': list(ad.read_h5ad(sys.argv[1]).shape)}))
`,
    [file],
  );
  expect(read.shape).toEqual([manifest.instanceCount, 2]);
});
