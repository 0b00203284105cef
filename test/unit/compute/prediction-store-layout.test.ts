import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { finishPredictionStore, type PredictionStoreLayout } from '../../../compute/prediction';
import { HISTOGRAM_BINS, markerArray } from '../../../compute/prediction/store';
import { folderStore } from '../../../compute/zarr';
import { runPythonJson } from '../../support/python';

/**
 * The prediction store is a navigable Zarr v3 tree (DECISIONS.md, Compatibility with Strand's
 * clients): zarr-python walks every node from the root, and ome-zarr-py opens every marker the
 * root lists, by name, with its channel label and window.
 */
const layout: PredictionStoreLayout = {
  markers: ['DAPI', 'CD3', 'PanCK'],
  widthPx: 1400,
  heightPx: 1000,
  heLevel: 0,
  pixelSizeUm: 0.5,
  shardSize: 256,
  chunkSize: 128,
  model: 'v0.7',
  outputRange: [0, 1],
};

let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'sps-store-layout-'));
  const sink = folderStore(root);
  const statistics: Record<
    string,
    { count: number; min: number; max: number; sum: number; histogram: number[] }
  > = {};
  for (const [m, marker] of layout.markers.entries()) {
    const array = markerArray(layout, marker, 0);
    await array.writeMetadata(sink);
    const shard = array.allocateShard();
    for (let i = 0; i < shard.length; i++) shard[i] = 1000 * (m + 1) + (i % 5000);
    for (let y = 0; y < array.shardsY; y++)
      for (let x = 0; x < array.shardsX; x++) await array.writeShard(sink, y, x, shard);
    const histogram = new Array<number>(HISTOGRAM_BINS).fill(0);
    histogram[Math.floor((1000 * (m + 1)) / 256)] = 100;
    histogram[Math.floor((1000 * (m + 1) + 4999) / 256)] = 100;
    statistics[marker] = { count: 200, min: 1000 * (m + 1), max: 1000 * (m + 1) + 4999, sum: 0, histogram };
  }
  await finishPredictionStore({ sink, layout, statistics });
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

test('zarr-python walks the whole tree from the root, and every group has its zarr.json', async () => {
  const walked = await runPythonJson<{ groups: string[]; arrays: string[]; missing: string[] }>(
    `
import json, os, sys
import zarr
root = zarr.open_group(sys.argv[1], mode='r')
groups, arrays = [''], []
for name, node in root.members(max_depth=None):
    (groups if isinstance(node, zarr.Group) else arrays).append(name)
missing = [g for g in groups if not os.path.isfile(os.path.join(sys.argv[1], g, 'zarr.json'))]
print(json.dumps({'groups': sorted(groups), 'arrays': sorted(arrays), 'missing': missing}))
`,
    [root],
  );
  expect(walked.groups).toEqual(['', 'markers', 'markers/CD3', 'markers/DAPI', 'markers/PanCK']);
  const levels = walked.arrays.filter((a) => a.startsWith('markers/DAPI/'));
  expect(levels.length).toBeGreaterThan(1);
  expect(walked.arrays).toHaveLength(levels.length * layout.markers.length);
  expect(walked.missing).toEqual([]);
});

test('ome-zarr-py finds every marker the root lists, by name, with its channel label and window', async () => {
  const read = await runPythonJson<{
    listed: string[];
    strandListed: string[];
    images: {
      name: string;
      channels: string[];
      window: { start: number; end: number };
      levels: number;
      shape: number[];
    }[];
  }>(
    `
import json, sys
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
root = zarr.open_group(sys.argv[1], mode='r')
listed = [m['name'] for m in root.attrs['ome']['multiscales']]
images = []
for name in listed:
    node = list(Reader(parse_url(f'{sys.argv[1]}/markers/{name}'))())[0]
    images.append({
        'name': node.metadata['name'],
        'channels': node.metadata['channel_names'],
        'window': node.metadata['contrast_limits'][0] and {'start': node.metadata['contrast_limits'][0][0], 'end': node.metadata['contrast_limits'][0][1]},
        'levels': len(node.data),
        'shape': list(node.data[0].shape),
    })
print(json.dumps({'listed': listed, 'strandListed': [m['name'] for m in root.attrs['multiscales']], 'images': images}))
`,
    [root],
  );
  expect(read.listed).toEqual(layout.markers);
  expect(read.strandListed).toEqual(layout.markers);
  for (const [m, marker] of layout.markers.entries()) {
    const image = read.images[m]!;
    expect(image).toMatchObject({ name: marker, channels: [marker], shape: [1, 1000, 1400] });
    expect(image.levels).toBeGreaterThan(1);
    expect(image.window.start).toBeGreaterThanOrEqual(1000 * (m + 1));
    expect(image.window.end).toBeGreaterThan(image.window.start);
    expect(image.window.end).toBeLessThanOrEqual(1000 * (m + 1) + 4999);
  }
});
