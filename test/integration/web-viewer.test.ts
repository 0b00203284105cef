/** @jest-environment ./test/support/onnx-environment.js */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { type Browser, chromium, type Page } from 'playwright-core';
import sharp from 'sharp';
import { grantCredits } from '../../db/credits';
import { accessibilityViolations } from '../support/axe';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { publish } from '../support/public-samples';
import { runPythonJson } from '../support/python';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * The sample page's viewer in headless Chromium (WebGL2 on SwiftShader) over a real ingested
 * slide, a real prediction and a real segmentation (the run's processed template, cloned):
 * rendered pixels against the stores' values under the chosen colour and contrast, outlines from
 * the label mask, the cell under the cursor against the Parquet rows, scale bar and cursor
 * position, and a new prediction's channel.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const execFileAsync = promisify(execFile);

let stack: TestStack;
let browser: Browser;
let page: Page;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let jobId: string;
let layerId: string;
let screenshots: string;
let scratch: string;
const problems: string[] = [];
/** Everything the page logged, shown when the viewer does not get to a complete view. */
const consoleLines: string[] = [];

const at = (route: string) => `${stack.baseUrl}${route}`;
const shoot = (name: string) =>
  page.screenshot({ path: path.join(screenshots, `${name}.png`), fullPage: true });
const canvas = () => page.locator('#viewer-canvas');

async function authJson(url: string): Promise<Record<string, unknown>> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${stack.tenant.apiKey}` } });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

/** The x pixel size of each level of a store's first (or named) multiscale, from its root attributes. */
async function pixelSizes(rootUrl: string, name?: string): Promise<number[]> {
  const root = (await authJson(`${rootUrl}zarr.json`)) as {
    attributes: {
      ome: {
        multiscales: { name?: string; datasets: { coordinateTransformations: { scale: number[] }[] }[] }[];
      };
    };
  };
  const multiscales = root.attributes.ome.multiscales;
  const multiscale = name ? multiscales.find((m) => m.name === name)! : multiscales[0]!;
  return multiscale.datasets.map((d) => d.coordinateTransformations[0]!.scale.at(-1)!);
}

/**
 * The level the viewer draws at a zoom of `zoom` CSS (= device) pixels per world unit: the one
 * whose pixel size is nearest a device pixel's in log scale, the finer of two equally near.
 */
const levelAt = (sizes: number[], zoom: number) =>
  sizes.reduce(
    (chosen, size, k) =>
      Math.abs(Math.log2(size * zoom)) < Math.abs(Math.log2(sizes[chosen]! * zoom)) - 1e-6 ? k : chosen,
    0,
  );

interface Region {
  shape: number[];
  data: number[];
}

async function readStores(
  reads: { store: 'he' | 'results' | 'mask'; name?: string; level: number; y: number[]; x: number[] }[],
): Promise<{
  reads: Region[];
  windows: Record<string, { color: string; window: { start: number; end: number } }>;
}> {
  const script = path.join(__dirname, '..', 'support', 'viewer-store-read.mjs');
  const input = { baseUrl: stack.baseUrl, apiKey: stack.tenant.apiKey, sampleId, jobId, layerId, reads };
  const { stdout } = await execFileAsync(process.execPath, [script, JSON.stringify(input)], {
    maxBuffer: 1 << 30,
    cwd: path.join(__dirname, '..', '..'),
  });
  return JSON.parse(stdout);
}

/** The canvas's own pixels, RGB (its drawing buffer is preserved; the page runs at device scale 1). */
async function canvasPixels(): Promise<{ width: number; height: number; rgb: Buffer }> {
  const url = await page.evaluate<string>("document.getElementById('viewer-canvas').toDataURL('image/png')");
  const png = Buffer.from(url.slice(url.indexOf(',') + 1), 'base64');
  const { data, info } = await sharp(png).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  return { width: info.width, height: info.height, rgb: data };
}

const pixel = (image: { width: number; rgb: Buffer }, x: number, y: number) => {
  const i = (y * image.width + x) * 3;
  return [image.rgb[i]!, image.rgb[i + 1]!, image.rgb[i + 2]!];
};

/**
 * A view where one CSS pixel is one H&E level-0 pixel and the canvas's top-left pixel is level-0
 * pixel (`left`, `top`): pixel centres fall on texel centres of every level.
 */
async function openAt(left: number, top: number, zoom: number): Promise<{ width: number; height: number }> {
  const size = { width: 0, height: 0 };
  await page.goto(at(`/samples/${sampleId}`));
  await canvas().waitFor();
  Object.assign(
    size,
    await canvas().evaluate((element: { clientWidth: number; clientHeight: number }) => ({
      width: element.clientWidth,
      height: element.clientHeight,
    })),
  );
  const x = (left + size.width / 2) / zoom;
  const y = (top + size.height / 2) / zoom;
  await page.goto(at(`/samples/${sampleId}#view=${x},${y},${zoom}`));
  await page.reload();
  await complete();
  return size;
}

