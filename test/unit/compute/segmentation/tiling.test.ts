import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { M, MEASUREMENT_COUNT } from '../../../../compute/segmentation/features';
import { type LabelMaskProgress, writeLabelMask } from '../../../../compute/segmentation/mask';
import {
  decodeTileObjects,
  encodeTileObjects,
  labelOffsets,
  objectsBounds,
  segmentTileObjects,
  type TileObjects,
} from '../../../../compute/segmentation/objects';
import {
  INSTANCE_COLUMNS,
  writeInstanceTable,
  writeMarkerTables,
} from '../../../../compute/segmentation/tables';
import { planSegmentationTiles } from '../../../../compute/segmentation/tiles';
import { folderStore, type KeyValueStore, memoryStore, openArray } from '../../../../compute/zarr';
import { runPythonJson } from '../../../support/python';
import { darkBlobSegmenter, discImage, memorySlide } from './helpers';

const schemaDir = path.join(__dirname, '../../../../../shared/data/schemas/ngff-0.5');

/** Discs on a jittered 40 px grid, radius 5 to 14: many straddle the 128 px tile borders. */
function discs(width: number, height: number): Array<{ x: number; y: number; r: number }> {
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const out = [];
  for (let y = 20; y < height - 10; y += 40) {
    for (let x = 20; x < width - 10; x += 40) {
      out.push({ x: x + (random() - 0.5) * 8, y: y + (random() - 0.5) * 8, r: 5 + random() * 9 });
    }
  }
  return out;
}

const width = 1100;
const height = 1040;
const mpp = 0.5;
const haloPx = 40;
const image = discImage(width, height, discs(width, height));
const slide = memorySlide(image);
const tiles = planSegmentationTiles(slide, { coreSize: 128 });

async function segmentAll(): Promise<Map<number, TileObjects>> {
  const stored = new Map<number, TileObjects>();
  for (const tile of tiles) {
    const objects = await segmentTileObjects(slide, tile, { segmenter: darkBlobSegmenter, mpp, haloPx });
    // Every tile goes through its stored form, as the activity's resume would read it.
    stored.set(tile.index, decodeTileObjects(encodeTileObjects(objects)));
  }
  return stored;
}

async function readLevel(
  sink: KeyValueStore,
  level: number,
): Promise<{ labels: Uint32Array; width: number; height: number }> {
  const array = await openArray(sink, String(level));
  const [, h, w] = array.spec.shape;
  const labels = (await array.readRegion(sink, { x: 0, y: 0, width: w, height: h })) as Uint32Array;
  return { labels, width: w, height: h };
}

