import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { holdRequests } from '../support/held-requests';
import { startStack, type TestStack } from '../support/stack';
import { SHARED_WSI } from '../support/uploads';

/**
 * Issue 21's upload page and keyboard reach, as a person uses them: slides dragged from the
 * desktop onto the drop zone (a real `drop` event carrying files, not the file input), each
 * with its own bar, bytes, speed and time left on a slow link; and a sample opened from the
 * list and its viewer zoomed, panned and its layers switched with the keyboard alone.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SLIDES = ['CMU-1-Small-Region.svs', 'OS-1-detail.ome.tif'];

let stack: TestStack;
let browser: Browser;
let page: Page;
const problems: string[] = [];
const readyIds: string[] = [];

const at = (route: string) => `${stack.baseUrl}${route}`;

beforeAll(async () => {
  stack = await startStack({ worker: true });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy|WebGL|shader/i.test(message.text()))
      problems.push(message.text());
  });
  await page.goto(at('/settings'));
  await page.evaluate((key) => sessionStorage.setItem('sps.apiKey', key), stack.tenant.apiKey);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

test('slides dropped together each get a bar with bytes, speed and time left, and follow ingest to ready', async () => {
  await page.goto(at('/upload'));
  await page.getByLabel('Segment cells once each slide is ready').uncheck();
  // About 1 MiB/s up: the 1.9 MiB slide takes long enough for a speed and a time left.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false,
    latency: 0,
    downloadThroughput: -1,
    uploadThroughput: 1024 * 1024,
  });
  const files = await Promise.all(
    SLIDES.map(async (name) => ({
      name,
      base64: (await readFile(path.join(SHARED_WSI, name))).toString('base64'),
    })),
  );
  // Evaluated in the page as a string: this program has no DOM types.
  const dataTransfer = await page.evaluateHandle(`(() => {
    const transfer = new DataTransfer();
    for (const { name, base64 } of ${JSON.stringify(files)}) {
      const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
      transfer.items.add(new File([bytes], name, { type: 'image/tiff' }));
    }
    return transfer;
  })()`);
  const zone = page.locator('#drop-zone');
  await zone.dispatchEvent('dragover', { dataTransfer });
  await expect(zone.getAttribute('class')).resolves.toContain('over');
  await zone.dispatchEvent('drop', { dataTransfer });

  const large = page.locator('li.upload', { hasText: SLIDES[0] });
  await expect(page.locator('li.upload').count()).resolves.toBe(2);
  await large.locator('.figures', { hasText: /\/s · \d+ s left/ }).waitFor({ timeout: 60_000 });
  await expect(large.locator('.figures').textContent()).resolves.toMatch(
    /^[\d.]+ \S+ of 1\.8 MiB · [\d.]+ \S+\/s · \d+ s left$/,
  );
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false,
    latency: 0,
    downloadThroughput: -1,
    uploadThroughput: -1,
  });
  for (const name of SLIDES) {
    const upload = page.locator('li.upload', { hasText: name });
    await upload.locator('.badge-ready').waitFor({ timeout: 240_000 });
    const bar = await upload
      .locator('progress')
      .evaluate((element: { value: number; max: number }) => ({ value: element.value, max: element.max }));
    const size = (await readFile(path.join(SHARED_WSI, name))).length;
    expect({ name, bar }).toEqual({ name, bar: { value: size, max: size } });
    const href = await upload.getByRole('link', { name: 'Open sample' }).getAttribute('href');
    readyIds.push(href!.split('/').pop()!);
  }
}, 360_000);

/** Presses Tab until the focused element matches `selector`; fails after `limit` presses. */
async function tabTo(selector: string, limit = 80): Promise<void> {
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate<boolean>(`document.activeElement?.matches(${JSON.stringify(selector)}) ?? false`))
      return;
  }
  throw new Error(`${limit} presses of Tab never reached ${selector}`);
}

/** The view in the address, read in the page (`page.url()` learns of a `replaceState` late). */
const viewOf = async () => {
  const match = /#view=([^&]+)/.exec(await page.evaluate<string>('location.hash'))!;
  const [x, y, zoom] = match[1]!.split(',').map(Number) as [number, number, number];
  return { x, y, zoom };
};

