import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import { type Browser, chromium } from 'playwright-core';
import postgres from 'postgres';
import { createApp } from '../api/app';
import { createWorkflowEngine } from '../api/workflow-engine';
import { createOrganizationWithOwner } from '../cli/admin-commands';
import {
  finishPredictionStore,
  markerArray,
  type PredictionStoreLayout,
  storeLevels,
} from '../compute/prediction/store';
import { HE_ZSTD_LEVEL } from '../compute/pyramid/build';
import { heImageAttributes } from '../compute/pyramid/ngff';
import { pyramidLevels } from '../compute/pyramid/plan';
import { type KeyValueStore, prefixedStore } from '../compute/store';
import { type DataType, encodeJson, groupMetadata, ShardedArray } from '../compute/zarr';
import { createSql } from '../db';
import { migrate } from '../db/migrate';
import { createObjectStore } from '../storage';
import { objectKeys } from '../storage/locator';

/**
 * The sample page's viewer in headless Chromium (SwiftShader WebGL2) over a 50,000 x 50,000
 * prediction with 4 markers and its H&E pyramid, served by the real API from the filesystem
 * backend. Prints: navigation to the first complete viewport, settle time after a pan (arrow
 * key, a quarter view) and after a zoom step (x2), bytes fetched per viewport, and the
 * JavaScript transferred for the list page and for the sample page with its viewer.
 *
 * The stores are written on the fly with the project's writers (ShardedArray, the H&E NGFF
 * attributes, finishPredictionStore), full size in metadata and levels, holding pixels (a
 * synthetic pattern with noise) in a window of +-2048 pixels around the centre of every level:
 * the region the bench's views look at. Everywhere else is absent (the fill value), as
 * background is in a real store. Run with `npm run bench:viewer [-- STEPS]` (5 pans and 5 zoom
 * steps by default).
 */
const SIZE = 50_000;
const MPP = 0.5;
const WINDOW = 2048;
const MARKERS = ['DAPI', 'CD3', 'CD8', 'PANCK'];
const STEPS = Number(process.argv[2] ?? 5);
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** A cheap deterministic hash of a level-0 position: the pattern's noise. */
function noise(x: number, y: number, salt: number): number {
  let h = (x * 374761393 + y * 668265263 + salt * 2147483647) | 0;
  h = Math.imul(h ^ (h >>> 13), 1274126177);
  return ((h ^ (h >>> 16)) >>> 0) / 4294967296;
}

/** Cell-like blobs about 12 µm apart, a different phase per marker. */
function blob(x: number, y: number, salt: number): number {
  const s = Math.sin((x + salt * 97) / 7.5) * Math.sin((y + salt * 53) / 7.5);
  return s > 0.3 ? (s - 0.3) / 0.7 : 0;
}

/** Shards of `array` that meet the window around the centre of a level of `width` x `height`. */
function windowShards<D extends DataType>(array: ShardedArray<D>, width: number, height: number) {
  const [shardHeight, shardWidth] = array.spec.shardShape;
  const span = (size: number, shard: number) => {
    const from = Math.max(0, Math.floor((size / 2 - WINDOW) / shard));
    const to = Math.min(Math.ceil(size / shard) - 1, Math.floor((size / 2 + WINDOW) / shard));
    return { from, to };
  };
  const ys = span(height, shardHeight);
  const xs = span(width, shardWidth);
  const shards: { y: number; x: number }[] = [];
  for (let y = ys.from; y <= ys.to; y++) for (let x = xs.from; x <= xs.to; x++) shards.push({ y, x });
  return shards;
}

/** Fills a chunk-major shard buffer from `value(channel, levelX, levelY)`. */
function paint<D extends DataType>(
  array: ShardedArray<D>,
  shardY: number,
  shardX: number,
  value: (c: number, x: number, y: number) => number,
) {
  const g = array.geometry;
  const data = array.allocateShard();
  for (let cy = 0; cy < g.chunksY; cy++) {
    for (let cx = 0; cx < g.chunksX; cx++) {
      let i = (cy * g.chunksX + cx) * g.chunkLength;
      const y0 = (shardY * g.chunksY + cy) * g.chunkHeight;
      const x0 = (shardX * g.chunksX + cx) * g.chunkWidth;
      for (let c = 0; c < g.channels; c++)
        for (let y = 0; y < g.chunkHeight; y++)
          for (let x = 0; x < g.chunkWidth; x++) data[i++] = value(c, x0 + x, y0 + y);
    }
  }
  return data;
}

