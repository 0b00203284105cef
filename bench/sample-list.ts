import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import postgres from 'postgres';
import { createApp } from '../api/app';
import { createWorkflowEngine } from '../api/workflow-engine';
import { createOrganizationWithOwner } from '../cli/admin-commands';
import { createSql, type Sql } from '../db';
import { migrate } from '../db/migrate';
import { explainListSamples, type FieldClause, type SampleListFilter } from '../db/sample-list';
import type { PagePosition } from '../db/samples';
import { createObjectStore } from '../storage';

/**
 * GET /samples over real HTTP, 20 custom fields per organization, in two databases: 100,000
 * samples in one organization, and 1,000,000 samples across 50 organizations (one of 100,000,
 * 49 of about 18,400, uploads of all of them interleaved in time). For each organization
 * measured: p50/p95 of a faceted call (q + 2 field facets + status) and of paging through 10
 * pages (unfaceted and with a facet), beside an unfaceted first page as the reference; the
 * shared buffers each call's queries touch (EXPLAIN ANALYZE, BUFFERS), and the plans of the
 * heaviest page (most buffers). Run with `npm run bench:sample-list [-- RUNS [100k|1m]]` (100 runs of each call,
 * both databases by default; seeding the 1,000,000 takes minutes).
 */
const FIELDS = 20;
const RUNS = Number(process.argv[2] ?? 100);
const SCALE = process.argv[3];
const PAGES = 10;
const PAGE = 48;

interface Tenant {
  organizationId: string;
  apiKey: string;
  fieldIds: string[];
  samples: number;
}

/** The seeded `field_values` of sample g of an organization whose definition ids are `o.fields`. */
function fieldValuesExpression(): string {
  const value = (i: number) => {
    const hash = `abs(hashtext(g || ':${i}'))`;
    return [
      `'site ' || ${hash} % 500`,
      `(${hash} % 100)::float8`,
      `(ARRAY['alpha','beta','gamma','delta'])[1 + ${hash} % 4]`,
      `to_char(date '2020-01-01' + ${hash} % 2000, 'YYYY-MM-DD')`,
    ][i % 4];
  };
  const pairs = Array.from({ length: FIELDS }, (_, i) => `o.fields[${i + 1}], ${value(i)}`);
  return `jsonb_build_object(${pairs.join(', ')})`;
}

/**
 * The GIN indexes of `samples` are dropped for the load and built again afterwards from their
 * own definitions: one build is many times faster than a million inserts into them.
 */
async function withoutGinIndexes(sql: Sql, load: () => Promise<void>) {
  const indexes = await sql<{ name: string; definition: string }[]>`
    SELECT indexname AS name, indexdef AS definition FROM pg_indexes
    WHERE tablename = 'samples' AND indexdef LIKE '% USING gin %'`;
  for (const index of indexes) await sql`DROP INDEX ${sql(index.name)}`;
  await load();
  await sql.begin(async (tx) => {
    await tx`SET LOCAL maintenance_work_mem = '512MB'`;
    for (const index of indexes) await tx.unsafe(index.definition);
  });
}

/**
 * Organizations with `counts[i]` samples each, seeded in SQL. Within each organization the
 * k-th sample has the same name, status and field values whatever the database, and every
 * organization's uploads span the same time, so organizations interleave on the heap.
 */
