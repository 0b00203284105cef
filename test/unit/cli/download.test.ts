import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { downloadAll } from '../../../cli/sps/download';
import { createClient } from '../../../sdk';

/**
 * `downloadAll` against a real HTTP server that breaks off files mid-body or refuses them: the
 * download goes on from `FILE.part` after a lost connection, and stops at a refusal.
 */
const FILE = randomBytes(3 * 1024 * 1024);
let dir: string;
let server: http.Server;
let base: string;
/** Per path, the `Range` of each request (`-` for none). */
let requests: Map<string, string[]>;
/** How many of the first answers to `/drops` break off after 256 KiB. */
let drops: number;

beforeAll(async () => {
  server = http.createServer((request, response) => {
    const seen = requests.get(request.url!) ?? [];
    seen.push(request.headers.range ?? '-');
    requests.set(request.url!, seen);
    if (request.url === '/refused') {
      response.writeHead(403, { 'content-type': 'application/json' });
      const body = {
        error: 'forbidden',
        message: 'the link has expired',
        required: null,
        retryAfterSeconds: null,
      };
      response.end(JSON.stringify(body));
      return;
    }
    const from = Number(/^bytes=(\d+)-$/.exec(request.headers.range ?? '')?.[1] ?? 0);
    const headers = { 'content-length': String(FILE.length - from) };
    if (from > 0) {
      response.writeHead(206, {
        ...headers,
        'content-range': `bytes ${from}-${FILE.length - 1}/${FILE.length}`,
      });
    } else response.writeHead(200, headers);
    if (request.url === '/drops' && drops > 0) {
      drops -= 1;
      // A quarter of a megabyte, then the connection is gone.
      response.write(FILE.subarray(from, from + 256 * 1024), () => response.destroy());
      return;
    }
    response.end(FILE.subarray(from));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'sps-download-'));
  requests = new Map();
  drops = 0;
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const client = () => createClient({ baseUrl: base });
const item = (key: string, url: string) => ({
  key,
  fetch: (range: string | undefined, signal: AbortSignal) =>
    client().transport.send({
      method: 'GET',
      url: `${base}${url}`,
      headers: range ? { range } : {},
      signal,
      bearer: false,
    }),
});

test('a file whose connection breaks off twice is resumed from its part and lands whole', async () => {
  drops = 2;
  let bytes = 0;
  const summary = await downloadAll(dir, [item('slide.ome.tif', '/drops')], {
    parallel: 1,
    signal: new AbortController().signal,
    onBytes: (n) => {
      bytes += n;
    },
  });
  expect(await readFile(path.join(dir, 'slide.ome.tif'))).toEqual(FILE);
  // Each attempt from what reached the part file: further on every time.
  const ranges = requests.get('/drops')!;
  expect(ranges).toHaveLength(3);
  const offsets = ranges.slice(1).map((range) => Number(/^bytes=(\d+)-$/.exec(range)![1]));
  expect(ranges[0]).toBe('-');
  expect(offsets[0]).toBeGreaterThan(0);
  expect(offsets[1]).toBeGreaterThan(offsets[0]!);
  expect(summary).toEqual({ files: 1, bytes: FILE.length, skipped: 0, absent: 0 });
  expect(bytes).toBe(FILE.length);
}, 20_000);

test('a refusal is not retried: the download stops with the service’s error', async () => {
  await expect(
    downloadAll(dir, [item('gone.ome.tif', '/refused')], {
      parallel: 1,
      signal: new AbortController().signal,
    }),
  ).rejects.toMatchObject({ code: 'forbidden', message: 'the link has expired' });
  expect(requests.get('/refused')).toEqual(['-']);
  expect(await readdir(dir)).toEqual([]);
});

test('a connection lost on every attempt gives up after five, its part kept for a rerun', async () => {
  drops = 5;
  await expect(
    downloadAll(dir, [item('slide.ome.tif', '/drops')], {
      parallel: 1,
      signal: new AbortController().signal,
    }),
  ).rejects.toThrow('terminated');
  expect(requests.get('/drops')).toHaveLength(5);
  expect(await readdir(dir)).toEqual(['slide.ome.tif.part']);
}, 30_000);