/** Waits for every chunk in view to be drawn; says what the page showed and logged if it never is. */
async function complete(timeout = 60_000): Promise<void> {
  try {
    await page.locator('#viewer-canvas[data-state="complete"]').waitFor({ timeout });
  } catch (err) {
    // biome-ignore lint/performance/useDomNodeTextContent: Playwright's Locator.innerText, the text as laid out
    const shown = await page.locator('#main').innerText();
    throw new Error(
      `${(err as Error).message}\npage:\n${shown}\nconsole:\n${consoleLines.slice(-80).join('\n')}`,
    );
  }
}

async function setChecked(label: string, checked: boolean): Promise<void> {
  const box = page.locator('#viewer').getByLabel(label, { exact: true });
  if ((await box.isChecked()) !== checked) await box.setChecked(checked);
}

async function settled(): Promise<void> {
  await page.mouse.move(0, 0);
  // Two frames: a control's change draws on the next one.
  await page.evaluate(
    'new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))',
  );
  await complete();
}

let heSizes: number[];
let markerSizes: number[];
let maskSizes: number[];

beforeAll(async () => {
  stack = await startStack({ worker: true, sharedSlides: 'processed' });
  call = apiClient(stack.api, stack.tenant.apiKey);
  ({ sampleId, jobId, layerId } = stack.processedSample());
  expect(stack.processedSample().markers).toEqual(['DAPI', 'CD3']);
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 100_000 });

  heSizes = await pixelSizes(`${stack.api}/samples/${sampleId}/he/files/`);
  markerSizes = await pixelSizes(`${stack.api}/jobs/${jobId}/results/files/`, 'CD3');
  maskSizes = await pixelSizes(`${stack.api}/samples/${sampleId}/segmentation/${layerId}/files/mask/`);

  screenshots = path.join(
    process.env.SPS_TEST_ARTIFACTS ?? path.join(__dirname, '..', '..', '.data', 'test-artifacts'),
    'web-viewer',
  );
  await mkdir(screenshots, { recursive: true });
  scratch = await mkdtemp(path.join(testEnv().scratch, 'web-viewer-'));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  page.on('response', (response) => {
    if (response.url().includes('/files/'))
      consoleLines.push(
        `${response.status()} ${response.request().headers().range} ${response.headers()['content-range']} ${response.headers()['content-length']} ${response.url().split('/files/')[1]}`,
      );
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (message) => {
    consoleLines.push(`${message.type()}: ${message.text()}`);
    if (message.type() === 'error' && /Content Security Policy|WebGL|shader/i.test(message.text()))
      problems.push(message.text());
  });
  await page.goto(at('/settings'));
  await page.evaluate((key) => sessionStorage.setItem('sps.apiKey', key), stack.tenant.apiKey);
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

/** The level-0 pixel of the slide's centre, rounded: where the views below look. */
const centre = async () => {
  const detail = await call('GET', `/samples/${sampleId}`);
  return { x: Math.floor(detail.json.widthPx / 2), y: Math.floor(detail.json.heightPx / 2) };
};

/** Points spread over the canvas, away from its edges. */
function grid(width: number, height: number): [number, number][] {
  const points: [number, number][] = [];
  for (let i = 1; i <= 6; i++)
    for (let j = 1; j <= 4; j++) points.push([Math.floor((width * i) / 7), Math.floor((height * j) / 5)]);
  return points;
}

test('the H&E is drawn as its pyramid holds it', async () => {
  const middle = await centre();
  const zoom = 1 / heSizes[0]!;
  const size = await openAt(middle.x - 300, middle.y - 200, zoom);
  const left = middle.x - 300;
  const top = middle.y - 200;
  await setChecked('CD3', false);
  await setChecked('DAPI', false);
  await page.locator('#viewer').getByLabel('H&E opacity').fill('1');
  await settled();
  const level = levelAt(heSizes, zoom);
  expect(level).toBe(0);
  const image = await canvasPixels();
  expect([image.width, image.height]).toEqual([size.width, size.height]);
  const { reads } = await readStores([
    { store: 'he', level, y: [top, top + size.height], x: [left, left + size.width] },
  ]);
  const [region] = reads as [Region];
  const plane = region.shape[1]! * region.shape[2]!;
  for (const [x, y] of grid(size.width, size.height)) {
    const stored = [0, 1, 2].map((c) => region.data[c * plane + y * region.shape[2]! + x]!);
    const drawn = pixel(image, x, y);
    const close = drawn.every((value, c) => Math.abs(value - stored[c]!) <= 1);
    expect({ x, y, drawn, stored, close }).toEqual({ x, y, drawn, stored, close: true });
  }
  await shoot('viewer-he');
}, 120_000);

test('a marker is drawn as its store holds it, under the chosen colour and contrast limits', async () => {
  const middle = await centre();
  const zoom = 1 / heSizes[0]!;
  const left = middle.x - 300;
  const top = middle.y - 200;
  const size = await openAt(left, top, zoom);
  const level = levelAt(markerSizes, zoom);
  const ratio = heSizes[0]! / markerSizes[level]!;
  const x0 = Math.floor(left * ratio);
  const y0 = Math.floor(top * ratio);
  const x1 = Math.ceil((left + size.width) * ratio) + 1;
  const y1 = Math.ceil((top + size.height) * ratio) + 1;
  const { reads, windows } = await readStores([
    { store: 'results', name: 'CD3', level, y: [y0, y1], x: [x0, x1] },
  ]);
  const [region] = reads as [Region];
  const values = region.data.filter((v) => v > 0).sort((a, b) => a - b);
  expect(values.length).toBeGreaterThan(0);
  // Defaults: the store's own window and colour.
  const row = page.locator('.channel[data-channel="CD3"]');
  await expect(row.getByLabel('CD3 contrast minimum').inputValue()).resolves.toBe(
    String(Math.round(windows.CD3!.window.start)),
  );
  await expect(row.getByLabel('CD3 contrast maximum').inputValue()).resolves.toBe(
    String(Math.round(windows.CD3!.window.end)),
  );
  await expect(row.getByLabel('CD3 colour').inputValue()).resolves.toBe(
    `#${windows.CD3!.color.toLowerCase()}`,
  );
  // Chosen: limits at the region's 10th and 90th percentiles, an orange no default has.
  const low = values[Math.floor(values.length * 0.1)]!;
  const high = Math.max(values[Math.floor(values.length * 0.9)]!, low + 1);
  await setChecked('H&E', false);
  await setChecked('DAPI', false);
  await setChecked('CD3', true);
  await row.getByLabel('CD3 contrast minimum').fill(String(low));
  await row.getByLabel('CD3 contrast maximum').fill(String(high));
  await row.getByLabel('CD3 contrast maximum').press('Tab');
  await row.getByLabel('CD3 colour').fill('#ff8000');
  await settled();
  const image = await canvasPixels();
  const colour = [1, 128 / 255, 0];
  let lit = 0;
  for (const [x, y] of grid(size.width, size.height)) {
    const mx = Math.floor((left + x + 0.5) * ratio) - x0;
    const my = Math.floor((top + y + 0.5) * ratio) - y0;
    const stored = region.data[my * region.shape[2]! + mx]!;
    const level01 = Math.min(1, Math.max(0, (stored - low) / (high - low)));
    if (level01 > 0) lit += 1;
    const expected = colour.map((c) => Math.round(255 * c * level01));
    const drawn = pixel(image, x, y);
    const close = drawn.every((value, c) => Math.abs(value - expected[c]!) <= 2);
    expect({ x, y, stored, drawn, expected, close }).toEqual({ x, y, stored, drawn, expected, close: true });
  }
  expect(lit).toBeGreaterThan(0);
  await shoot('viewer-cd3');
}, 120_000);

test('between two levels a marker is drawn from the level nearest a device pixel in log scale', async () => {
  // 1.5 level-0 pixels per device pixel: level 1 (0.75 of its pixels per device pixel), where
  // the coarsest level no larger than a device pixel would be level 0.
  const zoom = 1 / (1.5 * markerSizes[0]!);
  const level = levelAt(markerSizes, zoom);
  expect(level).toBe(1);
  const middle = await centre();
  // Canvas pixel offsets a multiple of 4 from a level-1 pixel edge: no centre falls on an edge.
  const left = Math.floor((middle.x * heSizes[0]! * zoom) / 4) * 4 - 300;
  const top = Math.floor((middle.y * heSizes[0]! * zoom) / 4) * 4 - 200;
  const size = await openAt(left, top, zoom);
  await setChecked('H&E', false);
  await setChecked('DAPI', false);
  await setChecked('CD3', true);
  await settled();
  /** Level-`k` pixels per canvas pixel, and the level's pixel under canvas pixel (x, y). */
  const under = (k: number) => {
    const ratio = 1 / (zoom * markerSizes[k]!);
    return (x: number, y: number) => [
      Math.floor((left + x + 0.5) * ratio),
      Math.floor((top + y + 0.5) * ratio),
    ];
  };
  const span = (k: number) => {
    const [x0, y0] = under(k)(0, 0) as [number, number];
    const [x1, y1] = under(k)(size.width, size.height) as [number, number];
    return { store: 'results' as const, name: 'CD3', level: k, y: [y0, y1 + 1], x: [x0, x1 + 1] };
  };
  const reads = [span(level), span(0)];
  const { reads: regions, windows } = await readStores(reads);
  const { start, end } = windows.CD3!.window;
  const hex = windows.CD3!.color;
  const colour = [0, 2, 4].map((i) => Number.parseInt(hex.slice(i, i + 2), 16) / 255);
  /** The colour canvas pixel (x, y) gets from `reads[i]`'s level under the default window. */
  const expected = (i: number, x: number, y: number) => {
    const read = reads[i]!;
    const region = regions[i]!;
    const [mx, my] = under(read.level)(x, y) as [number, number];
    const stored = region.data[(my - read.y[0]!) * region.shape[2]! + (mx - read.x[0]!)]!;
    const value = Math.min(1, Math.max(0, (stored - start) / (end - start)));
    return colour.map((c) => Math.round(255 * c * value));
  };
  const image = await canvasPixels();
  let lit = 0;
  let unlikeLevel0 = 0;
  const near = (a: number[], b: number[]) => a.every((value, c) => Math.abs(value - b[c]!) <= 2);
  for (const [x, y] of grid(size.width, size.height)) {
    const drawn = pixel(image, x, y);
    const wanted = expected(0, x, y);
    if (wanted.some((v) => v > 0)) lit += 1;
    if (!near(expected(1, x, y), wanted)) unlikeLevel0 += 1;
    const close = near(drawn, wanted);
    expect({ x, y, drawn, wanted, close }).toEqual({ x, y, drawn, wanted, close: true });
  }
  expect(lit).toBeGreaterThan(0);
  // Level 0's values would have drawn other colours at some points: the two rules differ here.
  expect(unlikeLevel0).toBeGreaterThan(0);
  await shoot('viewer-cd3-between-levels');
}, 120_000);

/** A label-mask region under the view, level 0 of the mask = one CSS pixel. */
async function maskUnderView(left: number, top: number, size: { width: number; height: number }) {
  expect(maskSizes[0]).toBeCloseTo(heSizes[0]!, 9);
  const { reads } = await readStores([
    { store: 'mask', level: 0, y: [top, top + size.height], x: [left, left + size.width] },
  ]);
  const region = reads[0]!;
  const width = region.shape[2]!;
  return (x: number, y: number) => region.data[y * width + x]!;
}

test('cell outlines from the label mask switch on and off; a border pixel changes, the inside does not', async () => {
  const middle = await centre();
  const zoom = 1 / heSizes[0]!;
  const left = middle.x - 300;
  const top = middle.y - 200;
  const size = await openAt(left, top, zoom);
  const label = await maskUnderView(left, top, size);
  const borders: [number, number][] = [];
  const insides: [number, number][] = [];
  for (let y = 2; y < size.height - 2; y += 3) {
    for (let x = 2; x < size.width - 2; x += 3) {
      if ((left + x) % 512 >= 510 || (top + y) % 512 >= 510 || (top + y) % 512 === 0) continue;
      const here = label(x, y);
      if (here !== 0 && here !== label(x + 1, y) && label(x, y - 1) === here && label(x, y + 1) === here)
        borders.push([x, y]);
      const around = [-1, 0, 1].flatMap((dy) => [-1, 0, 1].map((dx) => label(x + dx, y + dy)));
      if (here !== 0 && around.every((v) => v === here)) insides.push([x, y]);
    }
  }
  expect(borders.length).toBeGreaterThan(10);
  expect(insides.length).toBeGreaterThan(10);
  await settled();
  const before = await canvasPixels();
  await page.locator('#viewer-outlines').check();
  await settled();
  const after = await canvasPixels();
  await shoot('viewer-outlines');
  for (const [x, y] of borders.slice(0, 40))
    expect({ x, y, rgb: pixel(after, x, y) }).toEqual({ x, y, rgb: [255, 255, 0] });
  expect(borders.slice(0, 40).some(([x, y]) => pixel(before, x, y).join() !== '255,255,0')).toBe(true);
  for (const [x, y] of insides.slice(0, 40))
    expect({ x, y, rgb: pixel(after, x, y) }).toEqual({ x, y, rgb: pixel(before, x, y) });
  await page.locator('#viewer-outlines').uncheck();
  await settled();
  const off = await canvasPixels();
  for (const [x, y] of borders.slice(0, 40)) expect(pixel(off, x, y)).toEqual(pixel(before, x, y));
}, 120_000);

/** A canvas point well inside a cell (its 5 x 5 neighbourhood has one label), below the middle. */
function interiorCell(label: (x: number, y: number) => number, size: { width: number; height: number }) {
  for (let y = size.height / 2; y < size.height - 2; y += 5) {
    for (let x = 20; x < size.width - 20; x += 5) {
      const around = [-2, 0, 2].flatMap((dy) => [-2, 0, 2].map((dx) => label(x + dx, y + dy)));
      if (label(x, y) !== 0 && around.every((v) => v === label(x, y))) return { x, y, label: label(x, y) };
    }
  }
  throw new Error('no cell inside the view');
}

/** What a cell panel (`#cell-info`, `#cell-pinned`) shows, by `data-field`. */
async function shownFields(panel: string): Promise<Record<string, string>> {
  return Object.fromEntries(
    await page
      .locator(`${panel} dd`)
      .evaluateAll((nodes: { dataset: { field?: string }; textContent: string | null }[]) =>
        nodes.map((node) => [node.dataset.field ?? '', node.textContent ?? '']),
      ),
  ) as Record<string, string>;
}

/** The fields a panel must show for mask label `label`, as pyarrow reads the layer's tables. */
async function expectedFields(label: number): Promise<Record<string, string>> {
  const files = `${stack.api}/samples/${sampleId}/segmentation/${layerId}/files/`;
  const download = async (file: string, name: string) => {
    const response = await fetch(`${files}${file}`, {
      headers: { authorization: `Bearer ${stack.tenant.apiKey}` },
    });
    const local = path.join(scratch, name);
    await writeFile(local, new Uint8Array(await response.arrayBuffer()));
    return local;
  };
  const instances = await download('features/instances.parquet', 'instances.parquet');
  const markers = await Promise.all(
    ['DAPI', 'CD3'].map((m) => download(`features/markers/${m}.parquet`, `${m}.parquet`)),
  );
  const row = await runPythonJson<{ instance_id: string; area_um2: number; DAPI: number; CD3: number }>(
    `
import json, sys, pyarrow.parquet as pq
cells = pq.read_table(sys.argv[1]).to_pylist()
cell = next(c for c in cells if c['local_label'] == int(sys.argv[2]))
out = {'instance_id': str(cell['instance_id']), 'area_um2': cell['area_um2']}
for name, file in zip(['DAPI', 'CD3'], sys.argv[3:]):
    out[name] = next(r['mean'] for r in pq.read_table(file).to_pylist() if r['instance_id'] == cell['instance_id'])
print(json.dumps(out))
`,
    [instances, String(label), ...markers],
  );
  return {
    instance_id: row.instance_id,
    label: String(label),
    area_um2: `${row.area_um2.toFixed(2)} µm²`,
    'mean:DAPI': row.DAPI.toPrecision(4),
    'mean:CD3': row.CD3.toPrecision(4),
  };
}

test('hovering a cell shows its id, area and marker means as the Parquet tables hold them', async () => {
  const middle = await centre();
  const zoom = 1 / heSizes[0]!;
  const left = middle.x - 300;
  const top = middle.y - 200;
  const size = await openAt(left, top, zoom);
  const target = interiorCell(await maskUnderView(left, top, size), size);
  await canvas().scrollIntoViewIfNeeded();
  const box = (await canvas().boundingBox())!;
  await page.mouse.move(box.x + target.x + 0.5, box.y + target.y + 0.5);
  const info = page.locator('#cell-info');
  await info.locator(`dd[data-field="label"]`, { hasText: String(target.label) }).waitFor();
  const shown = await shownFields('#cell-info');
  await shoot('viewer-hover');
  expect(shown).toEqual(await expectedFields(target.label));
}, 120_000);

test('a click pins a cell: its details stay while the cursor moves on, it is tinted, Unpin and Enter work', async () => {
  const middle = await centre();
  const zoom = 1 / heSizes[0]!;
  const left = middle.x - 300;
  const top = middle.y - 200;
  const size = await openAt(left, top, zoom);
  const label = await maskUnderView(left, top, size);
  const target = interiorCell(label, size);
  await canvas().scrollIntoViewIfNeeded();
  await settled();
  const before = await canvasPixels();
  const box = (await canvas().boundingBox())!;
  await page.mouse.click(box.x + target.x + 0.5, box.y + target.y + 0.5);
  const pinned = page.locator('#cell-pinned');
  await pinned.locator('dd[data-field="label"]', { hasText: String(target.label) }).waitFor();
  await expect(page.getByRole('region', { name: 'Pinned cell' }).isVisible()).resolves.toBe(true);
  expect(await shownFields('#cell-pinned')).toEqual(await expectedFields(target.label));

  // The cursor leaves for a point of another label: the hover panel follows, the pinned one stays.
  const elsewhere = [
    [5, 5],
    [size.width - 5, 5],
    [5, size.height - 5],
    [size.width - 5, size.height - 5],
  ].find(([x, y]) => label(x!, y!) !== target.label)!;
  await page.mouse.move(box.x + elsewhere[0]! + 0.5, box.y + elsewhere[1]! + 0.5);
  await settled();
  expect((await shownFields('#cell-pinned')).label).toBe(String(target.label));
  // settled() parks the cursor off the canvas: the only tint left is the pinned cell's.
  const tinted = await canvasPixels();
  await shoot('viewer-pinned');
  const expectedTint = pixel(before, target.x, target.y).map((v, c) =>
    Math.round(v * 0.65 + (c === 0 ? 0 : 0.35 * 255)),
  );
  const drawn = pixel(tinted, target.x, target.y);
  expect({ drawn, close: drawn.every((v, c) => Math.abs(v - expectedTint[c]!) <= 2) }).toEqual({
    drawn,
    close: true,
  });

  await pinned.getByRole('button', { name: 'Unpin' }).click();
  await expect(pinned.isHidden()).resolves.toBe(true);
  await settled();
  expect(pixel(await canvasPixels(), target.x, target.y)).toEqual(pixel(before, target.x, target.y));

  // Enter pins the cell at the view's centre (none when the centre is background).
  const atCentre = label(Math.round(size.width / 2), Math.round(size.height / 2));
  await canvas().focus();
  await page.keyboard.press('Enter');
  if (atCentre === 0) {
    await expect(pinned.isHidden()).resolves.toBe(true);
  } else {
    await pinned.locator('dd[data-field="label"]', { hasText: String(atCentre) }).waitFor();
  }
}, 120_000);

test('the scale bar and the cursor position are in micrometres', async () => {
  const middle = await centre();
  const zoom = 1 / heSizes[0]!;
  const left = middle.x - 300;
  const top = middle.y - 200;
  await openAt(left, top, zoom);
  const text = await page.locator('#viewer-scale-text').textContent();
  const [length, unit] = text!.split(' ');
  expect(unit).toBe('µm');
  expect(['1', '2', '5']).toContain(length!.replace(/0|\./g, '')[0]);
  const bar = (await page.locator('#viewer-scale .bar').boundingBox())!;
  expect(Math.abs(bar.width - Number(length) * zoom)).toBeLessThan(1);
  expect(bar.width).toBeLessThanOrEqual(120);
  await canvas().scrollIntoViewIfNeeded();
  const box = (await canvas().boundingBox())!;
  await page.mouse.move(box.x + 100, box.y + 50);
  const cursor = await page.locator('#viewer-cursor', { hasText: /µm/ }).textContent();
  const [, cx, cy] = /x ([\d.]+) µm, y ([\d.]+) µm/.exec(cursor!)!.map(Number);
  expect(Math.abs(cx! - (left + 100) / zoom)).toBeLessThan(1 / zoom);
  expect(Math.abs(cy! - (top + 50) / zoom)).toBeLessThan(1 / zoom);
}, 120_000);

/**
 * The view in the page's address (`#view=x,y,zoom`), read in the page: Playwright's `page.url()`
 * learns of a `replaceState` only later, by an event, so it can still hold the view before.
 */
async function addressView(): Promise<{ x: number; y: number; zoom: number }> {
  const hash = await page.evaluate<string>('location.hash');
  const [x, y, zoom] = /#view=([^&]+)/.exec(hash)![1]!.split(',').map(Number);
  return { x: x!, y: y!, zoom: zoom! };
}

/** Touches as a touch screen sends them (Chromium turns them into pointer events), in page pixels. */
async function touch(strokes: { from: [number, number]; to: [number, number] }[]): Promise<void> {
  const cdp = await page.context().newCDPSession(page);
  const points = (t: number) =>
    strokes.map(({ from, to }, id) => ({
      id,
      x: from[0] + (to[0] - from[0]) * t,
      y: from[1] + (to[1] - from[1]) * t,
    }));
  await cdp.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: points(0) });
  for (let step = 1; step <= 8; step++)
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints: points(step / 8) });
  await cdp.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
  await cdp.detach();
}

