/** @jest-environment ./test/support/onnx-environment.js */
import { mkdtemp, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { SegmentationManifest, SegmentationState } from '../../schemas/segmentation';
import { segmentationLayerFiles } from '../../storage/locator';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { runPythonJson } from '../support/python';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * The cell outlines of a real slide's layer made by the real worker (the run's processed
 * template, cloned: segmented, predicted and the marker tables made): `features/cells.geojson`
 * read with shapely, every polygon rasterised over its pixel centres and checked against its
 * label in the uint32 mask (read with zarr-python); `features/outlines.parquet` read with
 * pyarrow, its WKB decoded by shapely and its `geo` metadata checked; the key-value metadata of
 * the layer's Parquet files.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
/** The processed template's prediction, whose marker tables the layer holds. */
let jobId: string;
let state: SegmentationState;
let manifest: SegmentationManifest;
let scratch: string;

/** Downloads a layer file through the API into the scratch folder; answers its local path. */
async function download(url: string, name: string): Promise<{ file: string; contentType: string | null }> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${stack.tenant.apiKey}` } });
  expect(response.status).toBe(200);
  const file = path.join(scratch, name);
  await writeFile(file, new Uint8Array(await response.arrayBuffer()));
  return { file, contentType: response.headers.get('content-type') };
}

async function maskRoot(): Promise<string> {
  const [row] = await stack.sql<{ prefix: string }[]>`
    SELECT layer_prefix AS prefix FROM segmentation_runs WHERE layer_id = ${state.layer!.id}`;
  return path.join(stack.fsRoot, row!.prefix, segmentationLayerFiles.mask);
}

beforeAll(async () => {
  stack = await startStack({ sharedSlides: 'processed' });
  call = apiClient(stack.api, stack.tenant.apiKey);
  scratch = await mkdtemp(path.join(testEnv().scratch, 'segmentation-outlines-'));
  ({ sampleId, jobId } = stack.processedSample());
  state = SegmentationState.parse((await call('GET', `/samples/${sampleId}/segmentation`)).json);
  expect({ status: state.status, error: state.job?.errorMessage }).toEqual({
    status: 'completed',
    error: null,
  });
  expect(state.layer!.id).toBe(stack.processedSample().layerId);
  manifest = SegmentationManifest.parse(
    (await call('GET', `/samples/${sampleId}/segmentation/${state.layer!.id}/manifest`)).json,
  );
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

test('the manifest names the outlines with URLs of this API', () => {
  const files = `${stack.api}/samples/${sampleId}/segmentation/${manifest.layerId}/files/`;
  expect(manifest.artifacts.outlines).toEqual({
    geojsonUrl: `${files}features/cells.geojson`,
    geoparquetUrl: `${files}features/outlines.parquet`,
    joinKey: 'instance_id',
    maskJoinKey: 'local_label',
  });
});

test('every GeoJSON cell, rasterised, matches its mask label with IoU >= 0.95, and holds its nucleus', async () => {
  const geojson = await download(manifest.artifacts.outlines!.geojsonUrl, 'cells.geojson');
  expect(geojson.contentType).toBe('application/geo+json');
  const read = await runPythonJson<{
    features: number;
    objectTypes: string[];
    missing: number[];
    duplicates: number;
    minIou: number;
    below: number[][];
    measured: number;
    labelsInMask: number;
    nuclei: number;
    nucleusAreaOff: number[][];
  }>(
    `