describe('segmentation tiling', () => {
  let stored: Map<number, TileObjects>;
  let offsets: number[];
  let total: number;
  let dir: string;

  beforeAll(async () => {
    stored = await segmentAll();
    ({ offsets, total } = labelOffsets(tiles.map((t) => stored.get(t.index)!.count)));
    dir = await mkdtemp(path.join(tmpdir(), 'segmentation-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const maskOptions = () => ({
    widthPx: width,
    heightPx: height,
    pixelSizeUm: mpp,
    tiles,
    haloPx,
    labelOffsets: offsets,
    loadTileObjects: async (index: number) => stored.get(index)!,
    shardSize: 256,
    chunkSize: 64,
    sourceImage: '../../he',
  });

  it('round-trips tile objects through their binary form', async () => {
    const objects = await segmentTileObjects(slide, tiles[9]!, { segmenter: darkBlobSegmenter, mpp, haloPx });
    expect(objects.count).toBeGreaterThan(3);
    const back = decodeTileObjects(encodeTileObjects(objects));
    expect(back).toEqual(objects);
    expect(() => decodeTileObjects(encodeTileObjects(objects).subarray(0, 20))).toThrow('tile objects');
  });

  it('keeps every disc once and whole, with labels 1..N over the layer', async () => {
    const whole = await darkBlobSegmenter.segment(image, mpp);
    expect(total).toBe(whole.cells.count);
    const sink = memoryStore();
    await writeLabelMask(sink, maskOptions());
    const level0 = await readLevel(sink, 0);
    // Each label of the mask is exactly one component of the whole-image segmentation.
    const pairs = new Map<number, number>();
    for (let i = 0; i < level0.labels.length; i++) {
      const ours = level0.labels[i]!;
      const theirs = whole.cells.labels[i]!;
      if ((ours === 0) !== (theirs === 0))
        throw new Error(`pixel ${i}: ${ours} in the mask, ${theirs} whole`);
      if (ours === 0) continue;
      const seen = pairs.get(ours);
      if (seen === undefined) pairs.set(ours, theirs);
      else if (seen !== theirs) throw new Error(`label ${ours} spans components ${seen} and ${theirs}`);
    }
    expect(pairs.size).toBe(total);
    expect(new Set(pairs.values()).size).toBe(total);
    expect(Math.max(...pairs.keys())).toBe(total);
    for (const objects of stored.values()) expect(objects.cutObjects).toBe(0);
    // Level 1 is level 0's top-left pixel of each 2x2 block.
    const level1 = await readLevel(sink, 1);
    let mismatches = 0;
    for (let y = 0; y < level1.height; y++) {
      for (let x = 0; x < level1.width; x++) {
        if (level1.labels[y * level1.width + x] !== level0.labels[2 * y * width + 2 * x]) mismatches++;
      }
    }
    expect(mismatches).toBe(0);
  });

  it('resumes the mask after an interruption with the same bytes', async () => {
    const clean = memoryStore();
    await writeLabelMask(clean, maskOptions());
    const resumed = memoryStore();
    let last: LabelMaskProgress | undefined;
    const controller = new AbortController();
    await expect(
      writeLabelMask(resumed, {
        ...maskOptions(),
        signal: controller.signal,
        onProgress: (p) => {
          last = p;
          if (p.done === 7) controller.abort();
        },
      }),
    ).rejects.toThrow();
    expect(resumed.map.has('zarr.json')).toBe(false);
    const painted: number[] = [];
    await writeLabelMask(resumed, {
      ...maskOptions(),
      resume: last,
      onProgress: (p) => painted.push(p.done),
    });
    expect(painted[0]).toBe(8);
    expect([...resumed.map.keys()].sort()).toEqual([...clean.map.keys()].sort());
    for (const [key, bytes] of clean.map) expect(Buffer.from(resumed.map.get(key)!).equals(bytes)).toBe(true);
  });

  it('writes tables that DuckDB and pyarrow read with exact counts and joinable ids', async () => {
    const instanceIdBase = 5_000_000_000n;
    const source = {
      tiles,
      labelOffsets: offsets,
      loadTileObjects: async (index: number) => stored.get(index)!,
      instanceIdBase,
      rowGroupRows: 100,
    };
    const instances = path.join(dir, 'instances.parquet');
    const result = await writeInstanceTable({ ...source, path: instances, mpp });
    expect(result.rows).toBe(total);
    // Marker values: a ramp along x for one, constant for the other.
    const valueAt = (marker: string, x: number, y: number) =>
      marker === 'ramp' ? (x % 200) / 200 : 0.25 + 0 * y;
    const reads: string[] = [];
    const markers = await writeMarkerTables({
      ...source,
      markers: ['ramp', 'flat'],
      pathOf: (marker) => path.join(dir, `${marker}.parquet`),
      valueRange: [0, 1],
      readMarkerRegion: async (marker, rect) => {
        reads.push(marker);
        const out = new Float32Array(rect.width * rect.height);
        for (let y = 0; y < rect.height; y++)
          for (let x = 0; x < rect.width; x++)
            out[y * rect.width + x] = valueAt(marker, rect.x + x, rect.y + y);
        return out;
      },
    });
    expect(markers.ramp!.rows).toBe(total);
    expect(reads.length).toBe(2 * tiles.filter((t) => stored.get(t.index)!.count > 0).length);
    // Exact statistics of a few cells, to compare with the histogram's.
    const expected = new Map<number, { mean: number; median: number; count: number }>();
    for (const tile of tiles.slice(0, 4)) {
      const objects = stored.get(tile.index)!;
      expect(objectsBounds(objects).width).toBeGreaterThanOrEqual(0);
      for (let k = 0; k < objects.count; k++) {
        const values: number[] = [];
        const { runs, runStart } = objects;
        for (let r = runStart[k]! * 3; r < runStart[k + 1]! * 3; r += 3)
          for (let x = runs[r + 1]!; x < runs[r + 2]!; x++)
            values.push(Math.fround(valueAt('ramp', x, runs[r]!)));
        values.sort((a, b) => a - b);
        const n = values.length;
        expect(n).toBe(objects.measurements[k * MEASUREMENT_COUNT + M.area]);
        expected.set(offsets[tile.index]! + k + 1, {
          mean: values.reduce((a, b) => a + b, 0) / n,
          median: n % 2 ? values[(n - 1) / 2]! : (values[n / 2 - 1]! + values[n / 2]!) / 2,
          count: n,
        });
      }
    }
    const checked = await runPythonJson<{
      duckdb: { instances: number; ramp: number; joined: number; distinct: number; idType: string };
      arrow: { instances: number; flat: number; columns: string[]; idType: string; groups: number };
      rows: Array<[number, number, number, number, number]>;
    }>(
      `
import json, sys
import duckdb, pyarrow.parquet as pq
d = sys.argv[1]
con = duckdb.connect()
q = lambda sql: con.execute(sql).fetchall()
inst, ramp, flat = (f"'{d}/{n}.parquet'" for n in ('instances', 'ramp', 'flat'))
out = {'duckdb': {
  'instances': q(f'select count(*) from {inst}')[0][0],
  'ramp': q(f'select count(*) from {ramp}')[0][0],
  'joined': q(f'select count(*) from {inst} i join {ramp} r using (instance_id) join {flat} f using (instance_id)')[0][0],
  'distinct': q(f'select count(distinct instance_id) from {inst}')[0][0],
  'idType': str(q(f"select typeof(instance_id) from {inst} limit 1")[0][0]),
}}
t = pq.read_table(f'{d}/instances.parquet')
out['arrow'] = {'instances': t.num_rows, 'flat': pq.read_table(f'{d}/flat.parquet').num_rows,
  'columns': t.column_names, 'idType': str(t.schema.field('instance_id').type),
  'groups': pq.ParquetFile(f'{d}/instances.parquet').num_row_groups}
out['rows'] = q(f'select i.local_label, i.instance_id - 5000000000, r.mean, r.median, r.pixel_count from {inst} i join {ramp} r using (instance_id) order by i.local_label')
print(json.dumps(out))
`,
      [dir],
    );
    expect(checked.duckdb).toEqual({
      instances: total,
      ramp: total,
      joined: total,
      distinct: total,
      idType: 'UBIGINT',
    });
    expect(checked.arrow).toEqual({
      instances: total,
      flat: total,
      columns: [...INSTANCE_COLUMNS],
      idType: 'uint64',
      groups: Math.ceil(total / 100),
    });
    for (const [label, id, mean, median, count] of checked.rows) {
      expect(id).toBe(label);
      const want = expected.get(label);
      if (!want) continue;
      expect(count).toBe(want.count);
      expect(mean).toBeCloseTo(want.mean, 6);
      // The ramp's values are 1/200 apart: a median between two of them is placed within its
      // bin (1/1024), so the error is at most half that step plus a bin.
      expect(Math.abs(median - want.median)).toBeLessThan(1 / 400 + 1 / 1024);
    }
  });

  it('writes a mask that validates as an NGFF 0.5 label image and reads the same in zarr-python', async () => {
    const root = path.join(dir, 'mask');
    const sink = folderStore(root);
    await writeLabelMask(sink, maskOptions());
    const ours = await readLevel(sink, 0);
    const checked = await runPythonJson<{
      errors: string[];
      sum: number;
      max: number;
      dtype: string;
      levels: number[][];
    }>(
      `
import json, pathlib, sys
import numpy as np, zarr
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
schema_dir, store = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
schemas = {p.name: json.loads(p.read_text()) for p in schema_dir.glob('*.schema')}
registry = Registry().with_resources((s['$id'], Resource.from_contents(s, default_specification=DRAFT202012)) for s in schemas.values())
attrs = json.loads((store / 'zarr.json').read_text())['attributes']
errors = []
for name in ('image.schema', 'strict_image.schema', 'label.schema', 'strict_label.schema'):
    errors += [f'{name}: {e.message}' for e in Draft202012Validator(schemas[name], registry=registry).iter_errors(attrs)]
group = zarr.open_group(str(store), mode='r')
a = group['0']
data = a[:]
levels = [list(group[d['path']].shape) for d in group.attrs['ome']['multiscales'][0]['datasets']]
print(json.dumps({'errors': errors, 'sum': int(data.astype(np.uint64).sum()), 'max': int(data.max()), 'dtype': str(a.dtype), 'levels': levels}))
`,
      [schemaDir, root],
    );
    expect(checked.errors).toEqual([]);
    expect(checked.dtype).toBe('uint32');
    expect(checked.max).toBe(total);
    expect(checked.sum).toBe(ours.labels.reduce((a, b) => a + b, 0));
    expect(checked.levels).toEqual([
      [1, 1040, 1100],
      [1, 520, 550],
      [1, 260, 275],
    ]);
  });
});
