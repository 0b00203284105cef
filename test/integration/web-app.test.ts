import { randomBytes } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { grantCredits } from '../../db/credits';
import { recordJobProgress } from '../../db/jobs';
import { finishSegmentationRun, insertQueuedSegmentationRun } from '../../db/segmentation-runs';
import { accessibilityViolations } from '../support/axe';
import { clickTwiceWhileHeld } from '../support/held-requests';
import { apiClient } from '../support/http';
import { insertPricedSample } from '../support/predictions';
import { insertSampleWithResults, publish } from '../support/public-samples';
import { insertJob } from '../support/samples';
import { screenshotPage } from '../support/screenshots';
import { startStack, type TestStack } from '../support/stack';
import { cutShort, SHARED_WSI, sendWhole, TIFF_HEADER } from '../support/uploads';

/** Debian's chromium (installed by `.ci/run`), driven headless. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SLIDE = path.join(SHARED_WSI, 'CMU-1-Small-Region.svs');

let stack: TestStack;
let browser: Browser;
let page: Page;
let screenshots: string;
const problems: string[] = [];
let sampleId: string;

const at = (route: string) => `${stack.baseUrl}${route}`;
const shoot = (name: string) => screenshotPage(page, path.join(screenshots, `${name}.png`));

beforeAll(async () => {
  stack = await startStack({ worker: true });
  // Artifacts outlive the run's scratch folder: SPS_TEST_ARTIFACTS, else .data/ (git-ignored).
  screenshots = path.join(
    process.env.SPS_TEST_ARTIFACTS ?? path.join(__dirname, '..', '..', '.data', 'test-artifacts'),
    'web-app',
  );
  await mkdir(screenshots, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text()))
      problems.push(message.text());
  });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

test('app pages carry a self-only CSP that forbids framing, and nosniff', async () => {
  for (const route of [
    '/samples',
    '/samples/trash',
    '/samples/00000000-0000-4000-8000-000000000000',
    '/upload',
    '/settings',
  ]) {
    const response = await fetch(at(route));
    expect({ route, status: response.status }).toEqual({ route, status: 200 });
    const policy = response.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).toContain("script-src 'self'");
    expect(policy).toMatch(/connect-src 'self'/);
    expect(policy).not.toMatch(/https?:\/\/(?!127\.0\.0\.1)/);
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
  }
  const asset = /src="\.\/(assets\/[^"]+\.js)"/.exec(await (await fetch(at('/samples'))).text())![1]!;
  const script = await fetch(at(`/${asset}`));
  expect(script.status).toBe(200);
  expect(script.headers.get('content-type')).toMatch(/javascript/);
});

test('without a key the list says where to set one; the key lives in sessionStorage only', async () => {
  await page.goto(at('/samples'));
  await expect(page.locator('#status').textContent()).resolves.toContain('No API key');
  await page.getByRole('link', { name: 'Settings', exact: true }).first().click();
  await page.getByLabel('API key (development sign-in)').fill(stack.tenant.apiKey);
  await page.keyboard.press('Enter');
  await page.locator('#key-state', { hasText: 'An API key is set' }).waitFor();
  const storage = await page.evaluate(() => ({
    session: sessionStorage.getItem('sps.apiKey'),
    local: localStorage.length,
  }));
  expect(storage).toEqual({ session: stack.tenant.apiKey, local: 0 });
});

test('a slide dropped on the upload page goes up resumably and follows ingest to ready', async () => {
  await page.goto(at('/upload'));
  await page.getByLabel('Segment cells once each slide is ready').uncheck();
  await page.setInputFiles('#files', SLIDE);
  const upload = page.locator('li.upload', { hasText: 'CMU-1-Small-Region.svs' });
  await upload.locator('.badge-ready').waitFor({ timeout: 180_000 });
  // Evaluated in the page; this program has no DOM types.
  const bar = await upload
    .locator('progress')
    .evaluate((element: { value: number; max: number }) => ({ value: element.value, max: element.max }));
  expect(bar.value).toBe(bar.max);
  await expect(upload.locator('p[role="alert"]').isHidden()).resolves.toBe(true);
  await shoot('upload');
  const href = await upload.getByRole('link', { name: 'Open sample' }).getAttribute('href');
  sampleId = href!.split('/').pop()!;
  const detail = await apiClient(stack.api, stack.tenant.apiKey)('GET', `/samples/${sampleId}`);
  expect(detail.json).toMatchObject({ status: 'ready', filename: 'CMU-1-Small-Region.svs' });
}, 240_000);

test("a scale given on the upload page becomes each slide's own; one out of range sends nothing", async () => {
  const bracs = path.join(SHARED_WSI, 'BRACS_1640_N_3_cropped.tiff');
  const created: string[] = [];
  const watch = (request: { method(): string; url(): string }) => {
    if (request.method() === 'POST' && request.url().endsWith('/api/v1/uploads')) created.push(request.url());
  };
  page.on('request', watch);
  try {
    await page.goto(at('/upload'));
    await page.getByLabel('Segment cells once each slide is ready').uncheck();
    const scale = page.getByLabel('Microns per pixel (optional)');
    await scale.fill('0');
    await page.setInputFiles('#files', bracs);
    await expect(page.locator('#upload-mpp-error').textContent()).resolves.toBe(
      'Microns per pixel: "0" is not a number greater than 0 and at most 100; nothing was sent.',
    );
    await expect(scale.getAttribute('aria-invalid')).resolves.toBe('true');
    await expect(page.locator('li.upload').count()).resolves.toBe(0);
    expect(created).toEqual([]);

    // BRACS's crop states no scale: the one given here is its scale (a decimal comma is read).
    await scale.fill('0,25');
    await page.setInputFiles('#files', bracs);
    await expect(page.locator('#upload-mpp-error').isHidden()).resolves.toBe(true);
    const row = page.locator('li.upload', { hasText: 'BRACS_1640_N_3_cropped.tiff' });
    await row.locator('.badge-ready').waitFor({ timeout: 120_000 });
    await expect(row.locator('.scale-needed').count()).resolves.toBe(0);
    expect(created).toHaveLength(1);
    const id = (await row.getByRole('link', { name: 'Open sample' }).getAttribute('href'))!.split('/').pop()!;
    const detail = await apiClient(stack.api, stack.tenant.apiKey)('GET', `/samples/${id}`);
    expect(detail.json.mpp).toBe(0.25);
    await shoot('upload-with-scale');
  } finally {
    page.off('request', watch);
  }
}, 150_000);

test('a file that is plainly no slide is not sent; a damaged one ends failed, and the upload and sample pages say why', async () => {
  await page.goto(at('/upload'));
  // An empty file (a copy that failed), another kind of file, a multi-file format: said at
  // once, and no sample is made.
  const call = apiClient(stack.api, stack.tenant.apiKey);
  const uploadsBefore = (await call('GET', '/uploads')).json.uploads.length;
  for (const [name, buffer, said] of [
    ['failed-copy.svs', Buffer.alloc(0), 'Not uploaded: this file is empty (0 bytes).'],
    [
      'notes.svs',
      randomBytes(64 * 1024),
      'Not uploaded: this file is not a whole-slide image the service reads (a TIFF-family slide such as SVS, NDPI or OME-TIFF, or a DICOM WSI instance).',
    ],
    [
      'Scan 12.vsi',
      TIFF_HEADER,
      'Not uploaded: this file is a .vsi slide, whose pixels are in other files or a database, which the service does not read: convert it to OME-TIFF and upload that.',
    ],
  ] as const) {
    await page.setInputFiles('#files', { name, mimeType: '', buffer });
    const row = page.locator('li.upload', { hasText: name });
    await expect(row.getByRole('alert').textContent()).resolves.toBe(said);
  }
  expect((await call('GET', '/uploads')).json.uploads.length).toBe(uploadsBefore);
  await shoot('upload-refused');

  // Only ingest can tell a slide whose copy was cut short.
  await page.setInputFiles('#files', {
    name: 'damaged.svs',
    mimeType: 'application/octet-stream',
    buffer: await cutShort(),
  });
  const upload = page.locator('li.upload', { hasText: 'damaged.svs' });
  await upload.locator('.badge-deid_failed').waitFor({ timeout: 60_000 });
  const reason = upload.getByRole('alert');
  await expect(reason.textContent()).resolves.toMatch(/the file is truncated or damaged$/);
  await expect(reason.isVisible()).resolves.toBe(true);
  await shoot('upload-failed');

  await upload.getByRole('link', { name: 'Open sample' }).click();
  const why = page.locator('dt', { hasText: 'Why it failed' }).locator('+ dd');
  await expect(why.textContent()).resolves.toMatch(/the file is truncated or damaged$/);
  await page.getByText('This sample could not be prepared (Details says why)').waitFor();
  await shoot('sample-failed');
});

test('a sample page opened while its bytes still go up follows it to ready, and draws its viewer then', async () => {
  const call = apiClient(stack.api, stack.tenant.apiKey);
  const bytes = await readFile(path.join(SHARED_WSI, 'BRACS_1640_N_3_cropped.tiff'));
  const created = await call('POST', '/uploads', {
    filename: 'BRACS_1640_N_3_cropped.tiff',
    fileSize: bytes.length,
    contentType: 'image/tiff',
    autoSegment: false,
  });
  expect(created.status).toBe(200);
  await page.goto(at(`/samples/${created.json.id}`));
  const state = page.locator('dt', { hasText: 'Status' }).locator('+ dd');
  await state.locator('.badge-uploading').waitFor();
  await page.getByText('The viewer needs a ready sample.').waitFor();
  // The bytes arrive from elsewhere (another tab, `sps`): the page is not reloaded.
  const sent = await sendWhole(created.json.uploadUrl, bytes);
  expect(sent.status).toBe(200);
  await state.locator('.badge-ready').waitFor({ timeout: 60_000 });
  await page.locator('#viewer-canvas').waitFor();
  await page.locator('#viewer-scale-text', { hasText: / px$/ }).waitFor();
  await shoot('sample-followed-to-ready');
}, 90_000);

test('the list shows the sample, and a facet filter makes the page URL the API query', async () => {
  await page.goto(at('/samples'));
  // The slide is portrait: its picture is fitted into the row's box, not stretched to its width.
  const thumbnail = page.locator(`tr[data-id="${sampleId}"] canvas.thumbnail[data-state="painted"]`);
  // Pictures are drawn for rows in view; the samples uploaded since may push this one below.
  await page.locator(`tr[data-id="${sampleId}"]`).scrollIntoViewIfNeeded();
  await thumbnail.waitFor();
  await expect(thumbnail.boundingBox()).resolves.toMatchObject({ width: 96, height: 72 });
  await shoot('samples');
  await page.getByLabel('ready', { exact: true }).check();
  await page.getByLabel('Search name or filename').fill('CMU-1');
  const [request] = await Promise.all([
    page.waitForRequest((candidate) => new URL(candidate.url()).pathname === '/api/v1/samples'),
    page.getByRole('button', { name: 'Apply filters' }).click(),
  ]);
  await page.locator(`tr[data-id="${sampleId}"]`).waitFor();
  const pageUrl = new URL(page.url());
  expect(pageUrl.pathname).toBe('/samples');
  expect(pageUrl.search).toBe('?q=CMU-1&status=ready');
  expect(new URL(request.url()).search).toBe(pageUrl.search);
  const answer = (await (await request.response())!.json()) as { appUrl: string };
  expect(new URL(answer.appUrl).search).toBe(pageUrl.search);

  // The same URL typed in afresh lists the same sample with the same filters set.
  await page.goto(page.url());
  await page.locator(`tr[data-id="${sampleId}"]`).waitFor();
  await expect(page.getByLabel('ready', { exact: true }).isChecked()).resolves.toBe(true);
});

test('the sample page edits the name and shows the contract error for an invalid mpp inline', async () => {
  await page.locator(`tr[data-id="${sampleId}"] a`).click();
  await page.waitForURL(`**/samples/${sampleId}`);
  await page.getByLabel('Name', { exact: true }).fill('Web renamed');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('h1', { hasText: 'Web renamed' }).waitFor();
  const detail = await apiClient(stack.api, stack.tenant.apiKey)('GET', `/samples/${sampleId}`);
  expect(detail.json.name).toBe('Web renamed');

  await page.getByLabel('Microns per pixel').fill('500');
  await page.getByRole('button', { name: 'Save changes' }).click();
  const error = page.locator('#mpp-error');
  await error.waitFor();
  await expect(error.textContent()).resolves.toMatch(/validation_failed.*mpp/);
  await expect(page.getByLabel('Microns per pixel').getAttribute('aria-invalid')).resolves.toBe('true');
  await shoot('sample');
  // A decimal comma is read as the point it means.
  await page.getByLabel('Microns per pixel').fill('0,499');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText('Saved.').waitFor();
  await expect(error.isHidden()).resolves.toBe(true);
});

test("the details read as words: mpp to four digits (exact in its tooltip), the expiration's source", async () => {
  const api = apiClient(stack.api, stack.tenant.apiKey);
  const exact = 0.22709982175592125;
  const before = await api('GET', `/samples/${sampleId}`);
  await api('PATCH', `/samples/${sampleId}`, { mpp: exact });
  try {
    await page.goto(at(`/samples/${sampleId}`));
    const detail = (term: string) => page.locator('dt', { hasText: term }).locator('+ dd');
    await detail('Microns per pixel').locator('span[title]').waitFor();
    await expect(detail('Microns per pixel').textContent()).resolves.toBe('0.2271');
    await expect(detail('Microns per pixel').locator('span').getAttribute('title')).resolves.toBe(
      String(exact),
    );
    await expect(page.getByLabel('Microns per pixel').inputValue()).resolves.toBe(String(exact));
    // This organization has no expiration policy: no source, no words for one.
    await expect(detail('Expires').textContent()).resolves.toBe('never');
    await api('PATCH', `/samples/${sampleId}/expiration`, { neverExpire: true });
    await page.reload();
    await detail('Expires').filter({ hasText: 'never (set for this sample)' }).waitFor();
  } finally {
    await api('PATCH', `/samples/${sampleId}/expiration`, { useOrgDefault: true });
    await api('PATCH', `/samples/${sampleId}`, { mpp: before.json.mpp });
  }
});

test("a sample's expiration control opens on the rule it follows and sets a day", async () => {
  const api = apiClient(stack.api, stack.tenant.apiKey);
  const rule = page.getByLabel('Expiration rule');
  const day = page.getByLabel('Expiration day (UTC)');
  try {
    await page.goto(at(`/samples/${sampleId}`));
    await expect(rule.inputValue()).resolves.toBe('default');
    await expect(day.isHidden()).resolves.toBe(true);
    await rule.selectOption('date');
    await day.fill('2031-05-06');
    await page.getByRole('button', { name: 'Set expiration' }).click();
    await page
      .locator('dt', { hasText: 'Expires' })
      .locator('+ dd', { hasText: 'set for this sample' })
      .waitFor();
    await expect(api('GET', `/samples/${sampleId}`).then((answer) => answer.json.expiresAt)).resolves.toBe(
      '2031-05-06T23:59:59.000Z',
    );
    await page.reload();
    await expect(rule.inputValue()).resolves.toBe('date');
    await expect(day.inputValue()).resolves.toBe('2031-05-06');
    await api('PATCH', `/samples/${sampleId}/expiration`, { neverExpire: true });
    await page.reload();
    await expect(rule.inputValue()).resolves.toBe('never');
    await expect(day.isHidden()).resolves.toBe(true);
  } finally {
    await api('PATCH', `/samples/${sampleId}/expiration`, { useOrgDefault: true });
  }
});

test('a slide without a scale: Predict and segmentation say where to set one, and offer their buttons once it is saved', async () => {
  const unscaled = await insertPricedSample(stack.sql, {
    organizationId: stack.tenant.organizationId,
    createdBy: stack.tenant.userId,
    patchCount: 10,
    mpp: null,
  });
  try {
    await page.goto(at(`/samples/${unscaled}`));
    const notes = page.locator('.scale-needed');
    const segmentation = page.getByRole('region', { name: 'Cell segmentation' });
    const start = segmentation.getByRole('button', { name: 'Start segmentation' });
    await page.locator('#segmentation-state .badge-not_started').waitFor();
    await expect(notes.count()).resolves.toBe(2);
    await expect(segmentation.locator('.scale-needed').textContent()).resolves.toContain(
      'segmentation needs',
    );
    await expect(start.isVisible()).resolves.toBe(false);
    const predict = page.getByRole('region', { name: 'Predict' });
    const price = predict.getByRole('button', { name: 'Price' });
    const submit = predict.getByRole('button', { name: 'Submit prediction' });
    await expect(price.isVisible()).resolves.toBe(false);
    await expect(submit.isVisible()).resolves.toBe(false);
    await predict.locator('.scale-needed').getByRole('link', { name: 'Microns per pixel' }).click();
    await expect(page.evaluate<string>('document.activeElement.id')).resolves.toBe('mpp');
    await shoot('sample-unscaled');
    await page.keyboard.type('0.5');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Saved.').waitFor();
    await notes.first().waitFor({ state: 'detached' });
    await expect(notes.count()).resolves.toBe(0);
    await start.waitFor();
    await price.waitFor();
    await submit.waitFor();
    const detail = await apiClient(stack.api, stack.tenant.apiKey)('GET', `/samples/${unscaled}`);
    expect(detail.json.mpp).toBe(0.5);
  } finally {
    // It has no H&E, which the list and the pages after this one would try to draw.
    await stack.sql`DELETE FROM samples WHERE id = ${unscaled}`;
  }
  // A slide with a scale has no such note.
  await page.goto(at(`/samples/${sampleId}`));
  await page.locator('fieldset.markers').waitFor();
  await expect(page.locator('.scale-needed').count()).resolves.toBe(0);
});

test('a slide uploaded to be segmented but without a scale: its segmentation starts by itself once one is saved, and again at a corrected one', async () => {
  // BRACS's crop states no pixel size; the page's "Segment cells" box is left checked.
  await page.goto(at('/upload'));
  await page.setInputFiles('#files', path.join(SHARED_WSI, 'BRACS_1640_N_3_cropped.tiff'));
  const row = page.locator('li.upload', { hasText: 'BRACS_1640_N_3_cropped.tiff' });
  await row.locator('.badge-ready').waitFor({ timeout: 120_000 });
  await expect(row.locator('.scale-needed').textContent()).resolves.toBe(
    'This slide has no scale, which prediction and segmentation need (its segmentation starts once it has one): set Microns per pixel on its sample page.',
  );
  await shoot('upload-unscaled');
  await row.getByRole('link', { name: 'Open sample' }).click();
  const id = new URL(page.url()).pathname.split('/').pop()!;
  const segmentation = page.getByRole('region', { name: 'Cell segmentation' });
  await segmentation.locator('#segmentation-state .badge-not_started').waitFor();
  await expect(segmentation.locator('.scale-needed').textContent()).resolves.toContain(
    'it starts by itself once one is saved',
  );
  // Without a scale the viewer measures in the slide's pixels; a view is kept in the address.
  await expect(page.locator('#viewer-scale-text').textContent()).resolves.toMatch(/ px$/);
  await page.evaluate("history.replaceState(null, '', location.pathname + '#view=300,200,2')");
  await page.getByLabel('Microns per pixel').fill('0.25');
  await page.getByRole('button', { name: 'Save changes' }).click();
  // In micrometres at once, looking at the same place: the view moved into the new units.
  await page.locator('#viewer-scale-text', { hasText: / µm$/ }).waitFor();
  await expect(page.evaluate<string>('location.hash')).resolves.toBe('#view=75,50,8');
  // Not started by the page: the service starts it, and the section finds it without a reload.
  await segmentation.locator('#segmentation-state .badge-completed').waitFor({ timeout: 90_000 });
  const runs = await stack.sql`SELECT attempt FROM segmentation_runs WHERE sample_id = ${id}`;
  expect(runs).toHaveLength(1);
  // Its end draws the page again: the details say so, and the viewer offers the cell outlines.
  await page.locator('dt', { hasText: 'Segmentation' }).locator('+ dd', { hasText: 'completed' }).waitFor();
  await page.locator('#viewer #viewer-outlines').waitFor();
  await expect(page.locator('#viewer-scale-text').textContent()).resolves.toMatch(/ µm$/);
  await shoot('sample-segmented-once-scaled');

  // A corrected scale: the service segments again at it, and the page shows that layer unasked.
  const [before] = await stack.sql<{ layerId: string }[]>`
    SELECT layer_id AS "layerId" FROM segmentation_runs WHERE sample_id = ${id}`;
  await page.getByLabel('Microns per pixel').fill('0.5');
  const newLayer = (url: string) =>
    /\/segmentation\/[^/]+\/manifest$/.test(url) && !url.includes(before!.layerId);
  const [outlines] = await Promise.all([
    page.waitForRequest((request) => newLayer(request.url()), { timeout: 90_000 }),
    page.getByRole('button', { name: 'Save changes' }).click(),
  ]);
  const [rerun] = await stack.sql<{ attempt: number; layerId: string; mpp: number }[]>`
    SELECT attempt, layer_id AS "layerId", mpp FROM segmentation_runs
    WHERE sample_id = ${id} AND status = 'completed' ORDER BY attempt DESC LIMIT 1`;
  expect({ attempt: rerun!.attempt, mpp: rerun!.mpp }).toEqual({ attempt: 2, mpp: 0.5 });
  expect(outlines.url()).toContain(`/segmentation/${rerun!.layerId}/manifest`);
  await page.locator('#viewer #viewer-outlines').waitFor();
  await shoot('sample-segmented-again-rescaled');
}, 180_000);

test('a sample still being prepared takes a prediction: no price yet, the job reserves, waits and cancels', async () => {
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 100_000 });
  const preparing = await insertPricedSample(stack.sql, {
    organizationId: stack.tenant.organizationId,
    createdBy: stack.tenant.userId,
    patchCount: null,
    mpp: 0.5,
    status: 'preprocessing',
  });
  try {
    await page.goto(at(`/samples/${preparing}`));
    await page.locator('#prepared-first').waitFor();
    // A dry run needs the exact price, which only a ready sample has.
    await expect(page.getByRole('button', { name: 'Price' }).count()).resolves.toBe(0);
    await page.locator('fieldset.markers input[type="checkbox"]').first().check();
    await page.getByRole('button', { name: 'Submit prediction' }).click();
    await page
      .locator('#job-state', { hasText: 'credits reserved' })
      .or(page.locator('#job-state .badge'))
      .waitFor();
    await shoot('sample-preparing-predicting');
    const [job] = await stack.sql<{ id: string; status: string; reservedCredits: string }[]>`
      SELECT id, status, reserved_credits AS "reservedCredits" FROM jobs WHERE sample_id = ${preparing}`;
    expect(Number(job!.reservedCredits)).toBeGreaterThan(0);
    await page.getByRole('button', { name: 'Cancel job' }).click();
    await page.locator('#jobs .badge-cancelled').waitFor({ timeout: 60_000 });
  } finally {
    // It has no H&E, which the list and the pages after this one would try to draw.
    await stack.sql`DELETE FROM samples WHERE id = ${preparing}`;
  }
}, 120_000);

test('the sample page prices a prediction, submits it, follows its stream and cancels it', async () => {
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 100_000 });
  await page.goto(at(`/samples/${sampleId}`));
  const markers = page.locator('fieldset.markers input[type="checkbox"]');
  await markers.first().waitFor();
  await markers.first().check();
  await page.getByRole('button', { name: 'Price' }).click();
  await expect(page.locator('#price', { hasText: 'credits' }).textContent()).resolves.toMatch(
    /\d+ credits for \d+ patches × 1 markers; balance \d+/,
  );
  // The submission is held on its way until the button has been clicked twice: it is sent once.
  const submit = page.getByRole('button', { name: 'Submit prediction' });
  const jobCount = async () =>
    (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM jobs WHERE sample_id = ${sampleId}`)[0]!
      .n;
  const jobsBefore = await jobCount();
  const submissions = await clickTwiceWhileHeld(page, '**/api/v1/predict', submit, () =>
    page.locator('#job-state .badge').waitFor(),
  );
  expect(submissions.heldOff).toBe(true);
  expect(submissions.sent.map((request) => request.method())).toEqual(['POST']);
  await expect(submit.isEnabled()).resolves.toBe(true);
  // The submitted job is in the history while it runs, not only once it ends.
  await page.locator('#jobs tbody tr').first().waitFor();
  await shoot('sample-predicting');
  await page.getByRole('button', { name: 'Cancel job' }).click();
  // The stream ends on the terminal status and the page reloads the job history.
  await page.locator('#jobs .badge-cancelled').waitFor({ timeout: 60_000 });
  const detail = await apiClient(stack.api, stack.tenant.apiKey)('GET', `/samples/${sampleId}`);
  expect(detail.json.jobs[0]).toMatchObject({ status: 'cancelled' });
  await expect(jobCount()).resolves.toBe(jobsBefore + 1);
}, 120_000);

