import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { workflowIds } from '../../schemas/temporal';
import { resolveKey } from '../../storage';
import { fileKeySegment } from '../../storage/locator';
import { apiClient } from '../support/http';
import { startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadBytes } from '../support/uploads';

/**
 * Filenames that `POST /uploads` accepts but that are no object key as they stand: the
 * filename is kept as data and the slide is stored under a key made from it, so ingest reaches
 * `ready` (before, assembly failed five times with InvalidKey and the sample stayed
 * `deid_running` for good).
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let slide: Buffer;

beforeAll(async () => {
  stack = await startStack({ worker: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  slide = await readFile(path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'));
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

test.each([
  ['a parent-folder name', '..'],
  ['a current-folder name', '.'],
  ['a C0 control character', 'slide\x01.svs'],
  ['a C1 control character (U+0085)', 'slide\u0085.svs'],
  ['255 emoji (a key over 1,024 bytes)', '🧪'.repeat(255)],
])('%s: the upload ingests to ready and keeps its filename', async (_what, filename) => {
  const upload = await uploadBytes(call, slide, { filename });
  const result = await stack.client.workflow.getHandle(workflowIds.ingest(upload.id)).result();
  expect(result).toEqual({ status: 'ready', statusMessage: null });

  const stored = (await call('GET', `/uploads/${upload.id}`)).json;
  expect(stored).toMatchObject({ status: 'ready', filename });
  expect(resolveKey(stored.storagePath)).toBe(stored.storagePath);
  const prefix = `orgs/${stack.tenant.organizationId}/samples/${upload.id}/`;
  expect(stored.storagePath).toBe(`${prefix}deidentified/${fileKeySegment(filename)}`);
  expect(await stack.store.stat(stored.storagePath)).toBeDefined();
  expect((await call('GET', `/samples/${upload.id}`)).json.filename).toBe(filename);
});
