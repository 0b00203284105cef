import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import { type Browser, chromium, type Page } from 'playwright-core';
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
 * key, a quarter view) and after a zoom step (x2), each both when the view before it was left
 * until its fetch-ahead was done and when the step follows the previous settle at once; bytes
 * fetched per viewport; the JavaScript transferred for the list page and for the sample page
 * with its viewer.
 *
 * The stores are written on the fly with the project's writers (ShardedArray, the H&E NGFF
 * attributes, finishPredictionStore), full size in metadata and levels, holding pixels (a
 * synthetic pattern with noise) in a window of +-2048 pixels around the centre of every level:
 * the region the bench's views look at. Everywhere else is absent (the fill value), as
 * background is in a real store. Run with `npm run bench:viewer [-- STEPS]` (5 pans and 5 zoom
 * steps per visit by default).
 */
const SIZE = 50_000;
const MPP = 0.5;
const WINDOW = 2048;
const MARKERS = ['DAPI', 'CD3', 'CD8', 'PANCK'];
const STEPS = Number(process.argv[2] ?? 5);
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/**
 * `BENCH_VIEWER_STORES=DIR`: the stores are written there once and read by later runs (writing
 * them takes minutes); delete DIR after a change to the store writers.
 */
const STORES = process.env.BENCH_VIEWER_STORES;

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
    fs: {
      root: STORES ?? path.join(process.env.SPS_TEST_SCRATCH!, 'o'),
      publicBaseUrl: base,
      signingSecret: secret,
    },
  });

  const [sample] = await sql<
    { id: string }[]
  >`INSERT INTO samples (organization_id, created_by, filename, name,
      content_type, file_size, status, uploaded_bytes, storage_key, mpp_calibrated, width_px, height_px)
    VALUES (${org}, ${owner.userId}, 'bench.svs', 'Bench 50k', 'image/tiff', 1000, 'ready', 1000, 'orgs/x/bench',
      ${MPP}, ${SIZE}, ${SIZE}) RETURNING id`;
  const sampleId = sample!.id;
  // Kept stores live under fixed prefixes, whatever ids this run's rows get.
  const hePrefix = STORES ? 'bench/he/' : objectKeys.hePyramid(org, sampleId);
  const levels = pyramidLevels(SIZE, SIZE);
  await sql`INSERT INTO sample_slides (sample_id, format, vendor, levels, he_prefix, he_levels)
    VALUES (${sampleId}, 'tiff', 'aperio', ${sql.json([{ widthPx: SIZE, heightPx: SIZE, downsample: 1 }])},
      ${hePrefix}, ${sql.json(levels.map((l) => ({ widthPx: l.widthPx, heightPx: l.heightPx })))})`;
  const jobId = randomUUID();
  const resultPrefix = STORES ? 'bench/prediction/' : objectKeys.predictionStore(org, sampleId, jobId);
  await sql`INSERT INTO jobs (id, organization_id, sample_id, status, markers, model, reserved_credits,
      results_available, result_prefix, completed_at)
    VALUES (${jobId}, ${org}, ${sampleId}, 'completed', ${MARKERS}, 'v0.7', 10, true, ${resultPrefix}, now())`;

  if (STORES && (await store.stat('bench/written'))) console.log(`the stores kept in ${STORES}`);
  else {
    const writing = performance.now();
    await writeHe(prefixedStore(store, hePrefix));
    await writePrediction(prefixedStore(store, resultPrefix));
    await store.put('bench/written', new Uint8Array());
    console.log(`wrote the stores in ${((performance.now() - writing) / 1000).toFixed(1)} s`);
  }

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

interface Step {
  ms: number;
  /** Milliseconds from the key to the last store response the view waited for. */
  fetched: number;
  bytes: number;
}

