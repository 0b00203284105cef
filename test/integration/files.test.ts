import { randomBytes } from 'node:crypto';
import { readdirSync, readlinkSync } from 'node:fs';
import { get } from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startStack, type TestStack } from '../support/stack';

/** The API's own `/files/*key` route, reached through links the filesystem store signs. */
let stack: TestStack;
const key = 'orgs/files-test/samples/a/exports/a report (1) + ü.bin';
const content = randomBytes(1000);

beforeAll(async () => {
  stack = await startStack();
  await stack.store.put(key, new Uint8Array(content));
});
afterAll(async () => {
  await stack?.close();
});

const signed = (options: { expiresInSeconds?: number; downloadName?: string } = {}) =>
  stack.store.signedUrl(key, { expiresInSeconds: 60, ...options }).then((url) => new URL(url));

async function expectRefused(response: Response, status: number, error: string) {
  expect(response.status).toBe(status);
  expect(await response.json()).toEqual({
    error,
    message: expect.any(String),
    required: null,
    retryAfterSeconds: null,
  });
}

describe('GET /files/{key}', () => {
  test('a signed link is served by the API itself with the whole object', async () => {
    const url = await signed();
    expect(url.origin).toBe(stack.baseUrl);
    expect(url.pathname.startsWith('/files/')).toBe(true);
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('accept-ranges')).toBe('bytes');
    expect(response.headers.get('content-length')).toBe(String(content.length));
    expect(Buffer.from(await response.arrayBuffer()).equals(content)).toBe(true);
  });

  test('a Range request answers 206 with the slice and its Content-Range', async () => {
    const url = await signed();
    const middle = await fetch(url, { headers: { range: 'bytes=100-199' } });
    expect(middle.status).toBe(206);
    expect(middle.headers.get('content-range')).toBe(`bytes 100-199/${content.length}`);
    expect(Buffer.from(await middle.arrayBuffer()).equals(content.subarray(100, 200))).toBe(true);
    const suffix = await fetch(url, { headers: { range: 'bytes=-10' } });
    expect(suffix.status).toBe(206);
    expect(suffix.headers.get('content-range')).toBe(`bytes 990-999/${content.length}`);
    expect(Buffer.from(await suffix.arrayBuffer()).equals(content.subarray(990))).toBe(true);
  });

  test('a download name makes the response an attachment', async () => {
    const response = await fetch(await signed({ downloadName: 'report (1).bin' }));
    expect(response.status).toBe(200);
    expect(response.headers.get('content-disposition')).toBe(
      `attachment; filename*=UTF-8''${encodeURIComponent('report (1).bin')}`,
    );
    await response.arrayBuffer();
  });

  test('a tampered token is 403 forbidden with the error body', async () => {
    const url = await signed();
    const token = url.searchParams.get('token')!;
    const at = token.length - 5;
    url.searchParams.set('token', token.slice(0, at) + (token[at] === 'a' ? 'b' : 'a') + token.slice(at + 1));
    await expectRefused(await fetch(url), 403, 'forbidden');
  });

  test('a token for another key, or none, is 403 forbidden', async () => {
    const other = new URL(await stack.store.signedUrl('orgs/files-test/other.bin', { expiresInSeconds: 60 }));
    const url = await signed();
    url.searchParams.set('token', other.searchParams.get('token')!);
    await expectRefused(await fetch(url), 403, 'forbidden');
    url.searchParams.delete('token');
    await expectRefused(await fetch(url), 403, 'forbidden');
  });

  test('an expired link is 403 forbidden with the error body', async () => {
    const url = await signed({ expiresInSeconds: 1 });
    await sleep(1_200);
    await expectRefused(await fetch(url), 403, 'forbidden');
  });

  test('a valid link to an object that is gone is 404 not_found', async () => {
    const gone = 'orgs/files-test/gone.bin';
    await stack.store.put(gone, new Uint8Array([1]));
    const url = await stack.store.signedUrl(gone, { expiresInSeconds: 60 });
    await stack.store.delete(gone);
    await expectRefused(await fetch(url), 404, 'not_found');
  });
});

/** How many of this process's descriptors (the in-process API's) hold `file` open. */
function openHandles(file: string): number {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === file;
    } catch {
      return false;
    }
  }).length;
}

test('a client that goes away mid-file leaves no file handle open', async () => {
  const large = 'orgs/files-test/samples/a/exports/large.bin';
  await stack.store.put(large, new Uint8Array(64 * 1024 * 1024));
  const url = new URL(await stack.store.signedUrl(large, { expiresInSeconds: 60 }));
  await new Promise<void>((resolve, reject) => {
    const request = get(url, (response) => {
      response.once('data', () => {
        request.destroy();
        resolve();
      });
    });
    request.on('error', (err) => {
      if (!request.destroyed) reject(err);
    });
  });
  const file = path.join(stack.fsRoot, large);
  // The API learns of the closed socket asynchronously; a handle left to garbage collection stays.
  for (let i = 0; i < 100 && openHandles(file) > 0; i++) await sleep(100);
  expect(openHandles(file)).toBe(0);
});
