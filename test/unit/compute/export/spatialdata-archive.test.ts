import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { writeSyntheticCellTables } from '../../../../bench/synthetic-cells';
import { writeCellsTableZarr } from '../../../../compute/anndata';
import { planPredictionArchive, writeZarrZip } from '../../../../compute/export';
import { folderStore } from '../../../../compute/zarr';
import { runPythonJson, spatialDataPython } from '../../../support/python';
import { predictionLayout, writeCmuPyramid, writeSyntheticMask, writeSyntheticPrediction } from './sources';

/**
 * The zipped prediction export unpacked (spatialdata 0.7.3 reads a local folder only), read by
 * `spatialdata.read_zarr`; every level compared with zarr-python's read of the source stores:
 * the H&E, the markers stacked as the channels of one image, the mask as 2-D labels, the
 * table. ome-zarr-py (the version in this venv) reads the element groups as well.
 */
const check = `
import json, sys, tempfile, warnings, zipfile
warnings.simplefilter('ignore')
import numpy as np
import spatialdata as sd
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
archive, prediction, he, mask = sys.argv[1:]
out = tempfile.mkdtemp()
zipfile.ZipFile(archive).extractall(out)
s = sd.read_zarr(out)
levels = lambda tree: [tree[k]['image'] for k in sorted(tree.keys(), key=lambda k: int(k[5:]))]
image, predicted, labels = s.images['he'], s.images['prediction'], s.labels['cells']
he_source = zarr.open_group(he, mode='r')
mask_source = zarr.open_group(mask, mode='r')
prediction_source = zarr.open_group(prediction, mode='r')
markers = prediction_source.attrs['prediction']['markers']
table = s.tables['table']
scales = lambda element: [float(v) for v in sd.transformations.get_transformation(element, 'global').to_affine_matrix(('x', 'y'), ('x', 'y')).diagonal()[:2]]
print(json.dumps({
  'images': sorted(s.images), 'labels': list(s.labels), 'tables': list(s.tables),
  'heDims': list(levels(image)[0].dims),
  'heChannels': [str(c) for c in levels(image)[0].coords['c'].values],
  'heLevels': [list(a.shape) for a in levels(image)],
  'heEqual': [bool(np.array_equal(a.values, he_source[str(i)][:])) for i, a in enumerate(levels(image))],
  'predictionChannels': [str(c) for c in levels(predicted)[0].coords['c'].values],
  'markers': markers,
  'predictionEqual': [bool(np.array_equal(a.values, np.concatenate([prediction_source[f'markers/{m}/{i}'][:] for m in markers]))) for i, a in enumerate(levels(predicted))],
  'labelDims': list(levels(labels)[0].dims),
  'labelLevels': [list(a.shape) for a in levels(labels)],
  'labelEqual': [bool(np.array_equal(a.values, mask_source[str(i)][0])) for i, a in enumerate(levels(labels))],
  'heToGlobal': scales(image), 'predictionToGlobal': scales(predicted), 'labelToGlobal': scales(labels),
  'tableShape': list(table.shape),
  'tableRegion': table.uns['spatialdata_attrs']['region'],
  'regions': sorted(set(table.obs['region'].astype(str))),
  'omeZarr': [len(list(Reader(parse_url(f'{out}/{p}'))())[0].data) for p in ['images/he', 'images/prediction', 'labels/cells']],
}))
`;

interface Checked {
  images: string[];
  labels: string[];
  tables: string[];
  heDims: string[];
  heChannels: string[];
  heLevels: number[][];
  heEqual: boolean[];
  predictionChannels: string[];
  markers: string[];
  predictionEqual: boolean[];
  labelDims: string[];
  labelLevels: number[][];
  labelEqual: boolean[];
  heToGlobal: number[];
  predictionToGlobal: number[];
  labelToGlobal: number[];
  tableShape: number[];
  tableRegion: string;
  regions: string[];
  omeZarr: number[];
}

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'sps-spatialdata-zip-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('SpatialData reads the zipped export: H&E, stacked markers, cell labels and cell table, as stored', async () => {
  const he = path.join(dir, 'he');
  const mask = path.join(dir, 'mask');
  const prediction = path.join(dir, 'prediction');
  const mpp = await writeCmuPyramid(folderStore(he));
  await writeSyntheticMask(folderStore(mask), { widthPx: 2220, heightPx: 2967, pixelSizeUm: mpp });
  const layout = predictionLayout({ widthPx: 1110, heightPx: 1483, pixelSizeUm: 2 * mpp });
  await writeSyntheticPrediction(folderStore(prediction), layout);
  const tables = writeSyntheticCellTables(path.join(dir), 1_000, ['DAPI', 'CD3'], mpp);
  const tableSink = folderStore(path.join(dir, 'table'));
  const { keys } = await writeCellsTableZarr({
    store: tableSink,
    instances: tables.instances,
    markers: tables.markers,
    mpp,
    provenance: { layerId: 'layer-1' },
    region: 'cells',
  });
  const entries = await planPredictionArchive({
    prediction: folderStore(prediction),
    he: folderStore(he),
    labels: folderStore(mask),
    table: { sink: tableSink, keys },
  });
  const zip = path.join(dir, 'export.ome.zarr.zip');
  await writeZarrZip(zip, entries);

  const read = await runPythonJson<Checked>(check, [zip, prediction, he, mask], {}, spatialDataPython());
  expect(read).toMatchObject({
    images: ['he', 'prediction'],
    labels: ['cells'],
    tables: ['table'],
    heDims: ['c', 'y', 'x'],
    heChannels: ['R', 'G', 'B'],
    labelDims: ['y', 'x'],
    tableShape: [1_000, 2],
    tableRegion: 'cells',
    regions: ['cells'],
  });
  expect(read.markers).toEqual(layout.markers);
  expect(read.predictionChannels).toEqual(layout.markers);
  expect(read.heLevels[0]).toEqual([3, 2967, 2220]);
  expect(read.labelLevels[0]).toEqual([2967, 2220]);
  for (const equal of [read.heEqual, read.predictionEqual, read.labelEqual]) {
    expect(equal.length).toBeGreaterThan(1);
    expect(equal.every(Boolean)).toBe(true);
  }
  for (const scale of [...read.heToGlobal, ...read.labelToGlobal]) expect(scale).toBeCloseTo(mpp, 9);
  for (const scale of read.predictionToGlobal) expect(scale).toBeCloseTo(2 * mpp, 9);
  expect(read.omeZarr).toEqual([read.heLevels.length, read.predictionEqual.length, read.labelLevels.length]);
}, 300_000);

test('a cell table needs the labels its rows annotate', async () => {
  const prediction = path.join(dir, 'prediction');
  const table = { sink: folderStore(path.join(dir, 'table')), keys: [] };
  await expect(planPredictionArchive({ prediction: folderStore(prediction), table })).rejects.toThrow(
    'a cell table needs its labels',
  );
});