test('buttons zoom about the centre and fit the slide; on a touch screen a tap pins a cell, two fingers pinch and one drags', async () => {
  const middle = await centre();
  const zoom = 1 / heSizes[0]!;
  const size = await openAt(middle.x - 300, middle.y - 200, zoom);
  const start = await addressView();
  const zoomGroup = page.getByRole('group', { name: 'Zoom' });
  /** The view in the address against `start`: its centre and its zoom over start's. */
  const fromStart = async () => {
    const view = await addressView();
    return { x: view.x, y: view.y, zoom: Number((view.zoom / start.zoom).toPrecision(6)) };
  };
  await zoomGroup.getByRole('button', { name: 'Zoom in' }).click();
  expect(await fromStart()).toEqual({ x: start.x, y: start.y, zoom: 2 });
  await zoomGroup.getByRole('button', { name: 'Zoom out' }).click();
  await zoomGroup.getByRole('button', { name: 'Zoom out' }).click();
  expect(await fromStart()).toEqual({ x: start.x, y: start.y, zoom: 0.5 });
  await zoomGroup.getByRole('button', { name: 'Fit the whole slide' }).click();
  const detail = await call('GET', `/samples/${sampleId}`);
  const world = { width: detail.json.widthPx * heSizes[0]!, height: detail.json.heightPx * heSizes[0]! };
  const fitted = await addressView();
  expect(fitted.zoom).toBeCloseTo(Math.min(size.width / world.width, size.height / world.height), 6);
  expect(fitted.x).toBeCloseTo(world.width / 2, 3);
  expect(fitted.y).toBeCloseTo(world.height / 2, 3);
  await complete();

  const left = middle.x - 300;
  const top = middle.y - 200;
  await openAt(left, top, zoom);
  const target = interiorCell(await maskUnderView(left, top, size), size);
  await canvas().scrollIntoViewIfNeeded();
  const box = (await canvas().boundingBox())!;
  const on = { x: box.x + target.x + 0.5, y: box.y + target.y + 0.5 };
  /** The world point under canvas pixel (px, py) in `view`. */
  const under = (view: { x: number; y: number; zoom: number }, px: number, py: number) => ({
    x: view.x + (px - size.width / 2) / view.zoom,
    y: view.y + (py - size.height / 2) / view.zoom,
  });
  // A tap pins the cell under it, as a click does.
  const pinned = page.locator('#cell-pinned');
  await touch([{ from: [on.x, on.y], to: [on.x, on.y] }]);
  await pinned.locator('dd[data-field="label"]', { hasText: String(target.label) }).waitFor();
  await pinned.getByRole('button', { name: 'Unpin' }).click();

  // Two fingers, the first on that cell, spread from 100 to 300 px apart: three times the zoom,
  // each finger still over the point it put down on. Lifted there, neither pins the cell.
  const before = await addressView();
  await touch([
    { from: [on.x, on.y], to: [on.x - 100, on.y] },
    { from: [on.x + 100, on.y], to: [on.x + 200, on.y] },
  ]);
  const pinchedView = await addressView();
  expect(pinchedView.zoom / before.zoom).toBeCloseTo(3, 2);
  for (const [from, to] of [
    [target.x, target.x - 100],
    [target.x + 100, target.x + 200],
  ] as const) {
    const was = under(before, from + 0.5, target.y + 0.5);
    const is = under(pinchedView, to + 0.5, target.y + 0.5);
    expect(Math.abs(is.x - was.x) * pinchedView.zoom).toBeLessThan(1);
    expect(Math.abs(is.y - was.y) * pinchedView.zoom).toBeLessThan(1);
  }
  // One finger drags the slide with it: 80 px left and 40 up shows what lay right and below.
  await touch([{ from: [on.x - 100, on.y], to: [on.x - 180, on.y - 40] }]);
  const dragged = await addressView();
  expect(dragged.zoom).toBe(pinchedView.zoom);
  expect((dragged.x - pinchedView.x) * dragged.zoom).toBeCloseTo(80, 0);
  expect((dragged.y - pinchedView.y) * dragged.zoom).toBeCloseTo(40, 0);
  await complete();
  await expect(pinned.isHidden()).resolves.toBe(true);
  await shoot('viewer-pinched');
}, 120_000);

