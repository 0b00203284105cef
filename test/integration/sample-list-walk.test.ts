import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { runAdminCommand } from '../../cli/admin-commands';
import { fieldValuesOf, replaceTags, type StoredFieldValue, writeFieldValue } from '../../db/sample-fields';
import { type FieldClause, listSamples, type SampleListFilter } from '../../db/sample-list';
import type { PagePosition } from '../../db/samples';
import type { FieldDefinition } from '../../schemas/samples';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { insertJob, insertSample } from '../support/samples';
import { createTenant, type Tenant } from '../support/stack';

/**
 * The list's walk of the newest rows (db/sample-list.ts) against its reference, the plain
 * query alone (`walk` 0): every filter, every page size and several walk lengths give the same
 * pages, including walks that end inside a page and a run of samples with one timestamp.
 */
let db: TestDatabase;
let tenant: Tenant;
const definitions: Record<string, FieldDefinition> = {};

/** A small deterministic generator (Park-Miller), so that a failure names data that can be rebuilt. */
function generator(seed: number) {
  let state = seed;
  return (n: number) => {
    state = (state * 48_271) % 2_147_483_647;
    return Math.floor((state / 2_147_483_647) * n);
  };
}

async function define(key: string, type: string, options?: string) {
  const field = await runAdminCommand(db.sql, [
    'field',
    'create',
    '--org',
    tenant.organizationId,
    '--key',
    key,
    '--label',
    key,
    '--type',
    type,
    ...(options ? ['--options', options] : []),
  ]);
  const [definition] = await db.sql<FieldDefinition[]>`
    SELECT id, key, label, value_type AS "valueType", origin, storage, writable, options
    FROM sample_field_definitions WHERE id = ${String(field.fieldId)}`;
  definitions[key] = definition!;
}

beforeAll(async () => {
  db = await createTestDatabase();
  tenant = await createTenant(db.sql);
  const other = await createTenant(db.sql);
  await define('site', 'text');
  await define('grade', 'number');
  await define('collected', 'date');
  await define('consented', 'boolean');
  await define('stain', 'select', 'HE,IHC,PAS');
  await define('panels', 'multi_select', 'a,b,c');
  const random = generator(7);
  const base = Date.UTC(2026, 0, 1);
  for (let i = 0; i < 240; i++) {
    // Every fifth sample shares its timestamp with the one before: the keyset's id decides.
    const createdAt = new Date(base + (i - (i % 5 === 1 ? 1 : 0)) * 20 * 60_000);
    const organizationId = random(6) === 0 ? other.organizationId : tenant.organizationId;
    const id = await insertSample(db.sql, {
      organizationId,
      filename: `slide_${i}.svs`,
      name: random(3) === 0 ? `Case ${i} ${['lung', 'breast', 'colon'][random(3)]}` : null,
      status: (['ready', 'ready', 'preprocessing', 'uploading', 'upload_failed'] as const)[random(5)],
      createdAt,
    });
    if (random(10) === 0) await db.sql`UPDATE samples SET trashed_at = now() WHERE id = ${id}`;
    if (random(8) === 0) await insertJob(db.sql, { organizationId, sampleId: id, status: 'completed' });
    if (organizationId !== tenant.organizationId) continue;
    const values: [string, StoredFieldValue][] = [
      ['site', { kind: 'text', value: ['Upper lobe', 'lower lobe', 'skin'][random(3)]! }],
      ['grade', { kind: 'number', value: random(5) + 0.5 * random(2) }],
      ['collected', { kind: 'date', value: `2025-0${1 + random(9)}-1${random(10)}` }],
      ['consented', { kind: 'boolean', value: random(2) === 0 }],
      ['stain', { kind: 'text', value: ['HE', 'IHC', 'PAS'][random(3)]! }],
      ['panels', { kind: 'options', value: [['a'], ['a', 'b'], ['c']][random(3)]! }],
    ];
    for (const [key, value] of values) {
      if (random(4) === 0) continue;
      await writeFieldValue(db.sql, { sampleId: id, definitionId: definitions[key]!.id, value });
    }
    if (random(3) === 0) await replaceTags(db.sql, id, random(2) ? ['tumor'] : ['tumor', 'her2']);
  }
});
afterAll(async () => {
  await db?.drop();
});