/** The page's store traffic as the browser sees it (CDP), with the HTTP cache off. */
async function watchNetwork(page: Page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  const types = new Map<string, string>();
  const urls = new Map<string, string>();
  const sentAt = new Map<string, number>();
  const inFlight = new Set<string>();
  let fetched: { url: string; type: string; bytes: number; sentAt: number }[] = [];
  cdp.on('Network.requestWillBeSent', (event) => {
    urls.set(event.requestId, event.request.url);
    sentAt.set(event.requestId, event.wallTime * 1000);
    if (isStore(event.request.url)) inFlight.add(event.requestId);
  });
  cdp.on('Network.responseReceived', (event) => types.set(event.requestId, event.type));
  cdp.on('Network.loadingFailed', (event) => inFlight.delete(event.requestId));
  cdp.on('Network.loadingFinished', (event) => {
    inFlight.delete(event.requestId);
    fetched.push({
      url: urls.get(event.requestId) ?? '',
      type: types.get(event.requestId) ?? '',
      bytes: event.encodedDataLength,
      sentAt: sentAt.get(event.requestId) ?? 0,
    });
  });
  return {
    reset: () => {
      fetched = [];
    },
    sum: (filter: (f: Fetched) => boolean) => fetched.filter(filter).reduce((total, f) => total + f.bytes, 0),
    count: (filter: (f: Fetched) => boolean) => fetched.filter(filter).length,
    /** Milliseconds until no store request has been on its way for 300 ms (at most 30 s). */
    async quiet(): Promise<number> {
      const started = performance.now();
      let quietSince = performance.now();
      while (performance.now() - quietSince < 300 && performance.now() - started < 30_000) {
        if (inFlight.size > 0) quietSince = performance.now();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return quietSince - started;
    },
  };
}

interface Fetched {
  url: string;
  type: string;
  bytes: number;
  /** When the browser sent the request, epoch milliseconds. */
  sentAt: number;
}

const isScript = (f: Fetched) => f.type === 'Script';
/** Store reads: the H&E files endpoint and the prediction's signed store links. */
const STORE_PATH = /\/(he\/files|stores)\//;
const isStore = (url: string) => STORE_PATH.test(url);
/** Store reads sent up to `until` (epoch ms): a view's own, not the fetch-ahead that follows it. */
const storeFile =
  (until = Number.POSITIVE_INFINITY) =>
  (f: Fetched) =>
    isStore(f.url) && f.sentAt <= until;

/**
 * One visit of the sample page in a fresh tab: the first viewport, then zoom steps (x2 about the
 * centre) and quarter-view pans, each timed in the page from the key to the canvas's
 * `viewer-settled` (every chunk in view drawn at its level). `dwell`: before each step the view
 * is left alone until the store traffic stops (the viewer's fetch-ahead is done), as when a
 * person looks at a view before moving on; without it each step follows the previous settle at
 * once, before any fetch-ahead can help.
 */
async function visit(browser: Browser, base: string, apiKey: string, sampleId: string, dwell: boolean) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  const network = await watchNetwork(page);
  await page.goto(`${base}/settings`);
  await page.evaluate((key) => sessionStorage.setItem('sps.apiKey', key), apiKey);

  network.reset();
  await page.goto(`${base}/samples`);
  await page.waitForLoadState('networkidle');
  const listJs = network.sum(isScript);

  network.reset();
  await page.goto(`${base}/samples/${sampleId}`);
  await page
    .locator('#viewer-canvas[data-state="complete"]')
    .waitFor({ timeout: 120_000 })
    .catch(async (err) => {
      throw new Error(`${(err as Error).message}\npage:\n${await page.locator('#main').textContent()}`);
    });
  const firstViewport = await page.evaluate<number>(
    "performance.getEntriesByName('sps-viewer-complete')[0].startTime",
  );
  const firstComplete = (await page.evaluate<number>('performance.timeOrigin')) + firstViewport;
  const firstBytes = network.sum(storeFile(firstComplete));
  const firstRequests = network.count(storeFile(firstComplete));
  await page.waitForLoadState('networkidle');
  const viewerJs = network.sum(isScript);

  const aheads: number[] = [];
  if (dwell) await network.quiet();
  // Every store read of a step must stay in the page's resource timeline (250 entries by default).
  await page.evaluate('performance.setResourceTimingBufferSize(1e6)');
  const step = async (key: string): Promise<Step> => {
    network.reset();
    // `fetched`: when the last store read the view waited for had its response, after the key.
    const settled = await page.evaluate<{
      ms: number;
      at: number;
      fetched: number;
    }>(`new Promise((resolve) => {
      const canvas = document.getElementById('viewer-canvas');
      performance.clearResourceTimings();
      const started = performance.now();
      canvas.addEventListener('viewer-settled', () => {
        const now = performance.now();
        const reads = performance.getEntriesByType('resource')
          .filter((e) => e.startTime <= now && new RegExp(${JSON.stringify(STORE_PATH.source)}).test(e.name));
        const fetched = Math.max(0, ...reads.map((e) => e.responseEnd - started));
        resolve({ ms: now - started, at: performance.timeOrigin + now, fetched });
      }, { once: true });
      canvas.dispatchEvent(new KeyboardEvent('keydown', { key: ${JSON.stringify(key)}, bubbles: true }));
    })`);
    const { ms, at, fetched } = settled;
    // Without a dwell the step's bytes are its own; with one, they include its fetch-ahead.
    if (!dwell) return { ms, fetched, bytes: network.sum(storeFile(at)) };
    aheads.push(await network.quiet());
    return { ms, fetched, bytes: network.sum(storeFile()) };
  };
  const zooms: Step[] = [];
  const pans: Step[] = [];
  for (let i = 0; i < STEPS; i++) zooms.push(await step('+'));
  for (let i = 0; i < STEPS; i++) pans.push(await step(i % 2 === 0 ? 'ArrowRight' : 'ArrowDown'));
  await page.screenshot({
    path: path.join(process.env.SPS_TEST_SCRATCH!, `viewer-bench-${dwell ? 'dwell' : 'cold'}.png`),
  });
  const canvas = await page.evaluate<string>(
    "(() => { const c = document.getElementById('viewer-canvas'); return c.clientWidth + ' x ' + c.clientHeight; })()",
  );
  await page.close();
  return { listJs, viewerJs, firstViewport, firstBytes, firstRequests, zooms, pans, aheads, canvas };
}