test('a page whose redraw fails keeps what it showed and says why', async () => {
  const api = apiClient(stack.api, stack.tenant.apiKey);
  await page.goto(at(`/samples/${sampleId}`));
  await page.locator('fieldset.markers').waitFor();
  // Trashing redraws the page from the sample, which the service now fails to give.
  await page.route(`**/api/v1/samples/${sampleId}`, (route) =>
    route.request().method() === 'GET'
      ? route.fulfill({
          status: 500,
          contentType: 'application/json',
          body: JSON.stringify({
            error: 'internal',
            message: 'the database went away',
            required: null,
            retryAfterSeconds: null,
          }),
        })
      : route.fallback(),
  );
  try {
    await page.getByRole('button', { name: 'Move to Trash' }).click();
    await page.locator('#status code', { hasText: 'internal' }).waitFor();
    await expect(page.locator('#status').textContent()).resolves.toContain('the database went away');
    // Shown where the Trash button was pressed, a screen below it.
    const inView = `(() => {
      const box = document.getElementById('status').getBoundingClientRect();
      return box.top >= 0 && box.bottom <= innerHeight;
    })()`;
    await expect(page.evaluate<boolean>(inView)).resolves.toBe(true);
    await expect(page.locator('#sample').count()).resolves.toBe(1);
    await expect(page.getByRole('region', { name: 'Details' }).isVisible()).resolves.toBe(true);
    await expect(page.locator('fieldset.markers').isVisible()).resolves.toBe(true);
    await shoot('sample-redraw-failed');
  } finally {
    await page.unroute(`**/api/v1/samples/${sampleId}`);
    await api('POST', `/samples/${sampleId}/restore`);
  }
  await expect(
    api('GET', `/samples/${sampleId}`).then((answer) => answer.json.trashedAt),
  ).resolves.toBeNull();
});