function clause(
  key: string,
  operator: FieldClause['operator'],
  value?: string | number | boolean,
): FieldClause {
  return { definition: definitions[key]!, operator, value };
}

const TAGS = { id: '00000000-0000-4000-8000-000000000001', valueType: 'tags', storage: 'tag_table' } as const;

/** Built when the tests run, after the definitions exist. */
const filters: [string, () => Omit<SampleListFilter, 'organizationId'>][] = [
  ['no facet', () => ({})],
  ['q common', () => ({ q: 'slide_1' })],
  ['q rare', () => ({ q: 'case 7' })],
  ['q none', () => ({ q: 'nothing' })],
  ['status', () => ({ statuses: ['ready'] })],
  ['statuses', () => ({ statuses: ['uploading', 'upload_failed'] })],
  ['upload dates', () => ({ uploadedFrom: '2026-01-02', uploadedTo: '2026-01-02' })],
  ['workflow', () => ({ workflows: ['has_results', 'ready_no_job'] })],
  ['marker', () => ({ markers: [{ name: 'CD3', state: 'completed' }] })],
  ['text eq', () => ({ fields: [clause('site', 'eq', 'Upper lobe')] })],
  ['text contains', () => ({ fields: [clause('site', 'contains', 'LOBE')] })],
  ['text is_empty', () => ({ fields: [clause('site', 'is_empty')] })],
  ['number gte', () => ({ fields: [clause('grade', 'gte', 2.5)] })],
  ['number eq and lte', () => ({ fields: [clause('grade', 'eq', 3), clause('grade', 'lte', 3)] })],
  ['date lte', () => ({ fields: [clause('collected', 'lte', '2025-04-15')] })],
  ['date eq', () => ({ fields: [clause('collected', 'eq', '2025-03-13')] })],
  ['boolean', () => ({ fields: [clause('consented', 'eq', false)] })],
  ['select', () => ({ fields: [clause('stain', 'eq', 'PAS')] })],
  ['multi_select', () => ({ fields: [clause('panels', 'contains', 'b')] })],
  ['multi_select is_not_empty', () => ({ fields: [clause('panels', 'is_not_empty')] })],
  ['tags', () => ({ fields: [{ definition: TAGS, operator: 'contains', value: 'her2' }] })],
  [
    'q, status and two fields',
    () => ({
      q: 'case',
      statuses: ['ready', 'preprocessing'],
      fields: [clause('grade', 'gte', 1), clause('stain', 'eq', 'HE')],
    }),
  ],
];

/** Every page of a filter, as ids, with a page size and a walk length. */
async function allPages(filter: SampleListFilter, limit: number, walk: number): Promise<string[][]> {
  const pages: string[][] = [];
  let after: PagePosition | undefined;
  for (;;) {
    const rows = await listSamples(db.sql, filter, { limit, after }, walk);
    pages.push(rows.map((row) => row.id));
    if (rows.length < limit) return pages;
    after = rows.at(-1)!.position;
  }
}

describe('the walk of the newest rows gives the plain query pages', () => {
  test.each(filters)('%s', async (_name, facets) => {
    const filter = { organizationId: tenant.organizationId, ...facets() };
    for (const limit of [5, 49]) {
      const reference = await allPages(filter, limit, 0);
      for (const walk of [1, 3, 20, 1000]) {
        expect({ limit, walk, pages: await allPages(filter, limit, walk) }).toEqual({
          limit,
          walk,
          pages: reference,
        });
      }
    }
  });

  test('the filters are not vacuous: most match some rows and none matches every row', async () => {
    const counts = await Promise.all(
      filters.map(async ([, facets]) => {
        const rows = await listSamples(
          db.sql,
          { organizationId: tenant.organizationId, ...facets() },
          { limit: 1000 },
          0,
        );
        return rows.length;
      }),
    );
    const all = counts[0]!;
    expect(all).toBeGreaterThan(100);
    const vacuous = filters.filter((_, i) => counts[i] === 0 || counts[i] === all).map(([name]) => name);
    expect(vacuous).toEqual(['no facet', 'q none']);
  });
});

