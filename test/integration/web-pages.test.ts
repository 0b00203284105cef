/** @jest-environment ./test/support/onnx-environment.js */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { type Browser, chromium, type Page, type Request } from 'playwright-core';
import { createOrganizationWithOwner } from '../../cli/admin-commands';
import { grantCredits } from '../../db/credits';
import { insertFieldDefinition } from '../../db/sample-fields';
import { accessibilityViolations } from '../support/axe';
import { clickTwiceWhileHeld } from '../support/held-requests';
import { apiClient } from '../support/http';
import { insertJob, insertSample } from '../support/samples';
import { screenshotPage } from '../support/screenshots';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, sendWhole } from '../support/uploads';

/**
 * The list, upload and sample pages end to end in headless chromium on the real stack: every
 * facet of the list as the API query, paging, live badges, thumbnails, bulk expiration, Trash;
 * a resumable upload through a lost connection and a reload; inline edit errors, segmentation
 * and exports from the sample page.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** The resumable upload's slide: 2.7 MB, eleven chunks of 256 KiB, 650 x 743 px to ingest. */
const SLIDE = path.join(SHARED_WSI, 'BRACS_1640_N_3_cropped.tiff');
/** A small slide (1101 px a side) for the ingest and segmentation that the pages follow. */
const SMALL_SLIDE = path.join(SHARED_WSI, 'OS-1-detail.ome.tif');
const LIST_API = '/api/v1/samples';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let browser: Browser;
let page: Page;
let screenshots: string;
const problems: string[] = [];
let sharedId: string;
let jobId: string;
/** The sample of the badge test: ingested in this file, not segmented. */
let badgeId: string;
const facet: Record<'alpha' | 'beta' | 'gamma', string> = { alpha: '', beta: '', gamma: '' };
const definition: Record<'site' | 'batch' | 'tags', string> = { site: '', batch: '', tags: '' };

const at = (route: string) => `${stack.baseUrl}${route}`;
const shoot = (name: string) => screenshotPage(page, path.join(screenshots, `${name}.png`));
const isListRequest = (request: Request) =>
  request.method() === 'GET' && new URL(request.url()).pathname === LIST_API;
// Evaluated in the page; this program has no DOM types.
const shownIds = () =>
  page.evaluate<string[]>(
    `[...document.querySelectorAll('table.samples tbody tr[data-id]')].map((row) => row.dataset.id)`,
  );

/** An inline error once it is shown (its code first). */
async function errorText(selector: string): Promise<string | null> {
  await page.locator(`${selector} code`).waitFor();
  return page.locator(selector).textContent();
}

/** A row's thumbnail once it settled: painted, or unavailable with the reason. */
async function thumbnailOf(id: string): Promise<{ state: string | null; why: string }> {
  const canvas = page.locator(`tr[data-id="${id}"] canvas.thumbnail`);
  await page
    .locator(`tr[data-id="${id}"] canvas.thumbnail:is([data-state="painted"], [data-state="unavailable"])`)
    .waitFor({ timeout: 60_000 });
  return { state: await canvas.getAttribute('data-state'), why: (await canvas.getAttribute('title')) ?? '' };
}

beforeAll(async () => {
  stack = await startStack({ sharedSlides: 'processed', worker: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  // The shared slide with a completed prediction (for the exports test).
  ({ sampleId: sharedId, jobId } = stack.processedSample());
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 100_000 });

  screenshots = path.join(
    process.env.SPS_TEST_ARTIFACTS ?? path.join(__dirname, '..', '..', '.data', 'test-artifacts'),
    'web-pages',
  );
  await mkdir(screenshots, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text()))
      problems.push(message.text());
  });
  await page.goto(at('/settings'));
  await page.getByLabel('API key (development sign-in)').fill(stack.tenant.apiKey);
  await page.keyboard.press('Enter');
  await page.locator('#key-state', { hasText: 'An API key is set' }).waitFor();
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