async function writeHe(sink: KeyValueStore): Promise<void> {
  const levels = pyramidLevels(SIZE, SIZE);
  for (const level of levels) {
    const array = new ShardedArray(level.path, {
      dataType: 'uint8',
      shape: [3, level.heightPx, level.widthPx],
      shardShape: [4096, 4096],
      chunkShape: [512, 512],
      fillValue: 255,
      dimensionNames: ['c', 'y', 'x'],
      compressionLevel: HE_ZSTD_LEVEL,
    });
    await array.writeMetadata(sink);
    const d = level.downsample;
    const base = [225, 170, 215];
    const stain = [120, 140, 60];
    for (const shard of windowShards(array, level.widthPx, level.heightPx)) {
      const data = paint(array, shard.y, shard.x, (c, x, y) => {
        const tissue = blob(x * d, y * d, 7);
        return Math.round(base[c]! - stain[c]! * tissue - 20 * noise(x * d, y * d, c));
      });
      await array.writeShard(sink, shard.y, shard.x, data);
    }
  }
  await sink.put('zarr.json', encodeJson(groupMetadata(heImageAttributes('bench', levels, MPP))));
}

async function writePrediction(sink: KeyValueStore): Promise<void> {
  const layout: PredictionStoreLayout = {
    markers: MARKERS,
    widthPx: SIZE,
    heightPx: SIZE,
    heLevel: 0,
    pixelSizeUm: MPP,
    shardSize: 1024,
    chunkSize: 512,
    model: 'v0.7',
    outputRange: [0, 1],
  };
  const levels = storeLevels(layout);
  const fill = async (level: number) => {
    const size = levels[level]!;
    const d = size.downsample;
    for (const [m, marker] of MARKERS.entries()) {
      const array = markerArray(layout, marker, level);
      if (level === 0) await array.writeMetadata(sink);
      for (const shard of windowShards(array, size.widthPx, size.heightPx)) {
        const data = paint(array, shard.y, shard.x, (_c, x, y) =>
          Math.round(50_000 * blob(x * d, y * d, m) + 4000 * noise(x * d, y * d, m)),
        );
        await array.writeShard(sink, shard.y, shard.x, data);
      }
    }
  };
  await fill(0);
  const histogram = new Array<number>(256).fill(1000);
  const statistics = Object.fromEntries(
    MARKERS.map((marker) => [
      marker,
      { count: 256_000, min: 0, max: 65_535, sum: 256_000 * 20_000, histogram },
    ]),
  );
  // The store's levels, groups and attributes as a prediction finishes them; then every level
  // gets the pattern over its own window (a level made only from level 0's window would show a
  // speck when zoomed out).
  await finishPredictionStore({ sink, layout, statistics });
  for (let level = 1; level < levels.length; level++) await fill(level);
}

async function main() {
  const adminUrl = process.env.TEST_DATABASE_URL!;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe('CREATE DATABASE bench_viewer');
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = '/bench_viewer';
  const sql = createSql(url.toString(), { max: 10 });
  await migrate(sql);
  const owner = await createOrganizationWithOwner(sql, { name: 'bench', email: 'b@bench.org' });
  const org = owner.organizationId;

  const connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS! });
  const secret = randomBytes(32).toString('hex');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const store = createObjectStore({
    backend: 'fs',
    fs: { root: path.join(process.env.SPS_TEST_SCRATCH!, 'o'), publicBaseUrl: base, signingSecret: secret },
  });

  const [sample] = await sql<
    { id: string }[]
  >`INSERT INTO samples (organization_id, created_by, filename, name,
      content_type, file_size, status, uploaded_bytes, storage_key, mpp_calibrated, width_px, height_px)
    VALUES (${org}, ${owner.userId}, 'bench.svs', 'Bench 50k', 'image/tiff', 1000, 'ready', 1000, 'orgs/x/bench',
      ${MPP}, ${SIZE}, ${SIZE}) RETURNING id`;
  const sampleId = sample!.id;
  const hePrefix = objectKeys.hePyramid(org, sampleId);
  const levels = pyramidLevels(SIZE, SIZE);
  await sql`INSERT INTO sample_slides (sample_id, format, vendor, levels, he_prefix, he_levels)
    VALUES (${sampleId}, 'tiff', 'aperio', ${sql.json([{ widthPx: SIZE, heightPx: SIZE, downsample: 1 }])},
      ${hePrefix}, ${sql.json(levels.map((l) => ({ widthPx: l.widthPx, heightPx: l.heightPx })))})`;
  const jobId = randomUUID();
  const resultPrefix = objectKeys.predictionStore(org, sampleId, jobId);
  await sql`INSERT INTO jobs (id, organization_id, sample_id, status, markers, model, reserved_credits,
      results_available, result_prefix, completed_at)
    VALUES (${jobId}, ${org}, ${sampleId}, 'completed', ${MARKERS}, 'v0.7', 10, true, ${resultPrefix}, now())`;

  const writing = performance.now();
  await writeHe(prefixedStore(store, hePrefix));
  await writePrediction(prefixedStore(store, resultPrefix));
  console.log(`wrote the stores in ${((performance.now() - writing) / 1000).toFixed(1)} s`);

  server.on(
    'request',
    createApp({
      sql,
      store,
      workflows: createWorkflowEngine(new Client({ connection }), { taskQueuePrefix: 'bench' }),
      logger: pino({ level: 'silent' }),
      settings: {
        publicBaseUrl: base,
        appUrl: base,
        signingSecret: secret,
        limits: {
          ratePerSecond: 1e6,
          rateBurst: 1e6,
          jsonBodyBytes: 1e6,
          uploadMaxBytes: 1e9,
          uploadChunkMaxBytes: 1e8,
          uploadSessionTtlSeconds: 60,
        },
      },
    }),
  );

  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
  });
  try {
    await measure(browser, base, owner.apiKey, sampleId);
  } finally {
    await browser.close();
    server.close();
    await connection.close();
    await sql.end();
  }
}