import json, sys, zarr, numpy as np, shapely
from scipy import ndimage
collection = json.load(open(sys.argv[1]))
group = zarr.open_group(sys.argv[2], mode='r')
mask = group[group.attrs['ome']['multiscales'][0]['datasets'][0]['path']][0]
slices = ndimage.find_objects(mask)
present = {i + 1 for i, s in enumerate(slices) if s is not None}
seen, below, types, measured, min_iou = set(), [], set(), 0, 1.0
nuclei, off, mpp = 0, [], float(sys.argv[3])
duplicates = 0
for feature in collection['features']:
    props = feature['properties']
    types.add(props['objectType'])
    label = props['local_label']
    duplicates += label in seen
    seen.add(label)
    measured += 'Cell: Area µm^2' in props['measurements']
    if 'nucleusGeometry' in feature:
        nuclei += 1
        nucleus = shapely.geometry.shape(feature['nucleusGeometry'])
        nx0, ny0, nx1, ny1 = (int(v) for v in nucleus.bounds)
        cx, cy = np.meshgrid(np.arange(nx0, nx1) + 0.5, np.arange(ny0, ny1) + 0.5)
        centres = int(shapely.contains_xy(nucleus, cx, cy).sum())
        expected = round(props['measurements']['Nucleus: Area µm^2'] / mpp ** 2)
        if centres != expected: off.append([label, centres, expected])
    geometry = shapely.geometry.shape(feature['geometry'])
    ys, xs = slices[label - 1] if label <= len(slices) and slices[label - 1] is not None else (slice(0, 0), slice(0, 0))
    minx, miny, maxx, maxy = geometry.bounds
    x0, y0 = int(min(np.floor(minx), xs.start if xs.stop else minx)), int(min(np.floor(miny), ys.start if ys.stop else miny))
    x1, y1 = int(max(np.ceil(maxx), xs.stop or maxx)), int(max(np.ceil(maxy), ys.stop or maxy))
    gx, gy = np.meshgrid(np.arange(x0, x1) + 0.5, np.arange(y0, y1) + 0.5)
    drawn = shapely.contains_xy(geometry, gx, gy)
    truth = np.zeros_like(drawn)
    cy0, cx0 = max(y0, 0), max(x0, 0)
    truth[cy0 - y0:y1 - y0, cx0 - x0:x1 - x0] = mask[cy0:y1, cx0:x1] == label
    iou = (drawn & truth).sum() / max((drawn | truth).sum(), 1)
    min_iou = min(min_iou, float(iou))
    if iou < 0.95: below.append([label, float(iou)])
print(json.dumps({'features': len(collection['features']), 'objectTypes': sorted(types),
  'missing': sorted(present - seen)[:10], 'duplicates': duplicates, 'minIou': min_iou, 'below': below[:10],
  'measured': measured, 'labelsInMask': len(present), 'nuclei': nuclei, 'nucleusAreaOff': off[:10]}))
`,
    [geojson.file, await maskRoot(), String((await call('GET', `/samples/${sampleId}`)).json.mpp)],
  );
  expect(read).toMatchObject({
    objectTypes: ['cell'],
    missing: [],
    duplicates: 0,
    below: [],
    nucleusAreaOff: [],
  });
  // Every cell grew from a nucleus: its outline holds exactly the nucleus's pixel centres.
  expect(read.nuclei).toBe(read.features);
  expect(read.features).toBe(read.labelsInMask);
  expect(read.measured).toBe(read.features);
  expect(read.features).toBeGreaterThan(0.95 * manifest.instanceCount);
  expect(read.minIou).toBeGreaterThanOrEqual(0.95);
});

test('the GeoParquet outlines decode with shapely, row for row with the instance table', async () => {
  const outlines = await download(manifest.artifacts.outlines!.geoparquetUrl, 'outlines.parquet');
  const geojson = await download(manifest.artifacts.outlines!.geojsonUrl, 'cells-2.geojson');
  const instances = await download(manifest.artifacts.cells.morphologyUrl, 'instances.parquet');
  const read = await runPythonJson<{
    rows: number;
    columns: string[];
    sameIds: boolean;
    geo: Record<string, unknown>;
    types: string[];
    empty: number;
    sameAsGeojson: number;
    kv: Record<string, Record<string, string>>;
  }>(
    `
import json, sys, shapely, pyarrow.parquet as pq
table = pq.read_table(sys.argv[1])
instances = pq.read_table(sys.argv[3])
geometries = shapely.from_wkb(table.column('geometry').to_pylist())
by_label = {f['properties']['local_label']: shapely.geometry.shape(f['geometry']) for f in json.load(open(sys.argv[2]))['features']}
labels = table.column('local_label').to_pylist()
same = sum(1 for label, g in zip(labels, geometries) if label in by_label and shapely.equals_exact(g, by_label[label], 0))
kv = {}
for name, path in (('outlines', sys.argv[1]), ('instances', sys.argv[3])):
    meta = pq.read_metadata(path).metadata
    kv[name] = {k.decode(): v.decode() for k, v in meta.items() if k != b'ARROW:schema'}