test('a viewer whose code cannot be loaded says so where the slide would be', async () => {
  // The viewer is a chunk of its own (a dynamic import); the rest of the page does without it.
  let refused = 0;
  await page.route('**/assets/viewer-*.js', (route) => {
    refused += 1;
    return route.abort('connectionfailed');
  });
  try {
    await page.goto(at(`/samples/${sampleId}`));
    const why = page.locator('#viewer [role="alert"]');
    await why.waitFor();
    await expect(why.textContent()).resolves.toMatch(
      /^Error\s+the viewer could not be loaded; reload the page/,
    );
    await expect(page.locator('fieldset.markers').isVisible()).resolves.toBe(true);
  } finally {
    await page.unroute('**/assets/viewer-*.js');
  }
  expect(refused).toBeGreaterThan(0);
});

test('a trashed sample is listed in Trash and restored from there', async () => {
  await page.goto(at(`/samples/${sampleId}`));
  await page.getByRole('button', { name: 'Move to Trash' }).click();
  await page.getByRole('button', { name: 'Restore from Trash' }).waitFor();
  await page.getByRole('link', { name: 'Trash', exact: true }).click();
  const row = page.locator(`tr[data-id="${sampleId}"]`);
  await row.waitFor();
  await shoot('trash');
  await row.getByRole('button', { name: 'Restore Web renamed' }).click();
  await row.waitFor({ state: 'detached' });
  const detail = await apiClient(stack.api, stack.tenant.apiKey)('GET', `/samples/${sampleId}`);
  expect(detail.json.trashedAt).toBeNull();
});

