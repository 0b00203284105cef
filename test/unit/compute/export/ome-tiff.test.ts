import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  heTiffImage,
  labelTiffImage,
  type OmeTiffImage,
  omeColor,
  predictionTiffImage,
  writeOmeTiff,
} from '../../../../compute/export';
import { blockOrder, packTile } from '../../../../compute/export/ome-tiff';
import { systemVipsEnv } from '../../../../compute/slide/normalize';
import { folderStore, type KeyValueStore } from '../../../../compute/zarr';
import { runPythonJson } from '../../../support/python';
import { predictionLayout, writeCmuPyramid, writeSyntheticMask, writeSyntheticPrediction } from './sources';

const run = promisify(execFile);
const xsd = path.join(__dirname, '../../../../../shared/data/schemas/ome-2016-06.xsd');

/** A sink that counts the gets of each key, to see how often a shard is fetched. */
function countingSink(sink: KeyValueStore): KeyValueStore & { gets: Map<string, number> } {
  const gets = new Map<string, number>();
  return {
    gets,
    get(key, options) {
      gets.set(key, (gets.get(key) ?? 0) + 1);
      return sink.get(key, options);
    },
    getRange: (key, range, options) => sink.getRange(key, range, options),
    put: (key, bytes, options) => sink.put(key, bytes, options),
  };
}

