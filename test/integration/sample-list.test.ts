import { runAdminCommand } from '../../cli/admin-commands';
import { apiClient } from '../support/http';
import { insertJob, insertSample } from '../support/samples';
import { createTenant, startStack, type Tenant, type TestStack } from '../support/stack';

let stack: TestStack;
let tenant: Tenant;
let call: ReturnType<typeof apiClient>;
const ids: Record<string, string> = {};
const fieldIds: Record<string, string> = {};
const day = (offset: number) => new Date(Date.UTC(2026, 5, 10 + offset, 12));

/** One organization with a small, known set of samples covering every facet. */
beforeAll(async () => {
  stack = await startStack();
  tenant = await createTenant(stack.sql);
  call = apiClient(stack.api, tenant.apiKey);
  const org = tenant.organizationId;
  for (const [key, type, options] of [
    ['site', 'text', undefined],
    ['grade', 'number', undefined],
    ['collected', 'date', undefined],
    ['consented', 'boolean', undefined],
    ['stain', 'select', 'HE,IHC'],
    ['panels', 'multi_select', 'a,b,c'],
  ] as const) {
    const field = await runAdminCommand(stack.sql, [
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
    fieldIds[key] = String(field.fieldId);
  }
  const make = async (key: string, input: Omit<Parameters<typeof insertSample>[1], 'organizationId'>) => {
    ids[key] = await insertSample(stack.sql, { organizationId: org, ...input });
  };
  await make('lungReady', {
    filename: 'lung_01.svs',
    name: 'Lung Case 100%',
    status: 'ready',
    createdAt: day(0),
  });
  await make('lungPre', { filename: 'LUNG_02.svs', status: 'preprocessing', createdAt: day(1) });
  await make('breast', { filename: 'breast.svs', name: 'Mamma', status: 'ready', createdAt: day(2) });
  await make('failed', { filename: 'bad.svs', status: 'upload_failed', createdAt: day(3) });
  await make('uploading', { filename: 'new_file.svs', status: 'uploading', createdAt: day(4) });
  await make('trashed', { filename: 'lung_trash.svs', status: 'ready', createdAt: day(5) });
  await stack.sql`UPDATE samples SET trashed_at = now() WHERE id = ${ids.trashed!}`;
  await insertJob(stack.sql, {
    organizationId: org,
    sampleId: ids.breast!,
    status: 'running',
    markers: ['CD3', 'CD8'],
  });
  await insertJob(stack.sql, {
    organizationId: org,
    sampleId: ids.lungPre!,
    status: 'completed',
    markers: ['CD3'],
  });
  const patch = (id: string, fields: Record<string, unknown>) => call('PATCH', `/samples/${id}`, { fields });
  await patch(ids.lungReady!, {
    tags: ['tumor', 'her2'],
    site: 'Upper lobe',
    grade: 2,
    collected: '2026-01-15',
    consented: true,
    stain: 'HE',
    panels: ['a', 'b'],
  });
  await patch(ids.lungPre!, { tags: ['tumor'], site: 'lower lobe', grade: 3, stain: 'IHC', panels: ['c'] });
  await patch(ids.breast!, { grade: 1, consented: false });
  // A sample of another organization never appears.
  const other = await createTenant(stack.sql);
  await insertSample(stack.sql, { organizationId: other.organizationId, filename: 'lung_foreign.svs' });
});
afterAll(async () => {
  await stack?.close();
});

async function listIds(query: string): Promise<string[]> {
  const response = await call('GET', `/samples${query}`);
  expect(`${query} ${response.status} ${response.json.message ?? ''}`).toBe(`${query} 200 `);
  return response.json.items.map((item: { id: string }) => item.id);
}
const names = (...keys: string[]) => keys.map((key) => ids[key]);
const field = (key: string, op: string, value?: unknown) =>
  `field=${encodeURIComponent(`${fieldIds[key]}:${op}${value === undefined ? '' : `:${JSON.stringify(value)}`}`)}`;
const tagsField = (op: string, value?: string) =>
  `field=${encodeURIComponent(`00000000-0000-4000-8000-000000000001:${op}${value === undefined ? '' : `:${JSON.stringify(value)}`}`)}`;

describe('GET /samples', () => {
  test('newest first, owned and active only, items with every field', async () => {
    expect(await listIds('')).toEqual(names('uploading', 'failed', 'breast', 'lungPre', 'lungReady'));
    const page = (await call('GET', '/samples?limit=1')).json;
    expect(Object.keys(page).sort()).toEqual(['appUrl', 'items', 'nextCursor']);
    expect(page.items[0]).toEqual({
      ownership: 'mine',
      id: ids.uploading,
      name: null,
      filename: 'new_file.svs',
      status: 'uploading',
      fileSize: '1000',
      fields: { tags: [], public: false },
      createdAt: day(4).toISOString(),
      appUrl: `https://app.example.test/samples/${ids.uploading}`,
    });
  });

  test('cursor pages are not bound to the page size', async () => {
    const first = (await call('GET', '/samples?limit=2')).json;
    expect(first.items.map((i: { id: string }) => i.id)).toEqual(names('uploading', 'failed'));
    const rest = await listIds(`?limit=10&cursor=${encodeURIComponent(first.nextCursor)}`);
    expect(rest).toEqual(names('breast', 'lungPre', 'lungReady'));
    expect((await call('GET', '/samples?limit=5')).json.nextCursor).toBeNull();
  });

  test('q: case-insensitive substring of display name or filename, LIKE characters literal', async () => {
    expect(await listIds('?q=LUNG')).toEqual(names('lungPre', 'lungReady'));
    expect(await listIds('?q=mamma')).toEqual(names('breast'));
    expect(await listIds('?q=100%25')).toEqual(names('lungReady'));
    expect(await listIds('?q=_')).toEqual(names('uploading', 'lungPre', 'lungReady'));
    // A match never spans the display name and the filename.
    expect(await listIds(`?q=${encodeURIComponent('100% lung')}`)).toEqual([]);
  });

  test('uploaded_from and uploaded_to: inclusive UTC days', async () => {
    expect(await listIds('?uploaded_from=2026-06-11&uploaded_to=2026-06-12')).toEqual(
      names('breast', 'lungPre'),
    );
    expect(await listIds('?uploaded_to=2026-06-10')).toEqual(names('lungReady'));
    expect(await listIds('?uploaded_from=0001-01-01&uploaded_to=9999-12-31')).toHaveLength(5);
  });

  test('status values compose with OR', async () => {
    expect(await listIds('?status=ready')).toEqual(names('breast', 'lungReady'));
    expect(await listIds('?status=ready&status=upload_failed')).toEqual(
      names('failed', 'breast', 'lungReady'),
    );
  });

  test('workflow values compose with OR', async () => {
    expect(await listIds('?workflow=ready_no_job')).toEqual(names('lungReady'));
    expect(await listIds('?workflow=in_flight')).toEqual(names('breast'));
    expect(await listIds('?workflow=has_results')).toEqual(names('lungPre'));
    expect(await listIds('?workflow=in_flight&workflow=has_results')).toEqual(names('breast', 'lungPre'));
  });

  test('marker clauses compose with AND', async () => {
    expect(await listIds('?marker=CD3:requested')).toEqual(names('breast', 'lungPre'));
    expect(await listIds('?marker=CD3:completed')).toEqual(names('lungPre'));
    expect(await listIds('?marker=CD3:requested&marker=CD8:requested')).toEqual(names('breast'));
    expect(await listIds('?marker=CD8:completed')).toEqual([]);
  });

  test('field clauses of every type and operator; repeated clauses compose with AND', async () => {
    expect(await listIds(`?${field('site', 'eq', 'Upper lobe')}`)).toEqual(names('lungReady'));
    expect(await listIds(`?${field('site', 'contains', 'LOBE')}`)).toEqual(names('lungPre', 'lungReady'));
    expect(await listIds(`?${field('site', 'is_empty')}`)).toEqual(names('uploading', 'failed', 'breast'));
    expect(await listIds(`?${field('grade', 'gte', 2)}`)).toEqual(names('lungPre', 'lungReady'));
    expect(await listIds(`?${field('grade', 'lte', 2)}&${field('grade', 'gte', 2)}`)).toEqual(
      names('lungReady'),
    );
    expect(await listIds(`?${field('collected', 'eq', '2026-01-15')}`)).toEqual(names('lungReady'));
    expect(await listIds(`?${field('collected', 'is_not_empty')}`)).toEqual(names('lungReady'));
    expect(await listIds(`?${field('consented', 'eq', false)}`)).toEqual(names('breast'));
    expect(await listIds(`?${field('stain', 'eq', 'IHC')}`)).toEqual(names('lungPre'));
    expect(await listIds(`?${field('panels', 'contains', 'b')}`)).toEqual(names('lungReady'));
    expect(await listIds(`?${tagsField('contains', 'TUMOR')}`)).toEqual(names('lungPre', 'lungReady'));
    expect(await listIds(`?${tagsField('contains', 'tumor')}&${tagsField('contains', 'her2')}`)).toEqual(
      names('lungReady'),
    );
    expect(await listIds(`?${tagsField('is_empty')}`)).toEqual(names('uploading', 'failed', 'breast'));
    const isPublic = `field=${encodeURIComponent('00000000-0000-4000-8000-000000000002:eq:false')}`;
    expect(await listIds(`?${isPublic}`)).toHaveLength(5);
  });

  test('facets compose with AND, and the page appUrl carries them', async () => {
    const query = `?q=lung&status=ready&status=preprocessing&${tagsField('contains', 'tumor')}&${field('grade', 'gte', 3)}`;
    expect(await listIds(query)).toEqual(names('lungPre'));
    const page = (await call('GET', `/samples${query}`)).json;
    const url = new URL(page.appUrl);
    expect(`${url.origin}${url.pathname}`).toBe('https://app.example.test/samples');
    expect(url.searchParams.getAll('status')).toEqual(['ready', 'preprocessing']);
    expect(url.searchParams.get('q')).toBe('lung');
    expect(url.searchParams.getAll('field')).toHaveLength(2);
  });

  test.each([
    ['the retired tag parameter', '?tag=tumor', 'tag'],
    ['an unknown parameter', '?sort=name', 'sort'],
    ['an unknown status', '?status=deid_running', 'status'],
    ['six statuses', `?${'status=ready&'.repeat(6)}`, 'status'],
    ['an unknown workflow', '?workflow=done', 'workflow'],
    [
      'four workflows',
      '?workflow=in_flight&workflow=in_flight&workflow=in_flight&workflow=in_flight',
      'workflow',
    ],
    ['a malformed marker', '?marker=CD3', 'marker'],
    ['a marker with a comma', '?marker=CD3,CD8:requested', 'marker'],
    ['21 markers', `?${'marker=CD3:requested&'.repeat(21)}`, 'marker'],
    ['a NUL in a marker name', '?marker=CD%003:requested', 'marker'],
    ['a control character in a marker name', '?marker=CD%0A3:completed', 'marker'],
    ['a malformed date', '?uploaded_from=2026-6-1', 'uploaded_from'],
    ['an impossible date', '?uploaded_to=2026-02-30', 'uploaded_to'],
    ['year 0000', '?uploaded_from=0000-01-01', 'uploaded_from'],
    ['from after to', '?uploaded_from=2026-06-12&uploaded_to=2026-06-11', 'uploaded_from'],
    ['q over 200 characters', `?q=${'x'.repeat(201)}`, 'q'],
    ['an empty q', '?q=', 'q'],
    ['a control character in q', '?q=a%0Ab', 'q'],
    ['limit 0', '?limit=0', 'limit'],
    ['limit 101', '?limit=101', 'limit'],
    ['an empty cursor', '?cursor=', 'cursor'],
    ['a forged cursor', '?cursor=abc.def', 'cursor'],
    ['an unknown scope', '?scope=everyone', 'scope'],
    ['a non-q facet under scope=public', '?scope=public&status=ready', 'scope'],
  ])('%s is 400 naming the parameter', async (_name, query, parameter) => {
    const response = await call('GET', `/samples${query}`);
    expect(response.status).toBe(400);
    expect(response.json.error).toBe('invalid_request');
    expect(response.json.message).toContain(parameter);
  });

  test.each([
    ['?status=deid_running', 'status: Invalid option: expected one of "ready"|"preprocessing"|"uploading"'],
    ['?status=ready&status=bogus', 'status: Invalid option: expected one of "ready"|'],
    ['?workflow=done', 'workflow: Invalid option: expected one of "ready_no_job"|"in_flight"|"has_results"'],
    ['?marker=CD3', 'marker: must be NAME:requested or NAME:completed'],
    ['?marker=CD3:requested&marker=CD8', 'marker.1: must be NAME:requested or NAME:completed'],
  ])('%s says what the value should be, given once or repeated', async (query, message) => {
    const response = await call('GET', `/samples${query}`);
    expect(response.status).toBe(400);
    expect(response.json.message).toContain(message);
  });

  test.each([
    [
      'an unknown definition',
      () => `field=${encodeURIComponent('00000000-0000-4000-8000-00000000dead:is_empty')}`,
    ],
    ['an operator the type does not have', () => field('site', 'gte', 'a')],
    ['contains on a number', () => field('grade', 'contains', 1)],
    ['a value of the wrong type', () => field('grade', 'eq', '2')],
    ['a value that is not JSON', () => `field=${encodeURIComponent(`${fieldIds.site}:eq:Upper`)}`],
    ['a missing value', () => field('site', 'eq')],
    ['a value on is_empty', () => `field=${encodeURIComponent(`${fieldIds.site}:is_empty:"x"`)}`],
    ['21 field clauses', () => Array.from({ length: 21 }, () => field('site', 'is_empty')).join('&')],
    ['an impossible date', () => field('collected', 'eq', '2026-02-30')],
    ['year 0000', () => field('collected', 'gte', '0000-01-01')],
    ['a NUL in a text value', () => field('site', 'eq', 'a\u0000b')],
    ['a NUL in a contains value', () => field('site', 'contains', '\u0000')],
    ['a control character in a text value', () => field('site', 'eq', 'a\u0007b')],
    ['a NUL in a select value', () => field('stain', 'eq', 'HE\u0000')],
    ['a NUL in a multi_select value', () => field('panels', 'contains', 'a\u0000')],
    ['a NUL in a tag', () => tagsField('contains', 'tumor\u0000')],
  ])('a field clause with %s is 400', async (_name, clause) => {
    const response = await call('GET', `/samples?${clause()}`);
    expect(response.status).toBe(400);
    expect(response.json.error).toBe('invalid_request');
    expect(response.json.message).toContain('field');
  });

  test('with nothing published, scope=all lists the owned rows and scope=public none of them', async () => {
    // The public cohort itself is tested in public-cohort.test.ts.
    expect(await listIds('?scope=all')).toEqual(await listIds(''));
    expect(await listIds('?scope=public&q=lung')).toEqual([]);
  });

  test('GET /samples/trash lists trashed samples with purgeAt 7 days after trashedAt', async () => {
    const page = (await call('GET', '/samples/trash')).json;
    expect(page.items.map((item: { id: string }) => item.id)).toEqual(names('trashed'));
    const item = page.items[0];
    expect(new Date(item.purgeAt).getTime() - new Date(item.trashedAt).getTime()).toBe(7 * 24 * 3600 * 1000);
  });
});
