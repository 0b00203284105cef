import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  planPredictionArchive,
  planZarrArchive,
  writeZarrZip,
  type ZipEntrySource,
} from '../../../../compute/export';
import { chunkKeys } from '../../../../compute/export/zarr-archive';
import { folderStore, memoryStore } from '../../../../compute/zarr';
import { runPythonJson } from '../../../support/python';
import { predictionLayout, writeCmuPyramid, writeSyntheticMask, writeSyntheticPrediction } from './sources';

const run = promisify(execFile);
const schemaDir = path.join(__dirname, '../../../../../shared/data/schemas/ngff-0.5');

type Digests = Record<string, { shape: number[]; dtype: string; sha256: string }>;

/** Whole arrays as zarrita reads them (zip store for a .zip path), by SHA-256 of their bytes. */
async function zarritaDigests(store: string, arrays: readonly string[]): Promise<Digests> {
  const script = path.join(__dirname, '../../../support/zarrita-digest.mjs');
  const { stdout } = await run(process.execPath, [script, store, JSON.stringify(arrays)], {
    cwd: path.join(__dirname, '../../../..'),
    maxBuffer: 16 << 20,
  });
  return JSON.parse(stdout) as Digests;
}

describe('writeZarrZip of a prediction with its H&E and mask', () => {
  let dir: string;
  let zip: string;
  const stores = { prediction: '', he: '', mask: '' };
  /** Archive array path -> [source folder, array path in it]. */
  const arrays = new Map<string, [string, string]>();
  /** The stacked marker image's levels -> the marker arrays they stack, in channel order. */
  const stacked = new Map<string, string[]>();

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sps-zarr-zip-'));
    stores.prediction = path.join(dir, 'prediction');
    stores.he = path.join(dir, 'he');
    stores.mask = path.join(dir, 'mask');
    const mpp = await writeCmuPyramid(folderStore(stores.he));
    const layout = predictionLayout({ widthPx: 1110, heightPx: 1483, pixelSizeUm: 2 * mpp });
    await writeSyntheticPrediction(folderStore(stores.prediction), layout);
    await writeSyntheticMask(folderStore(stores.mask), { widthPx: 2220, heightPx: 2967, pixelSizeUm: mpp });
    for (const marker of layout.markers) {
      for (const level of [0, 1, 2]) {
        arrays.set(`markers/${marker}/${level}`, [stores.prediction, `markers/${marker}/${level}`]);
      }
    }
    for (const level of [0, 1, 2]) {
      stacked.set(
        `images/prediction/${level}`,
        layout.markers.map((marker) => `markers/${marker}/${level}`),
      );
    }
    for (const level of [0, 1, 2, 3]) {
      arrays.set(`images/he/${level}`, [stores.he, String(level)]);
      arrays.set(`labels/cells/${level}`, [stores.mask, String(level)]);
    }
    zip = path.join(dir, 'export.ome.zarr.zip');
    const entries = await planPredictionArchive({
      prediction: folderStore(stores.prediction),
      he: folderStore(stores.he),
      labels: folderStore(stores.mask),
    });
    const result = await writeZarrZip(zip, entries);
    expect(result.entries).toBeGreaterThan(60);
  }, 120_000);
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('stores every entry uncompressed with ZIP64 records, zarr.json entries first and the root first', async () => {
    const result = await runPythonJson<{
      names: string[];
      methods: number[];
      zip64Extra: boolean[];
      eocd64: boolean;
    }>(
      `
import json, sys, zipfile, struct
path = sys.argv[1]
with zipfile.ZipFile(path) as z:
    infos = z.infolist()
def has_zip64(extra):
    i = 0
    while i + 4 <= len(extra):
        tag, size = struct.unpack_from('<HH', extra, i)
        if tag == 1:
            return True
        i += 4 + size
    return False
data = open(path, 'rb').read()
print(json.dumps({'names': [i.filename for i in infos], 'methods': sorted({i.compress_type for i in infos}),
                  'zip64Extra': sorted({has_zip64(i.extra) for i in infos}), 'eocd64': data.rfind(b'PK\\x06\\x06') > 0}))
`,
      [zip],
    );
    expect(result.methods).toEqual([0]);
    expect(result.zip64Extra).toEqual([true]);
    expect(result.eocd64).toBe(true);
    expect(result.names[0]).toBe('zarr.json');
    const firstChunk = result.names.findIndex((n) => !n.endsWith('zarr.json'));
    expect(result.names.slice(firstChunk).filter((n) => n.endsWith('zarr.json'))).toEqual([]);
    expect(result.names.slice(0, firstChunk).sort()).toEqual(
      [
        'zarr.json',
        'images/zarr.json',
        'images/he/zarr.json',
        'images/prediction/zarr.json',
        ...[...stacked.keys()].map((a) => `${a}/zarr.json`),
        'labels/zarr.json',
        'labels/cells/zarr.json',
        'markers/zarr.json',
        'markers/CD3/zarr.json',
        'markers/DAPI/zarr.json',
        'markers/PanCK/zarr.json',
        ...[...arrays.keys()].map((a) => `${a}/zarr.json`),
      ].sort(),
    );
    // Every stored shard of every source is in the archive, under its new path.
    expect(new Set(result.names).size).toBe(result.names.length);
  });

  it('is read by zarr-python ZipStore with pixels identical to the stores, OME-NGFF 0.5 but for SpatialData versions', async () => {
    const result = await runPythonJson<{
      mismatches: string[];
      compared: number;
      schema: Record<string, string[]>;
      labelSource?: unknown;
    }>(
      `
import json, sys, pathlib, numpy as np, zarr
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
path, schema_dir, pairs, stacks, prediction = sys.argv[1], pathlib.Path(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5]
store = zarr.storage.ZipStore(path, mode='r')
root = zarr.open_group(store, mode='r')
out = {'mismatches': [], 'compared': 0, 'schema': {}}
# The labels are the mask's c, y, x without c; a stacked image, its markers one after another.
expected = {name: zarr.open_array(folder + '/' + source, mode='r')[:] for name, (folder, source) in pairs.items()}
expected.update({name: np.concatenate([zarr.open_array(prediction + '/' + m, mode='r')[:] for m in markers]) for name, markers in stacks.items()})
for name, b in expected.items():
    a = root[name][:]
    b = b[0] if name.startswith('labels/') else b
    out['compared'] += 1
    if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
        out['mismatches'].append(name)
schemas = {p.name: json.loads(p.read_text()) for p in schema_dir.glob('*.schema')}
registry = Registry().with_resources((s['$id'], Resource.from_contents(s, default_specification=DRAFT202012)) for s in schemas.values())
groups = [('', 'image.schema'), ('images/he', 'image.schema'), ('images/prediction', 'image.schema'), ('labels/cells', 'label.schema'), ('markers/CD3', 'image.schema')]
out['versions'] = {}
for group, schema in groups:
    attrs = json.loads(json.dumps(dict((root[group] if group else root).attrs)))
    out['versions'][group or '/'] = attrs['ome']['version']
    # SpatialData's elements say 0.5-dev-spatialdata, which its reader requires; the rest is NGFF 0.5.
    if attrs['ome']['version'] == '0.5-dev-spatialdata':
        attrs['ome']['version'] = '0.5'
    validator = Draft202012Validator(schemas[schema], registry=registry)
    out['schema'][group or '/'] = [e.message for e in validator.iter_errors(attrs)]
out['rootExport'] = root.attrs['export']
out['labels'] = dict(root['labels'].attrs)
out['labelSource'] = root['labels/cells'].attrs['ome']['image-label'].get('source')
out['spatialdata'] = root.attrs['spatialdata_attrs']
print(json.dumps(out))
`,
      [
        zip,
        schemaDir,
        JSON.stringify(Object.fromEntries(arrays)),
        JSON.stringify(Object.fromEntries(stacked)),
        stores.prediction,
      ],
    );
    expect(result).toMatchObject({
      mismatches: [],
      compared: arrays.size + stacked.size,
      schema: { '/': [], 'images/he': [], 'images/prediction': [], 'labels/cells': [], 'markers/CD3': [] },
      versions: {
        '/': '0.5',
        'images/he': '0.5-dev-spatialdata',
        'images/prediction': '0.5-dev-spatialdata',
        'labels/cells': '0.5-dev-spatialdata',
        'markers/CD3': '0.5',
      },
      rootExport: {
        prediction: '',
        predictionImage: 'images/prediction',
        he: 'images/he',
        labels: ['labels/cells'],
      },
      labels: { ome: { version: '0.5', labels: ['cells'] } },
      spatialdata: { version: '0.2' },
    });
    // SpatialData refuses a label whose source image ome-zarr-py would load beside it.
    expect(result.labelSource).toBeNull();
  });

  it('is read by zarrita through its zip store with the values zarrita reads from the stores', async () => {
    const fromZip = await zarritaDigests(zip, [...arrays.keys()]);
    const fromStores: Digests = {};
    for (const folder of Object.values(stores)) {
      const here = [...arrays].filter(([, [f]]) => f === folder);
      const digests = await zarritaDigests(
        folder,
        here.map(([, [, source]]) => source),
      );
      for (const [name, [, source]] of here) {
        const digest = digests[source]!;
        // The labels are the mask without its leading axis of 1: the same bytes.
        fromStores[name] = name.startsWith('labels/') ? { ...digest, shape: digest.shape.slice(1) } : digest;
      }
    }
    expect(Object.keys(fromZip).sort()).toEqual([...arrays.keys()].sort());
    expect(fromZip).toEqual(fromStores);
  });

  it('writes the same bytes again from the same stores', async () => {
    const again = path.join(dir, 'again.zip');
    await writeZarrZip(
      again,
      await planPredictionArchive({
        prediction: folderStore(stores.prediction),
        he: folderStore(stores.he),
        labels: folderStore(stores.mask),
      }),
    );
    expect((await readFile(again)).equals(await readFile(zip))).toBe(true);
  });
});

