import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type OmeTiffImage, writeOmeTiff } from '../../../../compute/export';
import { runPythonJson } from '../../../support/python';

/**
 * Tiles are encoded in parallel and finish in any order; the file must not depend on that
 * order. Each tile read here waits a random time, so two writes of the same images finish
 * their tiles in different orders; the files must still be the same bytes and read back right.
 */
const SIZE = 1300;
const TILE = 256;

/** Prediction planes: exact integers (deflate is lossless); H&E samples: smooth (JPEG is not). */
const value = (plane: number, x: number, y: number) => (x * 7 + y * 13 + plane * 101 + ((x * y) % 17)) & 0xff;
const smooth = (sample: number, x: number, y: number) =>
  Math.round(128 + 100 * Math.sin((x + 30 * sample) / 40) * Math.cos(y / 50));

function image(name: string, rgb: boolean): OmeTiffImage {
  const planes = rgb ? 3 : 2;
  const level = (downsample: number) => ({
    width: Math.ceil(SIZE / downsample),
    height: Math.ceil(SIZE / downsample),
    downsample,
    async readTile(plane: number, x: number, y: number, width: number, height: number) {
      await sleep(Math.floor(Math.random() * 8));
      const samples = rgb ? 3 : 1;
      const pixels = rgb ? new Uint8Array(samples * width * height) : new Uint16Array(width * height);
      for (let s = 0; s < samples; s++) {
        for (let j = 0; j < height; j++) {
          for (let i = 0; i < width; i++) {
            const gx = (x + i) * downsample;
            const gy = (y + j) * downsample;
            pixels[(s * height + j) * width + i] = rgb ? smooth(s, gx, gy) : value(plane, gx, gy) * 257;
          }
        }
      }
      return pixels;
    },
  });
  return {
    name,
    pixelType: rgb ? 'uint8' : 'uint16',
    rgb,
    channels: rgb ? [{ name: 'H&E' }] : Array.from({ length: planes }, (_, i) => ({ name: `M${i}` })),
    physicalSizeUm: { x: 0.5, y: 0.5 },
    compression: rgb ? 'jpeg' : 'deflate',
    levels: [level(1), level(2)],
  };
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'ome-tiff-order-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('two writes of the same images are the same bytes, with tiles in block order, whatever order the encoders finish in', async () => {
  const images = [image('prediction', false), image('H&E', true)];
  const files = [path.join(dir, 'a.ome.tif'), path.join(dir, 'b.ome.tif')];
  for (const file of files) await writeOmeTiff(file, images, { tileSize: TILE, concurrency: 4 });
  const [a, b] = await Promise.all(files.map((file) => readFile(file)));
  expect(a!.length).toBe(b!.length);
  expect(Buffer.compare(a!, b!)).toBe(0);

  const read = await runPythonJson<{ ordered: boolean[]; exact: boolean; rgbClose: boolean }>(
    `
import json, sys
import numpy as np, tifffile
with tifffile.TiffFile(sys.argv[1]) as tif:
    ordered = []
    for series in tif.series:
        for level in series.levels:
            for p in level.pages:
                offsets = [o for o, n in zip(p.dataoffsets, p.databytecounts) if n]
                ordered.append(offsets == sorted(offsets))
    size = int(sys.argv[2])
    y, x = np.mgrid[0:size, 0:size]
    value = lambda plane: (x * 7 + y * 13 + plane * 101 + ((x * y) % 17)) & 0xff
    prediction = tif.series[0].asarray()
    exact = all(np.array_equal(prediction[c].astype(np.int64), value(c) * 257) for c in range(2))
    he = tif.series[1].asarray().astype(np.int64)
    smooth = lambda s: np.round(128 + 100 * np.sin((x + 30 * s) / 40) * np.cos(y / 50))
    rgb_close = all(np.abs(he[..., s] - smooth(s)).mean() < 4 for s in range(3))
print(json.dumps({'ordered': ordered, 'exact': bool(exact), 'rgbClose': bool(rgb_close)}))
`,
    [files[0]!, String(SIZE)],
  );
  expect(read.ordered.length).toBeGreaterThanOrEqual(4);
  expect(read.ordered.every(Boolean)).toBe(true);
  expect(read).toMatchObject({ exact: true, rgbClose: true });
}, 120_000);