describe('writeOmeTiff from the prediction, H&E and mask stores', () => {
  let dir: string;
  let tiff: string;
  let mpp: number;
  let predictionGets: Map<string, number>;
  const stores = { prediction: '', he: '', mask: '' };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sps-ome-tiff-'));
    stores.prediction = path.join(dir, 'prediction');
    stores.he = path.join(dir, 'he');
    stores.mask = path.join(dir, 'mask');
    mpp = await writeCmuPyramid(folderStore(stores.he));
    // The store's level 0 is H&E level 1 (2220 x 2967 halved, rounded down).
    await writeSyntheticPrediction(
      folderStore(stores.prediction),
      predictionLayout({ widthPx: 1110, heightPx: 1483, pixelSizeUm: 2 * mpp }),
    );
    await writeSyntheticMask(folderStore(stores.mask), { widthPx: 2220, heightPx: 2967, pixelSizeUm: mpp });
    const predictionSink = countingSink(folderStore(stores.prediction));
    predictionGets = predictionSink.gets;
    const images = [
      await predictionTiffImage(predictionSink),
      await heTiffImage(folderStore(stores.he)),
      await labelTiffImage(folderStore(stores.mask)),
    ];
    tiff = path.join(dir, 'export.ome.tif');
    const result = await writeOmeTiff(tiff, images);
    expect(result).toMatchObject({ planes: 3 + 1 + 1, subIfds: 3 * 2 + 3 + 3 });
  }, 120_000);
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('is read by tifffile as OME with every series, level, pixel size and channel, pixels equal to the stores', async () => {
    const result = await runPythonJson<{
      isOme: boolean;
      series: { name: string; shape: number[]; dtype: string; levels: number[][] }[];
      pixels: { physicalSizeX: number; physicalSizeY: number; unit: string; type: string }[];
      channels: { name: string; color: number | null }[][];
      mismatches: string[];
      compared: number;
    }>(
      `
import json, sys, numpy as np, tifffile, zarr
tif, prediction, he, mask = sys.argv[1:5]
out = {'mismatches': [], 'compared': 0}
with tifffile.TiffFile(tif) as t:
    out['isOme'] = t.is_ome
    out['series'] = [{'name': s.name, 'shape': list(s.shape), 'dtype': str(s.dtype),
                      'levels': [list(l.shape) for l in s.levels]} for s in t.series]
    ome = tifffile.xml2dict(t.ome_metadata)['OME']
    images = ome['Image'] if isinstance(ome['Image'], list) else [ome['Image']]
    out['pixels'] = [{'physicalSizeX': i['Pixels']['PhysicalSizeX'], 'physicalSizeY': i['Pixels']['PhysicalSizeY'],
                      'unit': i['Pixels']['PhysicalSizeXUnit'], 'type': i['Pixels']['Type']} for i in images]
    def channels(i):
        c = i['Pixels']['Channel']
        return [{'name': x['Name'], 'color': x.get('Color')} for x in (c if isinstance(c, list) else [c])]
    out['channels'] = [channels(i) for i in images]
    root = json.load(open(prediction + '/zarr.json'))
    markers = root['attributes']['prediction']['markers']
    def check(what, a, b):
        out['compared'] += 1
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b):
            out['mismatches'].append(what)
    for level, series in enumerate(t.series[0].levels):
        data = series.asarray()
        for c, marker in enumerate(markers):
            check(f'prediction {marker} {level}', data[c], zarr.open_array(f'{prediction}/markers/{marker}/{level}', mode='r')[0])
    for level, series in enumerate(t.series[1].levels):
        check(f'he {level}', np.moveaxis(series.asarray(), -1, 0), zarr.open_array(f'{he}/{level}', mode='r')[:])
    for level, series in enumerate(t.series[2].levels):
        check(f'mask {level}', series.asarray(), zarr.open_array(f'{mask}/{level}', mode='r')[0])
print(json.dumps(out))
`,
      [tiff, stores.prediction, stores.he, stores.mask],
    );
    expect(result.isOme).toBe(true);
    expect(result.series).toEqual([
      {
        name: 'prediction',
        shape: [3, 1483, 1110],
        dtype: 'uint16',
        levels: [
          [3, 1483, 1110],
          [3, 741, 555],
          [3, 370, 277],
        ],
      },
      {
        name: 'H&E',
        shape: [2967, 2220, 3],
        dtype: 'uint8',
        levels: [
          [2967, 2220, 3],
          [1483, 1110, 3],
          [741, 555, 3],
          [370, 277, 3],
        ],
      },
      {
        name: 'cells',
        shape: [2967, 2220],
        dtype: 'uint32',
        levels: [
          [2967, 2220],
          [1483, 1110],
          [741, 555],
          [370, 277],
        ],
      },
    ]);
    expect(result.pixels.map((p) => [p.unit, p.type])).toEqual([
      ['µm', 'uint16'],
      ['µm', 'uint8'],
      ['µm', 'uint32'],
    ]);
    expect(result.pixels[0]!.physicalSizeX).toBeCloseTo(2 * mpp, 9);
    expect(result.pixels[0]!.physicalSizeY).toBeCloseTo(2 * mpp, 9);
    expect(result.pixels[1]!.physicalSizeX).toBeCloseTo(mpp, 9);
    expect(result.pixels[2]!.physicalSizeX).toBeCloseTo(mpp, 9);
    expect(result.channels).toEqual([
      [
        { name: 'DAPI', color: omeColor('0000FF') },
        { name: 'CD3', color: omeColor('FF0000') },
        { name: 'PanCK', color: omeColor('FF00FF') },
      ],
      [{ name: 'RGB', color: null }],
      [{ name: 'cells', color: null }],
    ]);
    expect(result).toMatchObject({ mismatches: [], compared: 3 * 3 + 4 + 4 });
  });

  it('carries OME-XML that validates against the 2016-06 schema (xmllint)', async () => {
    const xml = path.join(dir, 'export.ome.xml');
    await runPythonJson(
      `
import json, sys, tifffile
with tifffile.TiffFile(sys.argv[1]) as t:
    open(sys.argv[2], 'w', encoding='utf-8').write(t.pages[0].description)
print(json.dumps(True))
`,
      [tiff, xml],
    );
    const { stderr } = await run('xmllint', ['--noout', '--nonet', '--schema', xsd, xml]).catch((err) => {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new Error('xmllint is not installed: apt-get install libxml2-utils');
      }
      throw err;
    });
    // The schema imports xml.xsd from the web, which --nonet skips: OME-XML uses none of it.
    expect(stderr).toContain(`${xml} validates`);
  });

  it('opens in libvips, each plane and each SubIFD level, with the pixels the stores hold', async () => {
    const header = async (file: string) =>
      (await run('vipsheader', [file], { env: systemVipsEnv() })).stdout.split(':')[1]!.trim().split(',')[0];
    expect(await header(`${tiff}[page=0]`)).toBe('1110x1483 ushort');
    expect(await header(`${tiff}[page=2,subifd=0]`)).toBe('555x741 ushort');
    expect(await header(`${tiff}[page=2,subifd=1]`)).toBe('277x370 ushort');
    expect(await header(`${tiff}[page=3,subifd=2]`)).toBe('277x370 uchar');
    expect(await header(`${tiff}[page=4,subifd=0]`)).toBe('1110x1483 uint');
    const vipsAverage = async (file: string) =>
      Number((await run('vips', ['avg', file], { env: systemVipsEnv() })).stdout.trim());
    const means = await runPythonJson<number[]>(
      `
import json, sys, zarr
root = sys.argv[1]
print(json.dumps([float(zarr.open_array(root + p, mode='r')[:].astype('float64').mean()) for p in sys.argv[2:]]))
`,
      [dir, '/prediction/markers/CD3/1', '/he/2'],
    );
    expect(await vipsAverage(`${tiff}[page=1,subifd=0]`)).toBeCloseTo(means[0]!, 5);
    expect(await vipsAverage(`${tiff}[page=3,subifd=1]`)).toBeCloseTo(means[1]!, 5);
  });

  it('fetches each shard of the prediction store once (tiles visited shard by shard)', () => {
    const shardGets = [...predictionGets].filter(([key]) => key.includes('/c/'));
    expect(shardGets.length).toBeGreaterThan(0);
    expect(shardGets.filter(([, n]) => n !== 1)).toEqual([]);
  });
});