test('back on its tab, Trash shows a sample trashed elsewhere; a restore there updates its count', async () => {
  const call = apiClient(stack.api, stack.tenant.apiKey);
  await page.goto(at('/samples/trash'));
  const summary = page.locator('#trash-summary');
  await summary.filter({ hasText: 'in Trash.' }).waitFor();
  const before = Number.parseInt((await summary.textContent())!, 10);
  expect((await call('DELETE', `/samples/${sampleId}`)).status).toBe(200);
  await leaveAndReturn();
  const row = page.locator(`tr[data-id="${sampleId}"]`);
  await row.waitFor();
  await expect(summary.textContent()).resolves.toBe(inTrash(before + 1));
  await row.getByRole('button', { name: /^Restore / }).click();
  await row.waitFor({ state: 'detached' });
  await expect(summary.textContent()).resolves.toBe(inTrash(before));
  expect((await call('GET', `/samples/${sampleId}`)).json.trashedAt).toBeNull();
});

test("a failed job's row in the job history gives its id and the service's reason", async () => {
  const failedJob = await insertJob(stack.sql, {
    organizationId: stack.tenant.organizationId,
    sampleId,
    status: 'failed',
    createdAt: new Date(Date.now() - 86_400_000),
    errorMessage: 'every tile failed: the model could not be loaded',
  });
  await page.goto(at(`/samples/${sampleId}`));
  const history = page.locator('#jobs');
  await history.getByRole('columnheader', { name: 'Why it failed' }).waitFor();
  const failedRow = history.locator('tbody tr', { has: page.locator('.badge-failed') });
  await expect(failedRow.locator('td').last().textContent()).resolves.toBe(
    'every tile failed: the model could not be loaded',
  );
  await expect(failedRow.locator('td').first().textContent()).resolves.toBe(failedJob);
  await expect(history.getByRole('columnheader').first().textContent()).resolves.toBe('Job');
  await expect(history.locator('tbody tr').first().locator('td').last().textContent()).resolves.toBe('—');
  await shoot('job-history-failed');
});