async function measure(browser: Browser, base: string, apiKey: string, sampleId: string) {
  const cold = await visit(browser, base, apiKey, sampleId, false);
  const warm = await visit(browser, base, apiKey, sampleId, true);

  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const kib = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`;
  const settle = (steps: Step[]) =>
    `${median(steps.map((s) => s.ms)).toFixed(0)} / ${Math.max(...steps.map((s) => s.ms)).toFixed(0)} ms`;
  console.log(
    `\nbench/viewer: ${SIZE} x ${SIZE} px at ${MPP} µm, H&E + ${MARKERS.length} markers, canvas ${cold.canvas} CSS px, headless Chromium (SwiftShader)`,
  );
  console.table([
    {
      figure: 'navigation to first complete viewport (two visits)',
      value: `${cold.firstViewport.toFixed(0)} / ${warm.firstViewport.toFixed(0)} ms`,
      target: '< 2000 ms',
    },
    {
      figure: 'settle after a zoom step, view left until its fetch-ahead is done (median / max)',
      value: settle(warm.zooms),
      target: '< 500 ms',
    },
    {
      figure: 'settle after a pan, view left until its fetch-ahead is done (median / max)',
      value: settle(warm.pans),
      target: '< 500 ms',
    },
    {
      figure: 'settle after a zoom step right after the previous settle (median / max)',
      value: settle(cold.zooms),
      target: '',
    },
    {
      figure: 'settle after a pan right after the previous settle (median / max)',
      value: settle(cold.pans),
      target: '',
    },
    {
      figure: 'of these, key to the last store response the view waited for (median)',
      value: `zoom ${median(cold.zooms.map((z) => z.fetched)).toFixed(0)} ms, pan ${median(cold.pans.map((p) => p.fetched)).toFixed(0)} ms`,
      target: '',
    },
    {
      figure: 'fetch-ahead after a settle, until the store traffic stops (median / max)',
      value: `${median(warm.aheads).toFixed(0)} / ${Math.max(...warm.aheads).toFixed(0)} ms`,
      target: '',
    },
    {
      figure: 'store bytes, first viewport',
      value: `${kib(cold.firstBytes)} in ${cold.firstRequests} requests`,
      target: '',
    },
    {
      figure: 'store bytes per zoom step, right after the previous settle (median)',
      value: kib(median(cold.zooms.map((z) => z.bytes))),
      target: '',
    },
    {
      figure: 'store bytes per zoom step and its fetch-ahead (median)',
      value: kib(median(warm.zooms.map((z) => z.bytes))),
      target: '',
    },
    {
      figure: 'store bytes per pan and its fetch-ahead (median)',
      value: kib(median(warm.pans.map((p) => p.bytes))),
      target: '',
    },
    { figure: 'JS transferred, list page', value: kib(cold.listJs), target: '' },
    { figure: 'JS transferred, sample page + viewer', value: kib(cold.viewerJs), target: '' },
  ]);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