describe('writeOmeTiff details', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sps-ome-tiff-unit-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('visits every tile once in block order', () => {
    const order = [...blockOrder(5, 3, 2)];
    expect(order).toEqual([0, 1, 5, 6, 2, 3, 7, 8, 4, 9, 10, 11, 12, 13, 14]);
    expect(new Set([...blockOrder(7, 9, 4)]).size).toBe(63);
  });

  it('pads edge tiles with zeros and interleaves RGB', () => {
    const planar = Uint8Array.from([1, 2, 3, 4, 10, 20, 30, 40, 100, 200, 250, 255]);
    const tile = packTile(planar, 2, 2, 16, 3, 1);
    expect([...tile.subarray(0, 6)]).toEqual([1, 10, 100, 2, 20, 200]);
    expect([...tile.subarray(16 * 3, 16 * 3 + 6)]).toEqual([3, 30, 250, 4, 40, 255]);
    expect(tile.length).toBe(16 * 16 * 3);
    expect(tile.subarray(6, 16 * 3).every((v) => v === 0)).toBe(true);
  });

  it('writes zstd and uncompressed files that tifffile reads identically', async () => {
    const width = 700;
    const height = 300;
    const value = (x: number, y: number) => Math.sin(x / 9) * Math.cos(y / 13) + x * 1e-3;
    const image: OmeTiffImage = {
      name: 'synthetic',
      pixelType: 'float32',
      channels: [{ name: 'A' }, { name: 'B', color: omeColor('00FF00') }],
      physicalSizeUm: { x: 0.25, y: 0.5 },
      levels: [
        {
          width,
          height,
          readTile: async (plane, x0, y0, w, h) => {
            const out = new Float32Array(w * h);
            for (let y = 0; y < h; y++)
              for (let x = 0; x < w; x++) out[y * w + x] = value(x0 + x, y0 + y) + plane;
            return out;
          },
        },
      ],
    };
    const files = { zstd: path.join(dir, 'zstd.ome.tif'), none: path.join(dir, 'none.ome.tif') };
    await writeOmeTiff(files.zstd, [image], { compression: 'zstd', tileSize: 256 });
    await writeOmeTiff(files.none, [image], { compression: 'none', tileSize: 256 });
    const result = await runPythonJson<{
      compression: number[];
      equal: boolean;
      corner: number;
      size: number[];
    }>(
      `
import json, sys, tifffile, numpy as np
a, b = tifffile.imread(sys.argv[1]), tifffile.imread(sys.argv[2])
with tifffile.TiffFile(sys.argv[1]) as t, tifffile.TiffFile(sys.argv[2]) as u:
    compression = [int(t.pages[0].compression), int(u.pages[0].compression)]
    size = [t.series[0].shape[0], t.pages[0].tilewidth]
print(json.dumps({'compression': compression, 'equal': bool(np.array_equal(a, b)), 'corner': float(a[1, 299, 699]), 'size': size}))
`,
      [files.zstd, files.none],
    );
    expect(result.compression).toEqual([50000, 1]);
    expect(result.equal).toBe(true);
    expect(result.size).toEqual([2, 256]);
    expect(result.corner).toBeCloseTo(value(699, 299) + 1, 5);
  });

  it('refuses levels that grow and RGB images with more than one channel entry', async () => {
    const level = (n: number) => ({ width: n, height: n, readTile: async () => new Uint8Array(0) });
    const file = path.join(dir, 'bad.tif');
    await expect(
      writeOmeTiff(file, [
        {
          name: 'x',
          pixelType: 'uint8',
          channels: [{ name: 'a' }],
          physicalSizeUm: null,
          levels: [level(8), level(16)],
        },
      ]),
    ).rejects.toThrow('levels must shrink');
    await expect(
      writeOmeTiff(file, [
        {
          name: 'x',
          pixelType: 'uint8',
          rgb: true,
          channels: [{ name: 'a' }, { name: 'b' }],
          physicalSizeUm: null,
          levels: [level(8)],
        },
      ]),
    ).rejects.toThrow('RGB');
  });
});