/** Three samples with dates, statuses, a job, tags and two organization fields to filter on. */
async function seedFacets(): Promise<void> {
  const organizationId = stack.tenant.organizationId;
  const site = await insertFieldDefinition(stack.sql, {
    organizationId,
    key: 'site',
    label: 'Site',
    valueType: 'text',
    options: [],
  });
  const batch = await insertFieldDefinition(stack.sql, {
    organizationId,
    key: 'batch',
    label: 'Batch',
    valueType: 'number',
    options: [],
  });
  const fields = (await call('GET', '/sample-fields')).json.fields as { id: string; key: string }[];
  definition.site = site!.id;
  definition.batch = batch!.id;
  definition.tags = fields.find((field) => field.key === 'tags')!.id;
  const sample = (name: string, status: 'ready' | 'preprocessing' | 'upload_failed', day: string) =>
    insertSample(stack.sql, {
      organizationId,
      createdBy: stack.tenant.userId,
      name,
      status,
      mppCalibrated: 0.5,
      createdAt: new Date(`${day}T12:00:00Z`),
    });
  facet.alpha = await sample('Facet alpha', 'ready', '2026-01-10');
  facet.beta = await sample('Facet beta', 'preprocessing', '2026-02-15');
  facet.gamma = await sample('Facet gamma', 'upload_failed', '2025-12-01');
  const job = await insertJob(stack.sql, {
    organizationId,
    sampleId: facet.alpha,
    status: 'completed',
    markers: ['CD3'],
  });
  await stack.sql`UPDATE jobs SET results_available = true, result_prefix = ${`stand-in/${job}/`},
    completed_at = now() WHERE id = ${job}`;
  for (const [id, values] of [
    [facet.alpha, { tags: ['tonsil'], site: 'north', batch: 3 }],
    [facet.beta, { batch: 7 }],
  ] as const) {
    expect((await call('PATCH', `/samples/${id}`, { fields: values })).status).toBe(200);
  }
}

/** Opens a list address; answers the API request it made and the rows it shows. */
async function openList(search: string) {
  const [request] = await Promise.all([
    page.waitForRequest(isListRequest),
    page.goto(at(`/samples${search}`)),
  ]);
  const response = (await request.response())!;
  const answer = (await response.json()) as { items: { id: string }[]; appUrl: string };
  await page.locator('#list-summary', { hasText: 'shown' }).waitFor();
  return { request, answer, shown: await shownIds() };
}

test('every facet of the address is the API query, and the list shows what the API answers', async () => {
  await seedFacets();
  const clause = (id: string, op: string, value?: unknown) =>
    value === undefined ? `${id}:${op}` : `${id}:${op}:${JSON.stringify(value)}`;
  const cases: [string, string][][] = [
    [['q', 'Facet']],
    [
      ['q', 'Facet'],
      ['status', 'ready'],
      ['status', 'preprocessing'],
    ],
    [['workflow', 'ready_no_job']],
    [['workflow', 'has_results']],
    [['marker', 'CD3:completed']],
    [
      ['uploaded_from', '2026-01-01'],
      ['uploaded_to', '2026-01-31'],
    ],
    [['field', clause(definition.site, 'eq', 'north')]],
    [['field', clause(definition.batch, 'gte', 5)]],
    [['field', clause(definition.batch, 'lte', 5)]],
    [['field', clause(definition.tags, 'contains', 'tonsil')]],
    [
      ['q', 'Facet'],
      ['field', clause(definition.site, 'is_empty')],
    ],
    [['field', clause(definition.batch, 'is_not_empty')]],
    [
      ['scope', 'all'],
      ['q', 'Facet'],
    ],
    [
      ['scope', 'public'],
      ['q', 'Facet'],
    ],
  ];
  for (const pairs of cases) {
    const search = `?${new URLSearchParams(pairs)}`;
    const { request, answer, shown } = await openList(search);
    expect({ search, api: new URL(request.url()).search }).toEqual({ search, api: search });
    expect({ search, app: new URL(answer.appUrl).search }).toEqual({ search, app: search });
    // The page's own answer: a later call could differ (the prediction of beforeAll may finish).
    expect({ search, shown }).toEqual({ search, shown: answer.items.map((item) => item.id) });
  }
  // Spot checks that the facets bite (the list is not everything each time).
  expect(
    (await openList(`?${new URLSearchParams([['field', clause(definition.batch, 'gte', 5)]])}`)).shown,
  ).toEqual([facet.beta]);
  expect((await openList('?uploaded_from=2026-01-01&uploaded_to=2026-01-31')).shown).toEqual([facet.alpha]);
  // A malformed clause is the service's to judge: its message, not a blank list.
  await page.goto(at(`/samples?${new URLSearchParams([['field', `${definition.batch}:contains:"x"`]])}`));
  await expect(errorText('#status')).resolves.toMatch(/invalid_request.*does not apply/);
}, 120_000);