test('the keyboard alone opens a sample from the list, then zooms, pans and switches layers in its viewer', async () => {
  const id = readyIds[0]!;
  await page.goto(at(`/samples?q=${encodeURIComponent('CMU-1-Small-Region')}`));
  await page.locator(`tr[data-id="${id}"]`).waitFor();
  await tabTo(`tr[data-id="${id}"] a[href$="${id}"]`);
  await page.keyboard.press('Enter');
  await page.waitForURL((url) => url.pathname.endsWith(`/samples/${id}`));
  await page.locator('#viewer-canvas[data-state="complete"]').waitFor({ timeout: 60_000 });

  await tabTo('#viewer-canvas');
  await page.keyboard.press('+');
  const before = await viewOf();
  await page.keyboard.press('+');
  const zoomed = await viewOf();
  expect(zoomed.zoom / before.zoom).toBeCloseTo(2, 6);
  await page.keyboard.press('ArrowRight');
  const panned = await viewOf();
  expect(panned.x).toBeGreaterThan(zoomed.x);
  expect(panned.y).toBeCloseTo(zoomed.y, 6);
  await page.keyboard.press('-');
  expect((await viewOf()).zoom / before.zoom).toBeCloseTo(1, 6);

  // The layer controls follow the canvas in the tab order; Space switches the H&E off.
  await tabTo('#viewer input[type="checkbox"]');
  const box = page.locator('#viewer').getByLabel('H&E', { exact: true });
  await expect(
    page.evaluate<string>("document.activeElement.closest('.channel')?.dataset.channel ?? ''"),
  ).resolves.toBe('H&E');
  await page.keyboard.press('Space');
  await expect(box.isChecked()).resolves.toBe(false);
  await page.locator('#viewer-canvas[data-state="complete"]').waitFor();
  // With every layer off the canvas is black where the H&E was drawn.
  const centre = await page.evaluate<number[]>(`(() => {
    const canvas = document.getElementById('viewer-canvas');
    const gl = canvas.getContext('webgl2');
    const pixel = new Uint8Array(4);
    gl.readPixels(canvas.width >> 1, canvas.height >> 1, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, pixel);
    return [...pixel];
  })()`);
  expect(centre.slice(0, 3)).toEqual([0, 0, 0]);
  expect(problems).toEqual([]);
}, 180_000);

test('a slide dropped again while it uploads is sent once, and its row says so', async () => {
  await page.goto(at('/upload'));
  await page.getByLabel('Segment cells once each slide is ready').uncheck();
  const base64 = (await readFile(path.join(SHARED_WSI, SLIDES[1]!))).toString('base64');
  // The same file twice, as a desktop hands it over: same name, size and modification time.
  const drop = async () => {
    const dataTransfer = await page.evaluateHandle(`(() => {
      const transfer = new DataTransfer();
      const bytes = Uint8Array.from(atob(${JSON.stringify(base64)}), (c) => c.charCodeAt(0));
      transfer.items.add(new File([bytes], 'twice.ome.tif', { type: 'image/tiff', lastModified: 1700000000000 }));
      return transfer;
    })()`);
    await page.locator('#drop-zone').dispatchEvent('drop', { dataTransfer });
  };
  // The upload's creation is held until the slide has been dropped twice.
  const creations = await holdRequests(page, '**/api/v1/uploads');
  const rows = page.locator('li.upload', { hasText: 'twice.ome.tif' });
  try {
    await drop();
    await rows.first().waitFor();
    await drop();
    await rows.getByText('Chosen again while it uploads: it is sent once.').waitFor();
    creations.release();
    await rows.locator('.badge').waitFor({ timeout: 60_000 });
  } finally {
    await creations.stop();
  }
  expect(creations.held.map((request) => request.method())).toEqual(['POST']);
  await expect(rows.count()).resolves.toBe(1);
  // OS-1's file states its scale: no note asks for one.
  await rows.getByRole('link', { name: 'Open sample' }).waitFor({ timeout: 60_000 });
  await expect(rows.locator('.scale-needed').count()).resolves.toBe(0);
  const samples = await stack.sql`SELECT id FROM samples WHERE filename = 'twice.ome.tif'`;
  expect(samples).toHaveLength(1);
}, 120_000);

test('a folder dropped beside a slide is said to be a folder, and the slide beside it goes up', async () => {
  await page.goto(at('/upload'));
  await page.getByLabel('Segment cells once each slide is ready').uncheck();
  const desktop = await mkdtemp(path.join(os.tmpdir(), 'sps-drop-'));
  try {
    const folder = path.join(desktop, 'scans');
    await mkdir(folder);
    await copyFile(path.join(SHARED_WSI, SLIDES[1]!), path.join(folder, SLIDES[1]!));
    const slide = path.join(desktop, 'beside.ome.tif');
    await copyFile(path.join(SHARED_WSI, SLIDES[1]!), slide);
    // A real drag from the desktop: Chromium hands the folder over as an unreadable file.
    const box = (await page.locator('#drop-zone').boundingBox())!;
    const point = { x: box.x + box.width / 2, y: box.y + box.height / 2 };
    const data = { items: [], files: [folder, slide], dragOperationsMask: 1 };
    const cdp = await page.context().newCDPSession(page);
    for (const type of ['dragEnter', 'dragOver', 'drop'] as const)
      await cdp.send('Input.dispatchDragEvent', { type, ...point, data });
    await expect(
      page.locator('li.upload', { hasText: 'scans' }).getByRole('alert').textContent(),
    ).resolves.toBe(
      "Not uploaded: this is a folder. Drop the slide files in it (a DICOM slide's level-0 instance: its largest file).",
    );
    const beside = page.locator('li.upload', { hasText: 'beside.ome.tif' });
    await beside.getByRole('link', { name: 'Open sample' }).waitFor({ timeout: 60_000 });
    const samples =
      await stack.sql`SELECT filename FROM samples WHERE filename IN ('scans', 'beside.ome.tif')`;
    expect(samples.map((row) => row.filename)).toEqual(['beside.ome.tif']);
    expect(problems).toEqual([]);
  } finally {
    await rm(desktop, { recursive: true, force: true });
  }
}, 120_000);