const inTrash = (count: number) => `${count} sample${count === 1 ? '' : 's'} in Trash.`;

/** The page's tab left for another and come back to, as a browser tells a page. */
async function leaveAndReturn(): Promise<void> {
  for (const state of ['hidden', 'visible'])
    await page.evaluate(
      `Object.defineProperty(document, 'visibilityState', { value: '${state}', configurable: true });
       document.dispatchEvent(new Event('visibilitychange'))`,
    );
}

test('back on its tab, the sample page shows a job started elsewhere, and keeps unsaved edits when nothing changed', async () => {
  await page.goto(at(`/samples/${sampleId}`));
  const rows = page.locator('#jobs tbody tr');
  await page.locator('#jobs').waitFor();
  const before = await rows.count();
  await page.getByLabel('Name').fill('typed, not saved');
  await leaveAndReturn();
  await page.waitForTimeout(1000);
  await expect(page.getByLabel('Name').inputValue()).resolves.toBe('typed, not saved');

  const jobId = await insertJob(stack.sql, {
    organizationId: stack.tenant.organizationId,
    sampleId,
    status: 'failed',
    errorMessage: 'started from sps while the page was open',
  });
  await leaveAndReturn();
  await page.locator('#jobs tbody tr', { hasText: 'started from sps while the page was open' }).waitFor();
  await expect(rows.count()).resolves.toBe(before + 1);
  await stack.sql`DELETE FROM jobs WHERE id = ${jobId}`;
});