describe('field values on the sample row', () => {
  test('each type reads back as written; null clears; a retired definition is hidden, its key reusable', async () => {
    const id = await insertSample(db.sql, { organizationId: tenant.organizationId });
    const write = (key: string, value: StoredFieldValue | null) =>
      writeFieldValue(db.sql, { sampleId: id, definitionId: definitions[key]!.id, value });
    await write('site', { kind: 'text', value: 'a "quoted" \\ value' });
    await write('grade', { kind: 'number', value: 0.1 });
    await write('collected', { kind: 'date', value: '0001-02-03' });
    await write('consented', { kind: 'boolean', value: false });
    await write('panels', { kind: 'options', value: ['a', 'c'] });
    expect((await fieldValuesOf(db.sql, [id])).get(id)).toEqual({
      tags: [],
      public: false,
      site: 'a "quoted" \\ value',
      grade: 0.1,
      collected: '0001-02-03',
      consented: false,
      panels: ['a', 'c'],
    });
    await write('grade', { kind: 'number', value: -1e-7 });
    await write('site', null);
    const fields = (await fieldValuesOf(db.sql, [id])).get(id)!;
    expect(fields.grade).toBe(-1e-7);
    expect('site' in fields).toBe(false);
    const filter = (clauses: FieldClause[]) =>
      listSamples(db.sql, { organizationId: tenant.organizationId, fields: clauses }, { limit: 1000 });
    expect((await filter([clause('grade', 'eq', -1e-7)])).map((row) => row.id)).toEqual([id]);
    expect((await filter([clause('collected', 'lte', '0001-02-03')])).map((row) => row.id)).toEqual([id]);

    await runAdminCommand(db.sql, ['field', 'retire', '--org', tenant.organizationId, '--key', 'consented']);
    expect('consented' in (await fieldValuesOf(db.sql, [id])).get(id)!).toBe(false);
    await define('consented', 'boolean');
    expect('consented' in (await fieldValuesOf(db.sql, [id])).get(id)!).toBe(false);
    expect(await filter([clause('consented', 'is_not_empty')])).toEqual([]);
  });
});

describe('migration 0015', () => {
  test('moves every typed value of sample_field_values onto its sample', async () => {
    const fresh = await createTestDatabase({ empty: true });
    try {
      const dir = path.join(__dirname, '..', '..', 'db', 'migrations');
      const files = (await readdir(dir)).filter((file) => file.endsWith('.sql')).sort();
      const apply = async (file: string) => fresh.sql.unsafe(await readFile(path.join(dir, file), 'utf8'));
      for (const file of files.filter((name) => name < '0015')) await apply(file);
      const org = await createTenant(fresh.sql);
      const id = await insertSample(fresh.sql, { organizationId: org.organizationId });
      const empty = await insertSample(fresh.sql, { organizationId: org.organizationId });
      const [text, number, date, flag, options] = await fresh.sql<{ id: string }[]>`
        INSERT INTO sample_field_definitions (organization_id, key, label, value_type, origin, storage, writable)
        SELECT ${org.organizationId}, k, k, t, 'organization', 'value_table', true
        FROM unnest(ARRAY['t','n','d','b','m'], ARRAY['text','number','date','boolean','multi_select']) AS x (k, t)
        RETURNING id`;
      await fresh.sql`
        INSERT INTO sample_field_values (sample_id, definition_id, value_text, value_number, value_date, value_boolean, value_options)
        VALUES (${id}, ${text!.id}, 'x', NULL, NULL, NULL, NULL), (${id}, ${number!.id}, NULL, 2.5, NULL, NULL, NULL),
          (${id}, ${date!.id}, NULL, NULL, '2024-02-29', NULL, NULL), (${id}, ${flag!.id}, NULL, NULL, NULL, true, NULL),
          (${id}, ${options!.id}, NULL, NULL, NULL, NULL, ARRAY['a','b'])`;
      for (const file of files.filter((name) => name >= '0015')) await apply(file);
      const rows = await fresh.sql<{ id: string; fieldValues: Record<string, unknown> }[]>`
        SELECT id, field_values AS "fieldValues" FROM samples`;
      expect(Object.fromEntries(rows.map((row) => [row.id, row.fieldValues]))).toEqual({
        [id]: {
          [text!.id]: 'x',
          [number!.id]: 2.5,
          [date!.id]: '2024-02-29',
          [flag!.id]: true,
          [options!.id]: ['a', 'b'],
        },
        [empty]: {},
      });
    } finally {
      await fresh.drop();
    }
  });
});
