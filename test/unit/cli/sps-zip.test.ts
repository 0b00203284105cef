import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { extractStoredEntries, readZipDirectory } from '../../../cli/sps/zip';
import { writeZarrZip } from '../../../compute/export';
import { runPython } from '../../support/python';

/**
 * `sps download --format spatialdata` reads a zip's directory through ranged reads and its
 * entries in one forward pass. Checked on the service's own zips (yazl: ZIP64 records, data
 * descriptors, no local extra) and on Python's (sizes in the local header, no ZIP64): every
 * entry comes back byte for byte, only the ones asked for are handed over.
 */
const entries = [
  { name: 'zarr.json', bytes: Buffer.from('{"zarr_format":3,"node_type":"group"}') },
  { name: 'markers/CD3/0/c/0/0', bytes: randomBytes(300_000) },
  { name: 'images/prediction/0/c/0/0/0', bytes: randomBytes(1_500_000) },
  { name: 'images/prediction/zarr.json', bytes: Buffer.from('{}') },
  { name: 'tables/table/X/c/0', bytes: Buffer.alloc(0) },
];

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'sps-zip-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Ranged reads of a local file, as the signed download link answers them. */
function ranged(file: string) {
  return async (range: string) => {
    const size = (await stat(file)).size;
    const suffix = /^bytes=-(\d+)$/.exec(range);
    const span = /^bytes=(\d+)-(\d+)$/.exec(range);
    const start = suffix ? Math.max(0, size - Number(suffix[1])) : Number(span![1]);
    const end = suffix ? size - 1 : Math.min(size - 1, Number(span![2]));
    const handle = await open(file);
    try {
      const bytes = Buffer.alloc(end - start + 1);
      await handle.read(bytes, 0, bytes.length, start);
      return new Uint8Array(bytes);
    } finally {
      await handle.close();
    }
  };
}

async function* chunks(file: string): AsyncGenerator<Uint8Array> {
  const bytes = await readFile(file);
  // Odd piece sizes, so headers and entries straddle them.
  for (let at = 0; at < bytes.length; at += 65_521) yield bytes.subarray(at, at + 65_521);
}

async function roundTrip(file: string) {
  const listed = await readZipDirectory(ranged(file));
  const wanted = listed.filter((entry) => !entry.name.startsWith('markers/'));
  const got = new Map<string, Buffer>();
  await extractStoredEntries(chunks(file), wanted, async (entry, data) => {
    const pieces: Buffer[] = [];
    for await (const piece of data) pieces.push(piece);
    got.set(entry.name, Buffer.concat(pieces));
  });
  return { listed: listed.map((entry) => entry.name).sort(), got };
}

test.each(['yazl', 'python'])(
  'a zip written by %s: its directory and its entries, byte for byte',
  async (writer) => {
    const file = path.join(dir, `${writer}.zip`);
    if (writer === 'yazl') {
      await writeZarrZip(
        file,
        entries.map((entry) => ({ name: entry.name, read: async () => entry.bytes })),
      );
    } else {
      const folder = `${file}.d`;
      for (const entry of entries) {
        const target = path.join(folder, entry.name);
        await mkdir(path.dirname(target), { recursive: true });
        await writeFile(target, entry.bytes);
      }
      await runPython(
        `
import os, sys, zipfile
folder, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(out, 'w', zipfile.ZIP_STORED) as z:
    for name in names:
        z.write(os.path.join(folder, name), name)
`,
        [folder, file, ...entries.map((entry) => entry.name)],
      );
    }
    const { listed, got } = await roundTrip(file);
    expect(listed).toEqual(entries.map((entry) => entry.name).sort());
    expect([...got.keys()].sort()).toEqual(
      entries
        .filter((entry) => !entry.name.startsWith('markers/'))
        .map((entry) => entry.name)
        .sort(),
    );
    for (const entry of entries) {
      if (got.has(entry.name)) expect(Buffer.compare(got.get(entry.name)!, entry.bytes)).toBe(0);
    }
  },
);

test('a compressed entry is refused', async () => {
  const file = path.join(dir, 'deflate.zip');
  await runPython(
    `
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('zarr.json', '{}' * 100)
`,
    [file],
  );
  await expect(readZipDirectory(ranged(file))).rejects.toThrow('zarr.json is compressed');
});

test('a pass that starts at an entry’s local header (a ranged GET resuming) hands over that entry and those after it', async () => {
  const file = path.join(dir, 'resumed.zip');
  await writeZarrZip(
    file,
    entries.map((entry) => ({ name: entry.name, read: async () => entry.bytes })),
  );
  const listed = (await readZipDirectory(ranged(file))).sort((a, b) => a.localHeader - b.localHeader);
  const from = listed[2]!;
  // The zip's bytes from that header on, as a ranged answer carries them.
  const skipped = async function* (): AsyncGenerator<Uint8Array> {
    let at = 0;
    for await (const piece of chunks(file)) {
      const keep = piece.subarray(Math.max(0, from.localHeader - at));
      at += piece.length;
      if (keep.length > 0) yield keep;
    }
  };
  const got = new Map<string, Buffer>();
  await extractStoredEntries(
    skipped(),
    listed.slice(2),
    async (entry, data) => {
      const pieces: Buffer[] = [];
      for await (const piece of data) pieces.push(piece);
      got.set(entry.name, Buffer.concat(pieces));
    },
    from.localHeader,
  );
  expect([...got.keys()]).toEqual(listed.slice(2).map((entry) => entry.name));
  for (const entry of entries) {
    if (got.has(entry.name)) expect(Buffer.compare(got.get(entry.name)!, entry.bytes)).toBe(0);
  }
});