test('a field facet built in the form, with its operator, becomes the address and the API query', async () => {
  await page.goto(at('/samples'));
  await page.getByRole('button', { name: 'Add field filter' }).click();
  await page.getByLabel('Field of filter 1').selectOption({ label: 'Batch' });
  await page.getByLabel('Operator of filter 1').selectOption('gte');
  await page.getByLabel('Value of filter 1').fill('5');
  await page.getByLabel('Search name or filename').fill('Facet');
  const [request] = await Promise.all([
    page.waitForRequest(isListRequest),
    page.getByRole('button', { name: 'Apply filters' }).click(),
  ]);
  await (await request.response())!.finished();
  await page.locator(`tr[data-id="${facet.beta}"]`).waitFor();
  const expected = `?${new URLSearchParams([
    ['q', 'Facet'],
    ['field', `${definition.batch}:gte:5`],
  ])}`;
  expect(new URL(page.url()).search).toBe(expected);
  expect(new URL(request.url()).search).toBe(expected);
  expect(await shownIds()).toEqual([facet.beta]);
  // Typed in afresh, the address rebuilds the same filter row.
  await page.goto(page.url());
  await page.locator(`tr[data-id="${facet.beta}"]`).waitFor();
  await expect(page.getByLabel('Operator of filter 1').inputValue()).resolves.toBe('gte');
  await expect(page.getByLabel('Value of filter 1').inputValue()).resolves.toBe('5');
  await shoot('samples-field-filter');
});

test('the list pages with its cursor as it scrolls, to the same rows as the API', async () => {
  for (let i = 0; i < 52; i++) {
    await insertSample(stack.sql, {
      organizationId: stack.tenant.organizationId,
      name: `Paged ${String(i).padStart(2, '0')}`,
      createdAt: new Date(Date.UTC(2025, 5, 1, 0, i)),
    });
  }
  const requests: Request[] = [];
  page.on('request', (request) => {
    if (isListRequest(request)) requests.push(request);
  });
  await page.goto(at('/samples?q=Paged'));
  await page.locator('#list-summary', { hasText: 'shown' }).waitFor();
  await page.getByRole('button', { name: 'Load more' }).scrollIntoViewIfNeeded();
  await page.locator('#list-summary', { hasText: '52 samples shown.' }).waitFor();
  page.removeAllListeners('request');
  const first = (await call('GET', '/samples?q=Paged')).json;
  const second = (await call('GET', `/samples?q=Paged&cursor=${encodeURIComponent(first.nextCursor)}`)).json;
  expect(await shownIds()).toEqual([...first.items, ...second.items].map((item: { id: string }) => item.id));
  expect(requests.map((request) => new URL(request.url()).searchParams.get('cursor'))).toEqual([
    null,
    first.nextCursor,
  ]);
  expect(new URL(requests[1]!.url()).searchParams.get('q')).toBe('Paged');
  await expect(page.getByRole('button', { name: 'Load more' }).isHidden()).resolves.toBe(true);
});

