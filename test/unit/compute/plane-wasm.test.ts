import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const ASSEMBLY = path.join(__dirname, '..', '..', '..', 'compute', 'prediction', 'assembly');
const ASC = require.resolve('assemblyscript/bin/asc.js');

// plane.wasm is committed so that the service runs without a compiler; this keeps it the
// build of plane.ts as it stands, with the options `npm run build:wasm` uses.
describe('plane.wasm', () => {
  it('is the build of assembly/plane.ts', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sps-plane-wasm-'));
    try {
      const built = path.join(dir, 'plane.wasm');
      await promisify(execFile)(process.execPath, [
        ASC,
        path.join(ASSEMBLY, 'plane.ts'),
        '--config',
        path.join(ASSEMBLY, 'asconfig.json'),
        '--target',
        'release',
        '--outFile',
        built,
      ]);
      const [fresh, committed] = await Promise.all([
        readFile(built),
        readFile(path.join(ASSEMBLY, 'plane.wasm')),
      ]);
      expect(fresh.equals(committed)).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