describe('the archive plan and the zip writer', () => {
  it('lists chunk keys of a regular grid in C order, default and v2 encodings', () => {
    const doc = (encoding: object) => ({
      shape: [1, 5, 3],
      chunk_grid: { name: 'regular', configuration: { chunk_shape: [1, 4, 2] } },
      chunk_key_encoding: encoding,
    });
    expect(chunkKeys(doc({ name: 'default', configuration: { separator: '/' } }), 'x')).toEqual([
      'c/0/0/0',
      'c/0/0/1',
      'c/0/1/0',
      'c/0/1/1',
    ]);
    expect(chunkKeys(doc({ name: 'v2', configuration: { separator: '.' } }), 'x')).toEqual([
      '0.0.0',
      '0.0.1',
      '0.1.0',
      '0.1.1',
    ]);
  });

  it('refuses two sources that land on one path', async () => {
    const sink = memoryStore();
    await sink.put(
      'zarr.json',
      new TextEncoder().encode('{"zarr_format":3,"node_type":"group","attributes":{}}'),
    );
    await expect(
      planZarrArchive([
        { sink, from: '', to: 'a' },
        { sink, from: '', to: 'a' },
      ]),
    ).rejects.toThrow('two sources write a/zarr.json');
  });

  it('stacks arrays of one layout as channels, keys c/{index}/…, and refuses arrays that differ', async () => {
    const json = (doc: object) => new TextEncoder().encode(JSON.stringify(doc));
    const array = (height: number) => ({
      zarr_format: 3,
      node_type: 'array',
      shape: [1, height, 2],
      data_type: 'uint16',
      chunk_grid: { name: 'regular', configuration: { chunk_shape: [1, 2, 2] } },
      chunk_key_encoding: { name: 'default', configuration: { separator: '/' } },
      fill_value: 0,
      codecs: [{ name: 'bytes', configuration: { endian: 'little' } }],
    });
    const marker = async (height: number) => {
      const sink = memoryStore();
      await sink.put('zarr.json', json(array(height)));
      return sink;
    };
    const stack = (sinks: Awaited<ReturnType<typeof marker>>[]) =>
      sinks.map((sink, index) => ({ sink, from: '', to: 'img/0', channel: { index, count: sinks.length } }));
    const entries = await planZarrArchive(stack([await marker(4), await marker(4), await marker(4)]));
    expect(entries.map((e) => e.name)).toEqual([
      'img/zarr.json',
      'img/0/zarr.json',
      ...[0, 1, 2].flatMap((c) => [`img/0/c/${c}/0/0`, `img/0/c/${c}/1/0`]),
    ]);
    const stacked = JSON.parse(new TextDecoder().decode(await entries[1]!.read()));
    expect(stacked.shape).toEqual([3, 4, 2]);
    await expect(planZarrArchive(stack([await marker(4), await marker(6)]))).rejects.toThrow(
      'img/0/zarr.json: the stacked arrays differ',
    );
  });

  it('leaves out entries that read as missing and fails when a read fails', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sps-zip-unit-'));
    try {
      const bytes = (text: string) => new TextEncoder().encode(text);
      const entries: ZipEntrySource[] = [
        { name: 'zarr.json', read: async () => bytes('{}') },
        { name: 'a/c/0', read: async () => undefined },
        { name: 'a/c/1', read: async () => bytes('x'.repeat(100_000)) },
      ];
      const file = path.join(dir, 'a.zip');
      expect(await writeZarrZip(file, entries)).toMatchObject({ entries: 2 });
      const names = await runPythonJson<string[]>(
        'import json, sys, zipfile; print(json.dumps(zipfile.ZipFile(sys.argv[1]).namelist()))',
        [file],
      );
      expect(names).toEqual(['zarr.json', 'a/c/1']);
      const failing: ZipEntrySource[] = [
        ...entries,
        {
          name: 'a/c/2',
          read: async () => {
            throw new Error('source gone');
          },
        },
      ];
      await expect(writeZarrZip(path.join(dir, 'b.zip'), failing)).rejects.toThrow('source gone');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
