import { Client, Connection } from '@temporalio/client';
import { createWorkflowEngine, type WorkflowEngine } from '../../api/workflow-engine';
import { runAdminCommand } from '../../cli/admin-commands';
import { SampleDetail } from '../../schemas/samples';
import { workflowIds } from '../../schemas/temporal';
import { apiClient } from '../support/http';
import { insertJob, insertSample } from '../support/samples';
import { startStack, type TestStack } from '../support/stack';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let recountUnreachable = false;
let deadEngine: WorkflowEngine;

beforeAll(async () => {
  // A client whose server does not exist: the workflow engine made unreachable, for real.
  // No retry interceptor, so a call gives up at once instead of backing off for 20 s.
  deadEngine = createWorkflowEngine(
    new Client({
      connection: Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 500, interceptors: [] }),
    }),
    {
      taskQueuePrefix: 'none',
    },
  );
  stack = await startStack({
    worker: true,
    workflows: (real) => ({
      ...real,
      startRecount: (sampleId) =>
        recountUnreachable ? deadEngine.startRecount(sampleId) : real.startRecount(sampleId),
    }),
  });
  call = apiClient(stack.api, stack.tenant.apiKey);
});
afterAll(async () => {
  await stack?.close();
});

const orgId = () => stack.tenant.organizationId;
const sample = (extra: Parameters<typeof insertSample>[1] extends infer T ? Partial<T> : never = {}) =>
  insertSample(stack.sql, { organizationId: orgId(), createdBy: stack.tenant.userId, ...extra });

describe('owned sample detail', () => {
  test('every field of the contract and no other', async () => {
    const id = await sample({ filename: 'case-7.svs', mppCalibrated: 0.5 });
    const response = await call('GET', `/samples/${id}`);
    expect(response.status).toBe(200);
    expect(SampleDetail.safeParse(response.json).success).toBe(true);
    expect(Object.keys(response.json).sort()).toEqual(
      [
        'ownership',
        'id',
        'appUrl',
        'name',
        'filename',
        'status',
        'fileSize',
        'widthPx',
        'heightPx',
        'mpp',
        'fields',
        'tags',
        'createdAt',
        'expiresAt',
        'expiresAtSource',
        'expiresInDays',
        'willExpire',
        'trashedAt',
        'jobs',
        'jobCount',
        'segmentation',
      ].sort(),
    );
    expect(response.json).toMatchObject({
      ownership: 'mine',
      id,
      appUrl: `https://app.example.test/samples/${id}`,
      name: null,
      filename: 'case-7.svs',
      fileSize: '1000',
      mpp: 0.5,
      fields: { tags: [], public: false },
      tags: [],
      expiresAt: null,
      expiresAtSource: null,
      expiresInDays: null,
      willExpire: false,
      trashedAt: null,
      jobs: [],
      jobCount: 0,
      segmentation: { status: 'not_started', retryable: false, creditCost: 0, job: null, layer: null },
    });
  });

  test('mpp: the override first, then the calibrated value', async () => {
    const id = await sample({ mppCalibrated: 0.5 });
    expect((await call('PATCH', `/samples/${id}`, { mpp: 0.25 })).json.mpp).toBe(0.25);
    const uncalibrated = await sample({ mppCalibrated: null });
    expect((await call('GET', `/samples/${uncalibrated}`)).json.mpp).toBeNull();
  });

  test('expiresInDays counts whole days and is clamped at 0 before the sweep', async () => {
    const soon = await sample({ expiresAt: new Date(Date.now() + 3.5 * 24 * 3600 * 1000) });
    expect((await call('GET', `/samples/${soon}`)).json).toMatchObject({
      expiresInDays: 3,
      willExpire: true,
      expiresAtSource: 'custom',
    });
    const past = await sample({ expiresAt: new Date(Date.now() - 3600 * 1000) });
    expect((await call('GET', `/samples/${past}`)).json).toMatchObject({ expiresInDays: 0, trashedAt: null });
  });

  test('jobs: the 50 newest, jobCount uncapped', async () => {
    const id = await sample();
    const base = Date.now() - 3600 * 1000;
    const jobIds: string[] = [];
    for (let i = 0; i < 55; i++) {
      jobIds.push(
        await insertJob(stack.sql, {
          organizationId: orgId(),
          sampleId: id,
          createdAt: new Date(base + i * 1000),
        }),
      );
    }
    const detail = (await call('GET', `/samples/${id}`)).json;
    expect(detail.jobCount).toBe(55);
    expect(detail.jobs).toHaveLength(50);
    expect(detail.jobs[0].id).toBe(jobIds[54]);
    expect(detail.jobs[49].id).toBe(jobIds[5]);
    expect(Object.keys(detail.jobs[0]).sort()).toEqual(
      [
        'id',
        'status',
        'progress',
        'reservedCredits',
        'markers',
        'createdAt',
        'startedAt',
        'completedAt',
        'errorMessage',
        'resultsAvailable',
      ].sort(),
    );
  });

  test('a sample of another organization is 404', async () => {
    const other = await runAdminCommand(stack.sql, ['org', 'create', '--name', 'Other']);
    const foreign = await insertSample(stack.sql, { organizationId: String(other.organizationId) });
    expect((await call('GET', `/samples/${foreign}`)).status).toBe(404);
    expect((await call('PATCH', `/samples/${foreign}`, { name: 'x' })).status).toBe(404);
  });
});