test('back on its tab, the list shows samples uploaded and trashed elsewhere, keeping the rows selected', async () => {
  const call = apiClient(stack.api, stack.tenant.apiKey);
  await page.goto(at('/samples'));
  const shown = page.locator(`tr[data-id="${sampleId}"]`);
  await shown.waitFor();
  await shown.locator('input.select').check();
  await shown.evaluate((tr) => {
    tr.dataset.drawn = 'before';
  });
  await leaveAndReturn();
  await page.waitForTimeout(1000);
  await expect(shown.getAttribute('data-drawn')).resolves.toBe('before');

  const created = await call('POST', '/uploads', {
    filename: 'uploaded-from-sps.tiff',
    fileSize: 1000,
    contentType: 'image/tiff',
    autoSegment: false,
  });
  expect(created.status).toBe(200);
  await leaveAndReturn();
  const arrived = page.locator(`tr[data-id="${created.json.id}"]`);
  await arrived.waitFor();
  await expect(shown.getAttribute('data-drawn')).resolves.toBeNull();
  await expect(shown.locator('input.select').isChecked()).resolves.toBe(true);
  await expect(page.locator('#selected-count').textContent()).resolves.toBe('1 selected.');

  expect((await call('DELETE', `/samples/${created.json.id}`)).status).toBe(200);
  await leaveAndReturn();
  await arrived.waitFor({ state: 'detached' });
  await expect(shown.locator('input.select').isChecked()).resolves.toBe(true);
});