test('Full screen shows the viewer with its layers on the whole screen, drawn to its new size, and back', async () => {
  const middle = await centre();
  await openAt(middle.x - 300, middle.y - 200, 1 / heSizes[0]!);
  const button = page.getByRole('button', { name: 'Full screen' });
  const canvasHeight = () => canvas().evaluate((element: { clientHeight: number }) => element.clientHeight);
  const inFullScreen = () => page.evaluate('document.fullscreenElement?.className ?? null');
  expect(await canvasHeight()).toBe(480);
  await button.click();
  await page.waitForFunction('document.fullscreenElement !== null');
  expect(await inFullScreen()).toBe('viewer');
  // The change is told a frame after it took place.
  await page.locator('.viewer-full-screen[aria-pressed="true"]').waitFor();
  const screen = page.viewportSize()!;
  await page.waitForFunction(
    `document.getElementById('viewer-canvas').clientHeight === ${screen.height - 32}`,
  );
  await complete();
  await expect(page.getByRole('group', { name: 'Layers' }).isVisible()).resolves.toBe(true);
  await expect(accessibilityViolations(page)).resolves.toEqual([]);
  // The screen, not the page: the page under the full-screen element is not what is seen.
  await page.screenshot({ path: path.join(screenshots, 'viewer-full-screen.png') });
  await button.click();
  await page.waitForFunction('document.fullscreenElement === null');
  await page.locator('.viewer-full-screen[aria-pressed="false"]').waitFor();
  expect(await canvasHeight()).toBe(480);
}, 120_000);

