import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { writeSyntheticCellTables } from '../../../../bench/synthetic-cells';
import { writeCellsTableZarr } from '../../../../compute/anndata';
import { planSpatialDataArchive, writeZarrZip } from '../../../../compute/export';
import { folderStore } from '../../../../compute/zarr';
import { runPythonJson, spatialDataPython } from '../../../support/python';
import { writeCmuPyramid, writeSyntheticMask } from './sources';

/**
 * The zip unpacked (spatialdata 0.7.3 reads a table by local path only), read by
 * `spatialdata.read_zarr`; every level compared with zarr-python's read of the source stores.
 * ome-zarr-py (the version in this venv) reads the element groups as well.
 */
const check = `
import json, sys, tempfile, warnings, zipfile
warnings.simplefilter('ignore')
import numpy as np
import spatialdata as sd
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
archive, he, mask = sys.argv[1:]
out = tempfile.mkdtemp()
zipfile.ZipFile(archive).extractall(out)
s = sd.read_zarr(out)
image = s.images['he']
labels = s.labels['cells']
levels = lambda tree: [tree[k]['image'] for k in sorted(tree.keys(), key=lambda k: int(k[5:]))]
he_source = zarr.open_group(he, mode='r')
mask_source = zarr.open_group(mask, mode='r')
table = s.tables['table']
print(json.dumps({
  'images': list(s.images), 'labels': list(s.labels), 'tables': list(s.tables),
  'heDims': list(levels(image)[0].dims),
  'heChannels': [str(c) for c in levels(image)[0].coords['c'].values],
  'heLevels': [list(a.shape) for a in levels(image)],
  'heEqual': [bool(np.array_equal(a.values, he_source[str(i)][:])) for i, a in enumerate(levels(image))],
  'labelDims': list(levels(labels)[0].dims),
  'labelLevels': [list(a.shape) for a in levels(labels)],
  'labelEqual': [bool(np.array_equal(a.values, mask_source[str(i)][0])) for i, a in enumerate(levels(labels))],
  'heToGlobal': [float(v) for v in sd.transformations.get_transformation(image, 'global').to_affine_matrix(('x', 'y'), ('x', 'y')).diagonal()[:2]],
  'labelToGlobal': [float(v) for v in sd.transformations.get_transformation(labels, 'global').to_affine_matrix(('x', 'y'), ('x', 'y')).diagonal()[:2]],
  'tableShape': list(table.shape),
  'tableRegion': table.uns['spatialdata_attrs']['region'],
  'omeZarr': [len(list(Reader(parse_url(f'{out}/{p}'))())[0].data) for p in ['images/he', 'labels/cells']],
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
  labelDims: string[];
  labelLevels: number[][];
  labelEqual: boolean[];
  heToGlobal: number[];
  labelToGlobal: number[];
  tableShape: number[];
  tableRegion: string;
  omeZarr: number[];
}

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'sps-spatialdata-zip-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('SpatialData reads the zipped H&E, cell labels and cell table, level by level as stored', async () => {
  const he = path.join(dir, 'he');
  const mask = path.join(dir, 'mask');
  const mpp = await writeCmuPyramid(folderStore(he));
  await writeSyntheticMask(folderStore(mask), { widthPx: 2220, heightPx: 2967, pixelSizeUm: mpp });
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
  const entries = await planSpatialDataArchive({
    he: folderStore(he),
    labels: folderStore(mask),
    table: { sink: tableSink, keys },
  });
  const zip = path.join(dir, 'export.spatialdata.zarr.zip');
  await writeZarrZip(zip, entries);

  const read = await runPythonJson<Checked>(check, [zip, he, mask], {}, spatialDataPython());
  expect(read).toMatchObject({
    images: ['he'],
    labels: ['cells'],
    tables: ['table'],
    heDims: ['c', 'y', 'x'],
    heChannels: ['R', 'G', 'B'],
    labelDims: ['y', 'x'],
    tableShape: [1_000, 2],
    tableRegion: 'cells',
  });
  expect(read.heLevels[0]).toEqual([3, 2967, 2220]);
  expect(read.labelLevels[0]).toEqual([2967, 2220]);
  expect(read.heEqual.length).toBeGreaterThan(1);
  expect(read.heEqual.every(Boolean)).toBe(true);
  expect(read.labelEqual.length).toBeGreaterThan(1);
  expect(read.labelEqual.every(Boolean)).toBe(true);
  for (const scale of [...read.heToGlobal, ...read.labelToGlobal]) expect(scale).toBeCloseTo(mpp, 9);
  expect(read.omeZarr).toEqual([read.heLevels.length, read.labelLevels.length]);
}, 300_000);
