import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { planPredictionArchive, writeZarrZip } from '../../../../compute/export';
import { folderStore } from '../../../../compute/zarr';
import { runPythonJson } from '../../../support/python';
import { predictionLayout, writeCmuPyramid, writeSyntheticMask, writeSyntheticPrediction } from './sources';

/**
 * The zipped OME-Zarr opened the ways README.md tells users to: zarr-python's ZipStore for the
 * hierarchy, ome-zarr-py's `parse_url` and `Reader` for each image (the prediction at the root,
 * `images/he`, `labels/cells`) through fsspec's zip filesystem. `parse_url` of the bare path is a
 * folder store in ome-zarr-py and answers `None` for a zip: checked too, so the README's reason
 * stays true.
 */
describe('a zipped OME-Zarr in ome-zarr-py and zarr-python, as the README opens it', () => {
  let dir: string;
  let zip: string;
  const stores = { prediction: '', he: '', mask: '' };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sps-ome-zarr-zip-'));
    stores.prediction = path.join(dir, 'prediction');
    stores.he = path.join(dir, 'he');
    stores.mask = path.join(dir, 'mask');
    const mpp = await writeCmuPyramid(folderStore(stores.he));
    const layout = predictionLayout({ widthPx: 1110, heightPx: 1483, pixelSizeUm: 2 * mpp });
    await writeSyntheticPrediction(folderStore(stores.prediction), layout);
    await writeSyntheticMask(folderStore(stores.mask), { widthPx: 2220, heightPx: 2967, pixelSizeUm: mpp });
    zip = path.join(dir, 'job.ome.zarr.zip');
    await writeZarrZip(
      zip,
      await planPredictionArchive({
        prediction: folderStore(stores.prediction),
        he: folderStore(stores.he),
        labels: folderStore(stores.mask),
      }),
    );
  }, 120_000);
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('ome-zarr-py reads every image with its levels and the stores pixels; zarr-python ZipStore the hierarchy', async () => {
    const read = await runPythonJson<{
      barePath: boolean;
      images: Record<string, { specs: string[]; shapes: number[][]; equal: boolean }>;
      zipStore: string[];
    }>(
      `
import json, sys, numpy as np, zarr
from zarr.storage import FsspecStore, ZipStore
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
path, prediction, he, mask = sys.argv[1:5]

# README.md, "Open your results": the recipe, verbatim.
def image(inner):
    return parse_url(FsspecStore.from_url(f"zip://{inner}::file://{path}", read_only=True))
root = zarr.open_group(ZipStore(path, mode="r"), mode="r")

out = {'barePath': parse_url(path) is not None, 'images': {}, 'zipStore': sorted(root.group_keys())}
sources = {'': (prediction, 'markers/DAPI/0'), 'images/he': (he, '0'), 'labels/cells': (mask, '0')}
for inner, (folder, level0) in sources.items():
    node = list(Reader(image(inner))())[0]
    ours = np.asarray(node.data[0])
    theirs = zarr.open_array(folder + '/' + level0, mode='r')[:]
    out['images'][inner or '/'] = {
        'specs': sorted(type(s).__name__ for s in node.specs),
        'shapes': [list(d.shape) for d in node.data],
        # The labels are SpatialData's 2-D view of the mask's c, y, x.
        'equal': bool(np.array_equal(ours, theirs[0] if inner == 'labels/cells' else theirs)),
    }
print(json.dumps(out))
`,
      [zip, stores.prediction, stores.he, stores.mask],
    );
    expect(read.barePath).toBe(false);
    expect(read.zipStore).toEqual(['images', 'labels', 'markers']);
    expect(read.images['/']).toEqual({
      specs: ['Multiscales'],
      shapes: [
        [1, 1483, 1110],
        [1, 741, 555],
        [1, 370, 277],
      ],
      equal: true,
    });
    expect(read.images['images/he']).toMatchObject({ specs: ['Multiscales', 'OMERO'], equal: true });
    expect(read.images['images/he']!.shapes[0]).toEqual([3, 2967, 2220]);
    expect(read.images['labels/cells']).toMatchObject({ specs: ['Label', 'Multiscales'], equal: true });
    expect(read.images['labels/cells']!.shapes).toHaveLength(4);
    expect(read.images['labels/cells']!.shapes[0]).toEqual([2967, 2220]);
  });
});