async function seed(sql: Sql, counts: number[]): Promise<Tenant[]> {
  const tenants: Tenant[] = [];
  for (const [i, samples] of counts.entries()) {
    const owner = await createOrganizationWithOwner(sql, { name: `bench ${i}`, email: `o${i}@bench.org` });
    tenants.push({ organizationId: owner.organizationId, apiKey: owner.apiKey, fieldIds: [], samples });
  }
  const orgIds = tenants.map((tenant) => tenant.organizationId);
  const definitions = await sql<{ organizationId: string; ids: string[] }[]>`
    WITH created AS (
      INSERT INTO sample_field_definitions (organization_id, key, label, value_type, origin, storage, writable, options)
      SELECT o, 'f' || i, 'Field ' || i, (ARRAY['text','number','select','date'])[1 + i % 4], 'organization',
        'value_table', true, CASE WHEN i % 4 = 2 THEN ARRAY['alpha','beta','gamma','delta'] ELSE '{}' END
      FROM unnest(${orgIds}::uuid[]) o, generate_series(0, ${FIELDS - 1}) i
      RETURNING organization_id, id, key)
    SELECT organization_id AS "organizationId", array_agg(id::text ORDER BY substr(key, 2)::int) AS ids
    FROM created GROUP BY organization_id`;
  for (const row of definitions) {
    tenants.find((tenant) => tenant.organizationId === row.organizationId)!.fieldIds = row.ids;
  }
  const [user] = await sql<{ id: string }[]>`SELECT id FROM users LIMIT 1`;
  await withoutGinIndexes(sql, async () => {
    await sql`
    INSERT INTO samples (organization_id, created_by, filename, name, content_type, file_size, status,
      uploaded_bytes, storage_key, created_at, field_values)
    SELECT o.id, ${user!.id}, 'slide_' || g || '.svs',
      CASE WHEN g % 3 = 0 THEN 'Case ' || g || (ARRAY['lung','breast','colon','skin','liver'])[1 + g % 5] END,
      'image/tiff', 1000000 + g, (ARRAY['ready','ready','ready','preprocessing','uploading'])[1 + g % 5], 0,
      'orgs/x/' || g, now() - make_interval(secs => g * 3700000.0 / o.n + o.idx * 0.001),
      CASE WHEN abs(hashtext(g::text)) % 10 < 8 THEN ${sql.unsafe(fieldValuesExpression())}
      ELSE '{}' END
    FROM (SELECT t.id, t.n, t.idx, d.fields
      FROM unnest(${orgIds}::uuid[], ${counts}::int[]) WITH ORDINALITY t (id, n, idx)
      JOIN (SELECT organization_id, array_agg(id::text ORDER BY substr(key, 2)::int) AS fields
        FROM sample_field_definitions WHERE organization_id IS NOT NULL GROUP BY organization_id) d ON d.organization_id = t.id) o,
      generate_series(1, o.n) g
    ORDER BY 10`;
  });
  await sql`VACUUM ANALYZE samples`;
  return tenants;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function time(run: () => Promise<void>) {
  for (let i = 0; i < 10; i++) await run();
  const samples: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await run();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p95: percentile(samples, 95) };
}

/** The shared buffers (hit + read) of a plan's top node. */
function buffersOf(plan: string): number {
  const match = /Buffers: shared((?: \w+=\d+)+)/.exec(plan);
  if (!match) return 0;
  return [...match[1]!.matchAll(/(hit|read)=(\d+)/g)].reduce((sum, m) => sum + Number(m[2]), 0);
}