describe('PATCH /samples/{id}', () => {
  test('name: trimmed; null or empty reverts to the filename; NUL and over 200 are 422', async () => {
    const id = await sample();
    expect((await call('PATCH', `/samples/${id}`, { name: '  Biopsy 3  ' })).json.name).toBe('Biopsy 3');
    expect((await call('PATCH', `/samples/${id}`, { name: '' })).json.name).toBeNull();
    await call('PATCH', `/samples/${id}`, { name: 'again' });
    expect((await call('PATCH', `/samples/${id}`, { name: null })).json.name).toBeNull();
    expect((await call('PATCH', `/samples/${id}`, { name: 'a\u0000b' })).status).toBe(422);
    expect((await call('PATCH', `/samples/${id}`, { name: 'x'.repeat(201) })).status).toBe(422);
    expect((await call('PATCH', `/samples/${id}`, { name: `  ${'x'.repeat(200)}  ` })).status).toBe(200);
  });

  test('400 for not JSON, empty, unknown property and the retired top-level tags', async () => {
    const id = await sample();
    expect((await call('PATCH', `/samples/${id}`, '{', { 'content-type': 'application/json' })).status).toBe(
      400,
    );
    expect((await call('PATCH', `/samples/${id}`, {})).status).toBe(400);
    expect((await call('PATCH', `/samples/${id}`, { colour: 'red' })).status).toBe(400);
    const tags = await call('PATCH', `/samples/${id}`, { tags: ['a'] });
    expect(tags.status).toBe(400);
    expect(tags.json.error).toBe('invalid_request');
  });

  test('tags: the complete set, trimmed, lowercased, deduplicated, sorted', async () => {
    const id = await sample();
    const first = await call('PATCH', `/samples/${id}`, {
      fields: { tags: [' Tumor ', 'tumor', 'HER2+', 'b'] },
    });
    expect(first.json.fields.tags).toEqual(['b', 'her2+', 'tumor']);
    expect(first.json.tags).toEqual(['b', 'her2+', 'tumor']);
    expect((await call('PATCH', `/samples/${id}`, { fields: { tags: ['only'] } })).json.fields.tags).toEqual([
      'only',
    ]);
    expect((await call('PATCH', `/samples/${id}`, { fields: { tags: null } })).json.fields.tags).toEqual([]);
  });

  test.each([
    ['a comma', ['a,b']],
    ['an empty tag', ['  ']],
    ['a tag over 50 characters', ['x'.repeat(51)]],
    ['NUL', ['a\u0000']],
    ['51 distinct tags', Array.from({ length: 51 }, (_, i) => `t${i}`)],
    ['over 1000 raw items', Array.from({ length: 1001 }, () => 'same')],
    ['not an array', 'tumor'],
  ])('tags with %s are 422', async (_name, tags) => {
    const id = await sample();
    const response = await call('PATCH', `/samples/${id}`, { fields: { tags } });
    expect(response.status).toBe(422);
    expect(response.json.error).toBe('validation_failed');
  });

  test('1000 raw items that collapse to 50 distinct tags are accepted', async () => {
    const id = await sample();
    const tags = Array.from({ length: 1000 }, (_, i) => `T${i % 50}`);
    expect((await call('PATCH', `/samples/${id}`, { fields: { tags } })).json.fields.tags).toHaveLength(50);
  });

  test('fields.public and the reserved public tag are 403 read_only_field', async () => {
    const id = await sample();
    const isPublic = await call('PATCH', `/samples/${id}`, { fields: { public: true } });
    expect(isPublic.status).toBe(403);
    expect(isPublic.json.error).toBe('read_only_field');
    expect((await call('PATCH', `/samples/${id}`, { fields: { tags: ['Public'] } })).status).toBe(403);
  });

  test('organization fields: typed, checked against options, replaced whole, cleared by null', async () => {
    const org = orgId();
    const create = (key: string, type: string, options?: string) =>
      runAdminCommand(stack.sql, [
        'field',
        'create',
        '--org',
        org,
        '--key',
        key,
        '--label',
        key,
        '--type',
        type,
        ...(options ? ['--options', options] : []),
      ]);
    await create('site', 'text');
    await create('grade', 'number');
    await create('collected', 'date');
    await create('consented', 'boolean');
    await create('stain', 'select', 'HE,IHC');
    await create('panels', 'multi_select', 'a,b,c');
    const id = await sample();
    const written = await call('PATCH', `/samples/${id}`, {
      fields: {
        site: 'Lung',
        grade: 3,
        collected: '2026-01-31',
        consented: true,
        stain: 'HE',
        panels: ['c', 'a', 'c'],
      },
    });
    expect(written.status).toBe(200);
    expect(written.json.fields).toEqual({
      tags: [],
      public: false,
      site: 'Lung',
      grade: 3,
      collected: '2026-01-31',
      consented: true,
      stain: 'HE',
      panels: ['a', 'c'],
    });
    const replaced = await call('PATCH', `/samples/${id}`, { fields: { panels: ['b'], site: null } });
    expect(replaced.json.fields.panels).toEqual(['b']);
    expect(replaced.json.fields.site).toBeUndefined();
    for (const bad of [
      { grade: 'three' },
      { collected: '2026-02-30' },
      { consented: 'yes' },
      { stain: 'PAS' },
      { panels: ['d'] },
      { site: 5 },
      { collected: '0000-01-01' },
    ]) {
      const response = await call('PATCH', `/samples/${id}`, { fields: bad });
      expect(`${JSON.stringify(bad)} ${response.status}`).toBe(`${JSON.stringify(bad)} 422`);
    }
  });

  test('an unknown key inside fields is 400 invalid_request naming it, like an unknown property', async () => {
    const id = await sample();
    const response = await call('PATCH', `/samples/${id}`, { fields: { nosuch: 1 } });
    expect(response.status).toBe(400);
    expect(response.json.error).toBe('invalid_request');
    expect(response.json.message).toContain("'nosuch'");
  });

  test('atomic: one invalid property and nothing is written', async () => {
    const id = await sample();
    await call('PATCH', `/samples/${id}`, { name: 'before', fields: { tags: ['kept'] } });
    const response = await call('PATCH', `/samples/${id}`, {
      name: 'after',
      fields: { tags: ['new'], public: true },
    });
    expect(response.status).toBe(403);
    const mixed = await call('PATCH', `/samples/${id}`, { name: 'after', mpp: { x: 0.25, y: 0.5 } });
    expect(mixed.status).toBe(422);
    expect((await call('GET', `/samples/${id}`)).json).toMatchObject({
      name: 'before',
      fields: { tags: ['kept'] },
    });
  });

  test('atomic after a first write: a field is written, the tags after it are refused, nothing changed', async () => {
    await runAdminCommand(stack.sql, [
      'field',
      'create',
      '--org',
      orgId(),
      '--key',
      'atomic_note',
      '--label',
      'Note',
      '--type',
      'text',
    ]);
    const id = await sample({ mppCalibrated: 0.5 });
    await call('PATCH', `/samples/${id}`, {
      name: 'before',
      fields: { atomic_note: 'before', tags: ['kept'] },
    });
    // Tag sets are checked as they are written, after the field before them: the refusal
    // comes from inside the transaction, after a write that must be rolled back.
    for (const [tags, status] of [
      [['bad,tag'], 422],
      [['public'], 403],
    ] as const) {
      const refused = await call('PATCH', `/samples/${id}`, {
        name: 'after',
        mpp: 0.25,
        fields: { atomic_note: 'after', tags },
      });
      expect(refused.status).toBe(status);
    }
    expect((await call('GET', `/samples/${id}`)).json).toMatchObject({
      name: 'before',
      mpp: 0.5,
      fields: { atomic_note: 'before', tags: ['kept'] },
    });
  });

  test('mpp: a number or equal {x, y} in (0, 100]; anisotropic and out of range are 422', async () => {
    const id = await sample();
    expect((await call('PATCH', `/samples/${id}`, { mpp: { x: 0.5, y: 0.5 } })).json.mpp).toBe(0.5);
    expect((await call('PATCH', `/samples/${id}`, { mpp: 100 })).json.mpp).toBe(100);
    for (const mpp of [0, -1, 100.01, { x: 0.5, y: 0.25 }, { x: 0.5 }, '0.5']) {
      expect((await call('PATCH', `/samples/${id}`, { mpp })).status).toBe(422);
    }
    // Each refusal says what mpp must be.
    const messages = await Promise.all(
      [100.01, { x: 0.5, y: 0.25 }, '0.5'].map(
        async (mpp) => (await call('PATCH', `/samples/${id}`, { mpp })).json.message,
      ),
    );
    expect(messages).toEqual([
      'mpp: Too big: expected number to be <=100',
      'mpp: anisotropic mpp is not supported: x and y must be equal',
      'mpp: must be microns per pixel as a number, or as {"x": N, "y": N} with x equal to y',
    ]);
  });

  test('a supplied mpp on a ready sample enqueues recount-{sampleId}, even if unchanged', async () => {
    const id = await sample({ mppCalibrated: 0.5 });
    expect((await call('PATCH', `/samples/${id}`, { mpp: 0.5 })).status).toBe(200);
    // A handle without a run id always names the newest run of recount-{id}.
    const recount = stack.client.workflow.getHandle(workflowIds.recount(id));
    expect(await recount.result()).toEqual({ patchCount: null });
    const first = (await recount.describe()).runId;
    expect((await call('PATCH', `/samples/${id}`, { mpp: 0.5 })).status).toBe(200);
    const second = (await recount.describe()).runId;
    expect(second).not.toBe(first);
    expect(await recount.result()).toEqual({ patchCount: null });
  });

  test('workflow engine unreachable: 500 recount_enqueue_failed, the update stands; repeating enqueues it', async () => {
    const id = await sample({ mppCalibrated: 0.5 });
    recountUnreachable = true;
    try {
      const failed = await call('PATCH', `/samples/${id}`, { mpp: 0.3, name: 'kept' });
      expect(failed.status).toBe(500);
      expect(failed.json.error).toBe('recount_enqueue_failed');
    } finally {
      recountUnreachable = false;
    }
    expect((await call('GET', `/samples/${id}`)).json).toMatchObject({ mpp: 0.3, name: 'kept' });
    expect((await call('PATCH', `/samples/${id}`, { mpp: 0.3, name: 'kept' })).status).toBe(200);
    expect(await stack.client.workflow.getHandle(workflowIds.recount(id)).result()).toEqual({
      patchCount: null,
    });
  });

  test('a sample not ready is updated without a recount', async () => {
    const id = await sample({ status: 'preprocessing' });
    recountUnreachable = true;
    try {
      expect((await call('PATCH', `/samples/${id}`, { mpp: 0.3 })).status).toBe(200);
    } finally {
      recountUnreachable = false;
    }
  });
});

