import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The `sps` shim on a Node older than 22, as `npx sps` runs it on a machine whose own Node is
 * older (Debian's is 20): it runs the command line on the Node 22 that `npm run build` fetched
 * into the cache, or says how to get one.
 */
const BIN = path.join(__dirname, '..', '..', '..', 'cli', 'sps', 'bin.js');

/** A `node` older than 22 on this machine's PATH or in the usual places. */
function olderNode(): string | undefined {
  const folders = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin', '/usr/local/bin'];
  for (const folder of folders) {
    const node = path.join(folder, 'node');
    try {
      const version = execFileSync(node, ['--version'], { encoding: 'utf8' });
      if (Number(/^v(\d+)/.exec(version)?.[1]) < 22) return node;
    } catch {
      // Not there, or not a Node.
    }
  }
  return undefined;
}

const node = olderNode();
let cache: string;

beforeEach(() => {
  cache = mkdtempSync(path.join(os.tmpdir(), 'sps-bin-'));
});
afterEach(() => rmSync(cache, { recursive: true, force: true }));

const run = (args: string[]) =>
  spawnSync(node!, [BIN, ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: cache, SPS_CACHE_DIR: cache },
  });

(node ? describe : describe.skip)(`sps on ${node ?? 'an older Node (none here)'}`, () => {
  test('runs on the Node 22 in the cache, its exit code passed on', () => {
    const bin = path.join(cache, 'node-22', 'package', 'bin');
    mkdirSync(bin, { recursive: true });
    symlinkSync(process.execPath, path.join(bin, 'node'));
    const help = run(['--help']);
    expect(help.stderr).toBe('');
    expect(help.stdout).toMatch(/^Usage: sps /);
    expect(help.status).toBe(0);
    const notLoggedIn = run(['samples', 'show', 'x']);
    expect(notLoggedIn.stderr).toMatch(/not logged in/);
    expect(notLoggedIn.status).toBe(2);
  });

  test('without one it says where `npm run build` puts it, exit 2', () => {
    const refused = run(['--help']);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain('sps needs Node.js 22 or later');
    expect(refused.stderr).toContain(`\`npm run build\` in the project fetches it into ${cache}`);
    expect(refused.status).toBe(2);
  });
});