test('a badge follows ingest while the list is open, and a ready sample gets its H&E thumbnail', async () => {
  const bytes = await readFile(SMALL_SLIDE);
  const created = await call('POST', '/uploads', {
    filename: 'badge.ome.tif',
    name: 'Badge slide',
    fileSize: bytes.length,
    contentType: 'image/tiff',
    autoSegment: false,
  });
  const id = created.json.id as string;
  badgeId = id;
  await page.goto(at('/samples?q=Badge'));
  const row = page.locator(`tr[data-id="${id}"]`);
  await row.locator('.badge-uploading').waitFor();
  const put = await sendWhole(created.json.uploadUrl, bytes);
  expect(put.status).toBe(200);
  // The page was not reloaded: the row's own refresh moved the badge.
  await row.locator('.badge-ready').waitFor({ timeout: 240_000 });
  await expect(thumbnailOf(id)).resolves.toEqual({ state: 'painted', why: '' });
  // The shared slide's thumbnail too, drawn from the lowest level of its pyramid.
  await page.goto(at('/samples'));
  await expect(thumbnailOf(sharedId)).resolves.toEqual({ state: 'painted', why: '' });
  const shared = `tr[data-id="${sharedId}"] canvas.thumbnail`;
  // Stained tissue is darker than the white glass around it.
  const painted = await page.evaluate<{ width: number; tissue: number }>(`(() => {
    const canvas = document.querySelector('${shared}');
    const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let tissue = 0;
    for (let i = 0; i < pixels.length; i += 4) if (pixels[i] + pixels[i + 1] + pixels[i + 2] < 600) tissue++;
    return { width: canvas.width, tissue };
  })()`);
  expect(painted.width).toBeGreaterThan(10);
  expect(painted.tissue).toBeGreaterThan(0);
  await shoot('samples');
}, 300_000);

test('bulk expiration sets the date, then the never-expire pin, on the selected samples', async () => {
  await page.goto(at('/samples?q=Facet'));
  await page.locator(`tr[data-id="${facet.alpha}"]`).waitFor();
  await page.getByLabel('Select Facet alpha').check();
  await page.getByLabel('Select Facet beta').check();
  await page.locator('#selected-count', { hasText: '2 selected.' }).waitFor();
  // No day chosen: the service's validation message, beside the control.
  await page.getByRole('button', { name: 'Set expiration' }).click();
  await expect(errorText('#bulk-expiration-error')).resolves.toMatch(/validation_failed.*expiresAt/);
  await page.getByLabel('Expiration day (UTC)').fill('2030-03-04');
  // Clicked twice while its request is out: sent once; then off, as the selection was cleared.
  const apply = page.getByRole('button', { name: 'Set expiration' });
  const sets = await clickTwiceWhileHeld(page, '**/api/v1/samples/expiration', apply, () =>
    page.locator('#bulk-expiration-result', { hasText: 'Expiration set on 2 samples.' }).waitFor(),
  );
  expect({ sent: sets.sent.length, heldOff: sets.heldOff }).toEqual({ sent: 1, heldOff: true });
  await expect(apply.isDisabled()).resolves.toBe(true);
  for (const id of [facet.alpha, facet.beta]) {
    const detail = (await call('GET', `/samples/${id}`)).json;
    expect(detail).toMatchObject({ expiresAt: '2030-03-04T23:59:59.000Z', expiresAtSource: 'custom' });
  }
  const gamma = (await call('GET', `/samples/${facet.gamma}`)).json;
  expect(gamma.expiresAt).toBeNull();

  await page.getByLabel('Select every sample shown').check();
  await page.getByLabel('Expiration rule').selectOption('never');
  await page.getByRole('button', { name: 'Set expiration' }).click();
  await page.locator('#bulk-expiration-result', { hasText: 'Expiration set on 3 samples.' }).waitFor();
  for (const id of Object.values(facet)) {
    const detail = (await call('GET', `/samples/${id}`)).json;
    expect(detail).toMatchObject({ expiresAt: null, expiresAtSource: 'custom', willExpire: false });
  }
});