test('a job running when the page opens is followed: its row and bar move with its stream, its end redraws the page', async () => {
  const jobId = await insertJob(stack.sql, {
    organizationId: stack.tenant.organizationId,
    sampleId,
    status: 'running',
    markers: ['DAPI'],
  });
  await recordJobProgress(stack.sql, { jobId, status: 'running', progress: 0.25 });
  await page.goto(at(`/samples/${sampleId}`));
  const row = page.locator(`#jobs tr[data-job="${jobId}"]`);
  await page.locator('#job-state', { hasText: '25 %' }).waitFor();
  await expect(page.getByRole('button', { name: 'Cancel job' }).isVisible()).resolves.toBe(true);
  await recordJobProgress(stack.sql, { jobId, status: 'running', progress: 0.5 });
  await row.locator('td', { hasText: '50 %' }).waitFor();
  await expect(row.locator('.badge').textContent()).resolves.toBe('running');
  await recordJobProgress(stack.sql, { jobId, status: 'failed', errorMessage: 'stopped by the test' });
  await page.locator(`#jobs tr[data-job="${jobId}"] .badge-failed`).waitFor();
  await expect(page.getByRole('button', { name: 'Cancel job' }).isHidden()).resolves.toBe(true);
});

test("a failed segmentation gives the service's reason beside its state, and its retry once allowed", async () => {
  const run = await insertQueuedSegmentationRun(stack.sql, {
    organizationId: stack.tenant.organizationId,
    sampleId,
  });
  await finishSegmentationRun(stack.sql, {
    runId: run.id,
    status: 'failed',
    errorMessage: 'zarr.json is not JSON',
  });
  await page.goto(at(`/samples/${sampleId}`));
  const state = page.locator('#segmentation-state');
  await state.locator('.badge-failed').waitFor();
  await expect(state.textContent()).resolves.toBe(
    'Segmentation failed · zarr.json is not JSON · a retry is possible a short while after the failure',
  );
  await expect(page.getByRole('button', { name: 'Retry segmentation' }).isHidden()).resolves.toBe(true);
  await shoot('segmentation-failed');
  // Once the cooldown has passed, the page offers the retry without a reload.
  await stack.sql`UPDATE segmentation_runs SET completed_at = now() - interval '1 hour' WHERE id = ${run.id}`;
  await page.getByRole('button', { name: 'Retry segmentation' }).waitFor({ timeout: 15_000 });
  await expect(state.textContent()).resolves.toBe('Segmentation failed · zarr.json is not JSON');
});

test("a public sample's appUrl opens a page with its thumbnail; a store it cannot draw is said, not blank", async () => {
  // Publishing needs a completed prediction: a sample stored as ingest and a prediction leave it.
  const stored = await insertSampleWithResults(stack.sql, stack.store, {
    organizationId: stack.tenant.organizationId,
    createdBy: stack.tenant.userId,
    name: 'Published tonsil',
  });
  const publicId = await publish(stack.sql, stored.sampleId, ['--markers', 'CD3']);
  const list = await apiClient(stack.api, stack.tenant.apiKey)('GET', '/samples?scope=public');
  const row = (list.json.items as { id: string; appUrl: string }[]).find((item) => item.id === publicId);
  expect(new URL(row!.appUrl).pathname).toBe(`/public/samples/${publicId}`);
  await page.goto(at(new URL(row!.appUrl).pathname));
  const thumbnail = page.locator('#thumbnail');
  await thumbnail.waitFor();
  await expect(
    thumbnail.evaluate(
      (image: { complete: boolean; naturalWidth: number }) => image.complete && image.naturalWidth,
    ),
  ).resolves.toBeGreaterThan(0);
  // This stand-in's H&E store names no image (web-viewer.test.ts draws a real one): the viewer
  // says so where the slide would be.
  const why = page.locator('#viewer [role="alert"]');
  await why.filter({ hasText: 'the H&E store has no multiscale image' }).waitFor();
  await shoot('public-sample');
});