test("a public sample's page draws its H&E and pinned markers as the owner's page does", async () => {
  const publicId = await publish(stack.sql, sampleId);
  // The owner's page, fitted, the cursor off the canvas (no cell tinted under it).
  await page.goto(at(`/samples/${sampleId}`));
  await complete();
  await page.mouse.move(0, 0);
  await settled();
  const owned = await canvasPixels();

  const requested: string[] = [];
  const onRequest = (request: { url(): string }) => requested.push(new URL(request.url()).pathname);
  page.on('request', onRequest);
  await page.goto(at(`/public/samples/${publicId}`));
  await complete();
  await settled();
  page.off('request', onRequest);
  const channels = await page
    .locator('.viewer-layers .channel')
    .evaluateAll((nodes) => nodes.map((node) => node.getAttribute('data-channel')));
  expect(channels).toEqual(['H&E', 'DAPI', 'CD3']);
  await expect(page.locator('.viewer-layers .note').textContent()).resolves.toBe(
    'A public sample shares no cell outlines.',
  );
  await expect(accessibilityViolations(page)).resolves.toEqual([]);
  const shared = await canvasPixels();
  expect({ width: shared.width, height: shared.height }).toEqual({
    width: owned.width,
    height: owned.height,
  });
  expect(shared.rgb.equals(owned.rgb)).toBe(true);
  // Its chunks came through the public byte proxy, none through the owner's endpoints.
  const api = new URL(stack.api).pathname;
  expect(requested.some((url) => url.startsWith(`${api}/public/samples/${publicId}/zarr/he/`))).toBe(true);
  expect(requested.some((url) => url.startsWith(`${api}/public/samples/${publicId}/zarr/markers/CD3/`))).toBe(
    true,
  );
  expect(requested.filter((url) => url.includes('/files/'))).toEqual([]);
  await shoot('viewer-public-sample');
}, 120_000);