test('a sample trashed from its page is in Trash and restored from there', async () => {
  await page.goto(at(`/samples/${facet.gamma}`));
  await page.getByRole('button', { name: 'Move to Trash' }).click();
  await page.getByRole('button', { name: 'Restore from Trash' }).waitFor();
  expect((await call('GET', `/samples/${facet.gamma}`)).json.trashedAt).not.toBeNull();
  await page.goto(at('/samples/trash'));
  const row = page.locator(`tr[data-id="${facet.gamma}"]`);
  await row.getByRole('button', { name: 'Restore Facet gamma' }).click();
  await row.waitFor({ state: 'detached' });
  expect((await call('GET', `/samples/${facet.gamma}`)).json.trashedAt).toBeNull();
});

test('Trash pages with Load more, and a second click while a page loads does not add it twice', async () => {
  const binned: string[] = [];
  for (let i = 0; i < 50; i++) {
    const id = await insertSample(stack.sql, {
      organizationId: stack.tenant.organizationId,
      name: `Binned ${i}`,
    });
    await stack.sql`UPDATE samples SET trashed_at = now() - ${i} * interval '1 second' WHERE id = ${id}`;
    binned.push(id);
  }
  try {
    const first = (await call('GET', '/samples/trash')).json;
    const second = (await call('GET', `/samples/trash?cursor=${encodeURIComponent(first.nextCursor)}`)).json;
    expect(second.nextCursor).toBeNull();
    await page.goto(at('/samples/trash'));
    await page
      .locator('#trash-summary', {
        hasText: `${first.items.length} sample${first.items.length === 1 ? '' : 's'} in Trash.`,
      })
      .waitFor();
    // The second page is held on its way until the button has been clicked twice.
    const more = page.getByRole('button', { name: 'Load more' });
    const nextPage = await clickTwiceWhileHeld(page, '**/api/v1/samples/trash?cursor=*', more, () =>
      more.waitFor({ state: 'hidden' }),
    );
    expect({ sent: nextPage.sent.length, heldOff: nextPage.heldOff }).toEqual({ sent: 1, heldOff: true });
    const rows = await page
      .locator('tr[data-id]')
      .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-id')));
    expect(rows).toEqual([...first.items, ...second.items].map((item: { id: string }) => item.id));
  } finally {
    await stack.sql`DELETE FROM samples WHERE id = ANY(${binned})`;
  }
});

