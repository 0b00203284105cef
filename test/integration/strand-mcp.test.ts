/** @jest-environment ./test/support/onnx-environment.js */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runPythonJson } from '../support/python';
import { createTenant, startStack, type TestStack } from '../support/stack';
import { SHARED_WSI } from '../support/uploads';

/**
 * Strand AI's MCP server (`strand-mcp` 0.1.0 from PyPI, unchanged), started over stdio and driven
 * with the `mcp` package's ClientSession as an agent would. Its `set_sample_mpp` and `cancel_job`
 * call SDK methods that strand-sdk 0.2.0 lacks, so they are left out.
 */
let stack: TestStack;
let scratch: string;

interface Report {
  tools: string[];
  upload: { id: string; gcs_path: string; width_px: number; height_px: number; status: string };
  estimate: { patch_count: number; marker_count: number; estimated_credits: number };
  estimateRefusals: string[];
  submit: { job_id: string; reserved_credits: number };
  getJob: { id: string; status: string; markers: string[] };
  wait: {
    id: string;
    status: string;
    progress: number;
    results_available: boolean;
    reserved_credits: number;
  };
  download: { path: string };
  arrays: Record<string, { shape: number[]; nonzero: number }>;
}

beforeAll(async () => {
  stack = await startStack({ worker: true });
  scratch = await mkdtemp(path.join(os.tmpdir(), 'strand-mcp-'));
}, 120_000);
afterAll(async () => {
  await stack?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

test('an agent uploads, estimates, submits, follows and downloads through strand-mcp', async () => {
  const tenant = await createTenant(stack.sql, { credits: 1_000_000 });
  const report = await runPythonJson<Report>(
    readFileSync(path.join(__dirname, 'strand', 'mcp_flows.py'), 'utf8'),
    // A small slide (1101 px a side): the agent's flow is the same for any, and quick on this one.
    [path.join(SHARED_WSI, 'OS-1-detail.ome.tif'), scratch],
    { STRAND_API_KEY: tenant.apiKey, STRAND_BASE_URL: stack.baseUrl },
  );
  expect(report.tools).toEqual(
    expect.arrayContaining([
      'upload_slide',
      'estimate_run',
      'submit_run',
      'get_job',
      'wait_for_job',
      'download_results',
    ]),
  );
  expect(report.upload).toMatchObject({ width_px: 1101, height_px: 1101 });
  expect(report.upload.gcs_path).toContain(report.upload.id);
  // Before the sample is ready the estimate is refused with the contract's reason, nothing else.
  for (const refusal of report.estimateRefusals) expect(refusal).toMatch(/^error: StrandError: .*ready/);
  expect(report.estimate.marker_count).toBe(2);
  expect(report.estimate.estimated_credits).toBe(report.estimate.patch_count * 2);
  // Estimated on the ready sample: the submission reserves exactly that.
  expect(report.submit.reserved_credits).toBe(report.estimate.estimated_credits);
  expect(report.getJob).toMatchObject({ id: report.submit.job_id, markers: ['CD3', 'CD8'] });
  expect(report.wait).toMatchObject({
    id: report.submit.job_id,
    status: 'completed',
    progress: 1,
    results_available: true,
    reserved_credits: report.estimate.estimated_credits,
  });
  expect(report.download.path).toBe(scratch);
  for (const name of ['CD3', 'CD8']) {
    expect(report.arrays[name]!.shape).toHaveLength(3);
    expect(report.arrays[name]!.nonzero).toBeGreaterThan(0);
  }
}, 1_200_000);
