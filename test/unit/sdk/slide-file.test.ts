import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { detectSlideFormat } from '../../../compute/slide/format';
import { bytesSource } from '../../../compute/source';
import { blobSource, slideFileProblem } from '../../../sdk';
import { SHARED_WSI } from '../../support/uploads';

/**
 * The clients' first look at a file (sdk/slide-file.ts) and ingest's (compute/slide/format.ts)
 * must agree: a file the clients refuse would have failed ingest, and one they send is one
 * ingest reads (or fails on further in, for a reason only the whole file shows).
 */
const tiffHead = Uint8Array.from([0x49, 0x49, 0x2a, 0x00, 8, 0, 0, 0]);
const bigTiffHead = Uint8Array.from([0x4d, 0x4d, 0x00, 0x2b, 0, 8, 0, 0]);
const text = (value: string) => new TextEncoder().encode(value);
function dicomHead(): Uint8Array {
  const bytes = new Uint8Array(256);
  bytes.set(text('DICM'), 128);
  return bytes;
}

const madeUp: [string, Uint8Array][] = [
  ['failed-copy.svs', new Uint8Array(0)],
  ['notes.svs', text('a page of notes, not a slide')],
  ['scan.svs', tiffHead],
  ['scan.btf', bigTiffHead],
  ['Scan 12.VSI', tiffHead],
  ['level-0.dcm', dicomHead()],
  ['slide.mrxs', text('[GENERAL]\nSLIDE_VERSION = 01.02\n')],
  ['slide.ets', text('SIS\0')],
  ['slide.vms', text('[Virtual Microscope Specimen]\n')],
  ['slide.svslide', text('SQLite format 3\0')],
  ['archive.zip', text('PK\x03\x04')],
];

async function ingestRefuses(name: string, bytes: Uint8Array): Promise<boolean> {
  try {
    await detectSlideFormat(bytesSource(bytes), undefined, name);
    return false;
  } catch {
    return true;
  }
}

async function sharedSlides(folder = SHARED_WSI): Promise<string[]> {
  const entries = await readdir(folder, { withFileTypes: true });
  const files = await Promise.all(
    entries.map((entry) => {
      const at = path.join(folder, entry.name);
      if (entry.isDirectory()) return entry.name === 'gen' ? [] : sharedSlides(at);
      return /\.(svs|tiff?|ndpi|scn|bif|dcm)$/i.test(entry.name) ? [at] : [];
    }),
  );
  return files.flat();
}

test('the first look refuses just what ingest refuses, for made-up files and every shared slide', async () => {
  const cases = [
    ...madeUp,
    ...(await Promise.all(
      (
        await sharedSlides()
      ).map(
        async (file) => [path.basename(file), new Uint8Array(await readFile(file))] as [string, Uint8Array],
      ),
    )),
  ];
  expect(cases.length).toBeGreaterThan(madeUp.length + 15);
  for (const [name, bytes] of cases) {
    const problem = await slideFileProblem(blobSource(new Blob([bytes]), name));
    expect({ name, refused: problem !== undefined }).toEqual({
      name,
      refused: await ingestRefuses(name, bytes),
    });
  }
});

test('each refusal says what the file is and what to do', async () => {
  const problem = (name: string, bytes: Uint8Array) => slideFileProblem(blobSource(new Blob([bytes]), name));
  await expect(problem('failed-copy.svs', new Uint8Array(0))).resolves.toBe('empty (0 bytes)');
  await expect(problem('Scan 12.VSI', tiffHead)).resolves.toBe(
    'a .vsi slide, whose pixels are in other files or a database, which the service does not read: convert it to OME-TIFF and upload that',
  );
  await expect(problem('notes.svs', text('notes'))).resolves.toMatch(
    /^not a whole-slide image the service reads/,
  );
});