describe('query parameters', () => {
  test('endpoints that take none refuse an unknown one with 400, naming it, before acting', async () => {
    const id = await sample({ name: 'unchanged' });
    for (const [method, path, body] of [
      ['GET', '/sample-fields?x=1'],
      ['GET', '/markers?x=1'],
      ['GET', `/samples/${id}?x=1`],
      ['PATCH', `/samples/${id}?x=1`, { name: 'changed' }],
      ['DELETE', `/samples/${id}?x=1`],
      ['POST', `/samples/${id}/restore?x=1`],
      ['PATCH', `/samples/${id}/expiration?x=1`, { neverExpire: true }],
      ['PATCH', '/samples/expiration?x=1', { sampleIds: [id], neverExpire: true }],
    ] as const) {
      const response = await call(method, path, body);
      expect(`${method} ${path} ${response.status} ${response.json.error}`).toBe(
        `${method} ${path} 400 invalid_request`,
      );
      expect(response.json.message).toContain("'x'");
    }
    expect((await call('GET', `/samples/${id}`)).json).toMatchObject({
      name: 'unchanged',
      trashedAt: null,
      expiresAtSource: null,
    });
  });
});

describe('catalog', () => {
  test('GET /sample-fields lists tags and public first, then organization fields', async () => {
    const response = await call('GET', '/sample-fields');
    expect(response.json.count).toBe(response.json.fields.length);
    expect(response.json.fields.slice(0, 2)).toEqual([
      {
        id: '00000000-0000-4000-8000-000000000001',
        key: 'tags',
        label: 'Tags',
        valueType: 'tags',
        origin: 'system',
        storage: 'tag_table',
        writable: true,
        options: [],
      },
      {
        id: '00000000-0000-4000-8000-000000000002',
        key: 'public',
        label: 'Public',
        valueType: 'boolean',
        origin: 'system',
        storage: 'column',
        writable: false,
        options: [],
      },
    ]);
    await runAdminCommand(stack.sql, [
      'field',
      'create',
      '--org',
      orgId(),
      '--key',
      'retired_one',
      '--label',
      'R',
      '--type',
      'text',
    ]);
    expect((await call('GET', '/sample-fields')).json.fields.map((f: { key: string }) => f.key)).toContain(
      'retired_one',
    );
    await runAdminCommand(stack.sql, ['field', 'retire', '--org', orgId(), '--key', 'retired_one']);
    expect(
      (await call('GET', '/sample-fields')).json.fields.map((f: { key: string }) => f.key),
    ).not.toContain('retired_one');
  });

  test('GET /markers: the registry catalog narrowed to the entitlement', async () => {
    const full = (await call('GET', '/markers')).json;
    expect(full.fullPanel).toBe(true);
    expect(full.count).toBe(full.markers.length);
    expect(full.markers).toContainEqual({ name: 'CD8', publicPanel: true });
    await stack.sql`UPDATE organizations SET marker_entitlement = ${['CD3', 'CD8', 'Nope']} WHERE id = ${orgId()}`;
    try {
      expect((await call('GET', '/markers')).json).toEqual({
        fullPanel: false,
        count: 2,
        markers: [
          { name: 'CD3', publicPanel: true },
          { name: 'CD8', publicPanel: true },
        ],
      });
    } finally {
      await stack.sql`UPDATE organizations SET marker_entitlement = NULL WHERE id = ${orgId()}`;
    }
  });
});