test('an upload survives a lost connection and a reload: it resumes from the stored bytes', async () => {
  const total = (await readFile(SLIDE)).length;
  const ranges: string[] = [];
  let chunks = 0;
  let held!: () => void;
  const holding = new Promise<void>((resolve) => {
    held = resolve;
  });
  // The session URL's PUTs: the second chunk's connection is cut once, and from the fifth on
  // the network is gone (every PUT fails until the reload), so three chunks are stored.
  let offline = false;
  await page.route(
    (url) => url.pathname.includes('/upload-sessions/'),
    async (route) => {
      const range = route.request().headers()['content-range'];
      if (route.request().method() !== 'PUT' || !range) return route.continue();
      if (offline) return route.abort('internetdisconnected');
      if (range.startsWith('bytes */')) return route.continue();
      chunks += 1;
      if (chunks === 2) return route.abort('connectionreset');
      if (chunks === 5) {
        offline = true;
        held();
        return route.abort('internetdisconnected');
      }
      return route.continue();
    },
  );
  await page.goto(at('/upload'));
  await page.getByLabel('Segment cells once each slide is ready').uncheck();
  await page.setInputFiles('#files', SLIDE);
  await holding;
  const session = await page.evaluate<string>(
    `Object.entries(sessionStorage).find(([key]) => key.startsWith('sps.upload:'))[1]`,
  );
  const { uploadId } = JSON.parse(session) as { uploadId: string };

  await page.reload();
  await page.unrouteAll({ behavior: 'ignoreErrors' });
  await page
    .locator('li.unfinished', { hasText: path.basename(SLIDE) })
    .locator('.badge-uploading')
    .waitFor();
  const asked: Promise<string | null>[] = [];
  page.on('request', (request) => {
    const range = request.headers()['content-range'];
    if (request.method() !== 'PUT' || !range) return;
    ranges.push(range);
    if (range.startsWith('bytes */'))
      asked.push(request.response().then((response) => response?.headerValue('range') ?? null));
  });
  await page.setInputFiles('#files', SLIDE);
  const upload = page.locator('li.upload', { hasText: path.basename(SLIDE) });
  await upload.locator('.badge-ready').waitFor({ timeout: 240_000 });
  page.removeAllListeners('request');

  // Three chunks were stored before the reload (the cut one was sent again after asking).
  const stored = Number(/^bytes=0-(\d+)$/.exec((await asked[0]) ?? '')![1]) + 1;
  expect(ranges[0]).toBe(`bytes */${total}`);
  expect(stored).toBe(3 * 256 * 1024);
  const starts = ranges.slice(1).map((range) => Number(/^bytes (\d+)-/.exec(range)![1]));
  expect(starts[0]).toBe(stored);
  expect(Math.min(...starts)).toBe(stored);
  await expect(upload.locator('.figures').textContent()).resolves.toMatch(/of /);
  const bar = await upload
    .locator('progress')
    .evaluate((element: { value: number; max: number }) => ({ value: element.value, max: element.max }));
  expect(bar).toEqual({ value: total, max: total });
  const href = await upload.getByRole('link', { name: 'Open sample' }).getAttribute('href');
  expect(href).toBe(`samples/${uploadId}`);
  expect((await call('GET', `/samples/${uploadId}`)).json).toMatchObject({
    status: 'ready',
    fileSize: String(total),
  });
  await expect(
    page.evaluate<string[]>(`Object.keys(sessionStorage).filter((key) => key.startsWith('sps.upload:'))`),
  ).resolves.toEqual([]);
  await shoot('upload-resumed');
}, 300_000);

test('the sample page shows the contract errors inline beside each field, and saves fields', async () => {
  await page.goto(at(`/samples/${facet.alpha}`));
  await page.getByLabel('Microns per pixel').fill('500');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await expect(errorText('#mpp-error')).resolves.toMatch(/validation_failed.*mpp/);
  await expect(page.getByLabel('Microns per pixel').getAttribute('aria-invalid')).resolves.toBe('true');

  await page.getByLabel('Microns per pixel').fill('0.5');
  await page.getByLabel('Batch').fill('many');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await expect(errorText('#field-batch-error')).resolves.toMatch(/validation_failed.*fields\.batch/);
  await expect(page.locator('#mpp-error').isHidden()).resolves.toBe(true);

  await page.getByLabel('Batch').fill('11');
  await page.getByLabel('Site').fill('south');
  await page.getByLabel('Tags').fill(`tonsil, ${'x'.repeat(60)}`);
  await page.getByRole('button', { name: 'Save changes' }).click();
  await expect(errorText('#tags-error')).resolves.toMatch(/validation_failed.*tags/);
  await page.getByLabel('Tags').fill('tonsil, reviewed');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('p.note', { hasText: 'Saved.' }).waitFor();
  expect((await call('GET', `/samples/${facet.alpha}`)).json).toMatchObject({
    tags: ['reviewed', 'tonsil'],
    fields: { site: 'south', batch: 11 },
  });
});