async function measure(browser: Browser, base: string, apiKey: string, sampleId: string) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  const types = new Map<string, string>();
  const urls = new Map<string, string>();
  let fetched: { url: string; type: string; bytes: number }[] = [];
  cdp.on('Network.responseReceived', (event) => {
    types.set(event.requestId, event.type);
    urls.set(event.requestId, event.response.url);
  });
  cdp.on('Network.loadingFinished', (event) =>
    fetched.push({
      url: urls.get(event.requestId) ?? '',
      type: types.get(event.requestId) ?? '',
      bytes: event.encodedDataLength,
    }),
  );
  const sum = (filter: (f: { url: string; type: string }) => boolean) =>
    fetched.filter(filter).reduce((total, f) => total + f.bytes, 0);
  const isScript = (f: { type: string }) => f.type === 'Script';
  const isStore = (f: { url: string }) => /\/(he|results)\/files\//.test(f.url);

  await page.goto(`${base}/settings`);
  await page.evaluate((key) => sessionStorage.setItem('sps.apiKey', key), apiKey);

  fetched = [];
  await page.goto(`${base}/samples`);
  await page.waitForLoadState('networkidle');
  const listJs = sum(isScript);

  fetched = [];
  await page.goto(`${base}/samples/${sampleId}`);
  await page.locator('#viewer-canvas[data-state="complete"]').waitFor({ timeout: 120_000 });
  const firstViewport = await page.evaluate<number>(
    "performance.getEntriesByName('sps-viewer-complete')[0].startTime",
  );
  await page.waitForLoadState('networkidle');
  const viewerJs = sum(isScript);
  const firstBytes = sum(isStore);
  const firstRequests = fetched.filter(isStore).length;

  const step = async (key: string) => {
    fetched = [];
    // Timed in the page: from the key to the canvas's `viewer-settled` (every chunk in view drawn).
    const ms = await page.evaluate<number>(`new Promise((resolve) => {
      const canvas = document.getElementById('viewer-canvas');
      const started = performance.now();
      canvas.addEventListener('viewer-settled', () => resolve(performance.now() - started), { once: true });
      canvas.dispatchEvent(new KeyboardEvent('keydown', { key: ${JSON.stringify(key)}, bubbles: true }));
    })`);
    return { ms, bytes: sum(isStore) };
  };
  const pans: { ms: number; bytes: number }[] = [];
  const zooms: { ms: number; bytes: number }[] = [];
  for (let i = 0; i < STEPS; i++) zooms.push(await step('+'));
  for (let i = 0; i < STEPS; i++) pans.push(await step(i % 2 === 0 ? 'ArrowRight' : 'ArrowDown'));
  await page.screenshot({ path: path.join(process.env.SPS_TEST_SCRATCH!, 'viewer-bench.png') });

  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const kib = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`;
  const canvas = await page.evaluate<string>(
    "(() => { const c = document.getElementById('viewer-canvas'); return c.clientWidth + ' x ' + c.clientHeight; })()",
  );
  console.log(
    `\nbench/viewer: ${SIZE} x ${SIZE} px at ${MPP} µm, H&E + ${MARKERS.length} markers, canvas ${canvas} CSS px, headless Chromium (SwiftShader)`,
  );
  console.table([
    {
      figure: 'navigation to first complete viewport',
      value: `${firstViewport.toFixed(0)} ms`,
      target: '< 2000 ms',
    },
    {
      figure: 'settle after a zoom step (median / max)',
      value: `${median(zooms.map((z) => z.ms)).toFixed(0)} / ${Math.max(...zooms.map((z) => z.ms)).toFixed(0)} ms`,
      target: '< 500 ms',
    },
    {
      figure: 'settle after a pan (median / max)',
      value: `${median(pans.map((p) => p.ms)).toFixed(0)} / ${Math.max(...pans.map((p) => p.ms)).toFixed(0)} ms`,
      target: '< 500 ms',
    },
    {
      figure: 'store bytes, first viewport',
      value: `${kib(firstBytes)} in ${firstRequests} requests`,
      target: '',
    },
    {
      figure: 'store bytes per zoom step (median)',
      value: kib(median(zooms.map((z) => z.bytes))),
      target: '',
    },
    { figure: 'store bytes per pan (median)', value: kib(median(pans.map((p) => p.bytes))), target: '' },
    { figure: 'JS transferred, list page', value: kib(listJs), target: '' },
    { figure: 'JS transferred, sample page + viewer', value: kib(viewerJs), target: '' },
  ]);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