print(json.dumps({'rows': table.num_rows, 'columns': table.column_names,
  'sameIds': table.column('instance_id').to_pylist() == instances.column('instance_id').to_pylist(),
  'geo': json.loads(kv['outlines'].pop('geo')), 'types': sorted({g.geom_type for g in geometries}),
  'empty': int(shapely.is_empty(geometries).sum()), 'sameAsGeojson': same, 'kv': kv}))
`,
    [outlines.file, geojson.file, instances.file],
  );
  expect(read).toMatchObject({
    rows: manifest.instanceCount,
    columns: ['instance_id', 'local_label', 'geometry', 'nucleus_geometry'],
    sameIds: true,
    geo: {
      version: '1.1.0',
      primary_column: 'geometry',
      columns: {
        geometry: { encoding: 'WKB', crs: null },
        nucleus_geometry: { encoding: 'WKB', crs: null },
      },
    },
  });
  expect(read.types).toContain('Polygon');
  expect(read.sameAsGeojson).toBe(read.rows - read.empty);
  const detail = (await call('GET', `/samples/${sampleId}`)).json;
  const metadata = {
    mpp: String(detail.mpp),
    units: 'micrometer',
    coordinate_frame: 'he-level-0-pixels',
    layer_id: manifest.layerId,
    schema_version: '1.0',
  };
  expect(read.kv.outlines).toMatchObject(metadata);
  expect(read.kv.instances).toMatchObject(metadata);
});

test("an export of the segmentation job links the outlines, pinned to the layer's files", async () => {
  const exported = await call('POST', `/jobs/${state.job!.id}/exports`, { format: 'ome-zarr' });
  expect(exported.status).toBe(200);
  const outlines = exported.json.artifacts.segmentation.downloads.outlines;
  expect(outlines).toMatchObject({
    geojson: { contentType: 'application/geo+json' },
    geoparquet: { contentType: 'application/vnd.apache.parquet' },
  });
  for (const link of [outlines.geojson, outlines.geoparquet]) {
    const response = await fetch(link.downloadUrl);
    expect(response.status).toBe(200);
    expect((await response.arrayBuffer()).byteLength).toBe(link.sizeBytes);
  }
});

test("after a prediction the GeoJSON carries each cell its marker means, those of the job's marker table", async () => {
  const geojson = await download(manifest.artifacts.outlines!.geojsonUrl, 'cells-cd3.geojson');
  const cd3 = await download(`${manifest.artifacts.cells.markerExpressionBaseUrl}CD3.parquet`, 'CD3.parquet');
  const read = await runPythonJson<{
    features: number;
    withMean: number;
    equal: number;
    kv: Record<string, string>;
  }>(
    `
import json, sys, pyarrow.parquet as pq
table = pq.read_table(sys.argv[2]).to_pydict()
means = dict(zip((str(i) for i in table['instance_id']), table['mean']))
features = json.load(open(sys.argv[1]))['features']
with_mean = [f for f in features if 'Cell: CD3 mean' in f['properties']['measurements']]
equal = sum(1 for f in with_mean if f['properties']['measurements']['Cell: CD3 mean'] == means[f['properties']['instance_id']])
kv = {k.decode(): v.decode() for k, v in pq.read_metadata(sys.argv[2]).metadata.items() if k != b'ARROW:schema'}
print(json.dumps({'features': len(features), 'withMean': len(with_mean), 'equal': equal, 'kv': kv}))
`,
    [geojson.file, cd3.file],
  );
  expect(read.withMean).toBe(read.features);
  expect(read.equal).toBe(read.features);
  expect(read.kv).toMatchObject({
    layer_id: manifest.layerId,
    schema_version: '1.0',
    marker: 'CD3',
    prediction_job_id: jobId,
  });
});
