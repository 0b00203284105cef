/** @jest-environment ./test/support/onnx-environment.js */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, readdir, readFile, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createOrganizationWithOwner } from '../../cli/admin-commands';
import { freePort } from '../../cli/ports';
import { insertFieldDefinition } from '../../db/sample-fields';
import { findSlide } from '../../db/sample-slides';
import { workflowIds } from '../../schemas/temporal';
import { createClient, type SpsClient } from '../../sdk';
import { forwarded } from '../support/http';
import { insertPricedSample } from '../support/predictions';
import { insertJob } from '../support/samples';
import { expiredLink } from '../support/signed-links';
import { startStack, type TestStack } from '../support/stack';
import { cutShort, SHARED_WSI, TIFF_HEADER } from '../support/uploads';

/**
 * `sps` as a user runs it: a child process of the bin, against the real stack, its login and
 * upload state in throwaway XDG folders. Scripts rely on `--json` and the exit codes.
 */
const BIN = path.join(__dirname, '..', '..', 'cli', 'sps', 'bin.js');
let stack: TestStack;
let client: SpsClient;
let home: string;
/**
 * The sample the commands predict, export and segment: OS-1's detail (1101 px a side), small
 * slides being quick to ingest, predict and segment, and the commands the same for any slide.
 */
let sampleId: string;
let jobId: string;
/** BRACS's crop, uploaded beside it; its H&E store is corrupted to make a segmentation fail. */
let otherId: string;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [BIN, ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: home,
      XDG_CONFIG_HOME: path.join(home, 'config'),
      XDG_STATE_HOME: path.join(home, 'state'),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

function finished(child: ChildProcess): Promise<Run> {
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr!.on('data', (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const sps = (...args: string[]) => finished(start(args));
// biome-ignore lint/suspicious/noExplicitAny: tests read fields of the printed JSON and assert on them.
const json = (run: Run): any => {
  if (run.code !== 0) throw new Error(`sps exited ${run.code}: ${run.stderr}`);
  return JSON.parse(run.stdout);
};

beforeAll(async () => {
  stack = await startStack({ worker: true });
  client = createClient({ baseUrl: stack.baseUrl, apiKey: stack.tenant.apiKey });
  home = await mkdtemp(path.join(os.tmpdir(), 'sps-cli-'));
}, 120_000);
afterAll(async () => {
  await stack?.close();
  if (home) await rm(home, { recursive: true, force: true });
});

test('--help works, and a command without a login says how to log in (exit 2)', async () => {
  const help = await sps('--help');
  expect(help.code).toBe(0);
  expect(help.stdout).toContain('upload');
  const notLoggedIn = await sps('samples', 'ls');
  expect(notLoggedIn.code).toBe(2);
  expect(notLoggedIn.stderr).toContain('sps login');
});

test('login checks the key and saves it readable by its owner only', async () => {
  // host:port without a scheme is said, before any request (not a stack trace, nor "fetch failed").
  const hostPort = new URL(stack.baseUrl).host;
  const unschemed = await sps('--base-url', hostPort, 'login', '--api-key', stack.tenant.apiKey);
  expect({ code: unschemed.code, stderr: unschemed.stderr }).toEqual({
    code: 2,
    stderr: `sps: usage: --base-url must be an http or https URL such as http://127.0.0.1:8080, got ${hostPort}\n`,
  });
  const refused = await sps('--base-url', stack.baseUrl, 'login', '--api-key', 'sps_wrong');
  expect(refused.code).toBe(4);
  expect(refused.stderr).toContain('unauthorized');
  expect(refused.stderr).toContain('hint: the service refused this key: paste it whole');
  const run = await sps('--base-url', stack.baseUrl, '--json', 'login', '--api-key', stack.tenant.apiKey);
  const { config } = json(run);
  expect((await stat(config)).mode & 0o777).toBe(0o600);
  expect(JSON.parse(await readFile(config, 'utf8'))).toEqual({
    baseUrl: stack.baseUrl,
    apiKey: stack.tenant.apiKey,
  });
  const fromEnv = await finished(start(['samples', 'ls'], { SPS_BASE_URL: hostPort }));
  expect({ code: fromEnv.code, stderr: fromEnv.stderr }).toEqual({
    code: 2,
    stderr: `sps: usage: SPS_BASE_URL must be an http or https URL such as http://127.0.0.1:8080, got ${hostPort}\n`,
  });
  // No service at the URL: what failed, in fetch's cause, and where the URL came from.
  const nowhere = `http://127.0.0.1:${await freePort()}`;
  const unanswered = await finished(start(['samples', 'ls'], { SPS_BASE_URL: nowhere }));
  expect({ code: unanswered.code, stderr: unanswered.stderr.split('\n') }).toEqual({
    code: 8,
    stderr: [
      `sps: network: GET ${nowhere}/api/v1/samples: fetch failed (connect ECONNREFUSED ${nowhere.slice(7)})`,
      'hint: no answer from the service: check that it runs at the URL above (--base-url, SPS_BASE_URL or `sps login` set it); an interrupted upload or download continues when run again',
      '',
    ],
  });
  // Elsewhere a refused key is one the login saved or SPS_API_KEY overrides it with.
  const overridden = await finished(start(['samples', 'ls'], { SPS_API_KEY: 'sps_wrong' }));
  expect(overridden.code).toBe(4);
  expect(overridden.stderr).toContain(
    'hint: check the API key: `sps login` saves one, SPS_API_KEY overrides it',
  );
});

test('an upload killed halfway (SIGKILL) is resumed by a rerun, not started over', async () => {
  const file = path.join(home, 'big.bin');
  const size = 96 * 1024 * 1024;
  const handle = await open(file, 'w');
  // A TIFF header first: sps sends nothing that is plainly no slide.
  await handle.write(TIFF_HEADER);
  for (let written = TIFF_HEADER.length; written < size; written += 1 << 20)
    await handle.write(randomBytes(Math.min(1 << 20, size - written)));
  await handle.close();
  const stateFile = path.join(home, 'state', 'sps', 'uploads.json');

  const child = start(['upload', file, '--chunk-mib', '0.25', '--no-auto-segment', '--json']);
  const firstRun = finished(child);
  let uploadId: string | undefined;
  let storedAtKill = 0;
  for (let i = 0; i < 1000 && storedAtKill === 0; i++) {
    await sleep(20);
    const entries = JSON.parse(await readFile(stateFile, 'utf8').catch(() => '{}'));
    uploadId = (Object.values(entries)[0] as { uploadId?: string } | undefined)?.uploadId;
    if (uploadId) storedAtKill = Number((await client.uploads.get(uploadId)).uploadedBytes);
  }
  child.kill('SIGKILL');
  expect((await firstRun).code).toBeNull();
  const stored = Number((await client.uploads.get(uploadId!)).uploadedBytes);
  expect(stored).toBeGreaterThan(0);
  expect(stored).toBeLessThan(size);

  const rerun = await sps('upload', file, '--chunk-mib', '4', '--json');
  const [upload] = json(rerun);
  expect(upload).toMatchObject({ id: uploadId, fileSize: String(size) });
  expect(rerun.stderr).toMatch(/resumed at \d/);
  expect(Number((await client.uploads.get(uploadId!)).uploadedBytes)).toBe(size);
  expect(JSON.parse(await readFile(stateFile, 'utf8'))).toEqual({});
}, 180_000);

test('upload of several files at once, --wait until ready', async () => {
  const run = await sps(
    'upload',
    path.join(SHARED_WSI, 'BRACS_1640_N_3_cropped.tiff'),
    path.join(SHARED_WSI, 'OS-1-detail.ome.tif'),
    '--no-auto-segment',
    '--wait',
    '--json',
  );
  const uploads = json(run);
  expect(uploads.map((u: { filename: string }) => u.filename).sort()).toEqual([
    'BRACS_1640_N_3_cropped.tiff',
    'OS-1-detail.ome.tif',
  ]);
  expect(uploads.map((u: { status: string }) => u.status)).toEqual(['ready', 'ready']);
  sampleId = uploads.find((u: { filename: string }) => u.filename === 'OS-1-detail.ome.tif').id;
  otherId = uploads.find((u: { filename: string }) => u.filename === 'BRACS_1640_N_3_cropped.tiff').id;
  expect(run.stderr).toContain('OS-1-detail.ome.tif: 100%');
}, 300_000);

test('upload names every file it cannot read and every wrong flag, exit 2, and starts no upload', async () => {
  const samplesBefore = json(await sps('samples', 'ls', '--all', '--json')).items.length;
  const slide = path.join(SHARED_WSI, 'OS-1-detail.ome.tif');
  const missing = path.join(home, 'no-such-slide.svs');
  const empty = path.join(home, 'failed-copy.svs');
  await writeFile(empty, '');
  const notes = path.join(home, 'notes.svs');
  await writeFile(notes, randomBytes(64 * 1024));
  const vsi = path.join(home, 'Scan 12.vsi');
  await writeFile(vsi, TIFF_HEADER);
  const run = await sps('upload', slide, missing, home, empty, notes, vsi);
  expect(run.code).toBe(2);
  expect(run.stderr.trim()).toBe(
    `sps: usage: nothing was uploaded: ${missing}: no such file; ${home}: a folder: give the slide files in it (a DICOM slide's level-0 instance: its largest file); ${empty}: empty (0 bytes); ` +
      `${notes}: not a whole-slide image the service reads (a TIFF-family slide such as SVS, NDPI or OME-TIFF, or a DICOM WSI instance); ` +
      `${vsi}: a .vsi slide, whose pixels are in other files or a database, which the service does not read: convert it to OME-TIFF and upload that`,
  );
  for (const [flags, message] of [
    [['--chunk-mib', '0.3'], '--chunk-mib must be a positive multiple of 0.25, got 0.3'],
    [['--parallel', 'two'], '--parallel must be a whole number of at least 1, got two'],
    [
      ['--mpp', '-1'],
      '--mpp must be a number of microns per pixel greater than 0 and at most 100 (such as 0.25), got -1',
    ],
    [['--name', 'One name', slide], '--name names one file; 2 were given'],
  ] as const) {
    const refused = await sps('upload', slide, ...flags);
    expect({ code: refused.code, stderr: refused.stderr.trim() }).toEqual({
      code: 2,
      stderr: `sps: usage: ${message}`,
    });
  }
  expect(json(await sps('samples', 'ls', '--all', '--json')).items).toHaveLength(samplesBefore);
});

test("a damaged slide: upload --wait exits 9 with the service's reason, in the table and the JSON", async () => {
  const junk = path.join(home, 'damaged.svs');
  await writeFile(junk, await cutShort());
  const table = await sps('upload', junk, '--no-auto-segment', '--wait');
  expect(table.code).toBe(9);
  expect(table.stdout).toMatch(/STATUS\s+REASON/);
  expect(table.stdout).toMatch(/deid_failed\s+.*the file is truncated or damaged/);
  const run = await sps('upload', junk, '--no-auto-segment', '--wait', '--json');
  expect(run.code).toBe(9);
  expect(JSON.parse(run.stdout)).toEqual([
    expect.objectContaining({
      filename: 'damaged.svs',
      status: 'deid_failed',
      statusMessage: expect.stringContaining('the file is truncated or damaged'),
    }),
  ]);
  const [{ id }] = JSON.parse(run.stdout);
  const show = await sps('samples', 'show', id);
  expect(show.code).toBe(0);
  expect(show.stdout).toMatch(/\n\nWhy it failed: .*the file is truncated or damaged/);
  const bytes = JSON.parse(run.stdout)[0].fileSize;
  expect(show.stdout).toMatch(new RegExp(`^fileSize: +[\\d.]+ (B|KiB|MiB) \\(${bytes} bytes\\)$`, 'm'));
}, 120_000);

test('upload --wait names a slide ready without a scale, with the command that sets one', async () => {
  // BRACS's crop states no pixel size; OS-1's detail does.
  const run = await sps(
    'upload',
    path.join(SHARED_WSI, 'BRACS_1640_N_3_cropped.tiff'),
    '--name',
    'Unscaled BRACS',
    '--wait',
  );
  expect(run.code).toBe(0);
  const id = /^([0-9a-f-]{36})\s+BRACS_1640_N_3_cropped\.tiff/m.exec(run.stdout)![1];
  expect(run.stderr).toContain(
    `hint: BRACS_1640_N_3_cropped.tiff has no scale, which prediction and segmentation need (its segmentation starts once it has one): set it with \`sps samples edit ${id} --mpp MICRONS_PER_PIXEL\`\n`,
  );
  const scaled = await sps(
    'upload',
    path.join(SHARED_WSI, 'OS-1-detail.ome.tif'),
    '--no-auto-segment',
    '--wait',
  );
  expect(scaled.code).toBe(0);
  expect(scaled.stderr).not.toContain('hint:');
  await stack.sql`DELETE FROM samples WHERE name = 'Unscaled BRACS' OR (filename = 'OS-1-detail.ome.tif' AND id <> ${sampleId})`;
}, 180_000);

test('samples ls with facets, show, edit, expire, trash, ls --trash, restore', async () => {
  const page = json(await sps('samples', 'ls', '--status', 'ready', '--q', 'OS-1', '--json'));
  expect(page.items.map((item: { id: string }) => item.id)).toEqual([sampleId]);
  const table = await sps('samples', 'ls', '--status', 'ready');
  expect(table.stdout).toMatch(/^ID\s+NAME\s+STATUS/);
  expect(table.stdout).toContain(sampleId);
  // `list` is the same command, as a newcomer would type it.
  expect((await sps('samples', 'list', '--status', 'ready')).stdout).toBe(table.stdout);
  // An empty list says why: the filters, or nothing uploaded yet (a new organization).
  const none = await sps('samples', 'ls', '--q', 'no-such-sample');
  expect(none.stdout).toBe('No sample matches these filters.\n');
  const newcomer = await createOrganizationWithOwner(stack.sql, { name: 'New to sps', email: 'new@sps.org' });
  const asNewcomer = (...args: string[]) =>
    finished(start(args, { SPS_BASE_URL: stack.baseUrl, SPS_API_KEY: newcomer.apiKey }));
  await expect(asNewcomer('samples', 'ls').then((run) => run.stdout)).resolves.toBe(
    'No samples yet: upload slides with `sps upload FILE...` (or the web app).\n',
  );
  await expect(asNewcomer('samples', 'ls', '--trash').then((run) => run.stdout)).resolves.toBe(
    'Nothing is in Trash.\n',
  );
  await expect(
    asNewcomer('samples', 'ls', '--json').then((run) => JSON.parse(run.stdout).items),
  ).resolves.toEqual([]);
  const bad = await sps('samples', 'ls', '--marker', 'no-state', '--json');
  expect(bad.code).toBe(3);
  expect(JSON.parse(bad.stderr)).toMatchObject({ error: 'invalid_request' });

  expect(json(await sps('samples', 'show', sampleId, '--json'))).toMatchObject({
    id: sampleId,
    status: 'ready',
  });
  const edited = json(
    await sps('samples', 'edit', sampleId, '--name', 'cli slide', '--tags', 'a,B', '--json'),
  );
  expect(edited).toMatchObject({ name: 'cli slide', tags: ['a', 'b'] });
  // As a shell passes `--field stage="II"`: the quotes are gone, and II is the text meant.
  await insertFieldDefinition(stack.sql, {
    organizationId: stack.tenant.organizationId,
    key: 'stage',
    label: 'Stage',
    valueType: 'text',
    options: [],
  });
  expect(json(await sps('samples', 'edit', sampleId, '--field', 'stage=II', '--json')).fields).toMatchObject({
    stage: 'II',
  });
  // The list's field facet by the field's key, its value typed as a shell leaves it.
  const fields = await sps('samples', 'fields');
  expect(fields.stdout).toMatch(/^KEY\s+LABEL\s+TYPE\s+OPTIONS\s+WRITABLE\s+ID\n/);
  expect(fields.stdout).toMatch(/^stage\s+Stage\s+text\s+-\s+yes\s+[0-9a-f-]{36}$/m);
  const listed = async (...clauses: string[]) =>
    json(await sps('samples', 'ls', ...clauses.flatMap((clause) => ['--field', clause]), '--json')).items.map(
      (item: { id: string }) => item.id,
    );
  await expect(listed('stage:eq:II', 'tags:contains:a')).resolves.toEqual([sampleId]);
  await expect(listed('stage:eq:III')).resolves.toEqual([]);
  await expect(listed('stage:is_empty')).resolves.not.toContain(sampleId);
  const unknown = await sps('samples', 'ls', '--field', 'stag:eq:II');
  expect({ code: unknown.code, stderr: unknown.stderr }).toEqual({
    code: 2,
    stderr:
      "sps: usage: --field: no field 'stag' here; the fields are tags, public, stage (sps samples fields)\n",
  });
  const unreadable = await sps('samples', 'edit', sampleId, '--mpp', 'abc');
  expect({ code: unreadable.code, stderr: unreadable.stderr }).toEqual({
    code: 2,
    stderr:
      'sps: usage: --mpp must be a number of microns per pixel greater than 0 and at most 100 (such as 0.25), got abc\n',
  });
  // A day, as the web app's date control gives one: the sample stays through it.
  expect(json(await sps('samples', 'expire', sampleId, '--at', '2099-06-30', '--json'))).toMatchObject({
    expiresAt: '2099-06-30T23:59:59.000Z',
    expiresAtSource: 'custom',
  });
  expect(json(await sps('samples', 'expire', sampleId, '--never', '--json'))).toMatchObject({
    expiresAt: null,
    expiresAtSource: 'custom',
  });
  expect(json(await sps('samples', 'trash', sampleId, '--json')).trashedAt).not.toBeNull();
  const trash = json(await sps('samples', 'ls', '--trash', '--json'));
  expect(trash.items.map((item: { id: string }) => item.id)).toContain(sampleId);
  expect(json(await sps('samples', 'restore', sampleId, '--json'))).toMatchObject({ trashedAt: null });
});

test('predict: --dry-run prices, no --yes without a terminal refuses, --yes --wait runs to completed', async () => {
  const dry = json(await sps('predict', sampleId, '--markers', 'DAPI,CD3', '--dry-run', '--json'));
  expect(dry.estimatedCredits).toBe(dry.patchCount * 2);
  const human = await sps('predict', sampleId, '--markers', 'DAPI,CD3', '--dry-run');
  expect(human.stdout).toMatch(/price:\s+\d+ credits/);
  expect(human.stdout).toMatch(/balance:\s+\d+ credits/);

  const unasked = await sps('predict', sampleId, '--markers', 'DAPI');
  expect(unasked.code).toBe(2);
  expect(unasked.stderr).toContain('--yes');

  const run = await sps('predict', sampleId, '--markers', 'DAPI,CD3', '--yes', '--wait', '--json');
  const job = json(run);
  expect(job).toMatchObject({ status: 'completed', markers: ['DAPI', 'CD3'] });
  expect(run.stderr).toMatch(/job [0-9a-f]{8}: 100%/);
  jobId = job.id;
}, 300_000);

test("a slide without a scale: predict and segment say how to set one with sps, beside the service's message", async () => {
  const unscaled = await insertPricedSample(stack.sql, {
    organizationId: stack.tenant.organizationId,
    patchCount: 10,
    mpp: null,
  });
  const run = await sps('predict', unscaled, '--markers', 'DAPI', '--dry-run');
  expect(run.code).toBe(6);
  expect(run.stderr.trim().split('\n')).toEqual([
    'sps: mpp_required: the sample has no usable scale: set its mpp first (PATCH /samples/{id})',
    `hint: set the slide's scale with \`sps samples edit ${unscaled} --mpp MICRONS_PER_PIXEL\`, then run this again`,
  ]);
  // Scripts read the contract's error body alone.
  const scripted = await sps('predict', unscaled, '--markers', 'DAPI', '--dry-run', '--json');
  expect(JSON.parse(scripted.stderr)).toMatchObject({ error: 'mpp_required' });
  const segment = await sps('segment', unscaled);
  expect(segment.code).toBe(6);
  expect(segment.stderr).toContain(`hint: set the slide's scale with \`sps samples edit ${unscaled} --mpp`);
});

test("predict before ready reserves an upper bound; on a slide that failed it gives the service's reason alone", async () => {
  const sample = (status: 'preprocessing' | 'deid_failed') =>
    insertPricedSample(stack.sql, {
      organizationId: stack.tenant.organizationId,
      patchCount: null,
      mpp: 0.5,
      status,
    });
  const preparing = await sample('preprocessing');
  const early = await sps('predict', preparing, '--markers', 'DAPI', '--yes', '--json');
  expect(early.stderr).toBe(
    'The sample is not ready yet: the exact price is known once its tissue is found.\n',
  );
  const submitted = json(early);
  expect(submitted.reservedCredits).toBeGreaterThan(0);
  expect(json(await sps('jobs', 'cancel', submitted.jobId, '--json')).status).toBe('cancelled');

  const failed = await sample('deid_failed');
  const refused = await sps('predict', failed, '--markers', 'DAPI', '--yes');
  expect({ code: refused.code, stderr: refused.stderr }).toEqual({
    code: 6,
    stderr:
      'sps: sample_not_ready: the sample is deid_failed: it could not be prepared, so it cannot be predicted (its detail says why)\n',
  });
  expect((await client.samples.get(failed)).jobs).toEqual([]);
});

test('jobs ls, show, watch, and cancel of a finished job (the contract code, exit 3)', async () => {
  const listed = json(await sps('jobs', 'ls', '--sample', sampleId, '--json'));
  expect(listed.jobs.map((job: { id: string }) => job.id)).toContain(jobId);
  expect(json(await sps('jobs', 'show', jobId, '--json'))).toMatchObject({ id: jobId, status: 'completed' });
  expect(json(await sps('jobs', 'watch', jobId, '--json')).status).toBe('completed');
  const cancel = await sps('jobs', 'cancel', jobId, '--json');
  expect(cancel.code).toBe(3);
  expect(JSON.parse(cancel.stderr)).toMatchObject({ error: 'job_already_terminal' });
  const missing = await sps('jobs', 'show', '00000000-0000-4000-8000-000000000000');
  expect(missing.code).toBe(5);
  expect(missing.stderr).toMatch(/^sps: not_found: /);
}, 120_000);

test("a failed job's row gives the service's reason, in jobs ls and samples show", async () => {
  const failed = await insertJob(stack.sql, {
    organizationId: stack.tenant.organizationId,
    sampleId,
    status: 'failed',
    createdAt: new Date(Date.now() - 86_400_000),
    errorMessage: 'every tile failed: the model could not be loaded',
  });
  for (const args of [
    ['jobs', 'ls', '--sample', sampleId],
    ['samples', 'show', sampleId],
  ]) {
    const run = await sps(...args);
    expect(run.code).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines.find((line) => line.startsWith('JOB '))).toMatch(/\sREASON$/);
    expect(lines.find((line) => line.startsWith(failed))).toMatch(
      /\sfailed\s.*\severy tile failed: the model could not be loaded$/,
    );
    expect(lines.find((line) => line.startsWith(jobId))).toMatch(/\s-$/);
  }
});

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

test('results download: every store file, sizes checked; a rerun skips them and finishes a partial one', async () => {
  const dir = path.join(home, 'results');
  // A --parallel that is no number is said, not a download of nothing that ends in success.
  const misread = await sps('results', 'download', jobId, dir, '--parallel', 'two');
  expect({ code: misread.code, stderr: misread.stderr }).toEqual({
    code: 2,
    stderr: 'sps: usage: --parallel must be a whole number of at least 1, got two\n',
  });
  const first = json(await sps('results', 'download', jobId, dir, '--json'));
  expect(first.files).toBeGreaterThan(2);
  const files = await filesUnder(dir);
  expect(files).toEqual(expect.arrayContaining(['zarr.json', 'markers/DAPI/0/zarr.json']));
  expect(files.some((f) => f.endsWith('.part'))).toBe(false);
  const chunk = files.find((f) => /\/c\//.test(f))!;
  const full = await readFile(path.join(dir, chunk));
  await rename(path.join(dir, chunk), path.join(dir, `${chunk}.part`));
  await truncate(path.join(dir, `${chunk}.part`), Math.floor(full.length / 2));

  const second = json(await sps('results', 'download', jobId, dir, '--json'));
  expect(second).toMatchObject({ files: 1, skipped: first.files - 1 });
  expect(await readFile(path.join(dir, chunk))).toEqual(full);
}, 120_000);

const expired = (url: string) => expiredLink(stack.signingSecret, url);

/**
 * A proxy in front of the API whose first answer at `pathname` (a JSON body) goes through
 * `rewrite`; every request goes on to the API as it came.
 */
async function rewritingProxy(
  pathname: string,
  // biome-ignore lint/suspicious/noExplicitAny: the rewrite reaches into the answer's JSON.
  rewrite: (body: any) => unknown,
): Promise<{ url: string; calls: () => number; close(): Promise<void> }> {
  let calls = 0;
  const server = http.createServer(async (request, response) => {
    const upstream = await forwarded(request, stack.baseUrl);
    let body = Buffer.from(await upstream.arrayBuffer());
    if (new URL(request.url!, stack.baseUrl).pathname === pathname && upstream.ok && calls++ === 0)
      body = Buffer.from(JSON.stringify(rewrite(JSON.parse(body.toString()))));
    const headers = Object.fromEntries(
      [...upstream.headers].filter(
        ([name]) => !['content-length', 'content-encoding', 'transfer-encoding'].includes(name),
      ),
    );
    response.writeHead(upstream.status, headers).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => calls,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** `sps` run against `proxy` in place of the API. */
const throughProxy = (proxy: { url: string }, ...args: string[]) =>
  finished(start(args, { SPS_BASE_URL: proxy.url, SPS_API_KEY: stack.tenant.apiKey }));

test('results download given an expired link asks for a fresh one once and downloads every file', async () => {
  const proxy = await rewritingProxy(`/api/v1/jobs/${jobId}/results`, (location) => ({
    ...location,
    resultUrl: expired(location.resultUrl),
  }));
  try {
    const dir = path.join(home, 'results-renewed');
    const run = json(await throughProxy(proxy, 'results', 'download', jobId, dir, '--json'));
    expect(proxy.calls()).toBe(2);
    expect((await filesUnder(dir)).sort()).toEqual((await filesUnder(path.join(home, 'results'))).sort());
    expect(run.files).toBeGreaterThan(2);
  } finally {
    await proxy.close();
  }
}, 120_000);

test('export --format ome-tiff --wait --download writes a BigTIFF', async () => {
  const dir = path.join(home, 'export');
  const run = json(await sps('export', jobId, '--format', 'ome-tiff', '--download', dir, '--json'));
  expect(run.manifest.status).toBe('ready');
  const tiff = await readFile(path.join(dir, 'prediction.ome.tif'));
  expect(tiff.subarray(0, 4)).toEqual(Buffer.from([0x49, 0x49, 0x2b, 0x00]));
  // Again, as a table: the file is there already; a file export has no chunks to speak of.
  const again = await sps('export', jobId, '--format', 'ome-tiff', '--download', dir);
  expect(again.code).toBe(0);
  expect(again.stdout).toMatch(new RegExp(`^0 files \\(0 B\\) written to ${dir}; 1 already there$`, 'm'));
  expect(again.stdout).not.toContain('never written');
}, 300_000);

test('export --download given an expired file link reads the manifest again and downloads the file', async () => {
  const proxy = await rewritingProxy(`/api/v1/jobs/${jobId}/exports`, (manifest) => {
    manifest.artifacts.prediction.downloadUrl = expired(manifest.artifacts.prediction.downloadUrl);
    return manifest;
  });
  try {
    const dir = path.join(home, 'export-renewed');
    const renewed = await throughProxy(proxy, 'export', jobId, '--format', 'ome-tiff', '--download', dir);
    expect(renewed.code).toBe(0);
    expect(renewed.stdout).toMatch(
      new RegExp(`^1 file \\([\\d.]+ (KiB|MiB)\\) written to ${dir}; 0 already there$`, 'm'),
    );
    // The request's answer with the expired link, then the manifest asked again.
    expect(proxy.calls()).toBe(2);
    const tiff = await readFile(path.join(dir, 'prediction.ome.tif'));
    expect(tiff.equals(await readFile(path.join(home, 'export', 'prediction.ome.tif')))).toBe(true);
  } finally {
    await proxy.close();
  }
}, 120_000);

test('segment --wait --download writes the mask store and the tables', async () => {
  const dir = path.join(home, 'segmentation');
  const run = json(await sps('segment', sampleId, '--download', dir, '--json'));
  expect(run.state.status).toBe('completed');
  const files = await filesUnder(dir);
  expect(files).toEqual(
    expect.arrayContaining([
      'provenance.json',
      'features/instances.parquet',
      'features/cells.geojson',
      'features/outlines.parquet',
      'features/cells.h5ad',
      'mask/zarr.json',
    ]),
  );
  const geojson = JSON.parse(await readFile(path.join(dir, 'features/cells.geojson'), 'utf8'));
  expect(geojson.type).toBe('FeatureCollection');
  expect(geojson.features.length).toBe(run.state.layer.instanceCount);
  // HDF5's signature.
  const h5ad = await readFile(path.join(dir, 'features/cells.h5ad'));
  expect(h5ad.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x48, 0x44, 0x46, 0x0d, 0x0a, 0x1a, 0x0a]));
}, 420_000);

test('export --format ome-zarr --he --segmentation --download: both stores and every segmentation file', async () => {
  const dir = path.join(home, 'export-ome-zarr');
  const run = json(
    await sps('export', jobId, '--format', 'ome-zarr', '--he', '--segmentation', '--download', dir, '--json'),
  );
  expect(run.manifest.status).toBe('ready');
  const files = await filesUnder(dir);
  expect(files).toEqual(
    expect.arrayContaining([
      'prediction.ome.zarr/zarr.json',
      'he.ome.zarr/zarr.json',
      'segmentation/provenance.json',
      'segmentation/instances.parquet',
      'segmentation/cells.geojson',
      'segmentation/outlines.parquet',
      'segmentation/cells.h5ad',
    ]),
  );
  // The H&E's pixels came too, not only its metadata.
  expect(
    files.filter((f) => f.startsWith('he.ome.zarr/') && !f.endsWith('zarr.json')).length,
  ).toBeGreaterThan(0);
}, 300_000);

test("a segmentation that fails: segment --wait exits 9 with the service's reason", async () => {
  // BRACS's crop states no pixel size, which segmentation needs.
  expect((await sps('samples', 'edit', otherId, '--mpp', '0.25')).code).toBe(0);
  // The recount gives the H&E group its new scale: the pyramid is broken once that is written.
  await stack.client.workflow.getHandle(workflowIds.recount(otherId)).result();
  const slide = await findSlide(stack.sql, otherId);
  await stack.store.put(`${slide!.hePrefix}zarr.json`, new TextEncoder().encode('{"zarr_format": 3,'));
  const run = await sps('segment', otherId, '--wait');
  expect(run.code).toBe(9);
  expect(run.stdout).toMatch(/^status: +failed$/m);
  expect(run.stdout).toMatch(/^error: +zarr\.json is not JSON$/m);
}, 180_000);

test('samples edit --mpp on a segmented, predicted sample says what the new scale makes again', async () => {
  const before = json(await sps('samples', 'show', sampleId, '--json'));
  const predicted = before.jobs.filter((job: { status: string }) => job.status === 'completed').length;
  expect({ segmentation: before.segmentation.status, predicted: predicted > 0 }).toEqual({
    segmentation: 'completed',
    predicted: true,
  });
  const edited = await sps('samples', 'edit', sampleId, '--mpp', '0.3');
  expect({ code: edited.code, stderr: edited.stderr }).toEqual({
    code: 0,
    stderr:
      `hint: the segmentation is made again at the new scale by itself; \`sps segment ${sampleId} --wait\` follows it\n` +
      `hint: ${predicted} prediction(s) made before keep the old scale; predict again for markers at this one\n`,
  });
  // As the hint says: the run that follows is one at the new scale.
  const followed = json(await sps('segment', sampleId, '--wait', '--json'));
  expect(followed).toMatchObject({
    status: 'completed',
    job: { attempt: before.segmentation.job.attempt + 1 },
  });
  // The same scale again changes nothing, and says nothing.
  const same = await sps('samples', 'edit', sampleId, '--mpp', '0.3');
  expect({ code: same.code, stderr: same.stderr }).toEqual({ code: 0, stderr: '' });
}, 180_000);