test('segmentation starts from the sample page and its state follows to completed', async () => {
  await page.goto(at(`/samples/${badgeId}`));
  await page.locator('#segmentation-state .badge-not_started').waitFor();
  await page.getByRole('button', { name: 'Start segmentation' }).click();
  await page.locator('#segmentation-state .badge-completed').waitFor({ timeout: 300_000 });
  const state = (await call('GET', `/samples/${badgeId}/segmentation`)).json;
  expect(state.status).toBe('completed');
  // Its end draws the page again: the state is read once the new drawing has it.
  await page.locator('#segmentation-state', { hasText: `${state.layer.instanceCount} cells` }).waitFor();
  await expect(page.getByRole('button', { name: /segmentation/i }).isHidden()).resolves.toBe(true);
}, 320_000);

test('an export requested on the sample page becomes ready, and its link downloads the API file', async () => {
  await page.goto(at(`/samples/${sharedId}`));
  await page.getByLabel('Format').selectOption('ome-zarr-zip');
  await page.getByRole('button', { name: 'Request export' }).click();
  await page.locator('#export-state .badge-ready').waitFor({ timeout: 240_000 });
  // The sections in the order a visit needs them: look and predict first, upkeep last.
  await expect(page.locator('main h2').allTextContents()).resolves.toEqual([
    'Details',
    'Viewer',
    'Predict',
    'Job history',
    'Cell segmentation',
    'Exports',
    'Edit',
    'Expiration',
    'Trash',
  ]);
  await shoot('sample');
  const link = page.getByRole('link', { name: 'Download the ome-zarr-zip file' });
  const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
  const saved = await readFile((await download.path())!);
  const manifest = (
    await call(
      'GET',
      `/jobs/${jobId}/exports?format=ome-zarr-zip&includeHe=false&includeSegmentation=false&includeOriginalUpload=false`,
    )
  ).json;
  expect(manifest.status).toBe('ready');
  const fromApi = Buffer.from(await (await fetch(manifest.artifacts.prediction.downloadUrl)).arrayBuffer());
  expect(saved.length).toBe(manifest.artifacts.prediction.sizeBytes);
  expect(saved.equals(fromApi)).toBe(true);
}, 400_000);

test('an export with the segmentation links its outlines for QuPath and its AnnData file', async () => {
  await page.goto(at(`/samples/${sharedId}`));
  await page.getByLabel('Format').selectOption('ome-zarr');
  await page.getByRole('checkbox', { name: 'Cell segmentation' }).check();
  await page.getByRole('button', { name: 'Request export' }).click();
  await page.locator('#export-state .badge-ready').waitFor({ timeout: 240_000 });
  const links = page.locator('#export-links');
  await expect(links.getByRole('link', { name: 'Cell outlines (GeoParquet)' }).count()).resolves.toBe(1);
  await expect(links.getByRole('link', { name: 'Cells for scanpy (AnnData .h5ad)' }).count()).resolves.toBe(
    1,
  );
  const geojson = links.getByRole('link', { name: 'Cell outlines for QuPath (GeoJSON)' });
  const [download] = await Promise.all([page.waitForEvent('download'), geojson.click()]);
  const outlines = JSON.parse(await readFile((await download.path())!, 'utf8'));
  expect(outlines.type).toBe('FeatureCollection');
  expect(outlines.features.length).toBeGreaterThan(0);
}, 300_000);

