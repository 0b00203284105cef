import { execFile } from 'node:child_process';
import path from 'node:path';

export interface ZarritaRead {
  data: Uint8Array;
  shape: number[];
  dtype: string;
}

/**
 * A region of an array in a store folder (or at a store URL) as zarrita reads it: `selection` has one `[start,
 * stop]` (or null for the whole axis) per dimension. Runs zarrita in a child Node process.
 */
export function readWithZarrita(
  storeRoot: string,
  arrayPath: string,
  selection: ([number, number] | null)[],
): Promise<ZarritaRead> {
  const script = path.join(__dirname, 'zarrita-read.mjs');
  const args = [script, storeRoot, arrayPath, JSON.stringify(selection)];
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      args,
      { encoding: 'buffer', maxBuffer: 1 << 30, cwd: path.join(__dirname, '..', '..') },
      (err, stdout, stderr) => {
        if (err) {
          reject(new Error(`zarrita failed: ${err.message}\n${stderr.toString()}`));
          return;
        }
        const meta = JSON.parse(stderr.toString()) as { shape: number[]; dtype: string };
        resolve({ data: new Uint8Array(stdout.buffer, stdout.byteOffset, stdout.byteLength), ...meta });
      },
    );
  });
}