async function serve(sql: Sql, connection: Connection) {
  const secret = randomBytes(32).toString('hex');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  server.on(
    'request',
    createApp({
      sql,
      store: createObjectStore({
        backend: 'fs',
        fs: {
          root: path.join(process.env.SPS_TEST_SCRATCH!, 'o'),
          publicBaseUrl: base,
          signingSecret: secret,
        },
      }),
      workflows: createWorkflowEngine(new Client({ connection }), { taskQueuePrefix: 'bench' }),
      logger: pino({ level: 'silent' }),
      settings: {
        publicBaseUrl: base,
        appUrl: base,
        signingSecret: secret,
        limits: {
          ratePerSecond: 1e6,
          rateBurst: 1e6,
          jsonBodyBytes: 1e6,
          uploadMaxBytes: 1e9,
          uploadChunkMaxBytes: 1e8,
          uploadSessionTtlSeconds: 60,
        },
      },
    }),
  );
  return { base, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** One measured call: its query string and the same filter as the list query sees it. */
interface Call {
  label: string;
  query: string;
  filter: SampleListFilter;
  pages: number;
}

function callsOf(tenant: Tenant): Call[] {
  const clause = (index: number, op: FieldClause['operator'], value: string | number) => ({
    query: `field=${encodeURIComponent(`${tenant.fieldIds[index]}:${op}:${JSON.stringify(value)}`)}`,
    clause: {
      definition: {
        id: tenant.fieldIds[index]!,
        valueType: (['text', 'number', 'select', 'date'] as const)[index % 4]!,
        storage: 'value_table' as const,
      },
      operator: op,
      value,
    },
  });
  const organizationId = tenant.organizationId;
  const [grade, stain, site] = [
    clause(1, 'gte', 50),
    clause(2, 'eq', 'beta'),
    clause(0, 'contains', 'site 1'),
  ];
  return [
    { label: 'first page, no facets (reference)', query: '', filter: { organizationId }, pages: 1 },
    {
      label: 'q + 2 field facets + status',
      query: `q=lung&status=ready&${grade.query}&${stain.query}`,
      filter: { organizationId, q: 'lung', statuses: ['ready'], fields: [grade.clause, stain.clause] },
      pages: 1,
    },
    { label: `${PAGES} pages of ${PAGE}, no facets`, query: '', filter: { organizationId }, pages: PAGES },
    {
      label: `${PAGES} pages of ${PAGE}, status=ready + 1 field facet`,
      query: `status=ready&${site.query}`,
      filter: { organizationId, statuses: ['ready'], fields: [site.clause] },
      pages: PAGES,
    },
  ];
}

/** The plans of every query of a call's pages, read through the list query itself. */
async function explainCall(sql: Sql, call: Call) {
  const plans: string[][] = [];
  let after: PagePosition | undefined;
  for (let page = 0; page < call.pages; page++) {
    const { rows, plans: pagePlans } = await explainListSamples(sql, call.filter, { limit: PAGE + 1, after });
    plans.push(pagePlans);
    after = rows[PAGE - 1]?.position;
    if (!after || rows.length <= PAGE) break;
  }
  return plans;
}

async function measure(label: string, sql: Sql, connection: Connection, tenants: Tenant[]) {
  const server = await serve(sql, connection);
  const table: Record<string, string | number>[] = [];
  let heaviest = { buffers: -1, title: '', plans: [] as string[] };
  for (const tenant of tenants) {
    const get = async (query: string) => {
      const response = await fetch(`${server.base}/api/v1/samples${query ? `?${query}` : ''}`, {
        headers: { authorization: `Bearer ${tenant.apiKey}` },
      });
      if (!response.ok) throw new Error(`${query}: HTTP ${response.status} ${await response.text()}`);
      return (await response.json()) as { items: unknown[]; nextCursor: string | null };
    };
    for (const call of callsOf(tenant)) {
      const timing = await time(async () => {
        let cursor: string | null = null;
        for (let page = 0; page < call.pages; page++) {
          const params: string[] = [call.query, cursor ? `cursor=${encodeURIComponent(cursor)}` : ''].filter(
            Boolean,
          );
          cursor = (await get(params.join('&'))).nextCursor;
          if (!cursor) break;
        }
      });
      const plans = await explainCall(sql, call);
      const buffers = plans.map((page) => page.reduce((sum, plan) => sum + buffersOf(plan), 0));
      table.push({
        organization: `${tenant.samples.toLocaleString('en')} samples`,
        call: call.label,
        'p50 ms': timing.p50.toFixed(1),
        'p95 ms': timing.p95.toFixed(1),
        'p95 ms/page': (timing.p95 / call.pages).toFixed(1),
        'buffers/page (max)': Math.max(...buffers),
        queries: plans.flat().length,
      });
      const worst = buffers.indexOf(Math.max(...buffers));
      if (buffers[worst]! > heaviest.buffers) {
        heaviest = {
          buffers: buffers[worst]!,
          title: `${call.label} (${tenant.samples} samples, page ${worst + 1})`,
          plans: plans[worst]!,
        };
      }
    }
  }
  await server.close();
  console.log(`\nbench/sample-list: ${label}, ${FIELDS} fields, ${RUNS} runs of each call over HTTP`);
  console.table(table);
  // The page whose queries touch the most buffers: on a loaded machine the slowest by p95 is
  // often a cheap page delayed by other work, whose plan says nothing.
  console.log(`\nEXPLAIN (ANALYZE, BUFFERS) of the page with the most buffers: ${heaviest.title}`);
  for (const [i, plan] of heaviest.plans.entries()) console.log(`-- query ${i + 1}\n${plan}`);
}

async function scenario(
  connection: Connection,
  name: string,
  label: string,
  counts: number[],
  measured: number[],
) {
  const adminUrl = process.env.TEST_DATABASE_URL!;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const sql = createSql(url.toString(), { max: 10 });
  try {
    await migrate(sql);
    const seeding = performance.now();
    const tenants = await seed(sql, counts);
    const total = counts.reduce((sum, n) => sum + n, 0);
    console.log(
      `${label}: seeded ${total} samples in ${counts.length} organizations in ${((performance.now() - seeding) / 1000).toFixed(1)} s`,
    );
    await measure(
      label,
      sql,
      connection,
      measured.map((i) => tenants[i]!),
    );
  } finally {
    await sql.end();
  }
}

async function main() {
  const connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS! });
  try {
    if (SCALE !== '1m')
      await scenario(
        connection,
        'bench_sample_list_100k',
        '100,000 samples in 1 organization',
        [100_000],
        [0],
      );
    if (SCALE === '100k') return;
    const small = Array.from({ length: 49 }, (_, i) => Math.floor(900_000 / 49) + (i < 900_000 % 49 ? 1 : 0));
    await scenario(
      connection,
      'bench_sample_list_1m',
      '1,000,000 samples in 50 organizations',
      [100_000, ...small],
      [0, 1],
    );
  } finally {
    await connection.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