test('the channels of a prediction submitted from the page appear when its job ends', async () => {
  await page.goto(at(`/samples/${sampleId}`));
  await complete();
  const catalog = await call('GET', '/markers');
  const fresh = (catalog.json.markers as { name: string }[])
    .map((m) => m.name)
    .find((m) => !['DAPI', 'CD3'].includes(m))!;
  expect(await page.locator(`.channel[data-channel="${fresh}"]`).count()).toBe(0);
  await page.locator(`fieldset.markers input[value="${fresh}"]`).check();
  await page.getByRole('button', { name: 'Submit prediction' }).click();
  await page.locator(`.channel[data-channel="${fresh}"]`).waitFor({ timeout: 300_000 });
  await complete();
  await expect(page.locator('.channel[data-channel="CD3"]').count()).resolves.toBe(1);
  await shoot('viewer-new-channel');
}, 360_000);

test('a chunk that cannot be read says why, and the error goes once chunks arrive again', async () => {
  const alert = page.locator('#viewer-error');
  // The network goes for the H&E's chunks (its metadata came): no such read gets an answer.
  let down = true;
  const chunks = '**/he/files/**';
  await page.route(chunks, (route) =>
    down && !route.request().url().endsWith('zarr.json')
      ? route.abort('internetdisconnected')
      : route.continue(),
  );
  try {
    await page.goto(at(`/samples/${sampleId}`));
    await alert.filter({ hasText: 'network' }).waitFor();
    down = false;
    // The next view asks again for the chunks still missing, and they arrive.
    await canvas().focus();
    await page.keyboard.press('ArrowRight');
    await alert.waitFor({ state: 'hidden' });
    await complete();
  } finally {
    await page.unroute(chunks);
  }
}, 120_000);

test('the viewer broke no CSP rule and threw nothing', () => {
  expect(problems).toEqual([]);
});
