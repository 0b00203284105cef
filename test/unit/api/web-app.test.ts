import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import express from 'express';
import pino from 'pino';
import { errorHandler } from '../../../api/errors';
import { webAppRoutes } from '../../../api/routes/web-app';

let webRoot: string;
let server: ReturnType<express.Express['listen']>;
let base: string;

beforeAll(async () => {
  webRoot = await mkdtemp(path.join(tmpdir(), 'sps-web-root-'));
  const app = express();
  app.use(
    webAppRoutes({
      appUrl: 'http://127.0.0.1/app',
      publicBaseUrl: 'http://127.0.0.1/api/v1',
      webRoot,
    }),
  );
  app.use(errorHandler(pino({ level: 'silent' })));
  await new Promise<void>((resolve) => {
    server = app.listen(0, '127.0.0.1', () => resolve());
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(webRoot, { recursive: true, force: true });
});

const shell = (bundle: string) =>
  `<!doctype html><html><head><script type="module" src="./assets/${bundle}"></script></head></html>`;

test('a page names the bundles of the build on disk now, not of the build it first served', async () => {
  await writeFile(path.join(webRoot, 'samples.html'), shell('samples-first.js'));
  const first = await (await fetch(`${base}/app/samples`)).text();
  expect(first).toContain('<head><base href="/app/">');
  expect(first).toContain('samples-first.js');

  // What a rebuild does: the same page, new hashed names.
  await writeFile(path.join(webRoot, 'samples.html'), shell('samples-second.js'));
  const second = await (await fetch(`${base}/app/samples`)).text();
  expect(second).toContain('samples-second.js');
  expect(second).not.toContain('samples-first.js');
});

test('without a build the page is the contract error unavailable, not a crash', async () => {
  const response = await fetch(`${base}/app/settings`);
  expect(response.status).toBe(503);
  await expect(response.json()).resolves.toMatchObject({ error: 'unavailable' });
});
