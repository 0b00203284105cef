/** @jest-environment ./test/support/onnx-environment.js */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { creditSummary } from '../../db/credits';
import { runPythonJson } from '../support/python';
import { createTenant, startStack, type Tenant, type TestStack } from '../support/stack';
import { SHARED_WSI } from '../support/uploads';

/**
 * Strand AI's own Python SDK (`strand-sdk` 0.2.0 from PyPI, unchanged: test/support's
 * python-requirements.txt) against the whole service: DECISIONS.md, Compatibility with Strand's
 * clients. Its `to_array`/`to_anndata` read only uncompressed unsharded arrays and are left out.
 */
let stack: TestStack;
let tenant: Tenant;
let scratch: string;
const CREDITS = 1_000_000;
/**
 * The slide the flows upload three times and predict on twice: what is asserted is the client's
 * contract, which any slide shows, and this one (1101 px a side) is quick to ingest and predict.
 */
const SLIDE = 'OS-1-detail.ome.tif';

interface ArrayRead {
  shape: number[];
  dtype: string;
  nonzero: number;
}

interface Report {
  predict: {
    jobId: string;
    status: string;
    creditsUsed: number;
    stages: string[];
    markerOutputs: Record<string, string>;
    arrays: Record<string, ArrayRead[]>;
    resultBasePath: string;
  };
  upload: { id: string; gcsPath: string; widthPx: number; heightPx: number; status: string };
  earlyEstimate: { status?: number; error?: string; estimatedCredits?: number };
  submit: { jobId: string; reservedCredits: number };
  events: { id: string; status: string; progress: number | null; resultGcsPath: string | null }[];
  wait: { status: string; progress: number; resultsAvailable: boolean };
  estimate: {
    patchCount: number;
    markerCount: number;
    estimatedCredits: number;
    orgBalance: number;
    orgPending: number;
  };
  jobsGet: { id: string; status: string; reservedCredits: number; markers: string[]; completedAt: boolean };
  results: { resultUrl: string; resultBasePath: string; multiscaleNames: string[]; withHe: string[] };
  downloadTo: { path: string; arrays: Record<string, ArrayRead[]> };
  setRetention: Record<
    'date' | 'pin' | 'orgDefault',
    { id: string; expiresAt: string | null; expiresAtSource: string }
  >;
  setRetentionBulk: { updated: number; batchId: string };
  trashed: number;
  restore: { id: string; trashedAt: null };
  afterRestore: { trashedAt: string | null };
}

let report: Report;