test('an empty list says where to begin, or how to clear the filters; an unknown sample says where to go', async () => {
  await page.goto(at('/samples?q=no-such-sample-anywhere&status=ready'));
  const empty = page.locator('#list-empty');
  await empty.waitFor();
  await expect(empty.textContent()).resolves.toBe('No sample matches these filters. Clear the filters.');
  await expect(page.locator('table.samples').isVisible()).resolves.toBe(false);
  await empty.getByRole('link', { name: 'Clear the filters' }).click();
  await page.locator('table.samples tbody tr').first().waitFor();
  expect(new URL(page.url()).search).toBe('');
  await expect(empty.isHidden()).resolves.toBe(true);

  const newcomer = await createOrganizationWithOwner(stack.sql, {
    name: 'Newcomers',
    email: 'new@comers.org',
  });
  const useKey = async (key: string) => {
    await page.goto(at('/settings'));
    await page.getByLabel('API key (development sign-in)').fill(key);
    await page.keyboard.press('Enter');
    await page.locator('#key-state', { hasText: 'An API key is set' }).waitFor();
  };
  await useKey(newcomer.apiKey);
  try {
    await page.goto(at('/samples'));
    await empty.waitFor();
    await expect(empty.textContent()).resolves.toBe(
      'No samples yet: upload slides here, or with sps upload (README).',
    );
    await shoot('samples-empty');
    await empty.getByRole('link', { name: 'upload slides' }).click();
    await page.waitForURL(at('/upload'));

    await page.goto(at('/samples/trash'));
    await page.locator('#trash-empty').waitFor();
    await expect(page.locator('main table').isVisible()).resolves.toBe(false);

    await page.goto(at(`/samples/${sharedId}`));
    await page.getByText('No sample of your organization has this id').waitFor();
    await page.getByRole('link', { name: 'Go to the samples' }).click();
    await page.waitForURL(at('/samples'));
  } finally {
    await useKey(stack.tenant.apiKey);
  }
});

test('on a phone (390 px) no page is wider than the screen: a long filename wraps, tables scroll in their box', async () => {
  const filename = 'BRACS_1640_N_3_cropped_scan_2026-12-08_second_attempt_level0.tiff';
  const longName = await insertSample(stack.sql, {
    organizationId: stack.tenant.organizationId,
    createdBy: stack.tenant.userId,
    filename,
    mppCalibrated: 0.5,
  });
  const ready: Record<string, string> = {
    [`/samples?q=${filename}`]: 'main tbody tr',
    [`/samples/${longName}`]: 'input[name="marker"]',
    [`/samples/${sharedId}`]: 'input[name="marker"]',
    '/samples/trash': 'main h1',
    '/upload': '#auto-segment',
    '/settings': '#key-state',
  };
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    for (const [route, last] of Object.entries(ready)) {
      await page.goto(at(route));
      await page.locator(last).first().waitFor();
      const width = await page.evaluate<{ page: number; screen: number }>(
        `({ page: document.documentElement.scrollWidth, screen: document.documentElement.clientWidth })`,
      );
      expect({ route, width: width.page }).toEqual({ route, width: width.screen });
      if (route === `/samples/${longName}`) await shoot('sample-phone');
    }
  } finally {
    await page.setViewportSize({ width: 1280, height: 900 });
  }
});

test('every new control has a label, axe-core finds nothing wrong, and no page broke its CSP or threw', async () => {
  // Each page's last control to appear once its data is in. Not 'networkidle': the list keeps
  // polling a sample still ingesting, and a thumbnail's read may still be open.
  const ready: Record<string, string> = {
    '/samples?q=Facet': 'main tbody tr',
    [`/samples/${facet.alpha}`]: 'input[name="marker"]',
    [`/samples/${sharedId}`]: 'input[name="marker"]',
    '/upload': '#auto-segment',
  };
  for (const [route, last] of Object.entries(ready)) {
    await page.goto(at(route));
    await page.locator(last).first().waitFor();
    if (route.startsWith('/samples?')) await page.getByRole('button', { name: 'Add field filter' }).click();
    const unlabelled = await page.evaluate<string[]>(`[...document.querySelectorAll('input, select')]
      .filter((control) => control.labels.length === 0 && !control.getAttribute('aria-label'))
      .map((control) => control.outerHTML)`);
    expect({ route, unlabelled }).toEqual({ route, unlabelled: [] });
    expect({ route, violations: await accessibilityViolations(page) }).toEqual({ route, violations: [] });
  }
  expect(problems).toEqual([]);
});