test('an unknown sample id shows the service message, not a blank page', async () => {
  const response = await page.goto(at('/samples/00000000-0000-4000-8000-000000000000'));
  expect(response!.status()).toBe(200);
  const status = page.locator('#status');
  await status.locator('code').waitFor();
  await expect(status.textContent()).resolves.toMatch(/not_found.*not found/);
  await shoot('sample-not-found');
});

test('an address with no page shows a page of the app to a browser, and the JSON error to programs', async () => {
  const response = await page.goto(at('/samples/nothing/here'));
  expect(response!.status()).toBe(404);
  expect(response!.headers()['content-security-policy']).toContain("script-src 'self'");
  await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Page not found');
  await page.locator('#account button').waitFor();
  await shoot('not-found');
  await page.getByRole('link', { name: 'Go to the samples' }).click();
  await page.waitForURL(at('/samples'));

  const program = await fetch(at('/samples/nothing/here'));
  expect(program.status).toBe(404);
  await expect(program.json()).resolves.toMatchObject({ error: 'not_found' });
  const posted = await fetch(at('/no-such-page'), { method: 'POST', headers: { accept: 'text/html' } });
  expect(posted.status).toBe(404);
  expect(posted.headers.get('content-type')).toMatch(/json/);
});

test('on a wide screen every facet shows, with no button to fold them', async () => {
  await page.goto(at('/samples'));
  await page.locator(`tr[data-id="${sampleId}"]`).waitFor();
  await expect(page.getByRole('group', { name: 'Status' }).isVisible()).resolves.toBe(true);
  await expect(page.locator('.facets-toggle').isHidden()).resolves.toBe(true);
});

test('on a narrow screen no page scrolls sideways, and the list facets fold away', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    for (const route of ['/samples', `/samples/${sampleId}`, '/samples/trash', '/upload', '/settings']) {
      await page.goto(at(route));
      await page.waitForLoadState('networkidle');
      const overflow = await page.evaluate<number>(
        'document.documentElement.scrollWidth - window.innerWidth',
      );
      expect({ route, overflow }).toEqual({ route, overflow: 0 });
    }
    // The facets past search and scope fold away: the first samples show on the first screen.
    await page.goto(at('/samples'));
    const row = page.locator(`tr[data-id="${sampleId}"]`);
    await row.waitFor();
    const toggle = page.getByRole('button', { name: 'More filters' });
    await expect(toggle.getAttribute('aria-expanded')).resolves.toBe('false');
    await expect(page.getByRole('group', { name: 'Status' }).isVisible()).resolves.toBe(false);
    const first = (await page.locator('table.samples tbody tr').first().boundingBox())!;
    expect(first.y + first.height).toBeLessThanOrEqual(844);
    await shoot('samples-narrow');
    await toggle.click();
    await expect(toggle.getAttribute('aria-expanded')).resolves.toBe('true');
    await page.getByRole('group', { name: 'Status' }).getByLabel('ready').check();
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/status=ready/);
    await page.getByRole('button', { name: 'More filters (1 set)' }).waitFor();
    await shoot('samples-narrow-filtered');
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
});

test('every control has a label, axe-core finds nothing wrong, nothing a page loads fails, and no page broke its CSP or threw', async () => {
  // Each of these pages loads only what exists: its assets, the API's answers for a sample of
  // this organization (a 4xx or 5xx is a console error). Its icon is fetched here: Chromium
  // remembers a failed /favicon.ico and would not ask again on the next page.
  const failedLoads: string[] = [];
  const onConsole = (message: { type(): string; text(): string; location(): { url: string } }) => {
    if (message.type() === 'error' && /Failed to load resource/.test(message.text()))
      failedLoads.push(`${message.location().url}: ${message.text()}`);
  };
  page.on('console', onConsole);
  for (const route of ['/samples', `/samples/${sampleId}`, '/samples/trash', '/upload', '/settings']) {
    await page.goto(at(route));
    await page.waitForLoadState('networkidle');
    const icon = await page.evaluate<string | null>(
      `document.querySelector('link[rel="icon"]')?.href ?? null`,
    );
    const iconResponse = icon === null ? undefined : await fetch(icon);
    expect({ route, icon: iconResponse?.status, type: iconResponse?.headers.get('content-type') }).toEqual({
      route,
      icon: 200,
      type: 'image/svg+xml',
    });
    const unlabelled = await page.evaluate<string[]>(`[...document.querySelectorAll('input, select')]
      .filter((control) => control.labels.length === 0 && !control.getAttribute('aria-label'))
      .map((control) => control.outerHTML)`);
    expect({ route, unlabelled }).toEqual({ route, unlabelled: [] });
    expect({ route, violations: await accessibilityViolations(page) }).toEqual({ route, violations: [] });
  }
  page.off('console', onConsole);
  await page.goto(at('/no/such/page'));
  expect({ route: 'not found', violations: await accessibilityViolations(page) }).toEqual({
    route: 'not found',
    violations: [],
  });
  expect(failedLoads).toEqual([]);
  expect(problems).toEqual([]);
});