beforeAll(async () => {
  stack = await startStack({ worker: true });
  tenant = await createTenant(stack.sql, { credits: CREDITS, expirationDays: 30 });
  scratch = await mkdtemp(path.join(os.tmpdir(), 'strand-sdk-'));
  report = await runPythonJson<Report>(
    readFileSync(path.join(__dirname, 'strand', 'sdk_flows.py'), 'utf8'),
    [path.join(SHARED_WSI, SLIDE), scratch],
    { STRAND_API_KEY: tenant.apiKey, STRAND_BASE_URL: stack.baseUrl },
  );
}, 1_200_000);
afterAll(async () => {
  await stack?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** The server's own store of a job, every level of every marker, read by zarr-python. */
async function serverArrays(resultBasePath: string, markers: string[]) {
  return runPythonJson<Record<string, ArrayRead[]>>(
    `
import json, sys
from pathlib import Path
import numpy as np
import zarr
root = Path(sys.argv[1])
group = zarr.open_group(str(root), mode='r')
out = {}
for name in sys.argv[2:]:
    levels = []
    image = group['markers'][name]
    for dataset in image.attrs['ome']['multiscales'][0]['datasets']:
        array = image[dataset['path']]
        levels.append({'shape': list(array.shape), 'dtype': str(array.dtype), 'nonzero': int(np.count_nonzero(array[:]))})
    out[name] = levels
print(json.dumps(out))
`,
    [path.join(stack.fsRoot, resultBasePath), ...markers],
  );
}

test('client.predict(path, markers, output_dir) runs end to end and writes the store zarr-python reads', async () => {
  const { predict } = report;
  expect(predict.status).toBe('completed');
  expect(predict.stages).toEqual(['upload', 'submit', 'wait', 'download']);
  expect(Object.keys(predict.markerOutputs).sort()).toEqual(['CD3', 'DAPI']);
  expect(predict.markerOutputs.DAPI).toBe(path.join(scratch, 'one-call', 'markers', 'DAPI'));
  // Every level of every marker, byte for byte the same arrays as the service's store.
  const server = await serverArrays(predict.resultBasePath, ['DAPI', 'CD3']);
  expect(predict.arrays).toEqual(server);
  expect(server.DAPI!.length).toBeGreaterThan(1);
  expect(server.DAPI![0]!.nonzero).toBeGreaterThan(0);
  // What it reports as used is what the job reserved when it answered the submission.
  expect(predict.creditsUsed).toBeGreaterThan(0);
});

test('uploads.upload_file: 200, gcsPath, integer size from the header', () => {
  expect(report.upload).toMatchObject({ widthPx: 1101, heightPx: 1101 });
  expect(report.upload.gcsPath).toContain(`/samples/${report.upload.id}/`);
  expect(['deid_running', 'preprocessing', 'ready']).toContain(report.upload.status);
});

test('predict.submit right after the upload, job.stream_events sees every status in order, job.wait', () => {
  expect(report.submit.reservedCredits).toBeGreaterThan(0);
  const statuses = report.events.map((event) => event.status).filter((s, i, all) => s !== all[i - 1]);
  expect(statuses).toEqual([
    'queued',
    'dispatching',
    'preprocessing',
    'running',
    'postprocessing',
    'completed',
  ]);
  for (const event of report.events) expect(event.id).toBe(report.submit.jobId);
  const last = report.events.at(-1)!;
  expect(last.resultGcsPath).toBe(`${report.results.resultBasePath}/`);
  expect(report.wait).toEqual({ status: 'completed', progress: 1, resultsAvailable: true });
});

test('predict.estimate: 409 before ready (or the price), then the exact price the job settled at', async () => {
  if (report.earlyEstimate.status !== undefined) {
    expect(report.earlyEstimate).toEqual({ status: 409, error: 'sample_not_ready' });
  }
  const { estimate, jobsGet } = report;
  expect(estimate.markerCount).toBe(1);
  expect(estimate.estimatedCredits).toBe(estimate.patchCount);
  expect(jobsGet).toEqual({
    id: report.submit.jobId,
    status: 'completed',
    reservedCredits: estimate.estimatedCredits,
    markers: ['CD3'],
    completedAt: true,
  });
  // Every reservation settled: nothing pending, the balance down by what the two jobs spent.
  const after = await creditSummary(stack.sql, tenant.organizationId);
  expect(after.pending).toBe(0);
  expect(estimate.orgPending).toBe(0);
  expect(estimate.orgBalance).toBe(after.balance);
  const [spent] = await stack.sql<{ total: number }[]>`
    SELECT -sum(balance_delta)::int AS total FROM credit_ledger
    WHERE organization_id = ${tenant.organizationId} AND kind = 'spend'`;
  expect(after.balance).toBe(CREDITS - spent!.total);
});

test('job.results, multiscale_names, download_to', () => {
  const { results, downloadTo } = report;
  expect(results.multiscaleNames).toEqual(['CD3']);
  expect(results.withHe).toEqual(['CD3']);
  expect(results.resultUrl).toMatch(/^http/);
  expect(downloadTo.path).toBe(path.join(scratch, 'lower'));
  expect(Object.keys(downloadTo.arrays)).toEqual(['CD3']);
  expect(downloadTo.arrays.CD3!.length).toBeGreaterThan(1);
  expect(downloadTo.arrays.CD3![0]).toMatchObject({
    shape: [1, expect.any(Number), expect.any(Number)],
    dtype: 'uint16',
  });
});

test('samples.set_retention, set_retention_bulk with pin, restore', () => {
  const { setRetention, setRetentionBulk } = report;
  expect(setRetention.date).toMatchObject({
    expiresAt: '2031-01-01T00:00:00.000Z',
    expiresAtSource: 'custom',
  });
  expect(setRetention.pin).toMatchObject({ expiresAt: null });
  expect(setRetention.orgDefault.expiresAtSource).toBe('org_default');
  expect(setRetentionBulk).toMatchObject({ updated: 2 });
  expect(report.trashed).toBe(200);
  expect(report.restore).toMatchObject({ trashedAt: null });
  expect(report.afterRestore.trashedAt).toBeNull();
});

test('NGFF readers open the store with the top-level multiscales copy present', async () => {
  const store = path.join(stack.fsRoot, report.predict.resultBasePath);
  const read = await runPythonJson<{
    top: string[];
    ome: string[];
    members: string[];
    first: string;
    levels: number;
  }>(
    `
import json, sys
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
root = zarr.open_group(sys.argv[1], mode='r')
node = list(Reader(parse_url(sys.argv[1]))())[0]
print(json.dumps({
    'top': [m['name'] for m in root.attrs['multiscales']],
    'ome': [m['name'] for m in root.attrs['ome']['multiscales']],
    'members': sorted(root['markers'].group_keys()),
    'first': node.metadata['name'],
    'levels': len(node.data),
}))
`,
    [store],
  );
  expect(read.top).toEqual(read.ome);
  expect(read.members).toEqual([...read.ome].sort());
  // ome-zarr-py reads the root as NGFF 0.5 (its first multiscale), as without the copy.
  expect(read.first).toBe(read.ome[0]);
  expect(read.levels).toBeGreaterThan(1);
});
